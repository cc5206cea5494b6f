//! Direct calls (one tool call as an execution) and the views of executions: one execution,
//! the list of everything that waits, the caller's audit entries.

use std::sync::Arc;

use serde_json::{json, Value};
use toolshed_core::{EntryOp, ToolContext, ToolError};
use toolshed_store::{now_ms, ExecutionRecord, ExecutionStatus};

use super::run::client_tools_of;
use super::waits::{open_waits, waits_of, Wait, WaitKind};
use super::{ExecutionInfo, Outcome, PendingSummary};
use crate::decisions::can_see_waits;
use crate::events::Event;
use crate::invoke::{Approval, CallResult};
use crate::{Caller, Engine, EngineError};

/// What [`Engine::relay`] answers.
#[derive(Debug)]
pub struct Relayed {
    pub outcome: Result<Outcome, EngineError>,
    /// The upstream's own answer, when the tool relays another protocol.
    pub wire: Option<Value>,
}

/// What a face that relays an upstream lends the one call it relays (never the calls made
/// inside it).
#[derive(Debug, Default, Clone)]
pub struct RelayHooks {
    /// Receives the handler's progress reports, when the face's client asked for progress.
    pub progress: Option<toolshed_core::ProgressSink>,
    /// The face's client, for the upstream's requests during the call (elicitation, sampling).
    pub client: Option<Arc<dyn toolshed_core::ClientChannel>>,
}

/// The origin prefix of tools whose handler runs saved code (`script:custom.<id>`): called
/// directly, they run as a script execution.
pub const SCRIPT_ORIGIN: &str = "script:";

impl Engine {
    /// Calls one tool directly (MCP direct mode, HTTP, CLI). A call that needs approval pauses
    /// and returns `Paused` with an execution to answer.
    pub async fn call(
        &self,
        caller: &Caller,
        path: &str,
        args: Value,
    ) -> Result<Outcome, EngineError> {
        // A name from an exported definition (`tables__rows__query`) stands for its path.
        let exported = (!toolshed_core::path::is_callable_path(path))
            .then(|| self.exported_name_path(caller, path))
            .flatten();
        let path = exported.as_deref().unwrap_or(path);
        // A saved script runs as a script execution, so that a call inside it that needs
        // approval pauses it like any script (and a replay never repeats its completed calls).
        if caller.depth == 0 && args.is_object() {
            // (A path that does not resolve takes the normal path below, which audits it.)
            let saved = self
                .resolve(caller, path)
                .is_ok_and(|e| e.tool.def.origin.starts_with(SCRIPT_ORIGIN));
            if saved {
                let script = format!("return await tools.{path}({args});");
                return self.run_script(caller, &script).await;
            }
        }
        let id = super::new_execution_id();
        match self
            .invoke(
                caller,
                path,
                args,
                Approval::Required,
                Some(Arc::from(id.as_str())),
            )
            .await
        {
            CallResult::Done(result) => Ok(Outcome::Completed {
                execution_id: id,
                result,
                logs: vec![],
            }),
            CallResult::Failed(e) => Err(e),
            CallResult::NeedsApproval { path, name, args } => {
                let wait = Wait::approval(0, path.clone(), name, args.clone());
                self.pause_call(caller, id, path, args, wait).await
            }
            CallResult::NeedsAction { action, path, args } => {
                let wait = self.action_wait(&caller.principal, &action, &id, 0).await?;
                self.pause_call(caller, id, path, args, wait).await
            }
        }
    }

    /// Stores a face's direct call as a paused execution waiting on `wait`.
    async fn pause_call(
        &self,
        caller: &Caller,
        id: String,
        path: String,
        args: Value,
        wait: Wait,
    ) -> Result<Outcome, EngineError> {
        let now = now_ms();
        let mut rec = ExecutionRecord::new_running(
            id.clone(),
            &caller.principal,
            "call",
            json!({"path": path, "args": args}).to_string(),
            json!({}),
            now,
        );
        rec.status = ExecutionStatus::Paused;
        rec.pending = Some(json!([wait]));
        rec.expires_at = Some(now + self.inner.config.approval_ttl.as_millis() as i64);
        let outcome = Outcome::paused(id.clone(), vec![wait], vec![]);
        let events = &self.inner.events;
        events.open(&id, false).await?;
        events.emit(
            &id,
            Event::Started {
                kind: "call".into(),
            },
        );
        events.emit(
            &id,
            Event::ToolCall {
                seq: 0,
                path: path.clone(),
                arguments: args,
            },
        );
        events.emit(&id, outcome.event());
        events.close(&id, true).await;
        self.save(rec.clone(), false).await?;
        self.notify_paused(&rec);
        Ok(outcome)
    }

