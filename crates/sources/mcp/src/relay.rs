//! Requests an upstream makes of its client during a call (`elicitation/create`,
//! `sampling/createMessage`), relayed to the client of the face that made the call
//! ([`ToolContext::client`]).
//!
//! MCP does not say which call a server's request belongs to, and every call of an upstream
//! shares one session. So each call registers itself while it is in flight ([`CallsInFlight`]).
//! A request that arrived on a call's own answer stream (the direct path, [`crate::direct`],
//! marks it [`OnStreamOf`]) goes to that call's client, whatever else is in flight. Any other
//! request goes to the client of the calls in flight when they all come from one client
//! (one session of a face, [`ClientChannel::client_id`]). When the one call in flight came from
//! a client that cannot take a form question (a client without elicitation, a script, the HTTP
//! API), the question becomes a stored `input` wait that any session may answer
//! ([`EngineAccess::ask`]), and the call waits for it, at most until shortly before its own
//! deadline ([`question_timeout`]), so that an unanswered question is what the caller hears of,
//! not a generic timeout. When the call ends first (its answer came, it timed out or was
//! cancelled), the question is dropped with it, which cancels the stored question
//! ([`Registered`] going away ends the wait). When calls of several clients are in
//! flight, or the request cannot wait for a person (sampling, a URL), the upstream gets an error
//! that says so, and the refusal is logged: a person's question never reaches another person's
//! client.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::ErrorCode;
use rmcp::ErrorData;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use toolshed_core::{ClientChannel, EngineAccess, ToolContext};

/// The calls of one upstream that are waiting for its answer.
#[derive(Default)]
pub(crate) struct CallsInFlight {
    next: AtomicU64,
    calls: Mutex<Vec<InFlight>>,
}

#[derive(Clone)]
struct InFlight {
    id: u64,
    client: Option<Arc<dyn ClientChannel>>,
    /// Where a question goes when the client cannot take it.
    engine: Option<Arc<dyn EngineAccess>>,
    /// When the call gives up waiting for the upstream.
    deadline: Instant,
    /// Closed when the call ends ([`Registered`] dropped).
    alive: watch::Receiver<()>,
    /// Requests of the upstream this call's client is answering now.
    asking: Arc<AtomicUsize>,
}

/// A registered call; it leaves the list when dropped, which also ends the waits of the
/// requests relayed for it ([`call_ended`]).
pub(crate) struct Registered {
    calls: Arc<CallsInFlight>,
    id: u64,
    _alive: watch::Sender<()>,
}

