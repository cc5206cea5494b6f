//! Agent runs through the binary: `[models.<id>]` pointing at a scripted model server that
//! speaks the real OpenAI and Anthropic streaming formats (no model API is reachable here),
//! a published definition run over HTTP (JSON and Server-Sent Events) with the real `tables`
//! plugin, a run paused on a destructive call that survives SIGKILL and completes once
//! approved, and `toolshed agents run` printing the streamed text.

use crate::support;

use serde_json::{json, Value};
use support::*;
use toolshed_testing::model_server::{ModelScript, ModelServer, Turn};

const KEY: &str = "sk-agent-runs-test-key-42";

fn config(dir: &std::path::Path, server: &ModelServer, kind: &str) -> std::path::PathBuf {
    let base = match kind {
        "openai" => server.openai_url(),
        _ => server.anthropic_url(),
    };
    let f = dir.join("toolshed.toml");
    std::fs::write(
        &f,
        format!(
            "{ALLOW_WRITES}\n[models.main]\nkind = \"{kind}\"\nbase_url = \"{base}\"\napi_key = \"{KEY}\"\nallow_private = true\n"
        ),
    )
    .unwrap();
    f
}

async fn post(http: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let r = http.post(url).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Creates table `orders` with one row and publishes agent `helper` with `tools`.
async fn prepare(http: &reqwest::Client, server: &Server, kind: &str, tools: Value) {
    let (s, v) = post(
        http,
        server.url("/v1/tools/tables.create/call"),
        json!({"name": "orders", "columns": [{"name": "item", "type": "string"}]}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = post(
        http,
        server.url("/v1/tools/tables.rows.insert/call"),
        json!({"table": "orders", "rows": [{"item": "lamp"}]}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let def = json!({"name": "helper", "model": format!("{kind}/test-model"), "credential": "main",
                     "instructions": "Answer from the orders table.", "tools": tools});
    let r = http
        .put(server.url("/v1/agents/helper"))
        .header("content-type", "application/json")
        .body(def.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let (s, v) = post(http, server.url("/v1/agents/helper/publish"), json!({})).await;
    assert_eq!(s, 200, "{v}");
}

#[tokio::test]
async fn a_published_agent_runs_over_http_as_json_and_as_a_stream() {
    for kind in ["openai", "anthropic"] {
        let model = ModelServer::start(ModelScript {
            turns: vec![
                Turn::calls(&[("tables__rows__query", json!({"table": "orders"}))]),
                Turn::text("One order: a lamp."),
                Turn::calls(&[("tables__rows__query", json!({"table": "orders"}))]),
                Turn::text("Still one order."),
            ],
            ..Default::default()
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), &model, kind);
        let server = Server::start(dir.path(), Some(&cfg), &[]);
        let http = reqwest::Client::new();
        prepare(
            &http,
            &server,
            kind,
            json!([{"type": "catalog", "pattern": "tables.rows.query"}]),
        )
        .await;

        let (s, v) = post(
            &http,
            server.url("/v1/agents/helper/runs"),
            json!({"input": "What was ordered?"}),
        )
        .await;
        assert_eq!(s, 200, "{kind}: {v}");
        assert_eq!(v["status"], "completed", "{v}");
        assert_eq!(v["result"]["output"], "One order: a lamp.");
        assert_eq!(v["result"]["usage"]["inputTokens"], 30);
        let second = model.requests()[1].2.to_string();
        assert!(
            second.contains("lamp"),
            "{kind}: the tool result reached the model: {second}"
        );
        let id = v["executionId"].as_str().unwrap();
        let info: Value = http
            .get(server.url(&format!("/v1/executions/{id}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(info["kind"], "run", "{info}");

        // The same as a stream: events as they happen, then the outcome. The scripted model
        // answers by conversation length, so this run asks a fresh conversation again.
        let text = http
            .post(server.url("/v1/agents/helper/runs"))
            .header("accept", "text/event-stream")
            .json(&json!({"input": "And now?"}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        for e in [
            "event: started",
            "event: tool_call",
            "event: tool_result",
            "event: text_delta",
            "event: usage",
            "event: completed",
            "event: outcome",
        ] {
            assert!(text.contains(e), "{kind}: no {e} in {text}");
        }
        assert!(!text.contains(KEY));

        // Unknown agent, missing input, a thread for an agent without memory: clear errors.
        let (s, v) = post(
            &http,
            server.url("/v1/agents/nobody/runs"),
            json!({"input": "hi"}),
        )
        .await;
        assert_eq!(s, 404, "{v}");
        assert_eq!(v["error"]["code"], "unknown_agent");
        let (s, v) = post(&http, server.url("/v1/agents/helper/runs"), json!({})).await;
        assert_eq!(s, 400, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("input"),
            "{v}"
        );
        let (s, v) = post(
            &http,
            server.url("/v1/agents/helper/runs"),
            json!({"input": "x", "threadId": "t1"}),
        )
        .await;
        assert_eq!(s, 400, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("memory.enabled"),
            "{v}"
        );

        // With memory enabled and published, a thread carries the first run into the second.
        let r = http
            .patch(server.url("/v1/agents/helper"))
            .header("content-type", "application/json-patch+json")
            .body(r#"[{"op": "add", "path": "/memory", "value": {"enabled": true, "lastMessages": 20}}]"#)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        let (s, v) = post(&http, server.url("/v1/agents/helper/publish"), json!({})).await;
        assert_eq!(s, 200, "{v}");
        let before = model.requests().len();
        for input in ["Remember the walrus.", "What should you remember?"] {
            let (s, v) = post(
                &http,
                server.url("/v1/agents/helper/runs"),
                json!({"input": input, "threadId": "t1"}),
            )
            .await;
            assert_eq!(s, 200, "{kind}: {v}");
            assert_eq!(v["result"]["memory"]["threadId"], "t1", "{v}");
        }
        let last = model.requests().last().unwrap().2.to_string();
        assert!(
            last.contains("Remember the walrus.") && last.contains("What should you remember?"),
            "{kind}: the thread's first run reached the second: {last}"
        );
        assert!(model.requests().len() > before + 1);
    }
}

#[tokio::test]
async fn a_run_paused_on_a_destructive_call_survives_sigkill_and_completes_once() {
    let model = ModelServer::start(ModelScript {
        turns: vec![
            Turn::calls(&[(
                "tables__rows__insert",
                json!({"table": "orders", "rows": [{"item": "desk"}]}),
            )]),
            Turn::calls(&[("tables__delete", json!({"name": "scratch"}))]),
            Turn::text("Inserted the desk and dropped scratch."),
        ],
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &model, "anthropic");
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let http = reqwest::Client::new();
    prepare(
        &http,
        &server,
        "anthropic",
        json!([{"type": "catalog", "pattern": "tables.**"}]),
    )
    .await;
    let (s, _) = post(
        &http,
        server.url("/v1/tools/tables.create/call"),
        json!({"name": "scratch", "columns": []}),
    )
    .await;
    assert_eq!(s, 200);
    let (s, v) = post(
        &http,
        server.url("/v1/agents/helper/runs"),
        json!({"input": "Add a desk, drop scratch"}),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["status"], "paused");
    assert_eq!(v["waits"][0]["path"], "tables.delete");
    let id = v["executionId"].as_str().unwrap().to_string();
    server.kill();

    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let list: Value = http
        .get(server.url("/v1/executions?kind=run"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        list["executions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["executionId"] == id.as_str()),
        "{list}"
    );
    let scripts: Value = http
        .get(server.url("/v1/executions?kind=script"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(scripts["executions"], json!([]), "{scripts}");
    let (s, v) = post(
        &http,
        server.url(&format!("/v1/executions/{id}/resume")),
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["result"]["output"],
        "Inserted the desk and dropped scratch."
    );
    let (_, rows) = post(
        &http,
        server.url("/v1/tools/tables.rows.query/call"),
        json!({"table": "orders"}),
    )
    .await;
    let items: Vec<&str> = rows["result"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["item"].as_str().unwrap())
        .collect();
    assert_eq!(
        items,
        ["lamp", "desk"],
        "the insert before the pause ran once: {rows}"
    );
    assert_eq!(
        model.requests().len(),
        3,
        "journaled model answers are not asked again"
    );
}

#[tokio::test]
async fn toolshed_agents_run_prints_the_streamed_answer() {
    let model = ModelServer::start(ModelScript {
        turns: vec![Turn::text("Hello from the agent.")],
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &model, "openai");
    let def = dir.path().join("helper.json");
    std::fs::write(&def, json!({"name": "helper", "model": "openai/test-model", "credential": "main", "instructions": "Greet."}).to_string()).unwrap();
    let d = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let (code, v) = cli(
            &d,
            Some(&cfg),
            &["agents", "write", "helper", def.to_str().unwrap()],
        );
        assert_eq!(code, 0, "{v}");
        let (code, v) = cli(&d, Some(&cfg), &["agents", "publish", "helper"]);
        assert_eq!(code, 0, "{v}");
        std::process::Command::new(BIN)
            .arg("--data-dir")
            .arg(&d)
            .arg("--config")
            .arg(&cfg)
            .args(["agents", "run", "helper", "Say hello"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "Hello from the agent.");
    assert!(stderr.contains("completed in 1 steps"), "{stderr}");
}

/// A config with two model endpoints, `main` and `sub`, on two scripted servers (the scripted
/// server answers by conversation length, so each agent gets a server of its own).
fn two_models_config(
    dir: &std::path::Path,
    main: &ModelServer,
    sub: &ModelServer,
) -> std::path::PathBuf {
    let f = dir.join("toolshed.toml");
    std::fs::write(
        &f,
        format!(
            "{ALLOW_WRITES}\n[models.main]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key = \"{KEY}\"\nallow_private = true\n\
             [models.sub]\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"{KEY}\"\nallow_private = true\n",
            main.openai_url(),
            sub.anthropic_url()
        ),
    )
    .unwrap();
    f
}

/// Writes and publishes an agent definition.
async fn publish(http: &reqwest::Client, server: &Server, def: Value) {
    let name = def["name"].as_str().unwrap().to_string();
    let r = http
        .put(server.url(&format!("/v1/agents/{name}")))
        .header("content-type", "application/json")
        .body(def.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let (s, v) = post(
        http,
        server.url(&format!("/v1/agents/{name}/publish")),
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
}

/// The sub-agent: asks the user which table, queries it, answers.
fn researcher_script() -> ModelScript {
    ModelScript {
        turns: vec![
            Turn::calls(&[(
                "ask_user",
                json!({"question": "Which table should I read?"}),
            )]),
            Turn::calls(&[("tables__rows__query", json!({"table": "orders"}))]),
            Turn::text("The orders table holds one lamp."),
        ],
        ..Default::default()
    }
}

#[tokio::test]
async fn a_sub_agent_that_asks_the_user_pauses_the_whole_run_and_the_answer_continues_it() {
    let main = ModelServer::start(ModelScript {
        turns: vec![
            Turn::calls(&[("agent__researcher", json!({"input": "What was ordered?"}))]),
            Turn::text("Summary: one lamp was ordered."),
        ],
        ..Default::default()
    })
    .await;
    let sub = ModelServer::start(researcher_script()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = two_models_config(dir.path(), &main, &sub);
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let http = reqwest::Client::new();
    prepare(&http, &server, "openai", json!([])).await;
    publish(&http, &server, json!({"name": "researcher", "model": "anthropic/test-model", "credential": "sub",
        "instructions": "Read the tables.", "tools": [{"type": "catalog", "pattern": "tables.rows.query"}]})).await;
    publish(&http, &server, json!({"name": "boss", "model": "openai/test-model", "credential": "main",
        "instructions": "Delegate research.", "tools": [{"type": "agent", "agent": "researcher", "description": "Finds facts in the tables."}]})).await;

    let (s, v) = post(
        &http,
        server.url("/v1/agents/boss/runs"),
        json!({"input": "Report on orders."}),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["status"], "paused", "{v}");
    let wait = &v["waits"][0];
    assert_eq!(wait["kind"], "input", "{v}");
    assert_eq!(wait["message"], "Which table should I read?", "{v}");
    let id = v["executionId"].as_str().unwrap().to_string();
    // The boss offered its sub-agent as a tool.
    let offered = main.requests()[0].2["tools"].to_string();
    assert!(
        offered.contains("agent__researcher") && offered.contains("Finds facts"),
        "{offered}"
    );

    // A restart between the pause and the answer changes nothing.
    server.kill();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let (s, v) = post(
        &http,
        server.url(&format!("/v1/executions/{id}/answer")),
        json!({"waitId": wait["waitId"], "action": "accept", "content": {"answer": "orders"}}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(
        v["result"]["output"], "Summary: one lamp was ordered.",
        "{v}"
    );
    // The sub-agent's answer reached the boss; no model step was asked twice.
    let last = main.requests().last().unwrap().2.to_string();
    assert!(last.contains("The orders table holds one lamp."), "{last}");
    assert_eq!(
        main.requests().len(),
        2,
        "the boss's model was asked once per step"
    );
    assert_eq!(
        sub.requests().len(),
        3,
        "the sub-agent's model was asked once per step"
    );
    let asked = sub.requests()[1].2.to_string();
    assert!(
        asked.contains("orders"),
        "the user's answer reached the sub-agent: {asked}"
    );
}

#[tokio::test]
async fn a_script_runs_an_agent_whose_question_pauses_the_script() {
    let sub = ModelServer::start(researcher_script()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = two_models_config(dir.path(), &sub, &sub);
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let http = reqwest::Client::new();
    prepare(&http, &server, "openai", json!([])).await;
    publish(&http, &server, json!({"name": "researcher", "model": "anthropic/test-model", "credential": "sub",
        "instructions": "Read the tables.", "tools": [{"type": "catalog", "pattern": "tables.rows.query"}]})).await;
    let script = "const r = await tools.agents.run({agent: 'researcher', input: 'What was ordered?'}); return r.output;";
    let (s, v) = post(&http, server.url("/v1/scripts"), json!({"script": script})).await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["waits"][0]["kind"], "input", "{v}");
    let id = v["executionId"].as_str().unwrap().to_string();
    let (s, v) = post(
        &http,
        server.url(&format!("/v1/executions/{id}/answer")),
        json!({"waitId": v["waits"][0]["waitId"], "action": "accept", "content": {"answer": "orders"}}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["result"], "The orders table holds one lamp.", "{v}");
    assert_eq!(sub.requests().len(), 3);

    // Called directly (HTTP tool call), agents.run runs as a script execution: the same pause.
    let (s, v) = post(
        &http,
        server.url("/v1/tools/agents.run/call"),
        json!({"agent": "researcher", "input": "Again?"}),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["waits"][0]["kind"], "input", "{v}");
    // An unknown agent is a clear error.
    let (s, v) = post(
        &http,
        server.url("/v1/scripts"),
        json!({"script": "return await tools.agents.run({agent: 'nobody', input: 'x'});"}),
    )
    .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["status"], "failed", "{v}");
    assert!(v.to_string().contains("no agent 'nobody' exists"), "{v}");
}

/// `toolshed ARGS...` with `env`; answers (exit code, stdout and stderr).
fn toolshed(
    dir: &std::path::Path,
    cfg: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String) {
    let out = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(dir)
        .arg("--config")
        .arg(cfg)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// `toolshed models add` of an OpenAI endpoint at `url`, its key in an environment variable.
fn models_add(
    dir: &std::path::Path,
    cfg: &std::path::Path,
    id: &str,
    url: &str,
    key: &str,
) -> (i32, String) {
    let args = ["models", "add", id, "--kind", "openai", "--base-url", url];
    let flags = ["--api-key-env", "RUNTIME_MODEL_KEY", "--allow-private"];
    let all: Vec<&str> = args.iter().chain(&flags).copied().collect();
    toolshed(dir, cfg, &all, &[("RUNTIME_MODEL_KEY", key)])
}

#[tokio::test]
async fn a_model_added_at_runtime_runs_agents_with_its_sealed_key() {
    let model = ModelServer::start(ModelScript {
        turns: vec![Turn::text("Runtime answer.")],
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = allow_writes_config(dir.path());
    let first_key = "sk-runtime-first-key-0123456789";
    // Refused before anything is stored: an unknown kind, a loopback URL without allow-private.
    let (code, text) = toolshed(
        dir.path(),
        &cfg,
        &["models", "add", "rt", "--kind", "gemini"],
        &[],
    );
    assert_ne!(code, 0);
    assert!(text.contains("kind 'gemini' is not known"), "{text}");
    let url = model.openai_url();
    let args = [
        "models",
        "add",
        "rt",
        "--kind",
        "openai",
        "--base-url",
        url.as_str(),
    ];
    let (code, text) = toolshed(dir.path(), &cfg, &args, &[]);
    assert_ne!(code, 0, "{text}");
    assert!(
        text.contains("loopback") || text.contains("private"),
        "{text}"
    );
    let (code, text) = models_add(dir.path(), &cfg, "rt", &model.openai_url(), first_key);
    assert_eq!(code, 0, "{text}");

    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let http = reqwest::Client::new();
    publish(
        &http,
        &server,
        json!({"name": "helper", "model": "openai/test-model", "credential": "rt",
        "instructions": "Answer.", "tools": []}),
    )
    .await;
    let (s, v) = post(
        &http,
        server.url("/v1/agents/helper/runs"),
        json!({"input": "Hi"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["result"]["output"], "Runtime answer.");
    let auth = |i: usize| {
        model.requests()[i].1["authorization"]
            .to_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(auth(0), format!("Bearer {first_key}"));
    // Listed as a runtime credential, never with its key.
    let (s, v) = post(
        &http,
        server.url("/v1/tools/agents.credentials.list/call"),
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert!(v.to_string().contains("\"runtime\":true"), "{v}");
    assert!(!v.to_string().contains(first_key), "{v}");
    let (code, listed) = cli(dir.path(), Some(&cfg), &["models", "list"]);
    assert_eq!(code, 0, "{listed}");
    assert_eq!(listed["models"][0]["source"], "store", "{listed}");
    assert!(!listed.to_string().contains(first_key));

    // Replaced while the server runs: the next run uses the new key.
    let second_key = "sk-runtime-second-key-9876543210";
    let (code, text) = models_add(dir.path(), &cfg, "rt", &model.openai_url(), second_key);
    assert_eq!(code, 0, "{text}");
    let (s, v) = post(
        &http,
        server.url("/v1/agents/helper/runs"),
        json!({"input": "Again"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(auth(1), format!("Bearer {second_key}"));

    // The keys are sealed at rest: neither is in the database file, the audit log or events.
    server.kill();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            for key in [first_key, second_key] {
                assert!(
                    !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
                    "{} holds a model key in clear",
                    path.display()
                );
            }
        }
    }
    // Removed: a run names what is missing.
    let (code, _) = cli(dir.path(), Some(&cfg), &["models", "remove", "rt"]);
    assert_eq!(code, 0);
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let (s, v) = post(
        &http,
        server.url("/v1/agents/helper/runs"),
        json!({"input": "Hi"}),
    )
    .await;
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'rt' is not configured"),
        "{v}"
    );
}

#[tokio::test]
async fn background_tasks_survive_a_sigkill_and_the_run_resumes_for_its_results() {
    let model = ModelServer::start(ModelScript {
        turns: vec![
            Turn::calls(&[("plan", json!({"tasks": [
                {"id": "ask", "title": "Ask the user", "kind": "delegate", "spec": "Ask which table to read.", "deps": []}
            ]}))]),
            Turn::text("Waiting for the task."),
            Turn::text("Final: the user chose orders."),
        ],
        by_instructions: vec![(
            "task of an approved plan: Ask the user".into(),
            vec![
                Turn::calls(&[("ask_user", json!({"question": "Which table?"}))]),
                Turn::text("The user chose orders."),
            ],
        )],
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &model, "openai");
    // Runs silent for 2 s count as interrupted, so the test need not wait minutes.
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[limits]\ncall_timeout_ms = 1000\nmax_call_timeout_ms = 1000\n[approvals]\nrecovery_grace_secs = 1\n");
    std::fs::write(&cfg, text).unwrap();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let http = reqwest::Client::new();
    publish(
        &http,
        &server,
        json!({"name": "boss", "model": "openai/test-model", "credential": "main",
        "instructions": "Orchestrate.", "tools": [], "config": {"orchestration": true}}),
    )
    .await;
    let (s, v) = post(
        &http,
        server.url("/v1/agents/boss/runs"),
        json!({"input": "Which table?"}),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    let run = v["executionId"].as_str().unwrap().to_string();
    let wait = v["waits"][0]["waitId"].as_str().unwrap().to_string();
    // Approving the plan: the run then waits for its task (this request does not return).
    let approve = {
        let (http, url) = (
            http.clone(),
            server.url(&format!("/v1/executions/{run}/answer")),
        );
        tokio::spawn(async move {
            let _ = http
                .post(url)
                .json(&json!({"waitId": wait, "action": "accept", "content": {"approved": true}}))
                .send()
                .await;
        })
    };
    // The task's own execution pauses on its question.
    let mut task_exec = None;
    for _ in 0..100 {
        let listed: Value = http
            .get(server.url("/v1/executions?wait=input"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        task_exec = listed["executions"].as_array().and_then(|all| {
            all.iter()
                .find(|e| e["executionId"] != run.as_str())
                .map(|e| {
                    (
                        e["executionId"].as_str().unwrap().to_string(),
                        e["waits"][0]["waitId"].as_str().unwrap().to_string(),
                    )
                })
        });
        if task_exec.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (task_id, task_wait) = task_exec.expect("the background task waits for its answer");
    server.kill();
    approve.abort();

    let server = Server::start(dir.path(), Some(&cfg), &[]);
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    let listed: Value = http
        .get(server.url("/v1/executions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let status_of = |id: &str| {
        listed["executions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["executionId"] == id)
            .map(|e| e["status"].clone())
    };
    assert_eq!(status_of(&run), Some(json!("interrupted")), "{listed}");
    assert_eq!(status_of(&task_id), Some(json!("paused")), "{listed}");
    // The task's question answered after the restart: the task completes.
    let (s, v) = post(
        &http,
        server.url(&format!("/v1/executions/{task_id}/answer")),
        json!({"waitId": task_wait, "action": "accept", "content": {"answer": "orders"}}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["result"]["output"], "The user chose orders.", "{v}");
    // The interrupted run resumes, reads the task's result and answers.
    let (s, v) = post(
        &http,
        server.url(&format!("/v1/executions/{run}/resume")),
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["result"]["output"], "Final: the user chose orders.",
        "{v}"
    );
    let last = model.requests().last().unwrap().2.to_string();
    assert!(
        last.contains("ask (Ask the user): succeeded: The user chose orders."),
        "{last}"
    );
}
