//! `toolshed sources` end to end with the binary: an OpenAPI source over a local Petstore-like
//! axum server, called through the engine (approval included), listed, kept across restarts,
//! removed; `--dry-run` stores nothing; a serving process picks up a source added by another
//! process.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use support::{cli, Server};

const SPEC: &str = "tests/fixtures/petstore.oas3.0.json";

#[derive(Default)]
struct Pets {
    pets: HashMap<i64, Value>,
    next: i64,
    /// (method path, X-Api-Key header) of every request.
    log: Vec<(String, String)>,
}

type Shared = Arc<Mutex<Pets>>;

fn record(s: &Shared, what: String, headers: &HeaderMap) {
    let key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    s.lock().unwrap().log.push((what, key));
}

async fn start_petstore() -> (u16, Shared) {
    let state: Shared = Arc::default();
    state
        .lock()
        .unwrap()
        .pets
        .insert(1, json!({"id": 1, "name": "doggie", "photoUrls": []}));
    state.lock().unwrap().next = 2;
    let app = Router::new()
        .route(
            "/pet",
            post(
                |State(s): State<Shared>, headers: HeaderMap, Json(mut body): Json<Value>| async move {
                    record(&s, "POST /pet".into(), &headers);
                    let mut g = s.lock().unwrap();
                    let id = g.next;
                    g.next += 1;
                    body["id"] = json!(id);
                    g.pets.insert(id, body.clone());
                    Json(body)
                },
            ),
        )
        .route(
            "/pet/findByStatus",
            get(|State(s): State<Shared>, headers: HeaderMap| async move {
                record(&s, "GET /pet/findByStatus".into(), &headers);
                // A careless API that reflects the caller's key back.
                let key = headers.get("x-api-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                Json(json!([{"id": 9, "name": format!("echo {key}"), "photoUrls": [], "tags": [{"id": 1, "name": key}]}]))
            }),
        )
        .route(
            "/pet/{id}",
            get(
                |State(s): State<Shared>, headers: HeaderMap, Path(id): Path<i64>| async move {
                    record(&s, format!("GET /pet/{id}"), &headers);
                    match s.lock().unwrap().pets.get(&id) {
                        Some(p) => Ok(Json(p.clone())),
                        None => Err((StatusCode::NOT_FOUND, "Pet not found")),
                    }
                },
            ),
        )
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, state)
}

