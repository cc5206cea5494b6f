//! The fast path of plain `tools/call` over streamable HTTP (`src/direct.rs`): the caller's task
//! posts the call and reads its answer. Results and errors as through rmcp's session, the
//! upstream's log messages and requests during a call, cancellation, and the fall back to rmcp
//! when the upstream's session expired.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};
use toolshed_core::notices::{Notice, Notices};
use toolshed_core::{ClientChannel, Progress, ProgressSink, ToolContext, ToolError, ToolErrorKind};
use toolshed_mcp_source::{Upstream, UpstreamConfig};

fn http(name: &str, url: &str) -> UpstreamConfig {
    UpstreamConfig::http(name, url)
        .with_allow_private(true)
        .with_connect_timeout(Duration::from_secs(10))
        .with_call_timeout(Duration::from_secs(10))
}

#[tokio::test]
async fn plain_calls_over_http_take_the_direct_path() {
    let server = HttpServer::start(&[]).await;
    let up = Upstream::connect(http("web", &server.url)).await.unwrap();
    let tools = up.tools().await.unwrap();
    assert_eq!(up.direct_calls(), 0, "listing is not a call");

    assert_eq!(
        call(tool(&tools, "web.echo"), json!({"text": "hi"}))
            .await
            .unwrap(),
        json!("hi")
    );
    assert_eq!(up.direct_calls(), 1);
    assert_eq!(
        call(tool(&tools, "web.add"), json!({"a": 1.5, "b": 2}))
            .await
            .unwrap(),
        json!({"sum": 3.5})
    );
    // A tool's own error and a JSON-RPC error come back as through rmcp's session.
    let e = call(tool(&tools, "web.fail"), json!({})).await.unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Upstream);
    assert_eq!(e.message, "the widget is broken");
    let e = call(tool(&tools, "web.add"), json!({"a": "x"}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput, "{e:?}");
    assert!(e.message.contains("'a' and 'b' must be numbers"), "{e:?}");
    assert_eq!(up.direct_calls(), 4);

    // The post carries the session and the negotiated revision, like rmcp's own.
    let out = call(tool(&tools, "web.http_headers"), json!({}))
        .await
        .unwrap();
    assert!(out["headers"]["mcp-session-id"].is_string(), "{out}");
    assert_eq!(
        out["headers"]["mcp-protocol-version"], "2025-11-25",
        "{out}"
    );
    assert_eq!(up.direct_calls(), 5);

    // Concurrent calls each read their own answer.
    let echo = tool(&tools, "web.echo").clone();
    let calls = (0..16).map(|i| {
        let t = echo.clone();
        async move { (i, call(&t, json!({"text": format!("m{i}")})).await.unwrap()) }
    });
    for (i, out) in futures::future::join_all(calls).await {
        assert_eq!(out, json!(format!("m{i}")));
    }
    assert_eq!(up.direct_calls(), 21);

    // A call that relays progress goes through rmcp's session (it knows the token).
    let steps = tool(&tools, "web.steps");
    let reports = Arc::new(std::sync::Mutex::new(Vec::<Progress>::new()));
    let sink = {
        let reports = reports.clone();
        ProgressSink::new(move |p| reports.lock().unwrap().push(p))
    };
    let ctx =
        ToolContext::new(Arc::from("tester"), steps.def.path.clone()).with_progress(Some(sink));
    let out = steps.handler.call(ctx, json!({})).await.unwrap();
    assert_eq!(out, json!("3 steps"));
    assert_eq!(reports.lock().unwrap().len(), 3);
    assert_eq!(up.direct_calls(), 21);
    up.shutdown().await;
}

/// rmcp's servers send a call's log messages on the session's GET stream (rmcp's side); they
/// still arrive while the call itself takes the direct path. Messages on the call's own stream
/// are [`notifications_and_requests_on_a_calls_stream_are_handled`].
#[tokio::test]
async fn log_messages_during_a_direct_call_are_relayed() {
    let server = HttpServer::start(&[]).await;
    let notices = Notices::default();
    let mut rx = notices.subscribe();
    let mut cfg = http("web", &server.url);
    cfg.notices = Some(notices);
    let up = Upstream::connect(cfg).await.unwrap();
    let tools = up.tools().await.unwrap();
    let out = call(
        tool(&tools, "web.log"),
        json!({"levels": ["info", "warning"]}),
    )
    .await
    .unwrap();
    assert_eq!(out, json!("2 messages"));
    assert_eq!(up.direct_calls(), 1);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let notice = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("the log messages were not relayed")
            .unwrap();
        if let Notice::Log(log) = notice {
            assert_eq!(log.source, "web");
            assert_eq!(log.logger.as_deref(), Some("test"));
            seen.push((log.level, log.data));
        }
    }
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        [
            ("info".to_string(), json!("a info message")),
            ("warning".to_string(), json!("a warning message")),
        ]
    );
    up.shutdown().await;
}

