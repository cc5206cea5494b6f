//! One call through the engine: rate limit → resolve → call rule (`deny` refuses) → validate →
//! approval gate (`confirm` pauses) → handler (timeout) → output check → audit. Nothing else in
//! the workspace calls a tool handler. The call rules are the caller's roles' `allow`, `confirm`
//! and `deny` ([`toolshed_core::rules`]): by default every tool that is not read-only needs
//! confirmation.
//!
//! A path that breaks the path grammar or is longer than
//! [`toolshed_core::path::MAX_CALL_PATH_BYTES`] is refused before any lookup with the same
//! `not_found` answer an unknown tool gets.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use toolshed_core::catalog::CatalogEntry;
use toolshed_core::{CallRule, ToolContext, ToolDef};
use toolshed_store::AuditEntry;

use crate::audit::audit_args;
use crate::rate::RateKind;
use crate::{Caller, Engine, EngineError};

/// Whether a call the policy wants confirmed may run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Calls whose rule is `confirm` stop at the gate and ask for approval.
    Required,
    /// A human approved this very call.
    Granted,
}

/// What happened to one call.
#[derive(Debug)]
pub enum CallResult {
    Done(Value),
    /// The call needs approval (its rule is `confirm`); nothing ran.
    NeedsApproval {
        path: String,
        name: String,
        args: Value,
    },
    /// A person must act first (grant access at a connection, or act at the tool's link);
    /// the call pauses until they have, then runs again.
    NeedsAction {
        action: crate::actions::HumanAction,
        path: String,
        args: Value,
    },
    Failed(EngineError),
}

impl Engine {
    /// Finds a tool in the caller's view. A forbidden path answers exactly like a missing one,
    /// and so does a path that cannot name a tool (checked first, without a lookup).
    pub fn resolve(&self, caller: &Caller, path: &str) -> Result<Arc<CatalogEntry>, EngineError> {
        if !toolshed_core::path::is_callable_path(path) {
            return Err(EngineError::not_found(path));
        }
        let catalog = self.inner.catalog.load();
        match catalog.get(path) {
            Some(e) if caller.allows(path) => Ok(e.clone()),
            _ => Err(EngineError::not_found(path)),
        }
    }

    /// Parses argument text (CLI, HTTP bodies); empty text means `{}`.
    pub fn parse_args(path: &str, text: &str) -> Result<Value, EngineError> {
        if text.trim().is_empty() {
            return Ok(Value::Object(Default::default()));
        }
        serde_json::from_str(text).map_err(|e| EngineError::MalformedArguments {
            path: crate::audit::truncated(path, crate::audit::MAX_PATH_BYTES),
            reason: e.to_string(),
        })
    }

    /// The one call path. `execution_id` ties the call to a script or paused call.
    ///
    /// The call is audited however it ends, also when its future is dropped before it finished
    /// (the face's client cancelled the call or went away): then with the outcome `cancelled`.
    pub async fn invoke(
        &self,
        caller: &Caller,
        path: &str,
        args: Value,
        approval: Approval,
        execution_id: Option<Arc<str>>,
    ) -> CallResult {
        // Redacted once, before the arguments move into the handler.
        let mut audit = Audited {
            engine: self,
            started: Instant::now(),
            entry: Some(AuditEntry {
                id: uuid::Uuid::now_v7().to_string(),
                ts: toolshed_store::now_ms(),
                principal: caller.principal.to_string(),
                face: caller.face.as_str().to_string(),
                path: crate::audit::truncated(path, crate::audit::MAX_PATH_BYTES),
                execution_id: execution_id.as_ref().map(|s| s.to_string()),
                args: audit_args(&args),
                outcome: CANCELLED.to_string(),
                error: Some(CANCELLED_REASON.to_string()),
                duration_us: 0,
            }),
        };
        let result = self
            .invoke_inner(caller, path, args, approval, execution_id)
            .await;
        let (outcome, error) = match &result {
            CallResult::Done(_) => ("ok", None),
            CallResult::NeedsApproval { .. } | CallResult::NeedsAction { .. } => ("paused", None),
            CallResult::Failed(e) => (e.code(), Some(e.to_string())),
        };
        audit.finish(outcome, error);
        result
    }

