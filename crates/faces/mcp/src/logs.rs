//! Upstream log messages and resource updates relayed by virtual servers: an upstream MCP
//! server's `notifications/message` reach every session of a virtual server that exposes that
//! source, at or above the level the session set with `logging/setLevel` (everything until it
//! sets one); its `notifications/resources/updated` reach the sessions that subscribed to the
//! resource ([`crate::subscriptions`]).
//! The levels are per session. Logging is deprecated by the 2026-07-28 revision (SEP-2577);
//! sessions of the earlier revisions still get it.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{Peer, RoleServer};
use toolshed_core::notices::{level_rank, LogNotice, Notice, Notices};
use toolshed_core::VirtualServer;

/// The lowest level a session wants (a [`level_rank`]).
pub(crate) type SessionLevel = Arc<AtomicU8>;

/// Whether `server` exposes anything of `source`: one of its patterns starts with that
/// namespace, or with a wildcard.
fn covers(server: &VirtualServer, source: &str) -> bool {
    let def = server.def();
    def.tools
        .iter()
        .chain(&def.resources)
        .chain(&def.prompts)
        .any(|p| {
            let first = p.split('.').next().unwrap_or_default();
            first == source || first.contains('*')
        })
}

#[allow(deprecated)]
fn params(n: LogNotice) -> Option<LoggingMessageNotificationParam> {
    let level: LoggingLevel = serde_json::from_value(serde_json::json!(n.level)).ok()?;
    let p = LoggingMessageNotificationParam::new(level, n.data);
    Some(match n.logger {
        Some(l) => p.with_logger(l),
        None => p,
    })
}

/// What one session wants relayed.
pub(crate) struct Session {
    pub(crate) level: SessionLevel,
    pub(crate) subscriptions: crate::subscriptions::SessionSubscriptions,
}

/// Relays, until the session ends, the log messages of the sources `server` exposes and the
/// updates of the resources the session subscribed to.
pub(crate) fn relay(
    notices: &Notices,
    server: Arc<VirtualServer>,
    session: Session,
    peer: Peer<RoleServer>,
) {
    let mut rx = notices.subscribe();
    tokio::spawn(async move {
        loop {
            let notice = match rx.recv().await {
                Ok(n) => n,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "a session fell behind the upstream logs");
                    continue;
                }
                Err(_) => return,
            };
            if peer.is_transport_closed() {
                return;
            }
            let notice = match notice {
                Notice::Log(n) => n,
                Notice::ResourceUpdated(r) => {
                    if crate::subscriptions::wants(&session.subscriptions, &r.source, &r.uri) {
                        let p = rmcp::model::ResourceUpdatedNotificationParam::new(r.uri);
                        if peer.notify_resource_updated(p).await.is_err() {
                            return;
                        }
                    }
                    continue;
                }
            };
            if !covers(&server, &notice.source)
                || level_rank(&notice.level) < session.level.load(Ordering::Relaxed)
            {
                continue;
            }
            let Some(p) = params(notice) else { continue };
            #[allow(deprecated)]
            if peer.notify_logging_message(p).await.is_err() {
                return;
            }
        }
    });
}

/// `logging/setLevel`: the session's lowest level from now on.
#[allow(deprecated)]
pub(crate) fn set_level(level: &SessionLevel, wanted: LoggingLevel) {
    let name = serde_json::to_value(wanted)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    level.store(level_rank(&name), Ordering::Relaxed);
}
