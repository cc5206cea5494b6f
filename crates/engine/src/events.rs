//! Live execution events: one vocabulary for scripts, direct calls and agent runs.
//!
//! Every run of an execution opens a channel in the [`EventHub`] and emits numbered events
//! (`started`, `tool_call`, `tool_result`, `paused`, `resumed`, `log`, `text_delta`,
//! `tasks_update`, `usage`, `completed`, `failed`, `cancelled`). Ids count from 1 per execution
//! and keep counting across pauses, restarts and replicas, so a reader resumes from any id it
//! saw (`Last-Event-ID`).
//!
//! Events are kept in memory while the run lasts, which is all a script that never pauses costs
//! (the fast path). The channel becomes **durable** (its events written to the store, in
//! batches, in order) when the execution pauses, when a client streams it from the start, or
//! when anyone subscribes; a durable execution's later runs are durable from their start. A
//! [`Follower`] reads a live channel where the run is in this process and the store otherwise
//! (another replica, after a restart), so a reader never sees a gap or a repeat.
//!
//! Arguments, results and errors in events are redacted exactly like the audit log
//! ([`crate::audit::redact`]) and bounded ([`MAX_EVENT_VALUE_BYTES`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::broadcast;
use toolshed_store::{now_ms, ExecutionStatus, Store, StoredEvent};

use crate::EngineError;

/// Largest JSON text of one value (arguments, result, error) carried in an event; a larger value
/// is replaced by `{"truncated": true, "bytes": N}`.
pub const MAX_EVENT_VALUE_BYTES: usize = 16 * 1024;
/// Largest text of a `log` or `text_delta` event.
pub const MAX_EVENT_TEXT_BYTES: usize = 8 * 1024;
/// Events of one run kept in memory; older ones that are stored leave memory first.
pub const MAX_LIVE_EVENTS: usize = 100_000;
/// How often a follower of an execution that runs elsewhere looks for new stored events.
pub const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// How many times a follower looks for the final event of a settled execution before it ends.
const SETTLED_LOOKS: u32 = 5;
/// Events read from the store at once.
const STORE_PAGE: i64 = 500;

/// One event of an execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    /// A run began (`kind`: script, call or agent).
    Started { kind: String },
    /// A tool call went out (`seq` orders the execution's calls).
    ToolCall {
        seq: u64,
        path: String,
        arguments: Value,
    },
    /// A tool call came back.
    ToolResult {
        seq: u64,
        path: String,
        ok: bool,
        duration_ms: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<Value>,
    },
    /// The execution waits (`status`: `paused` or `tool_call_required`).
    Paused { status: String, waits: Value },
    /// Answers arrived and the execution runs on.
    Resumed {},
    /// A line the script wrote to its console.
    Log { level: String, message: String },
    /// Text an agent run's model produced.
    TextDelta { text: String },
    /// An agent run's task list changed.
    TasksUpdate { tasks: Value },
    /// Tokens an agent run's model used.
    Usage {
        input_tokens: u64,
        output_tokens: u64,
    },
    /// The execution finished with a result.
    Completed { result: Value },
    /// The execution failed.
    Failed { error: Value },
    /// The execution was cancelled.
    Cancelled {},
}