    /// The steps of [`Engine::invoke`] between the rate limit and the audit entry.
    async fn invoke_inner(
        &self,
        caller: &Caller,
        path: &str,
        args: Value,
        approval: Approval,
        execution_id: Option<Arc<str>>,
    ) -> CallResult {
        self.call_steps(caller, path, args, approval, execution_id)
            .await
            .unwrap_or_else(CallResult::Failed)
    }

    async fn call_steps(
        &self,
        caller: &Caller,
        path: &str,
        args: Value,
        approval: Approval,
        execution_id: Option<Arc<str>>,
    ) -> Result<CallResult, EngineError> {
        // A call a human approved already counted when it was first made.
        if approval == Approval::Required {
            self.inner.rates.check(&caller.principal, RateKind::Calls)?;
        }
        let entry = self.resolve(caller, path)?;
        let def = &entry.tool.def;
        let rule = call_rule(caller, path, def)?;
        check_input(&entry, path, &args)?;
        if rule == CallRule::Confirm && approval == Approval::Required {
            return Ok(CallResult::NeedsApproval {
                path: path.to_string(),
                name: def.name.clone(),
                args,
            });
        }
        let prepared = self.prepare(caller, def, &args, execution_id);
        let timeout = prepared.ctx.timeout;
        let out = match tokio::time::timeout(timeout, entry.tool.handler.call(prepared.ctx, args))
            .await
        {
            Err(_) => {
                return Err(EngineError::Timeout {
                    path: path.to_string(),
                    after: timeout,
                })
            }
            Ok(Err(error)) => return action_pause(error, path, prepared.kept_args),
            Ok(Ok(v)) => v,
        };
        check_output(&entry, path, &out)?;
        Ok(CallResult::Done(out))
    }

    /// The handler's context: the caller's engine access (as the caller, tied to the
    /// execution), its progress and wire slots, the credentials the tool's origin may use, and
    /// the timeout. Only a source with a per-user connection gets the caller's own tokens, and
    /// only its calls keep their arguments for a pause on a missing grant.
    fn prepare(
        &self,
        caller: &Caller,
        def: &ToolDef,
        args: &Value,
        execution_id: Option<Arc<str>>,
    ) -> Prepared {
        let timeout = self.inner.config.timeout_of(def);
        let plugin_tokens = self
            .inner
            .credentials
            .as_ref()
            .map(|c| c.scoped(&def.origin));
        let connections = self
            .inner
            .connections
            .as_ref()
            .filter(|c| c.covers(&def.origin));
        let tokens = match connections {
            Some(connections) => Some(Arc::new(crate::connections::CallTokens {
                plugin: plugin_tokens,
                connections: connections.clone(),
                principal: caller.principal.clone(),
                subject: caller.subject_token.clone(),
            }) as Arc<dyn toolshed_core::TokenSource>),
            None => plugin_tokens,
        };
        // Any handler may ask a person to act (a grant, or its own link), and the paused call
        // runs again with the same arguments.
        let kept_args = Some(args.clone());
        let mut inner_caller = caller.clone();
        let wire = inner_caller.wire.take();
        let progress = inner_caller.progress.take();
        let client = inner_caller.client.take();
        let access = crate::access::BoundEngine {
            engine: self.clone(),
            caller: inner_caller,
            execution_id: execution_id.clone(),
            path: def.path.to_string(),
        };
        let ctx = ToolContext::new(caller.principal.clone(), def.path.clone())
            .with_engine(Some(Arc::new(access)))
            .with_wire(wire)
            .with_progress(progress)
            .with_client(client)
            .with_execution(execution_id)
            .with_tokens(tokens)
            .with_timeout(timeout);
        Prepared { ctx, kept_args }
    }
}

