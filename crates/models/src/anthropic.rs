//! The Messages wire format: the request body and the streamed answer.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::sse::SseEvent;
use crate::{parse_arguments, ChatRequest, Completion, Message, ToolCall, Usage};

/// The API version sent in `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when the request sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The request body (streamed). Tool results travel in user turns, and consecutive turns of
/// one role are merged, as the API requires alternating roles.
pub fn body(req: &ChatRequest) -> Value {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in &req.messages {
        let (role, blocks) = match m {
            Message::User { content } => ("user", vec![json!({"type": "text", "text": content})]),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if !content.is_empty() {
                    blocks.push(json!({"type": "text", "text": content}));
                }
                for c in tool_calls {
                    blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
                }
                ("assistant", blocks)
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content, "is_error": is_error}),
                ],
            ),
        };
        match turns.last_mut() {
            Some((r, b)) if *r == role => b.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "max_tokens": req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "stream": true,
    });
    if !req.system.is_empty() {
        body["system"] = json!(req.system);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

/// One content block being assembled.
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
}

/// The answer assembled from the stream's events.
#[derive(Default)]
pub struct Stream {
    text: String,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stop_reason: String,
    pub done: bool,
}

impl Stream {
    /// Reads one event; text deltas go to `on_text`. `Err` is a message for a broken stream
    /// or an `error` event.
    pub fn event(&mut self, ev: &SseEvent, on_text: &mut dyn FnMut(&str)) -> Result<(), String> {
        let v: Value =
            serde_json::from_str(&ev.data).map_err(|e| format!("an event is not JSON: {e}"))?;
        let kind = v["type"].as_str().unwrap_or(ev.event.as_str());
        match kind {
            "message_start" => {
                let u = &v["message"]["usage"];
                self.usage.input_tokens = u["input_tokens"].as_u64().unwrap_or(0)
                    + u["cache_read_input_tokens"].as_u64().unwrap_or(0)
                    + u["cache_creation_input_tokens"].as_u64().unwrap_or(0);
                self.usage.output_tokens = u["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let index = v["index"].as_u64().unwrap_or(0);
                let b = &v["content_block"];
                let block = match b["type"].as_str() {
                    Some("tool_use") => Block::ToolUse {
                        id: b["id"].as_str().unwrap_or_default().to_string(),
                        name: b["name"].as_str().unwrap_or_default().to_string(),
                        json: String::new(),
                    },
                    _ => Block::Text,
                };
                if let Some(t) = b["text"].as_str().filter(|t| !t.is_empty()) {
                    self.text.push_str(t);
                    on_text(t);
                }
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let index = v["index"].as_u64().unwrap_or(0);
                let d = &v["delta"];
                match d["type"].as_str() {
                    Some("text_delta") => {
                        if let Some(t) = d["text"].as_str() {
                            self.text.push_str(t);
                            on_text(t);
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some(Block::ToolUse { json, .. }) = self.blocks.get_mut(&index) {
                            json.push_str(d["partial_json"].as_str().unwrap_or_default());
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = v["delta"]["stop_reason"].as_str() {
                    self.stop_reason = r.to_string();
                }
                if let Some(n) = v["usage"]["output_tokens"].as_u64() {
                    self.usage.output_tokens = n;
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(error_message(&v)),
            _ => {} // ping, content_block_stop, and events added later
        }
        Ok(())
    }

    pub fn finish(self) -> Completion {
        Completion {
            text: self.text,
            tool_calls: self
                .blocks
                .into_values()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, json } => Some(ToolCall {
                        id,
                        name,
                        arguments: parse_arguments(&json),
                    }),
                    Block::Text => None,
                })
                .collect(),
            usage: self.usage,
            stop_reason: self.stop_reason,
        }
    }
}

/// The message of an error body (`{"type":"error","error":{"type","message"}}`).
pub fn error_message(v: &Value) -> String {
    let e = &v["error"];
    match (e["type"].as_str(), e["message"].as_str()) {
        (Some(t), Some(m)) => format!("{t}: {m}"),
        (None, Some(m)) => m.to_string(),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseParser;

    #[test]
    fn text_and_a_tool_use_with_split_json_assemble() {
        let events = [
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":25,"output_tokens":1}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            ("ping", r#"{"type":"ping"}"#),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"tables__rows__query","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"tab"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"le\": \"t\"}"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":1}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":15}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ];
        let text: String = events
            .iter()
            .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
            .collect();
        let mut parser = SseParser::default();
        let mut stream = Stream::default();
        for byte in text.as_bytes().chunks(5) {
            for ev in parser.push(byte).unwrap() {
                stream.event(&ev, &mut |_| {}).unwrap();
            }
        }
        assert!(stream.done);
        let c = stream.finish();
        assert_eq!(c.text, "Checking");
        assert_eq!(c.tool_calls[0].name, "tables__rows__query");
        assert_eq!(c.tool_calls[0].arguments, json!({"table": "t"}));
        assert_eq!(c.usage.input_tokens, 25);
        assert_eq!(c.usage.output_tokens, 15);
        assert_eq!(c.stop_reason, "tool_use");
    }

    #[test]
    fn tool_results_merge_into_one_user_turn() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: json!({}),
        };
        let result = |id: &str| Message::Tool {
            tool_call_id: id.into(),
            name: "t".into(),
            content: "r".into(),
            is_error: false,
        };
        let req = ChatRequest {
            model: "m".into(),
            system: "s".into(),
            messages: vec![
                Message::User {
                    content: "go".into(),
                },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![call("a"), call("b")],
                },
                result("a"),
                result("b"),
            ],
            tools: vec![],
            max_tokens: None,
        };
        let b = body(&req);
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[2]["role"], "user");
        assert_eq!(m[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(b["system"], "s");
        assert_eq!(b["max_tokens"], DEFAULT_MAX_TOKENS);
    }
}
