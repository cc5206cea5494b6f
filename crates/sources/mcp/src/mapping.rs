//! Mapping between MCP and Toolshed: upstream tool descriptions become [`ToolDef`]s and
//! `tools/call` results become JSON values or [`ToolError`]s.
//!
//! # Paths
//!
//! An upstream tool `createEntities` of the upstream named `memory` becomes
//! `memory.create_entities` ([`toolshed_core::path::to_segment`]: dots, dashes, spaces and
//! camelCase all become snake_case). When two upstream names normalise to the same segment
//! (`get-item` and `get_item`), the first keeps it and later ones get `_2`, `_3`... with a
//! warning in the log.
//!
//! # Titles
//!
//! `annotations.title`, then the top-level `title`, are used as given (they are meant for
//! humans already); otherwise the name is turned into Title Case (`create_entities` →
//! "Create Entities").
//!
//! # Annotations (MCP defaults)
//!
//! The MCP hints are optional and their defaults are conservative; Toolshed follows them:
//! - `readOnlyHint` defaults to false.
//! - A read-only tool is never destructive and is treated as idempotent (reading twice has no
//!   additional effect).
//! - A tool that is not read-only is **destructive unless `destructiveHint` is explicitly
//!   false** (the spec default for `destructiveHint` is true), so it goes through approval.
//! - `idempotentHint` defaults to false.
//!
//! # Results
//!
//! - `isError: true` → [`ToolError`] of kind `Upstream` whose message is the text content
//!   (structured content, if any, is kept as the error's data).
//! - `structuredContent` present → that value.
//! - Otherwise the content array is converted: a single text item that parses as JSON → that
//!   JSON; a single text item otherwise → the string; several items → an array where text items
//!   are strings, images/audio are `{type, mimeType, bytes}` (plus `data` when the base64 is at
//!   most [`INLINE_BINARY_LIMIT`] characters), embedded blobs likewise lose large `blob`s, and
//!   anything else is passed through as JSON.

use std::collections::HashSet;

use rmcp::model::{CallToolResult, Tool as McpTool};
use serde_json::{json, Map, Value};
use toolshed_core::path::to_segment;
use toolshed_core::tool::title_case;
use toolshed_core::{Annotations, ToolDef, ToolError, ToolPath};

/// Base64 payloads up to this many characters are kept inline in converted results.
pub const INLINE_BINARY_LIMIT: usize = 4096;

/// A mapped tool: its Toolshed definition and the upstream name to call.
#[derive(Debug, Clone, PartialEq)]
pub struct MappedTool {
    pub def: ToolDef,
    pub remote_name: String,
}

/// Maps an upstream tool list into definitions under `namespace`, de-duplicating paths.
pub fn map_tools(namespace: &str, tools: &[McpTool]) -> Vec<MappedTool> {
    let mut used: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(tools.len());
    for tool in tools {
        let base = to_segment(&tool.name);
        let mut segment = base.clone();
        let mut n = 2;
        while used.contains(&segment) {
            segment = format!("{base}_{n}");
            n += 1;
        }
        if segment != base {
            tracing::warn!(
                upstream = namespace,
                tool = %tool.name,
                path = %format!("{namespace}.{segment}"),
                "upstream tool name collides with another after normalisation; using a suffix"
            );
        }
        let path = match ToolPath::join(namespace, &segment) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(upstream = namespace, tool = %tool.name, error = %e, "skipping tool with unusable path");
                continue;
            }
        };
        used.insert(segment);
        out.push(MappedTool {
            def: tool_def(namespace, path, tool),
            remote_name: tool.name.to_string(),
        });
    }
    out
}

fn tool_def(namespace: &str, path: ToolPath, tool: &McpTool) -> ToolDef {
    let title = tool
        .annotations
        .as_ref()
        .and_then(|a| a.title.clone())
        .or_else(|| tool.title.clone())
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| title_case(&tool.name));
    let description = tool.description.as_deref().unwrap_or_default().to_string();
    let mut input = Value::Object((*tool.input_schema).clone());
    if let Value::Object(m) = &mut input {
        m.entry("type").or_insert_with(|| json!("object"));
    }
    let mut def = ToolDef::new(path, title, description)
        .with_input(input)
        .with_annotations(annotations(tool));
    if let Some(out) = &tool.output_schema {
        def = def.with_output(Value::Object((**out).clone()));
    }
    def.origin = format!("source:{namespace}");
    // The upstream's own declaration, for virtual servers that serve it under its own name.
    def.native = serde_json::to_value(tool).ok();
    def
}

/// The Toolshed annotations of an upstream tool, following the MCP defaults (module docs).
pub fn annotations(tool: &McpTool) -> Annotations {
    let hints = tool.annotations.as_ref();
    let read_only = hints.and_then(|a| a.read_only_hint).unwrap_or(false);
    if read_only {
        return Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            ..Default::default()
        };
    }
    Annotations {
        read_only: false,
        destructive: hints.and_then(|a| a.destructive_hint).unwrap_or(true),
        idempotent: hints.and_then(|a| a.idempotent_hint).unwrap_or(false),
        ..Default::default()
    }
}

