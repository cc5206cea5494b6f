//! Client-tool declarations read from MCP, OpenAI, Anthropic and ARK-style shapes, each
//! reported back with the shape it was read as (`readAs`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::path::to_segment;
use crate::schema::CompiledSchema;

/// The longest declared name, in bytes.
pub const MAX_DECLARED_NAME_BYTES: usize = 128;
/// The longest declared description, in bytes.
pub const MAX_DECLARED_DESCRIPTION_BYTES: usize = 8 * 1024;
/// The longest declared schema (input or output), as JSON text.
pub const MAX_DECLARED_SCHEMA_BYTES: usize = 64 * 1024;

/// A tool the client executes itself, declared for one execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientTool {
    pub index: usize,
    pub name: String,
    pub path: String,
    pub segment: String,
    pub description: String,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    pub read_as: String,
}

/// Why a list of declarations was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("clientTools[{index}]: {reason}")]
pub struct ClientToolsError {
    pub index: usize,
    pub reason: String,
}

/// Reads each declaration, or names the first bad one by index.
pub fn parse_client_tools(decls: &[Value]) -> Result<Vec<ClientTool>, ClientToolsError> {
    let mut out: Vec<ClientTool> = Vec::new();
    for (index, d) in decls.iter().enumerate() {
        let err = |reason: String| ClientToolsError { index, reason };
        let (read_as, body, schema_key) =
            if d.get("type").and_then(Value::as_str) == Some("function") {
                (
                    "openai",
                    d.get("function").unwrap_or(&Value::Null),
                    "parameters",
                )
            } else if d.get("type").and_then(Value::as_str) == Some("custom") {
                ("ark", d, "parameters")
            } else if d.get("input_schema").is_some() {
                ("anthropic", d, "input_schema")
            } else {
                ("mcp", d, "inputSchema")
            };
        let name = body
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        if name.is_empty() {
            return Err(err("a declaration needs a non-empty 'name'".into()));
        }
        if name.len() > MAX_DECLARED_NAME_BYTES {
            return Err(err(format!(
                "the name is {} bytes; at most {MAX_DECLARED_NAME_BYTES}",
                name.len()
            )));
        }
        let description = body
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        if description.len() > MAX_DECLARED_DESCRIPTION_BYTES {
            return Err(err(format!(
                "the description of '{name}' is {} bytes; at most {MAX_DECLARED_DESCRIPTION_BYTES}",
                description.len()
            )));
        }
        let segment = to_segment(name);
        let schema = body
            .get(schema_key)
            .cloned()
            .unwrap_or(serde_json::json!({"type": "object"}));
        let output_schema = body
            .get("outputSchema")
            .or_else(|| body.get("output_schema"))
            .cloned();
        for (what, s) in [
            ("schema", Some(&schema)),
            ("output schema", output_schema.as_ref()),
        ] {
            let Some(s) = s else { continue };
            let len = s.to_string().len();
            if len > MAX_DECLARED_SCHEMA_BYTES {
                return Err(err(format!(
                    "the {what} of '{name}' is {len} bytes; at most {MAX_DECLARED_SCHEMA_BYTES}"
                )));
            }
            CompiledSchema::compile(s)
                .map_err(|e| err(format!("the {what} of '{name}' does not compile: {e}")))?;
        }
        let path = format!("client.{segment}");
        if let Some(other) = out.iter().find(|t| t.path == path) {
            return Err(err(format!(
                "'{name}' maps to '{path}' like clientTools[{}] ('{}')",
                other.index, other.name
            )));
        }
        out.push(ClientTool {
            index,
            name: name.to_string(),
            path,
            segment,
            description: description.to_string(),
            input_schema: schema,
            output_schema,
            read_as: read_as.to_string(),
        });
    }
    Ok(out)
}
