//! `n8n.workflows.report_verdict`: the verification loop's state lives in Toolshed's store, so
//! it survives a restart (a new plugin on the same database) and concurrent reports are all
//! counted.

use serde_json::{json, Value};
use toolshed_core::Plugin;
use toolshed_n8n::{plugin, N8nConfig};
use toolshed_store::Store;

use crate::server::call;

const TOOL: &str = "n8n.workflows.report_verdict";

fn with_store(store: &Store) -> Plugin {
    plugin(N8nConfig {
        state: Some(store.clone()),
        ..N8nConfig::new("https://n8n.example.com", "key")
    })
    .unwrap()
}

async fn report(p: &Plugin, item: &str, verdict: &str, sig: Option<&str>) -> Value {
    let mut args = json!({"workItemId": item, "verdict": verdict, "failedNodeName": "Fetch"});
    if let Some(s) = sig {
        args["failureSignature"] = json!(s);
    }
    call(p, TOOL, args).await.unwrap()
}

#[tokio::test]
async fn the_loop_escalates_and_its_state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let p = with_store(&store);
    let tool = p
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == TOOL)
        .unwrap();
    assert!(
        tool.def.annotations.draft,
        "bookkeeping only: the default policy lets it run"
    );

    let a = report(&p, "w1", "needs_patch", Some("401 from Fetch")).await;
    assert_eq!(a["next"], "patch");
    assert!(a["guidance"].as_str().unwrap().contains("Fetch"), "{a}");
    // A restart: a new plugin on the same database remembers the first report.
    drop(p);
    drop(store);
    let store = Store::open_dir(dir.path()).await.unwrap();
    let p = with_store(&store);
    let b = report(&p, "w1", "needs_patch", Some("401 from Fetch")).await;
    assert_eq!(
        b["next"], "rebuild",
        "the same failure after a patch escalates: {b}"
    );
    assert_eq!(b["workItem"]["reports"], 2);
    let c = report(&p, "w1", "needs_rebuild", Some("401 from Fetch")).await;
    assert_eq!(c["next"], "ask_user", "{c}");
    // Another work item is independent.
    let d = report(&p, "w2", "verified", None).await;
    assert_eq!(d["next"], "done");
    assert_eq!(d["workItem"]["phase"], "verified");
}

#[tokio::test]
async fn concurrent_reports_are_all_counted() {
    let store = Store::open("sqlite::memory:").await.unwrap();
    let p = std::sync::Arc::new(with_store(&store));
    let mut tasks = Vec::new();
    for i in 0..3 {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            report(&p, "w", "needs_patch", Some(&format!("sig-{i}"))).await
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let last = report(&p, "w", "verified", None).await;
    assert_eq!(last["workItem"]["reports"], 4, "{last}");
    assert_eq!(last["workItem"]["patches"], 3, "{last}");
}

#[tokio::test]
async fn bad_reports_say_what_is_wrong_and_store_nothing() {
    let store = Store::open("sqlite::memory:").await.unwrap();
    let p = with_store(&store);
    let err = call(&p, TOOL, json!({"workItemId": "w", "verdict": "maybe"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("one of: verified, needs_patch"),
        "{}",
        err.message
    );
    let err = call(
        &p,
        TOOL,
        json!({"workItemId": "x".repeat(200), "verdict": "verified"}),
    )
    .await
    .unwrap_err();
    assert!(err.message.contains("longer than 128"), "{}", err.message);
    assert_eq!(
        store.plugin_state("n8n", "work_item:w").await.unwrap(),
        None
    );
    // Without a store the tool is not offered.
    let bare = plugin(N8nConfig::new("https://n8n.example.com", "key")).unwrap();
    assert!(bare.tools.iter().all(|t| t.def.path.as_str() != TOOL));
}
