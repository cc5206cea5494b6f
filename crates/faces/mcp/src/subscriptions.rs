//! Resource subscriptions and argument completion on virtual servers.
//!
//! - `resources/subscribe {uri}` finds the resource the server exposes to the caller (a listed
//!   URI, else a template the URI fits), subscribes through the engine
//!   ([`Engine::entry_op`]: the upstream is asked once per URI, however many sessions
//!   subscribe) and remembers it for the session. The upstream's
//!   `notifications/resources/updated` for that URI then reach this session (see
//!   [`crate::logs::relay`]). When the session ends, its subscriptions end too.
//! - `completion/complete` finds the prompt (by the name the client sees) or the resource
//!   template (by its URI template) and asks its upstream through the engine.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{CompleteRequestParams, CompleteResult};
use rmcp::ErrorData as McpError;
use serde_json::Value;
use toolshed_core::{EntryKind, EntryOp, VirtualServer};
use toolshed_engine::{Caller, Engine, EngineError};

/// Most subscriptions of one session.
pub(crate) const MAX_PER_SESSION: usize = 256;

/// A session's subscriptions: URI → the entry's path, and the caller who subscribed.
pub(crate) type SessionSubscriptions = Arc<Mutex<HashMap<String, (String, Caller)>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether the session subscribed to `uri` of `source`.
pub(crate) fn wants(subs: &SessionSubscriptions, source: &str, uri: &str) -> bool {
    lock(subs)
        .get(uri)
        .is_some_and(|(path, caller)| path.split('.').next() == Some(source) && caller.allows(path))
}

fn entry_error(e: EngineError) -> McpError {
    match e {
        EngineError::NotFound { .. } => McpError::resource_not_found(e.to_string(), None),
        EngineError::Tool { ref error, .. }
            if error.kind == toolshed_core::ToolErrorKind::InvalidInput =>
        {
            McpError::invalid_params(e.to_string(), None)
        }
        other => McpError::internal_error(other.to_string(), None),
    }
}

/// `resources/subscribe`.
pub(crate) async fn subscribe(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    subs: &SessionSubscriptions,
    uri: &str,
) -> Result<(), McpError> {
    if lock(subs).contains_key(uri) {
        return Ok(());
    }
    if uri.len() > toolshed_core::notices::MAX_URI_BYTES {
        return Err(McpError::invalid_params(
            format!(
                "the URI is {} bytes; Toolshed relays updates of URIs up to {} bytes",
                uri.len(),
                toolshed_core::notices::MAX_URI_BYTES
            ),
            None,
        ));
    }
    if lock(subs).len() >= MAX_PER_SESSION {
        return Err(McpError::invalid_params(
            format!(
                "this session already has {MAX_PER_SESSION} subscriptions: unsubscribe some first"
            ),
            None,
        ));
    }
    let path = crate::virtual_server::resource_path(engine, caller, server, uri)?;
    let op = EntryOp::Subscribe {
        uri: uri.to_string(),
    };
    engine
        .entry_op(caller, &path, op)
        .await
        .map_err(entry_error)?;
    let earlier = lock(subs).insert(uri.to_string(), (path.clone(), caller.clone()));
    if earlier.is_some() {
        // Another request of this session subscribed meanwhile: count this one off again.
        let op = EntryOp::Unsubscribe {
            uri: uri.to_string(),
        };
        let _ = engine.entry_op(caller, &path, op).await;
    }
    Ok(())
}

/// `resources/unsubscribe`: a URI the session did not subscribe to is not an error.
pub(crate) async fn unsubscribe(
    engine: &Engine,
    subs: &SessionSubscriptions,
    uri: &str,
) -> Result<(), McpError> {
    let Some((path, caller)) = lock(subs).remove(uri) else {
        return Ok(());
    };
    let op = EntryOp::Unsubscribe {
        uri: uri.to_string(),
    };
    engine
        .entry_op(&caller, &path, op)
        .await
        .map(|_| ())
        .map_err(entry_error)
}

/// Ends every subscription of a session that ended.
pub(crate) async fn end_all(engine: &Engine, subs: &SessionSubscriptions) {
    let all: Vec<_> = lock(subs).drain().collect();
    for (uri, (path, caller)) in all {
        if let Err(e) = engine
            .entry_op(&caller, &path, EntryOp::Unsubscribe { uri })
            .await
        {
            tracing::debug!("ending a subscription of a closed session: {e}");
        }
    }
}

/// `completion/complete` for a prompt or resource template the server exposes to the caller;
/// a reference to anything else has no suggestions.
pub(crate) async fn complete(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    request: CompleteRequestParams,
) -> Result<CompleteResult, McpError> {
    let reference = &request.r#ref;
    let (path, named) = if let Some(name) = reference.as_prompt_name() {
        let path =
            crate::virtual_server::entry_named(engine, caller, server, EntryKind::Prompt, name);
        (path, name)
    } else if let Some(uri) = reference.as_resource_uri() {
        (
            crate::virtual_server::template_path(engine, caller, server, uri),
            uri,
        )
    } else {
        (None, "")
    };
    let Some(path) = path else {
        return Err(McpError::invalid_params(
            format!(
                "no {} '{}' here to complete arguments of",
                reference.reference_type(),
                crate::truncate(named, 200)
            ),
            None,
        ));
    };
    let op = EntryOp::Complete {
        argument: serde_json::to_value(&request.argument).unwrap_or(Value::Null),
        context: request
            .context
            .as_ref()
            .and_then(|c| serde_json::to_value(c).ok()),
    };
    let answer = engine
        .entry_op(caller, &path, op)
        .await
        .map_err(entry_error)?;
    serde_json::from_value(crate::virtual_server::mark_complete(answer)).map_err(|e| {
        McpError::internal_error(format!("the upstream's completion is malformed: {e}"), None)
    })
}