impl Event {
    /// The event's type as written on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Started { .. } => "started",
            Self::ToolCall { .. } => "tool_call",
            Self::ToolResult { .. } => "tool_result",
            Self::Paused { .. } => "paused",
            Self::Resumed {} => "resumed",
            Self::Log { .. } => "log",
            Self::TextDelta { .. } => "text_delta",
            Self::TasksUpdate { .. } => "tasks_update",
            Self::Usage { .. } => "usage",
            Self::Completed { .. } => "completed",
            Self::Failed { .. } => "failed",
            Self::Cancelled {} => "cancelled",
        }
    }

    /// Whether nothing follows it (the execution is settled).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::Completed { .. } | Self::Failed { .. } | Self::Cancelled {}
        )
    }

    /// Whether the execution stops here until answers arrive.
    pub fn is_pause(&self) -> bool {
        matches!(self, Self::Paused { .. })
    }

    /// The event as it may be shown: values redacted like the audit log and bounded.
    fn redacted(self) -> Self {
        match self {
            Self::ToolCall {
                seq,
                path,
                arguments,
            } => Self::ToolCall {
                seq,
                path,
                arguments: bounded_value(&arguments),
            },
            Self::ToolResult {
                seq,
                path,
                ok,
                duration_ms,
                error,
            } => Self::ToolResult {
                seq,
                path,
                ok,
                duration_ms,
                error: error.as_ref().map(bounded_value),
            },
            Self::Paused { status, waits } => Self::Paused {
                status,
                waits: bounded_value(&waits),
            },
            Self::Log { level, message } => Self::Log {
                level,
                message: crate::audit::truncated(&message, MAX_EVENT_TEXT_BYTES),
            },
            Self::TextDelta { text } => Self::TextDelta {
                text: crate::audit::truncated(&text, MAX_EVENT_TEXT_BYTES),
            },
            Self::TasksUpdate { tasks } => Self::TasksUpdate {
                tasks: bounded_value(&tasks),
            },
            Self::Completed { result } => Self::Completed {
                result: bounded_value(&result),
            },
            Self::Failed { error } => Self::Failed {
                error: bounded_value(&error),
            },
            other => other,
        }
    }
}

/// A value redacted like the audit log, replaced by a marker when its text is too long.
fn bounded_value(v: &Value) -> Value {
    let v = crate::audit::redact(v);
    let len = serde_json::to_string(&v).map(|s| s.len()).unwrap_or(0);
    if len > MAX_EVENT_VALUE_BYTES {
        json!({ "truncated": true, "bytes": len })
    } else {
        v
    }
}

/// A numbered event of one execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionEvent {
    /// 1, 2, ... within the execution.
    pub id: i64,
    /// Milliseconds since the epoch.
    pub ts: i64,
    #[serde(flatten)]
    pub event: Event,
}

impl ExecutionEvent {
    fn stored(&self, execution_id: &str) -> StoredEvent {
        StoredEvent {
            execution_id: execution_id.to_string(),
            id: self.id,
            ts: self.ts,
            kind: self.event.kind().to_string(),
            data: serde_json::to_value(&self.event).unwrap_or(Value::Null),
        }
    }

    fn from_stored(e: StoredEvent) -> Option<Self> {
        Some(Self {
            id: e.id,
            ts: e.ts,
            event: serde_json::from_value(e.data).ok()?,
        })
    }
}

/// The events of one run in this process.
struct Channel {
    id: String,
    state: Mutex<ChannelState>,
    tx: broadcast::Sender<Arc<ExecutionEvent>>,
    /// A write of pending events to the store is scheduled.
    flushing: AtomicBool,
    /// Serialises writes, so events are stored in order.
    write: tokio::sync::Mutex<()>,
}

struct ChannelState {
    next_id: i64,
    buffer: VecDeque<Arc<ExecutionEvent>>,
    durable: bool,
    /// The highest id written to the store.
    stored: i64,
}

/// The live channels of this process, and the store the durable ones write to.
#[derive(Clone)]
pub struct EventHub {
    store: Store,
    live: Arc<Mutex<HashMap<String, Arc<Channel>>>>,
}

