#!/usr/bin/env python3
"""Sign in to an OAuth-protected Toolshed with the Python `mcp` SDK's OAuthClientProvider.

Usage:
  oauth_client.py MCP_URL LOGIN

The SDK meets Toolshed's 401, reads its protected-resource metadata (RFC 9728) and the
authorization server's metadata, registers a client dynamically, and runs the authorization-code
flow with PKCE and a resource indicator. The browser step is played over HTTP against the
provider's own login and consent pages (scripts/oidc-provider.mjs enables them): LOGIN signs in
with any password and consents. With the token the SDK initializes an MCP session and lists the
tools. Prints one JSON line {"tools": [...], "registrations": N} and exits 0, or `FAIL ...` and
exits 1.
"""

from __future__ import annotations

import json
import os
import re
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

TIMEOUT_S = float(os.environ.get("INTEROP_CLIENT_TIMEOUT", "60"))
# Each request may take as long as the whole flow may (httpx's own default is 5 s, which a
# loaded machine's provider can exceed); the flow as a whole is bounded by TIMEOUT_S.
REQUEST_TIMEOUT = httpx2.Timeout(TIMEOUT_S)
REDIRECT = "http://127.0.0.1:9/callback"


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None
        self.registrations = 0

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.registrations += 1
        self.client = client_info


class Browser:
    """Follows an authorization URL through the provider's login and consent forms, like a
    person's browser, until the provider redirects to `redirect`."""

    def __init__(self, login: str, redirect: str = REDIRECT) -> None:
        self.login = login
        self.target = redirect
        self.url: str | None = None

    async def redirect(self, url: str) -> None:
        self.url = url

    async def follow(self) -> str:
        """The URL the provider finally redirects to (not opened)."""
        assert self.url, "no authorization URL"
        async with httpx2.AsyncClient(follow_redirects=False, timeout=REQUEST_TIMEOUT) as http:
            response = await http.get(self.url)
            for _ in range(20):
                if response.is_redirect:
                    target = urljoin(str(response.url), response.headers["location"])
                    if target.startswith(self.target):
                        return target
                    try:
                        response = await http.get(target)
                    except httpx2.HTTPError as e:
                        raise RuntimeError(f"following the redirect to {target}: {e}") from e
                    continue
                html = response.text
                action = re.search(r'<form[^>]*action="([^"]+)"', html)
                prompt = re.search(r'name="prompt" value="([^"]+)"', html)
                if not action or not prompt:
                    raise RuntimeError(f"unexpected page {response.status_code}: {html[:300]}")
                form = {"prompt": prompt.group(1)}
                if prompt.group(1) == "login":
                    form.update(login=self.login, password="any")
                response = await http.post(urljoin(str(response.url), action.group(1)), data=form)
        raise RuntimeError(f"the flow did not end at {self.target}")

    async def callback(self) -> AuthorizationCodeResult:
        query = parse_qs(urlparse(await self.follow()).query)
        if "error" in query:
            raise RuntimeError(f"authorization refused: {query}")
        return AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )


def describe(e: BaseException) -> str:
    """An exception as one line; a task group's are described by what they hold."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in e.exceptions)
    return f"{type(e).__name__}: {e}"


async def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    url, login = sys.argv[1], sys.argv[2]
    storage, browser = Memory(), Browser(login)
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="toolshed-oauth-test",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    try:
        with anyio.fail_after(TIMEOUT_S):
            async with httpx2.AsyncClient(auth=provider, timeout=REQUEST_TIMEOUT) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    tools = await client.list_tools()
    except Exception as e:  # noqa: BLE001 - any failure is reported as one line
        print(f"FAIL {describe(e)}")
        return 1
    names = sorted(t.name for t in tools.tools)
    print(json.dumps({"tools": names, "registrations": storage.registrations}))
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
