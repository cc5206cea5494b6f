#!/usr/bin/env python3
"""Drive a Toolshed MCP server with the independent Python `mcp` SDK.

Usage:
  interop_client.py stdio BIN DATADIR [--mode auto|legacy]
  interop_client.py http URL [--mode auto|legacy]

--mode auto (the SDK default) probes `server/discover` and falls back to the
`initialize` handshake; --mode legacy forces the `initialize` handshake.

Checks, in order: connect, tools/list (exactly the four meta-tools), search_tools,
read_tool, run_script (create a table, insert rows, query with a filter), a script
that throws (status "failed"), a destructive script (status "paused") resumed with
"deny" and then one resumed with "approve" (status "completed", table gone), and an
unknown tool name (an error result). Prints one `PASS ...` line and exits 0, or a
`FAIL ...` line naming the step and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

META_TOOLS = {"search_tools", "read_tool", "run_script", "resume"}
TIMEOUT_S = float(os.environ.get("INTEROP_CLIENT_TIMEOUT", "30"))


class Mismatch(Exception):
    pass


def expect(cond: bool, step: str, detail: Any) -> None:
    if not cond:
        raise Mismatch(f"{step}: {detail}")


def text_of(result: Any, step: str) -> str:
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    expect(len(texts) >= 1, step, f"no text content in {result!r}")
    return texts[0]


def json_of(result: Any, step: str) -> Any:
    text = text_of(result, step)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise Mismatch(f"{step}: text content is not JSON ({e}): {text[:300]}") from None


async def call(client: Client, name: str, args: dict[str, Any], step: str) -> Any:
    result = await client.call_tool(name, args)
    expect(not result.is_error, step, f"isError=true: {text_of(result, step)[:300]}")
    return result


async def run_script(client: Client, script: str, step: str) -> dict[str, Any]:
    return await execution(client, "run_script", {"script": script}, step)


async def resume(client: Client, execution_id: str, decision: str, step: str) -> dict[str, Any]:
    return await execution(client, "resume", {"executionId": execution_id, "decision": decision}, step)


async def execution(client: Client, tool: str, args: dict[str, Any], step: str) -> dict[str, Any]:
    """Call run_script or resume; isError must be set exactly when the status is "failed"."""
    result = await client.call_tool(tool, args)
    out = json_of(result, step)
    expect(isinstance(out, dict) and "status" in out, step, f"no status in {out!r}")
    expect(bool(result.is_error) == (out["status"] == "failed"), step, f"isError={result.is_error} with status {out['status']!r}")
    expect(isinstance(out.get("executionId"), str) and out["executionId"], step, f"no executionId in {out!r}")
    return out


async def scenario(client: Client) -> list[str]:
    notes: list[str] = []
    session = client.session
    notes.append(f"protocol={session.protocol_version}")

    # tools/list
    listed = await client.list_tools()
    names = {t.name for t in listed.tools}
    expect(names == META_TOOLS, "tools/list", f"expected exactly {sorted(META_TOOLS)}, got {sorted(names)}")
    for t in listed.tools:
        expect(t.input_schema.get("type") == "object", "tools/list", f"{t.name} inputSchema is not an object schema")
    notes.append("tools/list")

    # search_tools
    step = "search_tools"
    found = json_of(await call(client, "search_tools", {"query": "create a table", "limit": 5, "format": "json"}, step), step)
    expect(isinstance(found.get("total"), int) and found["total"] >= 1, step, f"bad total in {found!r}")
    hits = found.get("hits")
    expect(isinstance(hits, list) and 1 <= len(hits) <= 5, step, f"expected 1..5 hits, got {hits!r}")
    paths = [h.get("path") for h in hits]
    expect("tables.create" in paths, step, f"tables.create not among hits {paths}")
    expect(all(isinstance(h.get("name"), str) and isinstance(h.get("summary"), str) for h in hits), step, hits)
    text = text_of(await call(client, "search_tools", {"query": "create a table", "limit": 5}, step), step)
    expect("matching tools" in text and "tables.create" in text, step, f"unexpected compact answer: {text[:300]}")
    notes.append("search_tools")

    # read_tool
    step = "read_tool"
    text = text_of(await call(client, "read_tool", {"path": "tables.create"}, step), step)
    expect("tables.create" in text and "columns" in text, step, f"unexpected text: {text[:300]}")
    notes.append("read_tool")

    # run_script: create + insert + query
    step = "run_script(create/insert/query)"
    table = "interop_" + uuid.uuid4().hex[:10]
    script = f"""
