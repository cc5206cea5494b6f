//! A custom tool's specification and the checks `custom.build` runs before anything is saved,
//! in order, each failing with `{ok: false, stage, errors}`: `schema` (the id, sizes, and that
//! both schemas compile), `compile` (the code parses: a syntax error names line and column),
//! `test` (when `test: {input, expect?}` is given: the input fits the input schema, the tool
//! runs once on it, its result fits the output schema and equals `expect`).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use toolshed_core::CompiledSchema;

/// Longest code accepted, in bytes.
pub const MAX_CODE_BYTES: usize = 64 * 1024;
/// Largest schema accepted, in bytes of JSON.
pub const MAX_SCHEMA_BYTES: usize = 32 * 1024;

/// What is saved for one custom tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomSpec {
    /// The tool is `custom.<id>`.
    pub id: String,
    pub description: String,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// JavaScript run as an async function body with `input` and the `tools` proxy.
    pub code: String,
    /// It calls read-only tools only (enforced at every call).
    #[serde(default)]
    pub read_only: bool,
    /// It deletes or overwrites data.
    #[serde(default)]
    pub destructive: bool,
}

/// A trial run requested by `custom.build`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialSpec {
    pub input: Value,
    #[serde(default)]
    pub expect: Option<Value>,
}

/// A failed stage: `{ok: false, stage, errors}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    pub ok: bool,
    pub stage: &'static str,
    pub errors: Vec<Value>,
}

impl Failure {
    pub fn new(stage: &'static str, errors: Vec<Value>) -> Self {
        Self {
            ok: false,
            stage,
            errors,
        }
    }

    pub fn one(stage: &'static str, error: Value) -> Self {
        Self::new(stage, vec![error])
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    pub fn summary(&self) -> String {
        let first = self
            .errors
            .first()
            .and_then(|e| e["message"].as_str())
            .unwrap_or("");
        format!("the custom tool failed the {} stage: {first}", self.stage)
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The `schema` stage: id, sizes, schemas that compile.
pub fn check_spec(spec: &CustomSpec) -> Result<(), Failure> {
    let mut errors = Vec::new();
    if ["build", "list", "get", "delete"].contains(&spec.id.as_str()) {
        errors.push(json!({"path": "/id", "message": "build, list, get and delete name the builder tools (custom.build, ...); choose another id", "received": spec.id}));
    } else if !valid_id(&spec.id) {
        errors.push(json!({"path": "/id", "message": "an id is 1 to 64 lowercase letters, digits and '_', starting with a letter (the tool is custom.<id>)", "received": spec.id}));
    }
    if spec.description.trim().is_empty() || spec.description.len() > 2_048 {
        errors.push(json!({"path": "/description", "message": "a description of 1 to 2048 bytes is required"}));
    }
    if spec.code.len() > MAX_CODE_BYTES {
        errors.push(json!({"path": "/code", "message": format!("the code is {} bytes; at most {MAX_CODE_BYTES}", spec.code.len())}));
    }
    if spec.read_only && spec.destructive {
        errors.push(json!({"path": "/destructive", "message": "a tool cannot be both readOnly and destructive"}));
    }
    let schemas = [
        ("/inputSchema", Some(&spec.input_schema)),
        ("/outputSchema", spec.output_schema.as_ref()),
    ];
    for (at, schema) in schemas {
        let Some(schema) = schema else { continue };
        if schema.to_string().len() > MAX_SCHEMA_BYTES {
            errors.push(json!({"path": at, "message": format!("the schema is larger than {MAX_SCHEMA_BYTES} bytes")}));
        } else if let Err(e) = CompiledSchema::compile(schema) {
            errors.push(json!({"path": at, "message": e.to_string()}));
        }
    }
    if spec.input_schema.get("type").and_then(Value::as_str) != Some("object") {
        errors.push(json!({"path": "/inputSchema/type", "message": "the input schema must describe an object (\"type\": \"object\")"}));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Failure::new("schema", errors))
    }
}

/// The `test` stage's checks of an input against the input schema.
pub fn check_trial_input(spec: &CustomSpec, input: &Value) -> Result<(), Failure> {
    let schema = CompiledSchema::compile(&spec.input_schema).map_err(|e| {
        Failure::one(
            "test",
            json!({"path": "/test/input", "message": e.to_string()}),
        )
    })?;
    let errors: Vec<Value> = schema
        .explain(&spec.input_schema, input, 20)
        .into_iter()
        .map(|e| json!({"path": format!("/test/input{}", e.path), "message": e.message, "expected": e.expected, "received": e.received}))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Failure::new("test", errors))
    }
}

/// The `test` stage's checks of a trial result: the output schema, then `expect`.
pub fn check_trial_result(
    spec: &CustomSpec,
    trial: &TrialSpec,
    result: &Value,
) -> Result<(), Failure> {
    if let Some(out) = &spec.output_schema {
        let schema = CompiledSchema::compile(out).map_err(|e| {
            Failure::one(
                "test",
                json!({"path": "/outputSchema", "message": e.to_string()}),
            )
        })?;
        let errors: Vec<Value> = schema
            .explain(out, result, 20)
            .into_iter()
            .map(|e| json!({"path": format!("/result{}", e.path), "message": e.message, "expected": e.expected, "received": e.received}))
            .collect();
        if !errors.is_empty() {
            return Err(Failure::new("test", errors));
        }
    }
    if let Some(expect) = &trial.expect {
        if expect != result {
            return Err(Failure::one(
                "test",
                json!({"path": "/result", "message": "the result differs from test.expect", "expected": expect, "received": result}),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CustomSpec {
        CustomSpec {
            id: "sum_rows".into(),
            description: "Sums.".into(),
            input_schema: json!({"type": "object"}),
            output_schema: Some(
                json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
            ),
            code: "return {n: 1}".into(),
            read_only: true,
            destructive: false,
        }
    }

    #[test]
    fn specs_are_checked_field_by_field() {
        assert!(check_spec(&spec()).is_ok());
        let mut bad = spec();
        bad.id = "Bad-Id".into();
        bad.input_schema = json!({"type": 3});
        bad.destructive = true;
        let f = check_spec(&bad).unwrap_err();
        let paths: Vec<&str> = f
            .errors
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert_eq!(f.stage, "schema");
        assert!(
            paths.contains(&"/id")
                && paths.contains(&"/inputSchema")
                && paths.contains(&"/destructive"),
            "{paths:?}"
        );
    }

    #[test]
    fn trial_results_meet_the_schema_and_the_expectation() {
        let s = spec();
        let t = TrialSpec {
            input: json!({}),
            expect: Some(json!({"n": 2})),
        };
        assert_eq!(
            check_trial_result(&s, &t, &json!({"n": "x"}))
                .unwrap_err()
                .errors[0]["path"],
            "/result/n"
        );
        assert_eq!(
            check_trial_result(&s, &t, &json!({"n": 1}))
                .unwrap_err()
                .errors[0]["path"],
            "/result"
        );
        assert!(check_trial_result(&s, &t, &json!({"n": 2})).is_ok());
    }
}
