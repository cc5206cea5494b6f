#!/usr/bin/env bash
# The whole test suite: every crate's unit and integration tests, then interoperability with
# MCP peers this project did not write (skipped with a note when they cannot be installed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# A fresh clone gains nothing from incremental artefacts; they would double the target's size.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
df -h . | tail -1 | awk '{print "disk free before the build: " $4}'
cargo test --workspace
cargo build -q -p toolshed
TOOLSHED_BIN="$PWD/target/debug/toolshed" INTEROP_OPTIONAL=1 bash scripts/interop.sh
