//! The audit writer: calls enqueue entries (never blocking on the database); a background task
//! writes them to the store in batches. Arguments are redacted before they are queued.
//!
//! The queue is bounded ([`crate::EngineConfig::audit_queue`]). When the database cannot keep
//! up and the queue is full, the **oldest** queued entry is dropped to make room: calls never
//! wait on the audit log, the newest activity is kept, and every dropped entry is counted
//! ([`AuditSink::dropped`]) and reported in the log. [`AuditSink::flush`] waits until everything
//! queued so far is written (or dropped); [`AuditSink::flush_within`] gives up after a deadline
//! and says how many entries were not written, which is what a graceful shutdown uses (a
//! database that does not answer must not hold the process for minutes).
//!
//! Every stored field is bounded ([`bounded`], applied to each recorded entry): the path at
//! [`MAX_PATH_BYTES`], the principal at [`MAX_PRINCIPAL_BYTES`], error text at
//! [`MAX_ERROR_BYTES`], redacted arguments at [`MAX_ARGS_BYTES`], identifiers, face and outcome
//! at [`MAX_LABEL_BYTES`]. A longer value is cut at a character boundary and ends with
//! [`TRUNCATED`], so one entry stays under about 4.5 kB whatever the caller sends.
//!
//! Entries older than the retention ([`crate::EngineConfig::audit_retention`]) are purged by
//! [`crate::Engine::spawn_retention`]: once at start-up, then hourly.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{watch, Notify};
use toolshed_outbound::secret::{is_credential_name, REDACTED};
use toolshed_store::{AuditEntry, Store};

/// Entries written to the store in one statement at most.
const BATCH: usize = 512;
/// How long the writer waits for more entries before writing a small batch.
const GATHER: Duration = Duration::from_millis(20);

/// Redacted argument text kept per entry, in bytes (before the marker).
pub const MAX_ARGS_BYTES: usize = 2_000;
/// Error text kept per entry, in bytes (before the marker).
pub const MAX_ERROR_BYTES: usize = 2_000;
/// Tool path kept per entry: the longest path a caller may name.
pub const MAX_PATH_BYTES: usize = toolshed_core::path::MAX_CALL_PATH_BYTES;
/// Principal id kept per entry.
pub const MAX_PRINCIPAL_BYTES: usize = 128;
/// Entry id, execution id, face and outcome.
pub const MAX_LABEL_BYTES: usize = 64;
/// Ends every value that was cut.
pub const TRUNCATED: &str = "…(truncated)";

/// `s` cut to at most `max` bytes at a character boundary, ending with [`TRUNCATED`] when cut.
pub fn truncated(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut out = s[..s.floor_char_boundary(max)].to_string();
    out.push_str(TRUNCATED);
    out
}

fn bound(s: &mut String, max: usize) {
    if s.len() > max {
        *s = truncated(s, max);
    }
}

/// The entry with every field within its bound (see the module documentation).
pub fn bounded(mut e: AuditEntry) -> AuditEntry {
    bound(&mut e.id, MAX_LABEL_BYTES);
    bound(&mut e.principal, MAX_PRINCIPAL_BYTES);
    bound(&mut e.face, MAX_LABEL_BYTES);
    bound(&mut e.path, MAX_PATH_BYTES);
    if let Some(x) = &mut e.execution_id {
        bound(x, MAX_LABEL_BYTES);
    }
    bound(&mut e.args, MAX_ARGS_BYTES);
    bound(&mut e.outcome, MAX_LABEL_BYTES);
    if let Some(x) = &mut e.error {
        bound(x, MAX_ERROR_BYTES);
    }
    e
}

