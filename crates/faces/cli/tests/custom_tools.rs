//! Custom tools through the serving binary: `custom.build` refuses a syntax error (line and
//! column) and a failing trial; a saved tool composes `tables.rows.query`, is callable like any
//! tool, reaches nothing its caller cannot, keeps readOnly, and survives a restart.

use crate::support;

use serde_json::{json, Value};
use support::*;

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let f = dir.join("toolshed.toml");
    std::fs::write(
        &f,
        r#"
principal = "admin"
[[roles]]
id = "admin"
patterns = ["**"]
decide = ["**"]
allow = ["tables.rows.*"]
[[roles]]
id = "custom_only"
patterns = ["custom.*"]
[[principals]]
id = "admin"
roles = ["admin"]
api_keys = ["k-admin"]
[[principals]]
id = "outsider"
roles = ["custom_only"]
api_keys = ["k-outsider"]
"#,
    )
    .unwrap();
    f
}

/// POSTs a tool call; a paused call (writes need approval by default) is approved.
async fn call(
    http: &reqwest::Client,
    server: &Server,
    key: &str,
    path: &str,
    args: Value,
) -> (u16, Value) {
    let r = http
        .post(server.url(&format!("/v1/tools/{path}/call")))
        .bearer_auth(key)
        .json(&args)
        .send()
        .await
        .unwrap();
    let (mut status, mut v): (u16, Value) = (r.status().as_u16(), r.json().await.unwrap());
    while status == 202 {
        let id = v["executionId"].as_str().unwrap().to_string();
        let wait = v["waits"][0]["waitId"].as_str().unwrap().to_string();
        let r = http
            .post(server.url(&format!("/v1/executions/{id}/resume")))
            .bearer_auth("k-admin")
            .json(&json!({"decision": "approve", "waitId": wait}))
            .send()
            .await
            .unwrap();
        (status, v) = (r.status().as_u16(), r.json().await.unwrap());
    }
    (status, v)
}

