//! Supervision of an upstream's session: a task owns the running session and, when it ends
//! without a shutdown (the child died, the HTTP session broke), marks the upstream
//! reconnecting and reconnects with exponential backoff ([`backoff_delay`]: 100 ms doubling up
//! to 30 s; the backoff resets only after a session stayed up for 30 s, so a crash loop keeps
//! backing off). After a reconnect, the resources sessions subscribe to are subscribed again on
//! the new session ([`crate::entries::resubscribe`]). A second task re-lists the tools after
//! `tools/list_changed` or a reconnect and bumps
//! [`Upstream::subscribe_changes`](crate::Upstream::subscribe_changes) when the list changed.
//!
//! On shutdown (or when the last handle is dropped) the session is closed: the child's stdin is
//! closed, then it is terminated and killed if needed (rmcp), within [`SHUTDOWN_GRACE`].

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::connect::{connect_once, Connection, SourceClient};
use crate::upstream::{lock, wait_ready, Session, Shared, State};

const BACKOFF_BASE: Duration = Duration::from_millis(100);
const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// A session that stayed up this long resets the backoff.
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// How long shutdown waits for a graceful close (rmcp: close stdin, 3 s, SIGTERM, 3 s, kill).
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(8);

/// The delay before reconnect attempt number `failures` (0-based): 100 ms doubling, capped
/// at 30 s.
pub fn backoff_delay(failures: u32) -> Duration {
    let factor = 1u32.checked_shl(failures.min(16)).unwrap_or(u32::MAX);
    BACKOFF_BASE.saturating_mul(factor).min(BACKOFF_CAP)
}

/// What the background tasks hear from the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The upstream announced `tools/list_changed`.
    ListChanged,
    /// A new session replaced a lost one.
    Reconnected,
}

/// Resolves once shutdown was requested (or every sender is gone).
pub(crate) async fn until_shutdown(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Makes `conn` the current session (number `generation`).
pub(crate) fn publish(shared: &Shared, conn: &Connection, generation: u64) -> Arc<Session> {
    let session = Arc::new(Session {
        peer: conn.running.peer().clone(),
        pid: conn.pid,
        protocol: conn.protocol.clone(),
        generation,
        direct: conn.direct.clone(),
    });
    shared.state.send_replace(State::Ready(session.clone()));
    session
}

/// Owns the running session; reconnects with backoff when it ends unexpectedly.
pub(crate) async fn supervise(shared: Arc<Shared>, first: Connection, first_session: Arc<Session>) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut conn = first;
    let mut generation = first_session.generation;
    let mut failures: u32 = 0;
    drop(first_session);
    loop {
        let started = Instant::now();
        if !session_lost(&shared, conn, &mut shutdown).await {
            return;
        }
        if started.elapsed() >= STABLE_AFTER {
            failures = 0;
        }
        tracing::warn!(upstream = %shared.cfg.name, "upstream session ended; reconnecting");
        shared.state.send_replace(State::Reconnecting {
            last_error: "the upstream closed the session".into(),
        });
        let Some(next) = reconnect(&shared, &mut shutdown, &mut failures).await else {
            shared.state.send_replace(State::Closed);
            return;
        };
        conn = next;
        generation += 1;
        shared.restarts.fetch_add(1, Ordering::Relaxed);
        let session = publish(&shared, &conn, generation);
        tracing::info!(upstream = %shared.cfg.name, pid = ?conn.pid, "upstream reconnected");
        // The new session knows nothing of the old one's subscriptions.
        tokio::spawn(crate::entries::resubscribe(shared.clone(), session));
        let _ = shared.events.send(Event::Reconnected);
    }
}

/// Waits until the session ends. True when it was lost; false when shutdown was requested (the
/// session is then closed within [`SHUTDOWN_GRACE`] and the upstream marked closed).
async fn session_lost(
    shared: &Shared,
    conn: Connection,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    let ct = conn.running.cancellation_token();
    let waiting = conn.running.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        _ = &mut waiting => {}
        _ = until_shutdown(shutdown) => {
            ct.cancel();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, &mut waiting).await;
            shared.state.send_replace(State::Closed);
            tracing::debug!(upstream = %shared.cfg.name, "upstream shut down");
            return false;
        }
    }
    if *shutdown.borrow() {
        shared.state.send_replace(State::Closed);
        return false;
    }
    true
}

/// Connects again, after [`backoff_delay`] of the failures so far, until it works; `None` when
/// shutdown was requested meanwhile. Each failure is published as the last error.
async fn reconnect(
    shared: &Shared,
    shutdown: &mut watch::Receiver<bool>,
    failures: &mut u32,
) -> Option<Connection> {
    loop {
        let delay = backoff_delay(*failures);
        *failures = failures.saturating_add(1);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = until_shutdown(shutdown) => return None,
        }
        let client = SourceClient {
            name: shared.cfg.name.clone(),
            events: shared.events.clone(),
            progress: shared.progress.clone(),
            notices: shared.cfg.notices.clone(),
            calls: shared.calls.clone(),
            oauth: shared.oauth.clone(),
        };
        let attempt = tokio::select! {
            r = connect_once(&shared.cfg, client) => r,
            _ = until_shutdown(shutdown) => return None,
        };
        match attempt {
            Ok(c) => return Some(c),
            Err(e) => {
                let last_error = e.to_string();
                tracing::warn!(upstream = %shared.cfg.name, error = %last_error, next_delay = ?backoff_delay(*failures), "reconnect failed");
                shared
                    .state
                    .send_replace(State::Reconnecting { last_error });
            }
        }
    }
}

/// Re-lists tools after `tools/list_changed` or a reconnect and bumps the change counter.
pub(crate) async fn refresh_loop(shared: Arc<Shared>, mut events: mpsc::UnboundedReceiver<Event>) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let first = tokio::select! {
            e = events.recv() => match e { Some(e) => e, None => return },
            _ = until_shutdown(&mut shutdown) => return,
        };
        let mut list_changed = first == Event::ListChanged;
        while let Ok(e) = events.try_recv() {
            list_changed |= e == Event::ListChanged;
        }
        let deadline = Instant::now() + shared.cfg.call_timeout;
        let Ok(session) = wait_ready(&shared, deadline, 0).await else {
            continue;
        };
        let listed = tokio::time::timeout_at(deadline, session.peer.list_all_tools()).await;
        match listed {
            Ok(Ok(tools)) => {
                let previous = lock(&shared.known_tools).replace(tools.clone());
                let differs = previous.is_some_and(|p| p != tools);
                if list_changed || differs {
                    shared.changes.send_modify(|v| *v += 1);
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(upstream = %shared.cfg.name, error = %e, "re-listing tools failed")
            }
            Err(_) => tracing::warn!(upstream = %shared.cfg.name, "re-listing tools timed out"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_delay(0), Duration::from_millis(100));
        assert_eq!(backoff_delay(1), Duration::from_millis(200));
        assert_eq!(backoff_delay(4), Duration::from_millis(1600));
        assert_eq!(backoff_delay(9), Duration::from_secs(30));
        assert_eq!(backoff_delay(u32::MAX), Duration::from_secs(30));
        for n in 0..40 {
            assert!(backoff_delay(n) <= backoff_delay(n + 1));
        }
    }
}
