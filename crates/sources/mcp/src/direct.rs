//! The fast path of a plain `tools/call` to a streamable HTTP upstream: the caller's own task
//! posts the request and reads its one answer, instead of going through rmcp's client worker
//! (about six task hops and two spawned tasks per call, see `docs/benchmarks.md`, "Where the
//! upstream leg's time goes"). rmcp's session still does everything else: the handshake, the
//! session's GET stream, listings, reads, progress-relaying calls, session recovery.
//!
//! # How
//!
//! The HTTP client handed to rmcp's transport is a [`Recording`] one: it delegates every request
//! to Toolshed's client ([`UpstreamHttp`]: the guarded reqwest client, adding tokens and
//! answering challenges when the source has OAuth) and keeps what rmcp sent with `notifications/initialized`,
//! the session id and the headers of the session (the configured ones and
//! `MCP-Protocol-Version`). Each (re)initialisation rmcp performs, including its transparent
//! recovery of an expired session, records them anew. A [`DirectPost`] on the session
//! ([`Session::direct`](crate::upstream::Session)) posts `tools/call` with them, under a request
//! id of its own (`"ts-<n>"`: a string, so it never collides with rmcp's numeric ids), and reads
//! the answer:
//!
//! - a JSON answer is the result (or the JSON-RPC error);
//! - an SSE answer is read until the response with that id. Events without data (priming
//!   events) are skipped. The upstream's notifications on the stream (log messages, list
//!   changes, resource updates) go to the same [`SourceClient`] code rmcp would call; its
//!   requests (elicitation, sampling, `roots/list`, ping), marked as the call's
//!   ([`OnStreamOf`], so that a question goes to this call's client), are answered by the [`SourceClient`]
//!   through rmcp's own dispatch ([`Service::handle_request`]) and the answer is posted back on
//!   the session, while the stream goes on being read (a `notifications/cancelled` for such a
//!   request drops its handling; one still being handled when the call's answer comes is
//!   finished, and answered, in the background). A stream that ends before the answer is resumed with
//!   `Last-Event-ID` when the upstream numbered its events, as rmcp would.
//!
//! A call dropped before its answer (the caller cancelled, or the deadline passed) sends
//! `notifications/cancelled` for its id, as rmcp's `call_tool_once` does.
//!
//! rmcp keeps a response cache on its peer that notifications invalidate; it only holds
//! results that carry a TTL (2026-07-28), so the list changes handled here need no
//! invalidation for the revisions this path serves.
//!
//! # When rmcp's path is used instead
//!
//! - over stdio, for calls that relay progress (rmcp knows the progress token), on a session
//!   that negotiated 2026-07-28 (per-request metadata and standard headers), and before rmcp
//!   posted `notifications/initialized`;
//! - when the upstream answers the post with "session expired" (HTTP 404): the request was not
//!   executed, so rmcp sends it and recovers the session on the way;
//! - when the upstream accepts the post without answering (HTTP 202, which the specification
//!   does not allow for a request): the path is turned off for the session, and the call is
//!   sent through rmcp when it is safe to send again (read-only or idempotent tools); otherwise
//!   it fails saying that it may or may not have run.
//!
//! Other failures of the post are reported as rmcp reports them (`TransportSend`), so that the
//! handler's own resend rules apply.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{AbortHandle, BoxFuture};
use futures::stream::{BoxStream, FuturesUnordered};
use futures::{FutureExt, StreamExt};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, ClientJsonRpcMessage,
    ClientNotification, ClientRequest, ClientResult, ErrorData, GetExtensions, GetMeta, RequestId,
    ServerJsonRpcMessage, ServerNotification, ServerResult,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use rmcp::transport::DynamicTransportError;
use rmcp::{Peer, RoleClient, Service, ServiceError};
use sse_stream::Sse;

use crate::connect::SourceClient;
use crate::lean;
use crate::oauth::UpstreamHttp;
use crate::relay::OnStreamOf;

type HttpError = StreamableHttpError<reqwest::Error>;
type SseStream = BoxStream<'static, Result<Sse, SseError>>;

