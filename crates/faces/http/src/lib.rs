//! Toolshed's HTTP API. Every route authenticates the caller (API key, OAuth bearer token when
//! `[oauth]` is configured, or the anonymous principal of an open server), then calls the
//! engine: nothing here touches a tool handler. A refused request answers 401 (or 403 for a
//! missing scope) with a `WWW-Authenticate` challenge naming the protected-resource metadata.
//!
//! | route | what |
//! |---|---|
//! | `GET /healthz` | liveness, and how searches rank now (`search`: `lexical`, `embedding`, `hybrid`) |
//! | `GET /.well-known/oauth-protected-resource[/…]` | RFC 9728 metadata (with `[oauth]`) |
//! | `GET /v1/openapi.json` | the OpenAPI 3.1 document of these routes |
//! | `GET /v1/tools?query=&limit=&namespace=` | ranked search (or the namespace summary with no query) |
//! | `GET /v1/tools/{path}?schemas=true` | compact description |
//! | `POST /v1/tools/{path}/call` | call with a JSON object body |
//! | `POST /v1/scripts` | run `{"script": "...", "clientTools"?: [...]}` |
//! | `GET /v1/executions?wait=approval\|tool_result\|input` | executions waiting (or running or interrupted) the caller owns or may answer |
//! | `GET /v1/executions/{id}` | one such execution: status, open waits, result |
//! | `POST /v1/executions/{id}/resume` | `{"decision": "approve" \| "deny", "waitId"?}`, a person's decision (needs `decide`) |
//! | `POST /v1/executions/{id}/tool-results` | `{"results": [{"callId", "result"} \| {"callId", "error": {"message"}}]}` (the owner) |
//! | `POST /v1/executions/{id}/answer` | `{"waitId", "action": "accept" \| "decline" \| "cancel", "content"?}` |
//! | `POST /v1/executions/{id}/cancel` | stop a running or paused execution |
//!
//! A paused answer is 202 with `{status, executionId, waits}`: `status` is `tool_call_required`
//! (with `toolCalls`) when every wait is a client tool call, else `paused`. Bodies are read
//! through the engine's operation definitions ([`toolshed_engine::ops`]).
//! | `GET /v1/audit?limit=` | the caller's newest audit entries |
//! | `/connect/…`, `/v1/connections` | per-user connections: see [`connect`](mod@connect) |
//!
//! Errors are `{"error": {"code", "message", "data"?}}` with a fitting status code; a rate limit
//! and an overloaded server (every script slot busy, the queue full) answer 429 with
//! `Retry-After`.
//!
//! [`routes`] is the one table of routes: the router and the OpenAPI document (module
//! `openapi`) are both built from it, so every route served is documented.
//!
//! The binary puts [`guard`] (Host, Origin and content-type checks) in front of this router and
//! the MCP routes together: see [`guard`](mod@guard).

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use toolshed_core::formats::ExportFormat;
use toolshed_core::Pattern;
use toolshed_core::ToolErrorKind;
use toolshed_engine::ops::{ListWaitsArgs, ResumeArgs, RunScriptArgs};
use toolshed_engine::{
    AuditEntry, Caller, DecisionChannel, Description, Engine, EngineError, ExecutionInfo, Face,
    Outcome, PendingSummary, SearchAnswer,
};
use toolshed_identity::{Authenticator, Who};

mod agents;
mod connect;
mod events;
pub mod guard;
mod openapi;

pub use guard::{guard, GuardConfig, LOOPBACK_HOSTS};
use openapi::{schema_of, Route};

#[derive(Clone)]
struct AppState {
    engine: Engine,
    auth: Authenticator,
    /// The serialized OpenAPI document.
    openapi: Bytes,
}

