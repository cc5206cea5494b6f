//! The direct path of plain `tools/call` requests over streamable HTTP.
//!
//! rmcp's session machinery hands every request of a session from the HTTP task to the
//! session's worker, from there to the service loop, to a task per request, and the answer back
//! the same way, as an SSE stream. For a call that only needs its answer, that is most of the
//! gateway's own cost. This layer serves such a call itself: it takes the session's handler and
//! client (registered when the session was initialized, see [`Direct`]), runs the very same
//! [`ToolshedMcp::call_tool_in`] as rmcp's path (so policy, approvals, audit and the answer
//! cannot differ) in a task of its own (so that, as on rmcp's path, a client that goes away
//! does not cut the call short), and answers `application/json`, which the streamable HTTP
//! transport allows for any request; a call that takes longer than [`JSON_WAIT`] is answered
//! as an SSE stream with keep-alive comments instead.
//!
//! Everything that is not plainly such a call goes on to rmcp unchanged:
//! - any method but `tools/call` (and a `notifications/cancelled` for a call of this path,
//!   which cancels it here whatever else holds), any response, batch or malformed body;
//! - a call with `_meta` (progress tokens, per-request versions), a task, or 2026-07-28
//!   `requestState`/`inputResponses`;
//! - a session whose client declared elicitation, sampling or tasks (the upstream's requests
//!   and elicited approvals travel on the call's SSE stream, which only rmcp keeps), or that
//!   negotiated 2026-07-28 (those have no session): such sessions are never registered;
//! - headers rmcp checks that are not the plain case: a `MCP-Protocol-Version` other than the
//!   session's, SEP-2243 `Mcp-*` routing headers, an `Accept` without both JSON and SSE, a body
//!   without a known length or larger than [`MAX_BODY`];
//! - a session whose rmcp worker has ended, and one call per quarter of the idle limit, so
//!   that rmcp's idle timer sees the session in use.
//!
//! Host and Origin are checked for every route by the listener's guard in front of this layer;
//! the caller was authenticated, and the session found to be its own, by [`crate::admit`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, NumberOrString, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::Notify;
use toolshed_identity::Who;

use crate::sessions::SessionTable;
use crate::{CallIn, ServerSet, ToolshedMcp};

/// Larger request bodies (or ones without a length) go to rmcp.
pub(crate) const MAX_BODY: u64 = 256 * 1024;

/// Calls of one session served here at once; more go to rmcp.
const MAX_IN_FLIGHT: usize = 256;

/// Cancellations of calls not (yet) served here that a session remembers, and for how long:
/// a cancellation can overtake its call on another connection. MCP forbids reusing a
/// request id within a session, so remembering one never cancels another call.
const EARLY_CANCELS: usize = 64;
const EARLY_CANCEL_TTL: Duration = Duration::from_secs(30);
/// Longer request ids (keys) are not remembered: no client makes such ids, and each kept one
/// costs its length.
const MAX_EARLY_ID: usize = 128;

/// A session whose plain calls may take the direct path: its handler and its client.
pub(crate) struct Direct {
    handler: ToolshedMcp,
    peer: Peer<RoleServer>,
    /// The negotiated revision, which the `MCP-Protocol-Version` header must repeat.
    version: String,
    /// When a request of the session last went through rmcp (ms, [`now_ms`]).
    routed: AtomicU64,
    /// Calls in progress here, and cancellations that came first.
    calls: Mutex<Calls>,
}

/// The calls of a session served here, by JSON-RPC id (see [`key`]), and the ids cancelled
/// before a call with them was seen here, with when (ms since the [`now_ms`] clock). One lock for both, so
/// that a cancellation and its call cannot pass each other.
#[derive(Default)]
struct Calls {
    running: HashMap<String, Arc<Cancel>>,
    early: VecDeque<(String, u64)>,
}

