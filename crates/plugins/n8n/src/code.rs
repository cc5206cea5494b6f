//! The workflow text: a compact, line-based form of an n8n workflow that a model reads and
//! edits with few tokens (`n8n.workflows.get_as_code`, `n8n.workflows.build`).
//!
//! ```text
//! workflow "Order intake"
//! settings {"executionOrder":"v1"}
//! node "Webhook" webhook@2 [0,0]
//!   parameters {"httpMethod":"POST","path":"orders"}
//! node "Check" if@2.2 [220,0]
//!   parameters {"conditions":{...}}
//! node "Model" lc.lmChatOpenAi@1.2 [440,200]
//!   credentials {"openAiApi":"12"}
//! "Webhook" -> "Check"
//! "Check"[1] -> "Reject"
//! "Model" -ai_languageModel-> "Agent"
//! ```
//!
//! - One `node` line per node: its name (a JSON string), its type (`n8n-nodes-base.` left out,
//!   `@n8n/n8n-nodes-langchain.` written `lc.`), `@` its `typeVersion`, and its position. The
//!   node's other fields follow on indented lines, one `key <JSON>` each (`parameters`,
//!   `credentials` as `{type: id}`, `disabled`, `onError`, `notes`, ...).
//! - One line per connection: `source[output] -type-> target[input]`, where `[0]` and the
//!   `main` type are left out.
//! - Node ids and webhook ids are not shown: a build keeps them for nodes of the same name.
//!   Credential names are not shown: a build fills them in from the credential's id.
//! - `#` starts a comment line; blank lines are ignored.
//!
//! [`parse`] reads the text back; [`comparable`] is the equality the round trip keeps
//! (everything above, with empty connection lists dropped). Pure functions, no I/O.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

/// The type prefix left out of the text.
const BASE: &str = "n8n-nodes-base.";
/// The LangChain package, written `lc.`.
const LANGCHAIN: &str = "@n8n/n8n-nodes-langchain.";
/// Node fields that are written in the `node` line or never shown.
const HEADER_KEYS: &[&str] = &["name", "type", "typeVersion", "position", "id", "webhookId"];
/// Largest text accepted.
pub const MAX_CODE_BYTES: usize = 1024 * 1024;

/// What is wrong with a text, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    /// A line that cannot be read.
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    /// The text as a whole (e.g. no `workflow` line, a duplicate node name).
    #[error("{0}")]
    Text(String),
    /// A patch that cannot be applied.
    #[error("patch {index}: {message}")]
    Patch { index: usize, message: String },
}

/// The text of a workflow (`name`, `nodes`, `connections`, `settings`, as n8n answers it).
pub fn to_code(w: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "workflow {}", json!(w["name"].as_str().unwrap_or("")));
    if let Some(d) = w["description"].as_str().filter(|d| !d.is_empty()) {
        let _ = writeln!(out, "description {}", json!(d));
    }
    if w["settings"].as_object().is_some_and(|s| !s.is_empty()) {
        let _ = writeln!(out, "settings {}", w["settings"]);
    }
    for n in w["nodes"].as_array().into_iter().flatten() {
        write_node(&mut out, n);
    }
    for (source, types) in w["connections"].as_object().into_iter().flatten() {
        for (ty, outputs) in types.as_object().into_iter().flatten() {
            for (o, targets) in outputs.as_array().into_iter().flatten().enumerate() {
                for t in targets.as_array().into_iter().flatten() {
                    write_connection(&mut out, source, ty, o, t);
                }
            }
        }
    }
    out
}

fn write_node(out: &mut String, n: &Value) {
    let name = json!(n["name"].as_str().unwrap_or(""));
    let ty = short_type(n["type"].as_str().unwrap_or(""));
    let version = n.get("typeVersion").cloned().unwrap_or(json!(1));
    let _ = write!(out, "node {name} {ty}@{version}");
    if let Some(p) = n.get("position").filter(|p| p.is_array()) {
        let _ = write!(out, " {p}");
    }
    out.push('\n');
    for (k, v) in n.as_object().into_iter().flatten() {
        if HEADER_KEYS.contains(&k.as_str()) || v.is_null() {
            continue;
        }
        let v = if k == "credentials" {
            credential_ids(v)
        } else {
            v.clone()
        };
        let _ = writeln!(out, "  {k} {v}");
    }
}

