//! [`UpstreamToolHandler`]: the `ToolHandler` of an imported upstream tool. It relays the call
//! as `tools/call` over the upstream's one shared session (no handshake per call). Over
//! streamable HTTP, a call that relays no progress is posted by the caller's own task with the
//! session's id ([`crate::direct`], which says when it leaves the call to rmcp's session).
//!
//! Calls made while the upstream is reconnecting wait for the new session up to `call_timeout`
//! (or the context's timeout, if shorter) and then fail with a clear message. A call whose
//! connection is lost mid-flight is retried once on the new session only for read-only or
//! idempotent tools, or when writing the request to a dead stdio child failed (it was never
//! delivered); otherwise it fails saying the call may or may not have run.
//!
//! [`UpstreamConfig::redacted_values`](crate::UpstreamConfig::redacted_values) are blanked out
//! of results and errors, in case the upstream echoes them.

use std::sync::atomic::Ordering;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, ClientRequest, ErrorCode,
    ProtocolVersion, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::ServiceError;
use serde_json::{Map, Value};
use tokio::time::Instant;
use toolshed_core::{ToolContext, ToolError, ToolErrorKind, ToolHandler};
use toolshed_outbound::secret::{redact_outcome, redact_value};

use crate::config::Transport;
use crate::error::McpSourceError;
use crate::mapping::{convert_result, convert_result_value};
use crate::upstream::{wait_ready, Session, Upstream};

/// Forwards one Toolshed tool to its upstream tool over the shared session.
pub(crate) struct UpstreamToolHandler {
    /// Keeps the upstream alive as long as the tool exists.
    pub(crate) upstream: Upstream,
    pub(crate) remote_name: String,
    /// Read-only or idempotent: may be re-sent once when the connection dies mid-call.
    pub(crate) retry_safe: bool,
}

#[async_trait::async_trait]
impl ToolHandler for UpstreamToolHandler {
    /// Forwards the call; configured secrets the upstream echoes are blanked out of the
    /// result and of errors.
    async fn call(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        let outcome = self.forward(&ctx, args).await;
        // Read after the call: a token issued during it (a step-up) is blanked out too.
        let owned = self.upstream.secrets();
        let secrets: Vec<&str> = owned.iter().map(String::as_str).collect();
        redact_outcome(outcome, &secrets)
    }
}

