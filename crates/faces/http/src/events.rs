//! Execution events as Server-Sent Events.
//!
//! - `GET /v1/executions/{id}/events` follows an execution the caller may see: every event after
//!   `Last-Event-ID` (or `?after=N`), then live ones, across pauses, until the execution is
//!   settled. Each SSE message has `id:` (the event's number), `event:` (its type) and `data:`
//!   (the event as JSON). Works on any replica and after a restart: what the run in this
//!   process has not sent is read from the store.
//! - `POST /v1/scripts` with `Accept: text/event-stream` runs the script and streams its events
//!   from the first, up to its end or its first pause; a last message `event: outcome` (no id)
//!   carries the body the JSON answer would have had (the full result, waits and tool calls).
//!   `POST /v1/agents/{name}/runs` streams an agent run the same way.
//!
//! Comments (`: keep-alive`) are sent every [`KEEP_ALIVE`] so proxies keep an idle stream open.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream, StreamExt};
use schemars::JsonSchema;
use serde::Deserialize;
use toolshed_engine::events::{Event, ExecutionEvent, Follower};
use toolshed_engine::ops::RunScriptArgs;
use toolshed_engine::{Engine, EngineError};

use crate::openapi::Route;
use crate::{any_object, authenticate, bad_request, query, ApiError, AppState};

/// How often an idle stream sends a comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(crate) fn routes() -> Vec<Route<AppState>> {
    use StatusCode as S;
    vec![Route::get("/v1/executions/{id}/events", follow)
        .doc(
            "executionEvents",
            "Follow an execution's events (Server-Sent Events, replayable from Last-Event-ID)",
        )
        .query::<EventParams>()
        .streams(
            S::OK,
            "Numbered events (`started`, `tool_call`, `tool_result`, `paused`, `resumed`, `log`, `text_delta`, `tasks_update`, `usage`, `completed`, `failed`, `cancelled`).",
            any_object,
        )
        .errors(&[S::BAD_REQUEST, S::NOT_FOUND, S::INTERNAL_SERVER_ERROR])]
}

#[derive(Deserialize, JsonSchema)]
struct EventParams {
    /// Events after this id (the `Last-Event-ID` header wins when both are given).
    after: Option<i64>,
}

async fn follow(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    q: Result<Query<EventParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let q = query(q)?;
    let after = match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|t| t.trim().parse::<i64>().ok())
            .filter(|n| *n >= 0)
            .ok_or_else(|| bad_request("Last-Event-ID must be a non-negative event number"))?,
        None => q.after.unwrap_or(0).max(0),
    };
    let follower = s.engine.follow(&caller, &id, after).await?;
    Ok(sse(events_of(follower, false)))
}

/// Whether the client asked for a stream.
pub(crate) fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"))
}

/// `POST /v1/scripts` answered as a stream: the run starts under an id chosen here, so its
/// channel exists (and is durable) before its first event.
pub(crate) fn run_streaming(
    engine: Engine,
    caller: toolshed_engine::Caller,
    args: RunScriptArgs,
) -> Result<Response, ApiError> {
    // Bad declarations are refused as a plain error before any stream starts.
    engine.check_script_args(&args)?;
    Ok(stream_execution(engine, move |engine, id| async move {
        engine.run_script_args_as(&caller, args, Some(id)).await
    }))
}

/// Starts an execution under an id chosen here (so its channel exists, and is durable, before
/// its first event) and streams its events up to its end or first pause, then `event:
/// outcome` with the body the JSON answer would have had.
pub(crate) fn stream_execution<F, Fut>(engine: Engine, start: F) -> Response
where
    F: FnOnce(Engine, String) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<toolshed_engine::Outcome, EngineError>>
        + Send
        + 'static,
{
    let id = toolshed_engine::executions::new_execution_id();
    let follower = engine.events().open_streaming(&id);
    let run = {
        let engine = engine.clone();
        let id = id.clone();
        tokio::spawn(async move {
            let r = start(engine.clone(), id.clone()).await;
            if let Err(e) = &r {
                // Refused before (or failed after) the run: the stream still ends, saying why.
                engine
                    .events()
                    .emit(&id, Event::Failed { error: e.to_json() });
                engine.events().close(&id, true).await;
            }
            r
        })
    };
    let outcome = stream::once(async move {
        let body = match run.await {
            Ok(Ok(o)) => o.to_json(),
            Ok(Err(e)) => serde_json::json!({ "error": e.to_json() }),
            Err(e) => {
                serde_json::json!({ "error": {"code": "internal", "message": e.to_string()} })
            }
        };
        Ok(SseEvent::default().event("outcome").data(body.to_string()))
    });
    sse(events_of(follower, true).chain(outcome))
}

fn sse<S>(events: S) -> Response
where
    S: Stream<Item = Result<SseEvent, Infallible>> + Send + 'static,
{
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response()
}

/// The follower's events as SSE messages; `until_pause` ends the stream at a pause too.
fn events_of(
    follower: Follower,
    until_pause: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> + Send + 'static {
    stream::unfold(follower, move |mut f| async move {
        let next = match until_pause {
            true => f.next_until_pause().await,
            false => f.next().await,
        }?;
        Some((Ok(message(next)), f))
    })
}

fn message(next: Result<Arc<ExecutionEvent>, EngineError>) -> SseEvent {
    match next {
        Ok(e) => SseEvent::default()
            .id(e.id.to_string())
            .event(e.event.kind())
            .data(serde_json::to_string(&*e).unwrap_or_default()),
        Err(e) => SseEvent::default()
            .event("error")
            .data(serde_json::json!({ "error": e.to_json() }).to_string()),
    }
}
