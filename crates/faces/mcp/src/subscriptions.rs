//! Resource subscriptions and argument completion on virtual servers.
//!
//! - `resources/subscribe {uri}` finds the resource the server exposes to the caller (a listed
//!   URI, else a template the URI fits), subscribes through the engine
//!   ([`Engine::entry_op`]: the upstream is asked once per URI, however many sessions
//!   subscribe) and remembers it for the session. The upstream's
//!   `notifications/resources/updated` for that URI then reach this session (see
//!   [`crate::logs::relay`]). When the session ends, its subscriptions end too.
//! - One session's subscribe and unsubscribe of one URI run one after the other (a lock per URI
//!   held across the engine's request), at most [`MAX_PER_SESSION`] URIs are held (those being
//!   subscribed count), and a subscribe that completes after its session ended undoes itself,
//!   so the upstream's count of sessions never keeps one that is gone.
//! - `completion/complete` finds the prompt (by the name the client sees) or the resource
//!   template (by its URI template) and asks its upstream through the engine.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{CompleteRequestParams, CompleteResult};
use rmcp::ErrorData as McpError;
use serde_json::Value;
use toolshed_core::{EntryKind, EntryOp, VirtualServer};
use toolshed_engine::{Caller, Engine, EngineError};

/// Most subscriptions of one session (those being made count too).
pub(crate) const MAX_PER_SESSION: usize = 256;

/// A session's subscriptions. Each URI has a lock held across its upstream request, so that
/// a subscribe and an unsubscribe of one URI happen one after the other; a subscribe that
/// completes after the session ended undoes itself ([`end_all`]).
pub(crate) type SessionSubscriptions = Arc<Registry>;

/// The subscriptions of one session: per URI, the entry's path and the caller who subscribed.
#[derive(Default)]
pub(crate) struct Registry(Mutex<State>);

#[derive(Default)]
struct State {
    /// Set once the session ended: nothing more is subscribed.
    ended: bool,
    uris: HashMap<String, Slot>,
}

/// One URI: subscribed (`active`), or being subscribed or unsubscribed under `lock`.
#[derive(Default)]
struct Slot {
    lock: Arc<tokio::sync::Mutex<()>>,
    active: Option<(String, Caller)>,
}

/// Why a subscription is not made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("this session already has {MAX_PER_SESSION} subscriptions: unsubscribe some first")]
    Full,
    #[error("the session ended")]
    Ended,
}