    /// [`Self::call`] for a face that relays results unchanged (a virtual MCP server): the
    /// same call path, and beside its outcome the answer exactly as the tool's upstream gave it
    /// (an MCP `CallToolResult`), when the handler relays another protocol. The face may use that
    /// answer only when the outcome is `Completed`, or a tool error.
    /// `progress`, when the face's client asked for progress, receives the handler's progress
    /// reports (an upstream's `notifications/progress` for the call).
    pub async fn relay(
        &self,
        caller: &Caller,
        path: &str,
        args: Value,
        hooks: RelayHooks,
    ) -> Relayed {
        let slot = toolshed_core::WireSlot::default();
        let mut relaying = caller.clone();
        relaying.wire = Some(slot.clone());
        relaying.progress = hooks.progress;
        relaying.client = hooks.client;
        let outcome = self.call(&relaying, path, args).await;
        drop(relaying);
        let wire = Arc::try_unwrap(slot)
            .map(|s| s.into_inner())
            .unwrap_or_else(|s| s.get().cloned());
        Relayed { outcome, wire }
    }

    /// An operation on a resource or prompt entry the caller may see, other than reading it
    /// ([`EntryOp`]: completing an argument, subscribing to changes), under the entry's call
    /// timeout. It takes the steps of a call that apply: the rate limit, the caller's view (an
    /// entry outside it answers like one that does not exist), the call rules (`deny` refuses;
    /// `confirm` refuses too, as an operation cannot wait for approval) and the audit log.
    ///
    /// An unsubscribe only releases what a subscribe of the same principal was granted (the
    /// engine counts the grants per principal, path and URI; one without a grant answers
    /// `not_found`), so nothing but the audit log stands in its way: neither the rate limit
    /// nor the caller's view or call rules as they are now (its roles may have changed since
    /// it subscribed).
    pub async fn entry_op(
        &self,
        caller: &Caller,
        path: &str,
        op: EntryOp,
    ) -> Result<Value, EngineError> {
        let started = std::time::Instant::now();
        let name = op.name();
        let result = self.entry_op_steps(caller, path, op).await;
        let (outcome, error) = match &result {
            Ok(_) => ("ok", None),
            Err(e) => (e.code(), Some(e.to_string())),
        };
        self.inner.audit.record(toolshed_store::AuditEntry {
            id: uuid::Uuid::now_v7().to_string(),
            ts: now_ms(),
            principal: caller.principal.to_string(),
            face: caller.face.as_str().to_string(),
            path: crate::audit::truncated(path, crate::audit::MAX_PATH_BYTES),
            execution_id: None,
            args: crate::audit::audit_args(&json!({"operation": name})),
            outcome: outcome.to_string(),
            error,
            duration_us: started.elapsed().as_micros() as i64,
        });
        result
    }

    async fn entry_op_steps(
        &self,
        caller: &Caller,
        path: &str,
        op: EntryOp,
    ) -> Result<Value, EngineError> {
        let grant = match &op {
            EntryOp::Subscribe { uri } | EntryOp::Unsubscribe { uri } => {
                Some((caller.principal.to_string(), path.to_string(), uri.clone()))
            }
            EntryOp::Complete { .. } => None,
        };
        let releases = matches!(op, EntryOp::Unsubscribe { .. });
        // An unsubscribe releases its grant whatever the upstream answers: the face forgets it.
        let entry = if releases {
            let entry = self.entry_to_release(path)?;
            match grant.clone() {
                Some(g) if self.granted(&g) => self.count_grant(g, false),
                _ => return Err(EngineError::not_found(path)),
            }
            entry
        } else {
            self.inner
                .rates
                .check(&caller.principal, crate::rate::RateKind::Calls)?;
            self.resolve(caller, path)?
        };
        let def = &entry.tool.def;
        if def.kind == toolshed_core::EntryKind::Tool {
            return Err(EngineError::Tool {
                path: path.to_string(),
                error: Box::new(ToolError::invalid(format!(
                    "{} applies to resources and prompts, and '{path}' is a tool",
                    op.name()
                ))),
            });
        }
        if !releases
            && crate::invoke::call_rule(caller, path, def)? == toolshed_core::CallRule::Confirm
        {
            return Err(EngineError::Tool {
                path: path.to_string(),
                error: Box::new(ToolError::conflict(format!(
                    "'{path}' needs approval, and {} cannot wait for one",
                    op.name()
                ))),
            });
        }
        let timeout = self.inner.config.timeout_of(def);
        let ctx =
            ToolContext::new(caller.principal.clone(), def.path.clone()).with_timeout(timeout);
        let subscribes = matches!(op, EntryOp::Subscribe { .. });
        match tokio::time::timeout(timeout, entry.tool.handler.entry_op(ctx, op)).await {
            Ok(Ok(v)) => {
                if let (true, Some(g)) = (subscribes, grant) {
                    self.count_grant(g, true);
                }
                Ok(v)
            }
            Ok(Err(error)) => Err(EngineError::Tool {
                path: path.to_string(),
                error: Box::new(error),
            }),
            Err(_) => Err(EngineError::Timeout {
                path: path.to_string(),
                after: timeout,
            }),
        }
    }

