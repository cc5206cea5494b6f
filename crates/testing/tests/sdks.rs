//! The scripted model server must not drift from the real wire formats: what it streams is
//! read with the official `openai` and `anthropic` Python SDKs (pinned in `scripts/peers.sh`),
//! whose own stream accumulators must assemble the same answer the script holds.
//! Skipped with a note when the SDKs are not installed (run `scripts/peers.sh`).

use std::path::PathBuf;

use serde_json::{json, Value};
use toolshed_testing::model_server::{Failure, ModelScript, ModelServer, Turn};

fn python() -> Option<PathBuf> {
    let tools = std::env::var("MCP_TOOLS").unwrap_or_else(|_| "/tmp/mcp-tools".into());
    let py = PathBuf::from(tools).join("venv/bin/python");
    let ok = std::process::Command::new(&py)
        .args(["-c", "import openai, anthropic"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("SKIPPED: the openai/anthropic Python SDKs are not installed (scripts/peers.sh)");
    }
    ok.then_some(py)
}

async fn read_with_sdk(py: &PathBuf, base: &str, case: &str) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk_check.py");
    let out = tokio::process::Command::new(py)
        .args([script, base, case])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{case}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn script(split: usize) -> ModelScript {
    ModelScript {
        turns: vec![Turn {
            text: "Looking ünder the rows.".into(),
            calls: vec![
                ("rows__query".into(), json!({"table": "orders"}).to_string()),
                (
                    "rows__query".into(),
                    json!({"table": "invoices — 2026"}).to_string(),
                ),
            ],
            input_tokens: 21,
            output_tokens: 9,
        }],
        split,
        ..Default::default()
    }
}

#[tokio::test]
async fn the_official_sdks_assemble_what_the_scripted_server_streams() {
    let Some(py) = python() else { return };
    // Pieces of 1, 3 and 7 bytes: arguments (and a multi-byte character) split anywhere.
    for split in [1, 3, 7] {
        let server = ModelServer::start(script(split)).await;
        let base = format!("http://{}", server.addr);
        for case in ["openai", "anthropic"] {
            let v = read_with_sdk(&py, &base, case).await;
            assert_eq!(v["text"], "Looking ünder the rows.", "{case}/{split}: {v}");
            assert_eq!(
                v["calls"][0]["arguments"],
                json!({"table": "orders"}),
                "{case}: {v}"
            );
            assert_eq!(
                v["calls"][1]["arguments"],
                json!({"table": "invoices — 2026"})
            );
            assert_eq!(v["calls"][1]["name"], "rows__query");
            assert_eq!(v["usage"], json!({"in": 21, "out": 9}), "{case}: {v}");
            let finish = if case == "openai" {
                "tool_calls"
            } else {
                "tool_use"
            };
            assert_eq!(v["finish"], finish);
        }
        // Usage only when stream_options.include_usage asks for it.
        let v = read_with_sdk(&py, &base, "openai-no-usage").await;
        assert_eq!(v["usage"], Value::Null, "{v}");
    }
}

#[tokio::test]
async fn the_official_sdks_read_its_error_bodies() {
    let Some(py) = python() else { return };
    let failures = vec![
        Failure {
            status: 429,
            retry_after: Some(1),
            message: "Rate limit reached".into(),
        },
        Failure {
            status: 401,
            retry_after: None,
            message: "invalid x-api-key".into(),
        },
    ];
    let server = ModelServer::start(ModelScript {
        failures,
        ..Default::default()
    })
    .await;
    let base = format!("http://{}", server.addr);
    let v = read_with_sdk(&py, &base, "openai-error").await;
    assert_eq!(v["status"], 429, "{v}");
    assert_eq!(v["type"], "RateLimitError");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("Rate limit reached"),
        "{v}"
    );
    let v = read_with_sdk(&py, &base, "anthropic-error").await;
    assert_eq!(v["status"], 401, "{v}");
    assert_eq!(v["type"], "AuthenticationError");
    assert!(
        v["message"].as_str().unwrap().contains("invalid x-api-key"),
        "{v}"
    );
}