impl EventHub {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            live: Default::default(),
        }
    }

    /// Opens the channel of a run of `execution_id`. A stored execution (`durable`) continues
    /// its numbering from the store and writes every event; a first run keeps its events in
    /// memory until something makes them durable. A channel opened ahead (a client streaming
    /// from the start) is reused.
    pub async fn open(&self, execution_id: &str, durable: bool) -> Result<(), EngineError> {
        let next_id = match durable {
            true => self.store.last_event_id(execution_id).await? + 1,
            false => 1,
        };
        let mut live = self.live.lock();
        match live.get(execution_id) {
            Some(ch) => {
                let mut st = ch.state.lock();
                st.durable |= durable;
                st.next_id = st.next_id.max(next_id);
            }
            None => {
                live.insert(
                    execution_id.to_string(),
                    Channel::new(execution_id, next_id, durable),
                );
            }
        }
        Ok(())
    }

    /// Opens a durable channel for an execution that has not started yet (its id chosen by the
    /// caller) and follows it from the first event.
    pub fn open_streaming(&self, execution_id: &str) -> Follower {
        self.live
            .lock()
            .entry(execution_id.to_string())
            .or_insert_with(|| Channel::new(execution_id, 1, true));
        self.follow(execution_id, 0)
    }

    /// Emits an event of a run in this process (ignored when the run has no open channel).
    pub fn emit(&self, execution_id: &str, event: Event) {
        let Some(ch) = self.live.lock().get(execution_id).cloned() else {
            return;
        };
        let durable = ch.push(event.redacted());
        if durable {
            self.schedule_write(&ch);
        }
    }

    /// Makes the run's events durable from now on (and those emitted so far).
    pub fn make_durable(&self, execution_id: &str) {
        let Some(ch) = self.live.lock().get(execution_id).cloned() else {
            return;
        };
        ch.state.lock().durable = true;
        self.schedule_write(&ch);
    }

    /// Ends the run's channel: its events are written when the channel is durable (or
    /// `persist` asks for it, as a pause does) before this returns.
    pub async fn close(&self, execution_id: &str, persist: bool) {
        let Some(ch) = self.live.lock().get(execution_id).cloned() else {
            return;
        };
        let durable = {
            let mut st = ch.state.lock();
            st.durable |= persist;
            st.durable
        };
        if durable {
            if let Err(e) = self.write_pending(&ch).await {
                tracing::warn!(execution = %execution_id, error = %e, "events not stored");
            }
        }
        let mut live = self.live.lock();
        if live.get(execution_id).is_some_and(|c| Arc::ptr_eq(c, &ch)) {
            live.remove(execution_id);
        }
    }

    /// Follows the events of `execution_id` after id `after`, live where the run is in this
    /// process and from the store otherwise. Subscribing makes a live run durable.
    pub fn follow(&self, execution_id: &str, after: i64) -> Follower {
        Follower {
            hub: self.clone(),
            execution_id: execution_id.to_string(),
            last: after,
            pending: VecDeque::new(),
            rx: None,
            done: false,
            settled_looks: 0,
        }
    }

    fn schedule_write(&self, ch: &Arc<Channel>) {
        if ch.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        let hub = self.clone();
        let ch = ch.clone();
        tokio::spawn(async move {
            ch.flushing.store(false, Ordering::Release);
            if let Err(e) = hub.write_pending(&ch).await {
                tracing::warn!(execution = %ch.id, error = %e, "events not stored");
            }
        });
    }

    /// Writes the events not yet stored, in order.
    async fn write_pending(&self, ch: &Channel) -> Result<(), EngineError> {
        let _order = ch.write.lock().await;
        let batch: Vec<StoredEvent> = {
            let st = ch.state.lock();
            st.buffer
                .iter()
                .filter(|e| e.id > st.stored)
                .map(|e| e.stored(&ch.id))
                .collect()
        };
        let Some(last) = batch.last().map(|e| e.id) else {
            return Ok(());
        };
        self.store.append_events(&batch).await?;
        ch.state.lock().stored = last;
        Ok(())
    }

    fn channel(&self, execution_id: &str) -> Option<Arc<Channel>> {
        self.live.lock().get(execution_id).cloned()
    }
}

impl Channel {
    fn new(id: &str, next_id: i64, durable: bool) -> Arc<Self> {
        Arc::new(Self {
            id: id.to_string(),
            state: Mutex::new(ChannelState {
                next_id,
                buffer: VecDeque::new(),
                durable,
                stored: next_id - 1,
            }),
            tx: broadcast::channel(1024).0,
            flushing: AtomicBool::new(false),
            write: tokio::sync::Mutex::new(()),
        })
    }

    /// Numbers and keeps an event, and sends it to live followers. Returns whether the channel
    /// is durable.
    fn push(&self, event: Event) -> bool {
        let mut st = self.state.lock();
        let e = Arc::new(ExecutionEvent {
            id: st.next_id,
            ts: now_ms(),
            event,
        });
        st.next_id += 1;
        while st.buffer.len() >= MAX_LIVE_EVENTS {
            match st.buffer.front() {
                Some(old) if old.id <= st.stored || !st.durable => {
                    st.buffer.pop_front();
                }
                _ => break,
            }
        }
        st.buffer.push_back(e.clone());
        // Sent under the lock, so followers receive events in id order.
        let _ = self.tx.send(e);
        st.durable
    }

