//! Toolshed's HTTP API. Every route authenticates the caller (API key, or the anonymous
//! principal when configured), then calls the engine: nothing here touches a tool handler.
//!
//! | route | what |
//! |---|---|
//! | `GET /healthz` | liveness |
//! | `GET /v1/tools?query=&limit=&namespace=` | ranked search (or the namespace summary with no query) |
//! | `GET /v1/tools/{path}?schemas=true` | compact description |
//! | `POST /v1/tools/{path}/call` | call with a JSON object body |
//! | `POST /v1/scripts` | run `{"script": "..."}` |
//! | `GET /v1/executions` | paused (and running or interrupted) executions the caller owns or may decide |
//! | `GET /v1/executions/{id}` | one such execution: status, pending call, result |
//! | `POST /v1/executions/{id}/resume` | `{"decision": "approve" \| "deny"}`, a person's decision (needs `decide`) |
//! | `GET /v1/audit?limit=` | the caller's newest audit entries |
//!
//! Errors are `{"error": {"code", "message", "data"?}}` with a fitting status code; a rate limit
//! and an overloaded server (every script slot busy, the queue full) answer 429 with
//! `Retry-After`.
//!
//! The binary puts [`guard`] (Host, Origin and content-type checks) in front of this router and
//! the MCP routes together: see [`guard`](mod@guard).

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use toolshed_engine::{
    Caller, Decision, DecisionChannel, Engine, EngineError, Face, KeyRing, Outcome,
};

pub mod guard;

pub use guard::{guard, GuardConfig, LOOPBACK_HOSTS};

#[derive(Clone)]
struct AppState {
    engine: Engine,
    keys: KeyRing,
}

/// The HTTP API router.
pub fn router(engine: Engine, keys: KeyRing) -> Router {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/v1/tools", get(search))
        .route("/v1/tools/{path}", get(describe))
        .route("/v1/tools/{path}/call", post(call))
        .route("/v1/scripts", post(run_script))
        .route("/v1/executions", get(pending))
        .route("/v1/executions/{id}", get(execution))
        .route("/v1/executions/{id}/resume", post(resume))
        .route("/v1/audit", get(audit))
        .with_state(AppState { engine, keys })
}

struct ApiError(StatusCode, Value, Option<u64>);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.0, Json(json!({"error": self.1}))).into_response();
        if let Some(secs) = self.2 {
            r.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        r
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        let status = match &e {
            EngineError::NotFound { .. } | EngineError::UnknownExecution { .. } => {
                StatusCode::NOT_FOUND
            }
            EngineError::MalformedArguments { .. }
            | EngineError::InvalidArguments { .. }
            | EngineError::InvalidDecision(_) => StatusCode::BAD_REQUEST,
            EngineError::Denied { .. } | EngineError::Forbidden { .. } => StatusCode::FORBIDDEN,
            EngineError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            EngineError::Expired { .. } => StatusCode::GONE,
            EngineError::AlreadySettled { .. } | EngineError::Busy { .. } => StatusCode::CONFLICT,
            EngineError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            EngineError::Overloaded(_) => StatusCode::TOO_MANY_REQUESTS,
            EngineError::Tool { .. } | EngineError::InvalidOutput { .. } => StatusCode::BAD_GATEWAY,
            EngineError::BrokenSchema { .. }
            | EngineError::Store(_)
            | EngineError::JournalWrite { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, e.to_json(), e.retry_after_secs())
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError(
        StatusCode::BAD_REQUEST,
        json!({"code": "bad_request", "message": message.into()}),
        None,
    )
}

/// Query strings that do not parse (`limit=ten`) are a JSON 400 like every other error.
fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(t)| t)
        .map_err(|e| bad_request(format!("invalid query string: {}", e.body_text())))
}

fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let key = KeyRing::key_from_headers(h("authorization"), h("x-api-key"));
    match state.keys.principal(key) {
        Some(p) => Ok(state.engine.caller(&p, Face::Http)),
        None => Err(ApiError(
            StatusCode::UNAUTHORIZED,
            json!({"code": "unauthorized", "message": "missing or unknown API key: send 'Authorization: Bearer <key>'"}),
            None,
        )),
    }
}

fn outcome_response(o: Outcome) -> Response {
    let status = match &o {
        Outcome::Completed { .. } => StatusCode::OK,
        Outcome::Paused { .. } => StatusCode::ACCEPTED,
        Outcome::Failed { .. } => StatusCode::UNPROCESSABLE_ENTITY,
    };
    (status, Json(o.to_json())).into_response()
}

#[derive(Deserialize)]
struct SearchParams {
    query: Option<String>,
    limit: Option<usize>,
    namespace: Option<String>,
}

async fn search(
    State(s): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<SearchParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers)?;
    let q = query(q)?;
    match q.query.as_deref().filter(|t| !t.trim().is_empty()) {
        Some(text) => {
            let answer =
                s.engine
                    .search(&caller, text, q.limit.unwrap_or(10), q.namespace.as_deref());
            Ok(Json(answer).into_response())
        }
        None => Ok(Json(json!({
            "summary": s.engine.view_summary(&caller),
            "namespaces": s.engine.namespaces(&caller),
        }))
        .into_response()),
    }
}

#[derive(Deserialize)]
struct DescribeParams {
    #[serde(default)]
    schemas: bool,
}

async fn describe(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(path): Path<String>,
    q: Result<Query<DescribeParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers)?;
    let q = query(q)?;
    Ok(Json(s.engine.describe(&caller, &path, q.schemas)?).into_response())
}

async fn call(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(path): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers)?;
    let text =
        std::str::from_utf8(&body).map_err(|_| bad_request("the request body is not UTF-8"))?;
    let args = Engine::parse_args(&path, text)?;
    Ok(outcome_response(s.engine.call(&caller, &path, args).await?))
}

async fn run_script(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers)?;
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| bad_request(format!("the body is not JSON: {e}")))?;
    let script = v
        .get("script")
        .and_then(Value::as_str)
        .ok_or_else(|| bad_request("expected {\"script\": \"...\"}"))?;
    Ok(outcome_response(
        s.engine.run_script(&caller, script).await?,
    ))
}

async fn pending(State(s): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers)?;
    Ok(Json(json!({"executions": s.engine.pending(&caller).await?})).into_response())
}

async fn execution(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers)?;
    Ok(Json(s.engine.execution(&caller, &id).await?).into_response())
}

#[derive(Deserialize)]
struct AuditParams {
    limit: Option<usize>,
}

async fn audit(
    State(s): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<AuditParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers)?;
    let q = query(q)?;
    let entries = s.engine.audit_of(&caller, q.limit.unwrap_or(50)).await?;
    Ok(Json(json!({ "entries": entries })).into_response())
}

async fn resume(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers)?;
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| bad_request(format!("the body is not JSON: {e}")))?;
    let decision: Decision = v
        .get("decision")
        .and_then(Value::as_str)
        .ok_or_else(|| bad_request("expected {\"decision\": \"approve\" | \"deny\"}"))?
        .parse()?;
    Ok(outcome_response(
        s.engine
            .resume(&caller, &id, decision, DecisionChannel::Human(Face::Http))
            .await?,
    ))
}