fn write_connection(out: &mut String, source: &str, ty: &str, output: usize, t: &Value) {
    let _ = write!(out, "{}", json!(source));
    if output > 0 {
        let _ = write!(out, "[{output}]");
    }
    let target_ty = t["type"].as_str().unwrap_or(ty);
    match (ty, target_ty) {
        ("main", "main") => out.push_str(" -> "),
        (a, b) if a == b => {
            let _ = write!(out, " -{a}-> ");
        }
        (a, b) => {
            let _ = write!(out, " -{a}/{b}-> ");
        }
    }
    let _ = write!(out, "{}", json!(t["node"].as_str().unwrap_or("")));
    let index = t["index"].as_u64().unwrap_or(0);
    if index > 0 {
        let _ = write!(out, "[{index}]");
    }
    out.push('\n');
}

/// `{type: {id, name}}` as `{type: id}`.
fn credential_ids(v: &Value) -> Value {
    let Some(m) = v.as_object() else {
        return v.clone();
    };
    // A credential referenced by name only (an imported workflow) keeps its name.
    let short = |c: &Value| match c.get("id") {
        Some(Value::String(id)) => Value::String(id.clone()),
        _ => {
            let mut named = c.clone();
            if let Some(o) = named.as_object_mut() {
                o.remove("id");
            }
            named
        }
    };
    Value::Object(m.iter().map(|(k, c)| (k.clone(), short(c))).collect())
}

fn short_type(t: &str) -> String {
    if let Some(s) = t.strip_prefix(BASE) {
        s.to_string()
    } else if let Some(s) = t.strip_prefix(LANGCHAIN) {
        format!("lc.{s}")
    } else {
        t.to_string()
    }
}

fn full_type(t: &str) -> String {
    if let Some(s) = t.strip_prefix("lc.") {
        format!("{LANGCHAIN}{s}")
    } else if t.contains('.') {
        t.to_string()
    } else {
        format!("{BASE}{t}")
    }
}

/// Reads a text into `{name, description?, settings, nodes, connections}`. Credentials come back
/// as `{type: {id}}`; node ids, webhook ids and credential names are not set (see
/// [`crate::tools::build`]).
pub fn parse(text: &str) -> Result<Value, CodeError> {
    if text.len() > MAX_CODE_BYTES {
        return Err(CodeError::Text(format!(
            "the text is {} bytes; at most {MAX_CODE_BYTES} are accepted",
            text.len()
        )));
    }
    let mut name: Option<String> = None;
    let mut out = json!({"settings": {}, "nodes": [], "connections": {}});
    let mut nodes: Vec<Map<String, Value>> = Vec::new();
    let mut edges: Vec<(String, String, usize, Value)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |message: String| CodeError::Line { line, message };
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if raw.starts_with(char::is_whitespace) {
            let node = nodes
                .last_mut()
                .ok_or_else(|| err("an indented field line must follow a 'node' line".into()))?;
            let (key, value) = field(trimmed).map_err(err)?;
            if HEADER_KEYS.contains(&key) {
                return Err(err(format!(
                    "'{key}' is written in the node line, not as a field"
                )));
            }
            let value = if key == "credentials" {
                credentials_field(&value).map_err(err)?
            } else {
                value
            };
            if node.insert(key.to_string(), value).is_some() {
                return Err(err(format!("the field '{key}' is given twice")));
            }
        } else if let Some(rest) = keyword(trimmed, "workflow") {
            name = Some(json_string(rest).map_err(err)?);
        } else if let Some(rest) = keyword(trimmed, "description") {
            out["description"] = json!(json_string(rest).map_err(err)?);
        } else if let Some(rest) = keyword(trimmed, "settings") {
            let v: Value = serde_json::from_str(rest)
                .map_err(|e| err(format!("settings is not a JSON object: {e}")))?;
            if !v.is_object() {
                return Err(err("settings must be a JSON object".into()));
            }
            out["settings"] = v;
        } else if let Some(rest) = keyword(trimmed, "node") {
            nodes.push(node_line(rest).map_err(err)?);
        } else if trimmed.starts_with('"') {
            edges.push(connection_line(trimmed).map_err(err)?);
        } else {
            return Err(err(format!(
                "expected 'workflow', 'settings', 'node', an indented field or a connection (\"A\" -> \"B\"), got {:?}",
                crate::sanitize::truncate_str(trimmed, 60)
            )));
        }
    }
    let name =
        name.ok_or_else(|| CodeError::Text("the text has no 'workflow \"name\"' line".into()))?;
    out["name"] = json!(name);
    let mut seen = std::collections::BTreeSet::new();
    for n in &nodes {
        let nm = n["name"].as_str().unwrap_or_default();
        if !seen.insert(nm.to_string()) {
            return Err(CodeError::Text(format!("two nodes are named {nm:?}")));
        }
    }
    out["connections"] = connections(edges);
    out["nodes"] = Value::Array(nodes.into_iter().map(Value::Object).collect());
    Ok(out)
}