    /// Kept events after `after`; `None` when some of them already left memory.
    fn since(&self, after: i64) -> Option<Vec<Arc<ExecutionEvent>>> {
        let st = self.state.lock();
        if let Some(first) = st.buffer.front() {
            if first.id > after + 1 {
                return None;
            }
        } else if st.next_id > after + 1 {
            return None;
        }
        Some(st.buffer.iter().filter(|e| e.id > after).cloned().collect())
    }
}

/// A reader of one execution's events, in order, without gaps or repeats. Ends after the
/// terminal event (`completed`, `failed`, `cancelled`), or when the execution is settled and
/// every stored event was read.
pub struct Follower {
    hub: EventHub,
    execution_id: String,
    last: i64,
    pending: VecDeque<Arc<ExecutionEvent>>,
    rx: Option<broadcast::Receiver<Arc<ExecutionEvent>>>,
    done: bool,
    settled_looks: u32,
}

impl Follower {
    /// The id of the last event returned (or the starting point).
    pub fn last_id(&self) -> i64 {
        self.last
    }

    /// The next event; `None` when the stream is over. Waits while the execution is paused or
    /// runs elsewhere.
    pub async fn next(&mut self) -> Option<Result<Arc<ExecutionEvent>, EngineError>> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                if e.id <= self.last {
                    continue;
                }
                self.last = e.id;
                self.done = e.event.is_terminal();
                return Some(Ok(e));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.fill().await {
                self.done = true;
                return Some(Err(e));
            }
        }
    }

    /// Like [`Self::next`], but ends at a pause as well (a client that started the run and
    /// wants its answer: the final event or the pause).
    pub async fn next_until_pause(&mut self) -> Option<Result<Arc<ExecutionEvent>, EngineError>> {
        let e = self.next().await?;
        if let Ok(ev) = &e {
            if ev.event.is_pause() {
                self.done = true;
            }
        }
        Some(e)
    }

    /// Finds more events: from the live run, or the store.
    async fn fill(&mut self) -> Result<(), EngineError> {
        if let Some(rx) = &mut self.rx {
            match rx.recv().await {
                Ok(e) => self.pending.push_back(e),
                Err(broadcast::error::RecvError::Lagged(_)) => self.catch_up().await?,
                Err(broadcast::error::RecvError::Closed) => {
                    self.rx = None;
                    self.read_store().await?;
                }
            }
            return Ok(());
        }
        if let Some(ch) = self.hub.channel(&self.execution_id) {
            // Subscribe first, then read what came before: nothing falls between.
            self.rx = Some(ch.tx.subscribe());
            ch.state.lock().durable = true;
            self.hub.schedule_write(&ch);
            return self.catch_up().await;
        }
        if self.read_store().await? {
            return Ok(());
        }
        let status = self
            .hub
            .store
            .get_execution(&self.execution_id)
            .await?
            .map(|r| r.status);
        match status {
            None | Some(ExecutionStatus::Paused | ExecutionStatus::Running) => {
                tokio::time::sleep(FOLLOW_POLL).await;
            }
            Some(_) => {
                // Settled, and every stored event read. Its final event may be written just
                // after the record: look again a few times before ending.
                self.settled_looks += 1;
                if self.settled_looks > SETTLED_LOOKS {
                    self.done = true;
                } else {
                    tokio::time::sleep(FOLLOW_POLL).await;
                }
            }
        }
        Ok(())
    }

    /// Events after the last one returned, from the live channel's memory or the store.
    async fn catch_up(&mut self) -> Result<(), EngineError> {
        if let Some(events) = self
            .hub
            .channel(&self.execution_id)
            .and_then(|ch| ch.since(self.last))
        {
            self.pending.extend(events);
            return Ok(());
        }
        self.read_store().await.map(|_| ())
    }

    /// Stored events after the last one returned; whether there were any.
    async fn read_store(&mut self) -> Result<bool, EngineError> {
        let events = self
            .hub
            .store
            .events_after(&self.execution_id, self.last, STORE_PAGE)
            .await?;
        let any = !events.is_empty();
        self.pending.extend(
            events
                .into_iter()
                .filter_map(ExecutionEvent::from_stored)
                .map(Arc::new),
        );
        Ok(any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn hub() -> EventHub {
        EventHub::new(Store::open("sqlite::memory:").await.unwrap())
    }

    fn log(n: usize) -> Event {
        Event::Log {
            level: "log".into(),
            message: format!("line {n}"),
        }
    }

    #[test]
    fn events_are_tagged_snake_case_with_camel_case_fields() {
        let e = ExecutionEvent {
            id: 3,
            ts: 1,
            event: Event::ToolResult {
                seq: 2,
                path: "a.b".into(),
                ok: true,
                duration_ms: 1.5,
                error: None,
            },
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "tool_result");
        assert_eq!(v["durationMs"], 1.5);
        assert_eq!(v["id"], 3);
        let back: ExecutionEvent = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn credentials_are_masked_and_large_values_bounded() {
        let e = Event::ToolCall {
            seq: 1,
            path: "x.y".into(),
            arguments: json!({"api_key": "sk-secret", "q": "x".repeat(MAX_EVENT_VALUE_BYTES)}),
        }
        .redacted();
        let text = serde_json::to_string(&e).unwrap();
        assert!(!text.contains("sk-secret"));
        assert!(text.contains("\"truncated\":true"), "{text}");
        let small = Event::ToolCall {
            seq: 1,
            path: "x.y".into(),
            arguments: json!({"password": "hunter2", "q": 1}),
        }
        .redacted();
        let text = serde_json::to_string(&small).unwrap();
        assert!(
            !text.contains("hunter2") && text.contains("\"q\":1"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_run_that_nothing_made_durable_stores_nothing() {
        let h = hub().await;
        h.open("e1", false).await.unwrap();
        h.emit("e1", log(1));
        h.emit("e1", Event::Completed { result: json!(1) });
        h.close("e1", false).await;
        assert_eq!(h.store.last_event_id("e1").await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_follower_sees_every_event_in_order_then_the_numbering_continues() {
        let h = hub().await;
        h.open("e2", false).await.unwrap();
        h.emit("e2", log(1));
        let mut f = h.follow("e2", 0);
        let reader = tokio::spawn(async move {
            let mut ids = vec![];
            while let Some(e) = f.next().await {
                let e = e.unwrap();
                ids.push((e.id, e.event.kind()));
            }
            ids
        });
        for n in 2..=300 {
            h.emit("e2", log(n));
        }
        h.emit(
            "e2",
            Event::Paused {
                status: "paused".into(),
                waits: json!([]),
            },
        );
        h.close("e2", true).await;
        // A later run (after answers, maybe on another replica) numbers on from the store.
        h.open("e2", true).await.unwrap();
        h.emit("e2", Event::Resumed {});
        h.emit("e2", Event::Completed { result: json!(7) });
        h.close("e2", true).await;
        let ids = reader.await.unwrap();
        assert_eq!(ids.len(), 303);
        assert!(ids
            .iter()
            .enumerate()
            .all(|(i, (id, _))| *id == i as i64 + 1));
        assert_eq!(ids[300].1, "paused");
        assert_eq!(ids[302].1, "completed");
        // Replay from any id, from the store.
        let mut again = h.follow("e2", 299);
        let mut rest = vec![];
        while let Some(e) = again.next().await {
            rest.push(e.unwrap().id);
        }
        assert_eq!(rest, [300, 301, 302, 303]);
    }

    #[tokio::test]
    async fn a_stream_opened_ahead_sees_the_first_event_and_stops_at_a_pause() {
        let h = hub().await;
        let mut f = h.open_streaming("e3");
        h.open("e3", false).await.unwrap();
        h.emit(
            "e3",
            Event::Started {
                kind: "script".into(),
            },
        );
        h.emit(
            "e3",
            Event::Paused {
                status: "paused".into(),
                waits: json!([]),
            },
        );
        h.close("e3", true).await;
        let first = f.next_until_pause().await.unwrap().unwrap();
        assert_eq!((first.id, first.event.kind()), (1, "started"));
        let second = f.next_until_pause().await.unwrap().unwrap();
        assert_eq!(second.event.kind(), "paused");
        assert!(f.next_until_pause().await.is_none());
        // Streaming made the run durable from its first event.
        assert_eq!(h.store.last_event_id("e3").await.unwrap(), 2);
    }
}
