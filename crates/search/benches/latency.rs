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
//! the vectors take (f32, and the 8-bit copies a large catalog is scanned on), and how long a
//! new snapshot whose vectors are all stored takes to get its hybrid index (the engine builds
//! it at once, before that snapshot's first search). Last it times the same searches again
//! while another thread embeds tools with the same model, as the server's background embedding
//! of a new catalog does. `EMBED_THREADS=N` sets the forward pass's threads (as in the embed
//! bench; 1 runs it on the caller alone).
//!
//! `-- --catalog FILE` measures a real catalog instead: FILE in the retrieval benchmark's
//! `tools.jsonl` layout (all of APIs.guru, 125,205 operations, is written by `cargo bench -p
//! toolshed-openapi --bench apis_guru -- /tmp/package --tools-out FILE`). There the hybrid part
//! embeds **every** tool with the model, as the server does in the background, and prints the
//! time it took, the rate, and the process's resident memory before and after. With
//! `--queries FILE` as well (a `queries.jsonl`: one `{"text": …}` per line; the first 2,000 are
//! used) it then compares the scan that ranks one-bit sketches first (what a catalog of
//! `scan::SKETCH_FROM` vectors or more gets on a CPU with AVX-512 VPOPCNTDQ or AVX2) with the
//! 8-bit scan of every vector on the same vectors: how many top-10 answers and nearest-50 lists
//! are the same, and the time each takes once the queries are embedded; then it times the same
//! requests as whole searches on the sketch-first index (each embedded without cache, then
//! scanned and fused). Both timings are also given by the number of vectors a request is
//! compared with (its whole and each of its clauses: one, two or three, four to seven). `--vectors FILE` keeps the catalog's vectors in FILE (the server's
//! stored-vector format, keyed by text and model), so that a second run reads them instead of
//! embedding the catalog again.

use std::time::{Duration, Instant};

