//! Behaviour of the `tables.*` tools on SQLite, called through their handlers.

use crate::common;

use common::Harness;
use serde_json::{json, Value};
use toolshed_core::ToolErrorKind;

#[tokio::test]
async fn main_scenario_on_sqlite_memory() {
    common::main_scenario(&Harness::memory().await).await;
}

#[tokio::test]
async fn main_scenario_on_sqlite_file_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = toolshed_store::Store::open_dir(dir.path()).await.unwrap();
    let h = Harness::new(store.clone());
    h.people().await;
    store.close().await;
    let h = Harness::new(toolshed_store::Store::open_dir(dir.path()).await.unwrap());
    assert_eq!(h.all_rows("people").await.len(), 4);
    h.ok("tables.delete", json!({"name": "people"})).await;
    common::main_scenario(&h).await;
}

#[tokio::test]
async fn create_list_and_schema() {
    let h = Harness::memory().await;
    let created = h
        .ok(
            "tables.create",
            json!({"name": "orders", "columns": [{"name": "total", "type": "number"}, {"name": "when", "type": "date"}]}),
        )
        .await;
    assert_eq!(created["rowCount"], 0);
    h.ok("tables.create", json!({"name": "a_table", "columns": []}))
        .await;
    let list = h.ok("tables.list", json!({})).await;
    assert_eq!(
        list,
        json!({"tables": [
            {"name": "a_table", "columns": [], "rowCount": 0},
            {"name": "orders", "columns": [{"name": "total", "type": "number"}, {"name": "when", "type": "date"}], "rowCount": 0}
        ]})
    );
    let schema = h.ok("tables.get_schema", json!({"name": "orders"})).await;
    assert_eq!(
        schema["columns"],
        json!([
            {"name": "id", "type": "integer", "managed": true},
            {"name": "total", "type": "number", "managed": false},
            {"name": "when", "type": "date", "managed": false},
            {"name": "createdAt", "type": "date", "managed": true},
            {"name": "updatedAt", "type": "date", "managed": true}
        ])
    );
    assert!(schema["createdAt"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn inserted_rows_have_managed_columns_and_normalised_dates() {
    let h = Harness::memory().await;
    h.people().await;
    let rows = h.all_rows("people").await;
    assert_eq!(rows.len(), 4);
    let alan = &rows[1];
    assert_eq!(alan["id"], 2);
    assert_eq!(alan["born"], "1912-06-22T23:00:00.000Z");
    assert_eq!(alan["meta"], json!(["a", "b"]));
    let bob = &rows[3];
    assert_eq!(bob["active"], Value::Null);
    assert_eq!(bob["born"], Value::Null);
    let keys: Vec<&String> = bob.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
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
    assert_eq!(bob["createdAt"], bob["updatedAt"]);
    assert!(toolshed_tables::columns::parse_date(bob["createdAt"].as_str().unwrap()).is_some());
}

#[tokio::test]
async fn every_filter_op() {
    let h = Harness::memory().await;
    h.people().await;
    let q = |f: Value| {
        let h = &h;
        async move { h.ids("people", json!({"filter": f})).await }
    };
    let c = |col: &str, op: &str, v: Value| json!({"column": col, "op": op, "value": v});
    assert_eq!(q(c("name", "eq", json!("Ada"))).await, vec![1]);
    assert_eq!(q(c("age", "eq", json!(36.0))).await, vec![1]);
    assert_eq!(q(c("active", "ne", json!(true))).await, vec![2, 4]);
    assert_eq!(q(c("age", "gt", json!(41))).await, vec![3]);
    assert_eq!(q(c("age", "gte", json!(41))).await, vec![2, 3]);
    assert_eq!(q(c("age", "lt", json!(36))).await, vec![4]);
    assert_eq!(q(c("age", "lte", json!(36))).await, vec![1, 4]);
    assert_eq!(q(c("name", "contains", json!("a"))).await, vec![1, 2, 3]);
    assert_eq!(q(c("name", "contains", json!("ra"))).await, vec![3]);
    assert_eq!(q(c("meta", "contains", json!("b"))).await, vec![2]);
    assert_eq!(q(c("name", "startsWith", json!("A"))).await, vec![1, 2]);
    assert_eq!(
        q(c("name", "in", json!(["Bob", "Ada", "Nobody"]))).await,
        vec![1, 4]
    );
    assert_eq!(q(json!({"column": "born", "op": "isNull"})).await, vec![4]);
    assert_eq!(
        q(json!({"column": "meta", "op": "isNotNull"})).await,
        vec![1, 2]
    );
    assert_eq!(
        q(c("born", "gt", json!("1900-01-01T00:00:00Z"))).await,
        vec![2, 3]
    );
    assert_eq!(
        q(c("born", "eq", json!("1912-06-23T00:00:00+01:00"))).await,
        vec![2]
    );
    assert_eq!(q(c("id", "gte", json!(3))).await, vec![3, 4]);
    assert_eq!(q(c("createdAt", "lte", json!("2999-01-01"))).await.len(), 4);
    assert_eq!(q(c("meta", "eq", json!({"tags": ["math"]}))).await, vec![1]);
    assert_eq!(
        q(json!({"and": [c("active", "eq", json!(true)), c("age", "lt", json!(50))]})).await,
        vec![1]
    );
    assert_eq!(
        q(json!({"or": [c("name", "eq", json!("Bob")), c("age", "gt", json!(80))]})).await,
        vec![3, 4]
    );
    assert_eq!(
        q(json!({"not": c("name", "startsWith", json!("A"))})).await,
        vec![3, 4]
    );
    assert_eq!(q(json!({})).await, vec![1, 2, 3, 4]);
}

#[tokio::test]
async fn sort_and_paging() {
    let h = Harness::memory().await;
    h.people().await;
    let sort = |s: Value| {
        let h = &h;
        async move { h.ids("people", json!({"sort": s})).await }
    };
    assert_eq!(sort(json!([{"column": "age"}])).await, vec![4, 1, 2, 3]);
    assert_eq!(
        sort(json!([{"column": "born", "direction": "desc"}])).await,
        vec![2, 3, 1, 4],
        "dates chronologically, nulls last"
    );
    assert_eq!(sort(json!([{"column": "born"}])).await, vec![1, 3, 2, 4]);
    assert_eq!(
        sort(json!([{"column": "active", "direction": "desc"}, {"column": "name", "direction": "desc"}])).await,
        vec![3, 1, 2, 4]
    );
    let page = h
        .ok(
            "tables.rows.query",
            json!({"table": "people", "sort": [{"column": "age", "direction": "desc"}], "limit": 2, "offset": 1}),
        )
        .await;
    assert_eq!(page["total"], 4);
    let ids: Vec<i64> = page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![2, 1]);
    let past = h
        .ok(
            "tables.rows.query",
            json!({"table": "people", "offset": 10}),
        )
        .await;
    assert_eq!(
        (
            past["total"].as_i64(),
            past["rows"].as_array().unwrap().len()
        ),
        (Some(4), 0)
    );
    let e = h
        .err(
            "tables.rows.query",
            json!({"table": "people", "limit": 1001}),
        )
        .await;
    assert!(e.message.contains("1000"), "{e}");
    let e = h
        .err("tables.rows.query", json!({"table": "people", "limit": 0}))
        .await;
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
}

#[tokio::test]
async fn default_limit_is_100() {
    let h = Harness::memory().await;
    h.ok(
        "tables.create",
        json!({"name": "many", "columns": [{"name": "n", "type": "number"}]}),
    )
    .await;
    let rows: Vec<Value> = (0..150).map(|n| json!({"n": n})).collect();
    h.ok("tables.rows.insert", json!({"table": "many", "rows": rows}))
        .await;
    let out = h.ok("tables.rows.query", json!({"table": "many"})).await;
    assert_eq!(out["total"], 150);
    assert_eq!(out["rows"].as_array().unwrap().len(), 100);
}

#[tokio::test]
async fn update_sets_and_clears() {
    let h = Harness::memory().await;
    h.people().await;
    let before = h.all_rows("people").await;
    let out = h
        .ok(
            "tables.rows.update",
            json!({"table": "people", "filter": {"column": "active", "op": "eq", "value": true},
                   "set": {"age": 1, "born": "2000-01-02", "meta": null}}),
        )
        .await;
    assert_eq!(out["updated"], 2);
    let after = h.all_rows("people").await;
    for id in [0, 2] {
        assert_eq!(after[id]["age"], 1);
        assert_eq!(after[id]["born"], "2000-01-02T00:00:00.000Z");
        assert_eq!(after[id]["meta"], Value::Null);
        assert_eq!(after[id]["name"], before[id]["name"]);
        assert_eq!(after[id]["createdAt"], before[id]["createdAt"]);
    }
    assert_eq!(after[1], before[1]);
    assert_eq!(after[3], before[3]);
    let all = h
        .ok(
            "tables.rows.update",
            json!({"table": "people", "all": true, "set": {"active": false}}),
        )
        .await;
    assert_eq!(all["updated"], 4);
    let none = h
        .ok(
            "tables.rows.update",
            json!({"table": "people", "filter": {"column": "name", "op": "eq", "value": "Nobody"}, "set": {"age": 3}}),
        )
        .await;
    assert_eq!(none, json!({"updated": 0, "rows": []}));
}

#[tokio::test]
async fn update_type_mismatch_leaves_rows_unchanged() {
    let h = Harness::memory().await;
    h.people().await;
    let before = h.all_rows("people").await;
    let e = h
        .err(
            "tables.rows.update",
            json!({"table": "people", "all": true, "set": {"name": "X", "age": "ten"}}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    assert!(
        e.message.contains("'age'") && e.message.contains("expected number, got string"),
        "{e}"
    );
    let e = h
        .err(
            "tables.rows.update",
            json!({"table": "people", "all": true, "set": {"id": 9}}),
        )
        .await;
    assert!(e.message.contains("managed automatically"), "{e}");
    let e = h
        .err(
            "tables.rows.update",
            json!({"table": "people", "set": {"age": 1}}),
        )
        .await;
    assert!(e.message.contains("all"), "{e}");
    assert_eq!(h.all_rows("people").await, before);
}

#[tokio::test]
async fn upsert_updates_or_inserts() {
    let h = Harness::memory().await;
    h.people().await;
    let out = h
        .ok(
            "tables.rows.upsert",
            json!({"table": "people", "match": ["name"], "rows": [
                {"name": "Grace", "age": 86},
                {"name": "Linus", "age": 30},
                {"name": "Linus", "active": true}
            ]}),
        )
        .await;
    assert_eq!(out["inserted"], 1);
    assert_eq!(out["updated"], 1);
    assert_eq!(out["rows"][0]["id"], 3);
    assert_eq!(out["rows"][0]["age"], 86);
    assert_eq!(
        out["rows"][0]["born"], "1906-12-09T00:00:00.000Z",
        "other values kept"
    );
    assert_eq!(out["rows"][1]["id"], 5);
    assert_eq!(out["rows"][2]["id"], 5);
    assert_eq!(out["rows"][2]["age"], 30);
    assert_eq!(out["rows"][2]["active"], true);
    assert_eq!(h.all_rows("people").await.len(), 5);

    // Matching on two columns, with typed equality on dates.
    let out = h
        .ok(
            "tables.rows.upsert",
            json!({"table": "people", "match": ["name", "born"], "rows": [
                {"name": "Ada", "born": "1815-12-10T00:00:00Z", "age": 1},
                {"name": "Ada", "born": "1815-12-11", "age": 2}
            ]}),
        )
        .await;
    assert_eq!(
        (out["updated"].as_i64(), out["inserted"].as_i64()),
        (Some(1), Some(1))
    );

    let e = h
        .err(
            "tables.rows.upsert",
            json!({"table": "people", "match": ["name"], "rows": [{"age": 3}]}),
        )
        .await;
    assert!(e.message.contains("match column 'name'"), "{e}");
    let e = h
        .err(
            "tables.rows.upsert",
            json!({"table": "people", "match": ["nope"], "rows": [{"age": 3}]}),
        )
        .await;
    assert!(e.message.contains("'nope'"), "{e}");
    let before = h.all_rows("people").await;
    let e = h
        .err(
            "tables.rows.upsert",
            json!({"table": "people", "match": ["name"], "rows": [{"name": "New"}, {"name": "Ada", "age": true}]}),
        )
        .await;
    assert!(e.message.contains("row 1"), "{e}");
    assert_eq!(h.all_rows("people").await, before, "nothing written");
}

#[tokio::test]
async fn delete_rows_with_filter_and_guard() {
    let h = Harness::memory().await;
    h.people().await;
    for args in [
        json!({"table": "people"}),
        json!({"table": "people", "filter": {}}),
        json!({"table": "people", "all": false}),
    ] {
        let e = h.err("tables.rows.delete", args).await;
        assert_eq!(e.kind, ToolErrorKind::InvalidInput);
        assert!(e.message.contains("\"all\": true"), "{e}");
    }
    let e = h
        .err(
            "tables.rows.delete",
            json!({"table": "people", "all": true, "filter": {"column": "age", "op": "isNull"}}),
        )
        .await;
    assert!(e.message.contains("not both"), "{e}");
    assert_eq!(h.all_rows("people").await.len(), 4);

    let out = h
        .ok(
            "tables.rows.delete",
            json!({"table": "people", "filter": {"column": "active", "op": "eq", "value": false}}),
        )
        .await;
    assert_eq!(out, json!({"deleted": 1, "ids": [2]}));
    assert_eq!(h.ids("people", json!({})).await, vec![1, 3, 4]);
    let out = h
        .ok(
            "tables.rows.delete",
            json!({"table": "people", "all": true}),
        )
        .await;
    assert_eq!(out["deleted"], 3);
    assert!(h.all_rows("people").await.is_empty());
    let schema = h.ok("tables.get_schema", json!({"name": "people"})).await;
    assert_eq!(schema["rowCount"], 0);
}

/// A filter that selects every row by its structure (`{"and": [{}]}` and the like) needs
/// `all: true` just as `{}` does, for updates and deletes; a real condition still works alone.
#[tokio::test]
async fn match_all_filters_need_all_true() {
    let h = Harness::memory().await;
    h.people().await;
    let cond = json!({"column": "active", "op": "eq", "value": false});
    for filter in [
        json!({"and": [{}]}),
        json!({"or": [cond.clone(), {}]}),
        json!({"and": [{}, {"or": [{"and": [{}]}]}]}),
        json!({"not": {"not": {}}}),
    ] {
        let e = h
            .err(
                "tables.rows.delete",
                json!({"table": "people", "filter": filter.clone()}),
            )
            .await;
        assert_eq!(e.kind, ToolErrorKind::InvalidInput, "{filter}");
        assert!(e.message.contains("\"all\": true"), "{filter}: {e}");
        let e = h
            .err(
                "tables.rows.update",
                json!({"table": "people", "filter": filter.clone(), "set": {"age": 1}}),
            )
            .await;
        assert!(e.message.contains("\"all\": true"), "{filter}: {e}");
    }
    assert_eq!(h.all_rows("people").await.len(), 4, "nothing deleted");
    let out = h
        .ok(
            "tables.rows.update",
            json!({"table": "people", "filter": {"and": [{}, cond.clone()]}, "set": {"age": 1}}),
        )
        .await;
    assert_eq!(out["updated"], 1, "{out}");
    let out = h
        .ok(
            "tables.rows.delete",
            json!({"table": "people", "filter": {"and": [{}, cond]}}),
        )
        .await;
    assert_eq!(out, json!({"deleted": 1, "ids": [2]}));
}

#[tokio::test]
async fn columns_add_delete_rename_preserve_data() {
    let h = Harness::memory().await;
    h.people().await;
    h.ok(
        "tables.columns.add",
        json!({"table": "people", "column": {"name": "email", "type": "string"}}),
    )
    .await;
    let rows = h.all_rows("people").await;
    assert!(rows.iter().all(|r| r["email"].is_null()));
    h.ok(
        "tables.rows.update",
        json!({"table": "people", "filter": {"column": "id", "op": "eq", "value": 1}, "set": {"email": "ada@example.com"}}),
    )
    .await;

    let renamed = h
        .ok(
            "tables.columns.rename",
            json!({"table": "people", "from": "name", "to": "fullName"}),
        )
        .await;
    assert_eq!(renamed["columns"][1]["name"], "fullName", "position kept");
    let rows = h.all_rows("people").await;
    assert_eq!(rows[0]["fullName"], "Ada");
    assert_eq!(rows[2]["fullName"], "Grace");
    assert!(rows[0].get("name").is_none());
    assert_eq!(rows[0]["email"], "ada@example.com");
    assert_eq!(
        h.ids(
            "people",
            json!({"filter": {"column": "fullName", "op": "eq", "value": "Alan"}})
        )
        .await,
        vec![2]
    );
    let e = h
        .err(
            "tables.rows.query",
            json!({"table": "people", "filter": {"column": "name", "op": "eq", "value": "Alan"}}),
        )
        .await;
    assert!(e.message.contains("'name'"), "{e}");

    let out = h
        .ok(
            "tables.columns.delete",
            json!({"table": "people", "column": "meta"}),
        )
        .await;
    assert_eq!(out["valuesRemoved"], 2);
    let rows = h.all_rows("people").await;
    assert!(rows.iter().all(|r| r.get("meta").is_none()));
    assert_eq!(rows[1]["age"], 41);
    // A re-added column starts empty: the old values are gone.
    h.ok(
        "tables.columns.add",
        json!({"table": "people", "column": {"name": "meta", "type": "json"}}),
    )
    .await;
    assert!(h
        .all_rows("people")
        .await
        .iter()
        .all(|r| r["meta"].is_null()));

    // Bad column operations.
    let e = h
        .err(
            "tables.columns.add",
            json!({"table": "people", "column": {"name": "age", "type": "number"}}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::Conflict);
    let e = h
        .err(
            "tables.columns.add",
            json!({"table": "people", "column": {"name": "createdAt", "type": "date"}}),
        )
        .await;
    assert!(e.message.contains("reserved"), "{e}");
    let e = h
        .err(
            "tables.columns.delete",
            json!({"table": "people", "column": "nope"}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::NotFound);
    assert!(e.message.contains("'nope'"), "{e}");
    let e = h
        .err(
            "tables.columns.delete",
            json!({"table": "people", "column": "id"}),
        )
        .await;
    assert!(e.message.contains("managed"), "{e}");
    let e = h
        .err(
            "tables.columns.rename",
            json!({"table": "people", "from": "age", "to": "email"}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::Conflict);
    let e = h
        .err(
            "tables.columns.rename",
            json!({"table": "people", "from": "age", "to": "updatedAt"}),
        )
        .await;
    assert!(e.message.contains("reserved"), "{e}");
    let e = h
        .err(
            "tables.columns.rename",
            json!({"table": "people", "from": "age", "to": "bad name"}),
        )
        .await;
    assert!(e.message.contains("invalid column name"), "{e}");
}

#[tokio::test]
async fn bad_table_definitions() {
    let h = Harness::memory().await;
    h.ok("tables.create", json!({"name": "t", "columns": []}))
        .await;
    let e = h
        .err(
            "tables.create",
            json!({"name": "t", "columns": [{"name": "x", "type": "string"}]}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::Conflict);
    assert!(e.message.contains("'t'"), "{e}");

    let e = h
        .err(
            "tables.create",
            json!({"name": "u", "columns": [{"name": "x", "type": "string"}, {"name": "x", "type": "number"}]}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    assert!(
        e.message.contains("'x'") && e.message.contains("more than once"),
        "{e}"
    );

    for reserved in ["id", "createdAt", "updatedAt"] {
        let e = h
            .err(
                "tables.create",
                json!({"name": "u", "columns": [{"name": reserved, "type": "string"}]}),
            )
            .await;
        assert!(e.message.contains("reserved"), "{e}");
        assert!(e.message.contains(reserved), "{e}");
    }
    for bad in ["1abc", "a b", "", "é", &"x".repeat(64)] {
        let e = h
            .err("tables.create", json!({"name": bad, "columns": []}))
            .await;
        assert!(e.message.contains("invalid table name"), "{e}");
    }
    let e = h
        .err(
            "tables.create",
            json!({"name": "u", "columns": [{"name": "x", "type": "text"}]}),
        )
        .await;
    assert!(e.message.contains("invalid arguments"), "{e}");
    let e = h
        .err(
            "tables.create",
            json!({"name": "u", "columns": [], "extra": true}),
        )
        .await;
    assert!(e.message.contains("extra"), "{e}");
    // Nothing but the first table was created.
    assert_eq!(
        h.ok("tables.list", json!({})).await["tables"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn insert_type_mismatch_stores_nothing() {
    let h = Harness::memory().await;
    h.people().await;
    let mut rows: Vec<Value> = (0..10)
        .map(|i| json!({"name": format!("p{i}"), "age": i}))
        .collect();
    rows[7] = json!({"name": "p7", "age": "seven"});
    let e = h
        .err(
            "tables.rows.insert",
            json!({"table": "people", "rows": rows}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    assert_eq!(
        e.message,
        "row 7, column 'age': expected number, got string"
    );
    let data = e.data.unwrap();
    assert_eq!(data["row"], 7);
    assert_eq!(data["column"], "age");
    assert_eq!(data["expected"], "number");
    assert_eq!(data["got"], "string");
    assert_eq!(h.all_rows("people").await.len(), 4);
    // The failed insert did not consume ids.
    let ok = h
        .ok(
            "tables.rows.insert",
            json!({"table": "people", "rows": [{"name": "next"}]}),
        )
        .await;
    assert_eq!(ok["rows"][0]["id"], 5);

    for (row, needle) in [
        (json!({"active": "yes"}), "expected boolean, got string"),
        (json!({"name": 5}), "expected string, got number"),
        (json!({"born": 20240101}), "expected date, got number"),
        (json!({"born": "2024-02-30"}), "not an ISO-8601 date"),
        (
            json!({"nope": 1, "nada": 2}),
            "unknown column(s) 'nope', 'nada'",
        ),
        (json!({"id": 3}), "managed automatically"),
        (json!({"createdAt": "2020-01-01"}), "managed automatically"),
        (json!("just a string"), "expected an object"),
    ] {
        let e = h
            .err(
                "tables.rows.insert",
                json!({"table": "people", "rows": [{"name": "ok"}, row]}),
            )
            .await;
        assert_eq!(e.kind, ToolErrorKind::InvalidInput);
        assert!(e.message.contains(needle), "{needle}: {e}");
        assert!(e.message.contains("row 1"), "{e}");
    }
    assert_eq!(h.all_rows("people").await.len(), 5);
    let e = h
        .err("tables.rows.insert", json!({"table": "people", "rows": []}))
        .await;
    assert!(e.message.contains("at least one row"), "{e}");
}

#[tokio::test]
async fn unknown_tables_and_columns() {
    let h = Harness::memory().await;
    h.people().await;
    for (path, args) in [
        ("tables.get_schema", json!({"name": "ghost"})),
        ("tables.delete", json!({"name": "ghost"})),
        ("tables.rows.query", json!({"table": "ghost"})),
        (
            "tables.rows.insert",
            json!({"table": "ghost", "rows": [{}]}),
        ),
        (
            "tables.rows.update",
            json!({"table": "ghost", "all": true, "set": {"a": 1}}),
        ),
        (
            "tables.rows.upsert",
            json!({"table": "ghost", "match": ["a"], "rows": [{"a": 1}]}),
        ),
        ("tables.rows.delete", json!({"table": "ghost", "all": true})),
        (
            "tables.columns.add",
            json!({"table": "ghost", "column": {"name": "a", "type": "json"}}),
        ),
        (
            "tables.columns.delete",
            json!({"table": "ghost", "column": "a"}),
        ),
        (
            "tables.columns.rename",
            json!({"table": "ghost", "from": "a", "to": "b"}),
        ),
    ] {
        let e = h.err(path, args).await;
        assert_eq!(e.kind, ToolErrorKind::NotFound, "{path}: {e}");
        assert!(e.message.contains("'ghost'"), "{path}: {e}");
    }
    let e = h
        .err(
            "tables.rows.query",
            json!({"table": "people", "filter": {"column": "salary", "op": "gt", "value": 1}}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    assert!(e.message.contains("'salary'"), "{e}");
    assert_eq!(e.data.unwrap()["unknownColumns"], json!(["salary"]));
    let e = h
        .err(
            "tables.rows.query",
            json!({"table": "people", "sort": [{"column": "salary"}]}),
        )
        .await;
    assert!(
        e.message.contains("sort") && e.message.contains("'salary'"),
        "{e}"
    );
    let e = h
        .err(
            "tables.rows.query",
            json!({"table": "people", "filter": {"and": [{"column": "age", "op": "gt", "value": 1}, {"column": "x", "op": "isNull"}]}}),
        )
        .await;
    assert!(e.message.contains("'x'"), "{e}");
    let e = h
        .err(
            "tables.rows.delete",
            json!({"table": "people", "filter": {"column": "x", "op": "isNull"}}),
        )
        .await;
    assert!(e.message.contains("'x'"), "{e}");
    let e = h
        .err(
            "tables.rows.query",
            json!({"table": "people", "filter": {"column": "born", "op": "gt", "value": "not a date"}}),
        )
        .await;
    assert!(e.message.contains("ISO-8601"), "{e}");
    assert_eq!(h.all_rows("people").await.len(), 4);
}

#[tokio::test]
async fn table_delete_removes_rows_and_frees_the_name() {
    let h = Harness::memory().await;
    h.people().await;
    let out = h.ok("tables.delete", json!({"name": "people"})).await;
    assert_eq!(out, json!({"deleted": "people", "rowsDeleted": 4}));
    h.ok(
        "tables.create",
        json!({"name": "people", "columns": [{"name": "name", "type": "string"}]}),
    )
    .await;
    assert!(h.all_rows("people").await.is_empty());
    let ins = h
        .ok(
            "tables.rows.insert",
            json!({"table": "people", "rows": [{"name": "again"}]}),
        )
        .await;
    assert_eq!(ins["rows"][0]["id"], 1);
}

#[tokio::test]
async fn annotations_and_definitions() {
    let h = Harness::memory().await;
    assert_eq!(h.plugin.id, "tables");
    assert_eq!(h.plugin.name, "Data Tables");
    let paths: Vec<&str> = h.plugin.tools.iter().map(|t| t.def.path.as_str()).collect();
    assert_eq!(paths, toolshed_tables::tools::PATHS);
    for t in &h.plugin.tools {
        let d = &t.def;
        let a = d.annotations;
        let destructive = matches!(
            d.path.as_str(),
            "tables.delete" | "tables.columns.delete" | "tables.rows.delete"
        );
        let read_only = matches!(
            d.path.as_str(),
            "tables.list" | "tables.get_schema" | "tables.rows.query"
        );
        assert_eq!(a.destructive, destructive, "{}", d.path);
        assert_eq!(a.read_only, read_only, "{}", d.path);
        assert!(
            d.name
                .split(' ')
                .all(|w| w.chars().next().unwrap().is_uppercase()),
            "{}",
            d.name
        );
        assert_eq!(d.origin, "plugin:tables");
        assert!(d.output_schema.is_some());
        assert_eq!(d.input_schema["additionalProperties"], false);
    }
    let create = h
        .plugin
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == "tables.create")
        .unwrap();
    assert!(!create.def.annotations.destructive);
}

#[tokio::test]
async fn outputs_match_their_schemas() {
    let h = Harness::memory().await;
    h.people().await;
    let calls = [
        ("tables.list", json!({})),
        ("tables.get_schema", json!({"name": "people"})),
        ("tables.rows.query", json!({"table": "people"})),
        (
            "tables.rows.insert",
            json!({"table": "people", "rows": [{"name": "x"}]}),
        ),
        (
            "tables.rows.update",
            json!({"table": "people", "all": true, "set": {"age": 2}}),
        ),
        (
            "tables.rows.upsert",
            json!({"table": "people", "match": ["name"], "rows": [{"name": "x"}]}),
        ),
        (
            "tables.columns.add",
            json!({"table": "people", "column": {"name": "c", "type": "string"}}),
        ),
        (
            "tables.columns.rename",
            json!({"table": "people", "from": "c", "to": "d"}),
        ),
        (
            "tables.columns.delete",
            json!({"table": "people", "column": "d"}),
        ),
        (
            "tables.rows.delete",
            json!({"table": "people", "filter": {"column": "name", "op": "eq", "value": "x"}}),
        ),
        ("tables.create", json!({"name": "other", "columns": []})),
        ("tables.delete", json!({"name": "other"})),
    ];
    for (path, args) in calls {
        let tool = h
            .plugin
            .tools
            .iter()
            .find(|t| t.def.path.as_str() == path)
            .unwrap();
        let input = toolshed_core::CompiledSchema::compile(&tool.def.input_schema).unwrap();
        assert!(input.is_valid(&args), "{path} input {args}");
        let out = h.ok(path, args).await;
        let schema =
            toolshed_core::CompiledSchema::compile(tool.def.output_schema.as_ref().unwrap())
                .unwrap();
        assert!(
            schema.validate(&out).is_ok(),
            "{path}: {:?} {out}",
            schema.validate(&out)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_inserts_get_unique_ids_on_a_file_database() {
    let dir = tempfile::tempdir().unwrap();
    let store = toolshed_store::Store::open_dir(dir.path()).await.unwrap();
    common::concurrent_inserts(&Harness::new(store), 24).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_inserts_get_unique_ids_in_memory() {
    common::concurrent_inserts(&Harness::memory().await, 16).await;
}
