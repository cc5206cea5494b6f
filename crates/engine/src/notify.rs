//! The pause webhook (`[notify] webhook_url`): when an execution pauses, a small JSON is POSTed
//! so that waits do not expire unseen. It carries ids and kinds only (no arguments, results or
//! questions), is sent in the background with a short timeout, and a failure is logged, never
//! retried and never affects the execution.

use std::time::Duration;

use serde_json::json;
use toolshed_store::ExecutionRecord;

use crate::executions::waits::open_waits;
use crate::Engine;

/// How long one webhook POST may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The configured webhook and its HTTP client.
pub(crate) struct Notifier {
    url: String,
    client: reqwest::Client,
}

impl Notifier {
    pub fn new(url: String) -> Self {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self { url, client }
    }
}

/// The body POSTed for a paused execution.
pub fn paused_body(rec: &ExecutionRecord) -> serde_json::Value {
    let waits: Vec<_> = open_waits(rec)
        .into_iter()
        .map(|w| json!({"waitId": w.wait_id, "kind": w.kind}))
        .collect();
    json!({
        "event": "paused",
        "executionId": rec.id,
        "principal": rec.principal,
        "kind": rec.kind,
        "waits": waits,
        "expiresAt": rec.expires_at,
    })
}

impl Engine {
    /// Tells the webhook, if one is configured, that `rec` paused.
    pub(crate) fn notify_paused(&self, rec: &ExecutionRecord) {
        let Some(n) = &self.inner.notifier else {
            return;
        };
        let request = n.client.post(&n.url).json(&paused_body(rec));
        let id = rec.id.clone();
        tokio::spawn(async move {
            match request.send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => {
                    tracing::warn!(execution = %id, status = %r.status(), "pause webhook refused the notification")
                }
                Err(e) => {
                    tracing::warn!(execution = %id, error = %e.without_url(), "pause webhook could not be told")
                }
            }
        });
    }
}