use toolshed_search::{param_docs_from_schema, ParamDoc, Query, SearchDoc, SearchIndex};
use toolshed_testing::retrieval_set;

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
                    ..ParamDoc::default()
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
    // Requests of several clauses: each clause is embedded and scanned too.
    "find the unpaid invoices of a customer, send them an email with the payment link, and schedule a meeting",
    "export the weather forecast as a chart; then share the report with my team",
];

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// The query mix of one round (`round` picks namespaces and filters), run through `search`;
/// the sorted times and the mean number of hits.
fn run_queries(
    rounds: usize,
    namespaces: &[String],
    mut search: impl FnMut(&Query<'_>) -> usize,
) -> (Vec<Duration>, usize) {
    let even = |d: usize| d & 1 == 0;
    let mut times = Vec::new();
    let mut total_hits = 0usize;
    for round in 0..rounds {
        for (qi, text) in QUERIES.iter().enumerate() {
            let mut q = Query::new(text, 10);
            let ns = &namespaces[(round * 7 + qi) % namespaces.len()];
            match (round + qi) % 4 {
                1 => q.namespace = Some(ns),
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

/// Tools of each synthetic catalog embedded by the model in the hybrid part.
#[cfg(feature = "semantic")]
const EMBEDDED: usize = 2_000;

/// Resident and peak memory of this process, in MB (`/proc/self/status`; zeros elsewhere).
#[cfg(feature = "semantic")]
fn memory_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The hybrid search over `docs` (see the module docs), when a model is configured: every tool
/// embedded when `all`, else the first [`EMBEDDED`] and their vectors reused in turn.
#[cfg(feature = "semantic")]
fn hybrid(
    docs: &[SearchDoc],
    lexical: std::sync::Arc<SearchIndex>,
    namespaces: &[String],
    all: bool,
) {
    use std::sync::Arc;
    use toolshed_search::{HybridConfig, HybridIndex, TextEmbedder};
    let Some(model) = toolshed_search::Embedder::from_env() else {
        println!("  (TOOLSHED_SEARCH_MODEL unset: no hybrid figures)");
        return;
    };
    let mut model = model.expect("the model loads");
    // As in the embed bench: `EMBED_THREADS=1` runs the forward pass on the caller alone.
    if let Some(n) = std::env::var("EMBED_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        model.set_threads(n);
    }
    let model: Arc<dyn TextEmbedder> = Arc::new(model);
    let embedded = if all { docs.len() } else { EMBEDDED };
    let texts = toolshed_search::hybrid::EmbedTexts::of(&docs[..embedded.min(docs.len())]);
    let refs: Vec<&str> = texts.texts.iter().map(String::as_str).collect();
    let (rss_before, _) = memory_mb();
    let start = Instant::now();
    let dim = model.dim();
    let cache = all.then(|| arg_value("--vectors")).flatten();
    let mut some = cache
        .as_deref()
        .and_then(|file| stored_vectors(file, model.as_ref(), &refs))
        .unwrap_or_default();
    if some.is_empty() {
        some.reserve(refs.len() * dim);
        for (i, chunk) in refs.chunks(5_000).enumerate() {
            some.extend(model.embed_texts(chunk).expect("tools embed"));
            if all {
                eprintln!(
                    "  {} of {} tools embedded, {:.0} s",
                    (i * 5_000 + chunk.len()),
                    refs.len(),
                    start.elapsed().as_secs_f64()
                );
            }
        }
        if let Some(file) = &cache {
            let stored = refs
                .iter()
                .zip(some.chunks_exact(dim))
                .map(|(t, v)| (toolshed_search::vectors::text_key(t), Arc::from(v)))
                .collect();
            toolshed_search::vectors::save(file.as_ref(), &model.model_id(), dim, &stored)
                .expect("the vector file is writable");
        }
    } else {
        println!("  (vectors read from the --vectors file: the embedding figures below are not measured)");
    }
    let took = start.elapsed();
    // Every tool past the embedded ones reuses the vectors (and lead vector) of tool
    // `i % embedded`.
    let embedded = embedded.min(docs.len());
    let mut lead_row = vec![None; embedded];
    for (i, &d) in texts.extra_of.iter().enumerate() {
        lead_row[d as usize] = Some(embedded + i);
    }
    let row = |r: usize| &some[r * dim..(r + 1) * dim];
    // What a new snapshot whose vectors are all stored costs before its first search (the
    // engine builds its index at once then): its texts and their keys, the rows, the index.
    let install = Instant::now();
    let keys = toolshed_search::hybrid::EmbedTexts::of(docs)
        .texts
        .iter()
        .map(|t| toolshed_search::vectors::text_key(t))
        .fold(0u64, u64::wrapping_add);
    std::hint::black_box(keys);
    let mut vectors = Vec::with_capacity((docs.len() + texts.extra_of.len()) * dim);
    for i in 0..docs.len() {
        vectors.extend_from_slice(row(i % embedded));
    }
    let mut extra_of = Vec::new();
    for i in 0..docs.len() {
        if let Some(r) = lead_row[i % embedded] {
            vectors.extend_from_slice(row(r));
            extra_of.push(i as u32);
        }
    }
    drop(some);
    let rate = embedded as f64 / took.as_secs_f64();
    let (lexical_again, extra_again) = (lexical.clone(), extra_of.clone());
    let index = HybridIndex::from_rows(
        lexical,
        model.clone(),
        vectors,
        extra_of,
        HybridConfig::default(),
    );
    let install = install.elapsed();
    let (rss_after, peak) = memory_mb();
    println!(
        "  embedded {embedded} tools ({} texts with the lead sentences) in {:.2?} ({rate:.0} tools/s; all {} at that rate: {:.0} s); vectors in memory {:.1} MB; resident memory {rss_before:.0} MB before embedding, {rss_after:.0} MB after (peak {peak:.0} MB)",
        refs.len(),
        took,
        docs.len(),
        docs.len() as f64 / rate,
        index.vector_bytes() as f64 / 1e6
    );
    println!("  a snapshot of stored vectors: index built in {install:.2?}");
    let (times, mean) = run_queries(10, namespaces, |q| {
        index.search(q).expect("the query embeds").total
    });
    print_times("  hybrid", &times, mean);
    if all {
        compare_sketches(&index, &lexical_again, extra_again);
    }
    // The same searches in two parts, to tell where a slow one spends its time: the query's
    // embedding alone, then the scan and fusion alone with the query vectors given.
    let mut embedded_queries = std::collections::HashMap::new();
    let (times, _) = run_queries(10, namespaces, |q| {
        let _hold = model.hold_for_search();
        let v = model.embed_query_clauses(q.text).expect("the query embeds");
        embedded_queries.insert(q.text.to_string(), v);
        1
    });
    print_times("    of which the query's embedding", &times, 1);
    let (times, mean) = run_queries(10, namespaces, |q| {
        let _hold = model.hold_for_search();
        index.search_clauses(q, &embedded_queries[q.text]).total
    });
    print_times("    of which the scan and fusion", &times, mean);

    // The same searches while the same model embeds tools on another thread, as the server
    // does after a new catalog arrives (its background embedding shares the model and its
    // threads with the searches).
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let stop = AtomicBool::new(false);
    let background = &refs[..refs.len().min(EMBEDDED)];
    let (times, mean) = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Relaxed) {
                for chunk in background.chunks(64) {
                    if stop.load(Relaxed) {
                        break;
                    }
                    model.embed_texts(chunk).expect("tools embed");
                }
            }
        });
        let timed = run_queries(10, namespaces, |q| {
            index.search(q).expect("the query embeds").total
        });
        stop.store(true, Relaxed);
        timed
    });
    print_times("  hybrid while tools embed in the background", &times, mean);
}