/// Most bytes of one SSE event (rmcp's default for its transport).
const MAX_SSE_EVENT_SIZE: usize = 16 * 1024 * 1024;
/// How often a broken answer stream is resumed before the call fails.
const MAX_RESUMES: u32 = 3;
/// The first wait before resuming a stream whose upstream named no `retry` (doubling).
const RESUME_DELAY: Duration = Duration::from_millis(500);
/// How long the rest of an answered stream is read in the background, so that its
/// connection goes back to the pool.
const DRAIN: Duration = Duration::from_millis(50);

/// How long the upstream's questions still open when a call's answer came may take.
const LATE_ANSWERS: Duration = Duration::from_secs(120);

/// The numbers of the fast path's request ids (`"ts-<n>"`), unique in the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What rmcp posted `notifications/initialized` with: the session and its headers.
struct Handshake {
    session_id: Option<Arc<str>>,
    headers: HashMap<HeaderName, HeaderValue>,
    /// The same, prepared for [`lean::post_call`], when the upstream has no OAuth.
    lean: Option<lean::Prepared>,
}

/// The newest [`Handshake`] of a transport, shared by its [`Recording`] client and its
/// [`DirectPost`].
type Slot = Arc<Mutex<Option<Arc<Handshake>>>>;

/// The client rmcp's transport uses: [`UpstreamHttp`], recording each handshake rmcp completes
/// (see the module docs).
#[derive(Clone)]
pub(crate) struct Recording {
    inner: UpstreamHttp,
    slot: Slot,
}

impl Recording {
    /// Records `session_id` and `headers` once `posted` (rmcp's `notifications/initialized`)
    /// went through.
    fn record(
        &self,
        uri: &str,
        session_id: &Option<Arc<str>>,
        headers: &HashMap<HeaderName, HeaderValue>,
        posted: &Result<StreamableHttpPostResponse, HttpError>,
    ) {
        if posted.is_ok() {
            let lean = self
                .inner
                .auth
                .is_none()
                .then(|| {
                    lean::Prepared::new(
                        uri,
                        session_id.as_deref(),
                        headers,
                        self.inner.allow_private,
                    )
                })
                .flatten();
            let handshake = Handshake {
                session_id: session_id.clone(),
                headers: headers.clone(),
                lean,
            };
            *crate::upstream::lock(&self.slot) = Some(Arc::new(handshake));
        }
    }
}

/// Whether `message` is `notifications/initialized`.
fn is_initialized(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        ClientJsonRpcMessage::Notification(n)
            if matches!(n.notification, ClientNotification::InitializedNotification(_))
    )
}

impl StreamableHttpClient for Recording {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        // The same post with rmcp's default bound on an SSE event.
        self.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth,
            headers,
            MAX_SSE_EVENT_SIZE,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let initialized = is_initialized(&message);
        let kept = initialized.then(|| (uri.clone(), session_id.clone(), headers.clone()));
        let posted = self
            .inner
            .post_message_with_max_sse_event_size(uri, message, session_id, auth, headers, max)
            .await;
        if let Some((uri, session_id, headers)) = kept {
            self.record(&uri, &session_id, &headers, &posted);
        }
        posted
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.inner
            .delete_session(uri, session_id, auth, headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<SseStream, HttpError> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth, headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max: usize,
    ) -> Result<SseStream, HttpError> {
        self.inner
            .get_stream_with_max_sse_event_size(uri, session_id, last_event_id, auth, headers, max)
            .await
    }
}

/// The fast path of one streamable HTTP session (see the module docs). Cheap to clone.
#[derive(Clone)]
pub(crate) struct DirectPost(Arc<Inner>);

struct Inner {
    client: UpstreamHttp,
    uri: Arc<str>,
    slot: Slot,
    /// The session's client handler, for the upstream's notifications and requests.
    handler: SourceClient,
    /// The upstream accepted a request without answering it: rmcp's path only, from then on.
    off: AtomicBool,
}

/// The client for rmcp's transport over `client` and the fast path beside it.
pub(crate) fn pair(
    client: UpstreamHttp,
    uri: &str,
    handler: SourceClient,
) -> (Recording, DirectPost) {
    let slot = Slot::default();
    let recording = Recording {
        inner: client.clone(),
        slot: slot.clone(),
    };
    let direct = DirectPost(Arc::new(Inner {
        client,
        uri: Arc::from(uri),
        slot,
        handler,
        off: AtomicBool::new(false),
    }));
    (recording, direct)
}