/// The routes: handlers and their documentation, in one table.
fn routes() -> Vec<Route<AppState>> {
    use StatusCode as S;
    let outcome = schema_of::<Outcome>;
    vec![
        Route::get("/healthz", health)
            .public()
            .doc("health", "Liveness, and how searches rank now")
            .answers(
                S::OK,
                "The server is up; `search` says whether searches rank by words only, by words while the tools are being embedded, or by words and meaning.",
                schema_of::<Health>,
            ),
        Route::get("/.well-known/oauth-protected-resource", resource_metadata)
            .public()
            .doc(
                "protectedResourceMetadata",
                "OAuth protected-resource metadata (RFC 9728): this server's resource URI and the authorization servers it trusts",
            )
            .answers(S::OK, "The metadata document.", any_object)
            .errors(&[S::NOT_FOUND]),
        Route::get("/v1/openapi.json", openapi_document)
            .doc("openapi", "This OpenAPI document")
            .answers(S::OK, "An OpenAPI 3.1 document.", any_object),
        Route::get("/v1/tools", search)
            .doc(
                "searchTools",
                "Ranked search in the caller's view, the view's summary, or the view exported as definitions of a format",
            )
            .query::<SearchParams>()
            .answers(
                S::OK,
                "Hits with a `query`; `{format, tools}` with a `format`; else the summary and namespace counts.",
                schema_of::<ToolsAnswer>,
            )
            .errors(&[S::BAD_REQUEST]),
        Route::get("/v1/tools/{path}", describe)
            .doc(
                "describeTool",
                "A tool's compact description, optionally with its schemas",
            )
            .query::<DescribeParams>()
            .answers(S::OK, "The description.", schema_of::<Description>)
            .errors(&[S::NOT_FOUND]),
        Route::post("/v1/tools/{path}/call", call)
            .doc(
                "callTool",
                "Call a tool (a destructive one pauses for approval)",
            )
            .body("The tool's arguments.", tool_arguments)
            .answers(S::OK, "The call completed.", outcome)
            .answers(
                S::ACCEPTED,
                "Paused: the destructive call waits for a decision.",
                outcome,
            )
            .errors(&[
                S::BAD_REQUEST,
                S::NOT_FOUND,
                S::CONFLICT,
                S::TOO_MANY_REQUESTS,
                S::INTERNAL_SERVER_ERROR,
                S::BAD_GATEWAY,
                S::GATEWAY_TIMEOUT,
            ]),
        Route::post("/v1/scripts", run_script)
            .doc("runScript", "Run a JavaScript script that calls tools")
            .body(
                "The script and the client tools it may call.",
                schema_of::<RunScriptArgs>,
            )
            .answers(S::OK, "The script completed (or was cancelled).", outcome)
            .answers(
                S::ACCEPTED,
                "Paused: waits for approvals, client tool results or answers.",
                outcome,
            )
            .answers(S::UNPROCESSABLE_ENTITY, "The script failed.", outcome)
            .errors(&[
                S::BAD_REQUEST,
                S::TOO_MANY_REQUESTS,
                S::INTERNAL_SERVER_ERROR,
            ]),
        Route::get("/v1/executions", pending)
            .doc(
                "listExecutions",
                "Executions waiting for an answer the caller owns or may answer",
            )
            .query::<ListWaitsArgs>()
            .answers(S::OK, "Newest first.", schema_of::<ExecutionList>)
            .errors(&[S::BAD_REQUEST, S::INTERNAL_SERVER_ERROR]),
        Route::get("/v1/executions/{id}", execution)
            .doc(
                "getExecution",
                "One execution the caller owns or may decide",
            )
            .answers(S::OK, "The execution.", schema_of::<ExecutionInfo>)
            .errors(&[S::NOT_FOUND, S::INTERNAL_SERVER_ERROR]),
        answering(
            Route::post("/v1/executions/{id}/resume", resume),
            "resumeExecution",
            "Approve or deny a call of a paused execution that needs approval",
            "The decision (and the approval's waitId when several wait).",
        ),
        answering(
            Route::post("/v1/executions/{id}/tool-results", tool_results),
            "postToolResults",
            "Post the results of client tool calls (the execution's owner)",
            "The results, by callId.",
        ),
        answering(
            Route::post("/v1/executions/{id}/answer", answer),
            "answerQuestion",
            "Answer a question (an input wait) of a paused execution",
            "The waitId, the action and, to accept a form, its content.",
        ),
        Route::post("/v1/executions/{id}/cancel", cancel)
            .doc("cancelExecution", "Stop a running or paused execution")
            .answers(S::OK, "Cancelled.", outcome)
            .errors(&[
                S::NOT_FOUND,
                S::FORBIDDEN,
                S::CONFLICT,
                S::INTERNAL_SERVER_ERROR,
            ]),
        Route::get("/v1/audit", audit)
            .doc("auditLog", "The caller's newest audit entries")
            .query::<AuditParams>()
            .answers(S::OK, "Newest first.", schema_of::<AuditLog>)
            .errors(&[S::INTERNAL_SERVER_ERROR]),
    ]
    .into_iter()
    .chain(agents::routes())
    .chain(events::routes())
    .chain(connect::routes())
    .collect()
}