impl Registered {
    /// The call's number among the upstream's calls in flight (see [`OnStreamOf`]).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

/// In a request's context: the registered call ([`Registered::id`]) on whose answer stream
/// the request arrived, which is the call it belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OnStreamOf(pub(crate) u64);

impl Drop for Registered {
    fn drop(&mut self) {
        crate::upstream::lock(&self.calls.calls).retain(|c| c.id != self.id);
    }
}

/// Registers the call of `ctx`, which waits for the upstream until `deadline`, as in flight
/// until the guard is dropped.
pub(crate) fn enter(
    calls: &Arc<CallsInFlight>,
    ctx: &ToolContext,
    deadline: Instant,
) -> Registered {
    register(
        calls,
        ctx.client().cloned(),
        ctx.engine().cloned(),
        deadline,
    )
}

/// Registers a request of no relaying client (a read, a completion, a subscription) as in
/// flight, so that a request of the upstream meanwhile is not taken for another call's.
pub(crate) fn enter_opaque(calls: &Arc<CallsInFlight>) -> Registered {
    register(calls, None, None, Instant::now())
}

fn register(
    calls: &Arc<CallsInFlight>,
    client: Option<Arc<dyn ClientChannel>>,
    engine: Option<Arc<dyn EngineAccess>>,
    deadline: Instant,
) -> Registered {
    let id = calls.next.fetch_add(1, Ordering::Relaxed);
    let (alive, watching) = watch::channel(());
    crate::upstream::lock(&calls.calls).push(InFlight {
        id,
        client,
        engine,
        deadline,
        alive: watching,
        asking: Arc::default(),
    });
    Registered {
        calls: calls.clone(),
        id,
        _alive: alive,
    }
}

/// Resolves once the call watched by `alive` ended (its [`Registered`] was dropped).
async fn call_ended(mut alive: watch::Receiver<()>) {
    while alive.changed().await.is_ok() {}
}

/// Time left before a call's `deadline` that a question does not take: the upstream hears
/// that the question went unanswered and answers the call before the call itself times out.
pub(crate) const QUESTION_MARGIN: Duration = Duration::from_secs(1);

/// How long a question asked for a call with `deadline` may wait for its answer; `None` when
/// too little time is left to ask a person anything.
pub(crate) fn question_timeout(deadline: Instant) -> Option<Duration> {
    deadline
        .saturating_duration_since(Instant::now())
        .checked_sub(QUESTION_MARGIN)
        .filter(|left| !left.is_zero())
}

/// Puts a form question to the people of a call whose client cannot take it, as a stored
/// wait, until the call's `deadline` (less [`QUESTION_MARGIN`]); why there is no answer, as
/// text.
async fn ask_stored(
    engine: &dyn EngineAccess,
    params: &Value,
    deadline: Instant,
) -> Result<Value, String> {
    let Some(timeout) = question_timeout(deadline) else {
        return Err(format!(
            "the call has less than {}s left, too little to wait for a person's answer",
            QUESTION_MARGIN.as_secs()
        ));
    };
    let message = params["message"].as_str().unwrap_or("The upstream asks:");
    let schema = params.get("requestedSchema").cloned();
    engine
        .ask(message, schema, timeout)
        .await
        .map_err(|e| format!("the question was not answered: {}", e.message))
}

/// A server-to-client request: its MCP method and the capability the client must have.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked {
    pub(crate) method: &'static str,
    pub(crate) capability: &'static str,
}

/// The call a request belongs to: a call in flight when every call in flight came from one
/// client (one session, or one principal's stateless calls), or the only one. Among them, a
/// call whose client is answering a request of the upstream now is blocked on that answer, so
/// another of the same client's calls is preferred. Calls of two clients make any request
/// ambiguous: it is refused, whichever of them is answering.
fn route(calls: &CallsInFlight, asked: Asked, on: Option<OnStreamOf>) -> Result<InFlight, String> {
    let calls = crate::upstream::lock(&calls.calls);
    if let Some(OnStreamOf(id)) = on {
        return calls.iter().find(|c| c.id == id).cloned().ok_or_else(|| {
            format!(
                "{} arrived on the stream of a call that has ended",
                asked.method
            )
        });
    }
    let Some(first) = calls.first() else {
        return Err(format!(
            "{} arrived while no call was in flight; Toolshed relays it only during a tool call",
            asked.method
        ));
    };
    let one_client = match &first.client {
        Some(client) => calls.iter().all(|c| {
            c.client
                .as_ref()
                .is_some_and(|o| o.client_id() == client.client_id())
        }),
        None => calls.len() == 1,
    };
    if !one_client {
        return Err(format!(
            "{} calls of different clients (or reads of other sessions) are in flight, and MCP does not say which one {} belongs to",
            calls.len(),
            asked.method
        ));
    }
    let free = calls.iter().find(|c| c.asking.load(Ordering::Relaxed) == 0);
    Ok(free.unwrap_or(first).clone())
}

/// Counts one request a call's client is answering, until dropped.
struct Asking(Arc<AtomicUsize>);

