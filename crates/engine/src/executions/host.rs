//! The script host: answers each call a script makes, in issue order (`seq`).
//!
//! A call is answered from the journal when a replay reaches it, from the recorded answer when
//! the execution was paused on it, or for real through the engine's one call path. A call that
//! cannot be answered in this run (it needs approval, a client tool's result or a human's
//! answer) registers its wait and answers "suspend": the sandbox lets the other in-flight calls
//! finish, then stops, and the run ends paused on every wait raised together.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::{json, Value};
use toolshed_core::formats::ClientTool;
use toolshed_core::CompiledSchema;
use toolshed_sandbox::{CallTarget, Host, HostCall, HostError, HostReply};
use toolshed_store::{now_ms, AuditEntry, ExecutionRecord};

use super::waits::{Answer, AnswerAction, InputMode, Wait};
use super::Decision;
use crate::discovery::{SearchAnswer, SearchHit};
use crate::events::Event;
use crate::invoke::{Approval, CallResult};
use crate::{Caller, Engine, EngineError};

/// What one run knows and gathers: journaled replies to replay, this run's replies, the answers
/// recorded for waits, and the waits raised in this run.
#[derive(Default)]
pub(crate) struct RunState {
    pub replay: HashMap<CallKey, Value>,
    pub journal: BTreeMap<CallKey, Value>,
    pub answers: HashMap<CallKey, Answer>,
    pub waits: BTreeMap<CallKey, Wait>,
}

impl RunState {
    pub fn journal_json(&self) -> Value {
        Value::Array(self.journal.values().cloned().collect())
    }

    /// Everything completed so far, for the stored journal of a run in progress: this run's
    /// calls and the journaled calls it has not reached yet.
    pub fn durable_journal_json(&self) -> Value {
        let mut all: BTreeMap<CallKey, &Value> = self.replay.iter().map(|(k, v)| (*k, v)).collect();
        all.extend(self.journal.iter().map(|(k, v)| (*k, v)));
        Value::Array(all.into_values().cloned().collect())
    }
}

/// The stored record of a resumed run, kept current as calls complete.
pub(crate) struct Durable {
    pub rec: Arc<tokio::sync::Mutex<ExecutionRecord>>,
    /// The first journal write that failed; once set, the run makes no further tool calls.
    pub failed: Mutex<Option<JournalFailure>>,
}

/// While alive, marks a running execution alive (`touch_execution`) at a third of the time
/// after which a silent script counts as interrupted; stops when dropped.
pub(crate) struct Heartbeat(tokio::task::JoinHandle<()>);

impl Heartbeat {
    pub(crate) fn start(engine: &Engine, id: &str) -> Self {
        let c = &engine.inner.config;
        let every =
            (c.limits.wall_clock.max(c.call_timeout) / 3).max(std::time::Duration::from_millis(50));
        let (store, id) = (engine.inner.store.clone(), id.to_string());
        Self(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                match store.touch_execution(&id).await {
                    Ok(true) => {}
                    // No longer running (settled, or taken by another run): nothing to keep.
                    Ok(false) => return,
                    Err(e) => {
                        tracing::warn!(execution = %id, error = %e, "marking a waiting run alive failed")
                    }
                }
            }
        }))
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why a resumed run was stopped.
#[derive(Clone)]
pub(crate) struct JournalFailure {
    pub seq: CallKey,
    pub path: String,
    pub reason: String,
    /// Another run claimed the execution (or it was cancelled): this run must not write it again.
    pub claim_lost: bool,
}

/// The client tools declared for one execution, with their compiled schemas.
#[derive(Default)]
pub(crate) struct ClientTools {
    pub tools: Vec<ClientTool>,
    inputs: HashMap<String, CompiledSchema>,
}

impl ClientTools {
    pub fn new(tools: Vec<ClientTool>) -> Self {
        let inputs = tools
            .iter()
            .filter_map(|t| {
                Some((
                    t.path.clone(),
                    CompiledSchema::compile(&t.input_schema).ok()?,
                ))
            })
            .collect();
        Self { tools, inputs }
    }