/// Replaces the values under credential-like keys (the one rule of
/// [`toolshed_outbound::secret::is_credential_name`]) with the one mask,
/// [`toolshed_outbound::secret::REDACTED`], recursively.
pub fn redact(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    if is_credential_name(k) {
                        (k.clone(), Value::String(REDACTED.into()))
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
    bound(&mut s, MAX_ARGS_BYTES);
    s
}

struct Queue {
    entries: Mutex<VecDeque<AuditEntry>>,
    capacity: usize,
    /// Entries ever recorded.
    enqueued: AtomicU64,
    /// Entries dropped because the queue was full.
    dropped: AtomicU64,
    /// Entries settled: written, failed to write, or dropped. Flushes wait on it.
    settled: watch::Sender<u64>,
    /// Wakes the writer.
    wake: Notify,
    /// A flush is waiting: write without gathering.
    urgent: AtomicBool,
}

impl Queue {
    fn settle(&self, n: usize) {
        self.settled.send_modify(|v| *v += n as u64);
    }
}

/// Handle to the background writer.
#[derive(Clone)]
pub struct AuditSink {
    queue: Arc<Queue>,
}

impl AuditSink {
    /// Starts the writer on the current tokio runtime with a queue of `capacity` entries.
    pub fn start(store: Store, capacity: usize) -> Self {
        let (settled, _) = watch::channel(0);
        let queue = Arc::new(Queue {
            entries: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            enqueued: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            settled,
            wake: Notify::new(),
            urgent: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&queue);
        tokio::spawn(async move {
            loop {
                let Some(q) = weak.upgrade() else { break };
                let waiting = q.entries.lock().is_empty();
                if waiting {
                    // Wake up now and then to notice that every handle is gone.
                    let _ = tokio::time::timeout(Duration::from_secs(1), q.wake.notified()).await;
                    continue;
                }
                if !q.urgent.load(Ordering::SeqCst) && q.entries.lock().len() < BATCH {
                    tokio::time::sleep(GATHER).await;
                }
                q.urgent.store(false, Ordering::SeqCst);
                let batch: Vec<AuditEntry> = {
                    let mut entries = q.entries.lock();
                    let n = entries.len().min(BATCH);
                    entries.drain(..n).collect()
                };
                if let Err(e) = store.append_audit(&batch).await {
                    tracing::error!(error = %e, lost = batch.len(), "audit write failed");
                }
                q.settle(batch.len());
            }
        });
        Self { queue }
    }

    /// Queues an entry (bounded first); when the queue is full the oldest queued entry is
    /// dropped.
    pub fn record(&self, e: AuditEntry) {
        let e = bounded(e);
        let q = &self.queue;
        let overflow = {
            let mut entries = q.entries.lock();
            let overflow = if entries.len() >= q.capacity {
                entries.pop_front()
            } else {
                None
            };
            entries.push_back(e);
            q.enqueued.fetch_add(1, Ordering::SeqCst);
            overflow
        };
        if let Some(old) = overflow {
            let n = q.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n == 1 || n.is_multiple_of(1000) {
                tracing::warn!(
                    dropped = n,
                    capacity = q.capacity,
                    oldest = %old.id,
                    "audit queue full: dropping the oldest entries"
                );
            }
            q.settle(1);
        }
        q.wake.notify_one();
    }

    /// Entries dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.queue.dropped.load(Ordering::Relaxed)
    }

    /// Entries waiting to be written.
    pub fn queued(&self) -> usize {
        self.queue.entries.lock().len()
    }

    /// Waits until everything queued so far is written (or dropped).
    pub async fn flush(&self) {
        let q = &self.queue;
        let target = q.enqueued.load(Ordering::SeqCst);
        let mut rx = q.settled.subscribe();
        if *rx.borrow() >= target {
            return;
        }
        q.urgent.store(true, Ordering::SeqCst);
        q.wake.notify_one();
        let _ = rx.wait_for(|v| *v >= target).await;
    }

    /// Like [`Self::flush`], but waits at most `deadline`. Returns how many of the entries
    /// queued so far were not written by then (0 when the flush finished).
    pub async fn flush_within(&self, deadline: Duration) -> u64 {
        let target = self.queue.enqueued.load(Ordering::SeqCst);
        if tokio::time::timeout(deadline, self.flush()).await.is_ok() {
            return 0;
        }
        target.saturating_sub(*self.queue.settled.borrow())
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
    fn audit_masks_with_the_one_mask_and_the_one_name_rule() {
        let v = json!({"X-Session-Id": "sess-1", "GH_PAT": "pat-1", "author": "ann", "key": "k"});
        let r = redact(&v);
        // The same names as every other redaction, the same text as every other mask.
        assert_eq!(r["X-Session-Id"], REDACTED);
        assert_eq!(r["GH_PAT"], REDACTED);
        assert_eq!(r["key"], REDACTED);
        assert_eq!(r["author"], "ann");
    }

    fn entry(i: usize) -> AuditEntry {
        AuditEntry {
            id: format!("a{i:05}"),
            ts: i as i64,
            principal: "p".into(),
            face: "cli".into(),
            path: format!("demo.t{i}"),
            execution_id: None,
            args: "{}".into(),
            outcome: "ok".into(),
            error: None,
            duration_us: 1,
        }
    }

    #[tokio::test]
    async fn flush_writes_everything_queued() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        let sink = AuditSink::start(store.clone(), 10_000);
        for i in 0..1500 {
            sink.record(entry(i));
        }
        sink.flush().await;
        assert_eq!(sink.queued(), 0);
        assert_eq!(store.recent_audit(5000).await.unwrap().len(), 1500);
        assert_eq!(sink.dropped(), 0);
        // A flush with nothing queued returns at once.
        tokio::time::timeout(Duration::from_millis(100), sink.flush())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_full_queue_drops_the_oldest_and_counts() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        let sink = AuditSink::start(store.clone(), 4);
        // On this single-threaded runtime the writer cannot run between these calls.
        for i in 0..10 {
            sink.record(entry(i));
        }
        assert_eq!(sink.queued(), 4);
        assert_eq!(sink.dropped(), 6);
        sink.flush().await;
        let mut kept: Vec<String> = store
            .recent_audit(100)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.path)
            .collect();
        kept.sort();
        assert_eq!(kept, vec!["demo.t6", "demo.t7", "demo.t8", "demo.t9"]);
    }

    #[test]
    fn long_args_are_capped() {
        let v = json!({"blob": "é".repeat(5000)});
        let s = audit_args(&v);
        assert!(s.len() < MAX_ARGS_BYTES + 20 && s.ends_with("(truncated)"));
    }

    /// Every field of a recorded entry is cut to its bound, with the marker.
    #[tokio::test]
    async fn every_stored_field_is_bounded() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        let sink = AuditSink::start(store.clone(), 10);
        let huge = "é".repeat(50_000);
        sink.record(AuditEntry {
            id: huge.clone(),
            ts: 1,
            principal: huge.clone(),
            face: huge.clone(),
            path: huge.clone(),
            execution_id: Some(huge.clone()),
            args: huge.clone(),
            outcome: huge.clone(),
            error: Some(huge.clone()),
            duration_us: 1,
        });
        sink.flush().await;
        let e = &store.recent_audit(10).await.unwrap()[0];
        let fields = [
            (&e.id, MAX_LABEL_BYTES),
            (&e.principal, MAX_PRINCIPAL_BYTES),
            (&e.face, MAX_LABEL_BYTES),
            (&e.path, MAX_PATH_BYTES),
            (e.execution_id.as_ref().unwrap(), MAX_LABEL_BYTES),
            (&e.args, MAX_ARGS_BYTES),
            (&e.outcome, MAX_LABEL_BYTES),
            (e.error.as_ref().unwrap(), MAX_ERROR_BYTES),
        ];
        for (value, max) in fields {
            assert!(
                value.len() <= max + TRUNCATED.len(),
                "{} bytes",
                value.len()
            );
            assert!(value.ends_with(TRUNCATED));
        }
        assert_eq!(truncated("short", 10), "short");
    }
}