/// Sends `notifications/cancelled` for the request `id` when dropped armed (the call was
/// abandoned before its answer).
struct Pending<'a> {
    peer: &'a Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Pending<'_> {
    fn disarm(&mut self) {
        self.id = None;
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        crate::handler::notify_cancelled(self.peer.clone(), id);
    }
}

/// A failure of the transport, as rmcp reports it.
fn transport_error(e: impl std::error::Error + Send + Sync + 'static) -> ServiceError {
    ServiceError::TransportSend(DynamicTransportError::from_parts(
        "StreamableHttpClientTransport",
        std::any::TypeId::of::<DirectPost>(),
        Box::new(e),
    ))
}

/// Why the fast path failed, for [`transport_error`].
#[derive(Debug)]
struct Broken(String);

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Broken {}

/// The answer to the request `id` in `message`, if it is that.
fn answer_of(
    message: ServerJsonRpcMessage,
    id: &RequestId,
) -> Option<Result<ServerResult, ServiceError>> {
    match message {
        ServerJsonRpcMessage::Response(r) if r.id == *id => Some(Ok(r.result)),
        ServerJsonRpcMessage::Error(e) if e.id.as_ref() == Some(id) => {
            Some(Err(ServiceError::McpError(e.error)))
        }
        _ => None,
    }
}

/// The answer to a request of the upstream, once its handling ended (`None`: cancelled).
type Answering = BoxFuture<'static, (RequestId, Option<Result<ClientResult, ErrorData>>)>;

impl DirectPost {
    /// Sends `tools/call` with `params` on the session and reads the answer. `None`: it was not
    /// executed (or may safely run again), and rmcp's path is to send it (see the module
    /// docs); `retry_safe` says whether the tool may run twice.
    pub(crate) async fn call_tool(
        &self,
        peer: &Peer<RoleClient>,
        params: &CallToolRequestParams,
        retry_safe: bool,
        call: Option<OnStreamOf>,
    ) -> Option<Result<CallToolResponse, ServiceError>> {
        if self.0.off.load(Ordering::Relaxed) {
            return None;
        }
        let handshake = crate::upstream::lock(&self.0.slot).clone()?;
        let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::String(Arc::from(format!("ts-{n}")));
        let mut pending = Pending {
            peer,
            id: Some(id.clone()),
        };
        let posted = match &handshake.lean {
            Some(prepared) => {
                lean::post_call(
                    &self.0.client.inner,
                    prepared,
                    &id,
                    params,
                    MAX_SSE_EVENT_SIZE,
                )
                .await
            }
            None => {
                let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
                self.0
                    .client
                    .post_message_with_max_sse_event_size(
                        self.0.uri.clone(),
                        ClientJsonRpcMessage::request(request, id.clone()),
                        handshake.session_id.clone(),
                        None,
                        handshake.headers.clone(),
                        MAX_SSE_EVENT_SIZE,
                    )
                    .await
            }
        };
        let answer = match posted {
            Err(StreamableHttpError::SessionExpired) => {
                // Not executed: rmcp sends it, recovering the session first.
                pending.disarm();
                self.forget(&handshake);
                return None;
            }
            Err(e) => Err(transport_error(e)),
            Ok(StreamableHttpPostResponse::Accepted) => {
                pending.disarm();
                self.0.off.store(true, Ordering::Relaxed);
                tracing::warn!(
                    upstream = %self.0.handler.name,
                    "the upstream accepted tools/call without answering it; calls go through rmcp's session from now on"
                );
                if retry_safe {
                    return None;
                }
                Err(transport_error(Broken(
                    "the upstream accepted the call without answering it (HTTP 202)".into(),
                )))
            }
            Ok(StreamableHttpPostResponse::Json(message, _)) => match message {
                // Also one without an id: the upstream could not read the request.
                ServerJsonRpcMessage::Error(e) => Err(ServiceError::McpError(e.error)),
                other => answer_of(other, &id).unwrap_or(Err(ServiceError::UnexpectedResponse)),
            },
            Ok(StreamableHttpPostResponse::Sse(stream, _)) => {
                self.read(stream, &handshake, peer, &id, call).await
            }
            Ok(other) => Err(transport_error(Broken(format!(
                "unexpected answer {other:?}"
            )))),
        };
        pending.disarm();
        Some(answer.and_then(|result| match result {
            ServerResult::CallToolResult(r) => Ok(CallToolResponse::Complete(r)),
            ServerResult::InputRequiredResult(r) => Ok(CallToolResponse::InputRequired(r)),
            ServerResult::CreateTaskResult(r) => Ok(CallToolResponse::Task(r)),
            _ => Err(ServiceError::UnexpectedResponse),
        }))
    }

