#!/usr/bin/env python3
"""Retrieval through the gateway's MCP face, for scripts/retrieval-mcp.sh.

  retrieval_mcp.py config SETDIR PYTHON     print a toolshed.toml: one upstream MCP source per
                                            namespace of the set (ids `ns::tool`), or one named
                                            `bench`, each served by `PYTHON retrieval_mcp.py serve`
  retrieval_mcp.py serve SETDIR NS         a stdio MCP server listing the set's tools of one
                                            namespace (JSON-RPC by hand); a call answers "ok"
  retrieval_mcp.py measure URL SETDIR       every query of the set through `search_tools` (limit
                                            10) over streamable HTTP: R@5 and R@10 as the
                                            retrieval bench computes them, and the calls' latency

A set is in the retrieval benchmark's layout (tools.jsonl, queries.jsonl, qrels.tsv), read with
the variants `toolshed_testing::retrieval_set` accepts: a schema under `input_schema`,
`inputSchema` or `parameters` (BFCL's `"dict"` read as `"object"`), a tool's `name` for a missing
`id`, OpenAI's `{"type": "function", "function": {...}}`, a query's `text` or `query`, judgements with or without a header, as `query tool`, `query
tool relevance` or TREC's `query 0 tool relevance`. A tool's MCP name is its id (after the namespace) as a path segment, so that the path the gateway gives it
is known here; its title is the row's `name`, its description and input schema the row's own.
Every tool is read-only. A set that lists one id twice gets both tools (the second's segment
suffixed), and a ranking is judged by ids: either tool counts as that id, each id once.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from pathlib import Path


def segment(text: str) -> str:
    """snake_case, lower case, [a-z0-9_]: a path segment the gateway keeps as it is."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", text)
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "x"


def definition(row: dict) -> dict:
    """The tool's definition: the row, or OpenAI's `function` inside it."""
    return row["function"] if isinstance(row.get("function"), dict) else row


def tool_id(row: dict) -> str:
    return str(row.get("id") or definition(row).get("name") or "")


