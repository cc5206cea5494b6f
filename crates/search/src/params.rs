//! Parameters of a tool, read from its JSON Schema for indexing.
//!
//! Walks `properties` at the top level and inside nested objects, array `items`,
//! `allOf`/`anyOf`/`oneOf` branches and local `$ref`s (`#/...`), collecting each
//! property's name, description and the values it lists (`enum`, its own or its items').
//! Depth and count are capped so that huge or recursive schemas cannot blow up the index.
//!
//! Listed values say what a tool is for where its description does not: a provider search
//! whose `type` is one of "Dermatologist", "Gynecologist" finds doctors, its twin whose `type`
//! is one of "Hair Stylist", "Barber" does not. Only words are kept, not numbers or booleans;
//! a list longer than [`MAX_VALUES`] (locales, country codes, a game's characters) is a table
//! to look things up in rather than the kinds a tool deals in, and is left out whole.

use std::collections::HashSet;

use serde_json::Value;

use crate::index::ParamDoc;

const MAX_DEPTH: usize = 6;
const MAX_PARAMS: usize = 200;
/// A parameter listing more values than this has none indexed.
pub const MAX_VALUES: usize = 16;
/// A value longer than this (in bytes) is not indexed.
const MAX_VALUE_LEN: usize = 40;

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
                values: listed_values(prop),
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

/// The words among the values `prop` lists, its own `enum` or its items', joined by ", ";
/// empty when it lists more than [`MAX_VALUES`].
fn listed_values(prop: &Value) -> String {
    let listed = prop
        .get("enum")
        .or_else(|| prop.get("items").and_then(|items| items.get("enum")))
        .and_then(Value::as_array);
    let Some(listed) = listed.filter(|l| l.len() <= MAX_VALUES) else {
        return String::new();
    };
    let words = listed.iter().filter_map(Value::as_str).filter(|v| {
        v.len() <= MAX_VALUE_LEN
            && v.chars().any(char::is_alphabetic)
            && !["true", "false", "null", "none"].contains(&v.to_ascii_lowercase().as_str())
    });
    words.collect::<Vec<_>>().join(", ")
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
    fn listed_words_are_kept_and_numbers_flags_and_tables_are_not() {
        let table: Vec<String> = (0..=MAX_VALUES).map(|i| format!("locale{i}")).collect();
        let schema = json!({
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["Dermatologist", "ENT Specialist", "1", "True"]},
                "tags": {"type": "array", "items": {"enum": ["vegan", "gluten-free"]}},
                "stars": {"type": "string", "enum": ["1", "2", "3"]},
                "locale": {"type": "string", "enum": table},
                "name": {"type": "string"}
            }
        });
        let values: Vec<(String, String)> = param_docs_from_schema(&schema)
            .into_iter()
            .map(|p| (p.name, p.values))
            .collect();
        let value = |name: &str| &values.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(value("type"), "Dermatologist, ENT Specialist");
        assert_eq!(value("tags"), "vegan, gluten-free");
        assert_eq!(value("stars"), "");
        assert_eq!(
            value("locale"),
            "",
            "a list of more than MAX_VALUES is a table"
        );
        assert_eq!(value("name"), "");
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
