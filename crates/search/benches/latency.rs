//! Search latency over synthetic catalogs of 10,000 and 125,000 tools.
//!
//! `cargo bench -p toolshed-search --bench latency` builds each catalog from a fixed
//! vocabulary with a deterministic generator, runs a fixed mix of queries (short,
//! long natural-language, namespace-scoped, filtered) and prints p50/p99/max.

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

fn main() {
    for n in [10_000, 125_000] {
        let docs = catalog(n);
        let start = Instant::now();
        let index = SearchIndex::build(&docs);
        let build = start.elapsed();
        let even = |d: usize| d & 1 == 0;
        let mut times = Vec::new();
        let mut total_hits = 0usize;
        for round in 0..40 {
            for (qi, text) in QUERIES.iter().enumerate() {
                let mut q = Query::new(text, 10);
                let ns = format!("service{}", (round * 7 + qi) % NAMESPACES);
                match (round + qi) % 4 {
                    1 => q.namespace = Some(&ns),
                    2 => q.filter = Some(&even),
                    _ => {}
                }
                let t = Instant::now();
                let r = index.search(&q);
                times.push(t.elapsed());
                total_hits += r.total;
            }
        }
        times.sort_unstable();
        println!(
            "{n} tools: build {:.2?}; {} searches: p50 {:.3?}, p99 {:.3?}, max {:.3?} (mean total {})",
            build,
            times.len(),
            percentile(&times, 0.50),
            percentile(&times, 0.99),
            times[times.len() - 1],
            total_hits / times.len()
        );
    }
}