    pub fn get(&self, path: &str) -> Option<&ClientTool> {
        self.tools.iter().find(|t| t.path == path)
    }

    fn validate(&self, path: &str, args: &Value) -> Result<(), EngineError> {
        match self.inputs.get(path) {
            Some(v) => v
                .validate(args)
                .map_err(|violations| EngineError::InvalidArguments {
                    path: path.to_string(),
                    violations,
                }),
            None => Ok(()),
        }
    }

    /// Client tools matching a search, ranked by how many query words they contain.
    fn search(&self, query: &str) -> Vec<SearchHit> {
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        let mut scored: Vec<(usize, &ClientTool)> = self
            .tools
            .iter()
            .map(|t| {
                let text = format!("{} {} {}", t.path, t.name, t.description).to_lowercase();
                (
                    words.iter().filter(|w| text.contains(w.as_str())).count(),
                    t,
                )
            })
            .filter(|(n, _)| *n > 0)
            .collect();
        scored.sort_by_key(|s| std::cmp::Reverse(s.0));
        scored
            .into_iter()
            .map(|(_, t)| SearchHit {
                path: t.path.clone(),
                name: t.name.clone(),
                summary: t.description.chars().take(160).collect(),
                destructive: false,
                kind: None,
            })
            .collect()
    }

    fn describe(&self, t: &ClientTool, with_schemas: bool) -> Value {
        let text = toolshed_schema::render_tool(
            &t.path,
            &t.name,
            &t.description,
            &t.input_schema,
            t.output_schema.as_ref(),
            false,
        );
        let mut d = json!({
            "path": t.path, "name": t.name, "text": text,
            "destructive": false, "readOnly": false, "client": true,
        });
        if with_schemas {
            d["inputSchema"] = t.input_schema.clone();
            if let Some(o) = &t.output_schema {
                d["outputSchema"] = o.clone();
            }
        }
        d
    }
}

/// The journal's name for a call target. A tool path is kept at most
/// [`crate::audit::MAX_PATH_BYTES`] long: longer paths never name a tool (they all answer
/// `not_found`), so the journal of a script calling them stays small and replays the same.
fn target_key(t: &CallTarget) -> String {
    match t {
        CallTarget::Tool(p) => format!(
            "tool:{}",
            crate::audit::truncated(p, crate::audit::MAX_PATH_BYTES)
        ),
        CallTarget::Search => "search".into(),
        CallTarget::Describe => "describe".into(),
        CallTarget::Ask => "ask_user".into(),
    }
}

pub(crate) fn host_error(e: &EngineError) -> HostError {
    HostError {
        code: e.code().to_string(),
        message: e.to_string(),
        data: e.data(),
    }
}

fn reply_to_json(seq: CallKey, target: &str, r: &Result<Value, HostError>) -> Value {
    match r {
        Ok(v) => json!({"seq": seq, "target": target, "ok": v}),
        Err(e) => {
            json!({"seq": seq, "target": target, "err": {"code": e.code, "message": e.message, "data": e.data}})
        }
    }
}

fn reply_from_json(v: &Value) -> HostReply {
    if let Some(ok) = v.get("ok") {
        return HostReply::Ok(ok.clone());
    }
    let e = &v["err"];
    HostReply::Err(HostError {
        code: e["code"].as_str().unwrap_or("error").to_string(),
        message: e["message"].as_str().unwrap_or("error").to_string(),
        data: e.get("data").filter(|d| !d.is_null()).cloned(),
    })
}

/// What answering a call came to: a reply to journal, a wait, or a saved script that paused on
/// waits of its own calls (already registered).
enum Answered {
    Reply(Result<Value, HostError>),
    Wait(Wait),
    Suspended,
}

/// The key of a call in an execution's journal, answers and waits: a script's own call is its
/// `seq`; call `m` made inside a saved script that call `parent` ran is [`nested_key`].
pub(crate) type CallKey = u64;