fn keyword<'a>(line: &'a str, word: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(word)?;
    rest.starts_with(char::is_whitespace).then(|| rest.trim())
}

fn json_string(s: &str) -> Result<String, String> {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::String(v)) => Ok(v),
        _ => Err(format!(
            "expected a JSON string (in double quotes), got {s:?}"
        )),
    }
}

/// Reads a JSON string at the start of `s`; answers it and the rest.
fn leading_string(s: &str) -> Result<(String, &str), String> {
    let mut it = serde_json::Deserializer::from_str(s).into_iter::<Value>();
    match it.next() {
        Some(Ok(Value::String(v))) => Ok((v, &s[it.byte_offset()..])),
        _ => Err(format!(
            "expected a node name in double quotes at {:?}",
            crate::sanitize::truncate_str(s, 40)
        )),
    }
}

fn field(s: &str) -> Result<(&str, Value), String> {
    let (key, rest) = s
        .split_once(char::is_whitespace)
        .ok_or_else(|| format!("the field {s:?} has no value (write: key <JSON>)"))?;
    let value = serde_json::from_str(rest.trim())
        .map_err(|e| format!("the value of '{key}' is not JSON: {e}"))?;
    Ok((key, value))
}

fn credentials_field(v: &Value) -> Result<Value, String> {
    let m = v
        .as_object()
        .ok_or("credentials must be an object {credentialType: id}")?;
    let mut out = Map::new();
    for (k, c) in m {
        let id = match c {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Object(o) => match (o.get("id"), o.get("name")) {
                (Some(Value::String(s)), _) => s.clone(),
                // Named only: n8n resolves it by name.
                (_, Some(Value::String(name))) => {
                    out.insert(k.clone(), json!({"name": name}));
                    continue;
                }
                _ => return Err(format!("the credential '{k}' has neither id nor name")),
            },
            _ => return Err(format!("the credential '{k}' must be its id")),
        };
        out.insert(k.clone(), json!({"id": id}));
    }
    Ok(Value::Object(out))
}

fn node_line(rest: &str) -> Result<Map<String, Value>, String> {
    let (name, rest) = leading_string(rest)?;
    if name.trim().is_empty() {
        return Err("a node name is empty".into());
    }
    let rest = rest.trim_start();
    let (ty_ver, position) = match rest.split_once(char::is_whitespace) {
        Some((a, b)) => (a, b.trim()),
        None => (rest, ""),
    };
    let (ty, ver) = ty_ver
        .rsplit_once('@')
        .ok_or_else(|| format!("node {name:?}: expected type@version, got {ty_ver:?}"))?;
    if ty.is_empty() {
        return Err(format!("node {name:?} has no type"));
    }
    let version: Value = serde_json::from_str(ver)
        .ok()
        .filter(Value::is_number)
        .ok_or_else(|| format!("node {name:?}: the version {ver:?} is not a number"))?;
    let mut node = Map::new();
    node.insert("name".into(), json!(name));
    node.insert("type".into(), json!(full_type(ty)));
    node.insert("typeVersion".into(), version);
    if !position.is_empty() {
        let p: Value = serde_json::from_str(position)
            .ok()
            .filter(|p: &Value| {
                p.as_array()
                    .is_some_and(|a| a.len() == 2 && a.iter().all(Value::is_number))
            })
            .ok_or_else(|| {
                format!("node {name:?}: the position must be [x,y], got {position:?}")
            })?;
        node.insert("position".into(), p);
    }
    Ok(node)
}

fn index_suffix(s: &str) -> Result<(usize, &str), String> {
    let Some(rest) = s.strip_prefix('[') else {
        return Ok((0, s));
    };
    let (n, rest) = rest.split_once(']').ok_or("an index '[' is not closed")?;
    let n = n
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n < 1000)
        .ok_or_else(|| format!("the index [{n}] is not a number below 1000"))?;
    Ok((n, rest))
}