    /// Drops `handshake` (its session expired) unless a newer one replaced it already.
    fn forget(&self, handshake: &Arc<Handshake>) {
        let mut slot = crate::upstream::lock(&self.0.slot);
        if slot.as_ref().is_some_and(|h| Arc::ptr_eq(h, handshake)) {
            *slot = None;
        }
    }

    /// Reads the SSE answer `stream` of the request `id` until its response (see the module
    /// docs).
    async fn read(
        &self,
        mut stream: SseStream,
        handshake: &Arc<Handshake>,
        peer: &Peer<RoleClient>,
        id: &RequestId,
        call: Option<OnStreamOf>,
    ) -> Result<ServerResult, ServiceError> {
        let mut last_event_id: Option<String> = None;
        let mut server_retry: Option<Duration> = None;
        let mut resumes = 0;
        let mut answering: FuturesUnordered<Answering> = FuturesUnordered::new();
        let mut aborts: Vec<(RequestId, AbortHandle)> = Vec::new();
        loop {
            // The handlings first: a new one is polled once before the next event is read, so
            // that it finds the call's client while the call is still in flight (the answer
            // may be the very next event).
            let event = tokio::select! {
                biased;
                Some((asked, answer)) = answering.next(), if !answering.is_empty() => {
                    aborts.retain(|(a, _)| *a != asked);
                    if let Some(answer) = answer {
                        self.reply(handshake, asked, answer).await;
                    }
                    continue;
                }
                event = stream.next() => event,
            };
            let sse = match event {
                Some(Ok(sse)) => sse,
                broken => {
                    if let Some(Err(e)) = &broken {
                        tracing::debug!(upstream = %self.0.handler.name, error = %e, "the answer stream of a call broke");
                    }
                    stream = self
                        .resume(
                            handshake,
                            last_event_id.as_deref(),
                            server_retry,
                            &mut resumes,
                        )
                        .await?;
                    continue;
                }
            };
            if let Some(ms) = sse.retry {
                server_retry = Some(Duration::from_millis(ms));
            }
            if sse.id.is_some() {
                last_event_id = sse.id;
            }
            // Only unnamed and `message` events carry JSON-RPC messages (as rmcp reads them).
            if !matches!(sse.event.as_deref(), None | Some("") | Some("message")) {
                continue;
            }
            let Some(data) = sse.data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            let message = match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!(upstream = %self.0.handler.name, error = %e, "an event of a call's stream is not JSON-RPC");
                    continue;
                }
            };
            match message {
                ServerJsonRpcMessage::Notification(n) => {
                    if let ServerNotification::CancelledNotification(c) = &n.notification {
                        if let Some(asked) = &c.params.request_id {
                            for (_, abort) in aborts.iter().filter(|(a, _)| a == asked) {
                                abort.abort();
                            }
                        }
                    }
                    self.0.handler.notified(n.notification);
                }
                ServerJsonRpcMessage::Request(r) => {
                    let (asked, mut request) = (r.id, r.request);
                    let mut context = RequestContext::new(asked.clone(), peer.clone());
                    std::mem::swap(&mut context.meta, request.get_meta_mut());
                    std::mem::swap(&mut context.extensions, request.extensions_mut());
                    if let Some(call) = call {
                        context.extensions.insert(call);
                    }
                    let handler = self.0.handler.clone();
                    let (handling, abort) = futures::future::abortable(async move {
                        Service::<RoleClient>::handle_request(&handler, request, context).await
                    });
                    aborts.push((asked.clone(), abort));
                    answering.push(Box::pin(async move { (asked, handling.await.ok()) }));
                }
                other => match answer_of(other, id) {
                    Some(answer) => {
                        finish(stream);
                        self.answer_later(handshake.clone(), answering);
                        return answer;
                    }
                    None => {
                        tracing::debug!(upstream = %self.0.handler.name, "an answer to another request on a call's stream")
                    }
                },
            }
        }
    }

    /// A new stream after the answer stream ended or broke before the answer: resumed after
    /// `last_event_id` (waiting the upstream's `retry`, else [`RESUME_DELAY`] doubling) at most
    /// [`MAX_RESUMES`] times in all. Without an event id there is nothing to resume: the call
    /// may or may not have run.
    async fn resume(
        &self,
        handshake: &Handshake,
        last_event_id: Option<&str>,
        server_retry: Option<Duration>,
        resumes: &mut u32,
    ) -> Result<SseStream, ServiceError> {
        let Some(last_event_id) = last_event_id else {
            return Err(transport_error(Broken(
                "the answer stream ended before the answer".into(),
            )));
        };
        loop {
            if *resumes >= MAX_RESUMES {
                return Err(transport_error(Broken(format!(
                    "the answer stream ended before the answer, and resuming it failed {MAX_RESUMES} times"
                ))));
            }
            let delay = server_retry.unwrap_or(RESUME_DELAY * 2u32.pow(*resumes));
            *resumes += 1;
            tokio::time::sleep(delay).await;
            let resumed = self
                .0
                .client
                .get_stream_with_max_sse_event_size(
                    self.0.uri.clone(),
                    handshake.session_id.clone(),
                    Some(last_event_id.to_string()),
                    None,
                    handshake.headers.clone(),
                    MAX_SSE_EVENT_SIZE,
                )
                .await;
            match resumed {
                Ok(stream) => return Ok(stream),
                Err(e) => {
                    tracing::debug!(upstream = %self.0.handler.name, error = %e, "resuming a call's answer stream failed")
                }
            }
        }
    }

    /// Lets the upstream's requests still being handled when the call's answer came (the
    /// upstream did not wait for them) end in the background, for at most [`LATE_ANSWERS`],
    /// and posts their answers.
    fn answer_later(&self, handshake: Arc<Handshake>, mut answering: FuturesUnordered<Answering>) {
        if answering.is_empty() {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            let all = async {
                while let Some((asked, answer)) = answering.next().await {
                    if let Some(answer) = answer {
                        this.reply(&handshake, asked, answer).await;
                    }
                }
            };
            if tokio::time::timeout(LATE_ANSWERS, all).await.is_err() {
                tracing::debug!(upstream = %this.0.handler.name, "questions of an answered call were still open after {LATE_ANSWERS:?}; dropped");
            }
        });
    }

    /// Posts the answer to the upstream's request `asked` on the session.
    async fn reply(
        &self,
        handshake: &Handshake,
        asked: RequestId,
        answer: Result<ClientResult, ErrorData>,
    ) {
        let message = match answer {
            Ok(result) => ClientJsonRpcMessage::response(result, asked),
            Err(error) => ClientJsonRpcMessage::error(error, Some(asked)),
        };
        let posted = self
            .0
            .client
            .post_message_with_max_sse_event_size(
                self.0.uri.clone(),
                message,
                handshake.session_id.clone(),
                None,
                handshake.headers.clone(),
                MAX_SSE_EVENT_SIZE,
            )
            .await;
        if let Err(e) = posted {
            tracing::warn!(upstream = %self.0.handler.name, error = %e, "could not answer the upstream's request");
        }
    }
}

/// Reads what is left of an answered stream (its end, usually), so that its connection goes
/// back to the pool: now when it is there already, else in the background for [`DRAIN`].
fn finish(mut stream: SseStream) {
    if let Some(None) = stream.next().now_or_never() {
        return;
    }
    tokio::spawn(async move {
        let _ = tokio::time::timeout(DRAIN, async { while stream.next().await.is_some() {} }).await;
    });
}
