//! The hostile script corpus through the real binary: `toolshed serve` runs every script in a
//! worker process (children of the server running `__sandbox-worker`); every built-in method
//! of the core families (listed by the interpreter at test time) on huge inputs, plus loops no
//! list names, ends within its limits plus a margin over HTTP, and afterwards no worker uses
//! CPU.

use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

use crate::support::Server;

const PARALLEL: usize = 8;

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

const TARGETS: &[&str] = &[
    "({length: 2**53 - 1})",
    "new Array(2**32 - 1)",
    "'x'.repeat(2**24)",
];

const UNNAMED: &[&str] = &[
    "return typeof (10n ** (10n ** 7n));",
    "return 'x'.repeat(2**28).split('').length;",
    "return /(a+)+$/.test('a'.repeat(40) + '!');",
];

/// Every method once, the targets taking turns.
fn cases(families: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for (holder, names) in families {
        let is_static = holder == "JSON" || holder == "Object";
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
            let target = TARGETS[out.len() % TARGETS.len()];
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
    out.extend(UNNAMED.iter().map(|s| s.to_string()));
    out
}

/// `(pid, state, cpu ticks, command line)` of the server's child processes.
fn children_of(parent: u32) -> Vec<(u32, char, u64, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if f.get(1).and_then(|s| s.parse::<u32>().ok()) != Some(parent) {
            continue;
        }
        let ticks = f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        out.push((pid, f[0].chars().next().unwrap_or('?'), ticks, cmdline));
    }
    out
}

async fn post_script(http: &reqwest::Client, url: &str, script: &str) -> (u16, Value, Duration) {
    let t = Instant::now();
    let r = http
        .post(url)
        .json(&json!({ "script": script }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap();
    (status, body, t.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_builtins_are_stopped_in_worker_processes_of_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("toolshed.toml");
    std::fs::write(
        &cfg,
        format!(
            "[limits]\nwall_clock_ms = 1000\ncpu_ms = 500\nmemory_mb = 32\n\
             max_concurrent_scripts = {PARALLEL}\nmax_queued_scripts = 1000\n"
        ),
    )
    .unwrap();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let pid = server.child.id();
    let url = server.url("/v1/scripts");
    let http = reqwest::Client::new();
    let (status, body, _) = post_script(&http, &url, DISCOVER).await;
    assert_eq!(status, 200, "{body}");
    let families = body["result"].as_object().unwrap().clone();
    let workers = children_of(pid);
    assert!(
        workers
            .iter()
            .any(|(_, _, _, cmd)| cmd.contains("__sandbox-worker")),
        "no worker processes: {workers:?}"
    );
    let all = cases(&families);
    assert!(all.len() > 150, "{} cases", all.len());
    let t = Instant::now();
    let results: Vec<(String, u16, Value, Duration)> = stream::iter(all)
        .map(|src| {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let (status, body, took) = post_script(&http, &url, &src).await;
                (src, status, body, took)
            }
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    let mut stopped = 0;
    for (src, status, body, took) in &results {
        match status {
            200 => assert_eq!(body["status"], "completed", "{src}: {body}"),
            422 => {
                let kind = body["error"]["kind"].as_str().unwrap_or_default();
                assert!(
                    [
                        "thrown",
                        "timeout",
                        "cpuLimit",
                        "memoryLimit",
                        "stackOverflow",
                        "invalidResult"
                    ]
                    .contains(&kind),
                    "{src}: {body}"
                );
                if kind == "timeout" || kind == "cpuLimit" {
                    stopped += 1;
                }
            }
            other => panic!("{src}: HTTP {other}: {body}"),
        }
        assert!(
            *took < Duration::from_millis(2500),
            "{src}: answered after {took:?}"
        );
    }
    println!(
        "{} cases in {:?}; {stopped} stopped at a limit",
        results.len(),
        t.elapsed()
    );
    assert!(stopped > 0);
    // Afterwards no worker keeps using CPU, and no more than the pool's are alive.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let before = children_of(pid);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = children_of(pid);
        let busy: Vec<_> = after
            .iter()
            .filter(|(p, s, ticks, _)| {
                *s == 'R' || before.iter().any(|(b, _, bt, _)| b == p && bt != ticks)
            })
            .collect();
        if busy.is_empty() {
            let live = after.iter().filter(|c| c.1 != 'Z').count();
            assert!(live <= PARALLEL, "{live} live workers: {after:?}");
            break;
        }
        assert!(Instant::now() < deadline, "workers still use CPU: {busy:?}");
    }
    // The server still answers normally.
    let (status, body, _) = post_script(&http, &url, "return 6 * 7;").await;
    assert_eq!((status, &body["result"]), (200, &json!(42)), "{body}");
}
