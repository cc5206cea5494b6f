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
    let (status, v): (u16, Value) = (r.status().as_u16(), r.json().await.unwrap());
    if status != 202 {
        return (status, v);
    }
    let id = v["executionId"].as_str().unwrap();
    let r = http
        .post(server.url(&format!("/v1/executions/{id}/resume")))
        .bearer_auth("k-admin")
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
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
    assert_eq!((s, v["result"].clone()), (200, json!({"n": 2})), "{v}");
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