/// The value after `flag` on the command line.
fn arg_value(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).cloned()
}

/// The vectors of `texts`, in order, from the file of `--vectors` (the server's stored-vector
/// format, [`toolshed_search::vectors`]), when it holds one for every text and this model.
#[cfg(feature = "semantic")]
fn stored_vectors(
    file: &str,
    model: &dyn toolshed_search::TextEmbedder,
    texts: &[&str],
) -> Option<Vec<f32>> {
    use toolshed_search::vectors;
    let stored = vectors::load(file.as_ref(), &model.model_id(), model.dim());
    let mut out = Vec::with_capacity(texts.len() * model.dim());
    for t in texts {
        out.extend_from_slice(stored.get(&vectors::text_key(t))?);
    }
    Some(out)
}

/// The queries of `--queries FILE`, at most 2,000.
fn query_file() -> Vec<String> {
    let Some(file) = arg_value("--queries") else {
        return Vec::new();
    };
    retrieval_set::read_queries(std::path::Path::new(&file))
        .unwrap_or_else(|e| panic!("--queries: {e}"))
        .into_iter()
        .map(|q| q.text)
        .take(2_000)
        .collect()
}

/// The sketch-first scan of `index` against the 8-bit scan of every vector (see the module
/// docs), over the queries of `--queries`.
#[cfg(feature = "semantic")]
fn compare_sketches(
    index: &toolshed_search::HybridIndex,
    lexical: &std::sync::Arc<SearchIndex>,
    extra_of: Vec<u32>,
) {
    use toolshed_search::{HybridConfig, HybridIndex};
    let queries = query_file();
    if queries.is_empty() {
        return;
    }
    // Both built here: the default scans sketches only on a CPU with AVX-512 VPOPCNTDQ or AVX2.
    let with = |sketch_from: usize, extra_of: Vec<u32>| {
        HybridIndex::from_rows(
            lexical.clone(),
            index.embedder().clone(),
            index.vectors().to_vec(),
            extra_of,
            HybridConfig {
                sketch_from,
                ..*index.config()
            },
        )
    };
    let plain = with(usize::MAX, extra_of.clone());
    let index = &with(0, extra_of);
    let embedded: Vec<_> = queries
        .iter()
        .map(|q| {
            index
                .embedder()
                .embed_query_clauses(q)
                .expect("the query embeds")
        })
        .collect();
    let (mut same_top, mut same_near, mut overlap_top, mut overlap_near) = (0, 0, 0usize, 0usize);
    let (mut sketched_times, mut plain_times) = (Vec::new(), Vec::new());
    for (text, v) in queries.iter().zip(&embedded) {
        let q = Query::new(text, 10);
        let t = Instant::now();
        let a = index.search_clauses(&q, v);
        sketched_times.push(t.elapsed());
        let t = Instant::now();
        let b = plain.search_clauses(&q, v);
        plain_times.push(t.elapsed());
        let docs_of = |r: &toolshed_search::SearchResult| -> Vec<usize> {
            r.hits.iter().map(|h| h.doc).collect()
        };
        let (a, b) = (docs_of(&a), docs_of(&b));
        same_top += usize::from(a == b);
        overlap_top += a.iter().filter(|d| b.contains(d)).count();
        let near = Query::new(text, 50);
        let a = docs_of(&index.search_semantic(&near, &v.whole));
        let b = docs_of(&plain.search_semantic(&near, &v.whole));
        same_near += usize::from(a == b);
        overlap_near += a.iter().filter(|d| b.contains(d)).count();
    }
    let n = queries.len();
    println!(
        "  sketches first vs the 8-bit scan of every vector, {n} queries: top-10 answers the same in {same_top} ({:.2} % of their hits shared), nearest 50 the same in {same_near} ({:.2} % shared)",
        100.0 * overlap_top as f64 / (10 * n) as f64,
        100.0 * overlap_near as f64 / (50 * n) as f64,
    );
    let vector_counts: Vec<usize> = embedded.iter().map(|v| v.all().count()).collect();
    print_by_vectors("      sketches first", &sketched_times, &vector_counts);
    sketched_times.sort_unstable();
    plain_times.sort_unstable();
    print_times("    scan and fusion, sketches first", &sketched_times, 0);
    print_times(
        "    scan and fusion, 8-bit scan of every vector",
        &plain_times,
        0,
    );
    // The same requests as a server runs them on such a catalog: each embedded (no cache),
    // then scanned sketches first and fused, timed as one call.
    let mut whole_times: Vec<Duration> = queries
        .iter()
        .map(|text| {
            let t = Instant::now();
            index
                .search(&Query::new(text, 10))
                .expect("the query embeds");
            t.elapsed()
        })
        .collect();
    print_by_vectors("      whole searches", &whole_times, &vector_counts);
    whole_times.sort_unstable();
    print_times(
        "    whole searches (embedding, then sketches first)",
        &whole_times,
        0,
    );
    compare_filters(index, &queries);
}