#[tokio::test]
async fn saved_scripts_are_checked_composed_governed_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let http = reqwest::Client::new();
    let (s, v) = call(
        &http,
        &server,
        "k-admin",
        "tables.create",
        json!({"name": "pets", "columns": [{"name": "name", "type": "string"}]}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    call(
        &http,
        &server,
        "k-admin",
        "tables.rows.insert",
        json!({"table": "pets", "rows": [{"name": "a"}, {"name": "b"}]}),
    )
    .await;

    // A syntax error names its line and column; nothing is saved.
    let build = |code: &str, test: Value| {
        json!({"id": "count_pets", "description": "Counts pets.", "readOnly": true,
               "inputSchema": {"type": "object", "properties": {"table": {"type": "string"}}, "required": ["table"]},
               "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
               "code": code, "test": test})
    };
    let (s, v) = call(&http, &server, "k-admin", "custom.build", build("const r = await tools.tables.rows.query({table: input.table});\nreturn {n: r.rows.length +};", json!({"input": {"table": "pets"}}))).await;
    assert_eq!(s, 422, "{v}");
    let data = &v["error"]["data"];
    assert_eq!(data["stage"], "compile", "{v}");
    assert_eq!(data["errors"][0]["line"], 2, "{v}");
    // A trial whose result differs from the expectation.
    let good = "const r = await tools.tables.rows.query({table: input.table});\nreturn {n: r.rows.length};";
    let (s, v) = call(
        &http,
        &server,
        "k-admin",
        "custom.build",
        build(
            good,
            json!({"input": {"table": "pets"}, "expect": {"n": 5}}),
        ),
    )
    .await;
    assert_eq!(
        (s, v["error"]["data"]["stage"].clone()),
        (422, json!("test")),
        "{v}"
    );
    let (_, v) = call(&http, &server, "k-admin", "custom.list", json!({})).await;
    assert_eq!(v["result"]["tools"], json!([]), "nothing was saved: {v}");

    let (s, v) = call(
        &http,
        &server,
        "k-admin",
        "custom.build",
        build(
            good,
            json!({"input": {"table": "pets"}, "expect": {"n": 2}}),
        ),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["result"]["path"], "custom.count_pets");
    let (s, v) = call(
        &http,
        &server,
        "k-admin",
        "custom.count_pets",
        json!({"table": "pets"}),
    )
    .await;
    assert_eq!((s, v["result"].clone()), (200, json!({"n": 2})), "{v}");

    // Searchable and described like any tool.
    let r: Value = http
        .get(server.url("/v1/tools?query=count%20pets"))
        .bearer_auth("k-admin")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["hits"][0]["path"], "custom.count_pets", "{r}");

    // A caller without tables.* reaches nothing through it: the same not-found as directly.
    let (_, direct) = call(
        &http,
        &server,
        "k-outsider",
        "tables.rows.query",
        json!({"table": "pets"}),
    )
    .await;
    let (_, through) = call(
        &http,
        &server,
        "k-outsider",
        "custom.count_pets",
        json!({"table": "pets"}),
    )
    .await;
    let not_found = direct["error"]["message"].as_str().unwrap().to_string();
    assert!(
        through["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&not_found),
        "{through} vs {not_found}"
    );

    // readOnly holds at every call.
    let writes = json!({"id": "sneaky", "description": "Writes.", "readOnly": true, "inputSchema": {"type": "object"},
                        "code": "return await tools.tables.rows.insert({table: 'pets', rows: [{name: 'x'}]})"});
    let (s, _) = call(&http, &server, "k-admin", "custom.build", writes).await;
    assert_eq!(s, 200);
    let (_, v) = call(&http, &server, "k-admin", "custom.sneaky", json!({})).await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("read-only"),
        "{v}"
    );

    // A destructive call inside a saved tool pauses the call; approved, it completes, and the
    // insert before it ran exactly once.
    call(
        &http,
        &server,
        "k-admin",
        "tables.create",
        json!({"name": "scratch", "columns": []}),
    )
    .await;
    let purge = json!({"id": "purge", "description": "Logs, then drops scratch.", "inputSchema": {"type": "object"},
                       "code": "await tools.tables.rows.insert({table: 'pets', rows: [{name: 'logged'}]}); await tools.tables.delete({name: 'scratch'}); return 'purged';"});
    let (s, v) = call(&http, &server, "k-admin", "custom.build", purge).await;
    assert_eq!(s, 200, "{v}");
    let r = http
        .post(server.url("/v1/tools/custom.purge/call"))
        .bearer_auth("k-admin")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        202,
        "the saved tool pauses on its destructive call"
    );
    let paused: Value = r.json().await.unwrap();
    let waits = paused["waits"].as_array().unwrap();
    assert!(
        waits.iter().any(|w| w["path"] == "tables.delete"),
        "{paused}"
    );
    let id = paused["executionId"].as_str().unwrap();
    let wait = waits.iter().find(|w| w["path"] == "tables.delete").unwrap()["waitId"].clone();
    let r = http
        .post(server.url(&format!("/v1/executions/{id}/resume")))
        .bearer_auth("k-admin")
        .json(&json!({"decision": "approve", "waitId": wait}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["result"], json!("purged"), "{v}");
    let (_, v) = call(
        &http,
        &server,
        "k-admin",
        "tables.rows.query",
        json!({"table": "pets"}),
    )
    .await;
    let logged = v["result"]["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter(|r| r["name"] == "logged")
        .count();
    assert_eq!(logged, 1, "the insert ran once: {v}");

    // A restart keeps the saved tool.
    server.kill();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let (s, v) = call(
        &http,
        &server,
        "k-admin",
        "custom.count_pets",
        json!({"table": "pets"}),
    )
    .await;
    assert_eq!((s, v["result"].clone()), (200, json!({"n": 3})), "{v}");
    let (s, v) = call(
        &http,
        &server,
        "k-admin",
        "custom.delete",
        json!({"id": "count_pets"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, _) = call(
        &http,
        &server,
        "k-admin",
        "custom.count_pets",
        json!({"table": "pets"}),
    )
    .await;
    assert_eq!(s, 404);
}

/// Two servers on one PostgreSQL database: a tool saved on one is callable on the other.
#[tokio::test]
async fn replicas_share_custom_tools_on_postgres() {
    let Some((url, base, schema)) = postgres_schema("the PostgreSQL custom tools test").await
    else {
        return;
    };
    let result = tokio::spawn(async move {
        let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let env = [
            ("TOOLSHED_DATABASE_URL", url.as_str()),
            ("TOOLSHED_SECRET_KEY", key),
        ];
        let cfg_a = config(dir_a.path());
        let cfg_b = config(dir_b.path());
        let a = Server::start_with_env(dir_a.path(), Some(&cfg_a), &[], &env);
        let b = Server::start_with_env(dir_b.path(), Some(&cfg_b), &[], &env);
        let http = reqwest::Client::new();
        let echo = json!({"id": "echo_back", "description": "Echoes.", "readOnly": true,
                          "inputSchema": {"type": "object"}, "code": "return input"});
        let (s, v) = call(&http, &a, "k-admin", "custom.build", echo).await;
        assert_eq!(s, 200, "{v}");
        let mut answer = (0, Value::Null);
        for _ in 0..50 {
            answer = call(&http, &b, "k-admin", "custom.echo_back", json!({"x": 1})).await;
            if answer.0 == 200 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        assert_eq!(answer.1["result"], json!({"x": 1}), "{:?}", answer);
    })
    .await;
    drop_schema(&base, &schema).await;
    result.unwrap();
}
