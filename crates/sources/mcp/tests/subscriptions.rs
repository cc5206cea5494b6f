//! Resource subscriptions across a reconnect: a subscription sessions hold is made again on the
//! upstream's new session, so its `notifications/resources/updated` keep coming (the
//! conformance fixture server tells a subscriber of `test://watched-resource` at once, then
//! every few seconds).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast;
use toolshed_core::notices::{Notice, Notices};
use toolshed_core::{EntryOp, Tool, ToolContext};
use toolshed_mcp_source::{Upstream, UpstreamConfig};

const FIXTURES: &str = env!("CARGO_BIN_EXE_toolshed-conformance-upstream");
const WATCHED: &str = "test://watched-resource";

/// The entry whose upstream declaration has `uri`.
fn resource<'a>(entries: &'a [Tool], uri: &str) -> &'a Tool {
    entries
        .iter()
        .find(|t| {
            t.def
                .native
                .as_ref()
                .and_then(|n| n.get("uri"))
                .and_then(Value::as_str)
                == Some(uri)
        })
        .unwrap_or_else(|| panic!("no entry for {uri}"))
}

/// Waits up to `limit` for an update of `uri`.
async fn updated(rx: &mut broadcast::Receiver<Notice>, uri: &str, limit: Duration) -> bool {
    let wait = async {
        loop {
            match rx.recv().await {
                Ok(Notice::ResourceUpdated(n)) if n.uri == uri => return true,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return false,
            }
        }
    };
    tokio::time::timeout(limit, wait).await.unwrap_or(false)
}

async fn reconnected(up: &Upstream, restarts: u64) {
    for _ in 0..200 {
        if up.restarts() >= restarts && up.is_connected() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the upstream did not reconnect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_is_renewed_after_the_upstream_reconnects() {
    let notices = Notices::default();
    let mut rx = notices.subscribe();
    let mut cfg = UpstreamConfig::stdio("fx", FIXTURES, Vec::<String>::new())
        .with_connect_timeout(Duration::from_secs(10))
        .with_call_timeout(Duration::from_secs(10));
    cfg.notices = Some(notices);
    let up = Upstream::connect(cfg).await.unwrap();
    let entries = up.entries().await.unwrap();
    let watched = resource(&entries, WATCHED);
    let ctx = ToolContext::new(Arc::from("tester"), watched.def.path.clone())
        .with_timeout(Duration::from_secs(10));
    let op = EntryOp::Subscribe {
        uri: WATCHED.into(),
    };
    watched.handler.entry_op(ctx, op).await.unwrap();
    assert!(updated(&mut rx, WATCHED, Duration::from_secs(5)).await);

    // The child dies; the supervisor starts a new one, which must hear of the subscription.
    common::kill9(up.pid().expect("a stdio child"));
    reconnected(&up, 1).await;
    while rx.try_recv().is_ok() {}
    assert!(
        updated(&mut rx, WATCHED, Duration::from_secs(5)).await,
        "no update of {WATCHED} after the reconnect: the subscription was not renewed"
    );
    up.shutdown().await;
}

const TEST_UPSTREAM: &str = env!("CARGO_BIN_EXE_toolshed-test-upstream");
const COUNTER: &str = "test://counter";

/// Calls `touch` on the test upstream: it counts `test://counter` up and tells its subscribers.
async fn touch(entries: &[Tool]) -> String {
    let t = entries
        .iter()
        .find(|t| t.def.path.as_str().ends_with(".touch"))
        .expect("the touch tool");
    let ctx = ToolContext::new(Arc::from("tester"), t.def.path.clone())
        .with_timeout(Duration::from_secs(10));
    t.handler
        .call(ctx, serde_json::json!({}))
        .await
        .unwrap()
        .to_string()
}

/// Touches the counter until the upstream says it told `n` subscribers (up to 5 s: the upstream
/// registers a listen stream just after acknowledging it); the last answer.
async fn touch_until(entries: &[Tool], n: usize) -> String {
    let want = format!("{n} subscribers");
    let mut said = String::new();
    for _ in 0..50 {
        said = touch(entries).await;
        if said.contains(&want) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    said
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_upstreams_resource_is_subscribed_through_subscriptions_listen() {
    let notices = Notices::default();
    let mut rx = notices.subscribe();
    let mut cfg = UpstreamConfig::stdio("m", TEST_UPSTREAM, ["--modern-only", "--resources"])
        .with_connect_timeout(Duration::from_secs(10))
        .with_call_timeout(Duration::from_secs(10));
    cfg.notices = Some(notices);
    let up = Upstream::connect(cfg).await.unwrap();
    assert_eq!(up.protocol_version().as_deref(), Some("2026-07-28"));
    let entries = up.entries().await.unwrap();
    let counter = resource(&entries, COUNTER);
    let op = |on: bool| {
        let uri = COUNTER.to_string();
        if on {
            EntryOp::Subscribe { uri }
        } else {
            EntryOp::Unsubscribe { uri }
        }
    };
    let ctx = || {
        ToolContext::new(Arc::from("tester"), counter.def.path.clone())
            .with_timeout(Duration::from_secs(10))
    };
    // Nobody subscribed: the upstream has no one to tell.
    assert!(touch(&entries).await.contains("0 subscribers"));
    counter.handler.entry_op(ctx(), op(true)).await.unwrap();
    // A second session's subscription shares the one stream.
    counter.handler.entry_op(ctx(), op(true)).await.unwrap();
    let said = touch_until(&entries, 1).await;
    assert!(said.contains("1 subscribers"), "{said}");
    assert!(updated(&mut rx, COUNTER, Duration::from_secs(5)).await);

    // After a reconnect the stream is opened again on the new session.
    common::kill9(up.pid().expect("a stdio child"));
    reconnected(&up, 1).await;
    let said = touch_until(&entries, 1).await;
    assert!(
        said.contains("1 subscribers"),
        "not listening again: {said}"
    );
    assert!(updated(&mut rx, COUNTER, Duration::from_secs(5)).await);

    // The first unsubscription keeps the stream, the last one cancels it.
    counter.handler.entry_op(ctx(), op(false)).await.unwrap();
    assert!(touch(&entries).await.contains("1 subscribers"));
    assert!(updated(&mut rx, COUNTER, Duration::from_secs(5)).await);
    counter.handler.entry_op(ctx(), op(false)).await.unwrap();
    let said = touch_until(&entries, 0).await;
    assert!(said.contains("0 subscribers"), "still listening: {said}");
    while rx.try_recv().is_ok() {}
    touch(&entries).await;
    assert!(!updated(&mut rx, COUNTER, Duration::from_millis(500)).await);
    up.shutdown().await;
}