/// A client that takes elicitation and sampling: it answers "Ada" and "forty-two".
struct Answering;

#[async_trait::async_trait]
impl ClientChannel for Answering {
    fn client_id(&self) -> u64 {
        7
    }

    fn supports(&self, capability: &str) -> bool {
        matches!(capability, "elicitation" | "sampling")
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, ToolError> {
        match method {
            "elicitation/create" => {
                assert_eq!(params["message"], "What is your name?", "{params}");
                Ok(json!({"action": "accept", "content": {"name": "Ada"}}))
            }
            "sampling/createMessage" => Ok(json!({
                "role": "assistant",
                "content": {"type": "text", "text": "forty-two"},
                "model": "test-model"
            })),
            other => panic!("unexpected request {other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_requests_during_a_direct_call_reach_the_client_of_the_call() {
    let server = HttpServer::start(&[]).await;
    let up = Upstream::connect(http("web", &server.url)).await.unwrap();
    let tools = up.tools().await.unwrap();
    let client: Arc<dyn ClientChannel> = Arc::new(Answering);
    let call_with_client = |path: &str, args: Value| {
        let t = tool(&tools, path);
        let ctx = ToolContext::new(Arc::from("tester"), t.def.path.clone())
            .with_timeout(Duration::from_secs(10))
            .with_client(Some(client.clone()));
        t.handler.call(ctx, args)
    };
    // The upstream answers the elicitation's result as JSON text, read as JSON.
    let out = call_with_client("web.ask", json!({})).await.unwrap();
    assert_eq!(out["action"], "accept", "{out}");
    assert_eq!(out["content"]["name"], "Ada", "{out}");
    let out = call_with_client("web.sample", json!({"prompt": "six times seven?"}))
        .await
        .unwrap();
    assert_eq!(out, json!("the model said: forty-two"));
    assert_eq!(up.direct_calls(), 2);

    // A call whose client cannot be asked: the upstream hears why, as through rmcp.
    let out = call(tool(&tools, "web.sample"), json!({"prompt": "x"}))
        .await
        .unwrap_err();
    assert!(out.message.contains("sampling failed"), "{out:?}");
    assert_eq!(up.direct_calls(), 3);
    up.shutdown().await;
}

#[tokio::test]
async fn an_abandoned_direct_call_is_cancelled_upstream() {
    let server = HttpServer::start(&[]).await;
    let up = Upstream::connect(http("web", &server.url)).await.unwrap();
    let tools = up.tools().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("cancelled");
    let e = call_with_timeout(
        tool(&tools, "web.sleep"),
        json!({"ms": 30_000, "cancelled_marker": marker}),
        Duration::from_millis(500),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Timeout, "{e:?}");
    for _ in 0..100 {
        if marker.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        marker.exists(),
        "the upstream never heard that the call was cancelled"
    );
    up.shutdown().await;
}

#[tokio::test]
async fn calls_go_on_after_the_upstreams_session_expired() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let server = HttpServer::start_at(&addr, &[]).await;
    let up = Upstream::connect(http("web", &server.url)).await.unwrap();
    let tools = up.tools().await.unwrap();
    let whoami = tool(&tools, "web.whoami");
    let first = call(whoami, json!({})).await.unwrap();
    assert_eq!(first["pid"].as_u64().map(|p| p as u32), server.pid());
    assert_eq!(up.direct_calls(), 1);

    // The upstream restarts: it knows nothing of the session any more (HTTP 404).
    server.stop().await;
    let server = HttpServer::start_at(&addr, &[]).await;
    // The direct post hears "session expired" and hands the call to rmcp, which starts a new
    // session and sends it there.
    let out = call(whoami, json!({})).await.unwrap();
    assert_eq!(out["pid"].as_u64().map(|p| p as u32), server.pid());
    assert_eq!(up.direct_calls(), 1);
    // The new session's calls take the direct path again.
    let out = call(whoami, json!({})).await.unwrap();
    assert_eq!(out["pid"].as_u64().map(|p| p as u32), server.pid());
    assert_eq!(up.direct_calls(), 2);
    assert!(up.is_connected());
    up.shutdown().await;
}

/// What the scripted upstream of [`Scripted`] saw.
#[derive(Default)]
struct Seen {
    /// The ids of the `tools/call` requests, as sent.
    call_ids: Vec<Value>,
    /// The answers posted to its own requests.
    replies: Vec<Value>,
}

/// A minimal streamable HTTP upstream (2025-11-25, one session, no GET stream) whose
/// `tools/call` of `chatty` answers on an SSE stream: a priming event, a log message, an
/// `elicitation/create` (waiting for its answer, posted back) and then the result. `hasty`
/// asks the same question and answers the call at once, without waiting. `lazy`
/// (read-only) accepts a call with a string id without answering it (HTTP 202), and answers one
/// with a numeric id (rmcp's).
struct Scripted {
    seen: std::sync::Mutex<Seen>,
    replied: tokio::sync::Notify,
}

async fn scripted_post(
    axum::extract::State(fake): axum::extract::State<Arc<Scripted>>,
    body: String,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let msg: Value = serde_json::from_str(&body).unwrap();
    let json_answer = |result: Value| {
        let mut r = axum::Json(json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}))
            .into_response();
        r.headers_mut()
            .insert("mcp-session-id", "scripted-session".parse().unwrap());
        r
    };
    let method = msg["method"].as_str().unwrap_or_default();
    match method {
        "initialize" => json_answer(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "logging": {}},
            "serverInfo": {"name": "scripted", "version": "1"}
        })),
        "logging/setLevel" => json_answer(json!({})),
        "tools/list" => json_answer(json!({"tools": [
            {"name": "chatty", "inputSchema": {"type": "object"}},
            {"name": "lazy", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}},
            {"name": "hasty", "inputSchema": {"type": "object"}},
            {"name": "plain", "inputSchema": {"type": "object"}},
            {"name": "refuses", "inputSchema": {"type": "object"}},
            {"name": "broken", "inputSchema": {"type": "object"}},
            {"name": "busy", "inputSchema": {"type": "object"}}
        ]})),
        "tools/call" => {
            fake.seen.lock().unwrap().call_ids.push(msg["id"].clone());
            if msg["params"]["name"] == "plain" {
                return json_answer(
                    json!({"content": [{"type": "text", "text": "plain answer"}],
                    "structuredContent": {"n": 1}}),
                );
            }
            if msg["params"]["name"] == "refuses" {
                let mut r = axum::Json(json!({"jsonrpc": "2.0", "id": msg["id"],
                    "error": {"code": -32602, "message": "no such argument"}}))
                .into_response();
                *r.status_mut() = axum::http::StatusCode::BAD_REQUEST;
                return r;
            }
            if msg["params"]["name"] == "broken" {
                return (
                    axum::http::StatusCode::BAD_GATEWAY,
                    "upstream of the upstream is down",
                )
                    .into_response();
            }
            if msg["params"]["name"] == "busy" {
                return (
                    axum::http::StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", "7")],
                    "slow down",
                )
                    .into_response();
            }
            if msg["params"]["name"] == "hasty" {
                // Asks, and answers the call without waiting for the answer to its question.
                let ask = json!({"jsonrpc": "2.0", "id": "srv-hasty", "method": "elicitation/create",
                    "params": {"mode": "form", "message": "What is your name?",
                        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}});
                let done = json!({"jsonrpc": "2.0", "id": msg["id"],
                    "result": {"content": [{"type": "text", "text": "did not wait"}]}});
                return axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(format!(
                        "id: h-1\ndata: {ask}\n\nid: h-2\ndata: {done}\n\n"
                    )))
                    .unwrap();
            }
            if msg["params"]["name"] == "lazy" {
                if msg["id"].is_string() {
                    return axum::http::StatusCode::ACCEPTED.into_response();
                }
                return json_answer(json!({"content": [{"type": "text", "text": "lazy answer"}]}));
            }
            let (tx, rx) =
                futures::channel::mpsc::unbounded::<Result<String, std::convert::Infallible>>();
            let id = msg["id"].clone();
            let fake = fake.clone();
            tokio::spawn(async move {
                let event = |v: Value| Ok(format!("id: e-{}\ndata: {v}\n\n", rand_id()));
                let _ = tx.unbounded_send(Ok("id: e-0\nretry: 100\ndata: \n\n".into()));
                let _ = tx.unbounded_send(event(json!({
                    "jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "logger": "scripted", "data": "on the call's stream"}
                })));
                // One question per call, its answer found by its id.
                let asked = format!("srv-{}", rand_id());
                let _ = tx.unbounded_send(event(json!({
                    "jsonrpc": "2.0", "id": asked, "method": "elicitation/create",
                    "params": {"mode": "form", "message": "What is your name?",
                        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}
                })));
                let reply = loop {
                    let notified = fake.replied.notified();
                    let found = fake
                        .seen
                        .lock()
                        .unwrap()
                        .replies
                        .iter()
                        .find(|r| r["id"] == asked.as_str())
                        .cloned();
                    match found {
                        Some(r) => break r,
                        None => notified.await,
                    }
                };
                let name = reply["result"]["content"]["name"]
                    .as_str()
                    .unwrap_or("nobody")
                    .to_string();
                let _ = tx.unbounded_send(event(json!({
                    "jsonrpc": "2.0", "id": id,
                    "result": {"content": [{"type": "text", "text": format!("hello {name}")}]}
                })));
            });
            axum::response::Response::builder()
                .header("content-type", "text/event-stream")
                .body(axum::body::Body::from_stream(rx))
                .unwrap()
        }
        "" => {
            // An answer to the upstream's request.
            fake.seen.lock().unwrap().replies.push(msg);
            fake.replied.notify_waiters();
            axum::http::StatusCode::ACCEPTED.into_response()
        }
        _ => axum::http::StatusCode::ACCEPTED.into_response(),
    }
}

