//! Admission of streamable-HTTP MCP requests, in front of rmcp's service: the caller is
//! authenticated (API key, OAuth bearer token, or the anonymous principal when neither is
//! configured) before any session exists, so an unauthenticated `initialize` answers 401 (with
//! the `WWW-Authenticate` challenge that starts an MCP client's OAuth flow) without touching
//! the session manager. Who was admitted rides in the request's extensions to the handler.
//! A request naming another principal's session answers 404 like an unknown one. The request
//! then runs with an [`Admission`] naming its principal; when [`CappedSessions`] refuses a new
//! session over a limit, the answer is 429 (per principal) or 503 (in total) with a JSON-RPC
//! error naming the limit.
//!
//! [`CappedSessions`]: crate::sessions::CappedSessions

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use toolshed_identity::{AuthError, Who};

use crate::sessions::{Admission, LimitHit, SessionTable, ADMISSION};
use crate::Identity;

/// What the admission middleware needs: who may connect, and the session table.
#[derive(Clone)]
pub(crate) struct Gate {
    pub(crate) identity: Arc<Identity>,
    pub(crate) table: Arc<SessionTable>,
}

impl Gate {
    async fn admit(&self, headers: &HeaderMap) -> Result<Who, AuthError> {
        match self.identity.as_ref() {
            Identity::Fixed(p) => Ok(Who::Principal(p.clone())),
            Identity::Network(auth) => auth.authenticate(headers).await,
        }
    }

    fn challenge(&self, e: &AuthError) -> Option<HeaderValue> {
        match self.identity.as_ref() {
            Identity::Fixed(_) => None,
            Identity::Network(auth) => auth.challenge(e),
        }
    }
}

/// A JSON-RPC error (no request id: the body was not read) with an HTTP status.
fn rpc_error(status: StatusCode, code: i64, message: String, data: Option<Value>) -> Response {
    let mut error = json!({"code": code, "message": message});
    if let Some(d) = data {
        error["data"] = d;
    }
    let body = json!({"jsonrpc": "2.0", "id": null, "error": error});
    (status, axum::Json(body)).into_response()
}

fn unauthorized(e: &AuthError, challenge: Option<HeaderValue>) -> Response {
    let mut r = rpc_error(e.status(), -32001, e.to_string(), None);
    if let Some(c) = challenge {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, c);
    }
    r
}

fn over_limit(hit: &LimitHit) -> Response {
    let (status, max) = match hit {
        LimitHit::Total { max } => (StatusCode::SERVICE_UNAVAILABLE, *max),
        LimitHit::Principal { max, .. } => (StatusCode::TOO_MANY_REQUESTS, *max),
    };
    let mut r = rpc_error(
        status,
        -32000,
        hit.to_string(),
        Some(json!({"limit": hit.setting(), "max": max})),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
    r
}

pub(crate) async fn admit(State(gate): State<Gate>, mut req: Request, next: Next) -> Response {
    let who = match gate.admit(req.headers()).await {
        Ok(who) => who,
        Err(e) => return unauthorized(&e, gate.challenge(&e)),
    };
    let principal = who.principal().to_string();
    req.extensions_mut().insert(who);
    let session = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok());
    if let Some(id) = session {
        if gate.table.owner(id).is_some_and(|owner| owner != principal) {
            return rpc_error(
                StatusCode::NOT_FOUND,
                -32001,
                "session not found".into(),
                None,
            );
        }
    }
    let admission = Arc::new(Mutex::new(Admission {
        principal,
        refused: None,
    }));
    let response = ADMISSION.scope(admission.clone(), next.run(req)).await;
    let refused = admission
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .refused
        .take();
    match refused {
        Some(hit) => over_limit(&hit),
        None => response,
    }
}