/// A catalog entry as a server holds one, for [`compare_filters`]: its own allocation, about
/// the size of a tool's definition, with the kind of entry somewhere inside.
#[cfg(feature = "semantic")]
struct Entry {
    _before: [u8; 256],
    kind: u8,
    _after: [u8; 255],
}

/// The same whole searches with a filter on every candidate, as a server's search has (the
/// entries of the caller's kind): read from each entry's own allocation, as a filter that
/// looks a tool up in the catalog does, and from one byte per tool in an array.
#[cfg(feature = "semantic")]
fn compare_filters(index: &toolshed_search::HybridIndex, queries: &[String]) {
    let docs = index.lexical().len();
    let entries: Vec<std::sync::Arc<Entry>> = (0..docs)
        .map(|d| {
            std::sync::Arc::new(Entry {
                _before: [0; 256],
                kind: u8::from(d % 97 == 0),
                _after: [0; 255],
            })
        })
        .collect();
    let kinds: Vec<u8> = entries.iter().map(|e| e.kind).collect();
    let by_entry = |d: usize| entries.get(d).is_some_and(|e| e.kind == 0);
    let by_byte = |d: usize| kinds.get(d) == Some(&0);
    let filters: [(&str, &(dyn Fn(usize) -> bool + Sync)); 2] = [
        ("each tool's entry read", &by_entry),
        ("one byte per tool", &by_byte),
    ];
    for (what, filter) in filters {
        let mut times: Vec<Duration> = queries
            .iter()
            .map(|text| {
                let q = Query {
                    filter: Some(filter),
                    ..Query::new(text, 10)
                };
                let t = Instant::now();
                index.search(&q).expect("the query embeds");
                t.elapsed()
            })
            .collect();
        times.sort_unstable();
        print_times(&format!("    whole searches, filtered: {what}"), &times, 0);
    }
}