impl UpstreamToolHandler {
    /// Sends `tools/call` within the call's budget, once more on a new session when that is
    /// safe (see the module docs).
    async fn forward(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let shared = self.upstream.shared();
        let budget = shared.cfg.call_timeout.min(ctx.timeout);
        let deadline = Instant::now() + budget;
        let arguments = object_arguments(args)?;
        // While it waits, the upstream's requests (elicitation, sampling) go to its client.
        let in_flight = crate::relay::enter(&shared.calls, ctx, deadline);
        let call = crate::relay::OnStreamOf(in_flight.id());
        let mut min_generation = 0;
        let mut params = CallToolRequestParams::new(self.remote_name.clone());
        params.arguments = arguments;
        let (mut attempt, mut rounds) = (0, 0);
        loop {
            let session = wait_ready(shared, deadline, min_generation)
                .await
                .map_err(session_error)?;
            let outcome = tokio::time::timeout_at(
                deadline,
                send(
                    shared,
                    &session,
                    ctx,
                    &params,
                    deadline,
                    self.retry_safe,
                    call,
                ),
            )
            .await;
            let Ok(answer) = outcome else {
                return Err(ToolError::new(
                    ToolErrorKind::Timeout,
                    format!(
                        "upstream '{}' tool '{}' did not answer within {budget:?}",
                        self.ns(),
                        self.remote_name
                    ),
                ));
            };
            match answer {
                Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                    if attempt == 0 && self.may_resend(&e, &session) {
                        attempt += 1;
                        min_generation = session.generation + 1;
                        continue;
                    }
                    // Refused for want of a token a person must approve first: not sent.
                    if let Some(action) = self.waiting_for_person() {
                        return Err(action);
                    }
                    if let Some(busy) = self.refused_busy(&e) {
                        return Err(busy);
                    }
                    return Err(ToolError::upstream(format!(
                        "the connection to upstream '{}' failed during '{}' ({e}); the call may or may not have run",
                        self.ns(),
                        self.remote_name
                    )));
                }
                // A 2026-07-28 upstream asks for input by answering `input_required`: the
                // questions go to the call's client, and the call is sent again with the
                // answers and the upstream's own state.
                Ok(CallToolResponse::InputRequired(asked)) if rounds < MAX_INPUT_ROUNDS => {
                    rounds += 1;
                    let (responses, state) = self.answer_inputs(ctx, asked, deadline).await?;
                    params.input_responses = Some(responses);
                    params.request_state = state;
                }
                other => return self.answer(other, ctx),
            }
        }
    }

    /// The answers of the call's client to the requests of an `input_required` result, and the
    /// state to send back with them. A `roots/list` is answered with no roots (Toolshed exposes
    /// none). A question stored for people waits at most until shortly before `deadline`.
    async fn answer_inputs(
        &self,
        ctx: &ToolContext,
        asked: rmcp::model::InputRequiredResult,
        deadline: Instant,
    ) -> Result<(rmcp::model::InputResponses, Option<String>), ToolError> {
        let mut responses = rmcp::model::InputResponses::new();
        for (key, request) in asked.input_requests.unwrap_or_default() {
            let request = serde_json::to_value(&request).unwrap_or_default();
            let method = request["method"].as_str().unwrap_or_default().to_string();
            let params = request.get("params").cloned().unwrap_or(Value::Null);
            let answer = match method.as_str() {
                "roots/list" => serde_json::json!({"roots": []}),
                "elicitation/create" | "sampling/createMessage" => {
                    let url = params["mode"] == "url";
                    let asked = crate::relay::Asked {
                        method: if method == "sampling/createMessage" {
                            "sampling/createMessage"
                        } else {
                            "elicitation/create"
                        },
                        capability: match (method.as_str(), url) {
                            ("sampling/createMessage", _) => "sampling",
                            (_, true) => "elicitation.url",
                            _ => "elicitation",
                        },
                    };
                    crate::relay::ask_client(ctx, asked, params, deadline)
                        .await
                        .map_err(|why| {
                            ToolError::upstream(format!(
                                "upstream '{}' tool '{}' needs input: {why}",
                                self.ns(),
                                self.remote_name
                            ))
                        })?
                }
                other => {
                    return Err(ToolError::upstream(format!(
                        "upstream '{}' tool '{}' asked for '{}', which Toolshed cannot answer",
                        self.ns(),
                        self.remote_name,
                        crate::relay::shown(other)
                    )))
                }
            };
            responses.insert(key, answer);
        }
        Ok((responses, asked.request_state))
    }

    /// The namespace (the upstream's configured name).
    fn ns(&self) -> &str {
        &self.upstream.shared().cfg.name
    }

    /// Whether a call whose connection failed with `e` may be sent again on a new session.
    fn may_resend(&self, e: &ServiceError, session: &Session) -> bool {
        // Only a session that really ended is worth waiting for: a failed HTTP POST on a live
        // session is reported as is.
        let session_ended =
            matches!(e, ServiceError::TransportClosed) || session.peer.is_transport_closed();
        // A failed write to a stdio child never delivered the request: the child is gone, so
        // any tool may be sent again on the restarted one.
        let never_delivered = matches!(e, ServiceError::TransportSend(_))
            && matches!(
                self.upstream.shared().cfg.transport,
                Transport::Stdio { .. }
            );
        never_delivered || (self.retry_safe && session_ended)
    }

    /// The upstream's answer (a result, a refusal, or something Toolshed does not support) as
    /// the tool's outcome. A face that relays results unchanged also gets the result as the
    /// upstream sent it ([`ToolContext::keep_wire`]), with configured secrets blanked out.
    fn answer(
        &self,
        answer: Result<CallToolResponse, ServiceError>,
        ctx: &ToolContext,
    ) -> Result<Value, ToolError> {
        let (ns, tool) = (self.ns(), &self.remote_name);
        match answer {
            Ok(CallToolResponse::Complete(result)) => {
                if !ctx.wants_wire() {
                    return convert_result(result);
                }
                let Ok(mut wire) = serde_json::to_value(&result) else {
                    return convert_result(result);
                };
                let output = convert_result_value(&wire);
                let owned = self.upstream.secrets();
                let secrets: Vec<&str> = owned.iter().map(String::as_str).collect();
                redact_value(&mut wire, &secrets);
                ctx.keep_wire(wire);
                output
            }
            Ok(CallToolResponse::InputRequired(_)) => Err(ToolError::upstream(format!(
                "upstream '{ns}' tool '{tool}' asked for input more than {MAX_INPUT_ROUNDS} times"
            ))),
            Ok(_) => Err(ToolError::upstream(format!(
                "upstream '{ns}' tool '{tool}' answered with an asynchronous task, which Toolshed does not poll"
            ))),
            Err(ServiceError::McpError(e)) => {
                let message = format!("upstream '{ns}' refused '{tool}': {}", e.message);
                let kind = if e.code == ErrorCode::INVALID_PARAMS {
                    ToolErrorKind::InvalidInput
                } else if e.code == ErrorCode::METHOD_NOT_FOUND {
                    ToolErrorKind::NotFound
                } else {
                    ToolErrorKind::Upstream
                };
                let mut err = ToolError::new(kind, message);
                if let Some(data) = e.data {
                    err = err.with_data(data);
                }
                Err(err)
            }
            Err(ServiceError::Timeout { timeout }) => Err(ToolError::new(
                ToolErrorKind::Timeout,
                format!("upstream '{ns}' did not answer within {timeout:?}"),
            )),
            Err(e) => Err(ToolError::upstream(format!(
                "calling '{tool}' on upstream '{ns}' failed: {e}"
            ))),
        }
    }

    /// A call the upstream turned away as busy (HTTP `429`, or a `5xx` with a `Retry-After`):
    /// the status and when to retry reach the caller (`data.status`, `data.retryAfter`, the
    /// upstream's own value), not only a transport failure.
    fn refused_busy(&self, e: &ServiceError) -> Option<ToolError> {
        let (status, retry_after) = http_status(e)?;
        let (ns, tool) = (self.ns(), &self.remote_name);
        let when = retry_after
            .as_deref()
            .map(|r| format!("; it asks to retry after {r}"))
            .unwrap_or_default();
        let message = if status == 429 {
            format!("upstream '{ns}' refused '{tool}' with HTTP 429 (too many requests){when}; the call did not run")
        } else {
            format!("upstream '{ns}' answered '{tool}' with HTTP {status}{when}")
        };
        Some(ToolError::upstream(message).with_data(serde_json::json!({
            "status": status,
            "retryAfter": retry_after,
        })))
    }

    /// A call that failed because a person must first authorize Toolshed at the upstream (a
    /// wider scope, or a token that could not be renewed): an action for the caller, which
    /// pauses the call where it may pause ([`crate::person`]).
    fn waiting_for_person(&self) -> Option<ToolError> {
        let person = self.upstream.config().oauth.as_ref()?.person.as_ref()?;
        let (url, message) = person.waiting_action(self.upstream.name())?;
        Some(
            ToolError::new(ToolErrorKind::ActionRequired, message)
                .with_data(serde_json::json!({ "url": url })),
        )
    }
}