/// Calls per level a key can tell apart (`max_tool_calls` stays below it).
pub(crate) const KEYS_PER_LEVEL: u64 = 1_000_000;

/// The key of call `m` of a saved script (or sub-agent) run by the call with key `parent`.
/// Keys of own calls are below [`KEYS_PER_LEVEL`]; nested keys above, and each decodes to one
/// (parent, m). `None` when the key would not fit: nesting that deep is refused.
pub(crate) fn nested_key(parent: CallKey, m: u32) -> Option<CallKey> {
    if u64::from(m) >= KEYS_PER_LEVEL {
        return None;
    }
    (parent + 1)
        .checked_mul(KEYS_PER_LEVEL)?
        .checked_add(u64::from(m))
}

/// Whether `key` is `ancestor` or a call made (at any depth) inside it.
pub(crate) fn descends_from(mut key: CallKey, ancestor: CallKey) -> bool {
    loop {
        if key == ancestor {
            return true;
        }
        if key < KEYS_PER_LEVEL {
            return false;
        }
        key = key / KEYS_PER_LEVEL - 1;
    }
}

/// Everything a host call needs; shared by the run's calls.
pub(crate) struct HostCtx {
    pub engine: Engine,
    pub caller: Caller,
    pub execution_id: Arc<str>,
    pub state: Arc<Mutex<RunState>>,
    /// Set for resumed runs: completed calls are journaled in the store as they complete.
    pub durable: Option<Arc<Durable>>,
    pub clients: Arc<ClientTools>,
    /// The execution's pinned randomness and time (saved scripts it runs derive theirs).
    pub det: toolshed_sandbox::Determinism,
    /// For agent runs: the only paths the run's own calls may reach (saved scripts they run
    /// are governed by the principal's roles alone). `None` for scripts.
    pub offered: Option<Arc<HashSet<String>>>,
    /// Paths whose every call (of the run's own) waits for approval (`requireApproval`).
    pub approval: Arc<HashSet<String>>,
}

/// The [`Host`] of one script run.
pub(crate) struct ScriptHost(pub Arc<HostCtx>);

impl Host for ScriptHost {
    fn call(&self, call: HostCall) -> BoxFuture<'static, HostReply> {
        let ctx = self.0.clone();
        Box::pin(async move { ctx.answer(call).await })
    }
}

impl HostCtx {
    /// A run whose journal could not be written makes no further tool calls; it stops (the
    /// suspension ends the script, and the run is reported as failed).
    fn stopped(&self) -> bool {
        self.durable
            .as_ref()
            .is_some_and(|d| d.failed.lock().is_some())
    }

    async fn answer(self: &Arc<Self>, call: HostCall) -> HostReply {
        self.answer_at(CallKey::from(call.seq), &self.caller, call)
            .await
    }

    /// Answers the call with key `seq` (a script's own call, or one made inside a saved script
    /// it called: see [`nested_key`]) as `caller`.
    pub(crate) async fn answer_at(
        self: &Arc<Self>,
        seq: CallKey,
        caller: &Caller,
        call: HostCall,
    ) -> HostReply {
        // The run's own calls of `requireApproval` tools wait for approval.
        let approve = match &call.target {
            CallTarget::Tool(path) => seq < KEYS_PER_LEVEL && self.approval.contains(path),
            _ => false,
        };
        self.answer_in(seq, caller, call, approve).await
    }