/// The documentation every route that answers a paused execution shares.
fn answering(
    route: Route<AppState>,
    id: &'static str,
    summary: &'static str,
    body: &'static str,
) -> Route<AppState> {
    use StatusCode as S;
    let outcome = schema_of::<Outcome>;
    route
        .doc(id, summary)
        .body(body, schema_of::<ResumeArgs>)
        .answers(S::OK, "The execution completed.", outcome)
        .answers(
            S::ACCEPTED,
            "Still waiting (on other waits, or paused again).",
            outcome,
        )
        .answers(S::UNPROCESSABLE_ENTITY, "The execution failed.", outcome)
        .errors(&[
            S::BAD_REQUEST,
            S::NOT_FOUND,
            S::FORBIDDEN,
            S::CONFLICT,
            S::GONE,
            S::TOO_MANY_REQUESTS,
            S::INTERNAL_SERVER_ERROR,
            S::BAD_GATEWAY,
            S::GATEWAY_TIMEOUT,
        ])
}

/// The HTTP API router. `auth` says who may call: API keys (a [`toolshed_identity::KeyRing`]
/// converts), and OAuth tokens when configured.
pub fn router(engine: Engine, auth: impl Into<Authenticator>) -> Router {
    let routes = routes();
    let document = openapi::document(routes.iter().map(|r| &r.op));
    // Several methods on one path share one method router.
    let mut by_path: BTreeMap<&'static str, axum::routing::MethodRouter<AppState>> =
        BTreeMap::new();
    for r in routes {
        let merged = match by_path.remove(r.op.path) {
            Some(m) => m.merge(r.handler),
            None => r.handler,
        };
        by_path.insert(r.op.path, merged);
    }
    let mut router = Router::new();
    for (path, handler) in by_path {
        router = router.route(path, handler);
    }
    // RFC 9728 §3.1 puts the resource's path after the well-known part.
    router = router.route(
        "/.well-known/oauth-protected-resource/{*resource}",
        axum::routing::get(resource_metadata),
    );
    router.with_state(AppState {
        engine,
        auth: auth.into(),
        openapi: Bytes::from(document.to_string()),
    })
}

/// The OpenAPI document of [`router`]'s routes (what `GET /v1/openapi.json` answers).
pub fn openapi_document_json() -> Value {
    openapi::document(routes().iter().map(|r| &r.op))
}

/// The method and path of every route [`router`] serves.
pub fn operations() -> Vec<(Method, &'static str)> {
    routes()
        .into_iter()
        .map(|r| (r.op.method, r.op.path))
        .collect()
}

fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object"})
}

fn tool_arguments(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "The tool's arguments, as its input schema says (`GET /v1/tools/{path}?schemas=true`).",
    })
}

#[derive(Serialize, JsonSchema)]
struct Health {
    status: &'static str,
    /// How searches rank now: `lexical` (by words: no model, or embedding failed),
    /// `embedding` (by words until the tools' embeddings are done) or `hybrid` (words and
    /// meaning).
    search: &'static str,
}

/// `GET /v1/tools`: ranked hits for a query, else the caller's view.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum ToolsAnswer {
    Hits(SearchAnswer),
    View(ViewSummary),
}