fn connection_line(s: &str) -> Result<(String, String, usize, Value), String> {
    let (source, rest) = leading_string(s)?;
    let (output, rest) = index_suffix(rest)?;
    let rest = rest.trim_start();
    let (types, rest) = if let Some(r) = rest.strip_prefix("->") {
        (("main".to_string(), "main".to_string()), r)
    } else if let Some(r) = rest.strip_prefix('-') {
        let (ty, r) = r
            .split_once("->")
            .ok_or("a connection needs '->' (or -type-> for a non-main connection)")?;
        let ty = ty.trim();
        let (a, b) = ty.split_once('/').unwrap_or((ty, ty));
        if a.is_empty() || b.is_empty() || a.contains(char::is_whitespace) {
            return Err(format!("the connection type {ty:?} is not valid"));
        }
        ((a.to_string(), b.to_string()), r)
    } else {
        return Err(format!("expected '->' after {source:?}"));
    };
    let (target, rest) = leading_string(rest.trim_start())?;
    let (input, rest) = index_suffix(rest)?;
    if !rest.trim().is_empty() {
        return Err(format!("unexpected {:?} after the connection", rest.trim()));
    }
    let (ty, target_ty) = types;
    Ok((
        source,
        ty,
        output,
        json!({"node": target, "type": target_ty, "index": input}),
    ))
}

/// n8n's connection map from edges, in the order given.
fn connections(edges: Vec<(String, String, usize, Value)>) -> Value {
    let mut out = Map::new();
    for (source, ty, output, target) in edges {
        let types = out
            .entry(source)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("an object");
        let outputs = types
            .entry(ty)
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .expect("an array");
        while outputs.len() <= output {
            outputs.push(json!([]));
        }
        outputs[output]
            .as_array_mut()
            .expect("an array")
            .push(target);
    }
    Value::Object(out)
}

/// Applies `(old, new)` replacements in order; each `old` must occur exactly once.
pub fn apply_patches(base: &str, patches: &[(String, String)]) -> Result<String, CodeError> {
    let mut text = base.to_string();
    for (i, (old, new)) in patches.iter().enumerate() {
        let err = |message: String| CodeError::Patch { index: i, message };
        if old.is_empty() {
            return Err(err("'old' is empty".into()));
        }
        match text.matches(old.as_str()).count() {
            1 => text = text.replacen(old.as_str(), new, 1),
            0 => {
                return Err(err(format!(
                    "'old' ({:?}) is not in the text; read it again with n8n.workflows.get_as_code",
                    crate::sanitize::truncate_str(old, 80)
                )))
            }
            n => {
                return Err(err(format!(
                    "'old' occurs {n} times; include more of the surrounding text so it is unique"
                )))
            }
        }
        if text.len() > MAX_CODE_BYTES {
            return Err(err(format!("the text would exceed {MAX_CODE_BYTES} bytes")));
        }
    }
    Ok(text)
}