/// The audit outcome of a call whose future was dropped before it finished.
pub const CANCELLED: &str = "cancelled";
const CANCELLED_REASON: &str =
    "the call was dropped before it finished: its client cancelled it or went away";

/// The audit entry of one call in progress: recorded by [`Audited::finish`] with the call's
/// outcome, or when dropped unfinished as [`CANCELLED`].
struct Audited<'a> {
    engine: &'a Engine,
    started: Instant,
    entry: Option<AuditEntry>,
}

impl Audited<'_> {
    fn finish(&mut self, outcome: &str, error: Option<String>) {
        if let Some(mut entry) = self.entry.take() {
            entry.outcome = outcome.to_string();
            entry.error = error;
            self.record(entry);
        }
    }

    fn record(&self, mut entry: AuditEntry) {
        entry.duration_us = self.started.elapsed().as_micros() as i64;
        self.engine.inner.audit.record(entry);
    }
}

impl Drop for Audited<'_> {
    fn drop(&mut self) {
        if let Some(entry) = self.entry.take() {
            self.record(entry);
        }
    }
}

/// A handler's context, and the arguments kept for a pause that asks a person to act.
struct Prepared {
    ctx: ToolContext,
    kept_args: Option<Value>,
}

/// The caller's rule for the call; `deny` refuses it. Saved code (custom tools) is gated call
/// by call inside: the default does not ask to confirm the whole as well, an explicit rule
/// still applies.
pub(crate) fn call_rule(
    caller: &Caller,
    path: &str,
    def: &ToolDef,
) -> Result<CallRule, EngineError> {
    let rule = if def
        .origin
        .starts_with(crate::executions::listing::SCRIPT_ORIGIN)
    {
        caller
            .access
            .explicit_call_rule(path, &def.annotations)
            .unwrap_or(CallRule::Allow)
    } else {
        caller.access.call_rule(path, &def.annotations)
    };
    match rule {
        CallRule::Deny => Err(EngineError::DeniedByPolicy {
            path: path.to_string(),
        }),
        rule => Ok(rule),
    }
}

/// The arguments are an object that meets the tool's input schema.
fn check_input(entry: &CatalogEntry, path: &str, args: &Value) -> Result<(), EngineError> {
    if !args.is_object() {
        return Err(EngineError::InvalidArguments {
            path: path.to_string(),
            violations: vec![toolshed_core::Violation {
                pointer: String::new(),
                rule: "type".into(),
                message: format!("arguments must be a JSON object, got {}", json_type(args)),
            }],
        });
    }
    let validator = entry
        .input_validator()
        .map_err(|e| EngineError::BrokenSchema {
            path: path.to_string(),
            which: "input",
            reason: e.to_string(),
        })?;
    validator
        .validate(args)
        .map_err(|violations| EngineError::InvalidArguments {
            path: path.to_string(),
            violations,
        })
}

/// The result meets the tool's output schema, when it declares one.
fn check_output(entry: &CatalogEntry, path: &str, out: &Value) -> Result<(), EngineError> {
    match entry.output_validator() {
        None => Ok(()),
        Some(Ok(v)) => v
            .validate(out)
            .map_err(|violations| EngineError::InvalidOutput {
                path: path.to_string(),
                violations,
            }),
        Some(Err(e)) => Err(EngineError::BrokenSchema {
            path: path.to_string(),
            which: "output",
            reason: e.to_string(),
        }),
    }
}

/// A handler's error: one that asks a person to act ([`crate::actions`]) pauses the call (when
/// its arguments were kept); anything else fails it.
fn action_pause(
    error: toolshed_core::ToolError,
    path: &str,
    kept_args: Option<Value>,
) -> Result<CallResult, EngineError> {
    if let (Some(action), Some(args)) = (crate::actions::HumanAction::of(&error), kept_args) {
        return Ok(CallResult::NeedsAction {
            action,
            path: path.to_string(),
            args,
        });
    }
    Err(EngineError::Tool {
        path: path.to_string(),
        error: Box::new(error),
    })
}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
