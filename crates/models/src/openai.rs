//! The Chat Completions wire format: the request body and the streamed answer.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::sse::SseEvent;
use crate::{parse_arguments, ChatRequest, Completion, Message, ToolCall, Usage};

/// The request body (streamed, usage asked for).
pub fn body(req: &ChatRequest) -> Value {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    for m in &req.messages {
        messages.push(match m {
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut a = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    if content.is_empty() {
                        a["content"] = Value::Null;
                    }
                    a["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function", "function": {
                                "name": c.name, "arguments": c.arguments.to_string()
                            }})
                        })
                        .collect();
                }
                a
            }
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
        });
    }
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters
                }})
            })
            .collect();
    }
    if let Some(n) = req.max_tokens {
        body["max_tokens"] = json!(n);
    }
    body
}

/// A tool call being assembled from its deltas.
#[derive(Default)]
struct Partial {
    id: String,
    name: String,
    arguments: String,
}

/// The answer assembled from the stream's chunks.
#[derive(Default)]
pub struct Stream {
    text: String,
    calls: BTreeMap<u64, Partial>,
    usage: Usage,
    stop_reason: String,
    pub done: bool,
}

impl Stream {
    /// Reads one event; text deltas go to `on_text`. `Err` is a message for a broken stream
    /// or an error the server sent inside it.
    pub fn event(&mut self, ev: &SseEvent, on_text: &mut dyn FnMut(&str)) -> Result<(), String> {
        if ev.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value =
            serde_json::from_str(&ev.data).map_err(|e| format!("a chunk is not JSON: {e}"))?;
        if let Some(err) = chunk.get("error") {
            return Err(error_message(err));
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Usage {
                input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
            };
        }
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            let delta = &choice["delta"];
            if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                self.text.push_str(t);
                on_text(t);
            }
            for tc in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = tc["index"].as_u64().unwrap_or(0);
                let p = self.calls.entry(index).or_default();
                if let Some(id) = tc["id"].as_str() {
                    p.id.push_str(id);
                }
                if let Some(n) = tc["function"]["name"].as_str() {
                    p.name.push_str(n);
                }
                if let Some(a) = tc["function"]["arguments"].as_str() {
                    p.arguments.push_str(a);
                }
            }
            if let Some(r) = choice["finish_reason"].as_str() {
                self.stop_reason = r.to_string();
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Completion {
        Completion {
            text: self.text,
            tool_calls: self
                .calls
                .into_iter()
                .map(|(i, p)| ToolCall {
                    id: if p.id.is_empty() {
                        format!("call_{i}")
                    } else {
                        p.id
                    },
                    name: p.name,
                    arguments: parse_arguments(&p.arguments),
                })
                .collect(),
            usage: self.usage,
            stop_reason: self.stop_reason,
        }
    }
}

/// The message of an error body (`{"error": {"message"}}`), or the body itself.
pub fn error_message(err: &Value) -> String {
    err.get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseParser;

    #[test]
    fn interleaved_parallel_calls_with_split_arguments_assemble() {
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"look."}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"tables__rows__query","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"web__fetch","arguments":"{\"u"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"table\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"rl\":\"https://a.example\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"t\"}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#,
            "[DONE]",
        ];
        let text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        let mut parser = SseParser::default();
        let mut stream = Stream::default();
        let mut seen = String::new();
        for byte in text.as_bytes().chunks(7) {
            for ev in parser.push(byte).unwrap() {
                stream.event(&ev, &mut |t| seen.push_str(t)).unwrap();
            }
        }
        assert!(stream.done);
        let c = stream.finish();
        assert_eq!(seen, "Let me look.");
        assert_eq!(c.text, "Let me look.");
        assert_eq!(c.tool_calls.len(), 2);
        assert_eq!(c.tool_calls[0].id, "call_a");
        assert_eq!(c.tool_calls[0].arguments, json!({"table": "t"}));
        assert_eq!(
            c.tool_calls[1].arguments,
            json!({"url": "https://a.example"})
        );
        assert_eq!(c.usage.total(), 19);
        assert_eq!(c.stop_reason, "tool_calls");
    }

    #[test]
    fn the_body_carries_tool_calls_and_results_in_openai_shape() {
        let req = ChatRequest {
            model: "m".into(),
            system: "be brief".into(),
            messages: vec![
                Message::User {
                    content: "hi".into(),
                },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "t".into(),
                        arguments: json!({"a": 1}),
                    }],
                },
                Message::Tool {
                    tool_call_id: "c1".into(),
                    name: "t".into(),
                    content: "ok".into(),
                    is_error: false,
                },
            ],
            tools: vec![],
            max_tokens: None,
        };
        let b = body(&req);
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["messages"][2]["content"], Value::Null);
        assert_eq!(
            b["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(b["messages"][3]["tool_call_id"], "c1");
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert!(b.get("tools").is_none());
    }
}
