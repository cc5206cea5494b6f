//! Shared helpers for the integration tests: a plugin over a store, tool calls by path, and the
//! main scenario run on every backend.

#![allow(dead_code)]

use std::sync::Arc;

use serde_json::{json, Value};
use toolshed_core::{Plugin, ToolContext, ToolError, ToolErrorKind, ToolPath};
use toolshed_store::Store;

/// The plugin under test and its store.
pub struct Harness {
    pub plugin: Plugin,
    pub store: Store,
}

impl Harness {
    pub fn new(store: Store) -> Self {
        Self {
            plugin: toolshed_tables::plugin(store.clone()),
            store,
        }
    }

    pub async fn memory() -> Self {
        Self::new(Store::open("sqlite::memory:").await.unwrap())
    }

    /// Calls a tool's handler directly, the way the engine does after validation.
    pub async fn call(&self, path: &str, args: Value) -> Result<Value, ToolError> {
        let tool = self
            .plugin
            .tools
            .iter()
            .find(|t| t.def.path.as_str() == path)
            .unwrap_or_else(|| panic!("no tool {path}"));
        let ctx = ToolContext::new(Arc::from("tester"), ToolPath::parse(path).unwrap());
        tool.handler.call(ctx, args).await
    }

    pub async fn ok(&self, path: &str, args: Value) -> Value {
        match self.call(path, args.clone()).await {
            Ok(v) => v,
            Err(e) => panic!("{path} {args} failed: {e:?}"),
        }
    }

    pub async fn err(&self, path: &str, args: Value) -> ToolError {
        match self.call(path, args.clone()).await {
            Ok(v) => panic!("{path} {args} should fail, returned {v}"),
            Err(e) => e,
        }
    }

    /// Ids of the rows a query returns, in order.
    pub async fn ids(&self, table: &str, extra: Value) -> Vec<i64> {
        let mut args = json!({"table": table});
        if let Value::Object(m) = extra {
            for (k, v) in m {
                args[k] = v;
            }
        }
        self.ok("tables.rows.query", args).await["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    }

    pub async fn all_rows(&self, table: &str) -> Vec<Value> {
        self.ok("tables.rows.query", json!({"table": table, "limit": 1000}))
            .await["rows"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Creates `people` with one column of each type and four rows (ids 1..=4).
    pub async fn people(&self) {
        self.ok(
            "tables.create",
            json!({"name": "people", "columns": [
                {"name": "name", "type": "string"},
                {"name": "age", "type": "number"},
                {"name": "active", "type": "boolean"},
                {"name": "born", "type": "date"},
                {"name": "meta", "type": "json"}
            ]}),
        )
        .await;
        self.ok(
            "tables.rows.insert",
            json!({"table": "people", "rows": [
                {"name": "Ada", "age": 36, "active": true, "born": "1815-12-10", "meta": {"tags": ["math"]}},
                {"name": "Alan", "age": 41, "active": false, "born": "1912-06-23T00:00:00+01:00", "meta": ["a", "b"]},
                {"name": "Grace", "age": 85, "active": true, "born": "1906-12-09"},
                {"name": "Bob", "age": 9}
            ]}),
        )
        .await;
    }
}

/// The main scenario, run against SQLite and (when reachable) PostgreSQL.
pub async fn main_scenario(h: &Harness) {
    h.people().await;
    let list = h.ok("tables.list", json!({})).await;
    assert_eq!(list["tables"][0]["name"], "people");
    assert_eq!(list["tables"][0]["rowCount"], 4);

    let schema = h.ok("tables.get_schema", json!({"name": "people"})).await;
    let names: Vec<&str> = schema["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "id",
            "name",
            "age",
            "active",
            "born",
            "meta",
            "createdAt",
            "updatedAt"
        ]
    );

    assert_eq!(
        h.ids(
            "people",
            json!({"filter": {"column": "age", "op": "gte", "value": 41}, "sort": [{"column": "age", "direction": "desc"}]})
        )
        .await,
        vec![3, 2]
    );
    assert_eq!(
        h.ids(
            "people",
            json!({"filter": {"column": "born", "op": "lt", "value": "1910-01-01"}})
        )
        .await,
        vec![1, 3]
    );

    let up = h
        .ok(
            "tables.rows.update",
            json!({"table": "people", "filter": {"column": "name", "op": "eq", "value": "Bob"}, "set": {"age": 10, "active": true}}),
        )
        .await;
    assert_eq!(up["updated"], 1);
    assert_eq!(up["rows"][0]["age"], 10);

    let ups = h
        .ok(
            "tables.rows.upsert",
            json!({"table": "people", "match": ["name"], "rows": [{"name": "Ada", "age": 37}, {"name": "Edsger", "age": 72}]}),
        )
        .await;
    assert_eq!(
        (ups["inserted"].as_i64(), ups["updated"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(ups["rows"][1]["id"], 5);

    let e = h
        .err(
            "tables.rows.insert",
            json!({"table": "people", "rows": [{"name": "Ok"}, {"age": "old"}]}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    assert_eq!(h.all_rows("people").await.len(), 5);

    let del = h
        .ok(
            "tables.rows.delete",
            json!({"table": "people", "filter": {"column": "age", "op": "gt", "value": 50}}),
        )
        .await;
    assert_eq!(del["ids"], json!([3, 5]));
    h.ok(
        "tables.columns.rename",
        json!({"table": "people", "from": "age", "to": "years"}),
    )
    .await;
    assert_eq!(
        h.ids(
            "people",
            json!({"filter": {"column": "years", "op": "eq", "value": 37}})
        )
        .await,
        vec![1]
    );
    h.ok(
        "tables.columns.delete",
        json!({"table": "people", "column": "meta"}),
    )
    .await;
    let rows = h.all_rows("people").await;
    assert!(rows.iter().all(|r| r.get("meta").is_none()));

    let ins = h
        .ok(
            "tables.rows.insert",
            json!({"table": "people", "rows": [{"name": "Zed"}]}),
        )
        .await;
    assert_eq!(ins["rows"][0]["id"], 6, "ids are never reused");

    let dropped = h.ok("tables.delete", json!({"name": "people"})).await;
    assert_eq!(dropped["rowsDeleted"], 4);
    assert_eq!(h.ok("tables.list", json!({})).await["tables"], json!([]));
}

/// Runs `n` concurrent single-row inserts and checks every id is distinct and consecutive.
pub async fn concurrent_inserts(h: &Harness, n: usize) {
    h.ok(
        "tables.create",
        json!({"name": "hits", "columns": [{"name": "n", "type": "number"}]}),
    )
    .await;
    let mut tasks = Vec::new();
    for i in 0..n {
        let tool = h
            .plugin
            .tools
            .iter()
            .find(|t| t.def.path.as_str() == "tables.rows.insert")
            .unwrap()
            .clone();
        tasks.push(tokio::spawn(async move {
            let ctx = ToolContext::new(
                Arc::from("tester"),
                ToolPath::parse("tables.rows.insert").unwrap(),
            );
            tool.handler
                .call(ctx, json!({"table": "hits", "rows": [{"n": i}, {"n": i}]}))
                .await
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        let out = t.await.unwrap().unwrap();
        for r in out["rows"].as_array().unwrap() {
            ids.push(r["id"].as_i64().unwrap());
        }
    }
    ids.sort();
    let expected: Vec<i64> = (1..=(2 * n as i64)).collect();
    assert_eq!(ids, expected);
    assert_eq!(h.all_rows("hits").await.len(), 2 * n);
}
