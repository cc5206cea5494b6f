//! Agent definitions over HTTP: every route calls an `agents.*` tool through the engine (policy,
//! approval, audit), so the API and the builder tools are one thing.
//!
//! | route | tool |
//! |---|---|
//! | `GET /v1/agents` | `agents.list` |
//! | `GET /v1/agents/{name}?version=` | `agents.get` |
//! | `PUT /v1/agents/{name}` (the definition's JSON text) | `agents.config.write` |
//! | `PATCH /v1/agents/{name}` (`application/json-patch+json`) | `agents.config.patch` |
//! | `DELETE /v1/agents/{name}` | `agents.delete` (destructive: pauses under the default policy) |
//! | `GET /v1/agents/{name}/versions` | `agents.versions` |
//! | `POST /v1/agents/{name}/publish` | `agents.publish` (a write: pauses under the default policy) |
//! | `POST /v1/agents/{name}/restore` `{"version"}` | `agents.restore` |
//! | `GET /v1/agent-schema` | `agents.schema` (the JSON Schema) |
//! | `POST /v1/agents/{name}/runs` `{input, clientTools?}` | a run of the live version ([`toolshed_engine::Engine::run_agent`]); JSON, or Server-Sent Events with `Accept: text/event-stream` |
//!
//! A completed call answers its result (200); a paused one the pause (202); a definition that
//! fails a stage answers 422 with `{ok: false, stage, errors}` itself.

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use toolshed_core::ToolErrorKind;
use toolshed_engine::{EngineError, Outcome};

use crate::openapi::Route;
use crate::{any_object, authenticate, bad_request, outcome_response, query, ApiError, AppState};

/// Calls `path` with `args` as the caller and answers as the module docs say.
async fn through_engine(
    s: &AppState,
    headers: &HeaderMap,
    path: &str,
    args: Value,
) -> Result<Response, ApiError> {
    let caller = authenticate(s, headers).await?;
    match s.engine.call(&caller, path, args).await {
        Ok(Outcome::Completed { result, .. }) => Ok(Json(result).into_response()),
        Ok(other) => Ok(outcome_response(other)),
        Err(e) if e.is_rejection() => Ok((
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(e.data().unwrap_or_else(|| json!({"ok": false}))),
        )
            .into_response()),
        // The agents tools run in Toolshed itself: their failures are not an upstream's.
        Err(EngineError::Tool { error, .. }) if error.kind != ToolErrorKind::Internal => {
            let status = match error.kind {
                ToolErrorKind::NotFound => StatusCode::NOT_FOUND,
                ToolErrorKind::Conflict => StatusCode::CONFLICT,
                _ => StatusCode::BAD_REQUEST,
            };
            let code = match error.kind {
                ToolErrorKind::NotFound => "not_found",
                ToolErrorKind::Conflict => "conflict",
                _ => "invalid_input",
            };
            Err(ApiError::new(
                status,
                json!({"code": code, "message": error.message}),
            ))
        }
        Err(e) => Err(e.into()),
    }
}

fn text(body: &Bytes) -> Result<String, ApiError> {
    String::from_utf8(body.to_vec()).map_err(|_| bad_request("the request body is not UTF-8"))
}

async fn list(State(s): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    through_engine(&s, &headers, "agents.list", json!({})).await
}

/// `GET /v1/agents/{name}`.
#[derive(Deserialize, JsonSchema)]
struct GetParams {
    /// One stored version instead of the draft and live ones.
    version: Option<i64>,
}

async fn get(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    q: Result<Query<GetParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let mut args = json!({"name": name});
    if let Some(v) = q.version {
        args["version"] = json!(v);
    }
    through_engine(&s, &headers, "agents.get", args).await
}

/// The body of `POST /v1/agents/{name}/runs`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunBody {
    /// The user's message.
    input: String,
    /// Tools the client executes itself (MCP, OpenAI or Anthropic declarations).
    #[serde(default)]
    client_tools: Vec<Value>,
    /// The thread whose memory the run reads and extends (the agent must enable memory): its
    /// newest messages precede the input, and the input and answer are added when it completes.
    #[serde(default)]
    thread_id: Option<String>,
}

/// `POST /v1/agents/{name}/runs`.
async fn run(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let body: RunBody = crate::json_body(&body)?;
    if crate::events::wants_stream(&headers) {
        return Ok(crate::events::stream_execution(
            s.engine.clone(),
            move |engine, id| async move {
                engine
                    .run_agent(
                        &caller,
                        &name,
                        body.input,
                        &body.client_tools,
                        body.thread_id,
                        Some(id),
                    )
                    .await
            },
        ));
    }
    let out = s
        .engine
        .run_agent(
            &caller,
            &name,
            body.input,
            &body.client_tools,
            body.thread_id,
            None,
        )
        .await?;
    Ok(outcome_response(out))
}

async fn put(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    // The text itself, so that a parse error names its line and column.
    let config = text(&body)?;
    through_engine(
        &s,
        &headers,
        "agents.config.write",
        json!({"name": name, "config": config}),
    )
    .await
}

async fn patch(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ops = text(&body)?;
    through_engine(
        &s,
        &headers,
        "agents.config.patch",
        json!({"name": name, "patch": ops}),
    )
    .await
}

async fn delete(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    through_engine(&s, &headers, "agents.delete", json!({"name": name})).await
}

