#!/usr/bin/env python3
"""Call a Toolshed tool that pauses for the caller's own grant, with the Python `mcp` SDK
answering Toolshed's URL-mode elicitation.

Usage:
  url_elicitation_client.py MCP_URL BEARER TOOL LOGIN

The SDK connects with BEARER (an OAuth token of the user) and advertises elicitation; it calls
TOOL (with no arguments). Toolshed elicits in `url` mode with the link of the connection; the
callback opens it like a browser (scripts/oauth_client.py's Browser: the provider's login as
LOGIN and its consent page) until the provider redirects back to Toolshed, follows that
redirect (the grant is stored and the paused call continues), and accepts. Prints one JSON line
{"result": <the tool's structured or text result>, "elicited": [{"mode", "url"}]} and exits 0,
or `FAIL ...` and exits 1.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oauth_client import Browser  # noqa: E402

TIMEOUT_S = float(os.environ.get("INTEROP_CLIENT_TIMEOUT", "60"))


async def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    url, bearer, tool, login = sys.argv[1:]
    callback = url.rsplit("/mcp", 1)[0] + "/connect/callback"
    elicited: list[dict] = []

    async def on_elicit(context, params: types.ElicitRequestParams):
        mode = getattr(params, "mode", "form")
        elicited.append({"mode": mode, "url": getattr(params, "url", None)})
        if mode != "url":
            return types.ElicitResult(action="decline")
        browser = Browser(login, redirect=callback)
        await browser.redirect(params.url)
        back = await browser.follow()
        async with httpx2.AsyncClient() as http:
            answer = await http.get(back)
        if answer.status_code != 200:
            raise RuntimeError(f"the callback answered {answer.status_code}: {answer.text[:300]}")
        return types.ElicitResult(action="accept")

    try:
        with anyio.fail_after(TIMEOUT_S):
            headers = {"Authorization": f"Bearer {bearer}"}
            async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http:
                transport = streamable_http_client(url, http_client=http)
                # A session (`initialize`): the server asks the client during the call.
                async with Client(transport, mode="legacy", elicitation_callback=on_elicit) as client:
                    r = await client.call_tool(tool, {})
    except Exception as e:  # noqa: BLE001 - any failure is reported as one line
        print(f"FAIL {type(e).__name__}: {e}")
        return 1
    if r.is_error:
        print(f"FAIL the tool answered an error: {r}")
        return 1
    result = r.structured_content
    if result is None:
        text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
        try:
            result = json.loads(text)
        except ValueError:
            result = text
    print(json.dumps({"result": result, "elicited": elicited}))
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
