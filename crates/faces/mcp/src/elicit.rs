//! Approval through MCP elicitation: a paused execution is put to the human via the client
//! (`elicitation/create`, form mode) when the client supports it. Accept approves the pending
//! call, decline denies it, cancel (or no support, or any failure) leaves it paused, to be settled
//! later with `resume`, the HTTP API or the CLI. The answer is a person's
//! ([`DecisionChannel::Human`]); a caller whose policy does not let it decide the call is not
//! asked.

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};
use toolshed_engine::decisions::refusal;
use toolshed_engine::{Caller, Decision, DecisionChannel, Engine, Face, Outcome};

const CHANNEL: DecisionChannel = DecisionChannel::Human(Face::Mcp);

/// At most this many approvals are asked in a row for one script.
const MAX_ROUNDS: usize = 20;

async fn ask(peer: &Peer<RoleServer>, caller: &Caller, outcome: &Outcome) -> Option<Decision> {
    let Outcome::Paused { pending, .. } = outcome else {
        return None;
    };
    if refusal(caller, &caller.principal, &pending.path, CHANNEL).is_some() {
        return None;
    }
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return None;
    }
    let args = serde_json::to_string(&pending.args).unwrap_or_default();
    let args = if args.len() > 600 {
        format!("{}…", &args[..args.floor_char_boundary(600)])
    } else {
        args
    };
    let message = format!(
        "Approve the destructive call {} ({})?\nArguments: {args}\nAccept to run it, decline to refuse it.",
        pending.path, pending.name
    );
    let schema = ElicitationSchema::builder().build().ok()?;
    let reply = peer
        .create_elicitation(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        })
        .await
        .ok()?;
    match reply.action {
        ElicitationAction::Accept => Some(Decision::Approve),
        ElicitationAction::Decline => Some(Decision::Deny),
        _ => None,
    }
}

/// Settles a paused outcome through elicitation where possible; returns the final outcome (or the
/// paused one, unchanged, when the human was not or could not be asked).
pub(crate) async fn settle(
    engine: &Engine,
    caller: &Caller,
    mut outcome: Outcome,
    peer: Option<&Peer<RoleServer>>,
) -> Outcome {
    let Some(peer) = peer else {
        return outcome;
    };
    for _ in 0..MAX_ROUNDS {
        let Some(decision) = ask(peer, caller, &outcome).await else {
            return outcome;
        };
        match engine
            .resume(caller, outcome.execution_id(), decision, CHANNEL)
            .await
        {
            Ok(next) => outcome = next,
            Err(e) => {
                tracing::warn!(error = %e, "resume after elicitation failed");
                return outcome;
            }
        }
    }
    outcome
}