async fn versions(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    through_engine(&s, &headers, "agents.versions", json!({"name": name})).await
}

async fn publish(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    through_engine(&s, &headers, "agents.publish", json!({"name": name})).await
}

/// The body of `POST /v1/agents/{name}/restore`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RestoreBody {
    /// The version copied into a new draft.
    version: i64,
}

async fn restore(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let b: RestoreBody = crate::json_body(&body)?;
    through_engine(
        &s,
        &headers,
        "agents.restore",
        json!({"name": name, "version": b.version}),
    )
    .await
}

async fn schema(State(s): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    match s
        .engine
        .call(&caller, "agents.schema", json!({"format": "json"}))
        .await?
    {
        Outcome::Completed { result, .. } => Ok(Json(result["schema"].clone()).into_response()),
        other => Ok(outcome_response(other)),
    }
}

/// The agent routes of the route table.
pub(crate) fn routes() -> Vec<Route<AppState>> {
    use StatusCode as S;
    let result = any_object;
    let stages = "The definition failed a stage: {ok: false, stage, errors}.";
    vec![
        Route::post("/v1/agents/{name}/runs", run)
            .doc(
                "runAgent",
                "Run the agent's live version: JSON, or its events as Server-Sent Events",
            )
            .body("{input, clientTools?}", any_object)
            .answers(S::OK, "The completed or failed run.", result)
            .answers(
                S::ACCEPTED,
                "The run paused: {status, executionId, waits, toolCalls?}.",
                result,
            )
            .streams(S::OK, "The run's events, then `event: outcome`.", result)
            .errors(&[
                S::BAD_REQUEST,
                S::NOT_FOUND,
                S::TOO_MANY_REQUESTS,
                S::INTERNAL_SERVER_ERROR,
            ]),
        Route::get("/v1/agents", list)
            .doc("listAgents", "Every agent definition")
            .answers(S::OK, "{agents: [...]}", result)
            .errors(&[S::NOT_FOUND, S::INTERNAL_SERVER_ERROR]),
        Route::get("/v1/agents/{name}", get)
            .doc(
                "getAgent",
                "An agent's draft and live definitions, or one version",
            )
            .query::<GetParams>()
            .answers(
                S::OK,
                "{name, draft, live} or {name, version, config}.",
                result,
            )
            .errors(&[S::NOT_FOUND, S::INTERNAL_SERVER_ERROR]),
        Route::put("/v1/agents/{name}", put)
            .doc("writeAgent", "Write a whole definition as the new draft")
            .body("The definition (JSON).", any_object)
            .answers(S::OK, "{ok: true, name, version, warnings?}", result)
            .answers(S::UNPROCESSABLE_ENTITY, stages, result)
            .errors(&[S::NOT_FOUND, S::CONFLICT, S::INTERNAL_SERVER_ERROR]),
        Route::patch("/v1/agents/{name}", patch)
            .doc("patchAgent", "Apply RFC 6902 operations to the draft")
            .body(
                "JSON Patch operations (application/json-patch+json).",
                any_object,
            )
            .answers(S::OK, "{ok: true, name, version, warnings?}", result)
            .answers(S::UNPROCESSABLE_ENTITY, stages, result)
            .errors(&[S::NOT_FOUND, S::CONFLICT, S::INTERNAL_SERVER_ERROR]),
        Route::delete("/v1/agents/{name}", delete)
            .doc(
                "deleteAgent",
                "Delete an agent and its versions (pauses for approval by default)",
            )
            .answers(S::OK, "{ok: true, deleted}", result)
            .answers(
                S::ACCEPTED,
                "Paused: the deletion waits for approval.",
                result,
            )
            .errors(&[S::NOT_FOUND, S::INTERNAL_SERVER_ERROR]),
        Route::get("/v1/agents/{name}/versions", versions)
            .doc("agentVersions", "Every version of an agent, newest first")
            .answers(S::OK, "{name, versions: [...]}", result)
            .errors(&[S::NOT_FOUND, S::INTERNAL_SERVER_ERROR]),
        Route::post("/v1/agents/{name}/publish", publish)
            .doc(
                "publishAgent",
                "Make the draft the live version (pauses for approval by default)",
            )
            .answers(S::OK, "{ok: true, name, liveVersion}", result)
            .answers(
                S::ACCEPTED,
                "Paused: publishing waits for approval.",
                result,
            )
            .errors(&[S::NOT_FOUND, S::CONFLICT, S::INTERNAL_SERVER_ERROR]),
        Route::post("/v1/agents/{name}/restore", restore)
            .doc("restoreAgent", "Copy an earlier version into a new draft")
            .body("The version.", crate::openapi::schema_of::<RestoreBody>)
            .answers(S::OK, "{ok: true, name, version}", result)
            .answers(S::UNPROCESSABLE_ENTITY, stages, result)
            .errors(&[S::NOT_FOUND, S::CONFLICT, S::INTERNAL_SERVER_ERROR]),
        Route::get("/v1/agent-schema", schema)
            .doc("agentSchema", "The JSON Schema of agent definitions")
            .answers(S::OK, "A JSON Schema (draft 2020-12).", result)
            .errors(&[S::NOT_FOUND, S::INTERNAL_SERVER_ERROR]),
    ]
}
