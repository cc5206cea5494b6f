//! The OpenAPI document at `GET /v1/openapi.json`: every route the router serves is in it (from
//! the route table, and probed on a bound listener behind the guard), every answer a probe gets
//! has a documented status and matches the documented schema, Toolshed's own OpenAPI importer
//! takes it (one tool per operation) and calls the API through the imported tools, and a few
//! schemas have the shape the handlers read.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, CompiledSchema, Policy, Principal, Role, SharedCatalog, Tool,
    ToolContext, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig};
use toolshed_identity::KeyRing;
use toolshed_outbound::{AuthConfig, Outbound, OutboundConfig, Secret};
use toolshed_store::Store;

struct Api {
    base: String,
    http: reqwest::Client,
}

/// A server with `demo.echo` and the destructive `demo.delete`; `alice` (key `k-alice`) may
/// use and decide `demo.*`.
async fn start() -> Api {
    let mut b = CatalogBuilder::new();
    let def = |path: &str, ann: Annotations| {
        ToolDef::new(ToolPath::parse(path).unwrap(), "Demo", "A demo tool.")
            .with_input(json!({"type": "object", "properties": {"msg": {"type": "string"}}}))
            .with_annotations(ann)
    };
    b.add_tool(Tool::from_fn(
        def("demo.echo", Annotations::READ_ONLY),
        |_ctx, args| async move { Ok(json!({"echo": args["msg"]})) },
    ));
    b.add_tool(Tool::from_fn(
        def("demo.delete", Annotations::DESTRUCTIVE),
        |_ctx, _args| async move { Ok(json!("deleted")) },
    ));
    let policy = Policy::new(
        vec![Role {
            id: "demo".into(),
            patterns: vec!["demo.*".into()],
            decide: vec!["demo.*".into()],
            ..Default::default()
        }],
        vec![Principal {
            id: "alice".into(),
            roles: vec!["demo".into()],
        }],
    )
    .unwrap();
    let engine = Engine::new(
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        policy,
        Store::open("sqlite::memory:").await.unwrap(),
        EngineConfig::default(),
    );
    let keys = KeyRing::new([("k-alice".to_string(), "alice".to_string())], None);
    let app = toolshed_http::guard(
        toolshed_http::router(engine, keys),
        toolshed_http::GuardConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Api {
        base,
        http: reqwest::Client::new(),
    }
}

impl Api {
    /// Sends `method path` with alice's key and a JSON body; answers the status and the body
    /// (`None` when it is not JSON).
    async fn send(&self, method: Method, path: &str, body: &Value) -> (StatusCode, Option<Value>) {
        let r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth("k-alice")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, serde_json::from_str(&r.text().await.unwrap()).ok())
    }

    async fn document(&self) -> Value {
        let (status, doc) = self.send(Method::GET, "/v1/openapi.json", &json!({})).await;
        assert_eq!(status, 200);
        doc.expect("the document is JSON")
    }
}

/// A concrete request for a documented route: path parameters filled in (`execution` for
/// `{id}`) and a body the handler reads.
fn request_for(path: &str, execution: &str) -> (String, Value) {
    let concrete = path
        .replace("{path}", "demo.echo")
        .replace("{id}", execution);
    let body = match path {
        "/v1/scripts" => json!({"script": "return await tools.demo.echo({msg: 'hi'})"}),
        "/v1/executions/{id}/resume" => json!({"decision": "approve"}),
        _ => json!({"msg": "hi"}),
    };
    (concrete, body)
}

/// Calls an imported tool's handler.
async fn call(t: &Tool, args: Value) -> Result<Value, toolshed_core::ToolError> {
    let ctx = ToolContext::new("tester".into(), t.def.path.clone());
    t.handler.call(ctx, args).await
}

/// Follows a local `$ref` (`#/components/schemas/X`).
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => doc
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling $ref {r}")),
        None => schema,
    }
}

/// A validator for `schema`, a schema of the document whose `$ref`s point into its components.
fn validator(doc: &Value, schema: &Value) -> CompiledSchema {
    let root = json!({"components": doc["components"], "allOf": [schema]});
    CompiledSchema::compile(&root).unwrap()
}

