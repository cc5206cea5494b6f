//! Calls held across requests for clients of the 2026-07-28 revision, which take no
//! server-to-client requests: when an upstream (of any revision) asks for input during a call
//! on a virtual server (`elicitation/create`, `sampling/createMessage`), the call keeps running
//! here and the client gets an `input_required` result with the question and a `requestState`.
//! Calling the tool again with that state and `inputResponses` hands the answer to the
//! upstream and waits for the call's next question or its result.
//!
//! The state is a random 256-bit handle to the held call in this process: it cannot be forged
//! or altered into another call's, it is bound to the principal that made the call (another
//! principal's retry is refused as if the state were unknown) and it expires after
//! [`HOLD_FOR`] (the call is then cancelled within a minute, and the upstream hears so); a
//! retry must name the same tool. A process holds at most
//! [`MAX_HELD`] calls, and [`MAX_HELD_PER_PRINCIPAL`] of one principal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolResponse, InputResponses};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use toolshed_core::{ClientChannel, ToolError};

/// How long a held call waits for the client to come back.
pub(crate) const HOLD_FOR: Duration = Duration::from_secs(600);
/// Most calls held at once.
pub(crate) const MAX_HELD: usize = 1000;
/// Most calls one principal may have held at once.
pub(crate) const MAX_HELD_PER_PRINCIPAL: usize = 32;

/// One question of the upstream, waiting for the client.
pub(crate) struct Question {
    method: String,
    params: Value,
    answer: oneshot::Sender<Result<Value, ToolError>>,
}

/// The held calls of this process, by their state.
#[derive(Default)]
pub(crate) struct HeldCalls {
    calls: Mutex<HashMap<String, Held>>,
}

/// A call running in a task of its own, with its open question.
struct Held {
    principal: Arc<str>,
    /// The tool called: a retry must name it again.
    tool: String,
    expires: Instant,
    questions: mpsc::Receiver<Question>,
    done: AbortOnDrop,
    /// The key of the question asked, and where its answer goes.
    open: Option<(String, oneshot::Sender<Result<Value, ToolError>>)>,
    asked: u64,
}