/// The caller's view: a sentence and tool counts per namespace.
#[derive(Serialize, JsonSchema)]
struct ViewSummary {
    summary: String,
    namespaces: BTreeMap<String, usize>,
}

#[derive(Serialize, JsonSchema)]
struct ExecutionList {
    executions: Vec<PendingSummary>,
}

#[derive(Serialize, JsonSchema)]
struct AuditLog {
    entries: Vec<AuditEntry>,
}

async fn health(State(s): State<AppState>) -> Json<Health> {
    // A public route never waits on a build: while one runs, the state comes from the
    // embedding's records; the first look at a new snapshot builds its index off the async
    // workers.
    let search = match s.engine.try_search_state() {
        Some(state) => state.as_str(),
        None => {
            let engine = s.engine.clone();
            tokio::task::spawn_blocking(move || engine.search_state().as_str())
                .await
                .unwrap_or("lexical")
        }
    };
    Json(Health {
        status: "ok",
        search,
    })
}

async fn openapi_document(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authenticate(&s, &headers).await?;
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        s.openapi.clone(),
    )
        .into_response())
}

/// An error answer: status, the `error` object, `Retry-After` seconds, and a
/// `WWW-Authenticate` challenge.
struct ApiError(StatusCode, Value, Option<u64>, Option<Box<HeaderValue>>);

impl ApiError {
    fn new(status: StatusCode, error: Value) -> Self {
        Self(status, error, None, None)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.0, Json(json!({"error": self.1}))).into_response();
        if let Some(secs) = self.2 {
            r.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        if let Some(challenge) = self.3 {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, *challenge);
        }
        r
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        let status = match &e {
            EngineError::NotFound { .. }
            | EngineError::UnknownExecution { .. }
            | EngineError::UnknownAgent { .. } => StatusCode::NOT_FOUND,
            EngineError::MalformedArguments { .. }
            | EngineError::InvalidArguments { .. }
            | EngineError::InvalidDecision(_)
            | EngineError::InvalidAnswer { .. }
            | EngineError::InvalidClientTools(_)
            | EngineError::InvalidRun(_) => StatusCode::BAD_REQUEST,
            EngineError::UnknownWait { .. } => StatusCode::NOT_FOUND,
            EngineError::AlreadyAnswered { .. } | EngineError::RuntimeChanged { .. } => {
                StatusCode::CONFLICT
            }
            EngineError::Denied { .. }
            | EngineError::DeniedByPolicy { .. }
            | EngineError::Forbidden { .. } => StatusCode::FORBIDDEN,
            EngineError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            EngineError::Expired { .. } => StatusCode::GONE,
            EngineError::AlreadySettled { .. } | EngineError::Busy { .. } => StatusCode::CONFLICT,
            EngineError::Timeout { .. } | EngineError::QuestionUnanswered { .. } => {
                StatusCode::GATEWAY_TIMEOUT
            }
            EngineError::Overloaded(_) => StatusCode::TOO_MANY_REQUESTS,
            e if e.is_rejection() => StatusCode::UNPROCESSABLE_ENTITY,
            // A tool's own refusal of the caller's input is the caller's error; an upstream or
            // internal failure is the gateway's.
            EngineError::Tool { error, .. } => match error.kind {
                ToolErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
                ToolErrorKind::NotFound => StatusCode::NOT_FOUND,
                ToolErrorKind::Conflict => StatusCode::CONFLICT,
                ToolErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
                // A person must act first (a grant, the tool's link): the error carries it.
                ToolErrorKind::GrantRequired | ToolErrorKind::ActionRequired => {
                    StatusCode::CONFLICT
                }
                _ => StatusCode::BAD_GATEWAY,
            },
            EngineError::InvalidOutput { .. } => StatusCode::BAD_GATEWAY,
            EngineError::BrokenSchema { .. }
            | EngineError::Store(_)
            | EngineError::JournalWrite { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, e.to_json(), e.retry_after_secs(), None)
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        json!({"code": "bad_request", "message": message.into()}),
    )
}