/// Converts a completed `tools/call` result (module docs).
pub fn convert_result(result: CallToolResult) -> Result<Value, ToolError> {
    let content: Vec<Value> = result
        .content
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    convert_parts(
        content,
        result.is_error == Some(true),
        result.structured_content,
    )
}

/// [`convert_result`] of the result as JSON, as a relaying face keeps it (without serialising
/// its content a second time).
pub fn convert_result_value(result: &Value) -> Result<Value, ToolError> {
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let structured = result
        .get("structuredContent")
        .filter(|v| !v.is_null())
        .cloned();
    convert_parts(content, is_error, structured)
}

fn convert_parts(
    content: Vec<Value>,
    is_error: bool,
    structured: Option<Value>,
) -> Result<Value, ToolError> {
    if is_error {
        let text: Vec<&str> = content
            .iter()
            .filter(|c| c["type"] == "text")
            .filter_map(|c| c["text"].as_str())
            .collect();
        let message = if text.is_empty() {
            "the upstream tool reported an error without a message".to_string()
        } else {
            text.join("\n")
        };
        let mut err = ToolError::upstream(message);
        if let Some(data) = structured {
            err = err.with_data(data);
        }
        return Err(err);
    }
    if let Some(structured) = structured {
        return Ok(structured);
    }
    Ok(convert_content(content))
}

