//! The agent definition's JSON Schema: the single source of truth for what a definition may
//! contain. [`definition_schema`] is the published form (what `agents.schema`, `GET
//! /v1/agent-schema` and `docs/agent-definition.schema.json` show); the list of tools is a
//! `oneOf` of variants discriminated by `type`.
//!
//! [`validation_schema`] is derived from it for checking: each discriminated `oneOf` becomes
//! `if type = X then <variant X>` rules, so an invalid item is explained against the variant it
//! declared (`/tools/2` is `type: workflow`: `workflow` is required) rather than against every
//! alternative.

use std::sync::OnceLock;

use serde_json::{json, Map, Value};

/// A definition's name: lowercase, used in tool paths and URLs.
pub const NAME_PATTERN: &str = "^[a-z][a-z0-9_-]{0,127}$";
/// `provider/model`, e.g. `openai/gpt-4.1-mini`, `ollama/qwen3:8b`.
pub const MODEL_PATTERN: &str = "^[a-z0-9-]+/[A-Za-z0-9._:-]+$";

fn tool_variants() -> Vec<Value> {
    let approval = json!({"type": "boolean"});
    vec![
        json!({
            "type": "object",
            "properties": {
                "type": {"const": "catalog"},
                "pattern": {"type": "string", "minLength": 1, "maxLength": 256, "description": "dot-glob over tool paths, e.g. tables.rows.*"},
                "requireApproval": approval,
            },
            "required": ["type", "pattern"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {
                "type": {"const": "custom"},
                "id": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"},
                "requireApproval": approval,
            },
            "required": ["type", "id"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {
                "type": {"const": "workflow"},
                "workflow": {"type": "string", "minLength": 1, "maxLength": 128, "description": "n8n workflow id"},
                "name": {"type": "string", "maxLength": 128},
                "description": {"type": "string", "maxLength": 512},
                "requireApproval": approval,
                "allOutputs": {"type": "boolean"},
            },
            "required": ["type", "workflow"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {
                "type": {"const": "agent"},
                "agent": {"type": "string", "pattern": NAME_PATTERN},
                "description": {"type": "string", "maxLength": 512},
            },
            "required": ["type", "agent"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {
                "type": {"const": "client"},
                "name": {"type": "string", "minLength": 1, "maxLength": 64},
                "description": {"type": "string", "maxLength": 512},
                "inputSchema": {"type": "object"},
            },
            "required": ["type", "name", "description", "inputSchema"],
            "additionalProperties": false
        }),
    ]
}

/// The published schema of an agent definition.
pub fn definition_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Toolshed agent definition",
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": NAME_PATTERN},
                "description": {"type": "string", "maxLength": 512},
                "model": {"type": "string", "pattern": MODEL_PATTERN, "maxLength": 200, "description": "provider/model, e.g. openai/gpt-4.1-mini"},
                "credential": {"type": "string", "minLength": 1, "maxLength": 128, "description": "id of a [models.<id>] credential"},
                "instructions": {"type": "string", "maxLength": 100000},
                "memory": {
                    "type": "object",
                    "properties": {
                        "enabled": {"type": "boolean"},
                        "lastMessages": {"type": "integer", "minimum": 1, "maximum": 200},
                        "semanticRecall": {
                            "type": "object",
                            "properties": {
                                "topK": {"type": "integer", "minimum": 1, "maximum": 100},
                                "scope": {"type": "string", "enum": ["thread", "resource"]},
                                "messageRange": {
                                    "type": "object",
                                    "properties": {
                                        "before": {"type": "integer", "minimum": 0, "maximum": 100},
                                        "after": {"type": "integer", "minimum": 0, "maximum": 100}
                                    },
                                    "required": ["before", "after"],
                                    "additionalProperties": false
                                }
                            },
                            "required": ["topK"],
                            "additionalProperties": false
                        }
                    },
                    "required": ["enabled"],
                    "additionalProperties": false
                },
                "tools": {"type": "array", "maxItems": 128, "items": {"oneOf": tool_variants()}},
                "config": {
                    "type": "object",
                    "properties": {
                        "toolCallConcurrency": {"type": "integer", "minimum": 1, "maximum": 20},
                        "requireToolApproval": {"type": "boolean"},
                        "orchestration": {"type": "boolean", "description": "Offer the orchestration tools (delegate, update_tasks) to the agent's own runs; never to its sub-agents."},
                        "maxSteps": {"type": "integer", "minimum": 1, "maximum": 1000},
                        "maxToolCalls": {"type": "integer", "minimum": 1, "maximum": 10000},
                        "maxTokens": {"type": "integer", "minimum": 1, "maximum": 10000000},
                        "thinking": {
                            "type": "object",
                            "properties": {
                                "provider": {"type": "string", "enum": ["anthropic", "openai"]},
                                "budgetTokens": {"type": "integer", "minimum": 1, "maximum": 1000000},
                                "reasoningEffort": {"type": "string", "enum": ["low", "medium", "high"]}
                            },
                            "required": ["provider"],
                            "additionalProperties": false
                        }
                    },
                    "additionalProperties": false
                }
            },
            "required": ["name", "model", "credential", "instructions"],
            "additionalProperties": false
        })
    })
}

/// The schema the validator runs: [`definition_schema`] with every discriminated `oneOf`
/// turned into `if type = X then <variant>` rules.
pub fn validation_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| discriminate(definition_schema()))
}