impl Drop for Asking {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Relays one request of upstream `upstream` to the client of the call in flight, or puts a
/// form question to the call's people as a stored wait; the answer, or an error for the
/// upstream saying why there is none.
pub(crate) async fn relay(
    calls: &CallsInFlight,
    upstream: &str,
    asked: Asked,
    params: Value,
    on: Option<OnStreamOf>,
) -> Result<Value, ErrorData> {
    let refuse = |why: String| {
        tracing::warn!(upstream, method = asked.method, "not relayed: {why}");
        ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Toolshed did not relay {}: {why}", asked.method),
            None,
        )
    };
    let call = route(calls, asked, on).map_err(refuse)?;
    let already = call.asking.fetch_add(1, Ordering::Relaxed);
    let _asking = Asking(call.asking.clone());
    let stored = !call
        .client
        .as_ref()
        .is_some_and(|c| c.supports(asked.capability));
    if stored && already > 0 {
        return Err(refuse(
            "the call already waits for a person's answer to an earlier question".into(),
        ));
    }
    match &call.client {
        Some(client) if client.supports(asked.capability) => client
            .request(asked.method, params)
            .await
            .map_err(|e| {
                ErrorData::internal_error(format!("the client answered: {}", e.message), None)
            }),
        _ if asked.capability == "elicitation" && call.engine.is_some() => {
            let engine = call.engine.as_deref().expect("checked");
            // The call may end first: the question, dropped with this wait, is cancelled.
            tokio::select! {
                answer = ask_stored(engine, &params, call.deadline) => answer.map_err(refuse),
                () = call_ended(call.alive.clone()) => Err(refuse(
                    "the call that asked ended before the question was answered".into(),
                )),
            }
        }
        Some(_) => Err(refuse(format!(
            "the client did not declare the '{}' capability",
            asked.capability
        ))),
        None => Err(refuse(format!(
            "the call in flight came from a client Toolshed cannot relay {} to (a script, the HTTP API or the CLI)",
            asked.method
        ))),
    }
}

/// Puts one request straight to the client of `ctx`'s own call (an upstream's
/// `input_required` names its call, so no routing is needed), or a form question to the call's
/// people as a stored wait (until the call's `deadline`, see [`question_timeout`]) when the
/// client cannot take it; why not, as text.
pub(crate) async fn ask_client(
    ctx: &ToolContext,
    asked: Asked,
    params: Value,
    deadline: Instant,
) -> Result<Value, String> {
    match ctx.client() {
        Some(client) if client.supports(asked.capability) => client
            .request(asked.method, params)
            .await
            .map_err(|e| format!("the client answered: {}", e.message)),
        _ if asked.capability == "elicitation" && ctx.engine().is_some() => {
            let engine = ctx.engine().expect("checked");
            ask_stored(engine.as_ref(), &params, deadline).await
        }
        Some(_) => Err(format!(
            "the client did not declare the '{}' capability",
            asked.capability
        )),
        None => Err(format!(
            "the call came from a client Toolshed cannot relay {} to (a script, the HTTP API or the CLI)",
            asked.method
        )),
    }
}

