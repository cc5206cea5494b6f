//! Search latency over synthetic catalogs of 10,000 and 125,000 tools.
//!
//! `cargo bench -p toolshed-search --bench latency` builds each catalog from a fixed
//! vocabulary with a deterministic generator, runs a fixed mix of queries (short,
//! long natural-language, namespace-scoped, filtered) and prints p50/p99/max.
//!
//! With `--features semantic` and `TOOLSHED_SEARCH_MODEL` set it also measures the hybrid
//! search: it embeds the first [`EMBEDDED`] tools of each catalog with the model (and prints
//! the rate, tools per second), gives every other tool one of those vectors in turn (the scan
//! costs the same whatever the vectors hold), and times whole searches: the query embedded by
//! the model (no cache), the cosine scan over every tool and the fusion. It prints the memory
//! the vectors take (f32, and the 8-bit copies a large catalog is scanned on).

use std::time::{Duration, Instant};

use toolshed_search::{ParamDoc, Query, SearchDoc, SearchIndex};

const NOUNS: &[&str] = &[
    "issue",
    "repository",
    "pull",
    "request",
    "comment",
    "user",
    "team",
    "invoice",
    "customer",
    "payment",
    "order",
    "product",
    "file",
    "folder",
    "document",
    "sheet",
    "row",
    "column",
    "table",
    "message",
    "channel",
    "email",
    "calendar",
    "event",
    "meeting",
    "ticket",
    "project",
    "task",
    "deployment",
    "cluster",
    "pod",
    "secret",
    "key",
    "token",
    "webhook",
    "subscription",
    "plan",
    "report",
    "chart",
    "dashboard",
    "metric",
    "alert",
    "incident",
    "page",
    "article",
    "image",
    "video",
    "playlist",
    "track",
    "album",
    "station",
    "route",
    "place",
    "weather",
    "forecast",
    "stock",
    "price",
    "quote",
    "news",
    "paper",
    "model",
    "dataset",
    "job",
    "pipeline",
    "artifact",
    "release",
    "tag",
    "branch",
    "commit",
    "label",
    "milestone",
    "member",
    "role",
    "permission",
];
const VERBS: &[&str] = &[
    "list",
    "get",
    "create",
    "update",
    "delete",
    "search",
    "export",
    "import",
    "archive",
    "restore",
    "share",
    "sync",
    "merge",
    "close",
    "open",
    "assign",
    "approve",
    "cancel",
    "send",
    "download",
    "upload",
    "render",
    "convert",
    "analyze",
    "summarize",
    "schedule",
];
const NAMESPACES: usize = 2_500;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

fn catalog(n: usize) -> Vec<SearchDoc> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|i| {
            let ns = format!("service{}", i % NAMESPACES);
            let (verb, noun, noun2) = (rng.pick(VERBS), rng.pick(NOUNS), rng.pick(NOUNS));
            let mut description = format!("{verb} a {noun} of the {noun2}");
            for _ in 0..(8 + rng.next() % 16) {
                description.push(' ');
                let words = if matches!(rng.next() % 3, 0) {
                    VERBS
                } else {
                    NOUNS
                };
                description.push_str(rng.pick(words));
            }
            let params = (0..(1 + rng.next() % 5))
                .map(|_| ParamDoc {
                    name: format!(
                        "{}_{}",
                        rng.pick(NOUNS),
                        rng.pick(&["id", "name", "limit", "filter"])
                    ),
                    description: format!("The {} to {}", rng.pick(NOUNS), rng.pick(VERBS)),
                })
                .collect();
            SearchDoc {
                path: format!("{ns}.{noun}s.{verb}{i}"),
                name: format!("{verb} {noun}"),
                description,
                params,
            }
        })
        .collect()
}

