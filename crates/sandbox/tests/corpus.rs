//! The hostile corpus: every built-in method of `Array.prototype`, `%TypedArray%.prototype`,
//! `String.prototype`, `RegExp.prototype`, `JSON` and `Object`, listed at test time by the
//! interpreter itself, called on huge array-likes, huge arrays and huge strings, plus loops the
//! corpus does not name (big-integer powers, giant splits, a catastrophic regular expression).
//! In worker processes each run ends within its limits plus a margin, and afterwards no worker
//! uses CPU.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_children_idle, children, run_in, worker_sandbox, TestHost};
use futures::stream::{self, StreamExt};
use serde_json::Value;
use toolshed_sandbox::{Limits, RunOutcome, Sandbox, ScriptErrorKind, Status};

/// Workers running cases at once.
const PARALLEL: usize = 12;
/// Time allowed past the wall clock: the kill margin, killing, reaping, scheduling on 2 cores.
const MARGIN: Duration = Duration::from_millis(1000);

fn limits() -> Limits {
    Limits {
        wall_clock: Duration::from_secs(1),
        cpu_time: Duration::from_millis(500),
        memory_bytes: 32 * 1024 * 1024,
        ..Limits::default()
    }
}

/// Lists the methods (names and well-known symbols) of each family, from the interpreter.
const DISCOVER: &str = r#"
const methods = (o) => Reflect.ownKeys(o)
  .filter((k) => k !== 'constructor')
  .filter((k) => typeof Object.getOwnPropertyDescriptor(o, k).value === 'function')
  .map((k) => typeof k === 'symbol' ? '@@' + k.description : k);
return {
  'Array.prototype': methods(Array.prototype),
  'Object.getPrototypeOf(Uint8Array.prototype)': methods(Object.getPrototypeOf(Uint8Array.prototype)),
  'String.prototype': methods(String.prototype),
  'RegExp.prototype': methods(RegExp.prototype),
  'JSON': methods(JSON),
  'Object': methods(Object),
};
"#;

const ARRAY_LIKE: &str = "({length: 2**53 - 1})";
const HUGE_ARRAY: &str = "new Array(2**32 - 1)";
const HUGE_STRING: &str = "'x'.repeat(2**24)";
const HUGE_TYPED: &str = "new Uint8Array(2**24)";

/// One script per (family, method, target).
fn cases(families: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for (holder, names) in families {
        let is_static = holder == "JSON" || holder == "Object";
        let mut targets = vec![ARRAY_LIKE, HUGE_ARRAY, HUGE_STRING];
        if holder.contains("Uint8Array") {
            targets.push(HUGE_TYPED);
        }
        for name in names
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let key = match name.strip_prefix("@@Symbol.") {
                Some(sym) => format!("Symbol.{sym}"),
                None => format!("{name:?}"),
            };
            for target in &targets {
                let call = if is_static {
                    format!("{holder}[{key}](target, f, f)")
                } else {
                    format!("({holder})[{key}].call(target, f, f)")
                };
                out.push(format!(
                    "const f = function () {{ return 0; }};\nconst target = {target};\nconst r = {call};\nreturn typeof r;"
                ));
            }
        }
    }
    out
}

/// Loops no method list names.
const UNNAMED: &[&str] = &[
    "return typeof (10n ** (10n ** 7n));",
    "return 'x'.repeat(2**28).split('').length;",
    "return /(a+)+$/.test('a'.repeat(40) + '!');",
    "return 'x'.repeat(2**20).split('').join('').split('').sort().length;",
    "let s = 'ab'; for (;;) s = s.replace(/a/g, 'aa') + s;",
];

async fn run_case(sandbox: Arc<Sandbox>, src: String) -> (String, RunOutcome) {
    let o = run_in(&sandbox, &src, Arc::new(TestHost::default()), &limits()).await;
    (src, o)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_builtin_on_huge_inputs_ends_within_its_limits() {
    let sandbox = Arc::new(worker_sandbox(PARALLEL, 10_000));
    let found = run_in(&sandbox, DISCOVER, Arc::new(TestHost::default()), &limits()).await;
    let Status::Completed(Value::Object(families)) = found.status else {
        panic!("discovery failed: {:?}", found.status)
    };
    let array = families["Array.prototype"].as_array().unwrap();
    assert!(
        array.iter().any(|n| n == "reverse") && array.len() > 25,
        "{array:?}"
    );
    let mut all = cases(&families);
    assert!(all.len() > 300, "{} cases", all.len());
    all.extend(UNNAMED.iter().map(|s| s.to_string()));
    let total = all.len();
    let t = Instant::now();
    let results: Vec<(String, RunOutcome)> = stream::iter(all)
        .map(|src| tokio::spawn(run_case(sandbox.clone(), src)))
        .buffer_unordered(PARALLEL * 2)
        .map(|r| r.expect("case task"))
        .collect()
        .await;
    let took = t.elapsed();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let lim = limits();
    for (src, o) in &results {
        let label = match &o.status {
            Status::Completed(_) => "completed".to_owned(),
            Status::Failed(e) => {
                assert!(
                    matches!(
                        e.kind,
                        ScriptErrorKind::Thrown
                            | ScriptErrorKind::Timeout
                            | ScriptErrorKind::CpuLimit
                            | ScriptErrorKind::MemoryLimit
                            | ScriptErrorKind::StackOverflow
                            | ScriptErrorKind::InvalidResult
                    ),
                    "{src}: {e:?}"
                );
                format!("{:?}", e.kind)
            }
            Status::Suspended { .. } => panic!("{src}: suspended without tool calls"),
        };
        *kinds.entry(label).or_default() += 1;
        assert!(
            o.elapsed < lim.wall_clock + MARGIN,
            "{src}: ran {:?}, past its {:?} limit",
            o.elapsed,
            lim.wall_clock
        );
    }
    println!("{total} cases in {took:?}: {kinds:?}");
    assert!(
        kinds.get("Timeout").copied().unwrap_or(0) + kinds.get("CpuLimit").copied().unwrap_or(0)
            > 0
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
    // Nothing keeps running: every child is idle (other tests' workers included), and this
    // pool holds no more workers than its slots, each of them alive.
    assert_children_idle(Duration::from_millis(300), Duration::from_secs(5)).await;
    let pool = sandbox.idle_worker_pids();
    assert!(
        pool.len() <= PARALLEL,
        "{} workers for a pool of {PARALLEL}",
        pool.len()
    );
    let alive = children();
    for pid in pool {
        assert!(
            alive.iter().any(|(p, s, _)| *p == pid && *s != 'Z'),
            "worker {pid} is gone"
        );
    }
}