/// The `type` constant of a variant, when it has one.
fn discriminator(variant: &Value) -> Option<&str> {
    variant.pointer("/properties/type/const")?.as_str()
}

/// Rewrites `oneOf`s whose variants each fix `type` into a `type` enum plus conditional rules.
fn discriminate(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let variants = map.get("oneOf").and_then(Value::as_array);
            if let Some(vs) = variants.filter(|vs| vs.iter().all(|v| discriminator(v).is_some())) {
                let names: Vec<&str> = vs.iter().filter_map(discriminator).collect();
                let rules: Vec<Value> = vs
                    .iter()
                    .map(|v| {
                        json!({
                            "if": {"properties": {"type": {"const": discriminator(v)}}, "required": ["type"]},
                            "then": discriminate(v)
                        })
                    })
                    .collect();
                let mut out = Map::new();
                for (k, v) in map {
                    if k != "oneOf" {
                        out.insert(k.clone(), discriminate(v));
                    }
                }
                out.insert("type".into(), json!("object"));
                out.insert("required".into(), json!(["type"]));
                out.insert(
                    "properties".into(),
                    json!({"type": {"type": "string", "enum": names}}),
                );
                out.insert("allOf".into(), Value::Array(rules));
                return Value::Object(out);
            }
            Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), discriminate(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(discriminate).collect()),
        other => other.clone(),
    }
}

/// The schema as compact text, rendered like `read_tool` renders tool inputs. Every object of
/// the definition is closed, which the text says once instead of at every object.
pub fn schema_text() -> String {
    let mut out = String::from("agent definition (objects: only the fields listed):\n");
    out.push_str(&toolshed_schema::render_schema(&without_closed_marks(
        definition_schema(),
    )));
    out
}

/// The schema without `additionalProperties: false` (for the text, which states it once).
fn without_closed_marks(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !(k.as_str() == "additionalProperties" && **v == json!(false)))
                .map(|(k, v)| (k.clone(), without_closed_marks(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_closed_marks).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolshed_core::CompiledSchema;

    #[test]
    fn both_forms_compile_and_agree_on_valid_documents() {
        let published = CompiledSchema::compile(definition_schema()).unwrap();
        let checked = CompiledSchema::compile(validation_schema()).unwrap();
        let good = json!({
            "name": "helper", "model": "openai/gpt-4.1-mini", "credential": "main",
            "instructions": "Help.",
            "tools": [{"type": "catalog", "pattern": "tables.**"}, {"type": "agent", "agent": "other"}]
        });
        assert!(published.is_valid(&good));
        assert!(checked.is_valid(&good));
        let bad = json!({
            "name": "helper", "model": "openai/gpt-4.1-mini", "credential": "main",
            "instructions": "Help.", "tools": [{"type": "workflow"}]
        });
        assert!(!published.is_valid(&bad));
        assert!(!checked.is_valid(&bad));
    }

    #[test]
    fn an_item_is_explained_against_the_variant_it_declares() {
        let s = validation_schema();
        let checked = CompiledSchema::compile(s).unwrap();
        let doc = json!({
            "name": "helper", "model": "openai/gpt-4.1-mini", "credential": "main",
            "instructions": "Help.",
            "tools": [{"type": "catalog", "pattern": "x.*"}, {"type": "catalog", "pattern": "y"}, {"type": "workflow", "name": "w"}]
        });
        let errors = checked.explain(s, &doc, 50);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "/tools/2/workflow");
        assert_eq!(errors[0].received, "missing");
    }

    #[test]
    fn the_text_names_every_variant() {
        let text = schema_text();
        for v in ["catalog", "custom", "workflow", "agent", "client"] {
            assert!(text.contains(v), "{v} in {text}");
        }
    }
}

#[cfg(test)]
mod token_tests {
    use super::*;

    /// The compact text must cost at least 40 % fewer o200k tokens than the minified JSON
    /// Schema; the test fails above 60 % of the raw count.
    #[test]
    fn the_text_costs_far_fewer_tokens_than_the_json_schema() {
        let bpe = tiktoken_rs::o200k_base().unwrap();
        let raw = serde_json::to_string(definition_schema()).unwrap();
        let raw_tokens = bpe.encode_with_special_tokens(&raw).len();
        let text_tokens = bpe.encode_with_special_tokens(&schema_text()).len();
        let ratio = text_tokens as f64 / raw_tokens as f64;
        println!("agents.schema: {text_tokens} o200k tokens vs {raw_tokens} minified JSON Schema ({:.0} %)", ratio * 100.0);
        assert!(ratio <= 0.60, "{text_tokens} / {raw_tokens} = {ratio:.2}");
    }
}
#[cfg(test)]
mod published_tests {
    use super::*;

    /// `docs/agent-definition.schema.json` is this schema (regenerate it with
    /// `TOOLSHED_WRITE_SCHEMA=1 cargo test -p toolshed-agents published`).
    #[test]
    fn the_published_file_is_the_schema() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../docs/agent-definition.schema.json");
        let text = serde_json::to_string_pretty(definition_schema()).unwrap() + "\n";
        if std::env::var_os("TOOLSHED_WRITE_SCHEMA").is_some() {
            std::fs::write(&file, &text).unwrap();
        }
        let on_disk = std::fs::read_to_string(&file).unwrap_or_default();
        assert_eq!(
            on_disk, text,
            "docs/agent-definition.schema.json is out of date"
        );
    }
}
