//! Token budgets measured with the o200k tokenizer over every real fixture: the summary stays
//! under 1,000 tokens and every node detail under 20,000, whatever the page size; and nothing
//! secret or noisy (resume token, context data, stack traces, request headers) ever comes out.

use crate::common;

use common::{assert_clean, fixture, o200k, EXECUTIONS};
use serde_json::{json, Value};
use toolshed_n8n::debug::debug_execution;
use toolshed_n8n::execution::Execution;
use toolshed_n8n::node::{node_detail, NodeRequest, MAX_LIMIT};
use toolshed_n8n::summary::summarize;
use toolshed_n8n::{NODE_BUDGET, SUMMARY_BUDGET};

#[test]
fn summary_fits_for_every_fixture() {
    for name in EXECUTIONS {
        let raw = fixture(name);
        let s = summarize(&raw);
        let tokens = o200k(&s);
        println!("summary {name}: {tokens} tokens");
        assert!(tokens <= SUMMARY_BUDGET, "{name}: {tokens}");
        assert_clean(&s, name);
        assert!(s["_guidance"]["example"]
            .as_str()
            .unwrap()
            .starts_with("await tools.n8n.executions.get_node("));
    }
}

#[test]
fn node_detail_fits_for_every_node_of_every_fixture() {
    for name in EXECUTIONS {
        let raw = fixture(name);
        let names: Vec<String> = Execution::new(&raw)
            .nodes()
            .iter()
            .map(|n| n.name.to_string())
            .collect();
        for node in names {
            for limit in [10, MAX_LIMIT] {
                let mut req = NodeRequest::new(node.clone());
                req.limit = limit;
                let d = node_detail(&raw, &req).unwrap();
                let tokens = o200k(&d);
                println!("node {name} / {node} / limit {limit}: {tokens} tokens");
                assert!(tokens <= NODE_BUDGET, "{name} {node}: {tokens}");
                assert_clean(&d, &format!("{name} {node}"));
            }
        }
        let dbg = debug_execution(&raw);
        let tokens = o200k(&dbg);
        println!("debug {name}: {tokens} tokens");
        assert!(
            tokens <= toolshed_n8n::debug::DEBUG_BUDGET,
            "{name}: {tokens}"
        );
        assert_clean(&dbg, name);
    }
}

#[test]
fn two_thousand_items_are_paged_and_both_filter_outputs_read() {
    let raw = fixture("execution-big-id6.includeData.raw.json.gz");
    let s = summarize(&raw);
    assert_eq!(s["statistics"]["totalItemsProcessed"], 1 + 2000 + 2000);
    assert_eq!(s["duration"], 2106);
    let mut req = NodeRequest::new("Keep Even");
    req.offset = 990;
    req.limit = 50;
    let d = node_detail(&raw, &req).unwrap();
    let kept = &d["output"]["branches"][0];
    let discarded = &d["output"]["branches"][1];
    assert_eq!(kept["totalItems"], 1000);
    assert_eq!(discarded["totalItems"], 1000);
    assert_eq!(kept["returned"], 10);
    assert_eq!(kept["hasMore"], false);
    assert_eq!(kept["items"][0]["json"]["id"], 1980);
    assert_eq!(discarded["items"][0]["json"]["id"], 1981);
    // Input is the 2,000 rows of Generate Rows, not Keep Even's own output.
    assert_eq!(d["input"]["totalItems"], 2000);
    assert_eq!(d["input"]["items"][0]["json"]["id"], 990);
    assert_eq!(d["executionTime"], 1982);
    assert_eq!(d["endTime"], "2026-11-21T10:06:36.036Z");
}

#[test]
fn huge_items_are_shrunk_to_the_budget() {
    // 50 items of ~60 kB each, with unicode: far beyond any budget unless shrunk.
    let mut raw = fixture("execution-success-id1.includeData.raw.json");
    let big: Vec<Value> = (0..50)
        .map(|i| json!({"json": {"i": i, "blob": "é漢字 data ".repeat(6000), "list": (0..500).collect::<Vec<_>>()}}))
        .collect();
    raw["data"]["resultData"]["runData"]["Validate Order"][0]["data"]["main"][0] =
        Value::Array(big);
    let mut req = NodeRequest::new("Validate Order");
    req.limit = 50;
    let d = node_detail(&raw, &req).unwrap();
    let tokens = o200k(&d);
    println!("huge items: {tokens} tokens");
    assert!(tokens <= NODE_BUDGET);
    let items = d["output"]["branches"][0]["items"].as_array().unwrap();
    assert!(!items.is_empty());
    assert!(items[0]["json"]["blob"]
        .as_str()
        .unwrap()
        .contains("…[truncated"));
}

#[test]
fn estimator_is_never_below_o200k_on_fixtures() {
    for name in EXECUTIONS {
        let raw = fixture(name);
        let est = toolshed_n8n::sanitize::estimate_tokens(&raw);
        let real = o200k(&raw);
        println!("{name}: estimate {est}, o200k {real}");
        assert!(est >= real, "{name}: estimate {est} < real {real}");
    }
}
