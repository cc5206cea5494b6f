//! The bundled test upstream over stdio: listing and mapping, calls and errors,
//! `tools/list_changed`, supervision (crash → restart with backoff), shutdown/drop without
//! leaked processes, and failures at start.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use toolshed_core::{Annotations, ToolErrorKind};
use toolshed_mcp_source::{McpSourceError, Upstream};

#[tokio::test]
async fn lists_and_maps_tools() {
    let up = Upstream::connect(stdio("test", &[])).await.unwrap();
    assert_eq!(up.protocol_version().as_deref(), Some("2025-11-25"));
    assert!(up.is_connected());
    let tools = up.tools().await.unwrap();
    let mut paths: Vec<&str> = tools.iter().map(|t| t.def.path.as_str()).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "test.add",
            "test.ask",
            "test.delete_everything",
            "test.echo",
            "test.fail",
            "test.get_status_v2",
            "test.getenv",
            "test.http_headers",
            "test.log",
            "test.media",
            "test.sample",
            "test.sleep",
            "test.steps",
            "test.toggle_extra",
            "test.whoami",
        ]
    );

    let echo = tool(&tools, "test.echo");
    assert_eq!(echo.def.name, "Echo");
    assert_eq!(echo.def.description, "Echoes the text back.");
    assert_eq!(echo.def.annotations, Annotations::READ_ONLY);
    assert_eq!(echo.def.input_schema["required"], json!(["text"]));
    assert_eq!(echo.def.origin, "source:test");

    let add = tool(&tools, "test.add");
    assert_eq!(add.def.name, "Add Numbers");
    assert_eq!(
        add.def.annotations,
        Annotations {
            read_only: false,
            destructive: false,
            idempotent: true,
            ..Default::default()
        }
    );
    assert_eq!(
        add.def.output_schema.as_ref().unwrap()["properties"]["sum"]["type"],
        "number"
    );

    assert_eq!(
        tool(&tools, "test.delete_everything").def.annotations,
        Annotations::DESTRUCTIVE
    );
    // No hints at all: MCP defaults make it destructive.
    assert_eq!(
        tool(&tools, "test.fail").def.annotations,
        Annotations::DESTRUCTIVE
    );
    assert_eq!(tool(&tools, "test.get_status_v2").def.name, "Get Status V2");
    up.shutdown().await;
}