/// The HTTP status and `Retry-After` rmcp's client (or the lean path, which reports it the
/// same way) turned `e` into, if it is such a refusal.
fn http_status(e: &ServiceError) -> Option<(u16, Option<String>)> {
    use rmcp::transport::streamable_http_client::{HttpStatusError, StreamableHttpError};
    let ServiceError::TransportSend(sent) = e else {
        return None;
    };
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(sent.error.as_ref());
    while let Some(err) = next {
        if let Some(StreamableHttpError::HttpStatus(h)) =
            err.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return Some((h.status, h.retry_after.clone()));
        }
        if let Some(h) = err.downcast_ref::<HttpStatusError>() {
            return Some((h.status, h.retry_after.clone()));
        }
        next = err.source();
    }
    None
}

/// Most rounds of `input_required` one call may take before it fails.
const MAX_INPUT_ROUNDS: usize = 8;

/// How long a call's route stays open after its answer, for reports still being handled.
const REPORTS_GRACE: std::time::Duration = std::time::Duration::from_millis(20);

/// Sends `notifications/cancelled` for a request whose answer nobody waits for any more.
struct Abandoned(Option<(rmcp::Peer<rmcp::RoleClient>, rmcp::model::RequestId)>);

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some((peer, id)) = self.0.take() {
            notify_cancelled(peer, id);
        }
    }
}

