//! The engine as handlers see it ([`toolshed_core::EngineAccess`] on the tool context): the
//! caller's view of the catalog, and calls through the one call path as the same caller, tied
//! to the same execution. Tools that compose other tools use it instead of importing the engine.

use std::sync::Arc;

use serde_json::Value;
use toolshed_core::{EngineAccess, ToolError, ToolErrorKind};

use crate::invoke::{Approval, CallResult};
use crate::{Caller, Engine, EngineError};

/// The engine, bound to one caller and execution.
pub(crate) struct BoundEngine {
    pub engine: Engine,
    pub caller: Caller,
    pub execution_id: Option<Arc<str>>,
}

/// An engine error as the tool error a composing handler sees.
fn tool_error(e: EngineError) -> ToolError {
    let kind = match &e {
        EngineError::Tool { error, .. } => error.kind,
        EngineError::NotFound { .. } => ToolErrorKind::NotFound,
        EngineError::Timeout { .. } => ToolErrorKind::Timeout,
        e if e.is_client_error() => ToolErrorKind::InvalidInput,
        _ => ToolErrorKind::Internal,
    };
    let mut t = ToolError::new(kind, e.to_string());
    t.data = e.data();
    t
}

#[async_trait::async_trait]
impl EngineAccess for BoundEngine {
    fn visible_paths(&self) -> Vec<String> {
        self.engine
            .list_tools(&self.caller)
            .into_iter()
            .map(|d| d.path.to_string())
            .collect()
    }

    async fn call(&self, path: &str, args: Value) -> Result<Value, ToolError> {
        match self
            .engine
            .invoke(
                &self.caller,
                path,
                args,
                Approval::Required,
                self.execution_id.clone(),
            )
            .await
        {
            CallResult::Done(v) => Ok(v),
            CallResult::Failed(e) => Err(tool_error(e)),
            CallResult::NeedsApproval { path, .. } => Err(ToolError::conflict(format!(
                "'{path}' needs approval, which a call made by another tool cannot wait for"
            ))),
        }
    }
}