    /// [`Self::answer_at`], with `approve` saying whether the call waits for approval whatever
    /// the policy says (a sub-agent's `requireApproval` tools).
    pub(crate) async fn answer_in(
        self: &Arc<Self>,
        seq: CallKey,
        caller: &Caller,
        call: HostCall,
        approve: bool,
    ) -> HostReply {
        let key = target_key(&call.target);
        if let Some(reply) = self.replayed(seq, &key) {
            return reply;
        }
        if matches!(call.target, CallTarget::Tool(_)) && self.stopped() {
            return HostReply::Suspend;
        }
        // A call answered in an earlier segment (a decision, a client's result) announced
        // itself then; only its result is new.
        let announced = self.state.lock().answers.contains_key(&seq);
        let started = Instant::now();
        if let (CallTarget::Tool(path), false) = (&call.target, announced) {
            self.engine.inner.events.emit(
                &self.execution_id,
                Event::ToolCall {
                    seq,
                    path: path.clone(),
                    arguments: call.args.clone(),
                },
            );
        }
        let answered = match &call.target {
            CallTarget::Search => Answered::Reply(self.search(&call.args)),
            CallTarget::Describe => Answered::Reply(self.describe(&call.args)),
            CallTarget::Ask => self.ask(seq, &call.args),
            CallTarget::Tool(path) if !self.offers(seq, path) => {
                Answered::Reply(Err(HostError::new(
                    "not_offered",
                    format!("'{path}' is not one of this agent's tools"),
                )))
            }
            CallTarget::Tool(path) if path.starts_with("client.") => {
                self.client_call(seq, path, call.args).await
            }
            CallTarget::Tool(path) => self.tool_call(seq, caller, path, call.args, approve).await,
        };
        let result = match answered {
            Answered::Suspended => return HostReply::Suspend,
            other => other,
        };
        let result = match result {
            Answered::Reply(r) => r,
            Answered::Suspended => return HostReply::Suspend,
            Answered::Wait(w) => {
                self.state.lock().waits.insert(seq, w);
                return HostReply::Suspend;
            }
        };
        if let CallTarget::Tool(path) = &call.target {
            self.engine.inner.events.emit(
                &self.execution_id,
                Event::ToolResult {
                    seq,
                    path: path.clone(),
                    ok: result.is_ok(),
                    duration_ms: started.elapsed().as_secs_f64() * 1000.0,
                    error: result
                        .as_ref()
                        .err()
                        .map(|e| json!({"code": e.code, "message": e.message})),
                },
            );
        }
        self.state
            .lock()
            .journal
            .insert(seq, reply_to_json(seq, &key, &result));
        if let CallTarget::Tool(path) = &call.target {
            if let Some(stop) = self.journal_durably(seq, path).await {
                return stop;
            }
        }
        match result {
            Ok(v) => HostReply::Ok(v),
            Err(e) => HostReply::Err(e),
        }
    }

    /// Keeps a reply in this run's journal (written durably by [`Self::journal_durably`]).
    pub(crate) fn record(&self, seq: CallKey, target: &str, result: Result<Value, HostError>) {
        self.state
            .lock()
            .journal
            .insert(seq, reply_to_json(seq, target, &result));
    }

    /// The journaled reply of call `seq`, when a replay reaches it.
    pub(crate) fn replayed(&self, seq: CallKey, key: &str) -> Option<HostReply> {
        let entry = self.state.lock().replay.get(&seq).cloned()?;
        let recorded = entry["target"].as_str().unwrap_or_default();
        if recorded != key {
            return Some(HostReply::Err(HostError {
                code: "replay_mismatch".into(),
                message: format!(
                    "the script took a different path when resumed: call #{seq} was '{recorded}' and is now '{key}'; scripts must be deterministic"
                ),
                data: None,
            }));
        }
        self.state.lock().journal.insert(seq, entry.clone());
        Some(reply_from_json(&entry))
    }

    /// A resumed run journals each completed tool call durably before the script sees it, so
    /// a crash from here on never runs it again. `Some` stops the run.
    pub(crate) async fn journal_durably(&self, seq: CallKey, path: &str) -> Option<HostReply> {
        let d = self.durable.as_ref()?;
        if self.stopped() {
            return Some(HostReply::Suspend);
        }
        let (reason, claim_lost) = self.engine.persist_journal(d, &self.state).await.err()?;
        tracing::error!(
            execution = %self.execution_id,
            seq,
            path = %path,
            %reason,
            "journal write failed; stopping the run"
        );
        d.failed.lock().get_or_insert(JournalFailure {
            seq,
            path: path.to_string(),
            reason,
            claim_lost,
        });
        Some(HostReply::Suspend)
    }

