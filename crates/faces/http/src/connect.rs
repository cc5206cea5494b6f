//! Per-user connections over HTTP (see `toolshed_engine::connections`):
//!
//! | route | what |
//! |---|---|
//! | `GET /connect/{connection}?nonce=` | the link of a paused call: redirects the browser to the provider (no bearer token: the single-use nonce is the credential) |
//! | `GET /connect/callback?code=&state=` | the provider's answer: the grant is stored and the paused call continues |
//! | `GET /connect/upstreams/callback?code=&state=` | an authorization server's answer for an upstream MCP server whose authorization waited for a person (`toolshed_mcp_source::person`): Toolshed gets its token and connects it |
//! | `GET /v1/connections` | the caller's own grants (never the tokens) |
//! | `DELETE /v1/connections/{connection}` | revokes the caller's grant: its next call pauses for a new one |
//!
//! The redirect goes only to the configured authorization URL with the configured redirect
//! URI: nothing in the request can send the browser elsewhere.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolshed_engine::connections::{ConnectError, ConnectionInfo};

use crate::openapi::{schema_of, Route};
use crate::{authenticate, query, ApiError, AppState};

pub(crate) fn routes() -> Vec<Route<AppState>> {
    use StatusCode as S;
    vec![
        Route::get("/connect/{connection}", start)
            .public()
            .doc(
                "connectStart",
                "Open the link of a call paused for a grant: redirects to the provider's sign-in",
            )
            .query::<StartParams>()
            .answers(S::FOUND, "Redirect to the provider.", crate::any_object)
            .errors(&[S::BAD_REQUEST, S::NOT_FOUND, S::GONE]),
        Route::get("/connect/callback", callback)
            .public()
            .doc(
                "connectCallback",
                "The provider's answer: stores the grant and continues the paused call",
            )
            .query::<CallbackParams>()
            .answers(
                S::OK,
                "Connected; the outcome of the call that waited.",
                crate::any_object,
            )
            .errors(&[S::BAD_REQUEST, S::FORBIDDEN, S::BAD_GATEWAY]),
        Route::get("/connect/upstreams/callback", upstream_callback)
            .public()
            .doc(
                "upstreamAuthorizationCallback",
                "An authorization server's answer for an upstream MCP server that waited for a person: Toolshed gets its token and connects the upstream",
            )
            .query::<CallbackParams>()
            .answers(
                S::OK,
                "Authorized; the upstream is being connected.",
                crate::any_object,
            )
            .errors(&[S::BAD_REQUEST, S::FORBIDDEN, S::NOT_FOUND, S::BAD_GATEWAY]),
        Route::get("/v1/sources/authorizations", pending)
            .doc(
                "listPendingSourceAuthorizations",
                "Upstream authorizations that wait for a person, for the sources whose calls the caller decides as a whole",
            )
            .answers(S::OK, "The waiting authorizations.", schema_of::<PendingList>),
        Route::get("/v1/connections", list)
            .doc(
                "listConnections",
                "The caller's own grants at per-user connections (never the tokens)",
            )
            .answers(S::OK, "The grants.", schema_of::<ConnectionList>),
        Route::delete("/v1/connections/{connection}", revoke)
            .doc(
                "revokeConnection",
                "Revoke the caller's grant at a connection",
            )
            .answers(S::OK, "Revoked.", crate::any_object)
            .errors(&[S::NOT_FOUND]),
    ]
}

#[derive(Deserialize, JsonSchema)]
struct StartParams {
    /// The single-use nonce of the link.
    nonce: String,
}

