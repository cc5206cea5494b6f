//! `notifications/progress` for `run_script`: when the client's request carries a progress
//! token, the script runs under an execution id chosen here and each of its events (see
//! [`toolshed_engine::events`]) is sent as a progress notification (`progress` = the event's
//! number, `message` = what happened) until the run ends or pauses.
//!
//! [`Forward`]: a call on a virtual server whose client gave a progress token gets the
//! upstream's own progress reports, in order, under the client's token.

use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use rmcp::RoleServer;
use toolshed_engine::events::{Event, ExecutionEvent};
use toolshed_engine::Engine;

/// How long the result waits for the last notifications to go out.
const DRAIN: Duration = Duration::from_millis(500);

/// How long a relayed progress report waits for reports that arrive with it, to be sent in
/// order with them.
const REORDER_WINDOW: Duration = Duration::from_millis(50);

/// Forwards one run's events as progress notifications.
pub(crate) struct ProgressRelay {
    pub execution_id: String,
    task: tokio::task::JoinHandle<()>,
}

impl ProgressRelay {
    /// Opens the run's event channel ahead and starts forwarding it to `peer`.
    pub fn start(engine: &Engine, peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        let execution_id = toolshed_engine::executions::new_execution_id();
        let mut follower = engine.events().open_streaming(&execution_id);
        let task = tokio::spawn(async move {
            while let Some(Ok(e)) = follower.next_until_pause().await {
                let note = ProgressNotificationParam::new(token.clone(), e.id as f64)
                    .with_message(message(&e));
                if peer.notify_progress(note).await.is_err() {
                    break;
                }
            }
        });
        Self { execution_id, task }
    }

    /// Lets the last notifications go out (the run has ended), then stops forwarding and
    /// closes the channel if the run never opened it (it was refused before starting).
    pub async fn finish(self, engine: &Engine) {
        let abort = self.task.abort_handle();
        if tokio::time::timeout(DRAIN, self.task).await.is_err() {
            abort.abort();
        }
        engine.events().close(&self.execution_id, false).await;
    }
}

/// Relays one call's progress reports to the client, in order.
pub(crate) struct Forward {
    tx: tokio::sync::mpsc::UnboundedSender<toolshed_core::Progress>,
    task: tokio::task::JoinHandle<()>,
}

impl Forward {
    pub fn start(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<toolshed_core::Progress>();
        let task = tokio::spawn(async move {
            let mut last: Option<f64> = None;
            while let Some(first) = rx.recv().await {
                // Reports that arrive together go out in the order of their progress values,
                // which MCP makes increase: the upstream's client handles each notification in
                // a task of its own, so reports sent in order can reach here out of order.
                let mut batch = vec![first];
                let until = tokio::time::Instant::now() + REORDER_WINDOW;
                while let Ok(Some(p)) = tokio::time::timeout_at(until, rx.recv()).await {
                    batch.push(p);
                }
                batch.sort_by(|a, b| a.progress.total_cmp(&b.progress));
                for p in batch {
                    // One that comes after a later report went out cannot be sent: MCP makes
                    // progress increase, and clients may reject a step back.
                    if last.is_some_and(|l| p.progress <= l) {
                        tracing::debug!(
                            progress = p.progress,
                            "an upstream progress report arrived after a later one; not relayed"
                        );
                        continue;
                    }
                    last = Some(p.progress);
                    let mut note = ProgressNotificationParam::new(token.clone(), p.progress);
                    note.total = p.total;
                    if let Some(m) = p.message {
                        note = note.with_message(m);
                    }
                    if peer.notify_progress(note).await.is_err() {
                        return;
                    }
                }
            }
        });
        Self { tx, task }
    }

    /// The sink the engine hands the call's handler.
    pub fn sink(&self) -> toolshed_core::ProgressSink {
        let tx = self.tx.clone();
        toolshed_core::ProgressSink::new(move |p| {
            let _ = tx.send(p);
        })
    }

    /// Lets the reports already made go out before the answer does.
    pub async fn finish(self) {
        drop(self.tx);
        let abort = self.task.abort_handle();
        if tokio::time::timeout(DRAIN, self.task).await.is_err() {
            abort.abort();
        }
    }
}

/// A short line for a progress notification.
fn message(e: &ExecutionEvent) -> String {
    match &e.event {
        Event::ToolCall { path, .. } => format!("tool_call {path}"),
        Event::ToolResult { path, ok, .. } => {
            format!("tool_result {path} {}", if *ok { "ok" } else { "error" })
        }
        Event::Log { message, .. } => format!("log {}", truncate(message)),
        Event::TextDelta { text } => format!("text {}", truncate(text)),
        Event::Paused { status, .. } => status.clone(),
        other => other.kind().to_string(),
    }
}

fn truncate(s: &str) -> &str {
    let mut end = s.len().min(200);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
