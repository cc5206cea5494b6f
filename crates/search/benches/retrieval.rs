//! Retrieval quality on tool-retrieval sets laid out as `<dir>/<set>/{tools.jsonl,queries.jsonl,qrels.tsv}`.
//!
//! `cargo bench -p toolshed-search --bench retrieval -- /work/shared/bench/retrieval`
//! prints R@1, R@5, R@10, nDCG@10 and MRR per set (percentages). Options after the
//! directory override ranking parameters, for experiments:
//! `--k1 X`, `--weights p,n,d,pn,pd`, `--b p,n,d,pn,pd`, `--feedback docs,terms,weight`,
//! `--namespace weight,pool`, `--expand synonym,path_word,format`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;
use toolshed_search::{
    param_docs_from_schema, Bm25fConfig, ParamDoc, Query, SearchDoc, SearchIndex,
};

fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect()
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A tool row as the gateway would index it: the id becomes the dot path
/// (`server::tool` → `server.tool`), parameters come from the input schema or,
/// for API catalogs without one, from the listed argument names.
fn to_doc(row: &Value) -> SearchDoc {
    let id = text(row, "id");
    let mut params = row
        .get("input_schema")
        .map(param_docs_from_schema)
        .unwrap_or_default();
    match row.get("api_arguments") {
        Some(Value::Array(args)) => {
            params.extend(args.iter().filter_map(Value::as_str).map(|a| ParamDoc {
                name: a.to_string(),
                description: String::new(),
            }))
        }
        Some(Value::Object(args)) => params.extend(args.keys().map(|a| ParamDoc {
            name: a.clone(),
            description: String::new(),
        })),
        _ => {}
    }
    SearchDoc {
        path: id.replace("::", "."),
        name: text(row, "name"),
        description: text(row, "description"),
        params,
    }
}

#[derive(Default)]
struct Metrics {
    r1: f64,
    r5: f64,
    r10: f64,
    ndcg10: f64,
    mrr: f64,
    n: usize,
}

fn evaluate(dir: &Path, config: Bm25fConfig) -> Option<Metrics> {
    let tools_path = dir.join("tools.jsonl");
    if !tools_path.exists() {
        return None;
    }
    let tools = read_jsonl(&tools_path);
    let ids: Vec<String> = tools.iter().map(|t| text(t, "id")).collect();
    let docs: Vec<SearchDoc> = tools.iter().map(to_doc).collect();
    let index = SearchIndex::build_with(&docs, config);

    let mut relevant: HashMap<String, HashSet<usize>> = HashMap::new();
    let by_id: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let qrels = std::fs::read_to_string(dir.join("qrels.tsv")).expect("qrels.tsv");
    for line in qrels.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() >= 3 && cols[2].trim() != "0" {
            if let Some(&doc) = by_id.get(cols[1]) {
                relevant.entry(cols[0].to_string()).or_default().insert(doc);
            }
        }
    }

    let mut m = Metrics::default();
    for q in read_jsonl(&dir.join("queries.jsonl")) {
        let Some(rel) = relevant.get(&text(&q, "id")) else {
            continue;
        };
        let qtext = text(&q, "text");
        let result = index.search(&Query::new(&qtext, 10));
        let ranked: Vec<usize> = result.hits.iter().map(|h| h.doc).collect();
        let found = |k: usize| ranked.iter().take(k).filter(|d| rel.contains(d)).count() as f64;
        if std::env::var_os("RETRIEVAL_DEBUG").is_some() && found(5) < rel.len().min(5) as f64 {
            println!("Q {}", &qtext);
            for d in ranked.iter().take(5) {
                println!("   {} {}", if rel.contains(d) { "+" } else { "-" }, ids[*d]);
            }
            for d in rel
                .iter()
                .filter(|d| !ranked[..ranked.len().min(5)].contains(d))
            {
                println!("   missed {}", ids[*d]);
            }
        }
        let denom = rel.len() as f64;
        m.r1 += found(1) / denom;
        m.r5 += found(5) / denom;
        m.r10 += found(10) / denom;
        let dcg: f64 = ranked
            .iter()
            .enumerate()
            .filter(|(_, d)| rel.contains(d))
            .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
            .sum();
        let idcg: f64 = (0..rel.len().min(10))
            .map(|i| 1.0 / ((i + 2) as f64).log2())
            .sum();
        m.ndcg10 += dcg / idcg;
        if let Some(pos) = ranked.iter().position(|d| rel.contains(d)) {
            m.mrr += 1.0 / (pos + 1) as f64;
        }
        m.n += 1;
    }
    Some(m)
}

fn floats(s: &str) -> Vec<f32> {
    s.split(',')
        .map(|x| x.trim().parse().expect("number"))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some(root) = args.first().map(PathBuf::from) else {
        eprintln!("usage: cargo bench -p toolshed-search --bench retrieval -- <retrieval-dir> [--k1 X] [--weights ..] [--b ..] [--feedback d,t,w]");
        eprintln!("no directory given: nothing measured");
        return;
    };
    if !root.is_dir() {
        eprintln!(
            "retrieval directory {} is absent: nothing measured",
            root.display()
        );
        return;
    }
    let mut config = Bm25fConfig::default();
    let mut it = args[1..].iter();
    while let Some(flag) = it.next() {
        let value = it.next().expect("flag value");
        match flag.as_str() {
            "--k1" => config.k1 = value.parse().expect("k1"),
            "--weights" => {
                for (f, w) in config.fields.iter_mut().zip(floats(value)) {
                    f.weight = w;
                }
            }
            "--b" => {
                for (f, b) in config.fields.iter_mut().zip(floats(value)) {
                    f.b = b;
                }
            }
            "--feedback" => {
                let v = floats(value);
                config.feedback_docs = v[0] as usize;
                config.feedback_terms = v[1] as usize;
                config.feedback_weight = v[2];
            }
            "--namespace" => {
                let v = floats(value);
                config.namespace_weight = v[0];
                config.namespace_pool = v.get(1).copied().unwrap_or(0.0) as u8;
            }
            "--expand" => {
                let v = floats(value);
                config.synonym_weight = v[0];
                config.path_word_weight = v[1];
                config.format_weight = v[2];
            }
            other => panic!("unknown option {other}"),
        }
    }

    let mut sets: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("readable directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("tools.jsonl").exists())
        .collect();
    sets.sort();
    println!("{config:?}");
    println!(
        "{:<20} {:>7} {:>6} {:>6} {:>6} {:>8} {:>6} {:>8}",
        "set", "queries", "R@1", "R@5", "R@10", "nDCG@10", "MRR", "time"
    );
    for set in sets {
        let start = Instant::now();
        let Some(m) = evaluate(&set, config) else {
            continue;
        };
        let n = m.n.max(1) as f64 / 100.0;
        println!(
            "{:<20} {:>7} {:>6.1} {:>6.1} {:>6.1} {:>8.1} {:>6.1} {:>7.2}s",
            set.file_name().unwrap_or_default().to_string_lossy(),
            m.n,
            m.r1 / n,
            m.r5 / n,
            m.r10 / n,
            m.ndcg10 / n,
            m.mrr / n,
            start.elapsed().as_secs_f64()
        );
    }
}