#[derive(Deserialize, JsonSchema)]
struct CallbackParams {
    /// The state sent to the provider.
    state: Option<String>,
    /// The authorization code.
    code: Option<String>,
    /// The provider's refusal.
    error: Option<String>,
    /// The issuer of the answer (RFC 9207), checked when present.
    iss: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct ConnectionList {
    connections: Vec<ConnectionInfo>,
}

/// An upstream's authorization that waits for a person.
#[derive(Serialize, JsonSchema)]
struct Pending {
    /// The source.
    source: String,
    /// The authorization server's page to open: whoever approves there authorizes Toolshed at
    /// the upstream with their own account.
    url: String,
    /// When it started (Unix milliseconds).
    since_ms: i64,
    /// When the link expires (Unix milliseconds); a new one is made then.
    expires_at_ms: i64,
}

#[derive(Serialize, JsonSchema)]
struct PendingList {
    pending: Vec<Pending>,
}

async fn pending(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let pending = s
        .engine
        .pending_source_authorizations(&caller)
        .into_iter()
        .map(|p| Pending {
            source: p.source,
            url: p.url,
            since_ms: p.since_ms,
            expires_at_ms: p.expires_at_ms,
        })
        .collect();
    Ok(Json(PendingList { pending }).into_response())
}

fn refused(e: ConnectError) -> ApiError {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    ApiError::new(
        status,
        json!({"code": "connect_failed", "message": e.to_string()}),
    )
}

fn not_configured() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        json!({"code": "not_found", "message": "no per-user connection is configured"}),
    )
}

async fn start(
    State(s): State<AppState>,
    Path(connection): Path<String>,
    q: Result<Query<StartParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let connections = s.engine.connections().ok_or_else(not_configured)?;
    let to = connections
        .start(&connection, &q.nonce)
        .await
        .map_err(refused)?;
    Ok((StatusCode::FOUND, [(header::LOCATION, to)]).into_response())
}

async fn callback(
    State(s): State<AppState>,
    q: Result<Query<CallbackParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let state = q
        .state
        .as_deref()
        .ok_or_else(|| refused(ConnectError::UnknownState))?;
    let done = s
        .engine
        .complete_grant(
            state,
            q.code.as_deref(),
            q.error.as_deref(),
            q.iss.as_deref(),
        )
        .await
        .map_err(refused)?;
    let body = match done {
        None => json!({"connected": true, "message": "Connected. Call the tool again."}),
        Some(Ok(outcome)) => json!({
            "connected": true,
            "message": "Connected. The call that waited for this grant continued.",
            "outcome": outcome.to_json(),
        }),
        Some(Err(e)) => json!({
            "connected": true,
            "message": "Connected, but the call that waited could not continue.",
            "error": e.to_json(),
        }),
    };
    Ok(Json(body).into_response())
}

/// The answer for an upstream's authorization that waited for a person
/// (`toolshed_mcp_source::person`): the state in the query finds it, once.
async fn upstream_callback(
    State(s): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let authorizations = s.engine.source_authorizations().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            json!({"code": "not_found", "message": "no upstream waits for a person's authorization"}),
        )
    })?;
    let source = authorizations
        .finish(query.as_deref().unwrap_or_default())
        .await
        .map_err(|e| {
            let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
            ApiError::new(
                status,
                json!({"code": "authorization_failed", "message": e.message}),
            )
        })?;
    Ok(Json(json!({
        "authorized": true,
        "source": source,
        "message": format!("Toolshed is authorized for upstream '{source}' and connects it now; this page can be closed."),
    }))
    .into_response())
}

async fn list(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let connections = match s.engine.connections() {
        Some(c) => c
            .list(&caller.principal)
            .await
            .map_err(|e| ApiError::from(toolshed_engine::EngineError::from(e)))?,
        None => vec![],
    };
    Ok(Json(ConnectionList { connections }).into_response())
}

async fn revoke(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(connection): Path<String>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&s, &headers).await?;
    let connections = s.engine.connections().ok_or_else(not_configured)?;
    let gone = connections
        .revoke(&caller.principal, &connection)
        .await
        .map_err(|e| ApiError::from(toolshed_engine::EngineError::from(e)))?;
    if !gone {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            json!({"code": "not_found", "message": format!("you have no grant at '{}'", toolshed_engine::audit::truncated(&connection, 128))}),
        ));
    }
    Ok(Json(json!({"revoked": connection})).into_response())
}