/// The call's task, cancelled when its hold is dropped (expired, or never resumed).
struct AbortOnDrop(tokio::task::JoinHandle<Result<CallToolResponse, McpError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The client of a held call: questions go to the holder, answers come from the retry.
struct HoldingClient {
    id: u64,
    capabilities: Option<rmcp::model::ClientCapabilities>,
    questions: mpsc::Sender<Question>,
}

#[async_trait::async_trait]
impl ClientChannel for HoldingClient {
    fn client_id(&self) -> u64 {
        self.id
    }

    fn supports(&self, capability: &str) -> bool {
        let Some(caps) = &self.capabilities else {
            return false;
        };
        match capability {
            "sampling" => caps.sampling.is_some(),
            "elicitation" => caps
                .elicitation
                .as_ref()
                .is_some_and(|e| e.form.is_some() || e.url.is_none()),
            "elicitation.url" => caps.elicitation.as_ref().is_some_and(|e| e.url.is_some()),
            _ => false,
        }
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, ToolError> {
        let (answer, answered) = oneshot::channel();
        let question = Question {
            method: method.to_string(),
            params,
            answer,
        };
        if self.questions.send(question).await.is_err() {
            return Err(ToolError::upstream("the call is no longer held"));
        }
        answered
            .await
            .unwrap_or_else(|_| Err(ToolError::upstream("the client did not come back in time")))
    }
}

/// A new client for a held call of `principal`, and the receiving end of its questions. A
/// 2026-07-28 client has no session, so the principal is the client: its held calls share one
/// client id (an upstream's question may go to any of them, never to another principal's).
pub(crate) fn client(
    principal: &str,
    capabilities: Option<rmcp::model::ClientCapabilities>,
) -> (Arc<dyn ClientChannel>, mpsc::Receiver<Question>) {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ("held", principal).hash(&mut h);
    let (tx, rx) = mpsc::channel(1);
    let client = HoldingClient {
        id: h.finish() | (1 << 63),
        capabilities,
        questions: tx,
    };
    (Arc::new(client), rx)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn new_state() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl HeldCalls {
    /// The held calls of this process, shared by every endpoint (the limits are per process).
    pub(crate) fn of_process() -> Arc<Self> {
        static HELD: std::sync::OnceLock<Arc<HeldCalls>> = std::sync::OnceLock::new();
        HELD.get_or_init(|| {
            let held = Arc::new(HeldCalls::default());
            // Expired holds are dropped (their calls cancelled) within a minute.
            let weak = Arc::downgrade(&held);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        let Some(held) = weak.upgrade() else { return };
                        let now = Instant::now();
                        lock(&held.calls).retain(|_, h| h.expires > now);
                    }
                });
            }
            held
        })
        .clone()
    }

    /// Runs `call` of `tool` for `principal`; answers its result, or the first question as
    /// `input_required` (the call then stays held).
    pub(crate) async fn start(
        &self,
        principal: Arc<str>,
        tool: String,
        questions: mpsc::Receiver<Question>,
        call: tokio::task::JoinHandle<Result<CallToolResponse, McpError>>,
    ) -> Result<CallToolResponse, McpError> {
        let held = Held {
            principal,
            tool,
            expires: Instant::now() + HOLD_FOR,
            questions,
            done: AbortOnDrop(call),
            open: None,
            asked: 0,
        };
        self.step(held).await
    }

    /// A retry with `state` and the client's `responses`: the open question answered, then the
    /// call's next question or its result.
    pub(crate) async fn resume(
        &self,
        principal: &str,
        tool: &str,
        state: &str,
        responses: Option<InputResponses>,
    ) -> Result<CallToolResponse, McpError> {
        let held = {
            let mut calls = lock(&self.calls);
            let mine = calls.get(state).is_some_and(|h| {
                &*h.principal == principal && h.tool == tool && h.expires > Instant::now()
            });
            if mine {
                calls.remove(state)
            } else {
                None
            }
        };
        let Some(mut held) = held else {
            return Err(McpError::invalid_params(
                "requestState is unknown, expired, not this caller's or of another tool: call the tool again without it",
                None,
            ));
        };
        if let Some((key, answer)) = held.open.take() {
            let got = responses.and_then(|mut r| r.remove(&key));
            let _ = answer.send(got.ok_or_else(|| {
                ToolError::invalid(format!("the client sent no answer for input '{key}'"))
            }));
        }
        held.expires = Instant::now() + HOLD_FOR;
        self.step(held).await
    }

    /// Waits for the held call's next question or its result.
    async fn step(&self, mut held: Held) -> Result<CallToolResponse, McpError> {
        let mut questions_open = true;
        loop {
            tokio::select! {
                q = held.questions.recv(), if questions_open => {
                    let Some(q) = q else {
                        questions_open = false;
                        continue;
                    };
                    return self.hold(held, q);
                }
                done = &mut held.done.0 => {
                    return done.unwrap_or_else(|e| {
                        Err(McpError::internal_error(format!("the call ended abnormally: {e}"), None))
                    });
                }
            }
        }
    }

    /// Keeps `held` with its question open, and answers the question to the client.
    fn hold(&self, mut held: Held, q: Question) -> Result<CallToolResponse, McpError> {
        held.asked += 1;
        let key = format!("input-{}", held.asked);
        let request = json!({"method": q.method, "params": q.params});
        let state = new_state();
        let result = serde_json::from_value(json!({
            "resultType": "input_required",
            "inputRequests": {key.clone(): request},
            "requestState": state,
        }))
        .map_err(|e| McpError::internal_error(format!("the upstream's question: {e}"), None))?;
        held.open = Some((key, q.answer));
        let mut calls = lock(&self.calls);
        let now = Instant::now();
        calls.retain(|_, h| h.expires > now);
        if calls.len() >= MAX_HELD {
            return Err(McpError::internal_error(
                format!("{MAX_HELD} calls already wait for their clients' input: try again later"),
                None,
            ));
        }
        let theirs = calls
            .values()
            .filter(|h| h.principal == held.principal)
            .count();
        if theirs >= MAX_HELD_PER_PRINCIPAL {
            return Err(McpError::invalid_request(
                format!(
                    "{MAX_HELD_PER_PRINCIPAL} of your calls already wait for your input: answer or abandon them first"
                ),
                None,
            ));
        }
        calls.insert(state, held);
        Ok(CallToolResponse::InputRequired(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Option<rmcp::model::ClientCapabilities> {
        serde_json::from_value(json!({"elicitation": {}})).ok()
    }

    fn input_required(r: &CallToolResponse) -> (String, String, Value) {
        let CallToolResponse::InputRequired(r) = r else {
            panic!("not input_required: {r:?}");
        };
        let v = serde_json::to_value(r).unwrap();
        let (key, request) = v["inputRequests"]
            .as_object()
            .unwrap()
            .iter()
            .next()
            .unwrap();
        (
            key.clone(),
            v["requestState"].as_str().unwrap().to_string(),
            request.clone(),
        )
    }

    #[tokio::test]
    async fn a_question_is_held_and_answered_by_the_retry_of_the_same_principal() {
        let held = HeldCalls::default();
        let (client, questions) = client("alice", caps());
        assert!(client.supports("elicitation"));
        let call = tokio::spawn(async move {
            let ask = |m: &str| json!({"mode": "form", "message": m, "requestedSchema": {"type": "object", "properties": {}}});
            let a = client.request("elicitation/create", ask("name?")).await?;
            let b = client.request("elicitation/create", ask("age?")).await?;
            Ok::<_, ToolError>(format!("{} {}", a["content"]["v"], b["content"]["v"]))
        });
        let task = tokio::spawn(async move {
            let said = call
                .await
                .unwrap()
                .map_err(|e| McpError::internal_error(e.message, None))?;
            Ok(CallToolResponse::Complete(
                rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(said)]),
            ))
        });
        let first = held
            .start(Arc::from("alice"), "t".into(), questions, task)
            .await
            .unwrap();
        let (key, state, request) = input_required(&first);
        assert_eq!(request["method"], "elicitation/create");
        assert_eq!(request["params"]["message"], "name?");
        // Another principal cannot take the call over, nor a retry of another tool, and an
        // altered state is unknown.
        assert!(held.resume("mallory", "t", &state, None).await.is_err());
        assert!(held
            .resume("alice", "other_tool", &state, None)
            .await
            .is_err());
        assert!(held
            .resume("alice", "t", &format!("{state}x"), None)
            .await
            .is_err());
        let answer: InputResponses =
            [(key, json!({"action": "accept", "content": {"v": "Ada"}}))].into();
        let second = held
            .resume("alice", "t", &state, Some(answer))
            .await
            .unwrap();
        let (key, state2, request) = input_required(&second);
        assert_ne!(state, state2);
        assert_eq!(request["params"]["message"], "age?");
        // A state is used once.
        assert!(held.resume("alice", "t", &state, None).await.is_err());
        let answer: InputResponses =
            [(key, json!({"action": "accept", "content": {"v": 36}}))].into();
        let done = held
            .resume("alice", "t", &state2, Some(answer))
            .await
            .unwrap();
        let CallToolResponse::Complete(r) = done else {
            panic!("{done:?}")
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap()["content"][0]["text"],
            "\"Ada\" 36"
        );
    }

    #[tokio::test]
    async fn one_principal_cannot_hold_more_than_its_share() {
        let held = HeldCalls::default();
        let ask = || {
            let (client, questions) = client("alice", caps());
            let task = tokio::spawn(async move {
                let q = json!({"mode": "form", "message": "?", "requestedSchema": {"type": "object", "properties": {}}});
                client
                    .request("elicitation/create", q)
                    .await
                    .map_err(|e| McpError::internal_error(e.message, None))?;
                Ok(CallToolResponse::Complete(
                    rmcp::model::CallToolResult::success(vec![]),
                ))
            });
            (questions, task)
        };
        for _ in 0..MAX_HELD_PER_PRINCIPAL {
            let (q, t) = ask();
            let r = held
                .start(Arc::from("greedy"), "t".into(), q, t)
                .await
                .unwrap();
            assert!(matches!(r, CallToolResponse::InputRequired(_)));
        }
        let (q, t) = ask();
        let e = held
            .start(Arc::from("greedy"), "t".into(), q, t)
            .await
            .unwrap_err();
        assert!(e.message.contains("of your calls already wait"), "{e:?}");
        // Someone else still may.
        let (q, t) = ask();
        assert!(held
            .start(Arc::from("other"), "t".into(), q, t)
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn a_call_without_questions_answers_directly() {
        let held = HeldCalls::default();
        let (_client, questions) = client("a", None);
        let task = tokio::spawn(async {
            Ok(CallToolResponse::Complete(
                rmcp::model::CallToolResult::success(vec![]),
            ))
        });
        let r = held
            .start(Arc::from("a"), "t".into(), questions, task)
            .await
            .unwrap();
        assert!(matches!(r, CallToolResponse::Complete(_)));
    }
}