    fn search(&self, args: &Value) -> Result<Value, HostError> {
        // Read like the search_tools operation, so limits are clamped the same way.
        let a = crate::ops::SearchArgs {
            query: args
                .get("query")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            limit: args.get("limit").and_then(Value::as_u64),
            namespace: args
                .get("namespace")
                .and_then(Value::as_str)
                .map(str::to_string),
            format: None,
            kind: args.get("kind").and_then(Value::as_str).map(str::to_string),
        };
        let kind = a.kind().map_err(|e| host_error(&e))?;
        let (q, limit, ns) = (a.query.as_str(), a.limit(), a.namespace.as_deref());
        let mut answer: SearchAnswer = self.engine.search_kind(&self.caller, q, limit, ns, kind);
        if kind.is_tool() && ns.is_none_or(|n| n == "client") {
            let mine: Vec<SearchHit> = self
                .clients
                .search(q)
                .into_iter()
                .filter(|h| self.caller.allows(&h.path))
                .collect();
            answer.total += mine.len();
            let mut hits = mine;
            hits.append(&mut answer.hits);
            hits.truncate(limit);
            answer.hits = hits;
        }
        Ok(serde_json::to_value(answer).unwrap_or(Value::Null))
    }

    fn describe(&self, args: &Value) -> Result<Value, HostError> {
        let path = args.get("path").and_then(Value::as_str).unwrap_or("");
        let schemas = args
            .get("schemas")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if let Some(t) = self.clients.get(path).filter(|_| self.caller.allows(path)) {
            return Ok(self.clients.describe(t, schemas));
        }
        self.engine
            .describe(&self.caller, path, schemas)
            .map(|d| serde_json::to_value(d).unwrap_or(Value::Null))
            .map_err(|e| host_error(&e))
    }

    /// `tools.ask_user({message, schema?})` or `({message, url})`: the human's recorded answer
    /// (`{action, content?}`), or an `input` wait.
    fn ask(&self, seq: CallKey, args: &Value) -> Answered {
        if let Some(Answer::Input { action, content }) = self.state.lock().answers.get(&seq) {
            let mut v = json!({ "action": action });
            if let Some(c) = content {
                v["content"] = c.clone();
            }
            return Answered::Reply(Ok(v));
        }
        match parse_question(seq, args) {
            Ok(w) => Answered::Wait(w),
            Err(message) => Answered::Reply(Err(HostError::new("invalid_arguments", message))),
        }
    }

    /// A call of a client-executed tool: policy, validation and audit as for any tool; its
    /// result comes from the client (a `tool_result` wait).
    async fn client_call(&self, seq: CallKey, path: &str, args: Value) -> Answered {
        let started = Instant::now();
        let answered = self.client_answer(seq, path, &args);
        let (outcome, error) = match &answered {
            Answered::Reply(Ok(_)) => ("ok".to_string(), None),
            Answered::Reply(Err(e)) => (e.code.clone(), Some(e.message.clone())),
            Answered::Wait(_) | Answered::Suspended => ("paused".to_string(), None),
        };
        self.engine.inner.audit.record(AuditEntry {
            id: uuid::Uuid::now_v7().to_string(),
            ts: now_ms(),
            principal: self.caller.principal.to_string(),
            face: self.caller.face.as_str().to_string(),
            path: crate::audit::truncated(path, crate::audit::MAX_PATH_BYTES),
            execution_id: Some(self.execution_id.to_string()),
            args: crate::audit::audit_args(&args),
            outcome,
            error,
            duration_us: started.elapsed().as_micros() as i64,
        });
        answered
    }