/// Whether `text` may be JSON: its first character starts a JSON value. Most text is not,
/// and a failed parse costs an error built and dropped.
fn may_be_json(text: &str) -> bool {
    matches!(
        text.trim_start().as_bytes().first(),
        Some(b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n')
    )
}

fn convert_content(mut content: Vec<Value>) -> Value {
    if content.len() == 1 && content[0]["type"] == "text" {
        let text = content[0]["text"].as_str().unwrap_or_default();
        let parsed = may_be_json(text)
            .then(|| serde_json::from_str::<Value>(text).ok())
            .flatten();
        return parsed.unwrap_or_else(|| Value::String(text.to_string()));
    }
    Value::Array(content.drain(..).map(convert_item).collect())
}

fn convert_item(item: Value) -> Value {
    let Value::Object(mut m) = item else {
        return item;
    };
    match m.get("type").and_then(Value::as_str) {
        Some("text") => m.remove("text").unwrap_or(Value::String(String::new())),
        Some("image") | Some("audio") => {
            shrink_binary(&mut m, "data");
            m.remove("annotations");
            Value::Object(m)
        }
        Some("resource") => {
            if let Some(Value::Object(res)) = m.get_mut("resource") {
                shrink_binary(res, "blob");
            }
            Value::Object(m)
        }
        _ => Value::Object(m),
    }
}

/// Replaces a base64 field by its decoded size, keeping the data when it is small.
fn shrink_binary(m: &mut Map<String, Value>, field: &str) {
    let Some(Value::String(b64)) = m.get(field) else {
        return;
    };
    let trimmed = b64.trim_end_matches('=');
    let bytes = trimmed.len() * 3 / 4;
    if b64.len() > INLINE_BINARY_LIMIT {
        m.remove(field);
    }
    m.insert("bytes".into(), json!(bytes));
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ContentBlock as Content, ToolAnnotations};
    use std::sync::Arc;

    fn tool(name: &str) -> McpTool {
        let schema = json!({"type": "object", "properties": {"x": {"type": "string"}}});
        McpTool::new(
            name.to_string(),
            "does things",
            Arc::new(schema.as_object().unwrap().clone()),
        )
    }

    #[test]
    fn paths_titles_and_duplicates() {
        let mut titled = tool("search.v2");
        titled.title = Some("Search Everything".into());
        let tools = vec![
            tool("createEntities"),
            tool("get-item"),
            tool("get_item"),
            tool("GetItem"),
            titled,
        ];
        let mapped = map_tools("memory", &tools);
        let paths: Vec<&str> = mapped.iter().map(|m| m.def.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "memory.create_entities",
                "memory.get_item",
                "memory.get_item_2",
                "memory.get_item_3",
                "memory.search_v2"
            ]
        );
        assert_eq!(mapped[0].def.name, "Create Entities");
        assert_eq!(mapped[0].remote_name, "createEntities");
        assert_eq!(mapped[2].remote_name, "get_item");
        assert_eq!(mapped[4].def.name, "Search Everything");
        assert_eq!(mapped[0].def.description, "does things");
        assert_eq!(mapped[0].def.origin, "source:memory");
        assert_eq!(
            mapped[0].def.input_schema["properties"]["x"]["type"],
            "string"
        );
        assert!(mapped[0].def.output_schema.is_none());
    }

    #[test]
    fn annotation_title_wins_and_output_schema_is_kept() {
        let mut t = tool("x");
        t.title = Some("Top".into());
        t.annotations = Some(ToolAnnotations::with_title("From Annotations"));
        t.output_schema = Some(Arc::new(
            json!({"type": "object"}).as_object().unwrap().clone(),
        ));
        let m = &map_tools("ns", &[t])[0];
        assert_eq!(m.def.name, "From Annotations");
        assert_eq!(m.def.output_schema, Some(json!({"type": "object"})));
    }

    #[test]
    fn schema_without_type_gets_object() {
        let t = McpTool::new("x", "d", Arc::new(Map::new()));
        assert_eq!(map_tools("ns", &[t])[0].def.input_schema["type"], "object");
    }

    #[test]
    fn annotation_defaults_follow_the_spec() {
        let with = |ro, de, id| {
            let mut t = tool("x");
            t.annotations = Some(ToolAnnotations::from_raw(None, ro, de, id, None));
            annotations(&t)
        };
        // No hints at all: not read-only, so destructive by default.
        assert_eq!(annotations(&tool("x")), Annotations::DESTRUCTIVE);
        assert_eq!(with(Some(true), None, None), Annotations::READ_ONLY);
        // readOnly wins over a contradictory destructive hint.
        assert_eq!(with(Some(true), Some(true), None), Annotations::READ_ONLY);
        assert_eq!(with(Some(false), Some(false), None), Annotations::WRITE);
        assert_eq!(
            with(None, Some(false), Some(true)),
            Annotations {
                read_only: false,
                destructive: false,
                idempotent: true,
                ..Default::default()
            }
        );
        assert_eq!(with(None, Some(true), None), Annotations::DESTRUCTIVE);
    }

    #[test]
    fn results_convert() {
        let r = CallToolResult::success(vec![Content::text("hello")]);
        assert_eq!(convert_result(r).unwrap(), json!("hello"));

        let r = CallToolResult::success(vec![Content::text(r#"{"a": [1, 2]}"#)]);
        assert_eq!(convert_result(r).unwrap(), json!({"a": [1, 2]}));

        let r = CallToolResult::success(vec![Content::text("one"), Content::text("two")]);
        assert_eq!(convert_result(r).unwrap(), json!(["one", "two"]));

        let r = CallToolResult::structured(json!({"sum": 3}));
        assert_eq!(convert_result(r).unwrap(), json!({"sum": 3}));

        let r = CallToolResult::success(vec![]);
        assert_eq!(convert_result(r).unwrap(), json!([]));
    }

    /// A relaying face converts the result it kept as JSON: the same as converting the result.
    #[test]
    fn results_as_json_convert_the_same() {
        let results = [
            CallToolResult::success(vec![Content::text("hello")]),
            CallToolResult::success(vec![Content::text(" [1, \"x\"]")]),
            CallToolResult::success(vec![
                Content::text("42"),
                Content::image("aGk=", "image/png"),
            ]),
            CallToolResult::success(vec![Content::text("true story")]),
            CallToolResult::structured(json!({"sum": 3})),
            CallToolResult::error(vec![Content::text("bad")]),
            CallToolResult::structured_error(json!({"why": "no"})),
            CallToolResult::success(vec![]),
        ];
        for r in results {
            let as_json = serde_json::to_value(&r).unwrap();
            let (a, b) = (convert_result(r), convert_result_value(&as_json));
            match (a, b) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{as_json}"),
                (Err(a), Err(b)) => {
                    assert_eq!((a.message, a.data), (b.message, b.data), "{as_json}")
                }
                (a, b) => panic!("{as_json}: {a:?} vs {b:?}"),
            }
        }
        assert!(!may_be_json("hello") && !may_be_json("") && may_be_json(" {\"a\":1}"));
    }

    #[test]
    fn errors_carry_the_text() {
        let r = CallToolResult::error(vec![Content::text("bad"), Content::text("worse")]);
        let e = convert_result(r).unwrap_err();
        assert_eq!(e.kind, toolshed_core::ToolErrorKind::Upstream);
        assert_eq!(e.message, "bad\nworse");

        let r = CallToolResult::error(vec![]);
        assert!(convert_result(r)
            .unwrap_err()
            .message
            .contains("without a message"));
    }

    #[test]
    fn images_keep_small_data_and_drop_large() {
        let small = "aGVsbG8="; // "hello"
        let large = "A".repeat(INLINE_BINARY_LIMIT + 4);
        let r = CallToolResult::success(vec![
            Content::text("pics"),
            Content::image(small, "image/png"),
            Content::image(large.clone(), "image/png"),
        ]);
        let v = convert_result(r).unwrap();
        assert_eq!(v[0], "pics");
        assert_eq!(v[1]["type"], "image");
        assert_eq!(v[1]["mimeType"], "image/png");
        assert_eq!(v[1]["bytes"], 5);
        assert_eq!(v[1]["data"], small);
        assert_eq!(v[2]["bytes"], large.len() * 3 / 4);
        assert!(v[2].get("data").is_none());
    }
}
