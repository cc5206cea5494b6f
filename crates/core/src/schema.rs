//! JSON Schema validation whose errors name the JSON pointer and the rule that failed.
//!
//! Remote `$ref` fetching is compiled out (`jsonschema` with default features off): a schema can
//! only refer to itself.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A schema that failed to compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON Schema: {0}")]
pub struct SchemaError(pub String);

/// One failed rule: where in the instance, which keyword, and a readable message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// JSON pointer into the validated value ("" is the root).
    pub pointer: String,
    /// The schema keyword that failed (`required`, `type`, `minimum`, ...).
    pub rule: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "at {at}: {} (rule: {})", self.message, self.rule)
    }
}

/// A compiled validator.
pub struct CompiledSchema {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompiledSchema")
    }
}

impl CompiledSchema {
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map_err(|e| SchemaError(e.to_string()))?;
        Ok(Self { validator })
    }

    /// Cheap check without collecting errors.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validator.is_valid(instance)
    }

    /// Validates, returning at most 20 violations.
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<Violation>> {
        if self.validator.is_valid(instance) {
            return Ok(());
        }
        let out: Vec<Violation> = self
            .validator
            .iter_errors(instance)
            .take(20)
            .map(|e| {
                let schema_path = e.schema_path().to_string();
                let rule = schema_path
                    .rsplit('/')
                    .find(|s| !s.is_empty() && s.parse::<usize>().is_err())
                    .unwrap_or("schema")
                    .to_string();
                Violation {
                    pointer: e.instance_path().to_string(),
                    rule,
                    message: e.to_string(),
                }
            })
            .collect();
        Err(out)
    }
}

/// One violation explained for a reader that corrects its input (an LLM writing a document):
/// where, what is wrong, the violated constraint as short text, and the value found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explained {
    /// JSON pointer to the offending value (for a missing property: where it belongs).
    pub path: String,
    pub message: String,
    /// The violated constraint, e.g. `integer ≤ 20`, `one of: openai, anthropic`, `present`.
    pub expected: String,
    /// The value found, as JSON cut to 200 characters, or `missing`.
    pub received: String,
}

/// Longest `received` text, in characters.
const RECEIVED_CHARS: usize = 200;

impl CompiledSchema {
    /// Every violation (up to `limit`), each explained against `schema` (the schema this
    /// validator was compiled from, without `$ref`s, so that keyword locations point into it).
    pub fn explain(&self, schema: &Value, instance: &Value, limit: usize) -> Vec<Explained> {
        self.validator
            .iter_errors(instance)
            .filter(|e| !is_wrapper(e.kind()))
            .take(limit)
            .map(|e| explain_one(schema, instance, &e))
            .collect()
    }
}

/// Keywords that only say "a sub-schema failed": their sub-schemas' own errors explain more.
fn is_wrapper(kind: &jsonschema::error::ValidationErrorKind) -> bool {
    use jsonschema::error::ValidationErrorKind as K;
    matches!(
        kind,
        K::AnyOf { .. } | K::OneOfNotValid { .. } | K::FalseSchema
    )
}

fn explain_one(schema: &Value, instance: &Value, e: &jsonschema::ValidationError<'_>) -> Explained {
    use jsonschema::error::ValidationErrorKind as K;
    let at = e.instance_path().to_string();
    let keyword_at = e.schema_path().to_string();
    // The schema object that holds the failing keyword.
    let node = keyword_at
        .rsplit_once('/')
        .and_then(|(parent, _)| schema.pointer(parent))
        .unwrap_or(&Value::Null);
    let of_type = |bound: String| match node.get("type").and_then(Value::as_str) {
        Some(t) => format!("{t} {bound}"),
        None => bound,
    };
    let received = |v: &Value| cut(&v.to_string());
    let found = instance.pointer(&at);
    let (path, expected, got) = match e.kind() {
        K::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            let field = node
                .get("properties")
                .and_then(|p| p.get(name))
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str)
                .map(|t| format!("{t} (required)"))
                .unwrap_or_else(|| "present (required)".into());
            (
                format!("{at}/{}", escape(name)),
                field,
                "missing".to_string(),
            )
        }
        K::Maximum { limit } => (at, of_type(format!("≤ {limit}")), String::new()),
        K::Minimum { limit } => (at, of_type(format!("≥ {limit}")), String::new()),
        K::ExclusiveMaximum { limit } => (at, of_type(format!("< {limit}")), String::new()),
        K::ExclusiveMinimum { limit } => (at, of_type(format!("> {limit}")), String::new()),
        K::MaxLength { limit } => (
            at,
            format!("string of at most {limit} characters"),
            String::new(),
        ),
        K::MinLength { limit } => (
            at,
            format!("string of at least {limit} characters"),
            String::new(),
        ),
        K::MaxItems { limit } => (at, format!("array of at most {limit} items"), String::new()),
        K::MinItems { limit } => (
            at,
            format!("array of at least {limit} items"),
            String::new(),
        ),
        K::Pattern { pattern } => (at, format!("string matching {pattern}"), String::new()),
        K::Enum { options } => {
            let list: Vec<String> = options
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_string))
                .collect();
            (at, format!("one of: {}", list.join(", ")), String::new())
        }
        K::Constant { expected_value } => (at, format!("exactly {expected_value}"), String::new()),
        K::Type { .. } => {
            let t = match node.get("type") {
                Some(Value::Array(ts)) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" or "),
                Some(t) => t.as_str().unwrap_or_default().to_string(),
                None => "another type".into(),
            };
            (at, t, String::new())
        }
        K::AdditionalProperties { unexpected } => {
            let known: Vec<&str> = node
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let first = unexpected.first().cloned().unwrap_or_default();
            let path = format!("{at}/{}", escape(&first));
            let got = instance
                .pointer(&path)
                .map(received)
                .unwrap_or_else(|| "missing".into());
            let expected = if known.is_empty() {
                "no properties".to_string()
            } else {
                format!("only the properties: {}", known.join(", "))
            };
            (path, expected, got)
        }
        other => (at, other.keyword().to_string(), String::new()),
    };
    let received_text = if got.is_empty() {
        found.map(received).unwrap_or_else(|| "missing".into())
    } else {
        got
    };
    Explained {
        path,
        message: e.to_string(),
        expected,
        received: received_text,
    }
}

