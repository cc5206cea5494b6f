#!/usr/bin/env bash
# Writes the gateway's own tools (agents.*, tables.*, servers.*, custom.*, web.fetch, …: what
# every catalog holds beside its sources) as a retrieval benchmark `tools.jsonl`, so the bench
# ranks a set as the MCP face serves it:
#
#   scripts/gateway-tools.sh OUT.jsonl
#   cargo bench -p toolshed-search --features semantic --bench retrieval -- DIR --extra-tools OUT.jsonl
#
# The tools come from `toolshed export --format mcp` on an empty data directory (the binary:
# TOOLSHED_BIN, else target/release/toolshed, else target/debug/toolshed).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:?usage: scripts/gateway-tools.sh OUT.jsonl}
BIN=${TOOLSHED_BIN:-}
for candidate in "$ROOT/target/release/toolshed" "$ROOT/target/debug/toolshed"; do
  [ -z "$BIN" ] && [ -x "$candidate" ] && BIN=$candidate
done
[ -n "$BIN" ] || { echo "gateway-tools: no toolshed binary (cargo build -p toolshed, or TOOLSHED_BIN)" >&2; exit 1; }
DATA=$(mktemp -d)
trap 'rm -rf "$DATA"' EXIT
"$BIN" --data-dir "$DATA" export --format mcp 2>"$DATA/log" >"$DATA/tools.json" ||
  { cat "$DATA/log" >&2; echo "gateway-tools: export failed" >&2; exit 1; }
python3 -c '
import json, sys
for tool in json.load(sys.stdin):
    path = tool["name"].replace("__", ".")
    print(json.dumps({
        "id": path,
        "name": tool.get("title") or path,
        "description": tool.get("description", ""),
        "input_schema": tool.get("inputSchema", {}),
    }))
' <"$DATA/tools.json" >"$OUT"
echo "gateway-tools: $(wc -l <"$OUT") tools written to $OUT" >&2