#[tokio::test]
async fn every_route_is_documented_and_answers_as_documented() {
    let api = start().await;
    let doc = api.document().await;
    assert_eq!(doc, toolshed_http::openapi_document_json());
    assert_eq!(doc["openapi"], "3.1.0");

    // The table: every route the router serves is a documented operation, and nothing else is.
    let operations = toolshed_http::operations();
    let documented: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|item| item.as_object().unwrap().len())
        .sum();
    assert_eq!(documented, operations.len(), "{doc:#}");
    for (method, path) in &operations {
        let op = &doc["paths"][*path][method.as_str().to_ascii_lowercase()];
        assert!(op.is_object(), "{method} {path} is not documented");
    }

    // Something to list: a paused execution (resumed below) and audit entries.
    let (status, paused) = api
        .send(Method::POST, "/v1/tools/demo.delete/call", &json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let paused = paused.unwrap();
    let schema = &doc["paths"]["/v1/tools/{path}/call"]["post"]["responses"]["202"]["content"]
        ["application/json"]["schema"];
    assert!(validator(&doc, schema).is_valid(&paused), "{paused}");
    assert_eq!(paused["status"], "paused");
    let execution = paused["executionId"].as_str().unwrap().to_string();
    for _ in 0..100 {
        let (_, log) = api.send(Method::GET, "/v1/audit", &json!({})).await;
        if log.unwrap()["entries"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // The router: each documented operation is served, answers a documented status, and its
    // body matches the schema documented for that status.
    let mut answered = vec![];
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let (concrete, body) = request_for(path, &execution);
            let method: Method = method.to_ascii_uppercase().parse().unwrap();
            let (status, answer) = api.send(method.clone(), &concrete, &body).await;
            let what = format!("{method} {concrete} answered {status} {answer:?}");
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{what}");
            let documented = &op["responses"][status.as_str()];
            assert!(documented.is_object(), "undocumented status: {what}");
            if documented["content"]["text/event-stream"].is_object() {
                // A stream (checked by the events tests); documented as one.
                continue;
            }
            let answer = answer.unwrap_or_else(|| panic!("not JSON: {what}"));
            if status == StatusCode::NOT_FOUND {
                assert!(answer["error"]["code"].is_string(), "{what}");
            }
            let schema = &documented["content"]["application/json"]["schema"];
            if let Err(violations) = validator(&doc, schema).validate(&answer) {
                panic!("{what}: does not match its schema: {violations:?}");
            }
            answered.push((concrete, status, answer));
        }
    }
    // The probes saw real content, not only empty lists.
    let non_empty = |path: &str, field: &str| {
        answered.iter().any(|(p, s, v)| {
            p == path && *s == 200 && v[field].as_array().is_some_and(|a| !a.is_empty())
        })
    };
    assert!(non_empty("/v1/executions", "executions"), "{answered:?}");
    assert!(non_empty("/v1/audit", "entries"), "{answered:?}");

    // A method a documented path does not have answers 405.
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in [
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::PATCH,
        ] {
            if item.get(method.as_str().to_ascii_lowercase()).is_some() {
                continue;
            }
            let (concrete, body) = request_for(path, &execution);
            let (status, _) = api.send(method.clone(), &concrete, &body).await;
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        }
    }
}

