//! Token cost of a 10-hit `search_tools` answer as agents receive it over MCP (o200k).
//!
//! `cargo bench -p toolshed-mcp --bench answer_tokens -- /path/to/bench/retrieval/livemcpbench`
//! imports the set's tools (`tools.jsonl`) as a catalog, runs every query of `queries.jsonl`
//! through the engine's search with limit 10, renders the MCP answer text and counts its tokens.
//! Prints mean, p95 and max, and the same for the JSON form (`format: "json"`) for comparison.
//! With `ANSWER_LARGEST=1` it also prints the largest text answer and its request.
//!
//! Built with `--features semantic` and run with `TOOLSHED_SEARCH_MODEL=<model folder>`, the
//! engine ranks as the server does by default (BM25F fused with the embedding model), so the
//! answers measured are the hybrid ranking's; otherwise they are the lexical ranking's. The
//! first line printed says which.

use std::sync::Arc;

use serde_json::Value;
use toolshed_core::path::to_segment;
use toolshed_core::{
    CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig, Face};
use toolshed_store::Store;
use toolshed_testing::retrieval_set;

fn stats(mut v: Vec<usize>) -> String {
    v.sort();
    let mean = v.iter().sum::<usize>() as f64 / v.len().max(1) as f64;
    let p95 = v[((v.len() - 1) as f64 * 0.95) as usize];
    format!("mean {mean:.0}, p95 {p95}, max {}", v.last().unwrap())
}

/// The engine with the model of `TOOLSHED_SEARCH_MODEL` attached, when the bench is built with
/// the `semantic` feature and the variable is set.
#[cfg(feature = "semantic")]
fn with_model(engine: Engine) -> Engine {
    let Some(dir) = std::env::var_os("TOOLSHED_SEARCH_MODEL") else {
        return engine;
    };
    let model = toolshed_search::Embedder::load(&dir)
        .unwrap_or_else(|e| panic!("TOOLSHED_SEARCH_MODEL={}: {e}", dir.to_string_lossy()));
    engine.with_embedder(Arc::new(model), None)
}

#[cfg(not(feature = "semantic"))]
fn with_model(engine: Engine) -> Engine {
    if std::env::var_os("TOOLSHED_SEARCH_MODEL").is_some() {
        println!("TOOLSHED_SEARCH_MODEL is ignored: build the bench with --features semantic");
    }
    engine
}

fn main() {
    let dir = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_else(|| "../../../../shared/bench/retrieval/livemcpbench".into());
    let dir = std::path::PathBuf::from(dir);
    if !dir.join("tools.jsonl").exists() {
        println!(
            "no tools.jsonl under {}: pass the livemcpbench folder as an argument",
            dir.display()
        );
        return;
    }
    let queries: Vec<String> = retrieval_set::read_queries(&dir.join("queries.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|q| q.text)
        .collect();
    let mut b = CatalogBuilder::new();
    let mut seen = std::collections::HashSet::new();
    let tools =
        retrieval_set::read_tools(&dir.join("tools.jsonl")).unwrap_or_else(|e| panic!("{e}"));
    for t in tools {
        let id = t.id.as_str();
        let (server, name) = id.split_once("::").unwrap_or(("tools", id));
        let path = format!("{}.{}", to_segment(server), to_segment(name));
        if !seen.insert(path.clone()) {
            continue;
        }
        let Ok(path) = ToolPath::parse(&path) else {
            continue;
        };
        let def = ToolDef::new(path, toolshed_core::tool::title_case(name), &t.description)
            .with_input(
                t.schema
                    .clone()
                    .unwrap_or(serde_json::json!({"type": "object"})),
            );
        b.add_tool(Tool::from_fn(def, |_c, _a| async { Ok(Value::Null) }));
    }
    let bpe = tiktoken_rs::o200k_base().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let policy = Policy::new(
            vec![Role {
                id: "all".into(),
                name: String::new(),
                patterns: vec!["*".into()],
                ..Default::default()
            }],
            vec![Principal {
                id: "me".into(),
                roles: vec!["all".into()],
            }],
        )
        .unwrap();
        let catalog = b.build().unwrap();
        let n = catalog.len();
        let engine = with_model(Engine::new(
            Arc::new(SharedCatalog::new(catalog)),
            policy,
            Store::open("sqlite::memory:").await.unwrap(),
            EngineConfig::default(),
        ));
        // Embedding the catalog runs in the background; measure once it ranks with it.
        let ready = engine.wait_semantic_search(std::time::Duration::from_secs(3600));
        assert_eq!(ready, Ok(true), "embedding the catalog did not finish");
        println!("ranking: {}", engine.search_state().as_str());
        let caller = engine.caller("me", Face::Mcp);
        let (mut text_tokens, mut json_tokens) = (Vec::new(), Vec::new());
        let mut largest = (0, String::new());
        for q in &queries {
            let answer = engine.search(&caller, q, 10, None);
            if answer.hits.len() < 10 {
                continue;
            }
            let text = toolshed_mcp::search_text(&answer);
            let tokens = bpe.encode_ordinary(&text).len();
            if tokens > largest.0 {
                largest = (tokens, format!("{q}\n{text}"));
            }
            text_tokens.push(tokens);
            json_tokens.push(
                bpe.encode_ordinary(&serde_json::to_string(&answer).unwrap())
                    .len(),
            );
        }
        println!(
            "catalog: {n} tools; {} queries with 10 hits",
            text_tokens.len()
        );
        println!(
            "10-hit search_tools answer, text (default): {}",
            stats(text_tokens)
        );
        println!(
            "10-hit search_tools answer, json:           {}",
            stats(json_tokens)
        );
        if std::env::var_os("ANSWER_LARGEST").is_some() {
            println!(
                "largest text answer ({} tokens), for the request:\n{}",
                largest.0, largest.1
            );
        }
    });
}