/// Query strings that do not parse (`limit=ten`) are a JSON 400 like every other error.
fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(t)| t)
        .map_err(|e| bad_request(format!("invalid query string: {}", e.body_text())))
}

/// The caller of a request: an API key's principal, a principal signed in with an OAuth token
/// (its roles from the token), or the anonymous principal of an open server.
async fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    match state.auth.authenticate(headers).await {
        Ok(Who::Principal(p)) => Ok(state.engine.caller(&p, Face::Http)),
        Ok(Who::SignedIn(s)) => {
            Ok(state
                .engine
                .signed_in(&s.principal, &s.roles, &s.token, Face::Http))
        }
        Err(e) => Err(ApiError(
            e.status(),
            json!({"code": e.code(), "message": e.to_string()}),
            None,
            state.auth.challenge(&e).map(Box::new),
        )),
    }
}

/// `GET /.well-known/oauth-protected-resource[/…]`: RFC 9728's metadata (404 without `[oauth]`).
async fn resource_metadata(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    s.auth.resource_metadata().map(Json).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            json!({"code": "not_found", "message": "this server accepts no OAuth tokens ([oauth] is not configured)"}),
        )
    })
}

fn outcome_response(o: Outcome) -> Response {
    let status = match &o {
        Outcome::Completed { .. } | Outcome::Cancelled { .. } => StatusCode::OK,
        Outcome::Paused { .. } | Outcome::ToolCallRequired { .. } => StatusCode::ACCEPTED,
        Outcome::Failed { .. } => StatusCode::UNPROCESSABLE_ENTITY,
    };
    (status, Json(o.to_json())).into_response()
}

#[derive(Deserialize, JsonSchema)]
struct SearchParams {
    /// Search text; without it the answer is the view's summary.
    query: Option<String>,
    /// At most this many hits (default 10).
    limit: Option<usize>,
    /// Only tools of this namespace.
    namespace: Option<String>,
    /// Instead of a search: the whole view as definitions in this format (`mcp`, `openai` or
    /// `anthropic`).
    format: Option<String>,
    /// With `format`: only tools whose path matches this dot-glob (`tables.**`).
    pattern: Option<String>,
}

async fn search(
    State(s): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<SearchParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let q = query(q)?;
    if let Some(format) = &q.format {
        return export(&s, &caller, format, q.pattern.as_deref());
    }
    if q.pattern.is_some() {
        return Err(bad_request("'pattern' goes with 'format' (an export)"));
    }
    match q.query.as_deref().filter(|t| !t.trim().is_empty()) {
        Some(text) => {
            let answer =
                s.engine
                    .search(&caller, text, q.limit.unwrap_or(10), q.namespace.as_deref());
            Ok(Json(ToolsAnswer::Hits(answer)).into_response())
        }
        None => Ok(Json(ToolsAnswer::View(ViewSummary {
            summary: s.engine.view_summary(&caller),
            namespaces: s.engine.namespaces(&caller),
        }))
        .into_response()),
    }
}

#[derive(Deserialize, JsonSchema)]
struct DescribeParams {
    /// Also return the raw input and output schemas.
    #[serde(default)]
    schemas: bool,
}

async fn describe(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(path): Path<String>,
    q: Result<Query<DescribeParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let q = query(q)?;
    Ok(Json(s.engine.describe(&caller, &path, q.schemas)?).into_response())
}

async fn call(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(path): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let text =
        std::str::from_utf8(&body).map_err(|_| bad_request("the request body is not UTF-8"))?;
    let args = Engine::parse_args(&path, text)?;
    Ok(outcome_response(s.engine.call(&caller, &path, args).await?))
}

/// A JSON body read into an operation's argument struct; errors say what was wrong.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| bad_request(format!("the body is not JSON: {e}")))?;
    serde_json::from_value(v).map_err(|e| bad_request(format!("invalid body: {e}")))
}

async fn run_script(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let request: RunScriptArgs = json_body(&body)?;
    if events::wants_stream(&headers) {
        return events::run_streaming(s.engine.clone(), caller, request);
    }
    Ok(outcome_response(
        s.engine.run_script_args(&caller, request).await?,
    ))
}