/// What a round trip keeps: name, description, settings, nodes without ids, webhook ids and
/// credential names, and connections without empty lists.
pub fn comparable(w: &Value) -> Value {
    let nodes: Vec<Value> = w["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            let mut m: Map<String, Value> = n
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, v)| !matches!(k.as_str(), "id" | "webhookId") && !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if let Some(c) = m.get("credentials") {
                let ids = credential_ids(c);
                m.insert("credentials".into(), ids);
            }
            Value::Object(m)
        })
        .collect();
    let mut conns = Map::new();
    for (source, types) in w["connections"].as_object().into_iter().flatten() {
        let mut kept = Map::new();
        for (ty, outputs) in types.as_object().into_iter().flatten() {
            let mut outs: Vec<Value> = outputs.as_array().cloned().unwrap_or_default();
            while outs
                .last()
                .is_some_and(|o| o.as_array().is_none_or(Vec::is_empty))
            {
                outs.pop();
            }
            if !outs.is_empty() {
                kept.insert(ty.clone(), Value::Array(outs));
            }
        }
        if !kept.is_empty() {
            conns.insert(source.clone(), Value::Object(kept));
        }
    }
    let mut out = json!({
        "name": w["name"],
        "settings": if w["settings"].is_object() { w["settings"].clone() } else { json!({}) },
        "nodes": nodes,
        "connections": conns,
    });
    if let Some(d) = w["description"].as_str().filter(|d| !d.is_empty()) {
        out["description"] = json!(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        json!({
            "name": "Demo \"one\"",
            "settings": {"executionOrder": "v1"},
            "nodes": [
                {"id": "u1", "name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2,
                 "position": [0, 0], "webhookId": "w1", "parameters": {"path": "x", "httpMethod": "POST"}},
                {"id": "u2", "name": "If [x] -> y", "type": "n8n-nodes-base.if", "typeVersion": 2.2,
                 "position": [220, 0], "parameters": {}, "disabled": true},
                {"id": "u3", "name": "Agent", "type": "@n8n/n8n-nodes-langchain.agent", "typeVersion": 1.7,
                 "position": [440, 0], "parameters": {"text": "=hi\nthere"}},
                {"id": "u4", "name": "Model", "type": "@n8n/n8n-nodes-langchain.lmChatOpenAi", "typeVersion": 1,
                 "position": [440, 200], "parameters": {},
                 "credentials": {"openAiApi": {"id": "12", "name": "OpenAI"}, "slackApi": {"id": null, "name": "Team Slack"}}},
                {"id": "u5", "name": "Community", "type": "n8n-nodes-foo.bar", "typeVersion": 1,
                 "position": [660, 0], "parameters": {}}
            ],
            "connections": {
                "Webhook": {"main": [[{"node": "If [x] -> y", "type": "main", "index": 0}]]},
                "If [x] -> y": {"main": [[], [{"node": "Agent", "type": "main", "index": 0},
                                              {"node": "Community", "type": "main", "index": 1}]]},
                "Model": {"ai_languageModel": [[{"node": "Agent", "type": "ai_languageModel", "index": 0}]]}
            }
        })
    }

    #[test]
    fn the_text_round_trips_to_an_equal_workflow() {
        let w = sample();
        let text = to_code(&w);
        assert!(text.contains("node \"Webhook\" webhook@2 [0,0]"), "{text}");
        assert!(text.contains("lc.agent@1.7"), "{text}");
        assert!(text.contains("n8n-nodes-foo.bar@1"), "{text}");
        assert!(
            text.contains("\"If [x] -> y\"[1] -> \"Community\"[1]"),
            "{text}"
        );
        assert!(
            text.contains("\"Model\" -ai_languageModel-> \"Agent\""),
            "{text}"
        );
        assert!(
            text.contains(
                "credentials {\"openAiApi\":\"12\",\"slackApi\":{\"name\":\"Team Slack\"}}"
            ),
            "{text}"
        );
        assert!(!text.contains("u1") && !text.contains("w1"), "{text}");
        let back = parse(&text).unwrap();
        assert_eq!(comparable(&back), comparable(&w));
        assert_eq!(back["nodes"][1]["typeVersion"], json!(2.2));
        assert_eq!(back["nodes"][0]["typeVersion"], json!(2));
    }

    #[test]
    fn errors_name_the_line_and_what_was_wrong() {
        let e = parse("workflow \"x\"\nnode \"A\" webhook [0,0]\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: node \"A\": expected type@version, got \"webhook\""
        );
        let e = parse("workflow \"x\"\n  parameters {}\n").unwrap_err();
        assert!(
            e.to_string().starts_with("line 2: an indented field"),
            "{e}"
        );
        let e = parse("workflow \"x\"\nnode \"A\" set@3\n  parameters {bad}\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 3: the value of 'parameters' is not JSON"),
            "{e}"
        );
        let e = parse("workflow \"x\"\n\"A\" => \"B\"\n").unwrap_err();
        assert!(e.to_string().contains("line 2: expected '->'"), "{e}");
        let e = parse("node \"A\" set@3\n").unwrap_err();
        assert!(e.to_string().contains("no 'workflow"), "{e}");
        let e = parse("workflow \"x\"\nnode \"A\" set@3\nnode \"A\" set@3\n").unwrap_err();
        assert!(e.to_string().contains("two nodes are named \"A\""), "{e}");
        let e = parse("workflow \"x\"\nnode \"A\" set@3 [1]\n").unwrap_err();
        assert!(e.to_string().contains("position must be [x,y]"), "{e}");
    }

    #[test]
    fn patches_replace_exactly_one_occurrence() {
        let text = "a b a c";
        assert_eq!(
            apply_patches(text, &[("b".into(), "B".into())]).unwrap(),
            "a B a c"
        );
        let e = apply_patches(text, &[("a".into(), "x".into())]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "patch 0: 'old' occurs 2 times; include more of the surrounding text so it is unique"
        );
        let e =
            apply_patches(text, &[("b".into(), "B".into()), ("zz".into(), "".into())]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("patch 1: 'old' (\"zz\") is not in the text"),
            "{e}"
        );
    }
}