fn add_args(port: u16, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "sources",
        "add",
        "openapi",
        "pets",
        "--spec",
        SPEC,
        "--base-url",
        &format!("http://127.0.0.1:{port}"),
        "--allow-private",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn run(dir: &std::path::Path, args: &[String]) -> (i32, Value) {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    cli(dir, None, &refs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_source_lifecycle_through_the_engine() {
    let (port, state) = start_petstore().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // --dry-run lists every tool and stores nothing.
    let (code, v) = run(d, &add_args(port, &["--dry-run"]));
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["stored"], false);
    assert_eq!(v["tools"].as_array().unwrap().len(), 20, "{v}");
    assert!(v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["path"] == "pets.pet.add_pet" && t["destructive"] == true));
    let (_, v) = cli(d, None, &["sources", "list"]);
    assert_eq!(v["sources"], json!([]), "{v}");

    // A spec that does not import is not stored.
    let (code, v) = cli(
        d,
        None,
        &[
            "sources",
            "add",
            "openapi",
            "bad",
            "--spec",
            "tests/fixtures/nope.json",
        ],
    );
    assert_eq!(code, 1);
    assert!(v["error"].as_str().unwrap().contains("nope.json"), "{v}");
    let (_, v) = cli(d, None, &["sources", "list"]);
    assert_eq!(v["sources"], json!([]), "{v}");

    // Add for real, with a literal API key that must never be shown or stored in clear.
    let (code, v) = run(
        d,
        &add_args(
            port,
            &["--api-key-header", "X-Api-Key=pets-literal-key-123"],
        ),
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["stored"], true);
    let (_, v) = cli(d, None, &["sources", "list"]);
    let text = v.to_string();
    assert!(!text.contains("pets-literal-key-123"), "{text}");
    assert_eq!(v["sources"][0]["name"], "pets");
    assert_eq!(v["sources"][0]["origin"], "store");
    assert!(v["sources"][0]["location"]
        .as_str()
        .unwrap()
        .ends_with("tests/fixtures/petstore.oas3.0.json"));

    // A read-only call reaches the server, with the unsealed key.
    let (code, v) = cli(
        d,
        None,
        &["call", "pets.pet.get_pet_by_id", r#"{"petId": 1}"#],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["result"]["name"], "doggie");
    assert_eq!(
        state.lock().unwrap().log.last().cloned(),
        Some(("GET /pet/1".to_string(), "pets-literal-key-123".to_string()))
    );

    // A destructive POST pauses; approving it (another process: a restart) completes it.
    let (_, v) = cli(
        d,
        None,
        &[
            "call",
            "pets.pet.add_pet",
            r#"{"name": "rex", "photoUrls": []}"#,
        ],
    );
    assert_eq!(v["status"], "paused", "{v}");
    assert!(
        !state
            .lock()
            .unwrap()
            .log
            .iter()
            .any(|(w, _)| w == "POST /pet"),
        "nothing is sent before approval"
    );
    let id = v["executionId"].as_str().unwrap().to_string();
    let (code, v) = cli(d, None, &["approvals", "approve", &id]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["result"]["name"], "rex");
    let new_id = v["result"]["id"].as_i64().unwrap();
    let (_, v) = cli(
        d,
        None,
        &[
            "call",
            "pets.pet.get_pet_by_id",
            &format!(r#"{{"petId": {new_id}}}"#),
        ],
    );
    assert_eq!(v["result"]["name"], "rex", "{v}");

    // refresh re-imports and reports counts.
    let (code, v) = cli(d, None, &["sources", "refresh", "pets"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["sources"][0]["tools"], 20, "{v}");

    // Adding the same name again needs --replace.
    let (code, v) = run(d, &add_args(port, &[]));
    assert_eq!(code, 1);
    assert!(v["error"].as_str().unwrap().contains("--replace"), "{v}");

    // remove: the tools are gone.
    let (code, v) = cli(d, None, &["sources", "remove", "pets"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["removed"], true);
    let (code, v) = cli(
        d,
        None,
        &["call", "pets.pet.get_pet_by_id", r#"{"petId": 1}"#],
    );
    assert_eq!(code, 1, "{v}");
    let (code, _) = cli(d, None, &["sources", "remove", "pets"]);
    assert_eq!(code, 1, "removing twice is an error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_server_picks_up_sources_added_and_removed_elsewhere() {
    let (port, _state) = start_petstore().await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), None, &[]);
    let http = reqwest::Client::new();
    let describe = |path: &str| {
        let url = server.url(&format!("/v1/tools/{path}"));
        let http = http.clone();
        async move { http.get(url).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(describe("pets.pet.add_pet").await, 404);

    let (code, v) = run(dir.path(), &add_args(port, &[]));
    assert_eq!(code, 0, "{v}");
    let mut status = 0;
    for _ in 0..100 {
        status = describe("pets.pet.add_pet").await;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "the added source is served without a restart");

    let (code, _) = cli(dir.path(), None, &["sources", "remove", "pets"]);
    assert_eq!(code, 0);
    for _ in 0..100 {
        status = describe("pets.pet.add_pet").await;
        if status == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 404, "the removed source is gone without a restart");
}

/// A source's secret never reaches script output or the audit log, even when the API reflects it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_secrets_stay_out_of_script_output_and_audit() {
    let (port, state) = start_petstore().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let secret = "sk-live-5f3a9c1e7d";
    let (code, v) = run(
        d,
        &add_args(port, &["--api-key-header", &format!("X-Api-Key={secret}")]),
    );
    assert_eq!(code, 0, "{v}");
    let script = r#"
        const found = await tools.search({query: "find pets by status"});
        const path = found.hits.map(h => h.path).find(p => p.includes("find_pets_by_status"));
        const pets = await tools.describe.tool({path});
        const r = await tools.pets.pet.find_pets_by_status({status: ["available"]});
        console.log(JSON.stringify(r));
        return {path, r, text: pets.text};
    "#;
    let script_file = d.join("s.js");
    std::fs::write(&script_file, script).unwrap();
    let (code, out) = cli(d, None, &["run", script_file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["status"], "completed", "{out}");
    // The API did receive the key...
    assert!(state
        .lock()
        .unwrap()
        .log
        .iter()
        .any(|(w, k)| w == "GET /pet/findByStatus" && k == secret));
    // ...but neither the result, nor the logs, nor anything stored shows it.
    let text = out.to_string();
    assert!(
        !text.contains(secret),
        "script output leaks the key: {text}"
    );
    assert!(text.contains("echo "), "{text}");
    let mut stored = Vec::new();
    for f in ["toolshed.db", "toolshed.db-wal"] {
        if let Ok(b) = std::fs::read(d.join(f)) {
            stored.extend(b);
        }
    }
    assert!(!stored.is_empty());
    assert!(
        !stored.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the database (audit log, sources) holds the literal key"
    );
    let (_, list) = cli(d, None, &["sources", "list"]);
    assert!(!list.to_string().contains(secret));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_operations_are_served_as_resources_of_a_virtual_server() {
    use rmcp::model::ReadResourceRequestParams;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt;

    let (port, _state) = start_petstore().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (code, v) = run(d, &add_args(port, &["--resource", "pets.pet.*"]));
    assert_eq!(code, 0, "{v}");
    let warnings = v.to_string();
    assert!(
        warnings.contains("only GET operations can be resources"),
        "a POST matched by the pattern is named: {warnings}"
    );
    let cfg = d.join("toolshed.toml");
    std::fs::write(
        &cfg,
        format!(
            "{}\n[[servers]]\nname = \"petres\"\nresources = [\"pets.**\"]\n",
            support::ALLOW_WRITES
        ),
    )
    .unwrap();
    let server = Server::start(d, Some(&cfg), &[]);
    let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp/servers/petres"));
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let templates = client.list_all_resource_templates().await.unwrap();
    let uris: Vec<String> = templates.iter().map(|t| t.uri_template.clone()).collect();
    assert!(
        uris.contains(&"openapi://pets/pet/{petId}".to_string()),
        "{uris:?}"
    );
    let read = client
        .read_resource(ReadResourceRequestParams::new("openapi://pets/pet/1"))
        .await
        .unwrap();
    let text = serde_json::to_value(&read).unwrap().to_string();
    assert!(
        text.contains("doggie") && text.contains("application/json"),
        "{text}"
    );
    // A URI of another form is not found; a pet that does not exist is the upstream's 404.
    assert!(client
        .read_resource(ReadResourceRequestParams::new("openapi://pets/nothing/1"))
        .await
        .is_err());
    assert!(client
        .read_resource(ReadResourceRequestParams::new("openapi://pets/pet/999"))
        .await
        .is_err());
    let _ = client.cancel().await;
}