/// `times` (one per request, in the requests' order) split by how many vectors each request
/// is compared with (the whole and each clause, `counts`): one, two or three, four or more.
#[cfg(feature = "semantic")]
fn print_by_vectors(what: &str, times: &[Duration], counts: &[usize]) {
    for (label, range) in [
        ("1 vector", 1..2),
        ("2-3 vectors", 2..4),
        ("4-7 vectors", 4..8),
    ] {
        let mut part: Vec<Duration> = times
            .iter()
            .zip(counts)
            .filter(|(_, n)| range.contains(*n))
            .map(|(t, _)| *t)
            .collect();
        if part.is_empty() {
            continue;
        }
        part.sort_unstable();
        print_times(&format!("{what}, {label}"), &part, 0);
    }
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

/// A tools.jsonl row as the gateway indexes it (the retrieval benchmark's reading).
fn to_doc(row: serde_json::Value) -> SearchDoc {
    let tool = retrieval_set::tool_of(row).unwrap_or_else(|e| panic!("--catalog: {e}"));
    SearchDoc {
        path: tool.id.replace("::", "."),
        params: tool
            .schema
            .as_ref()
            .map(param_docs_from_schema)
            .unwrap_or_default(),
        name: tool.name,
        description: tool.description,
    }
}

/// The catalogs to measure: the file after `--catalog` (every tool embedded), or the two
/// synthetic ones.
fn catalogs() -> Vec<(String, Vec<SearchDoc>, bool)> {
    if let Some(file) = arg_value("--catalog") {
        // Line by line: the file holds every tool's whole input schema (2 GB for APIs.guru).
        use std::io::BufRead;
        let reader = std::io::BufReader::new(
            std::fs::File::open(&file).expect("the catalog file is readable"),
        );
        let docs: Vec<SearchDoc> = reader
            .lines()
            .map(|l| l.expect("the catalog file is readable"))
            .filter(|l| !l.trim().is_empty())
            .map(|l| to_doc(serde_json::from_str(&l).expect("a JSON line")))
            .collect();
        return vec![(file, docs, true)];
    }
    [10_000, 125_000]
        .into_iter()
        .map(|n| (format!("{n} synthetic"), catalog(n), false))
        .collect()
}

fn main() {
    for (name, docs, all) in catalogs() {
        let mut namespaces: Vec<String> = docs
            .iter()
            .filter_map(|d| d.path.split('.').next().map(str::to_string))
            .collect();
        namespaces.sort();
        namespaces.dedup();
        let start = Instant::now();
        let index = std::sync::Arc::new(SearchIndex::build(&docs));
        let build = start.elapsed();
        let (times, mean) = run_queries(40, &namespaces, |q| index.search(q).total);
        print_times(
            &format!(
                "{name}: {} tools, {} namespaces: build {build:.2?}; lexical",
                docs.len(),
                namespaces.len()
            ),
            &times,
            mean,
        );
        let requests = query_file();
        if all && !requests.is_empty() {
            // The depth the hybrid search asks the lexical index for.
            let mut times: Vec<Duration> = requests
                .iter()
                .map(|text| {
                    let t = Instant::now();
                    std::hint::black_box(index.search(&Query::new(text, 50)));
                    t.elapsed()
                })
                .collect();
            times.sort_unstable();
            print_times("  lexical, the --queries requests at depth 50", &times, 0);
        }
        #[cfg(feature = "semantic")]
        hybrid(&docs, index.clone(), &namespaces, all);
        #[cfg(not(feature = "semantic"))]
        let _ = all;
    }
}