fn rand_id() -> u64 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Serves [`Scripted`] on 127.0.0.1; its URL.
async fn start_scripted(fake: Arc<Scripted>) -> String {
    use axum::routing::post;
    let app = axum::Router::new()
        .route(
            "/mcp",
            post(scripted_post)
                .get(|| async { axum::http::StatusCode::METHOD_NOT_ALLOWED })
                .delete(|| async { axum::http::StatusCode::OK }),
        )
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_and_requests_on_a_calls_stream_are_handled() {
    let fake = Arc::new(Scripted {
        seen: Default::default(),
        replied: tokio::sync::Notify::new(),
    });
    let url = start_scripted(fake.clone()).await;
    let notices = Notices::default();
    let mut rx = notices.subscribe();
    let mut cfg = http("fake", &url);
    cfg.notices = Some(notices);
    let up = Upstream::connect(cfg).await.unwrap();
    let tools = up.tools().await.unwrap();
    let chatty = tool(&tools, "fake.chatty");
    let ctx = ToolContext::new(Arc::from("tester"), chatty.def.path.clone())
        .with_timeout(Duration::from_secs(10))
        .with_client(Some(Arc::new(Answering)));
    let out = chatty.handler.call(ctx, json!({})).await.unwrap();
    assert_eq!(out, json!("hello Ada"));
    assert_eq!(up.direct_calls(), 1);
    {
        let seen = fake.seen.lock().unwrap();
        // The call went with an id of the fast path's own, and the elicitation was answered
        // on the session.
        assert!(
            seen.call_ids[0]
                .as_str()
                .is_some_and(|id| id.starts_with("ts-")),
            "{:?}",
            seen.call_ids
        );
        assert_eq!(seen.replies.len(), 1);
        assert!(seen.replies[0]["id"].as_str().unwrap().starts_with("srv-"));
        assert_eq!(seen.replies[0]["result"]["action"], "accept");
    }
    // The log message only came on the call's stream (the upstream has no GET stream).
    let notice = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("the log message on the call's stream was not relayed")
        .unwrap();
    let Notice::Log(log) = notice else {
        panic!("{notice:?}")
    };
    assert_eq!(log.source, "fake");
    assert_eq!(log.data, json!("on the call's stream"));

    // An upstream that accepts a call without answering it: a read-only call is sent again
    // through rmcp's session, and the session's calls keep to that from then on.
    let lazy = tool(&tools, "fake.lazy");
    assert_eq!(call(lazy, json!({})).await.unwrap(), json!("lazy answer"));
    assert_eq!(call(lazy, json!({})).await.unwrap(), json!("lazy answer"));
    assert_eq!(up.direct_calls(), 1);
    let ids = fake.seen.lock().unwrap().call_ids.clone();
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert!(
        ids[1].is_string() && ids[2].is_number() && ids[3].is_number(),
        "{ids:?}"
    );
    up.shutdown().await;
}

/// A client that answers an elicitation with its own name, after a while (so that both calls
/// are in flight when the questions come).
struct Named(&'static str, u64);

#[async_trait::async_trait]
impl ClientChannel for Named {
    fn client_id(&self) -> u64 {
        self.1
    }

    fn supports(&self, capability: &str) -> bool {
        capability == "elicitation"
    }

    async fn request(&self, _method: &str, _params: Value) -> Result<Value, ToolError> {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(json!({"action": "accept", "content": {"name": self.0}}))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_still_open_when_the_call_is_answered_still_gets_its_answer() {
    let fake = Arc::new(Scripted {
        seen: Default::default(),
        replied: tokio::sync::Notify::new(),
    });
    let url = start_scripted(fake.clone()).await;
    let up = Upstream::connect(http("fake", &url)).await.unwrap();
    let tools = up.tools().await.unwrap();
    let hasty = tool(&tools, "fake.hasty");
    let ctx = ToolContext::new(Arc::from("tester"), hasty.def.path.clone())
        .with_timeout(Duration::from_secs(10))
        .with_client(Some(Arc::new(Named("Ada", 8))));
    let out = hasty.handler.call(ctx, json!({})).await.unwrap();
    assert_eq!(out, json!("did not wait"));
    assert_eq!(up.direct_calls(), 1);
    assert!(
        fake.seen.lock().unwrap().replies.is_empty(),
        "the client was still thinking when the call was answered"
    );
    let mut reply = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        reply = fake.seen.lock().unwrap().replies.first().cloned();
        if reply.is_some() {
            break;
        }
    }
    let reply = reply.expect("the upstream's question was never answered");
    assert_eq!(reply["id"], "srv-hasty");
    assert_eq!(reply["result"]["content"]["name"], "Ada");
    up.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_answers_and_failed_posts_of_direct_calls() {
    let fake = Arc::new(Scripted {
        seen: Default::default(),
        replied: tokio::sync::Notify::new(),
    });
    let url = start_scripted(fake.clone()).await;
    let up = Upstream::connect(http("fake", &url)).await.unwrap();
    let tools = up.tools().await.unwrap();
    // A JSON answer, read as the call's response.
    let out = call(tool(&tools, "fake.plain"), json!({})).await.unwrap();
    assert_eq!(out, json!({"n": 1}));
    // A JSON-RPC error in a failed response is the upstream's refusal.
    let refused = call(tool(&tools, "fake.refuses"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::InvalidInput, "{refused:?}");
    assert!(refused.message.contains("no such argument"), "{refused:?}");
    // Anything else names the status and what the upstream said.
    let broken = call(tool(&tools, "fake.broken"), json!({}))
        .await
        .unwrap_err();
    assert!(
        broken.message.contains("502") && broken.message.contains("upstream of the upstream"),
        "{broken:?}"
    );
    // Turned away as busy: the status and when to retry reach the caller, on the direct path
    // and on rmcp's (a call relaying progress) alike.
    let busy = call(tool(&tools, "fake.busy"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(
        busy.data,
        Some(json!({"status": 429, "retryAfter": "7"})),
        "{busy:?}"
    );
    assert!(
        busy.message.contains("retry after 7") && busy.message.contains("did not run"),
        "{busy:?}"
    );
    assert_eq!(up.direct_calls(), 4);
    let ids = fake.seen.lock().unwrap().call_ids.clone();
    assert!(
        ids.iter()
            .all(|id| id.as_str().is_some_and(|s| s.starts_with("ts-"))),
        "{ids:?}"
    );
    let busy = tool(&tools, "fake.busy");
    let sink = ProgressSink::new(|_| {});
    let ctx =
        ToolContext::new(Arc::from("tester"), busy.def.path.clone()).with_progress(Some(sink));
    let refused = busy.handler.call(ctx, json!({})).await.unwrap_err();
    assert_eq!(
        refused.data,
        Some(json!({"status": 429, "retryAfter": "7"})),
        "{refused:?}"
    );
    assert_eq!(up.direct_calls(), 4, "that one took rmcp's path");
    up.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_on_a_calls_stream_goes_to_that_calls_client() {
    let fake = Arc::new(Scripted {
        seen: Default::default(),
        replied: tokio::sync::Notify::new(),
    });
    let url = start_scripted(fake.clone()).await;
    let up = Upstream::connect(http("fake", &url)).await.unwrap();
    let tools = up.tools().await.unwrap();
    let chatty = tool(&tools, "fake.chatty");
    // Two calls of two different clients in flight at once: a question that came on neither
    // call's stream could not be told apart; on a call's own stream it can.
    let ask = |name: &'static str, id: u64| {
        let ctx = ToolContext::new(Arc::from("tester"), chatty.def.path.clone())
            .with_timeout(Duration::from_secs(10))
            .with_client(Some(Arc::new(Named(name, id))));
        chatty.handler.call(ctx, json!({}))
    };
    let (ada, bob) = tokio::join!(ask("Ada", 21), ask("Bob", 22));
    assert_eq!(ada.unwrap(), json!("hello Ada"));
    assert_eq!(bob.unwrap(), json!("hello Bob"));
    assert_eq!(up.direct_calls(), 2);
    up.shutdown().await;
}
