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
    fn invalid_schema_is_an_error() {
        assert!(CompiledSchema::compile(&json!({"type": 12})).is_err());
    }

    #[test]
    fn remote_refs_are_not_fetched() {
        let r = CompiledSchema::compile(&json!({"$ref": "http://127.0.0.1:9/schema.json"}));
        assert!(r.is_err(), "remote refs must not resolve");
    }
}
