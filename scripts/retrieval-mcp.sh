#!/usr/bin/env bash
# Retrieval through the gateway's MCP face, as an agent gets it: each set's tools are served by
# upstream MCP servers (scripts/retrieval_mcp.py, one per namespace of the set), imported by
# `toolshed serve` beside its own tools, and every query goes through `search_tools` over
# streamable HTTP with the Python `mcp` SDK. Prints R@5 and R@10 per set (as the retrieval bench
# computes them) and the calls' latency, twice: first pass (every query embedded) and second
# pass (through the query cache).
#
#   scripts/retrieval-mcp.sh DIR [SET...]      # DIR as for the retrieval bench; default all sets
#   RETRIEVAL_SLOWEST=3 scripts/retrieval-mcp.sh DIR SET   # also lists each pass's 3 slowest calls
#   RETRIEVAL_PAUSE_MS=100 scripts/retrieval-mcp.sh DIR SET   # waits 100 ms before each call, as an agent does
#   RETRIEVAL_DUMP=OUT scripts/retrieval-mcp.sh DIR SET   # writes OUT/SET.jsonl: each query's hits
#
# Needs the release binary with semantic search (`cargo build --release -p toolshed --features
# semantic`, or TOOLSHED_BIN), the model (scripts/search-model.sh) and the SDK (scripts/peers.sh,
# $MCP_TOOLS). PORT (default 7790) is the listener's port.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${1:?usage: scripts/retrieval-mcp.sh DIR [SET...]}
shift
if [ $# -eq 0 ]; then
  set -- $(cd "$DIR" && for d in */; do [ -f "$d/tools.jsonl" ] && echo "${d%/}"; done)
fi
PY=${MCP_TOOLS:-/tmp/mcp-tools}/venv/bin/python
BIN=${TOOLSHED_BIN:-$ROOT/target/release/toolshed}
PORT=${PORT:-7790}
[ -x "$PY" ] || { echo "retrieval-mcp: no $PY (run scripts/peers.sh)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "retrieval-mcp: no $BIN (cargo build --release -p toolshed --features semantic)" >&2; exit 1; }
MODEL=$(bash "$ROOT/scripts/search-model.sh")
WORK=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT

for set in "$@"; do
  data="$WORK/$set"
  mkdir -p "$data"
  "$PY" "$ROOT/scripts/retrieval_mcp.py" config "$DIR/$set" "$PY" >"$data/toolshed.toml"
  TOOLSHED_SEARCH__MODEL="$MODEL" "$BIN" --config "$data/toolshed.toml" --data-dir "$data" \
    serve --http "127.0.0.1:$PORT" >"$data/log" 2>&1 &
  PID=$!
  # Listening comes after the sources are loaded; then the tools' vectors are computed, and
  # /healthz says "search": "embedding" until they are done ("lexical" if that failed).
  search=
  for _ in $(seq 1 900); do
    health=$(curl -sf "http://127.0.0.1:$PORT/healthz" || true)
    search=$(printf '%s' "$health" | sed -n 's/.*"search":"\([a-z]*\)".*/\1/p')
    [ -n "$search" ] && [ "$search" != embedding ] && break
    kill -0 "$PID" 2>/dev/null || { cat "$data/log" >&2; exit 1; }
    sleep 1
  done
  [ "$search" = hybrid ] || { echo "retrieval-mcp: $set: search is '$search', not hybrid" >&2; cat "$data/log" >&2; exit 1; }
  for pass in first cached; do
    printf '%-7s ' "$pass"
    "$PY" "$ROOT/scripts/retrieval_mcp.py" measure "http://127.0.0.1:$PORT/mcp" "$DIR/$set"
  done
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  PID=
done
