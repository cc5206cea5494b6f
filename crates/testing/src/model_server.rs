//! A scripted model server speaking the real wire formats of OpenAI Chat Completions
//! (`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`), streamed.
//!
//! No model API can be reached from the test machines, so agent runs are tested against this
//! server. It is stateless per conversation: the answer to a request is the script's turn
//! number *n*, where *n* counts the assistant turns already in the request's messages, so
//! concurrent runs and a run resumed after a restart get the same answers. It behaves like the
//! real services where clients commonly break:
//!
//! - tool-call arguments split at arbitrary byte positions across chunks
//!   ([`ModelScript::split`] bytes per piece);
//! - parallel tool calls with interleaved indices (OpenAI) and `input_json_delta` pieces with a
//!   `ping` between blocks (Anthropic);
//! - usage sent only when `stream_options.include_usage` asks for it (OpenAI), in
//!   `message_start` and `message_delta` (Anthropic);
//! - error bodies in each provider's shape, `429` with `Retry-After`, `401`.
//!
//! Every request body is kept ([`ModelServer::requests`]) so tests can check what was sent.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// One answer of the model.
#[derive(Debug, Clone, Default)]
pub struct Turn {
    pub text: String,
    /// `(tool name, arguments as JSON text)`.
    pub calls: Vec<(String, String)>,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Turn {
    /// A final answer.
    pub fn text(text: &str) -> Self {
        Self {
            text: text.into(),
            input_tokens: 10,
            output_tokens: 5,
            ..Self::default()
        }
    }

    /// Tool calls, each `(name, arguments)`.
    pub fn calls(calls: &[(&str, Value)]) -> Self {
        Self {
            calls: calls
                .iter()
                .map(|(n, a)| (n.to_string(), a.to_string()))
                .collect(),
            input_tokens: 20,
            output_tokens: 8,
            ..Self::default()
        }
    }
}

/// A failure answered before any turn (consumed in order, once each).
#[derive(Debug, Clone)]
pub struct Failure {
    pub status: u16,
    pub retry_after: Option<u64>,
    pub message: String,
}

/// What the server answers.
#[derive(Debug, Clone, Default)]
pub struct ModelScript {
    pub turns: Vec<Turn>,
    /// Answered to the first requests, one each, before the turns.
    pub failures: Vec<Failure>,
    /// Bytes per piece when arguments and text are split into deltas (default 3).
    pub split: usize,
    /// Other scripts, each for the conversations whose instructions (system prompt) contain
    /// its marker text: several agents (a run and its sub-agents) on one server.
    pub by_instructions: Vec<(String, Vec<Turn>)>,
}

#[derive(Default)]
struct Shared {
    script: ModelScript,
    failures_left: Vec<Failure>,
    requests: Vec<(String, HeaderMap, Value)>,
}

/// A running scripted server.
pub struct ModelServer {
    pub addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ModelServer {
    /// Starts the server on a free loopback port.
    pub async fn start(script: ModelScript) -> Self {
        let mut failures = script.failures.clone();
        failures.reverse();
        let shared = Arc::new(Mutex::new(Shared {
            script,
            failures_left: failures,
            requests: Vec::new(),
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        Self { addr, shared, task }
    }

    /// The base URL an OpenAI client uses (`…/v1`).
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL an Anthropic client uses.
    pub fn anthropic_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far: `(path, headers, body)`.
    pub fn requests(&self) -> Vec<(String, HeaderMap, Value)> {
        self.shared.lock().unwrap().requests.clone()
    }
}

/// The turn for a request and the failure to answer instead, if any.
fn next(
    shared: &Mutex<Shared>,
    path: &str,
    headers: &HeaderMap,
    body: &Value,
) -> Result<(Turn, usize), Failure> {
    let mut s = shared.lock().unwrap();
    s.requests
        .push((path.to_string(), headers.clone(), body.clone()));
    if let Some(f) = s.failures_left.pop() {
        return Err(f);
    }
    let n = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
    let system = match &body["system"] {
        Value::Null => body["messages"][0]["content"].to_string(),
        other => other.to_string(),
    };
    let turns = s
        .script
        .by_instructions
        .iter()
        .find(|(marker, _)| system.contains(marker.as_str()))
        .map_or(&s.script.turns, |(_, turns)| turns);
    let turn = turns
        .get(n)
        .cloned()
        .unwrap_or_else(|| Turn::text("(the script has no more turns)"));
    Ok((turn, s.script.split.max(1)))
}

fn pieces(text: &str, size: usize) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let mut end = (start + size).min(bytes.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(text[start..end].to_string());
        start = end;
    }
    out
}

fn sse(events: Vec<(Option<&str>, Value)>, done: bool) -> Response {
    let mut text = String::new();
    for (name, data) in events {
        if let Some(n) = name {
            text.push_str(&format!("event: {n}\n"));
        }
        text.push_str(&format!("data: {data}\n\n"));
    }
    if done {
        text.push_str("data: [DONE]\n\n");
    }
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(text))
        .unwrap()
}

fn failure(f: Failure, body: Value) -> Response {
    let mut r = (
        StatusCode::from_u16(f.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response();
    if let Some(secs) = f.retry_after {
        r.headers_mut().insert("retry-after", secs.into());
    }
    r
}

async fn openai(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let (turn, split) = match next(&shared, "/v1/chat/completions", &headers, &body) {
        Ok(t) => t,
        Err(f) => {
            let kind = if f.status == 429 {
                "rate_limit_exceeded"
            } else {
                "invalid_request_error"
            };
            let message = f.message.clone();
            return failure(
                f,
                json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
            );
        }
    };
    let model = body["model"].as_str().unwrap_or("model").to_string();
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model,
               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let mut events = vec![(
        None,
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
    )];
    for p in pieces(&turn.text, split) {
        events.push((None, chunk(json!({"content": p}), Value::Null)));
    }
    // Each call opens with its id and name, then the calls' argument pieces interleave.
    for (i, (name, _)) in turn.calls.iter().enumerate() {
        events.push((None, chunk(json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": ""}}]}), Value::Null)));
    }
    let split_args: Vec<Vec<String>> = turn.calls.iter().map(|(_, a)| pieces(a, split)).collect();
    let longest = split_args.iter().map(Vec::len).max().unwrap_or(0);
    for k in 0..longest {
        for (i, parts) in split_args.iter().enumerate() {
            if let Some(p) = parts.get(k) {
                events.push((
                    None,
                    chunk(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                        Value::Null,
                    ),
                ));
            }
        }
    }
    let finish = if turn.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    events.push((None, chunk(json!({}), json!(finish))));
    if body["stream_options"]["include_usage"] == true {
        events.push((None, json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model, "choices": [],
            "usage": {"prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens, "total_tokens": turn.input_tokens + turn.output_tokens}})));
    }
    sse(events, true)
}

async fn anthropic(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let (turn, split) = match next(&shared, "/v1/messages", &headers, &body) {
        Ok(t) => t,
        Err(f) => {
            let kind = match f.status {
                401 => "authentication_error",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                s if s >= 500 => "api_error",
                _ => "invalid_request_error",
            };
            let message = f.message.clone();
            return failure(
                f,
                json!({"type": "error", "error": {"type": kind, "message": message}}),
            );
        }
    };
    let model = body["model"].as_str().unwrap_or("model").to_string();
    let mut events: Vec<(Option<&str>, Value)> = vec![(
        Some("message_start"),
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": model,
            "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": turn.input_tokens, "output_tokens": 1}}}),
    )];
    let mut index = 0;
    if !turn.text.is_empty() {
        events.push((Some("content_block_start"), json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
        events.push((Some("ping"), json!({"type": "ping"})));
        for p in pieces(&turn.text, split) {
            events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}})));
        }
        events.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for (i, (name, args)) in turn.calls.iter().enumerate() {
        events.push((Some("content_block_start"), json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}}})));
        events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": ""}})));
        for p in pieces(args, split) {
            events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": p}})));
        }
        events.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": index}),
        ));
        events.push((Some("ping"), json!({"type": "ping"})));
        index += 1;
    }
    let stop = if turn.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    events.push((Some("message_delta"), json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": turn.output_tokens}})));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    sse(events, false)
}