const QUERIES: &[&str] = &[
    "create issue",
    "list pull requests for a repository",
    "send an email to a customer about their invoice payment",
    "I need to export the dashboard metrics report as a chart and share it with my team",
    "weather forecast",
    "delete webhook subscription",
    "find news articles and summarize them",
    "upload an image to a folder",
    "qzxv nonsense",
    "schedule a meeting event on the calendar for every member of the project",
];

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// The query mix of one round (`round` picks namespaces and filters), run through `search`;
/// the sorted times and the mean number of hits.
fn run_queries(
    rounds: usize,
    mut search: impl FnMut(&Query<'_>) -> usize,
) -> (Vec<Duration>, usize) {
    let even = |d: usize| d & 1 == 0;
    let mut times = Vec::new();
    let mut total_hits = 0usize;
    for round in 0..rounds {
        for (qi, text) in QUERIES.iter().enumerate() {
            let mut q = Query::new(text, 10);
            let ns = format!("service{}", (round * 7 + qi) % NAMESPACES);
            match (round + qi) % 4 {
                1 => q.namespace = Some(&ns),
                2 => q.filter = Some(&even),
                _ => {}
            }
            let t = Instant::now();
            total_hits += search(&q);
            times.push(t.elapsed());
        }
    }
    times.sort_unstable();
    let mean = total_hits / times.len();
    (times, mean)
}

/// Tools of each catalog embedded by the model in the hybrid part.
#[cfg(feature = "semantic")]
const EMBEDDED: usize = 2_000;

/// The hybrid search over `docs` (see the module docs), when a model is configured.
#[cfg(feature = "semantic")]
fn hybrid(docs: &[SearchDoc], lexical: std::sync::Arc<SearchIndex>) {
    use std::sync::Arc;
    use toolshed_search::{HybridConfig, HybridIndex, TextEmbedder};
    let Some(model) = toolshed_search::Embedder::from_env() else {
        println!("  (TOOLSHED_SEARCH_MODEL unset: no hybrid figures)");
        return;
    };
    let model: Arc<dyn TextEmbedder> = Arc::new(model.expect("the model loads"));
    let texts: Vec<String> = docs
        .iter()
        .take(EMBEDDED)
        .map(toolshed_search::hybrid::doc_text)
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let start = Instant::now();
    let some = model.embed_texts(&refs).expect("tools embed");
    let took = start.elapsed();
    let dim = model.dim();
    let mut vectors = Vec::with_capacity(docs.len() * dim);
    for i in 0..docs.len() {
        let j = i % refs.len();
        vectors.extend_from_slice(&some[j * dim..(j + 1) * dim]);
    }
    let rate = refs.len() as f64 / took.as_secs_f64();
    let index = HybridIndex::from_vectors(lexical, model, vectors, HybridConfig::default());
    println!(
        "  embedded {} tools in {:.2?} ({rate:.0} tools/s; all {} at that rate: {:.0} s); vectors in memory {:.1} MB",
        refs.len(),
        took,
        docs.len(),
        docs.len() as f64 / rate,
        index.vector_bytes() as f64 / 1e6
    );
    let (times, mean) = run_queries(10, |q| index.search(q).expect("the query embeds").total);
    print_times("  hybrid", &times, mean);
}

fn print_times(what: &str, times: &[Duration], mean_total: usize) {
    println!(
        "{what}: {} searches: p50 {:.3?}, p99 {:.3?}, max {:.3?} (mean total {mean_total})",
        times.len(),
        percentile(times, 0.50),
        percentile(times, 0.99),
        times[times.len() - 1],
    );
}

fn main() {
    for n in [10_000, 125_000] {
        let docs = catalog(n);
        let start = Instant::now();
        let index = std::sync::Arc::new(SearchIndex::build(&docs));
        let build = start.elapsed();
        let (times, mean) = run_queries(40, |q| index.search(q).total);
        print_times(
            &format!("{n} tools: build {build:.2?}; lexical"),
            &times,
            mean,
        );
        #[cfg(feature = "semantic")]
        hybrid(&docs, index.clone());
    }
}