    /// Whether `grant` (principal, path, URI) holds a subscription to release.
    fn granted(&self, grant: &(String, String, String)) -> bool {
        self.inner
            .subscriptions
            .lock()
            .get(grant)
            .is_some_and(|n| *n > 0)
    }

    /// Counts a granted subscription up (`subscribed`) or releases one.
    fn count_grant(&self, grant: (String, String, String), subscribed: bool) {
        let mut grants = self.inner.subscriptions.lock();
        if subscribed {
            *grants.entry(grant).or_default() += 1;
        } else if let Some(n) = grants.get_mut(&grant) {
            *n -= 1;
            if *n == 0 {
                grants.remove(&grant);
            }
        }
    }

    /// The entry an unsubscribe releases, whoever may see it now (see [`Self::entry_op`]).
    fn entry_to_release(
        &self,
        path: &str,
    ) -> Result<Arc<toolshed_core::catalog::CatalogEntry>, EngineError> {
        if !toolshed_core::path::is_callable_path(path) {
            return Err(EngineError::not_found(path));
        }
        self.inner
            .catalog
            .load()
            .get(path)
            .cloned()
            .ok_or_else(|| EngineError::not_found(path))
    }

    /// Follows the events of an execution the caller may see (as [`Self::execution`] decides;
    /// a first run not stored yet, its owner only) after event id `after`.
    pub async fn follow(
        &self,
        caller: &Caller,
        id: &str,
        after: i64,
    ) -> Result<crate::events::Follower, EngineError> {
        let visible = match self.inner.store.get_execution(id).await? {
            Some(r) => can_see_waits(caller, &r.principal, &waits_of(&r)),
            None => self.inner.running.owned_by(id, &caller.principal),
        };
        if !visible {
            return Err(EngineError::UnknownExecution { id: id.to_string() });
        }
        Ok(self.inner.events.follow(id, after))
    }

    /// One execution the caller may see (its own, or one whose pending call it may decide),
    /// whatever its state. Any other execution answers like a missing one.
    pub async fn execution(&self, caller: &Caller, id: &str) -> Result<ExecutionInfo, EngineError> {
        let now = now_ms();
        self.expire_due(now).await?;
        let unknown = || EngineError::UnknownExecution { id: id.to_string() };
        let r = self
            .inner
            .store
            .get_execution(id)
            .await?
            .filter(|r| can_see_waits(caller, &r.principal, &waits_of(r)))
            .ok_or_else(unknown)?;
        let waits = if r.status == ExecutionStatus::Paused {
            open_waits(&r)
        } else {
            vec![]
        };
        let status = match r.status {
            ExecutionStatus::Running if self.is_stale(&r, now) => "interrupted",
            other => other.as_str(),
        };
        Ok(ExecutionInfo {
            status: status.to_string(),
            completed_calls: r.journal.as_array().map_or(0, Vec::len),
            pending: waits.iter().find_map(Wait::as_pending_call),
            client_tools: client_tools_of(&r)
                .into_iter()
                .filter_map(|t| serde_json::to_value(t).ok())
                .collect(),
            waits,
            execution_id: r.id,
            principal: r.principal,
            kind: r.kind,
            result: r.result,
            error: r.error,
            created_at: r.created_at,
            updated_at: r.updated_at,
            expires_at: r.expires_at,
        })
    }

