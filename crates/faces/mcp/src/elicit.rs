//! Waits put to the human through MCP elicitation (`elicitation/create`) when the client
//! supports it: an approval (accept approves, decline denies) and a question in form mode (the
//! question's schema is the requested schema when MCP's flat form schemas can carry it), in
//! form mode; a question in url mode (a link to open, such as the grant link of a per-user
//! connection) in url mode, where accept means the person went through the link: the call then
//! waits (up to [`URL_WAIT`]) for the execution to go on, which the link's completion does.
//! Cancel, no support, or any failure leaves the execution paused, to be answered later
//! with `resume`, the HTTP API or the CLI. Answers are a person's ([`DecisionChannel::Human`]);
//! a caller whose policy does not let it decide an approval is not asked. Client tool calls
//! are never elicited: they go back to the client.

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use toolshed_engine::decisions::refusal;
use toolshed_engine::{
    AnswerAction, Caller, Decision, DecisionChannel, Engine, EngineError, Face, InputMode, Outcome,
    Wait, WaitKind,
};

const CHANNEL: DecisionChannel = DecisionChannel::Human(Face::Mcp);

/// At most this many waits are asked in a row for one execution.
const MAX_ROUNDS: usize = 20;

/// How long a call waits, after a person accepted a url-mode elicitation, for the execution to
/// go on (the link's own completion answers the wait).
const URL_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// A human's reply to one elicited wait.
enum Reply {
    Decision(Decision),
    Answer(AnswerAction, Option<Value>),
    /// The person went through the link of a url-mode wait.
    Opened,
}

fn shorten(v: &Value) -> String {
    let text = serde_json::to_string(v).unwrap_or_default();
    if text.len() > 600 {
        format!("{}…", &text[..text.floor_char_boundary(600)])
    } else {
        text
    }
}

/// Asks the human about one wait; `None` when it cannot or should not be asked.
async fn ask(peer: &Peer<RoleServer>, caller: &Caller, wait: &Wait) -> Option<Reply> {
    let modes = peer.supported_elicitation_modes();
    if wait.kind == WaitKind::Input && wait.mode == Some(InputMode::Url) {
        if !modes.contains(&ElicitationMode::Url) {
            return None;
        }
        let reply = peer
            .create_elicitation(ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: wait.message.clone().unwrap_or_default(),
                url: wait.url.clone()?,
                elicitation_id: wait.wait_id.clone(),
            })
            .await
            .ok()?;
        return match reply.action {
            ElicitationAction::Accept => Some(Reply::Opened),
            ElicitationAction::Decline => Some(Reply::Answer(AnswerAction::Decline, None)),
            _ => None,
        };
    }
    if !modes.contains(&ElicitationMode::Form) {
        return None;
    }
    let (message, schema) = match wait.kind {
        WaitKind::Approval => {
            if refusal(caller, &caller.principal, wait.decision_path(), CHANNEL).is_some() {
                return None;
            }
            let message = format!(
                "Approve the call {} ({})?\nArguments: {}\nAccept to run it, decline to refuse it.",
                wait.decision_path(),
                wait.name.as_deref().unwrap_or_default(),
                shorten(wait.arguments.as_ref().unwrap_or(&Value::Null))
            );
            (message, ElicitationSchema::builder().build().ok()?)
        }
        WaitKind::Input if wait.mode == Some(InputMode::Form) => {
            let schema = wait.schema.clone().unwrap_or(Value::Null);
            let schema: ElicitationSchema = serde_json::from_value(schema).ok()?;
            (wait.message.clone().unwrap_or_default(), schema)
        }
        _ => return None,
    };
    let reply = peer
        .create_elicitation(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        })
        .await
        .ok()?;
    match (wait.kind, reply.action) {
        (WaitKind::Approval, ElicitationAction::Accept) => Some(Reply::Decision(Decision::Approve)),
        (WaitKind::Approval, ElicitationAction::Decline) => Some(Reply::Decision(Decision::Deny)),
        (WaitKind::Input, ElicitationAction::Accept) => {
            Some(Reply::Answer(AnswerAction::Accept, reply.content))
        }
        (WaitKind::Input, ElicitationAction::Decline) => {
            Some(Reply::Answer(AnswerAction::Decline, None))
        }
        _ => None,
    }
}

async fn apply(
    engine: &Engine,
    caller: &Caller,
    id: &str,
    wait: &Wait,
    reply: Reply,
) -> Result<Outcome, EngineError> {
    match reply {
        Reply::Decision(d) => {
            engine
                .decide(caller, id, Some(&wait.wait_id), d, CHANNEL)
                .await
        }
        Reply::Answer(action, content) => {
            engine
                .answer(caller, id, &wait.wait_id, action, content, CHANNEL)
                .await
        }
        Reply::Opened => Ok(gone_on(engine, caller, id, &wait.wait_id).await),
    }
}

/// The execution's outcome once it no longer waits on `wait_id` (or as it stands after
/// [`URL_WAIT`]).
async fn gone_on(engine: &Engine, caller: &Caller, id: &str, wait_id: &str) -> Outcome {
    let deadline = tokio::time::Instant::now() + URL_WAIT;
    loop {
        let info = engine.execution(caller, id).await;
        let waiting = |i: &toolshed_engine::ExecutionInfo| {
            i.status == "running" || i.waits.iter().any(|w| w.wait_id == wait_id)
        };
        match info {
            Ok(i) if !waiting(&i) || tokio::time::Instant::now() >= deadline => {
                return Outcome::from_info(i)
            }
            Err(_) if tokio::time::Instant::now() >= deadline => {
                return Outcome::paused(id.to_string(), vec![], vec![])
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
        }
    }
}

/// Settles a paused outcome through elicitation where possible; returns the final outcome (or
/// the paused one, unchanged, when the human was not or could not be asked).
pub(crate) async fn settle(
    engine: &Engine,
    caller: &Caller,
    mut outcome: Outcome,
    peer: Option<&Peer<RoleServer>>,
) -> Outcome {
    let Some(peer) = peer else {
        return outcome;
    };
    let modes = peer.supported_elicitation_modes();
    if !modes.contains(&ElicitationMode::Form) && !modes.contains(&ElicitationMode::Url) {
        return outcome;
    }
    for _ in 0..MAX_ROUNDS {
        let mut answered = None;
        for wait in outcome.waits() {
            if let Some(reply) = ask(peer, caller, wait).await {
                answered = Some((wait.clone(), reply));
                break;
            }
        }
        let Some((wait, reply)) = answered else {
            return outcome;
        };
        let id = outcome.execution_id().to_string();
        match apply(engine, caller, &id, &wait, reply).await {
            Ok(next) => outcome = next,
            Err(e) => {
                tracing::warn!(error = %e, "answer after elicitation failed");
                return outcome;
            }
        }
    }
    outcome
}