#[tokio::test]
async fn the_document_needs_a_key_like_every_v1_route() {
    let api = start().await;
    let r = api
        .http
        .get(format!("{}/v1/openapi.json", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unauthorized");
    let doc = api.document().await;
    assert_eq!(
        doc["paths"]["/healthz"]["get"]["security"],
        json!([]),
        "only /healthz is public"
    );
    assert!(doc["paths"]["/v1/openapi.json"]["get"]
        .get("security")
        .is_none());
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"],
        json!({
            "type": "http",
            "scheme": "bearer",
            "description": doc["components"]["securitySchemes"]["bearer"]["description"],
        })
    );
    assert_eq!(doc["security"][0], json!({"bearer": []}));
}

#[tokio::test]
async fn toolshed_imports_its_own_api_and_calls_it() {
    let api = start().await;
    let doc = api.document().await;
    let outbound = Outbound::new(OutboundConfig {
        allow_private: true,
        ..Default::default()
    })
    .unwrap();
    let imported = toolshed_openapi::import(
        &doc,
        &toolshed_openapi::ImportOptions {
            namespace: "toolshed".into(),
            base_url: Some(api.base.clone()),
            auth: AuthConfig::Bearer {
                token: Secret::new("k-alice"),
            },
            outbound: Some(outbound),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(imported.skipped.is_empty(), "{:?}", imported.skipped);
    assert_eq!(
        imported.tools.len(),
        toolshed_http::operations().len(),
        "one tool per operation"
    );
    let tool = |suffix: &str| {
        imported
            .tools
            .iter()
            .find(|t| t.def.path.as_str().ends_with(suffix))
            .unwrap_or_else(|| panic!("no tool *{suffix}"))
    };
    let script = tool(".run_script");
    let input = CompiledSchema::compile(&script.def.input_schema).unwrap();
    assert!(input.is_valid(&json!({"script": "return 1"})));
    assert!(!input.is_valid(&json!({})), "the script is required");

    // Through the imported tools, Toolshed calls its own API.
    let found = call(tool(".search_tools"), json!({"query": "delete"}))
        .await
        .unwrap();
    assert_eq!(found["hits"][0]["path"], "demo.delete", "{found}");
    let ran = call(script, json!({"script": "return 1 + 1"}))
        .await
        .unwrap();
    assert_eq!(ran["status"], "completed", "{ran}");
    assert_eq!(ran["result"], 2, "{ran}");
}

#[test]
fn request_and_answer_schemas_have_the_shape_the_handlers_use() {
    let doc = toolshed_http::openapi_document_json();
    let op = |path: &str, method: &str| doc["paths"][path][method].clone();

    // POST /v1/scripts takes a required `script` string.
    let scripts = op("/v1/scripts", "post");
    let body = resolve(
        &doc,
        &scripts["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(body["type"], "object");
    assert_eq!(body["required"], json!(["script"]));
    assert_eq!(body["properties"]["script"]["type"], "string");
    // Paused answers 202; a rate limit 429 with Retry-After; bodies of other types 415.
    for status in ["200", "202", "422", "400", "401", "403", "415", "429"] {
        assert!(scripts["responses"][status].is_object(), "{status}");
    }
    assert_eq!(
        scripts["responses"]["429"]["headers"]["Retry-After"]["schema"]["type"],
        "integer"
    );

    // The decision of a resume is `approve` or `deny`.
    let resume = op("/v1/executions/{id}/resume", "post");
    let body = resolve(
        &doc,
        &resume["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(
        body["properties"]["decision"]["enum"],
        json!(["approve", "deny"])
    );
    assert_eq!(resume["parameters"][0]["name"], "id");
    assert_eq!(resume["parameters"][0]["in"], "path");

    // The query of GET /v1/tools: optional parameters, `limit` an integer.
    let search = op("/v1/tools", "get");
    let params = search["parameters"].as_array().unwrap();
    let names: Vec<&str> = params.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["query", "limit", "namespace", "format", "pattern"]);
    assert!(params.iter().all(|p| p["required"] == false));
    assert_eq!(params[1]["schema"]["type"], "integer");

    // Every error is {"error": {"code", "message", "data"?}}.
    let describe = op("/v1/tools/{path}", "get");
    let error = resolve(
        &doc,
        &describe["responses"]["404"]["content"]["application/json"]["schema"],
    );
    let detail = resolve(&doc, &error["properties"]["error"]);
    let mut required: Vec<&str> = detail["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    required.sort();
    assert_eq!(required, ["code", "message"]);
    assert!(detail["properties"]["data"].is_object());

    // Outcomes are tagged by `status`.
    let outcome = resolve(
        &doc,
        &scripts["responses"]["202"]["content"]["application/json"]["schema"],
    );
    let text = outcome.to_string();
    for status in ["completed", "failed", "paused"] {
        assert!(text.contains(&format!("\"{status}\"")), "{outcome:#}");
    }
}