    /// The newest audit entries of the caller's principal (none for an empty principal id).
    pub async fn audit_of(
        &self,
        caller: &Caller,
        limit: usize,
    ) -> Result<Vec<toolshed_store::AuditEntry>, EngineError> {
        if caller.principal.is_empty() {
            return Ok(vec![]);
        }
        let limit = limit.clamp(1, 10_000) as i64;
        Ok(self
            .inner
            .store
            .recent_audit_of(Some(&caller.principal), limit)
            .await?)
    }

    /// Whether a `running` execution has been silent for longer than any run can last, i.e. the
    /// run that claimed it is gone.
    pub(super) fn is_stale(&self, rec: &ExecutionRecord, now: i64) -> bool {
        let c = &self.inner.config;
        let longest = if rec.kind == "call" {
            // A direct call runs as long as its tool may (its own timeout, capped).
            let path = serde_json::from_str::<Value>(&rec.source)
                .ok()
                .and_then(|v| v["path"].as_str().map(str::to_string));
            let catalog = self.inner.catalog.load();
            path.and_then(|p| catalog.get(&p).map(|e| c.timeout_of(&e.tool.def)))
                .unwrap_or(c.call_timeout)
        } else if rec.kind == "run" {
            // A run writes its journal after every model answer and tool call: silence longer
            // than the longest call means the process driving it is gone.
            c.max_call_timeout.max(c.call_timeout)
        } else {
            // A script's wall clock ends it; one waiting on a tool with its own longer timeout
            // marks itself alive meanwhile ([`super::host::Heartbeat`]).
            c.limits.wall_clock.max(c.call_timeout)
        };
        now - rec.updated_at > (longest + c.recovery_grace).as_millis() as i64
    }

    /// The executions that wait for someone and the caller may see: its own, and those whose
    /// waits it may answer. Paused ones, and continued runs that are running or were
    /// interrupted (expired ones are marked first). Newest first.
    pub async fn pending(&self, caller: &Caller) -> Result<Vec<PendingSummary>, EngineError> {
        self.waiting(caller, None).await
    }

    /// [`Engine::pending`], only executions with an open wait of `kind` when one is given.
    pub async fn waiting(
        &self,
        caller: &Caller,
        kind: Option<WaitKind>,
    ) -> Result<Vec<PendingSummary>, EngineError> {
        self.waiting_of(caller, kind, None).await
    }

    /// [`Engine::waiting`], only executions of one kind (`script`, `call` or `run`) when one
    /// is given.
    pub async fn waiting_of(
        &self,
        caller: &Caller,
        kind: Option<WaitKind>,
        execution_kind: Option<&str>,
    ) -> Result<Vec<PendingSummary>, EngineError> {
        let now = now_ms();
        self.expire_due(now).await?;
        if caller.principal.is_empty() {
            return Ok(vec![]);
        }
        // A principal that decides for others sees every principal's waiting executions its
        // `decide` patterns match.
        let whose = (!caller.access.decides_any()).then_some(caller.principal.as_ref());
        let mut recs = Vec::new();
        for status in [ExecutionStatus::Paused, ExecutionStatus::Running] {
            recs.extend(
                self.inner
                    .store
                    .list_executions(whose, Some(status), 200)
                    .await?
                    .into_iter()
                    .filter(|r| can_see_waits(caller, &r.principal, &waits_of(r)))
                    .filter(|r| kind.is_none_or(|k| open_waits(r).iter().any(|w| w.kind == k)))
                    .filter(|r| execution_kind.is_none_or(|k| r.kind == k)),
            );
        }
        recs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        recs.truncate(200);
        Ok(recs
            .into_iter()
            .map(|r| {
                let status = match r.status {
                    ExecutionStatus::Running if self.is_stale(&r, now) => "interrupted",
                    other => other.as_str(),
                };
                // A paused execution shows what is still open; a running or interrupted one what
                // it was paused on.
                let waits = if r.status == ExecutionStatus::Paused {
                    open_waits(&r)
                } else {
                    waits_of(&r)
                };
                PendingSummary {
                    status: status.to_string(),
                    pending: waits.iter().find_map(Wait::as_pending_call),
                    waits,
                    execution_id: r.id,
                    principal: r.principal,
                    kind: r.kind,
                    created_at: r.created_at,
                    updated_at: r.updated_at,
                    expires_at: r.expires_at,
                }
            })
            .collect())
    }
}