const t = {json.dumps(table)};
await tools.tables.create({{name: t, columns: [{{name: "title", type: "string"}}, {{name: "n", type: "number"}}]}});
await tools.tables.rows.insert({{table: t, rows: [{{title: "alpha", n: 1}}, {{title: "beta", n: 2}}, {{title: "gamma", n: 3}}]}});
const all = await tools.tables.rows.query({{table: t}});
const some = await tools.tables.rows.query({{table: t, filter: {{column: "n", op: "gte", value: 2}}, sort: [{{column: "n", direction: "desc"}}]}});
return {{all: all.total, titles: some.rows.map(r => r.title), total: some.total}};
"""
    out = await run_script(client, script, step)
    expect(out["status"] == "completed", step, f"status {out.get('status')!r}, error {out.get('error')!r}")
    expect(out.get("result") == {"all": 3, "titles": ["gamma", "beta"], "total": 2}, step, f"result {out.get('result')!r}")
    notes.append("run_script")

    # a script that throws
    step = "run_script(throw)"
    out = await run_script(client, 'throw new Error("interop-boom");', step)
    expect(out["status"] == "failed", step, f"status {out.get('status')!r}")
    expect("interop-boom" in json.dumps(out.get("error")), step, f"error does not carry the message: {out.get('error')!r}")
    notes.append("failed-script")

    # destructive: paused -> deny
    step = "run_script(delete)->deny"
    delete = f"return await tools.tables.delete({{name: {json.dumps(table)}}});"
    out = await run_script(client, delete, step)
    expect(out["status"] == "paused", step, f"status {out.get('status')!r} (expected paused), {out!r}")
    expect("tables.delete" in json.dumps(out.get("pending")), step, f"pending does not name tables.delete: {out.get('pending')!r}")
    denied = await resume(client, out["executionId"], "deny", step)
    expect(denied["status"] == "failed", step, f"status after deny {denied!r}")
    expect("denied" in json.dumps(denied.get("error")), step, f"error does not say denied: {denied.get('error')!r}")
    check = await run_script(client, f"return (await tools.tables.rows.query({{table: {json.dumps(table)}}})).total;", step)
    expect(check["status"] == "completed" and check.get("result") == 3, step, f"table changed after deny: {check!r}")
    notes.append("deny")

    # destructive: paused -> approve
    step = "run_script(delete)->approve"
    out = await run_script(client, delete, step)
    expect(out["status"] == "paused", step, f"status {out.get('status')!r} (expected paused), {out!r}")
    done = await resume(client, out["executionId"], "approve", step)
    expect(done.get("status") == "completed", step, f"status after approve {done!r}")
    expect(done.get("result", {}).get("deleted") == table and done["result"].get("rowsDeleted") == 3, step, f"result {done.get('result')!r}")
    gone = await run_script(client, f"return await tools.tables.rows.query({{table: {json.dumps(table)}}});", step)
    expect(gone["status"] == "failed", step, f"table still queryable after approved delete: {gone!r}")
    notes.append("approve")

    # an unknown tool: an error result or a JSON-RPC error, never a success
    step = "unknown tool"
    try:
        bad = await client.call_tool("no_such_tool", {})
        expect(bad.is_error, step, f"call succeeded: {bad!r}")
    except MCPError:
        pass
    notes.append("unknown-tool")
    return notes


def innermost(e: BaseException) -> BaseException:
    """The first leaf of a (possibly nested) exception group: task groups wrap what was raised."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("transport", choices=["stdio", "http"])
    ap.add_argument("target", nargs="+", help="stdio: BIN DATADIR; http: URL")
    ap.add_argument("--mode", choices=["auto", "legacy"], default="auto")
    a = ap.parse_args()

    if a.transport == "stdio":
        if len(a.target) != 2:
            ap.error("stdio needs BIN DATADIR")
        bin_, data_dir = a.target
        params = StdioServerParameters(command=bin_, args=["--data-dir", data_dir, "serve", "--stdio"], cwd=data_dir)
        # The server's stderr (logs) goes to a file in its data dir, not into our output.
        errlog = open(os.path.join(data_dir, "stdio-server.log"), "w")
        server: Any = stdio_client(params, errlog=errlog)
        label = f"stdio/{a.mode}"
    else:
        if len(a.target) != 1:
            ap.error("http needs URL")
        server = a.target[0]  # a URL string: the SDK's streamable HTTP transport
        label = f"http/{a.mode}"

    try:
        with anyio.fail_after(TIMEOUT_S):
            async with Client(server, mode=a.mode) as client:
                notes = await scenario(client)
    except BaseException as e:  # noqa: BLE001 - report any SDK/transport error as a failure line
        if isinstance(e, KeyboardInterrupt):
            raise
        e = innermost(e)
        if isinstance(e, Mismatch):
            print(f"FAIL python-sdk {label}: {e}")
        elif isinstance(e, TimeoutError):
            print(f"FAIL python-sdk {label}: timed out after {TIMEOUT_S:.0f}s")
        else:
            print(f"FAIL python-sdk {label}: {type(e).__name__}: {e}")
        return 1
    print(f"PASS python-sdk {label}: " + ", ".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
