//! Who decides a pending call: the one rule every face goes through.
//!
//! A decision arrives through a [`DecisionChannel`]: a person ([`DecisionChannel::Human`]: the
//! HTTP API, the CLI, or MCP elicitation answered in the client's own interface) or the agent's
//! own `resume` tool ([`DecisionChannel::AgentTool`]). The rule:
//!
//! - a principal may decide a pending call only when its roles' `decide` patterns match the
//!   call's path;
//! - through a human channel it may then decide any principal's execution (an administrator
//!   approving from the HTTP API or the CLI);
//! - through the agent's tool only its own executions, and only with `self_decide` (the built-in
//!   local principal has it: the agent shows the action and relays the user's answer).
//!
//! An execution is visible to its owner and to every principal that may decide its pending
//! call; to anyone else it answers like one that does not exist.

use serde::{Deserialize, Serialize};

use crate::{Caller, Face};

/// Through what a decision arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionChannel {
    /// A person decided, through this face.
    Human(Face),
    /// The agent decided, through its `resume` tool.
    AgentTool,
}

/// Whether `caller` may see an execution of `owner` waiting on a call to `pending_path`.
pub fn can_see(caller: &Caller, owner: &str, pending_path: Option<&str>) -> bool {
    is_owner(caller, owner) || pending_path.is_some_and(|p| caller.access.may_decide(p))
}

/// Whether `caller` may see an execution of `owner` waiting on `waits`: its owner, or a
/// principal that may decide one of the waits.
pub fn can_see_waits(caller: &Caller, owner: &str, waits: &[crate::executions::Wait]) -> bool {
    is_owner(caller, owner)
        || waits
            .iter()
            .filter(|w| w.kind != crate::executions::WaitKind::ToolResult)
            .any(|w| caller.access.may_decide(w.decision_path()))
}

fn is_owner(caller: &Caller, owner: &str) -> bool {
    !owner.is_empty() && owner == caller.principal.as_ref()
}

/// Why `caller` may not decide the pending call to `path` of an execution of `owner` through
/// `channel`; `None` when it may.
pub fn refusal(
    caller: &Caller,
    owner: &str,
    path: &str,
    channel: DecisionChannel,
) -> Option<String> {
    let who = &caller.principal;
    if !caller.access.may_decide(path) {
        return Some(format!(
            "principal '{who}' may not approve or deny calls to '{path}': no role of it lists the tool in 'decide'"
        ));
    }
    match channel {
        DecisionChannel::Human(_) => None,
        DecisionChannel::AgentTool if !is_owner(caller, owner) => Some(
            "the resume tool decides only the caller's own executions; a person decides others' through the HTTP API or the CLI"
                .to_string(),
        ),
        DecisionChannel::AgentTool if !caller.access.self_decide() => Some(format!(
            "principal '{who}' may not decide its own calls through the resume tool (its roles do not allow self_decide); a person decides through the HTTP API, the CLI or the client's approval prompt"
        )),
        DecisionChannel::AgentTool => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolshed_core::{Access, Pattern};

    fn caller(id: &str, decide: &[&str], self_decide: bool) -> Caller {
        let decide: Vec<Pattern> = decide.iter().map(|d| Pattern::parse(d).unwrap()).collect();
        Caller::new(
            id,
            Access::with_decisions(&[], &decide, self_decide),
            Face::Http,
        )
    }

    #[test]
    fn the_rule_by_principal_and_channel() {
        let human = DecisionChannel::Human(Face::Http);
        let agent = DecisionChannel::AgentTool;
        let plain = caller("bot", &[], false);
        assert!(refusal(&plain, "bot", "t.drop", human).is_some());
        assert!(refusal(&plain, "bot", "t.drop", agent).is_some());
        let decider = caller("bot", &["t.*"], false);
        assert_eq!(refusal(&decider, "bot", "t.drop", human), None);
        assert!(refusal(&decider, "bot", "t.drop", agent)
            .unwrap()
            .contains("self_decide"));
        assert!(refusal(&decider, "bot", "u.drop", human).is_some());
        let trusted = caller("bot", &["t.*"], true);
        assert_eq!(refusal(&trusted, "bot", "t.drop", agent), None);
        assert!(refusal(&trusted, "other", "t.drop", agent).is_some());
        assert_eq!(refusal(&trusted, "other", "t.drop", human), None);
    }

    #[test]
    fn visibility_is_ownership_or_deciding() {
        let decider = caller("admin", &["t.*"], false);
        assert!(can_see(&decider, "alice", Some("t.drop")));
        assert!(!can_see(&decider, "alice", Some("u.drop")));
        assert!(!can_see(&decider, "alice", None));
        assert!(can_see(&decider, "admin", None));
        let empty = caller("", &[], false);
        assert!(!can_see(&empty, "", None), "an empty id owns nothing");
    }
}