/// A JSON pointer segment (`~` and `/` escaped).
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn cut(text: &str) -> String {
    if text.chars().count() <= RECEIVED_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(RECEIVED_CHARS).collect();
    s.push('…');
    s
}

/// Formats violations as one line each.
pub fn describe_violations(v: &[Violation]) -> String {
    v.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn violations_name_pointer_and_rule() {
        let s = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2},
                "rows": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}}
            },
            "required": ["name"],
            "additionalProperties": false
        }))
        .unwrap();
        assert!(s.validate(&json!({"name": "ok"})).is_ok());
        let v = s.validate(&json!({"rows": [{"n": -1}]})).unwrap_err();
        assert!(
            v.iter()
                .any(|v| v.rule == "required" && v.pointer.is_empty()),
            "{v:?}"
        );
        assert!(
            v.iter()
                .any(|v| v.rule == "minimum" && v.pointer == "/rows/0/n"),
            "{v:?}"
        );
        let v = s.validate(&json!({"name": "x", "extra": 1})).unwrap_err();
        assert!(
            v.iter()
                .any(|v| v.rule == "minLength" && v.pointer == "/name"),
            "{v:?}"
        );
        assert!(v.iter().any(|v| v.rule == "additionalProperties"), "{v:?}");
    }

    #[test]
    fn explanations_name_path_constraint_and_value() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer", "maximum": 20},
                "kind": {"type": "string", "enum": ["openai", "anthropic"]},
                "name": {"type": "string", "pattern": "^[a-z]+$"},
                "long": {"type": "string"}
            },
            "required": ["name"],
            "additionalProperties": false
        });
        let s = CompiledSchema::compile(&schema).unwrap();
        let x = s.explain(
            &schema,
            &json!({"n": 25, "kind": "ollama", "extra": true}),
            20,
        );
        let by = |p: &str| {
            x.iter()
                .find(|e| e.path == p)
                .unwrap_or_else(|| panic!("{p}: {x:?}"))
        };
        assert_eq!(by("/n").expected, "integer ≤ 20");
        assert_eq!(by("/n").received, "25");
        assert_eq!(by("/kind").expected, "one of: openai, anthropic");
        assert_eq!(by("/kind").received, "\"ollama\"");
        assert_eq!(by("/name").received, "missing");
        assert_eq!(by("/name").expected, "string (required)");
        assert!(by("/extra").expected.starts_with("only the properties"));
        assert_eq!(x.len(), 4, "every violation, not only the first: {x:?}");
        let long = "y".repeat(500);
        let x = s.explain(&schema, &json!({"name": "ok", "n": long}), 20);
        assert!(x[0].received.chars().count() <= 201, "{x:?}");
    }

    #[test]
    fn invalid_schema_is_an_error() {
        assert!(CompiledSchema::compile(&json!({"type": 12})).is_err());
    }

    #[test]
    fn remote_refs_are_not_fetched() {
        let r = CompiledSchema::compile(&json!({"$ref": "http://127.0.0.1:9/schema.json"}));
        assert!(r.is_err(), "remote refs must not resolve");
    }
}
