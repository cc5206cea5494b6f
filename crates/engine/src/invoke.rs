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
use toolshed_core::ToolContext;
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
    /// The principal has no grant at the connection the tool's source needs; nothing ran at
    /// the upstream. The call pauses until the grant is made.
    NeedsGrant {
        connection: String,
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
    pub async fn invoke(
        &self,
        caller: &Caller,
        path: &str,
        args: Value,
        approval: Approval,
        execution_id: Option<Arc<str>>,
    ) -> CallResult {
        let started = Instant::now();
        // Redacted once, before the arguments move into the handler.
        let audited_args = audit_args(&args);
        let result = self
            .invoke_inner(caller, path, args, approval, execution_id.clone())
            .await;
        let (outcome, error) = match &result {
            CallResult::Done(_) => ("ok", None),
            CallResult::NeedsApproval { .. } | CallResult::NeedsGrant { .. } => ("paused", None),
            CallResult::Failed(e) => (e.code(), Some(e.to_string())),
        };
        self.inner.audit.record(AuditEntry {
            id: uuid::Uuid::now_v7().to_string(),
            ts: toolshed_store::now_ms(),
            principal: caller.principal.to_string(),
            face: caller.face.as_str().to_string(),
            path: crate::audit::truncated(path, crate::audit::MAX_PATH_BYTES),
            execution_id: execution_id.map(|s| s.to_string()),
            args: audited_args,
            outcome: outcome.to_string(),
            error,
            duration_us: started.elapsed().as_micros() as i64,
        });
        result
    }

    async fn invoke_inner(
        &self,
        caller: &Caller,
        path: &str,
        args: Value,
        approval: Approval,
        execution_id: Option<Arc<str>>,
    ) -> CallResult {
        // A call a human approved already counted when it was first made.
        if approval == Approval::Required {
            if let Err(e) = self.inner.rates.check(&caller.principal, RateKind::Calls) {
                return CallResult::Failed(e);
            }
        }
        let entry = match self.resolve(caller, path) {
            Ok(e) => e,
            Err(e) => return CallResult::Failed(e),
        };
        let def = &entry.tool.def;
        // Saved code (custom tools) is gated call by call inside; the default does not ask to
        // confirm the whole as well, an explicit rule still applies.
        let rule = match def
            .origin
            .starts_with(crate::executions::listing::SCRIPT_ORIGIN)
        {
            true => caller
                .access
                .explicit_call_rule(path, &def.annotations)
                .unwrap_or(toolshed_core::CallRule::Allow),
            false => caller.access.call_rule(path, &def.annotations),
        };
        if rule == toolshed_core::CallRule::Deny {
            return CallResult::Failed(EngineError::DeniedByPolicy {
                path: path.to_string(),
            });
        }
        if !args.is_object() {
            return CallResult::Failed(EngineError::InvalidArguments {
                path: path.to_string(),
                violations: vec![toolshed_core::Violation {
                    pointer: String::new(),
                    rule: "type".into(),
                    message: format!("arguments must be a JSON object, got {}", json_type(&args)),
                }],
            });
        }
        match entry.input_validator() {
            Ok(v) => {
                if let Err(violations) = v.validate(&args) {
                    return CallResult::Failed(EngineError::InvalidArguments {
                        path: path.to_string(),
                        violations,
                    });
                }
            }
            Err(e) => {
                return CallResult::Failed(EngineError::BrokenSchema {
                    path: path.to_string(),
                    which: "input",
                    reason: e.to_string(),
                })
            }
        }
        if rule == toolshed_core::CallRule::Confirm && approval == Approval::Required {
            return CallResult::NeedsApproval {
                path: path.to_string(),
                name: def.name.clone(),
                args,
            };
        }
        let timeout = self.inner.config.timeout_of(def);
        let plugin_tokens = self
            .inner
            .credentials
            .as_ref()
            .map(|c| c.scoped(&def.origin));
        // Only a source with a per-user connection gets the caller's own tokens (and only its
        // calls keep their arguments for a pause on a missing grant).
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
        // Kept for a pause on a missing grant (only where connections exist).
        let kept_args = connections.map(|_| args.clone());
        let mut inner_caller = caller.clone();
        let wire = inner_caller.wire.take();
        let progress = inner_caller.progress.take();
        let access = crate::access::BoundEngine {
            engine: self.clone(),
            caller: inner_caller,
            execution_id: execution_id.clone(),
        };
        let ctx = ToolContext::new(caller.principal.clone(), def.path.clone())
            .with_engine(Some(Arc::new(access)))
            .with_wire(wire)
            .with_progress(progress)
            .with_execution(execution_id)
            .with_tokens(tokens)
            .with_timeout(timeout);
        let out = match tokio::time::timeout(timeout, entry.tool.handler.call(ctx, args)).await {
            Err(_) => {
                return CallResult::Failed(EngineError::Timeout {
                    path: path.to_string(),
                    after: timeout,
                })
            }
            Ok(Err(error)) if error.kind == toolshed_core::ToolErrorKind::GrantRequired => {
                let connection = error
                    .data
                    .as_ref()
                    .and_then(|d| d.get("connection"))
                    .and_then(Value::as_str);
                if let (Some(connection), Some(args)) = (connection, kept_args) {
                    return CallResult::NeedsGrant {
                        connection: connection.to_string(),
                        path: path.to_string(),
                        args,
                    };
                }
                return CallResult::Failed(EngineError::Tool {
                    path: path.to_string(),
                    error: Box::new(error),
                });
            }
            Ok(Err(error)) => {
                return CallResult::Failed(EngineError::Tool {
                    path: path.to_string(),
                    error: Box::new(error),
                })
            }
            Ok(Ok(v)) => v,
        };
        match entry.output_validator() {
            None => {}
            Some(Ok(v)) => {
                if let Err(violations) = v.validate(&out) {
                    return CallResult::Failed(EngineError::InvalidOutput {
                        path: path.to_string(),
                        violations,
                    });
                }
            }
            Some(Err(e)) => {
                return CallResult::Failed(EngineError::BrokenSchema {
                    path: path.to_string(),
                    which: "output",
                    reason: e.to_string(),
                })
            }
        }
        CallResult::Done(out)
    }
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