def tool_schema(row: dict) -> dict:
    """The row's input schema wherever it keeps it, `"dict"` read as `"object"` at every depth."""
    row = definition(row)
    schema = next((row[k] for k in ("input_schema", "inputSchema", "parameters") if isinstance(row.get(k), dict)), None)

    def fix(v):
        if isinstance(v, dict):
            return {k: ("object" if k == "type" and x == "dict" else fix(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    schema = fix(schema) if schema else None
    if not isinstance(schema, dict) or schema.get("type") != "object":
        schema = {"type": "object", "properties": (schema or {}).get("properties") or {}}
    return schema


def qrels(setdir: str) -> dict[str, set[str]]:
    """Query id → its relevant tool ids (relevance above 0)."""
    relevant: dict[str, set[str]] = {}
    seen = False
    for n, line in enumerate((Path(setdir) / "qrels.tsv").read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        cols = [c.strip() for c in line.split("\t")] if "\t" in line else line.split()
        if len(cols) == 2:
            (q, t), rel = cols, "1"
            names = {"query", "query_id", "queryid", "qid", "tool", "tool_id", "doc_id", "corpus_id"}
            if n == 0 and all(c.lower().replace("-", "_") in names for c in cols):
                continue
        elif len(cols) == 3:
            q, t, rel = cols
        elif len(cols) == 4:
            q, _, t, rel = cols
        else:
            sys.exit(f"qrels.tsv line {n + 1}: expected query, tool and relevance, found {len(cols)} columns")
        try:
            value = float(rel)
        except ValueError:
            if not seen:
                continue  # the header
            sys.exit(f"qrels.tsv line {n + 1}: the relevance {rel!r} is not a number")
        seen = True
        if value > 0:
            relevant.setdefault(q, set()).add(t)
    return relevant


def catalog(setdir: str) -> dict[str, list[tuple[str, dict]]]:
    """Namespace → [(tool segment, row)], every segment unique within its namespace."""
    spaces: dict[str, list[tuple[str, dict]]] = {}
    names: dict[str, str] = {}
    taken: dict[str, set[str]] = {}
    for line in open(Path(setdir) / "tools.jsonl", encoding="utf-8"):
        if not line.strip():
            continue
        row = json.loads(line)
        prefix, sep, local = tool_id(row).partition("::")
        if not sep:
            prefix, local = "", tool_id(row)
        if prefix not in names:
            ns = segment(prefix) if prefix else "bench"
            ns = f"n_{ns}" if ns[0].isdigit() else ns
            while ns in names.values():
                ns += "_2"
            names[prefix] = ns
        ns = names[prefix]
        base = seg = segment(local)
        n = 2
        while seg in taken.setdefault(ns, set()):
            seg, n = f"{base}_{n}", n + 1
        taken[ns].add(seg)
        spaces.setdefault(ns, []).append((seg, row))
    return spaces


def owners(setdir: str) -> dict[str, str]:
    """The gateway's path → its tool's id. A set may list one id twice (one function defined
    twice): both tools are served, and either counts as that id, as the retrieval bench judges."""
    return {f"{ns}.{seg}": tool_id(row) for ns, tools in catalog(setdir).items() for seg, row in tools}


def config(setdir: str, python: str) -> None:
    me = str(Path(__file__).resolve())
    for ns in catalog(setdir):
        print("[[sources]]")
        print('kind = "mcp"')
        print(f"name = {json.dumps(ns)}")
        print(f"command = {json.dumps(python)}")
        print(f"args = {json.dumps([me, 'serve', str(Path(setdir).resolve()), ns])}\n")


def serve(setdir: str, ns: str) -> None:
    """The MCP server side by hand (newline-delimited JSON-RPC on stdio): it starts in
    milliseconds, so a set of many namespaces can start all its upstreams at once."""
    tools = []
    for seg, row in catalog(setdir)[ns]:
        description = definition(row).get("description") or ""
        tool = {"name": seg, "description": description, "inputSchema": tool_schema(row)}
        tool["annotations"] = {"readOnlyHint": True}
        if definition(row).get("name"):
            tool["title"] = definition(row)["name"]
        tools.append(tool)
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if "id" not in msg or "method" not in msg:
            continue  # a notification or a response
        method, params = msg["method"], msg.get("params") or {}
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "retrieval-catalog", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "ok"}]}
        elif method == "ping":
            result = {}
        else:
            reply = {"code": -32601, "message": f"method not found: {method}"}
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": reply}), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)


def measure(url: str, setdir: str) -> None:
    import anyio
    from mcp import Client

    owner = owners(setdir)
    ids = set(owner.values())
    relevant: dict[str, set[str]] = {}
    for q, tools in qrels(setdir).items():
        known = {t for t in tools if t in ids}
        if known:
            relevant[q] = known
    queries = [json.loads(l) for l in open(Path(setdir) / "queries.jsonl", encoding="utf-8") if l.strip()]
    for q in queries:
        q["text"] = q.get("text") or q.get("query") or ""
    queries = [q for q in queries if str(q.get("id")) in relevant]

    timed: list[tuple[float, str, int]] = []
    # RETRIEVAL_PAUSE_MS=N waits N ms before each call, as an agent does between its searches.
    pause = float(os.environ.get("RETRIEVAL_PAUSE_MS", "0")) / 1000
    # RETRIEVAL_DUMP=DIR writes DIR/SET.jsonl: each query's id, R@5, and its hits' and relevant
    # tools' ids (as the retrieval bench's dump has them).
    dump = None
    if os.environ.get("RETRIEVAL_DUMP"):
        dump = open(Path(os.environ["RETRIEVAL_DUMP"]) / f"{Path(setdir).name}.jsonl", "w", encoding="utf-8")

    async def run() -> tuple[list[float], list[float], list[float]]:
        r5, r10, ms = [], [], []
        async with Client(url) as client:
            for q in queries:
                if pause:
                    await anyio.sleep(pause)
                start = time.perf_counter()
                result = await client.call_tool("search_tools", {"query": q["text"], "limit": 10})
                ms.append((time.perf_counter() - start) * 1000)
                timed.append((ms[-1], q["id"], len(q["text"])))
                text = next(c.text for c in result.content if c.type == "text")
                if result.is_error:
                    sys.exit(f"search_tools failed for {q['id']}: {text[:300]}")
                # The compact answer: a summary line, then `path — summary` per hit.
                hits = [l.split(" — ")[0].strip() for l in text.splitlines()[1:] if l.strip()]
                want = relevant[str(q["id"])]
                # Judged by ids, each id once.
                found = list(dict.fromkeys(owner.get(h, h) for h in hits))
                r5.append(len(want & set(found[:5])) / len(want))
                r10.append(len(want & set(found[:10])) / len(want))
                if dump:
                    row = {"id": q["id"], "r5": r5[-1], "hits": found[:10], "relevant": sorted(want)}
                    dump.write(json.dumps(row) + "\n")
        return r5, r10, ms

    r5, r10, ms = anyio.run(run)
    if dump:
        dump.close()
    ms.sort()
    pct = lambda f: ms[min(len(ms) - 1, int(f * len(ms)))]  # noqa: E731
    print(
        f"{Path(setdir).name:<18} {len(r5):>6} queries  R@5 {100 * statistics.mean(r5):5.1f}  "
        f"R@10 {100 * statistics.mean(r10):5.1f}  call p50 {pct(0.5):6.2f} ms  p99 {pct(0.99):6.2f} ms"
    )
    # RETRIEVAL_SLOWEST=N also lists the N slowest calls: time, query id, request length.
    for took, qid, length in sorted(timed, reverse=True)[: int(os.environ.get("RETRIEVAL_SLOWEST", "0"))]:
        print(f"        {took:8.2f} ms  {qid}  ({length} bytes)")


if __name__ == "__main__":
    cmd, args = sys.argv[1] if len(sys.argv) > 1 else "", sys.argv[2:]
    if cmd == "config" and len(args) == 2:
        config(*args)
    elif cmd == "serve" and len(args) == 2:
        serve(*args)
    elif cmd == "measure" and len(args) == 2:
        measure(*args)
    else:
        sys.exit(__doc__)
