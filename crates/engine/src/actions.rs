//! What a person must do before a paused call can go on, and how the engine asks for it.
//!
//! A handler that cannot finish until a person acts answers a [`ToolErrorKind::GrantRequired`]
//! (the caller's own grant at an `oauth2_user` connection: the engine makes the link) or a
//! [`ToolErrorKind::ActionRequired`] (the tool's own link, e.g. n8n's page for entering a
//! secret). Both become one [`HumanAction`]: where a call may pause (a direct call, a script or
//! a run), an `input` wait with `mode: "url"` and the link; once it is answered the call runs
//! again, so the handler checks that the action was done. Where it may not pause (a call made
//! by another tool, a call that already waited), an error carrying the link.

use serde_json::Value;
use toolshed_core::{ToolError, ToolErrorKind};

use crate::executions::{InputMode, Wait};
use crate::{Engine, EngineError};

/// Longest link kept from a tool, in bytes.
const MAX_URL_BYTES: usize = 2_048;
/// Longest message kept from a tool, in bytes.
const MAX_MESSAGE_BYTES: usize = 1_024;

/// What a person must do before a call can go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HumanAction {
    /// Grant access to their own account at `connection`.
    Grant { connection: String },
    /// Act at the tool's link (`message` says what to do).
    Visit { url: String, message: String },
}

impl HumanAction {
    /// The action a handler's error asks for, if it asks for one (a link must be http(s)).
    pub fn of(error: &ToolError) -> Option<Self> {
        let data = error.data.as_ref();
        match error.kind {
            ToolErrorKind::GrantRequired => Some(Self::Grant {
                connection: data?.get("connection")?.as_str()?.to_string(),
            }),
            ToolErrorKind::ActionRequired => {
                let url = data?.get("url").and_then(Value::as_str)?;
                let web = url.starts_with("https://") || url.starts_with("http://");
                (web && url.len() <= MAX_URL_BYTES).then(|| Self::Visit {
                    url: url.to_string(),
                    message: crate::audit::truncated(&error.message, MAX_MESSAGE_BYTES),
                })
            }
            _ => None,
        }
    }
}

impl Engine {
    /// The `input` wait (`mode: "url"`) call `seq` of execution `execution_id` pauses on.
    pub(crate) async fn action_wait(
        &self,
        principal: &str,
        action: &HumanAction,
        execution_id: &str,
        seq: u64,
    ) -> Result<Wait, EngineError> {
        match action {
            HumanAction::Grant { connection } => {
                self.grant_wait(principal, connection, execution_id, seq)
                    .await
            }
            HumanAction::Visit { url, message } => Ok(Wait::input(
                seq,
                InputMode::Url,
                format!("{message} Answer this question once it is done; the call then continues."),
                None,
                Some(url.clone()),
            )),
        }
    }

    /// The error of a call that needs `action` where it cannot pause: it carries the link.
    pub(crate) async fn action_error(
        &self,
        principal: &str,
        action: &HumanAction,
        path: &str,
        execution_id: &str,
    ) -> EngineError {
        match action {
            HumanAction::Grant { connection } => {
                self.grant_error(principal, connection, path, execution_id)
                    .await
            }
            HumanAction::Visit { url, message } => EngineError::Tool {
                path: path.to_string(),
                error: Box::new(ToolError::action_required(
                    format!("{message} Open {url}, then call again."),
                    url,
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_read_from_tool_errors() {
        let e = ToolError::action_required("Enter the key.", "https://n8n.example.com/x");
        assert_eq!(
            HumanAction::of(&e),
            Some(HumanAction::Visit {
                url: "https://n8n.example.com/x".into(),
                message: "Enter the key.".into()
            })
        );
        assert_eq!(
            HumanAction::of(&ToolError::grant_required("gh")),
            Some(HumanAction::Grant {
                connection: "gh".into()
            })
        );
        // Not a web link, or no link at all: no pause, the error stands.
        let js = ToolError::action_required("x", "javascript:alert(1)");
        assert_eq!(HumanAction::of(&js), None);
        let mut bare = ToolError::action_required("x", "https://a");
        bare.data = None;
        assert_eq!(HumanAction::of(&bare), None);
        assert_eq!(HumanAction::of(&ToolError::invalid("x")), None);
    }
}