/// A method name from an upstream, bounded for messages.
pub(crate) fn shown(method: &str) -> String {
    method.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolshed_core::{ToolError, ToolPath};

    struct Client(&'static str);

    #[async_trait::async_trait]
    impl ClientChannel for Client {
        fn client_id(&self) -> u64 {
            self.0.len() as u64
        }
        fn supports(&self, capability: &str) -> bool {
            capability == "elicitation"
        }
        async fn request(&self, method: &str, params: Value) -> Result<Value, ToolError> {
            Ok(serde_json::json!({"by": self.0, "method": method, "params": params}))
        }
    }

    const ELICIT: Asked = Asked {
        method: "elicitation/create",
        capability: "elicitation",
    };

    fn ctx(client: Option<Arc<dyn ClientChannel>>) -> ToolContext {
        ToolContext::new(Arc::from("p"), ToolPath::parse("up.t").unwrap()).with_client(client)
    }

    /// Registers a call that waits for the upstream for up to 30 seconds.
    fn enter(calls: &Arc<CallsInFlight>, ctx: &ToolContext) -> Registered {
        super::enter(calls, ctx, Instant::now() + Duration::from_secs(30))
    }

    /// An engine whose questions are never answered: it notes the time each may wait and
    /// whether the wait was dropped (the call that asked ended).
    #[derive(Default)]
    struct Unanswered {
        timeouts: Mutex<Vec<Duration>>,
        dropped: Arc<std::sync::atomic::AtomicBool>,
    }

    /// Sets its flag when dropped.
    struct Flag(Arc<std::sync::atomic::AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[async_trait::async_trait]
    impl EngineAccess for Unanswered {
        fn visible_paths(&self) -> Vec<String> {
            Vec::new()
        }
        async fn call(&self, _: &str, _: Value) -> Result<Value, ToolError> {
            Err(ToolError::internal("no calls here"))
        }
        async fn run_script(
            &self,
            _: &str,
            _: Value,
            _: toolshed_core::NestedRun,
        ) -> Result<Value, ToolError> {
            Err(ToolError::internal("no scripts here"))
        }
        async fn ask(
            &self,
            _: &str,
            _: Option<Value>,
            timeout: Duration,
        ) -> Result<Value, ToolError> {
            self.timeouts.lock().unwrap().push(timeout);
            let _flag = Flag(self.dropped.clone());
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn a_stored_question_ends_with_the_call_that_asked() {
        let calls = Arc::new(CallsInFlight::default());
        let engine = Arc::new(Unanswered::default());
        let script = ctx(None).with_engine(Some(engine.clone() as Arc<dyn EngineAccess>));
        let call = super::enter(&calls, &script, Instant::now() + Duration::from_secs(10));
        let asking = tokio::spawn({
            let calls = calls.clone();
            async move {
                relay(
                    &calls,
                    "up",
                    ELICIT,
                    serde_json::json!({"message": "Name?"}),
                    None,
                )
                .await
            }
        });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        // The question waits at most until shortly before the call's own deadline.
        let asked = engine.timeouts.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(
            asked[0] <= Duration::from_secs(9) && asked[0] > Duration::from_secs(8),
            "{asked:?}"
        );
        // The call ends (answered, timed out or cancelled): the question goes with it.
        drop(call);
        let e = tokio::time::timeout(Duration::from_secs(2), asking)
            .await
            .expect("the relayed question ends with its call")
            .unwrap()
            .unwrap_err();
        assert!(e.message.contains("the call that asked ended"), "{e:?}");
        assert!(
            engine.dropped.load(Ordering::SeqCst),
            "the stored question's wait was dropped"
        );
    }

    #[tokio::test]
    async fn a_call_too_close_to_its_deadline_asks_nobody() {
        let calls = Arc::new(CallsInFlight::default());
        let engine = Arc::new(Unanswered::default());
        let script = ctx(None).with_engine(Some(engine.clone() as Arc<dyn EngineAccess>));
        let _call = super::enter(&calls, &script, Instant::now() + Duration::from_millis(500));
        let e = relay(&calls, "up", ELICIT, Value::Null, None)
            .await
            .unwrap_err();
        assert!(e.message.contains("too little to wait"), "{e:?}");
        assert!(engine.timeouts.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_request_reaches_the_one_client_whose_calls_are_in_flight() {
        let calls = Arc::new(CallsInFlight::default());
        // Two calls of one session, each with a channel of its own.
        let _a = enter(&calls, &ctx(Some(Arc::new(Client("alice")))));
        let _b = enter(&calls, &ctx(Some(Arc::new(Client("alice")))));
        let v = relay(&calls, "up", ELICIT, serde_json::json!({"x": 1}), None)
            .await
            .unwrap();
        assert_eq!(v["by"], "alice");
        assert_eq!(v["params"]["x"], 1);
    }

    #[tokio::test]
    async fn a_request_on_a_calls_stream_goes_to_that_call_whatever_else_is_in_flight() {
        let calls = Arc::new(CallsInFlight::default());
        let _a = enter(&calls, &ctx(Some(Arc::new(Client("alice")))));
        let b = enter(&calls, &ctx(Some(Arc::new(Client("robert")))));
        let on_b = Some(OnStreamOf(b.id()));
        let v = relay(&calls, "up", ELICIT, Value::Null, on_b)
            .await
            .unwrap();
        assert_eq!(v["by"], "robert");
        drop(b);
        let e = relay(&calls, "up", ELICIT, Value::Null, on_b)
            .await
            .unwrap_err();
        assert!(e.message.contains("a call that has ended"), "{e:?}");
    }

    #[tokio::test]
    async fn a_request_is_refused_when_it_could_belong_to_another_client() {
        let calls = Arc::new(CallsInFlight::default());
        let none = relay(&calls, "up", ELICIT, Value::Null, None)
            .await
            .unwrap_err();
        assert!(none.message.contains("no call was in flight"), "{none:?}");
        let a = enter(&calls, &ctx(Some(Arc::new(Client("alice")))));
        let b = enter(&calls, &ctx(Some(Arc::new(Client("robert")))));
        let e = relay(&calls, "up", ELICIT, Value::Null, None)
            .await
            .unwrap_err();
        assert!(e.message.contains("2 calls of different clients"), "{e:?}");
        drop(a);
        // Robert's call alone is in flight now: the request is his.
        let v = relay(&calls, "up", ELICIT, Value::Null, None)
            .await
            .unwrap();
        assert_eq!(v["by"], "robert");
        drop(b);
        let _script = enter(&calls, &ctx(None));
        let e = relay(&calls, "up", ELICIT, Value::Null, None)
            .await
            .unwrap_err();
        assert!(e.message.contains("cannot relay"), "{e:?}");
    }

    /// A client that never answers.
    struct Silent;

    #[async_trait::async_trait]
    impl ClientChannel for Silent {
        fn client_id(&self) -> u64 {
            99
        }
        fn supports(&self, _: &str) -> bool {
            true
        }
        async fn request(&self, _: &str, _: Value) -> Result<Value, ToolError> {
            std::future::pending().await
        }
    }

    /// Another call of the client `Silent` belongs to (id 99), which answers.
    struct SameAsSilent;

    #[async_trait::async_trait]
    impl ClientChannel for SameAsSilent {
        fn client_id(&self) -> u64 {
            99
        }
        fn supports(&self, _: &str) -> bool {
            true
        }
        async fn request(&self, _: &str, _: Value) -> Result<Value, ToolError> {
            Ok(serde_json::json!({"by": "the free call"}))
        }
    }

    /// A call of `Silent` answering a request of the upstream (forever).
    async fn answering(calls: &Arc<CallsInFlight>) -> (Registered, tokio::task::JoinHandle<()>) {
        let held = enter(calls, &ctx(Some(Arc::new(Silent))));
        let task = {
            let calls = calls.clone();
            tokio::spawn(async move {
                let _ = relay(&calls, "up", ELICIT, Value::Null, None).await;
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        (held, task)
    }

    #[tokio::test]
    async fn a_call_waiting_for_its_clients_answer_leaves_the_next_request_to_its_other_call() {
        let calls = Arc::new(CallsInFlight::default());
        let (_held, task) = answering(&calls).await;
        let _other = enter(&calls, &ctx(Some(Arc::new(SameAsSilent))));
        let v = relay(&calls, "up", ELICIT, Value::Null, None)
            .await
            .unwrap();
        assert_eq!(v["by"], "the free call");
        task.abort();
    }

    #[tokio::test]
    async fn while_one_client_answers_another_clients_call_is_never_asked() {
        let calls = Arc::new(CallsInFlight::default());
        let (_held, task) = answering(&calls).await;
        let _bob = enter(&calls, &ctx(Some(Arc::new(Client("robert")))));
        let e = relay(&calls, "up", ELICIT, Value::Null, None)
            .await
            .unwrap_err();
        assert!(e.message.contains("different clients"), "{e:?}");
        // A read in flight (no client) makes a request just as ambiguous.
        task.abort();
        let calls = Arc::new(CallsInFlight::default());
        let _alice = enter(&calls, &ctx(Some(Arc::new(Client("alice")))));
        let _read = enter_opaque(&calls);
        let e = relay(&calls, "up", ELICIT, Value::Null, None)
            .await
            .unwrap_err();
        assert!(e.message.contains("different clients"), "{e:?}");
    }

    #[tokio::test]
    async fn a_client_without_the_capability_is_not_asked() {
        let calls = Arc::new(CallsInFlight::default());
        let _a = enter(&calls, &ctx(Some(Arc::new(Client("alice")))));
        let sampling = Asked {
            method: "sampling/createMessage",
            capability: "sampling",
        };
        let e = relay(&calls, "up", sampling, Value::Null, None)
            .await
            .unwrap_err();
        assert!(e.message.contains("'sampling' capability"), "{e:?}");
    }
}