    fn client_answer(&self, seq: CallKey, path: &str, args: &Value) -> Answered {
        let refuse = |e: EngineError| Answered::Reply(Err(host_error(&e)));
        let Some(tool) = self.clients.get(path).filter(|_| self.caller.allows(path)) else {
            return refuse(EngineError::not_found(path));
        };
        if let Some(Answer::ToolResult { result, error }) = self.state.lock().answers.get(&seq) {
            return Answered::Reply(match (result, error) {
                (_, Some(message)) => Err(HostError::new("client_error", message.clone())),
                (Some(v), None) => Ok(v.clone()),
                (None, None) => Ok(Value::Null),
            });
        }
        // Client tools are run by their own client: only an explicit `deny` applies to them.
        let rule = self
            .caller
            .access
            .call_rule(path, &toolshed_core::Annotations::WRITE);
        if rule == toolshed_core::CallRule::Deny {
            return refuse(EngineError::DeniedByPolicy {
                path: path.to_string(),
            });
        }
        if let Err(e) = self
            .engine
            .inner
            .rates
            .check(&self.caller.principal, crate::rate::RateKind::Calls)
        {
            return refuse(e);
        }
        if !args.is_object() {
            return refuse(EngineError::InvalidArguments {
                path: path.to_string(),
                violations: vec![toolshed_core::Violation {
                    pointer: String::new(),
                    rule: "type".into(),
                    message: "arguments must be a JSON object".into(),
                }],
            });
        }
        if let Err(e) = self.clients.validate(path, args) {
            return refuse(e);
        }
        Answered::Wait(Wait::tool_result(
            seq,
            path.to_string(),
            tool.name.clone(),
            args.clone(),
        ))
    }

    /// A catalog tool through the engine's one call path; a call that needs approval becomes
    /// an `approval` wait unless it was decided. A saved script (custom tool) it runs journals
    /// its own calls in this execution under nested keys, and a wait raised inside it pauses
    /// this execution.
    async fn tool_call(
        self: &Arc<Self>,
        seq: CallKey,
        caller: &Caller,
        path: &str,
        args: Value,
        approve: bool,
    ) -> Answered {
        let decision = match self.state.lock().answers.get(&seq) {
            Some(Answer::Approval { decision, path: p }) if p == path => Some(*decision),
            _ => None,
        };
        if decision == Some(Decision::Deny) {
            return Answered::Reply(Err(host_error(&EngineError::Denied {
                path: path.to_string(),
            })));
        }
        if decision.is_none() && approve {
            let name = self
                .engine
                .inner
                .catalog
                .load()
                .get(path)
                .map_or_else(|| path.to_string(), |e| e.tool.def.name.clone());
            return Answered::Wait(Wait::approval(seq, path.to_string(), name, args));
        }
        let approval = match decision {
            Some(Decision::Approve) => Approval::Granted,
            _ => Approval::Required,
        };
        let mut inner = caller.clone();
        inner.nest = Some(crate::caller::Nest {
            host: self.clone(),
            parent: seq,
        });
        // A stored run waiting on a long tool marks itself alive while it waits, so that it is
        // not taken for interrupted past its wall clock.
        let _alive = (self.durable.is_some()
            && self.engine.script_limits().long_calls_ms.contains_key(path))
        .then(|| Heartbeat::start(&self.engine, &self.execution_id));
        match self
            .engine
            .invoke(
                &inner,
                path,
                args,
                approval,
                Some(self.execution_id.clone()),
            )
            .await
        {
            CallResult::Done(v) => Answered::Reply(Ok(v)),
            CallResult::Failed(_) if self.waits_inside(seq) => Answered::Suspended,
            CallResult::Failed(e) => Answered::Reply(Err(host_error(&e))),
            CallResult::NeedsApproval { path, name, args } => {
                Answered::Wait(Wait::approval(seq, path, name, args))
            }
            CallResult::NeedsAction { action, path, .. } => {
                self.action_needed(seq, caller, &action, &path).await
            }
        }
    }

