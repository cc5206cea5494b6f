//! The audit writer: calls enqueue entries (never blocking on the database); a background task
//! writes them to the store in batches. Arguments are redacted before they are queued.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use toolshed_store::{AuditEntry, Store};

const MAX_ARGS_CHARS: usize = 2_000;

/// Keys whose values never reach the audit log.
fn is_secret_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    [
        "password",
        "passwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "api-key",
        "authorization",
        "credential",
        "private_key",
        "cookie",
    ]
    .iter()
    .any(|s| k.contains(s))
}

/// Replaces values under secret-looking keys with "***", recursively.
pub fn redact(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    if is_secret_key(k) {
                        (k.clone(), Value::String("***".into()))
                    } else {
                        (k.clone(), redact(v))
                    }
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(redact).collect()),
        other => other.clone(),
    }
}

/// Redacted, size-capped argument text for the audit log.
pub fn audit_args(v: &Value) -> String {
    let mut s = serde_json::to_string(&redact(v)).unwrap_or_default();
    if s.len() > MAX_ARGS_CHARS {
        let mut cut = MAX_ARGS_CHARS;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("…(truncated)");
    }
    s
}

enum Msg {
    Entry(AuditEntry),
    Flush(oneshot::Sender<()>),
}

/// Handle to the background writer.
#[derive(Clone)]
pub struct AuditSink {
    tx: mpsc::UnboundedSender<Msg>,
}

impl AuditSink {
    /// Starts the writer on the current tokio runtime.
    pub fn start(store: Store) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
        tokio::spawn(async move {
            let mut batch: Vec<AuditEntry> = Vec::with_capacity(256);
            let mut waiters: Vec<oneshot::Sender<()>> = Vec::new();
            loop {
                let first = match rx.recv().await {
                    Some(m) => m,
                    None => break,
                };
                let push =
                    |m: Msg,
                     batch: &mut Vec<AuditEntry>,
                     waiters: &mut Vec<oneshot::Sender<()>>| match m {
                        Msg::Entry(e) => batch.push(e),
                        Msg::Flush(w) => waiters.push(w),
                    };
                push(first, &mut batch, &mut waiters);
                // Gather what else is queued, up to a batch, for a short moment.
                let deadline = tokio::time::Instant::now() + Duration::from_millis(20);
                while batch.len() < 512 && waiters.is_empty() {
                    match tokio::time::timeout_at(deadline, rx.recv()).await {
                        Ok(Some(m)) => push(m, &mut batch, &mut waiters),
                        _ => break,
                    }
                }
                while let Ok(m) = rx.try_recv() {
                    push(m, &mut batch, &mut waiters);
                }
                if !batch.is_empty() {
                    if let Err(e) = store.append_audit(&batch).await {
                        tracing::error!(error = %e, lost = batch.len(), "audit write failed");
                    }
                    batch.clear();
                }
                for w in waiters.drain(..) {
                    let _ = w.send(());
                }
            }
        });
        Self { tx }
    }

    pub fn record(&self, e: AuditEntry) {
        let _ = self.tx.send(Msg::Entry(e));
    }

    /// Waits until everything queued so far is written.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted_recursively() {
        let v = json!({"name": "x", "apiKey": "s3cret", "nested": [{"password": "p"}, {"Authorization": "Bearer t"}]});
        let s = audit_args(&v);
        assert!(
            !s.contains("s3cret") && !s.contains("\"p\"") && !s.contains("Bearer"),
            "{s}"
        );
        assert!(s.contains("\"name\":\"x\""));
    }

    #[test]
    fn long_args_are_capped() {
        let v = json!({"blob": "é".repeat(5000)});
        let s = audit_args(&v);
        assert!(s.len() < MAX_ARGS_CHARS + 20 && s.ends_with("(truncated)"));
    }
}