/// Tells the upstream, in the background, that nobody waits for the answer to `id` any more.
pub(crate) fn notify_cancelled(peer: rmcp::Peer<rmcp::RoleClient>, id: rmcp::model::RequestId) {
    let cancelled =
        rmcp::model::CancelledNotification::new(rmcp::model::CancelledNotificationParam::new(
            Some(id),
            Some("the caller cancelled the call".into()),
        ));
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            let _ = peer
                .send_notification(rmcp::model::ClientNotification::CancelledNotification(
                    cancelled,
                ))
                .await;
        });
    }
}

/// Sends one `tools/call`. A plain call (no progress relayed) to a streamable HTTP upstream of
/// a revision before 2026-07-28 takes the fast path ([`crate::direct`]) unless that hands it
/// back; `retry_safe` (the tool may run twice) tells it whether it may. Every other call goes
/// through rmcp's session. When the caller relays progress, the request is sent as a handle so
/// that the progress token rmcp gives it is known, and the upstream's reports for that token
/// reach the caller ([`ProgressRoutes`](crate::connect::ProgressRoutes)) until the answer.
async fn send(
    shared: &crate::upstream::Shared,
    session: &Session,
    ctx: &ToolContext,
    params: &CallToolRequestParams,
    deadline: Instant,
    retry_safe: bool,
    call: crate::relay::OnStreamOf,
) -> Result<CallToolResponse, ServiceError> {
    if !ctx.wants_progress() {
        if let Some(direct) = &session.direct {
            if session.protocol < ProtocolVersion::V_2026_07_28 {
                let answer = direct
                    .call_tool(&session.peer, params, retry_safe, Some(call))
                    .await;
                if let Some(answer) = answer {
                    shared.direct_calls.fetch_add(1, Ordering::Relaxed);
                    return answer;
                }
            }
        }
        return session.peer.call_tool_once(params.clone()).await;
    }
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
    // rmcp sends `notifications/cancelled` itself when this timeout passes.
    let timeout = deadline.saturating_duration_since(Instant::now());
    let handle = session
        .peer
        .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
        .await?;
    let ctx = ctx.clone();
    let sink = toolshed_core::ProgressSink::new(move |p| ctx.report_progress(p));
    let _route = crate::connect::open_route(&shared.progress, &handle.progress_token, sink);
    // Dropped before the answer (the caller cancelled or gave up): the upstream hears of it,
    // as `call_tool_once` does for calls without progress.
    let mut abandoned = Abandoned(Some((session.peer.clone(), handle.id.clone())));
    let answer = handle.await_response().await;
    abandoned.0 = None;
    let answer = answer?;
    // rmcp hands notifications to tasks of their own, so the answer can overtake the last
    // reports sent before it: let those land before the route closes.
    tokio::time::sleep(REPORTS_GRACE).await;
    match answer {
        ServerResult::CallToolResult(r) => Ok(CallToolResponse::Complete(r)),
        ServerResult::InputRequiredResult(r) => Ok(CallToolResponse::InputRequired(r)),
        ServerResult::CreateTaskResult(r) => Ok(CallToolResponse::Task(r)),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// The arguments of `tools/call`: a JSON object, or none.
fn object_arguments(args: Value) -> Result<Option<Map<String, Value>>, ToolError> {
    match args {
        Value::Object(m) => Ok(Some(m)),
        Value::Null => Ok(None),
        other => Err(ToolError::invalid(format!(
            "arguments must be a JSON object, got {other}"
        ))),
    }
}

/// No usable session: a timeout while reconnecting, else the reason (e.g. shut down).
fn session_error(e: McpSourceError) -> ToolError {
    match e {
        McpSourceError::Unavailable { .. } => ToolError::new(ToolErrorKind::Timeout, e.to_string()),
        other => ToolError::upstream(other.to_string()),
    }
}