#[tokio::test]
async fn calls_results_and_errors() {
    let up = Upstream::connect(stdio("test", &[])).await.unwrap();
    let tools = up.tools().await.unwrap();

    assert_eq!(
        call(tool(&tools, "test.echo"), json!({"text": "hi"}))
            .await
            .unwrap(),
        json!("hi")
    );
    assert_eq!(
        call(tool(&tools, "test.add"), json!({"a": 2, "b": 3}))
            .await
            .unwrap(),
        json!({"sum": 5.0})
    );
    assert_eq!(
        call(tool(&tools, "test.get_status_v2"), json!({}))
            .await
            .unwrap(),
        json!({"status": "ok", "items": [1, 2, 3]})
    );
    assert_eq!(
        call(
            tool(&tools, "test.delete_everything"),
            serde_json::Value::Null
        )
        .await
        .unwrap(),
        json!("deleted nothing, really")
    );

    let e = call(tool(&tools, "test.fail"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Upstream);
    assert_eq!(e.message, "the widget is broken");

    let e = call(tool(&tools, "test.add"), json!({"a": "x"}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    assert!(e.message.contains("must be numbers"), "{}", e.message);

    let e = call(tool(&tools, "test.echo"), json!([1]))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    up.shutdown().await;
}

#[tokio::test]
async fn all_calls_share_one_session() {
    let up = Upstream::connect(stdio("test", &[])).await.unwrap();
    let pid = up.pid().expect("stdio child pid");
    let tools = up.tools().await.unwrap();
    let whoami = tool(&tools, "test.whoami").clone();
    let calls = (0..16).map(|_| {
        let t = whoami.clone();
        async move { call(&t, json!({})).await.unwrap() }
    });
    for out in futures::future::join_all(calls).await {
        assert_eq!(out["pid"], pid);
    }
    assert_eq!(up.restarts(), 0);
    up.shutdown().await;
}

#[tokio::test]
async fn call_timeout_is_a_timeout_error() {
    let up = Upstream::connect(stdio("test", &[]).with_call_timeout(Duration::from_millis(300)))
        .await
        .unwrap();
    let tools = up.tools().await.unwrap();
    let started = Instant::now();
    let e = call(tool(&tools, "test.sleep"), json!({"ms": 5000}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Timeout);
    assert!(started.elapsed() < Duration::from_secs(3));
    // The session is still usable afterwards.
    assert_eq!(
        call(tool(&tools, "test.echo"), json!({"text": "ok"}))
            .await
            .unwrap(),
        json!("ok")
    );
    up.shutdown().await;
}

#[tokio::test]
async fn list_changed_triggers_a_refresh() {
    let up = Upstream::connect(stdio("test", &[])).await.unwrap();
    let mut changes = up.subscribe_changes();
    let seen = *changes.borrow();
    let tools = up.tools().await.unwrap();
    assert!(tools.iter().all(|t| t.def.path.as_str() != "test.extra"));

    let out = call(tool(&tools, "test.toggle_extra"), json!({}))
        .await
        .unwrap();
    assert_eq!(out, json!("extra added"));
    let now = next_change(&mut changes, seen).await;
    let tools = up.tools().await.unwrap();
    assert_eq!(
        call(tool(&tools, "test.extra"), json!({})).await.unwrap(),
        json!("extra!")
    );

    call(tool(&tools, "test.toggle_extra"), json!({}))
        .await
        .unwrap();
    next_change(&mut changes, now).await;
    let tools = up.tools().await.unwrap();
    assert!(tools.iter().all(|t| t.def.path.as_str() != "test.extra"));
    up.shutdown().await;
}

#[tokio::test]
async fn killed_child_is_restarted_and_calls_succeed() {
    let up = Upstream::connect(stdio("test", &[])).await.unwrap();
    let tools = up.tools().await.unwrap();
    let whoami = tool(&tools, "test.whoami");
    let first = up.pid().unwrap();

    kill9(first);
    let out = call(whoami, json!({})).await.unwrap();
    let second = out["pid"].as_u64().unwrap() as u32;
    assert_ne!(second, first);
    assert_eq!(up.pid(), Some(second));
    assert_eq!(up.restarts(), 1);
    assert!(wait_gone(first, Duration::from_secs(5)).await);

    // A second crash: restarted again, the backoff has grown but stays short.
    kill9(second);
    let started = Instant::now();
    let out = call(tool(&tools, "test.echo"), json!({"text": "back"}))
        .await
        .unwrap();
    assert_eq!(out, json!("back"));
    assert_eq!(up.restarts(), 2);
    assert!(started.elapsed() < Duration::from_secs(5));
    up.shutdown().await;
}

#[tokio::test]
async fn calls_during_a_failing_reconnect_fail_clearly_then_recover() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("crash");
    let marker_str = marker.to_str().unwrap().to_string();
    let cfg = stdio("test", &["--crash-if-exists", &marker_str])
        .with_call_timeout(Duration::from_millis(800));
    let up = Upstream::connect(cfg).await.unwrap();
    let tools = up.tools().await.unwrap();
    let echo = tool(&tools, "test.echo");

    std::fs::write(&marker, b"x").unwrap();
    kill9(up.pid().unwrap());
    let started = Instant::now();
    let e = call(echo, json!({"text": "x"})).await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(e.kind, ToolErrorKind::Timeout);
    assert!(e.message.contains("unavailable"), "{}", e.message);
    assert!(!up.is_connected());

    std::fs::remove_file(&marker).unwrap();
    // Backoff is at most a few seconds at this point; wait for the restart.
    let mut ok = false;
    for _ in 0..40 {
        if call(echo, json!({"text": "again"})).await.is_ok() {
            ok = true;
            break;
        }
    }
    assert!(ok, "the upstream never came back");
    assert_eq!(up.restarts(), 1);
    up.shutdown().await;
}

#[tokio::test]
async fn shutdown_leaves_no_process() {
    let up = Upstream::connect(stdio("test", &[])).await.unwrap();
    let tools = up.tools().await.unwrap();
    let pid = up.pid().unwrap();
    assert!(alive(pid));
    up.shutdown().await;
    assert!(
        wait_gone(pid, Duration::from_secs(5)).await,
        "child {pid} survived shutdown"
    );
    let e = call(tool(&tools, "test.echo"), json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("shut down"), "{}", e.message);
    assert!(matches!(
        up.tools().await,
        Err(McpSourceError::Closed { .. })
    ));
}

#[tokio::test]
async fn dropping_the_last_handle_kills_the_child() {
    let up = Upstream::connect(stdio("test", &[])).await.unwrap();
    let pid = up.pid().unwrap();
    let tools = up.tools().await.unwrap();
    drop(up);
    // Tools keep the session alive...
    assert_eq!(
        call(tool(&tools, "test.echo"), json!({"text": "x"}))
            .await
            .unwrap(),
        json!("x")
    );
    assert!(alive(pid));
    // ...until they are dropped too.
    drop(tools);
    assert!(
        wait_gone(pid, Duration::from_secs(5)).await,
        "child {pid} survived drop"
    );
}

#[tokio::test]
async fn hang_at_start_times_out() {
    let cfg = stdio("hang", &["--hang"]).with_connect_timeout(Duration::from_millis(700));
    let started = Instant::now();
    let e = Upstream::connect(cfg).await.unwrap_err();
    assert!(matches!(e, McpSourceError::ConnectTimeout { .. }), "{e}");
    assert!(e.to_string().contains("hang"));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn crash_at_start_is_a_clear_error() {
    let started = Instant::now();
    let e = Upstream::connect(stdio("crashy", &["--crash"]))
        .await
        .unwrap_err();
    assert!(matches!(e, McpSourceError::Handshake { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("crashy") && text.contains("boom"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn secrets_printed_on_stderr_are_blanked_out_of_errors() {
    let cfg = toolshed_mcp_source::UpstreamConfig::new(
        "crashy",
        toolshed_mcp_source::Transport::Stdio {
            command: TEST_UPSTREAM.into(),
            args: vec!["--crash".into()],
            env: vec![
                ("CRASHY_API_TOKEN".into(), "tok-stderr-5150".into()),
                (
                    "TEST_UPSTREAM_SAY".into(),
                    "login failed for token tok-stderr-5150".into(),
                ),
            ],
            cwd: None,
        },
    );
    let e = Upstream::connect(cfg).await.unwrap_err();
    let text = format!("{e} {e:?}");
    assert!(
        text.contains("login failed for token [REDACTED]") && text.contains("boom"),
        "{text}"
    );
    assert!(!text.contains("tok-stderr-5150"), "{text}");
}

#[tokio::test]
async fn modern_only_server_uses_discover() {
    let up = Upstream::connect(stdio("modern", &["--modern-only"]))
        .await
        .unwrap();
    assert_eq!(up.protocol_version().as_deref(), Some("2026-07-28"));
    let tools = up.tools().await.unwrap();
    assert_eq!(
        call(tool(&tools, "modern.echo"), json!({"text": "new"}))
            .await
            .unwrap(),
        json!("new")
    );
    up.shutdown().await;
}

#[tokio::test]
async fn notifications_before_the_initialize_answer_are_tolerated() {
    let up = Upstream::connect(stdio("chatty", &["--early-notify"]))
        .await
        .unwrap();
    let tools = up.tools().await.unwrap();
    assert_eq!(
        call(tool(&tools, "chatty.echo"), json!({"text": "still fine"}))
            .await
            .unwrap(),
        json!("still fine")
    );
    up.shutdown().await;
}

#[tokio::test]
async fn the_child_gets_its_env_and_echoed_secrets_are_blanked_out() {
    let cfg = toolshed_mcp_source::UpstreamConfig::new(
        "envy",
        toolshed_mcp_source::Transport::Stdio {
            command: TEST_UPSTREAM.into(),
            args: Vec::new(),
            env: vec![
                ("UPSTREAM_REGION".into(), "eu-west-3".into()),
                ("UPSTREAM_API_TOKEN".into(), "tok-env-secret-9f2".into()),
                ("UPSTREAM_FROM_REF".into(), "value-from-env-ref".into()),
            ],
            cwd: None,
        },
    )
    .with_secrets(["value-from-env-ref"]);
    let up = Upstream::connect(cfg).await.unwrap();
    let tools = up.tools().await.unwrap();
    let getenv = tool(&tools, "envy.getenv");
    // An ordinary value reaches the child and comes back as is.
    let out = call(getenv, json!({"name": "UPSTREAM_REGION"}))
        .await
        .unwrap();
    assert_eq!(out["value"], "eu-west-3", "{out}");
    // Credential-named and listed values reach the child, but an echo of them is blanked.
    for var in ["UPSTREAM_API_TOKEN", "UPSTREAM_FROM_REF"] {
        let out = call(getenv, json!({"name": var})).await.unwrap();
        assert_eq!(out["value"], "[REDACTED]", "{var}: {out}");
    }
    // The parent's environment is inherited.
    let out = call(getenv, json!({"name": "PATH"})).await.unwrap();
    assert!(out["value"].is_string(), "{out}");
    let out = call(getenv, json!({"name": "UPSTREAM_UNSET"}))
        .await
        .unwrap();
    assert!(out["value"].is_null(), "{out}");
    up.shutdown().await;
}
