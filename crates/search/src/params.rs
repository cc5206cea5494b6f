//! Parameters of a tool, read from its JSON Schema for indexing.
//!
//! Walks `properties` at the top level and inside nested objects, array `items`,
//! `allOf`/`anyOf`/`oneOf` branches and local `$ref`s (`#/...`), collecting each
//! property's name and description. Depth and count are capped so that huge or
//! recursive schemas cannot blow up the index.

use std::collections::HashSet;

use serde_json::Value;

use crate::index::ParamDoc;

const MAX_DEPTH: usize = 6;
const MAX_PARAMS: usize = 200;

/// Property names and descriptions of a schema, top-level first, then nested ones.
pub fn param_docs_from_schema(schema: &Value) -> Vec<ParamDoc> {
    let mut out = Vec::new();
    let mut seen_refs = HashSet::new();
    walk(schema, schema, 0, &mut seen_refs, &mut out);
    out
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    let pointer = pointer.replace("~1", "/").replace("~0", "~");
    root.pointer(&pointer)
}

fn walk<'a>(
    root: &'a Value,
    schema: &'a Value,
    depth: usize,
    seen_refs: &mut HashSet<&'a str>,
    out: &mut Vec<ParamDoc>,
) {
    if depth > MAX_DEPTH || out.len() >= MAX_PARAMS {
        return;
    }
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
        if seen_refs.insert(reference) {
            if let Some(target) = resolve(root, reference) {
                walk(root, target, depth + 1, seen_refs, out);
            }
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            if out.len() >= MAX_PARAMS {
                return;
            }
            let description = prop
                .get("description")
                .or_else(|| prop.get("title"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            out.push(ParamDoc {
                name: name.clone(),
                description: description.to_string(),
            });
        }
        for prop in props.values() {
            walk(root, prop, depth + 1, seen_refs, out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = obj.get(key) {
            walk(root, sub, depth + 1, seen_refs, out);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(branches) = obj.get(key).and_then(Value::as_array) {
            for b in branches {
                walk(root, b, depth + 1, seen_refs, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(schema: &Value) -> Vec<String> {
        param_docs_from_schema(schema)
            .into_iter()
            .map(|p| p.name)
            .collect()
    }

    #[test]
    fn top_level_then_nested() {
        let schema = json!({
            "type": "object",
            "properties": {
                "owner": {"type": "string", "description": "Account owner"},
                "filter": {"type": "object", "properties": {"state": {"type": "string"}}},
                "labels": {"type": "array", "items": {"type": "object", "properties": {"color": {}}}}
            }
        });
        assert_eq!(
            names(&schema),
            ["owner", "filter", "labels", "state", "color"]
        );
        assert_eq!(
            param_docs_from_schema(&schema)[0].description,
            "Account owner"
        );
    }

    #[test]
    fn follows_local_refs_once() {
        let schema = json!({
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {
                "label": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
            }}}
        });
        assert_eq!(names(&schema), ["root", "label", "children"]);
    }

    #[test]
    fn union_branches_and_non_objects() {
        let schema = json!({"anyOf": [
            {"properties": {"a": {}}},
            {"properties": {"b": {"title": "Bee"}}}
        ]});
        let docs = param_docs_from_schema(&schema);
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].description, "Bee");
        assert!(param_docs_from_schema(&json!(true)).is_empty());
        assert!(param_docs_from_schema(&json!({"type": "string"})).is_empty());
    }
}