/// The cancellation of one call served here.
#[derive(Default)]
struct Cancel {
    notify: Notify,
    done: AtomicBool,
}

impl Cancel {
    fn fire(&self) {
        self.done.store(true, Ordering::Release);
        self.notify.notify_one();
    }

    fn fired(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Direct {
    /// The direct-path record of a session just initialized, or `None` when its client may
    /// be asked things during a call (see the module docs).
    pub(crate) fn of(handler: &ToolshedMcp, peer: &Peer<RoleServer>) -> Option<Self> {
        let info = peer.peer_info()?;
        let caps = &info.capabilities;
        let asks = caps.elicitation.is_some() || caps.sampling.is_some() || caps.supports_tasks();
        if asks || info.protocol_version >= rmcp::model::ProtocolVersion::V_2026_07_28 {
            return None;
        }
        Some(Self {
            handler: handler.clone(),
            peer: peer.clone(),
            version: info.protocol_version.to_string(),
            routed: AtomicU64::new(now_ms()),
            calls: Mutex::default(),
        })
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cancels the call `of` served here; false when none is (see [`Calls::cancel`]).
    fn cancel(&self, of: &str) -> bool {
        self.calls().cancel(of, now_ms())
    }

    /// Registers the call `id`; `None` when it was cancelled before it came.
    fn start(&self, id: &str) -> Option<Arc<Cancel>> {
        self.calls().start(id, now_ms())
    }
}

impl Calls {
    /// Cancels the call `of` served here. False when none is: then the cancellation is
    /// remembered for a while (at `now`), in case its call is still on its way.
    fn cancel(&mut self, of: &str, now: u64) -> bool {
        if let Some(cancel) = self.running.get(of) {
            cancel.fire();
            return true;
        }
        self.forget_old(now);
        if of.len() > MAX_EARLY_ID {
            return false;
        }
        if self.early.len() >= EARLY_CANCELS {
            self.early.pop_front();
        }
        self.early.push_back((of.to_string(), now));
        false
    }

    /// Registers the call `id` (at `now`); `None` when it was cancelled before it came.
    fn start(&mut self, id: &str, now: u64) -> Option<Arc<Cancel>> {
        self.forget_old(now);
        if let Some(at) = self.early.iter().position(|(k, _)| k == id) {
            self.early.remove(at);
            return None;
        }
        let cancel = Arc::new(Cancel::default());
        self.running.insert(id.to_string(), cancel.clone());
        Some(cancel)
    }

    /// Forgets the cancellations older than [`EARLY_CANCEL_TTL`] at `now`.
    fn forget_old(&mut self, now: u64) {
        let ttl = EARLY_CANCEL_TTL.as_millis() as u64;
        self.early.retain(|(_, at)| now.saturating_sub(*at) < ttl);
    }
}

/// Milliseconds since the first use in this process (a monotonic clock).
fn now_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// What the layer needs: the sessions and the virtual servers served now.
#[derive(Clone)]
pub(crate) struct FastPath {
    pub(crate) table: Arc<SessionTable>,
    pub(crate) servers: ServerSet,
}

/// A plain request this path serves.
enum Plain {
    Call {
        id: RequestId,
        params: Box<CallToolRequestParams>,
    },
    Cancel {
        of: String,
    },
}

/// The layer (see the module docs).
pub(crate) async fn fast_path(State(fp): State<FastPath>, req: Request, next: Next) -> Response {
    let Some(direct) = candidate(&fp, &req) else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let limit = content_length(&parts.headers).unwrap_or(0) as usize;
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(serde_json::json!({
                    "jsonrpc": "2.0", "id": null,
                    "error": {"code": -32700, "message": format!("the request body could not be read: {e}")}
                })),
            )
                .into_response()
        }
    };
    match plain(&bytes) {
        Some(Plain::Call { id, params })
            if direct.calls().running.len() < MAX_IN_FLIGHT && !touch_due(&fp, &direct) =>
        {
            let who = parts.extensions.get::<Who>().cloned();
            call(direct, who, id, *params).await
        }
        // A cancellation of a call served here is taken here, whatever else holds; one of
        // another call goes on to rmcp too, which may be serving it.
        Some(Plain::Cancel { of }) if direct.cancel(&of) => StatusCode::ACCEPTED.into_response(),
        _ => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

/// Whether this call should go through rmcp so that its idle timer sees the session in use
/// (one call per quarter of the idle limit); counts it as sent there.
fn touch_due(fp: &FastPath, direct: &Direct) -> bool {
    let now = now_ms();
    let idle = fp.table.limits().idle.as_millis() as u64;
    let due = now.saturating_sub(direct.routed.load(Ordering::Relaxed)) > idle / 4;
    if due {
        direct.routed.store(now, Ordering::Relaxed);
    }
    due
}

/// The session's record when `req` may be a plain call of it or a cancellation of one (headers
/// only; the body is read after).
fn candidate(fp: &FastPath, req: &Request) -> Option<Arc<Direct>> {
    if req.method() != Method::POST {
        return None;
    }
    let headers = req.headers();
    let id = headers.get("mcp-session-id")?.to_str().ok()?;
    let who = req.extensions().get::<Who>()?;
    let direct = fp.table.direct_of(id, who.principal())?;
    if direct.peer.is_transport_closed() {
        return None;
    }
    if !same_endpoint(fp, &direct.handler, req.uri().path())
        || !headers_plain(headers, &direct.version)
    {
        return None;
    }
    if content_length(headers).is_none_or(|n| n > MAX_BODY) {
        return None;
    }
    Some(direct)
}

/// Whether the request's path is the endpoint the session was opened on: `/mcp` for the main
/// endpoint, `/mcp/servers/{name}` for the virtual server of that name as defined now.
fn same_endpoint(fp: &FastPath, handler: &ToolshedMcp, path: &str) -> bool {
    match (&handler.options.server, path.strip_prefix("/mcp/servers/")) {
        (None, None) => path == "/mcp",
        (Some(server), Some(name)) => fp
            .servers
            .get(name)
            .is_some_and(|now| Arc::ptr_eq(&now, server)),
        _ => false,
    }
}

/// The headers of a plain request of this session (see the module docs).
fn headers_plain(headers: &HeaderMap, version: &str) -> bool {
    let essence = |v: &HeaderValue| {
        v.to_str().ok().map(|s| {
            s.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
    };
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(essence)
        .is_some_and(|e| e == "application/json");
    let accepts: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter(|range| !refused(range))
        .map(|t| {
            t.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .collect();
    let accepts_both = accepts.iter().any(|t| t == "application/json")
        && accepts.iter().any(|t| t == "text/event-stream");
    let version_ok = headers
        .get("mcp-protocol-version")
        .is_none_or(|v| v.to_str().is_ok_and(|v| v == version));
    let routing = headers.keys().any(|k| {
        let k = k.as_str();
        k.starts_with("mcp-") && k != "mcp-session-id" && k != "mcp-protocol-version"
    });
    json && accepts_both && version_ok && !routing
}

/// A media range of `Accept` with quality 0 (`;q=0`), which refuses the type.
fn refused(range: &str) -> bool {
    range.split(';').skip(1).any(|p| {
        p.trim()
            .strip_prefix("q=")
            .and_then(|q| q.trim().parse::<f32>().ok())
            .is_some_and(|q| q <= 0.0)
    })
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// The body as a plain `tools/call` or a cancellation, or `None` for anything else.
fn plain(body: &[u8]) -> Option<Plain> {
    let Value::Object(mut m) = serde_json::from_slice::<Value>(body).ok()? else {
        return None;
    };
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return None;
    }
    let method = m.get("method").and_then(Value::as_str)?;
    match method {
        "tools/call" => {
            if m.len() != 4 {
                return None;
            }
            let id = request_id(m.remove("id")?)?;
            let Value::Object(mut params) = m.remove("params")? else {
                return None;
            };
            let Some(Value::String(name)) = params.remove("name") else {
                return None;
            };
            let arguments = match params.remove("arguments") {
                None | Some(Value::Null) => None,
                Some(Value::Object(a)) => Some(a),
                Some(_) => return None,
            };
            // `_meta` may name a progress token, a version or capabilities: rmcp reads those.
            let empty_meta = match params.remove("_meta") {
                None => true,
                Some(Value::Object(meta)) => meta.is_empty(),
                Some(_) => false,
            };
            if !params.is_empty() || !empty_meta {
                return None;
            }
            let mut params = CallToolRequestParams::new(name);
            params.arguments = arguments;
            Some(Plain::Call {
                id,
                params: Box::new(params),
            })
        }
        "notifications/cancelled" => {
            let params = m.get("params").and_then(Value::as_object)?;
            let of = request_id(params.get("requestId")?.clone())?;
            Some(Plain::Cancel { of: key(&of) })
        }
        _ => None,
    }
}

fn request_id(v: Value) -> Option<RequestId> {
    match v {
        Value::Number(n) => n.as_i64().map(NumberOrString::Number),
        Value::String(s) => Some(NumberOrString::String(s.into())),
        _ => None,
    }
}

/// A request id as a key of [`Calls`].
fn key(id: &RequestId) -> String {
    match id {
        NumberOrString::Number(n) => format!("n{n}"),
        NumberOrString::String(s) => format!("s{s}"),
    }
}

/// How long a call may take before its answer becomes an SSE stream with keep-alives.
const JSON_WAIT: Duration = Duration::from_secs(2);

/// Keep-alive comments on a long call's stream, as rmcp's own streams have.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Serves one plain call with the session's handler. The call runs in the request's own task
/// and, should the client go away before it ended, goes on in a task of its own
/// ([`Detached`]), so that it ends (and is audited) as on rmcp's path. Its answer
/// is plain JSON when it comes within [`JSON_WAIT`]; otherwise the response is an SSE stream
/// at once, with keep-alive comments until the answer (clients and proxies give up on a
/// response that sends nothing for minutes).
///
/// A cancelled call is answered with nothing, as the protocol asks and rmcp does: an SSE
/// stream that ends without a message. A call cancelled before it came is not run.
async fn call(
    direct: Arc<Direct>,
    who: Option<Who>,
    id: RequestId,
    params: CallToolRequestParams,
) -> Response {
    let caller = match direct.handler.caller_of(who.as_ref()) {
        Ok(caller) => caller,
        Err(e) => return json_answer(&ServerJsonRpcMessage::error(e, Some(id))),
    };
    let k = key(&id);
    let Some(cancel) = direct.start(&k) else {
        return sse_answer(None);
    };
    let how = CallIn {
        peer: direct.peer.clone(),
        id: id.clone(),
        progress: None,
        capabilities: direct.peer.peer_info().map(|i| i.capabilities.clone()),
        modern: false,
    };
    let failed_id = id.clone();
    let run = async move {
        let _done = Finished(direct.clone(), k, cancel.clone());
        let answer = direct
            .handler
            .call_tool_in(caller, params, how, cancel.notify.notified())
            .await;
        if cancel.fired() {
            return None;
        }
        Some(match answer.and_then(legacy_result) {
            Ok(r) => ServerJsonRpcMessage::response(r, id),
            Err(e) => ServerJsonRpcMessage::error(e, Some(id)),
        })
    };
    // A panic in the call answers as an internal error, as a panicked task did, instead of
    // taking the connection down with it.
    let mut answer = Detached::new(async move {
        use futures::FutureExt;
        std::panic::AssertUnwindSafe(run)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                let e = rmcp::ErrorData::internal_error("the call failed", None);
                Some(ServerJsonRpcMessage::error(e, Some(failed_id)))
            })
    });
    match tokio::time::timeout(JSON_WAIT, &mut answer).await {
        Ok(Some(message)) => json_answer(&message),
        Ok(None) => sse_answer(None),
        Err(_) => sse_answer(Some(answer)),
    }
}

/// The answer of a call, computed in the task that polls it. Dropped before it is ready (the
/// request's client went away), the rest of it runs in a task of its own, so that the call
/// still ends, and is audited, however the request ended. Saves a task per call, and the
/// hand-over between the two, over spawning every call.
struct Detached(Option<futures::future::BoxFuture<'static, Option<ServerJsonRpcMessage>>>);

impl Detached {
    fn new(
        call: impl std::future::Future<Output = Option<ServerJsonRpcMessage>> + Send + 'static,
    ) -> Self {
        Self(Some(Box::pin(call)))
    }
}

impl std::future::Future for Detached {
    type Output = Option<ServerJsonRpcMessage>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        // (The call catches its own panics, see [`call`].)
        let Some(call) = self.0.as_mut() else {
            return std::task::Poll::Ready(None);
        };
        let answer = std::task::ready!(call.as_mut().poll(cx));
        self.0 = None;
        std::task::Poll::Ready(answer)
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if let (Some(call), Ok(rt)) = (self.0.take(), tokio::runtime::Handle::try_current()) {
            rt.spawn(call);
        }
    }
}

fn internal(message: String) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, message).into_response()
}

fn json_answer(message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(message) {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(e) => internal(format!("the answer could not be serialised: {e}")),
    }
}

/// The answer of a long call as an SSE stream: keep-alive comments, then the one message
/// (none for a cancelled call; `None`: the stream ends at once).
fn sse_answer(task: Option<Detached>) -> Response {
    let events = futures::stream::unfold(task, |state| async move {
        let mut task = state?;
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        tokio::select! {
            done = &mut task => {
                let frame = match done {
                    Some(message) => serde_json::to_string(&message)
                        .map(|m| format!("event: message\ndata: {m}\n\n"))
                        .unwrap_or_default(),
                    None => String::new(),
                };
                Some((Ok::<_, std::convert::Infallible>(frame), None))
            }
            _ = tick.tick() => Some((Ok(":\n\n".to_string()), Some(task))),
        }
    });
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        Body::from_stream(events),
    )
        .into_response()
}

/// The answer as rmcp's service gives it to a client of a revision before 2026-07-28 that
/// declared no tasks: without `resultType: "complete"`, and never `input_required` or a task.
fn legacy_result(r: rmcp::model::CallToolResponse) -> Result<ServerResult, rmcp::ErrorData> {
    if matches!(r, rmcp::model::CallToolResponse::Task(_)) {
        return Err(rmcp::ErrorData::missing_required_client_capability(
            rmcp::model::ClientCapabilities::builder()
                .enable_tasks()
                .build(),
        ));
    }
    let mut result = ServerResult::from(r);
    if matches!(result, ServerResult::InputRequiredResult(_)) {
        return Err(rmcp::ErrorData::invalid_request(
            "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
            None,
        ));
    }
    result.strip_result_type_for_legacy_peer();
    Ok(result)
}

/// Takes a call off [`Calls::running`] when it ends, however it ends (unless a later call
/// with the same id took its place).
struct Finished(Arc<Direct>, String, Arc<Cancel>);

impl Drop for Finished {
    fn drop(&mut self) {
        let mut calls = self.0.calls();
        if calls
            .running
            .get(&self.1)
            .is_some_and(|n| Arc::ptr_eq(n, &self.2))
        {
            calls.running.remove(&self.1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    type Arguments = Option<Map<String, Value>>;

    fn call_of(body: &str) -> Option<(RequestId, String, Arguments)> {
        match plain(body.as_bytes())? {
            Plain::Call { id, params } => Some((id, params.name.to_string(), params.arguments)),
            Plain::Cancel { .. } => None,
        }
    }

    #[test]
    fn only_plain_calls_are_taken() {
        let (id, name, args) =
            call_of(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}"#)
                .unwrap();
        assert_eq!((id, name.as_str()), (NumberOrString::Number(7), "echo"));
        assert_eq!(args.unwrap()["a"], 1);
        let (id, _, args) = call_of(
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"e","_meta":{}}}"#,
        )
        .unwrap();
        assert_eq!((id, args), (NumberOrString::String("x".into()), None));
        for other in [
            // progress, versions and capabilities in `_meta` are rmcp's to read
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","task":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","requestState":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e"},"x":1}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e"}}]"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            "not json",
        ] {
            assert!(call_of(other).is_none(), "{other}");
        }
    }

    #[test]
    fn cancellations_name_the_call_by_its_id() {
        let Some(Plain::Cancel { of }) = plain(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
        ) else {
            panic!("not a cancellation");
        };
        assert_eq!(of, key(&NumberOrString::Number(7)));
        assert_ne!(of, key(&NumberOrString::String("7".into())));
    }

    #[test]
    fn cancellations_that_come_first_are_remembered_for_a_while_and_bounded() {
        let mut calls = Calls::default();
        let ttl = EARLY_CANCEL_TTL.as_millis() as u64;
        assert!(!calls.cancel("n1", 0), "nothing runs yet");
        assert!(calls.start("n1", 0).is_none(), "cancelled before it came");
        let running = calls.start("n1", 0).expect("remembered once only");
        assert!(calls.cancel("n1", 1) && running.fired());
        // An old one is forgotten after its time, and only the newest are kept.
        calls.cancel("n2", 0);
        assert!(calls.start("n2", ttl).is_some(), "expired");
        for i in 0..(EARLY_CANCELS as u64 + 10) {
            calls.cancel(&format!("m{i}"), ttl + 10);
        }
        assert_eq!(calls.early.len(), EARLY_CANCELS);
        assert!(calls.start("m0", ttl + 10).is_some(), "the oldest gave way");
        assert!(calls
            .start(&format!("m{}", EARLY_CANCELS + 9), ttl + 10)
            .is_none());
        // A huge id is not kept.
        let huge = "x".repeat(MAX_EARLY_ID + 1);
        calls.cancel(&huge, ttl + 10);
        assert!(calls.start(&huge, ttl + 10).is_some());
    }

    #[test]
    fn headers_of_the_plain_case_only() {
        let plain_case = |pairs: &[(&str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(
                    axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                );
            }
            let json = h
                .get(header::CONTENT_TYPE)
                .is_some_and(|v| v.to_str().unwrap().starts_with("application/json"));
            (h, json)
        };
        let base = [
            ("content-type", "application/json; charset=utf-8"),
            ("accept", "application/json, text/event-stream"),
        ];
        let check = |extra: &[(&str, &str)]| {
            let mut all = base.to_vec();
            all.extend_from_slice(extra);
            let (h, _) = plain_case(&all);
            headers_plain(&h, "2025-11-25")
        };
        assert!(check(&[]));
        assert!(check(&[("mcp-protocol-version", "2025-11-25")]));
        assert!(!check(&[("mcp-protocol-version", "2025-06-18")]));
        assert!(!check(&[("mcp-method", "tools/call")]));
        assert!(!headers_plain(
            &plain_case(&[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream;q=0"),
            ])
            .0,
            "2025-11-25"
        ));
        let (h, _) = plain_case(&[
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ]);
        assert!(!headers_plain(&h, "2025-11-25"));
        let (h, _) = plain_case(&[
            ("content-type", "text/plain"),
            ("accept", "application/json, text/event-stream"),
        ]);
        assert!(!headers_plain(&h, "2025-11-25"));
    }
}
