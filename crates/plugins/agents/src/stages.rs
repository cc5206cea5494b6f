//! The staged check every write and patch of a definition goes through, in order: `parse` (the
//! JSON text), `patch` (RFC 6902 operations against the current version), `schema` (every
//! violation, each with `path`, `message`, `expected`, `received`), `references` (what the
//! schema cannot see: credentials, custom tools, workflows, agents and cycles between them). The
//! first failing stage answers `{ok: false, stage, errors}` and nothing is stored.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{json, Value};
use toolshed_core::{CompiledSchema, Pattern};

use crate::schema::validation_schema;

/// Most errors one answer lists.
pub const MAX_ERRORS: usize = 50;
/// Largest definition text accepted, in bytes.
pub const MAX_CONFIG_BYTES: usize = 256 * 1024;

/// A failed stage: the answer `{ok: false, stage, errors}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    pub ok: bool,
    pub stage: &'static str,
    pub errors: Vec<Value>,
}

impl Failure {
    fn new(stage: &'static str, errors: Vec<Value>) -> Self {
        Self {
            ok: false,
            stage,
            errors,
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// One line for error messages.
    pub fn summary(&self) -> String {
        let first = self
            .errors
            .first()
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("");
        format!(
            "the definition failed the {} stage with {} error(s): {first}",
            self.stage,
            self.errors.len()
        )
    }
}

/// `parse`: JSON text (or an already parsed value) into a document.
pub fn parse(input: &Value) -> Result<Value, Failure> {
    let Some(text) = input.as_str() else {
        return Ok(input.clone());
    };
    if text.len() > MAX_CONFIG_BYTES {
        return Err(Failure::new(
            "parse",
            vec![
                json!({"message": format!("the text is {} bytes; at most {MAX_CONFIG_BYTES} are accepted", text.len()), "line": 1, "column": 1}),
            ],
        ));
    }
    serde_json::from_str(text).map_err(|e| {
        Failure::new(
            "parse",
            vec![json!({"message": e.to_string(), "line": e.line(), "column": e.column()})],
        )
    })
}

/// `patch`: applies RFC 6902 operations (JSON text or an array) to `current`.
pub fn patch(current: &Value, ops: &Value) -> Result<Value, Failure> {
    let ops = parse(ops)?;
    let Some(list) = ops.as_array() else {
        return Err(Failure::new(
            "patch",
            vec![
                json!({"op": null, "path": "", "message": "a patch is an array of operations like {\"op\": \"replace\", \"path\": \"/description\", \"value\": \"...\"}"}),
            ],
        ));
    };
    let mut operations = Vec::with_capacity(list.len());
    for (i, op) in list.iter().enumerate() {
        match serde_json::from_value::<json_patch::PatchOperation>(op.clone()) {
            Ok(o) => operations.push(o),
            Err(e) => {
                return Err(Failure::new(
                    "patch",
                    vec![
                        json!({"op": i, "path": op.get("path").cloned().unwrap_or(Value::Null), "message": format!("not a valid operation: {e}")}),
                    ],
                ))
            }
        }
    }
    let mut doc = current.clone();
    json_patch::patch(&mut doc, &operations).map_err(|e| {
        let message = match e.kind {
            json_patch::PatchErrorKind::TestFailed => {
                "the `test` operation failed: the value there is different".to_string()
            }
            json_patch::PatchErrorKind::InvalidPointer => {
                "the path does not exist (or the index is out of range)".to_string()
            }
            other => other.to_string(),
        };
        Failure::new(
            "patch",
            vec![json!({"op": e.operation, "path": e.path.to_string(), "message": message})],
        )
    })?;
    Ok(doc)
}

/// `schema`: every violation of the definition schema.
pub fn schema(doc: &Value) -> Result<(), Failure> {
    let s = validation_schema();
    let compiled = CompiledSchema::compile(s).map_err(|e| {
        Failure::new(
            "schema",
            vec![json!({"path": "", "message": e.to_string()})],
        )
    })?;
    if compiled.is_valid(doc) {
        return Ok(());
    }
    let errors = compiled
        .explain(s, doc, MAX_ERRORS)
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
        .collect();
    Err(Failure::new("schema", errors))
}

/// What the references stage checks a definition against.
pub struct World<'a> {
    /// Configured model credentials.
    pub credentials: &'a BTreeSet<String>,
    /// Paths of the tools the writer may see.
    pub visible: &'a [String],
    /// Workflow ids that exist, or `None` when workflows cannot be listed (no n8n).
    pub workflows: Option<&'a BTreeSet<String>>,
    /// The other stored definitions' agent tools: name → agents it uses.
    pub agents: &'a BTreeMap<String, Vec<String>>,
}

/// `references`: errors for what does not exist or would loop; warnings for catalog patterns
/// that match no tool. `Ok` carries the warnings.
pub fn references(doc: &Value, world: &World<'_>) -> Result<Vec<Value>, Failure> {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let name = doc["name"].as_str().unwrap_or_default();
    let credential = doc["credential"].as_str().unwrap_or_default();
    if !world.credentials.contains(credential) {
        let known: Vec<&str> = world.credentials.iter().map(String::as_str).collect();
        errors.push(json!({
            "path": "/credential",
            "message": format!("no model credential '{credential}' is configured; configured: {}", if known.is_empty() { "none ([models.<id>] in toolshed.toml)".to_string() } else { known.join(", ") }),
        }));
    }
    let tools = doc["tools"].as_array().cloned().unwrap_or_default();
    for (i, t) in tools.iter().enumerate() {
        let at = |field: &str| format!("/tools/{i}/{field}");
        match t["type"].as_str().unwrap_or_default() {
            "catalog" => {
                let text = t["pattern"].as_str().unwrap_or_default();
                match Pattern::parse(text) {
                    Err(e) => errors.push(json!({"path": at("pattern"), "message": e.to_string()})),
                    Ok(p) if !world.visible.iter().any(|v| p.matches(v)) => warnings.push(json!({
                        "path": at("pattern"),
                        "message": format!("'{text}' matches no tool you can see now"),
                    })),
                    Ok(_) => {}
                }
            }
            "custom" => {
                let id = t["id"].as_str().unwrap_or_default();
                let path = format!("custom.{id}");
                if !world.visible.contains(&path) {
                    errors.push(json!({"path": at("id"), "message": format!("no custom tool '{id}' exists ({path})")}));
                }
            }
            "workflow" => {
                let id = t["workflow"].as_str().unwrap_or_default();
                match world.workflows {
                    None => errors.push(json!({"path": at("workflow"), "message": format!("workflow '{id}' cannot be checked: no n8n instance is configured (or its workflows are outside your view)")})),
                    Some(known) if !known.contains(id) => errors.push(json!({"path": at("workflow"), "message": format!("no n8n workflow '{id}' exists")})),
                    Some(_) => {}
                }
            }
            "agent" => {
                let other = t["agent"].as_str().unwrap_or_default();
                if other != name && !world.agents.contains_key(other) {
                    errors.push(json!({"path": at("agent"), "message": format!("no agent '{other}' exists")}));
                }
            }
            _ => {}
        }
    }
    if let Some(cycle) = cycle_through(name, &agent_refs(doc), world.agents) {
        errors.push(json!({
            "path": "/tools",
            "message": format!("agents refer to each other in a cycle: {}", cycle.join(" → ")),
        }));
    }
    if errors.is_empty() {
        Ok(warnings)
    } else {
        Err(Failure::new("references", errors))
    }
}

/// The agents a definition uses as tools.
pub fn agent_refs(doc: &Value) -> Vec<String> {
    doc["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "agent")
        .filter_map(|t| t["agent"].as_str().map(str::to_string))
        .collect()
}

/// A path from `name` back to itself through agent tools, with `name`'s own edges replaced by
/// `uses`.
fn cycle_through(
    name: &str,
    uses: &[String],
    others: &BTreeMap<String, Vec<String>>,
) -> Option<Vec<String>> {
    let edges = |n: &str| -> Vec<String> {
        if n == name {
            uses.to_vec()
        } else {
            others.get(n).cloned().unwrap_or_default()
        }
    };
    let mut stack: Vec<(String, Vec<String>)> = vec![(name.to_string(), vec![name.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((node, path)) = stack.pop() {
        for next in edges(&node) {
            let mut p = path.clone();
            p.push(next.clone());
            if next == name {
                return Some(p);
            }
            if seen.insert(next.clone()) {
                stack.push((next, p));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        json!({"name": "a", "model": "openai/gpt-4.1-mini", "credential": "main", "instructions": "x"})
    }

    #[test]
    fn parse_errors_carry_line_and_column() {
        let f = parse(&json!("{\n  \"name\": \"a\",\n  oops\n}")).unwrap_err();
        assert_eq!(f.stage, "parse");
        assert_eq!(f.errors[0]["line"], 3);
        assert_eq!(f.errors[0]["column"], 3);
        assert_eq!(parse(&json!({"a": 1})).unwrap(), json!({"a": 1}));
    }

    #[test]
    fn patch_errors_name_the_operation() {
        let d = doc();
        let f = patch(&d, &json!([{"op": "test", "path": "/name", "value": "b"}])).unwrap_err();
        assert_eq!((f.stage, f.errors[0]["op"].clone()), ("patch", json!(0)));
        assert!(f.errors[0]["message"].as_str().unwrap().contains("test"));
        let f = patch(
            &d,
            &json!([{"op": "replace", "path": "/name", "value": "b"}, {"op": "remove", "path": "/nope"}]),
        )
        .unwrap_err();
        assert_eq!(f.errors[0]["op"], 1);
        assert_eq!(f.errors[0]["path"], "/nope");
        let f = patch(&d, &json!([{"op": "frobnicate", "path": "/x"}])).unwrap_err();
        assert_eq!(f.errors[0]["op"], 0);
        let mut with_tools = d.clone();
        with_tools["tools"] = json!([]);
        let out = patch(
            &with_tools,
            &json!("[{\"op\": \"add\", \"path\": \"/tools/-\", \"value\": {\"type\": \"catalog\", \"pattern\": \"t.*\"}}]"),
        )
        .unwrap();
        assert_eq!(out["tools"][0]["pattern"], "t.*");
    }

    #[test]
    fn references_and_cycles() {
        let creds: BTreeSet<String> = ["main".to_string()].into();
        let visible = vec!["tables.rows.query".to_string(), "custom.sum".to_string()];
        let mut agents = BTreeMap::new();
        agents.insert("b".to_string(), vec!["c".to_string()]);
        agents.insert("c".to_string(), vec!["a".to_string()]);
        let world = World {
            credentials: &creds,
            visible: &visible,
            workflows: None,
            agents: &agents,
        };
        let mut d = doc();
        d["tools"] =
            json!([{"type": "catalog", "pattern": "github.**"}, {"type": "custom", "id": "sum"}]);
        let warnings = references(&d, &world).unwrap();
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0]["path"], "/tools/0/pattern");
        d["credential"] = json!("other");
        d["tools"] = json!([{"type": "agent", "agent": "b"}, {"type": "custom", "id": "nope"}, {"type": "workflow", "workflow": "w1"}]);
        let f = references(&d, &world).unwrap_err();
        let paths: Vec<&str> = f
            .errors
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
            ["/credential", "/tools/1/id", "/tools/2/workflow", "/tools"]
        );
        assert!(f.errors[3]["message"]
            .as_str()
            .unwrap()
            .contains("a → b → c → a"));
    }
}
