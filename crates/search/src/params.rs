//! Parameters of a tool, read from its JSON Schema for indexing.
//!
//! Walks `properties` at the top level and inside nested objects, array `items`,
//! `allOf`/`anyOf`/`oneOf` branches and local `$ref`s (`#/...`), collecting each
//! property's name, description and the values it lists (its `enum`, or one found behind a
//! `$ref`, in its items or in `anyOf` / `oneOf` branches; see `listed_values`).
//! Depth and count are capped so that huge or recursive schemas cannot blow up the index.
//!
//! Listed values say what a tool is for where its description does not: a provider search
//! whose `type` is one of "Dermatologist", "Gynecologist" finds doctors, its twin whose `type`
//! is one of "Hair Stylist", "Barber" does not. Only words are kept, not numbers or booleans;
//! a list of more than `MAX_VALUES` (16; locales, country codes, a game's characters) is a table
//! to look things up in rather than the kinds a tool deals in, and is left out whole.

use std::collections::HashSet;

use serde_json::Value;

use crate::index::ParamDoc;

const MAX_DEPTH: usize = 6;
const MAX_PARAMS: usize = 200;
/// A parameter listing more values than this has none indexed.
const MAX_VALUES: usize = 16;
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
                values: listed_values(root, prop),
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

/// The words among the values `prop` lists, joined by ", "; empty when it lists more than
/// [`MAX_VALUES`]. The values are its `enum`, or those of what it refers to (a local `$ref`,
/// as Pydantic writes an `Enum` class), of its items, or of its `anyOf` / `oneOf` branches (an
/// optional enum is `anyOf` an enum and `null`; a documented one is `oneOf` branches each with a
/// `const`).
fn listed_values(root: &Value, prop: &Value) -> String {
    let mut listed = Vec::new();
    let mut budget = LISTED_VISITS;
    if !collect_listed(root, prop, 0, &mut budget, &mut listed) || listed.len() > MAX_VALUES {
        return String::new();
    }
    let words = listed.into_iter().filter_map(Value::as_str).filter(|v| {
        v.len() <= MAX_VALUE_LEN
            && v.chars().any(char::is_alphabetic)
            && !["true", "false", "null", "none"].contains(&v.to_ascii_lowercase().as_str())
    });
    words.collect::<Vec<_>>().join(", ")
}

/// The schemas read for one parameter's values at most: references may lead to the same
/// branches again and again, and a hostile schema must not make an index build slow.
const LISTED_VISITS: usize = 64;

/// Adds the values `schema` lists to `out`; false once they pass [`MAX_VALUES`] or the
/// schemas read pass [`LISTED_VISITS`] (the parameter then has none indexed). Nesting deeper
/// than a value list does is not read.
fn collect_listed<'a>(
    root: &'a Value,
    schema: &'a Value,
    depth: usize,
    budget: &mut usize,
    out: &mut Vec<&'a Value>,
) -> bool {
    const DEPTH: usize = 4;
    let Some(obj) = schema.as_object() else {
        return true;
    };
    if depth > DEPTH {
        return true;
    }
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    if let Some(values) = obj.get("enum").and_then(Value::as_array) {
        out.extend(values);
    }
    if let Some(value) = obj.get("const").filter(|_| depth > 0) {
        out.push(value);
    }
    if out.len() > MAX_VALUES {
        return false;
    }
    let refers = obj
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve(root, r));
    let branches = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|key| obj.get(*key).and_then(Value::as_array))
        .flatten();
    let nested = refers.into_iter().chain(obj.get("items")).chain(branches);
    nested
        .into_iter()
        .all(|sub| collect_listed(root, sub, depth + 1, budget, out))
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
    fn values_are_found_behind_refs_optional_wrappers_and_documented_branches() {
        // As Pydantic writes an Enum class, an Optional[Literal] and a documented choice.
        let schema = json!({
            "type": "object",
            "$defs": {"Unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "properties": {
                "unit": {"$ref": "#/$defs/Unit"},
                "mode": {"anyOf": [{"type": "string", "enum": ["driving", "walking"]}, {"type": "null"}]},
                "sort": {"oneOf": [
                    {"const": "newest", "description": "Newest first"},
                    {"const": "oldest", "description": "Oldest first"}
                ]},
                "units": {"type": "array", "items": {"$ref": "#/$defs/Unit"}},
                "loop": {"$ref": "#/properties/loop"}
            }
        });
        let docs = param_docs_from_schema(&schema);
        let value = |name: &str| docs.iter().find(|p| p.name == name).unwrap().values.clone();
        assert_eq!(value("unit"), "celsius, fahrenheit");
        assert_eq!(value("mode"), "driving, walking");
        assert_eq!(value("sort"), "newest, oldest");
        assert_eq!(value("units"), "celsius, fahrenheit");
        assert_eq!(value("loop"), "", "a reference to itself ends");
    }

    #[test]
    fn references_that_fan_out_cost_a_bounded_reading() {
        // Each level refers to the next one a hundred times: 10^8 paths to the last level if
        // every one were read; the budget reads 64 schemas and gives up.
        let mut defs = serde_json::Map::new();
        for level in 0..4 {
            let next = json!({"$ref": format!("#/$defs/L{}", level + 1)});
            defs.insert(format!("L{level}"), json!({"anyOf": vec![next; 100]}));
        }
        defs.insert("L4".into(), json!({"type": "string"}));
        let schema = json!({"$defs": defs, "properties": {"x": {"$ref": "#/$defs/L0"}}});
        assert_eq!(param_docs_from_schema(&schema)[0].values, "");
        // Values found only past the budget are not kept.
        let mut branches = vec![json!({"type": "string"}); LISTED_VISITS];
        branches.push(json!({"enum": ["late"]}));
        let schema = json!({"properties": {"x": {"anyOf": branches}}});
        assert_eq!(param_docs_from_schema(&schema)[0].values, "");
        let schema =
            json!({"properties": {"x": {"anyOf": [{"type": "null"}, {"enum": ["early"]}]}}});
        assert_eq!(param_docs_from_schema(&schema)[0].values, "early");
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