    /// A call that needs a person to act (a grant, or the tool's link): an `input` wait with
    /// the link, unless this call already waited (it was not done, or the wait followed an
    /// approval of the same call): then an error that carries the link.
    async fn action_needed(
        &self,
        seq: CallKey,
        caller: &Caller,
        action: &crate::actions::HumanAction,
        path: &str,
    ) -> Answered {
        let engine = &self.engine;
        let id = self.execution_id.as_ref();
        let waited = self.state.lock().answers.contains_key(&seq);
        if waited || seq >= KEYS_PER_LEVEL {
            let e = engine
                .action_error(&caller.principal, action, path, id)
                .await;
            return Answered::Reply(Err(host_error(&e)));
        }
        match engine.action_wait(&caller.principal, action, id, seq).await {
            Ok(wait) => Answered::Wait(wait),
            Err(e) => Answered::Reply(Err(host_error(&e))),
        }
    }

    /// Whether the run may make call `seq` of `path`: scripts any, agent runs only their
    /// offered tools (calls inside a saved script they run are not restricted further).
    fn offers(&self, seq: CallKey, path: &str) -> bool {
        match &self.offered {
            Some(set) if seq < KEYS_PER_LEVEL => set.contains(path),
            _ => true,
        }
    }

    /// Whether a call made inside the saved script of call `seq` raised a wait.
    fn waits_inside(&self, seq: CallKey) -> bool {
        self.state
            .lock()
            .waits
            .keys()
            .any(|k| *k != seq && descends_from(*k, seq))
    }
}

/// Longest question text kept, in bytes.
const MAX_QUESTION_BYTES: usize = 4_096;
/// Largest answer schema accepted, in bytes of JSON.
const MAX_QUESTION_SCHEMA_BYTES: usize = 16_384;

/// Reads the arguments of `tools.ask_user` into an `input` wait.
fn parse_question(seq: CallKey, args: &Value) -> Result<Wait, String> {
    let message = args
        .get("message")
        .or_else(|| args.get("question"))
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty())
        .ok_or("tools.ask_user needs {message: \"...\"} (and optionally schema or url)")?;
    let message = crate::audit::truncated(message, MAX_QUESTION_BYTES);
    if let Some(url) = args.get("url") {
        let url = url
            .as_str()
            .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
            .ok_or("tools.ask_user: url must be an http(s) link")?;
        if url.len() > 2_048 {
            return Err("tools.ask_user: url is longer than 2048 bytes".into());
        }
        return Ok(Wait::input(
            seq,
            InputMode::Url,
            message,
            None,
            Some(url.to_string()),
        ));
    }
    let schema = args
        .get("schema")
        .cloned()
        .unwrap_or_else(|| json!({"type": "object"}));
    if schema.to_string().len() > MAX_QUESTION_SCHEMA_BYTES {
        return Err(format!(
            "tools.ask_user: schema is larger than {MAX_QUESTION_SCHEMA_BYTES} bytes"
        ));
    }
    CompiledSchema::compile(&schema)
        .map_err(|e| format!("tools.ask_user: the schema does not compile: {e}"))?;
    Ok(Wait::input(
        seq,
        InputMode::Form,
        message,
        Some(schema),
        None,
    ))
}

/// Whether an answer action carries content that must match the question's schema.
pub(crate) fn needs_content(action: AnswerAction) -> bool {
    action == AnswerAction::Accept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_checked_before_they_wait() {
        let w = parse_question(
            2,
            &json!({"message": "Name?", "schema": {"type": "object"}}),
        )
        .unwrap();
        assert_eq!(w.wait_id, "input_2");
        assert_eq!(w.mode, Some(InputMode::Form));
        assert!(parse_question(2, &json!({})).is_err());
        assert!(parse_question(2, &json!({"message": "x", "schema": {"type": 5}})).is_err());
        assert!(parse_question(2, &json!({"message": "x", "url": "file:///etc"})).is_err());
        let u = parse_question(
            2,
            &json!({"message": "x", "url": "https://a.example/setup"}),
        )
        .unwrap();
        assert_eq!(u.mode, Some(InputMode::Url));
    }
}
