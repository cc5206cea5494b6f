//! Fuzzes the sandbox with scripts assembled from fragments: built-in calls on odd receivers,
//! tool calls, promises, errors, console output, and raw text.
//!
//! The input's first byte picks the mode: 0 runs the rest as raw source; otherwise each byte
//! picks a fragment (and the next one its argument), and every fragment runs in its own
//! `try`. Runs are in process with short limits; libFuzzer's `-timeout` is the watchdog for
//! built-ins that never yield to the interrupt handler (the server's worker processes kill
//! those; here they count as timeouts, not findings). A finding is a crash, a panic, or a
//! broken invariant: an internal error, a result over its limit, console output over its
//! limit, or more calls than allowed.

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use libfuzzer_sys::fuzz_target;
use toolshed_sandbox::{
    run, Determinism, Host, HostCall, HostError, HostReply, Limits, ScriptErrorKind, Status,
    CallTarget,
};

/// Echoes arguments; `fail.*` rejects; `stop.*` suspends.
struct Echo;

impl Host for Echo {
    fn call(&self, call: HostCall) -> BoxFuture<'static, HostReply> {
        let reply = match &call.target {
            CallTarget::Tool(p) if p.starts_with("fail.") => {
                HostReply::Err(HostError::new("boom", "it failed"))
            }
            CallTarget::Tool(p) if p.starts_with("stop.") => HostReply::Suspend,
            _ => HostReply::Ok(call.args),
        };
        futures::future::ready(reply).boxed()
    }
}

const RECEIVERS: &[&str] = &[
    "({length: 2**31})",
    "({length: -1})",
    "({length: 3, 0: 'a', 2: {}})",
    "[1, , 3]",
    "new Array(5)",
    "'h\\u00e9llo\\ud83d'",
    "new Uint8Array(16)",
    "new Float64Array([NaN, -0, Infinity])",
    "/a|b/gy",
    "Object.create(null)",
    "new Proxy({}, {get: () => 1})",
    "[[[[]]]]",
    "10n",
    "Symbol('s')",
    "new Map([[1, 2]])",
    "null",
];

const CALLS: &[&str] = &[
    "Array.prototype.sort.call(R, f)",
    "Array.prototype.splice.call(R, 1, 2, R)",
    "Array.prototype.flat.call(R, 3)",
    "Array.prototype.copyWithin.call(R, 1, 0)",
    "Array.prototype.join.call(R, R)",
    "Array.from(R)",
    "String.prototype.normalize.call(R, 'NFKD')",
    "String.prototype.replaceAll.call(R, /l/g, f)",
    "String.prototype.split.call(R, /(?:)/u)",
    "String.prototype.localeCompare.call(R, 'b')",
    "RegExp.prototype[Symbol.replace].call(/(a)|b/g, String(R), '$1$<x>$&')",
    "RegExp.prototype[Symbol.split].call(/x*/, String(R))",
    "JSON.stringify(R, f, 2)",
    "JSON.parse(JSON.stringify(R) || 'null', f)",
    "Object.defineProperty(R, 'length', {value: 1})",
    "Object.fromEntries(Object.entries(R))",
    "Object.getOwnPropertyDescriptors(R)",
    "structuredClone === undefined ? 0 : 1",
    "new Uint8Array(R).subarray(1).reverse()",
    "Reflect.ownKeys(R)",
    "[...String(R)].reverse().join('')",
    "Promise.all([R, tools.a.b({x: R})])",
    "tools.fail.now({})",
    "tools.search({query: String(R)})",
    "Promise.race([tools.a.b({}), R])",
    "console.log(R, 'x'.repeat(100))",
    "eval(String(R))",
    "new Function('a', 'return a')(R)",
    "(async () => { await null; throw R; })()",
    "BigInt.asUintN(64, 2n ** 70n) * (R instanceof Object ? 1n : 2n)",
    "Date.prototype.toISOString.call(new Date(R))",
    "Math.max.apply(null, [R, 1])",
    "tools.stop.here({})",
];

/// Builds a script from fragment choices.
fn assemble(data: &[u8]) -> String {
    let mut src = String::from("const f = (a, b) => (typeof a === 'number' ? b : 0);\nconst out = [];\n");
    for pair in data.chunks(2) {
        let call = CALLS[pair[0] as usize % CALLS.len()];
        let recv = RECEIVERS[*pair.get(1).unwrap_or(&0) as usize % RECEIVERS.len()];
        let stmt = call.replace('R', recv);
        src.push_str(&format!("try {{ out.push(await {stmt}); }} catch (e) {{ out.push(String(e)); }}\n"));
    }
    src.push_str("return out.map((x) => typeof x);\n");
    src
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let source = if mode == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        assemble(&rest[..rest.len().min(64)])
    };
    let limits = Limits {
        wall_clock: Duration::from_millis(500),
        cpu_time: Duration::from_millis(300),
        memory_bytes: 16 << 20,
        max_tool_calls: 20,
        max_log_bytes: 4096,
        max_result_bytes: 64 << 10,
        ..Limits::default()
    };
    let det = Determinism {
        seed: 1,
        now_ms: 1_700_000_000_000.0,
    };
    let o = runtime().block_on(run(&source, Arc::new(Echo), &limits, det));
    if let Status::Failed(e) = &o.status {
        assert_ne!(e.kind, ScriptErrorKind::Internal, "{source}\n{e:?}");
    }
    if let Status::Completed(v) = &o.status {
        let len = serde_json::to_string(v).map(|s| s.len()).unwrap_or(0);
        assert!(len <= limits.max_result_bytes, "result of {len} bytes");
    }
    let logged: usize = o.logs.iter().map(|l| l.message.len()).sum();
    assert!(logged <= limits.max_log_bytes + 64, "{logged} bytes of logs");
    assert!(o.calls <= limits.max_tool_calls, "{} calls", o.calls);
});