/// `GET /v1/tools?format=...`: the caller's view as definitions in that format.
fn export(
    s: &AppState,
    caller: &Caller,
    format: &str,
    pattern: Option<&str>,
) -> Result<Response, ApiError> {
    let format = ExportFormat::parse(format).map_err(bad_request)?;
    let pattern = pattern
        .map(Pattern::parse)
        .transpose()
        .map_err(|e| bad_request(format!("invalid pattern: {e}")))?;
    let tools = s.engine.export_tools(caller, format, pattern.as_ref());
    Ok(Json(json!({ "format": format.as_str(), "tools": tools })).into_response())
}

async fn pending(
    State(s): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<ListWaitsArgs>, QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let q = query(q)?;
    let executions = s
        .engine
        .waiting_of(&caller, q.wait, q.kind.map(|k| k.as_str()))
        .await?;
    Ok(Json(ExecutionList { executions }).into_response())
}

async fn execution(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    Ok(Json(s.engine.execution(&caller, &id).await?).into_response())
}

#[derive(Deserialize, JsonSchema)]
struct AuditParams {
    /// At most this many entries (default 50).
    limit: Option<usize>,
}

async fn audit(
    State(s): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<AuditParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let q = query(q)?;
    let entries = s.engine.audit_of(&caller, q.limit.unwrap_or(50)).await?;
    Ok(Json(AuditLog { entries }).into_response())
}

/// Which answer an answering route accepts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AnswerRoute {
    Decision,
    ToolResults,
    Question,
}

/// Reads an answer for execution `id` from the body, refusing the shapes of the other routes.
fn answer_body(id: String, body: &Bytes, route: AnswerRoute) -> Result<ResumeArgs, ApiError> {
    let mut a: ResumeArgs = json_body(body)?;
    a.execution_id = id;
    let fits = match route {
        AnswerRoute::Decision => a.decision.is_some() && a.results.is_none() && a.action.is_none(),
        AnswerRoute::ToolResults => {
            a.results.is_some() && a.decision.is_none() && a.action.is_none()
        }
        AnswerRoute::Question => a.action.is_some() && a.decision.is_none() && a.results.is_none(),
    };
    if !fits {
        return Err(bad_request(match route {
            AnswerRoute::Decision => "expected {\"decision\": \"approve\" | \"deny\", \"waitId\"?}",
            AnswerRoute::ToolResults => "expected {\"results\": [{\"callId\", \"result\"} | {\"callId\", \"error\": {\"message\"}}]}",
            AnswerRoute::Question => "expected {\"waitId\", \"action\": \"accept\" | \"decline\" | \"cancel\", \"content\"?}",
        }));
    }
    Ok(a)
}

async fn answer_route(
    s: AppState,
    headers: HeaderMap,
    id: String,
    body: Bytes,
    route: AnswerRoute,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let args = answer_body(id, &body, route)?;
    Ok(outcome_response(
        s.engine
            .resume_args(&caller, args, DecisionChannel::Human(Face::Http))
            .await?,
    ))
}

async fn resume(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    answer_route(s, headers, id, body, AnswerRoute::Decision).await
}

async fn tool_results(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    answer_route(s, headers, id, body, AnswerRoute::ToolResults).await
}

async fn answer(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    answer_route(s, headers, id, body, AnswerRoute::Question).await
}

async fn cancel(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    Ok(outcome_response(s.engine.cancel(&caller, &id).await?))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_route_has_a_unique_operation_id_a_summary_and_an_answer() {
        let mut ids = BTreeSet::new();
        let mut seen = BTreeSet::new();
        for r in routes() {
            let what = format!("{} {}", r.op.method, r.op.path);
            assert!(!r.op.id.is_empty() && !r.op.summary.is_empty(), "{what}");
            assert!(!r.op.answers.is_empty(), "{what} documents no answer");
            assert!(ids.insert(r.op.id), "{what}: operation id used twice");
            assert!(seen.insert(what), "a route twice in the table");
        }
    }
}