impl From<Refusal> for McpError {
    fn from(r: Refusal) -> Self {
        McpError::invalid_params(r.to_string(), None)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Registry {
    /// The lock of `uri`, its slot taken (counted against [`MAX_PER_SESSION`]) when new.
    fn reserve(&self, uri: &str) -> Result<Arc<tokio::sync::Mutex<()>>, Refusal> {
        let mut st = lock(&self.0);
        if st.ended {
            return Err(Refusal::Ended);
        }
        if !st.uris.contains_key(uri) && st.uris.len() >= MAX_PER_SESSION {
            return Err(Refusal::Full);
        }
        Ok(st.uris.entry(uri.to_string()).or_default().lock.clone())
    }

    /// The lock of `uri` when the session has a slot for it.
    fn lock_of(&self, uri: &str) -> Option<Arc<tokio::sync::Mutex<()>>> {
        lock(&self.0).uris.get(uri).map(|s| s.lock.clone())
    }

    fn is_active(&self, uri: &str) -> bool {
        lock(&self.0)
            .uris
            .get(uri)
            .is_some_and(|s| s.active.is_some())
    }

    /// Records the subscription made; refused once the session ended (the caller undoes it).
    fn activate(&self, uri: &str, path: String, caller: Caller) -> Result<(), Refusal> {
        let mut st = lock(&self.0);
        if st.ended {
            return Err(Refusal::Ended);
        }
        st.uris.entry(uri.to_string()).or_default().active = Some((path, caller));
        Ok(())
    }

    /// Takes the subscription of `uri` out of the session.
    fn take(&self, uri: &str) -> Option<(String, Caller)> {
        lock(&self.0)
            .uris
            .get_mut(uri)
            .and_then(|s| s.active.take())
    }

    /// Frees `uri`'s slot when it holds no subscription and no request waits for it (`held`
    /// is the caller's own handle on its lock).
    fn release(&self, uri: &str, held: &Arc<tokio::sync::Mutex<()>>) {
        let mut st = lock(&self.0);
        let unused = st.uris.get(uri).is_some_and(|s| {
            s.active.is_none() && Arc::ptr_eq(&s.lock, held) && Arc::strong_count(held) == 2
        });
        if unused {
            st.uris.remove(uri);
        }
    }

    /// Ends the session: nothing more is subscribed; the subscriptions made so far, to end.
    fn end(&self) -> Vec<(String, String, Caller)> {
        let mut st = lock(&self.0);
        st.ended = true;
        st.uris
            .drain()
            .filter_map(|(uri, s)| s.active.map(|(path, caller)| (uri, path, caller)))
            .collect()
    }

    /// How many URIs the session holds (subscribed or being changed).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.0).uris.len()
    }
}

/// Whether the session subscribed to `uri` of `source`.
pub(crate) fn wants(subs: &SessionSubscriptions, source: &str, uri: &str) -> bool {
    let st = lock(&subs.0);
    st.uris
        .get(uri)
        .and_then(|s| s.active.as_ref())
        .is_some_and(|(path, caller)| path.split('.').next() == Some(source) && caller.allows(path))
}

fn entry_error(e: EngineError) -> McpError {
    match e {
        EngineError::NotFound { .. } => McpError::resource_not_found(e.to_string(), None),
        EngineError::Tool { ref error, .. }
            if error.kind == toolshed_core::ToolErrorKind::InvalidInput =>
        {
            McpError::invalid_params(e.to_string(), None)
        }
        other => McpError::internal_error(other.to_string(), None),
    }
}

/// `resources/subscribe`.
pub(crate) async fn subscribe(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    subs: &SessionSubscriptions,
    uri: &str,
) -> Result<(), McpError> {
    if uri.len() > toolshed_core::notices::MAX_URI_BYTES {
        return Err(McpError::invalid_params(
            format!(
                "the URI is {} bytes; Toolshed relays updates of URIs up to {} bytes",
                uri.len(),
                toolshed_core::notices::MAX_URI_BYTES
            ),
            None,
        ));
    }
    let held = subs.reserve(uri)?;
    let outcome = {
        let _one_at_a_time = held.lock().await;
        subscribe_held(engine, caller, server, subs, uri).await
    };
    subs.release(uri, &held);
    outcome
}

/// Subscribes `uri`, its lock held: nothing to do when subscribed already; a subscription that
/// completes after the session ended is undone.
async fn subscribe_held(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    subs: &SessionSubscriptions,
    uri: &str,
) -> Result<(), McpError> {
    if subs.is_active(uri) {
        return Ok(());
    }
    let path = crate::virtual_server::resource_path(engine, caller, server, uri)?;
    let op = EntryOp::Subscribe {
        uri: uri.to_string(),
    };
    engine
        .entry_op(caller, &path, op)
        .await
        .map_err(entry_error)?;
    if let Err(refused) = subs.activate(uri, path.clone(), caller.clone()) {
        end_one(engine, uri.to_string(), &path, caller).await;
        return Err(refused.into());
    }
    Ok(())
}

/// `resources/unsubscribe`: a URI the session did not subscribe to is not an error.
pub(crate) async fn unsubscribe(
    engine: &Engine,
    subs: &SessionSubscriptions,
    uri: &str,
) -> Result<(), McpError> {
    let Some(held) = subs.lock_of(uri) else {
        return Ok(());
    };
    let outcome = {
        let _one_at_a_time = held.lock().await;
        match subs.take(uri) {
            Some((path, caller)) => {
                let op = EntryOp::Unsubscribe {
                    uri: uri.to_string(),
                };
                engine
                    .entry_op(&caller, &path, op)
                    .await
                    .map(|_| ())
                    .map_err(entry_error)
            }
            None => Ok(()),
        }
    };
    subs.release(uri, &held);
    outcome
}

/// Ends every subscription of a session that ended (all at once). A subscribe still under way
/// finds the session ended when it completes, and undoes itself.
pub(crate) async fn end_all(engine: &Engine, subs: &SessionSubscriptions) {
    let ending = subs
        .end()
        .into_iter()
        .map(|(uri, path, caller)| async move { end_one(engine, uri, &path, &caller).await });
    futures::future::join_all(ending).await;
}

/// Unsubscribes one subscription of a session that ended.
async fn end_one(engine: &Engine, uri: String, path: &str, caller: &Caller) {
    if let Err(e) = engine
        .entry_op(caller, path, EntryOp::Unsubscribe { uri })
        .await
    {
        tracing::debug!("ending a subscription of a closed session: {e}");
    }
}

/// `completion/complete` for a prompt or resource template the server exposes to the caller;
/// a reference to anything else has no suggestions.
pub(crate) async fn complete(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    request: CompleteRequestParams,
) -> Result<CompleteResult, McpError> {
    let reference = &request.r#ref;
    let (path, named) = if let Some(name) = reference.as_prompt_name() {
        let path =
            crate::virtual_server::entry_named(engine, caller, server, EntryKind::Prompt, name);
        (path, name)
    } else if let Some(uri) = reference.as_resource_uri() {
        (
            crate::virtual_server::template_path(engine, caller, server, uri),
            uri,
        )
    } else {
        (None, "")
    };
    let Some(path) = path else {
        return Err(McpError::invalid_params(
            format!(
                "no {} '{}' here to complete arguments of",
                reference.reference_type(),
                crate::truncate(named, 200)
            ),
            None,
        ));
    };
    let op = EntryOp::Complete {
        argument: serde_json::to_value(&request.argument).unwrap_or(Value::Null),
        context: request
            .context
            .as_ref()
            .and_then(|c| serde_json::to_value(c).ok()),
    };
    let answer = engine
        .entry_op(caller, &path, op)
        .await
        .map_err(entry_error)?;
    serde_json::from_value(crate::virtual_server::mark_complete(answer)).map_err(|e| {
        McpError::internal_error(format!("the upstream's completion is malformed: {e}"), None)
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::time::Duration;

    use serde_json::json;
    use toolshed_core::{
        Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolContext,
        ToolDef, ToolError, ToolHandler, ToolPath,
    };
    use toolshed_engine::{EngineConfig, Face};

    use super::*;

    /// An upstream resource template whose subscriptions take `delay` each; `net` counts
    /// subscriptions minus unsubscriptions, as the upstream's count would.
    struct Counting {
        delay: Duration,
        net: AtomicI64,
    }

    #[async_trait::async_trait]
    impl ToolHandler for Counting {
        async fn call(&self, _: ToolContext, _: Value) -> Result<Value, ToolError> {
            Ok(json!({"contents": []}))
        }
        async fn entry_op(&self, _: ToolContext, op: EntryOp) -> Result<Value, ToolError> {
            tokio::time::sleep(self.delay).await;
            match op {
                EntryOp::Subscribe { .. } => self.net.fetch_add(1, Ordering::SeqCst),
                EntryOp::Unsubscribe { .. } => self.net.fetch_sub(1, Ordering::SeqCst),
                EntryOp::Complete { .. } => 0,
            };
            Ok(json!({}))
        }
    }

    struct Setup {
        engine: Engine,
        caller: Caller,
        server: VirtualServer,
        upstream: Arc<Counting>,
        subs: SessionSubscriptions,
    }

    impl Setup {
        fn net(&self) -> i64 {
            self.upstream.net.load(Ordering::SeqCst)
        }

        async fn subscribe(&self, uri: &str) -> Result<(), McpError> {
            subscribe(&self.engine, &self.caller, &self.server, &self.subs, uri).await
        }
    }

    async fn setup(delay: Duration) -> Arc<Setup> {
        setup_with(delay, EngineConfig::default()).await
    }

    fn role(deny: &[&str]) -> Role {
        Role {
            id: "all".into(),
            patterns: vec!["up.**".into()],
            deny: deny.iter().map(|d| d.to_string()).collect(),
            ..Role::default()
        }
    }

    fn me() -> Principal {
        Principal {
            id: "me".into(),
            roles: vec!["all".into()],
        }
    }

    async fn setup_with(delay: Duration, config: EngineConfig) -> Arc<Setup> {
        let upstream = Arc::new(Counting {
            delay,
            net: AtomicI64::new(0),
        });
        let mut def = ToolDef::new(ToolPath::parse("up.r").unwrap(), "R", "Notes.")
            .with_input(json!({"type": "object"}))
            .with_annotations(Annotations::READ_ONLY);
        def.kind = EntryKind::Resource;
        def.native = Some(json!({"uriTemplate": "test://r/{id}", "name": "r"}));
        let mut b = CatalogBuilder::new();
        b.add_tool(Tool::new(def, upstream.clone()));
        let engine = Engine::new(
            Arc::new(SharedCatalog::new(b.build().unwrap())),
            Policy::new(vec![role(&[])], vec![me()]).unwrap(),
            toolshed_store::Store::open("sqlite::memory:")
                .await
                .unwrap(),
            config,
        );
        let server = VirtualServer::new(
            serde_json::from_value(json!({"name": "up", "resources": ["up.**"]})).unwrap(),
        )
        .unwrap();
        Arc::new(Setup {
            caller: engine.caller("me", Face::Mcp),
            engine,
            server,
            upstream,
            subs: SessionSubscriptions::default(),
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_subscribe_that_completes_after_its_session_ended_undoes_itself() {
        let s = setup(Duration::from_millis(200)).await;
        let subscribing = tokio::spawn({
            let s = s.clone();
            async move { s.subscribe("test://r/1").await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        end_all(&s.engine, &s.subs).await;
        let refused = subscribing.await.unwrap().unwrap_err();
        assert!(refused.message.contains("session ended"), "{refused:?}");
        assert_eq!(s.net(), 0, "the ended session still counts upstream");
        assert!(!wants(&s.subs, "up", "test://r/1"));
        // Nothing more is subscribed on the ended session.
        assert!(s.subscribe("test://r/2").await.is_err());
        assert_eq!(s.net(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unsubscribe_racing_its_subscribe_waits_for_it_and_undoes_it() {
        let s = setup(Duration::from_millis(150)).await;
        let subscribing = tokio::spawn({
            let s = s.clone();
            async move { s.subscribe("test://r/1").await }
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        unsubscribe(&s.engine, &s.subs, "test://r/1").await.unwrap();
        subscribing.await.unwrap().unwrap();
        assert_eq!(
            s.net(),
            0,
            "subscribed upstream after the client unsubscribed"
        );
        assert!(!wants(&s.subs, "up", "test://r/1"));
        assert_eq!(s.subs.len(), 0, "no slot is left behind");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_same_uri_subscribed_twice_at_once_counts_once() {
        let s = setup(Duration::from_millis(100)).await;
        let twice: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                tokio::spawn(async move { s.subscribe("test://r/1").await })
            })
            .collect();
        for t in twice {
            t.await.unwrap().unwrap();
        }
        assert_eq!(s.net(), 1);
        end_all(&s.engine, &s.subs).await;
        assert_eq!(s.net(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn subscribes_under_way_count_against_the_cap() {
        let s = setup(Duration::from_millis(100)).await;
        let all: Vec<_> = (0..MAX_PER_SESSION + 20)
            .map(|i| {
                let s = s.clone();
                tokio::spawn(async move { s.subscribe(&format!("test://r/{i}")).await })
            })
            .collect();
        let mut made = 0;
        for t in all {
            made += usize::from(t.await.unwrap().is_ok());
        }
        assert_eq!(made, MAX_PER_SESSION);
        assert_eq!(s.net(), MAX_PER_SESSION as i64);
        end_all(&s.engine, &s.subs).await;
        assert_eq!(s.net(), 0);
    }

    /// The outcomes of the caller's audited unsubscribes, oldest first.
    async fn audited_unsubscribes(s: &Setup) -> Vec<String> {
        s.engine.flush_audit().await;
        let mut out: Vec<_> = s
            .engine
            .audit_of(&s.caller, 100)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.args.contains("resources/unsubscribe"))
            .map(|e| e.outcome)
            .collect();
        out.reverse();
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unsubscribes_are_not_refused_by_the_rate_limit_and_are_audited() {
        let mut config = EngineConfig::default();
        config.rate_limits.calls_per_minute = 2;
        let s = setup_with(Duration::ZERO, config).await;
        s.subscribe("test://r/1").await.unwrap();
        s.subscribe("test://r/2").await.unwrap();
        let limited = s.subscribe("test://r/3").await.unwrap_err();
        assert!(limited.message.contains("rate"), "{limited:?}");
        assert_eq!(s.net(), 2);
        // The principal is out of calls, yet what it holds is released.
        unsubscribe(&s.engine, &s.subs, "test://r/1").await.unwrap();
        assert_eq!(s.net(), 1);
        end_all(&s.engine, &s.subs).await;
        assert_eq!(s.net(), 0, "the ended session still counts upstream");
        assert_eq!(audited_unsubscribes(&s).await, ["ok", "ok"]);
        // Subscribing stays limited.
        let s2 = SessionSubscriptions::default();
        let again = subscribe(&s.engine, &s.caller, &s.server, &s2, "test://r/4").await;
        assert!(again.is_err());
        assert_eq!(s.net(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unsubscribes_reach_the_upstream_after_the_roles_changed() {
        let s = setup(Duration::ZERO).await;
        s.subscribe("test://r/1").await.unwrap();
        s.subscribe("test://r/2").await.unwrap();
        assert_eq!(s.net(), 2);
        // The role now denies the resource, and then no longer sees it at all.
        s.engine
            .set_policy(Policy::new(vec![role(&["up.**"])], vec![me()]).unwrap());
        let now = s.engine.caller("me", Face::Mcp);
        let subs = SessionSubscriptions::default();
        let denied = subscribe(&s.engine, &now, &s.server, &subs, "test://r/3").await;
        assert!(denied.is_err(), "subscribing must follow the rules");
        let op = EntryOp::Unsubscribe {
            uri: "test://r/1".into(),
        };
        s.engine.entry_op(&now, "up.r", op).await.unwrap();
        assert_eq!(s.net(), 1);
        let mut gone = role(&[]);
        gone.patterns = vec!["elsewhere.**".into()];
        s.engine
            .set_policy(Policy::new(vec![gone], vec![me()]).unwrap());
        let now = s.engine.caller("me", Face::Mcp);
        let op = EntryOp::Unsubscribe {
            uri: "test://r/2".into(),
        };
        s.engine.entry_op(&now, "up.r", op).await.unwrap();
        assert_eq!(s.net(), 0);
        assert_eq!(audited_unsubscribes(&s).await, ["ok", "ok"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unsubscribe_releases_only_what_the_same_principal_subscribed() {
        let s = setup(Duration::ZERO).await;
        s.engine.set_policy(
            Policy::new(
                vec![role(&[])],
                vec![
                    me(),
                    Principal {
                        id: "other".into(),
                        roles: vec!["all".into()],
                    },
                ],
            )
            .unwrap(),
        );
        s.subscribe("test://r/1").await.unwrap();
        assert_eq!(s.net(), 1);
        let unsubscribe = |uri: &str| EntryOp::Unsubscribe { uri: uri.into() };
        // Another principal cannot release it, nor can anyone release what nobody subscribed.
        let other = s.engine.caller("other", Face::Mcp);
        let err = s
            .engine
            .entry_op(&other, "up.r", unsubscribe("test://r/1"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "not_found", "{err}");
        let err = s
            .engine
            .entry_op(&s.caller, "up.r", unsubscribe("test://r/9"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "not_found", "{err}");
        assert_eq!(s.net(), 1, "someone else's subscription was released");
        // Its own principal releases it once.
        s.engine
            .entry_op(&s.caller, "up.r", unsubscribe("test://r/1"))
            .await
            .unwrap();
        assert_eq!(s.net(), 0);
        assert!(s
            .engine
            .entry_op(&s.caller, "up.r", unsubscribe("test://r/1"))
            .await
            .is_err());
        assert_eq!(s.net(), 0);
    }
}
