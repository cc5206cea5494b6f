//! Deterministic replay: a run suspends on a destructive call, and a second run whose host
//! answers earlier calls from its journal resumes it with identical script behaviour.

use crate::common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{det, quick_limits, JournalHandle, JournalHost};
use serde_json::json;
use toolshed_sandbox::{run, Status};

const SCRIPT: &str = r#"
const r = Math.random();
const d = Date.now();
const [a, b] = await Promise.all([tools.data.read({id: 1}), tools.data.read({id: 2})]);
console.log("before", r, d, a.n, b.n);
const del = await tools.danger.delete({id: a.n});
const c = await tools.data.read({id: 3});
return {r, d, a: a.n, b: b.n, del: del.n, c: c.n, r2: Math.random()};
"#;

#[tokio::test]
async fn suspended_runs_replay_identically_from_the_journal() {
    let journal = JournalHost::new();

    // Run 1: the destructive call (seq 2) is suspended.
    let first = run(
        SCRIPT,
        Arc::new(JournalHandle(journal.clone())),
        &quick_limits(),
        det(),
    )
    .await;
    assert_eq!(first.status, Status::Suspended { seq: 2 });
    assert_eq!(first.calls, 3);
    {
        let executed = journal.executed.lock().unwrap();
        let mut seqs: Vec<u32> = executed.iter().map(|(s, _)| *s).collect();
        seqs.sort();
        assert_eq!(seqs, [0, 1]);
    }
    assert_eq!(first.logs.len(), 1);

    // Run 2: approved; earlier calls come from the journal, the rest execute.
    journal.approved.store(true, Ordering::SeqCst);
    let second = run(
        SCRIPT,
        Arc::new(JournalHandle(journal.clone())),
        &quick_limits(),
        det(),
    )
    .await;
    let Status::Completed(value) = &second.status else {
        panic!("expected Completed, got {:?}", second.status);
    };
    assert_eq!(value["a"], json!(0));
    assert_eq!(value["b"], json!(10));
    assert_eq!(value["del"], json!(20));
    assert_eq!(value["c"], json!(30));
    // Same console output up to the suspension point: same random and date values.
    assert_eq!(second.logs[0], first.logs[0]);
    let logged = format!(
        "before {} {} 0 10",
        value["r"].as_f64().unwrap(),
        value["d"].as_f64().unwrap()
    );
    assert_eq!(first.logs[0].message, logged);

    // Every call executed exactly once across both runs.
    let executed = journal.executed.lock().unwrap().clone();
    let mut seqs: Vec<u32> = executed.iter().map(|(s, _)| *s).collect();
    seqs.sort();
    assert_eq!(seqs, [0, 1, 2, 3]);
    assert!(executed.contains(&(2, "danger.delete".to_owned())));

    // Run 3: a pure replay from the journal yields the identical outcome.
    let third = run(
        SCRIPT,
        Arc::new(JournalHandle(journal.clone())),
        &quick_limits(),
        det(),
    )
    .await;
    assert_eq!(third.status, second.status);
    assert_eq!(third.logs, second.logs);
    assert_eq!(journal.executed.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn the_lowest_suspended_call_is_reported_after_earlier_calls_finish() {
    let journal = JournalHost::new();
    let src = "const p = [tools.data.read({}), tools.danger.one({}), tools.danger.two({})];\n\
               await Promise.all(p);\nreturn 'done';";
    let o = run(
        src,
        Arc::new(JournalHandle(journal.clone())),
        &quick_limits(),
        det(),
    )
    .await;
    assert_eq!(o.status, Status::Suspended { seq: 1 });
    let executed = journal.executed.lock().unwrap();
    assert_eq!(executed.as_slice(), [(0, "data.read".to_owned())]);
}
