//! Example calls: `await tools.<path>({...})` with plausible values for required fields.

use serde_json::Value;

use crate::text::compact;

const MAX_DEPTH: usize = 4;

/// A JavaScript-style literal for a schema's required fields.
pub(crate) fn example_value(root: &Value, schema: &Value, name: &str, depth: usize) -> String {
    let schema = deref(root, schema, 0);
    let Some(obj) = schema.as_object() else {
        return "null".into();
    };
    for key in ["const", "default"] {
        if let Some(v) = obj.get(key) {
            return compact(v);
        }
    }
    if let Some(first) = obj
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return compact(first);
    }
    if let Some(v) = obj
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return compact(v);
    }
    if let Some(v) = obj.get("example") {
        return compact(v);
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(first) = obj
            .get(key)
            .and_then(Value::as_array)
            .and_then(|b| b.first())
        {
            if !obj.contains_key("properties") && depth < MAX_DEPTH {
                return example_value(root, first, name, depth + 1);
            }
        }
    }
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if obj.contains_key("properties") => "object",
        _ if obj.contains_key("items") => "array",
        _ => "string",
    };
    match ty {
        "object" => {
            if depth >= MAX_DEPTH {
                return "{}".into();
            }
            object_literal(root, obj, depth + 1)
        }
        "array" => {
            let item = obj
                .get("items")
                .filter(|_| depth < MAX_DEPTH)
                .map(|i| example_value(root, i, name, depth + 1));
            let min = obj.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            match item {
                Some(i) if min > 0 || !i.is_empty() => format!("[{i}]"),
                _ => "[]".into(),
            }
        }
        "integer" | "number" => {
            let lo = obj
                .get("minimum")
                .or_else(|| obj.get("exclusiveMinimum").filter(|v| v.is_number()))
                .and_then(Value::as_f64);
            let v = match lo {
                Some(lo) if lo >= 1.0 => {
                    lo.ceil() as i64 + i64::from(obj.contains_key("exclusiveMinimum"))
                }
                _ => 1,
            };
            v.to_string()
        }
        "boolean" => "true".into(),
        "null" => "null".into(),
        _ => string_example(obj.get("format").and_then(Value::as_str), name),
    }
}

fn string_example(format: Option<&str>, name: &str) -> String {
    let s = match format {
        Some("date-time") => "2024-01-31T12:00:00Z".to_string(),
        Some("date") => "2024-01-31".to_string(),
        Some("time") => "12:00:00".to_string(),
        Some("email") => "user@example.com".to_string(),
        Some("uri" | "url" | "uri-reference" | "iri") => "https://example.com".to_string(),
        Some("uuid") => "123e4567-e89b-12d3-a456-426614174000".to_string(),
        Some("ipv4") => "192.0.2.1".to_string(),
        Some("ipv6") => "2001:db8::1".to_string(),
        Some("hostname") => "example.com".to_string(),
        _ => name.to_string(),
    };
    compact(&Value::String(s))
}

fn deref<'a>(root: &'a Value, schema: &'a Value, hops: usize) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) if hops < 16 => match r.strip_prefix('#').and_then(|p| {
            if p.is_empty() {
                Some(root)
            } else {
                root.pointer(p)
            }
        }) {
            Some(target) => deref(root, target, hops + 1),
            None => schema,
        },
        _ => schema,
    }
}

fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn object_literal(root: &Value, obj: &serde_json::Map<String, Value>, depth: usize) -> String {
    let required: Vec<&str> = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let empty = serde_json::Map::new();
    let props = obj
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut fields = Vec::new();
    for name in &required {
        let value = match props.get(*name) {
            Some(p) => example_value(root, p, name, depth),
            None => compact(&Value::String((*name).to_string())),
        };
        let key = if is_identifier(name) {
            (*name).to_string()
        } else {
            compact(&Value::String((*name).to_string()))
        };
        fields.push(format!("{key}: {value}"));
    }
    if fields.is_empty() {
        "{}".into()
    } else {
        format!("{{{}}}", fields.join(", "))
    }
}

/// The literal passed to an example call for `input`.
pub(crate) fn example_arguments(input: &Value) -> String {
    example_value(input, input, "value", 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn required_fields_only_with_plausible_values() {
        let schema = json!({
            "type": "object",
            "required": ["owner", "count", "when", "state", "tags", "my-key"],
            "properties": {
                "owner": {"type": "string"},
                "count": {"type": "integer", "minimum": 5},
                "when": {"type": "string", "format": "date-time"},
                "state": {"enum": ["open", "closed"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "my-key": {"type": "boolean"},
                "optional": {"type": "string"}
            }
        });
        assert_eq!(
            example_arguments(&schema),
            r#"{owner: "owner", count: 5, when: "2024-01-31T12:00:00Z", state: "open", tags: ["tags"], "my-key": true}"#
        );
    }

    #[test]
    fn follows_refs_and_stops_on_recursion() {
        let schema = json!({
            "type": "object", "required": ["node"],
            "properties": {"node": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "required": ["child"], "properties": {"child": {"$ref": "#/$defs/Node"}}}}
        });
        let out = example_arguments(&schema);
        assert!(out.starts_with("{node: {child: {child:"), "{out}");
    }
}
