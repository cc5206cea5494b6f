//! Query-embedding latency of the semantic stage, by set and by query length.
//!
//! `TOOLSHED_SEARCH_MODEL=$(scripts/search-model.sh) cargo bench -p toolshed-search --features
//! semantic --bench embed -- DIR [QUERIES_PER_SET]` takes up to `QUERIES_PER_SET` (default 300)
//! queries, evenly spread, from every `DIR/<set>/queries.jsonl`, embeds each one once (uncached,
//! one query at a time, as a search does: the request's clauses, or the request whole when it
//! has one clause; `EMBED_WHOLE=1` always the whole) after a warm-up, and prints p50/p99/max per
//! set, per token-length bucket (the request's tokens), the tokens the model reads (its clauses,
//! without letterless words), and the tokenizer's share. `EMBED_THREADS` sets the threads of
//! the forward pass (default: the embedder's own choice), `TOOLSHED_SEARCH_PRECISION` the
//! precision (`q8` by default, `i8`, `f16`, `f32`), and `EMBED_COMPARE=1` prints the cosine of
//! each query's whole vector to the f32 forward pass's. `EMBED_GAP_US=N` waits N microseconds
//! before each query, as a server waits between an agent's searches: back to back (the
//! default) the forward pass's helper threads are still awake, after a pause they sleep.
//!
//! Without the `semantic` feature or the model variable it prints a note and measures nothing.

#[cfg(feature = "semantic")]
fn main() {
    use std::path::PathBuf;
    use std::time::Instant;

    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some(root) = args.first().map(PathBuf::from) else {
        eprintln!("usage: cargo bench -p toolshed-search --features semantic --bench embed -- DIR [QUERIES_PER_SET]");
        return;
    };
    let per_set: usize = args.get(1).map_or(300, |n| n.parse().expect("a count"));
    let start = Instant::now();
    let Some(model) = toolshed_search::Embedder::from_env() else {
        eprintln!(
            "{} unset: nothing measured",
            toolshed_search::semantic::MODEL_ENV
        );
        return;
    };
    let mut model = model.expect("the model loads");
    if let Some(n) = std::env::var("EMBED_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        model.set_threads(n);
    }
    println!(
        "model {} loaded in {:.2}s ({model:?}); {} forward thread(s)",
        model.dir().display(),
        start.elapsed().as_secs_f64(),
        model.threads()
    );

    // `EMBED_COMPARE=1`: cosine of each vector to the same model's f32 forward pass.
    let reference = std::env::var("EMBED_COMPARE").ok().map(|_| {
        toolshed_search::Embedder::load_with(model.dir(), toolshed_search::semantic::Precision::F32)
            .expect("the model loads in f32")
    });
    let mut sets: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("readable directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("queries.jsonl").exists())
        .collect();
    sets.sort();

    let pct = |v: &[f64], p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)];
    // (token count, milliseconds) over all sets, for the length buckets.
    let mut all: Vec<(usize, f64)> = Vec::new();
    for set in sets {
        let queries: Vec<String> =
            toolshed_testing::retrieval_set::read_queries(&set.join("queries.jsonl"))
                .unwrap_or_else(|e| panic!("{e}"))
                .into_iter()
                .map(|q| q.text)
                .collect();
        if queries.is_empty() {
            continue;
        }
        let step = (queries.len() / per_set).max(1);
        let picked: Vec<&str> = queries
            .iter()
            .step_by(step)
            .take(per_set)
            .map(String::as_str)
            .collect();
        for q in picked.iter().take(10) {
            model.embed(q).expect("embeds");
        }
        let gap = std::env::var("EMBED_GAP_US").ok().map(|us| {
            std::time::Duration::from_micros(us.parse().expect("EMBED_GAP_US: microseconds"))
        });
        let mut times = Vec::with_capacity(picked.len());
        let mut tok_times = Vec::with_capacity(picked.len());
        let mut lens = Vec::with_capacity(picked.len());
        let mut read = Vec::with_capacity(picked.len());
        for q in &picked {
            if let Some(gap) = gap {
                std::thread::sleep(gap);
            }
            read.push(model.query_token_count(q).expect("tokenizes"));
            let t = Instant::now();
            let n = model.token_count(q).expect("tokenizes");
            tok_times.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            // What a search embeds: the request, or its clauses (`EMBED_WHOLE=1`: the
            // request's sentence alone).
            let v = if std::env::var_os("EMBED_WHOLE").is_some() {
                model.embed_query(q).expect("embeds")
            } else {
                model.embed_query_clauses(q).expect("embeds").whole
            };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            std::hint::black_box(v);
            times.push(ms);
            lens.push(n);
            all.push((n, ms));
        }
        if let Some(r) = &reference {
            let mut cos: Vec<f32> = picked
                .iter()
                .map(|q| {
                    let a = model.embed(q).unwrap();
                    let b = r.embed(q).unwrap();
                    a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>()
                })
                .collect();
            cos.sort_by(f32::total_cmp);
            let mean = cos.iter().sum::<f32>() / cos.len() as f32;
            println!(
                "  cosine to f32: mean {:.6}, min {:.6}, p1 {:.6}",
                mean,
                cos[0],
                cos[cos.len() / 100]
            );
        }
        times.sort_by(f64::total_cmp);
        tok_times.sort_by(f64::total_cmp);
        lens.sort_unstable();
        read.sort_unstable();
        println!(
            "{:<18} {:>4} queries, tokens p50 {:>3} max {:>3} (read p50 {:>3}): embed p50 {:>7.2} ms, p99 {:>7.2} ms, max {:>7.2} ms; tokenizer p50 {:.3} ms",
            set.file_name().unwrap_or_default().to_string_lossy(),
            picked.len(),
            lens[lens.len() / 2],
            lens[lens.len() - 1],
            read[read.len() / 2],
            pct(&times, 0.5),
            pct(&times, 0.99),
            times[times.len() - 1],
            pct(&tok_times, 0.5),
        );
    }
    for (lo, hi) in [
        (0, 8),
        (8, 16),
        (16, 26),
        (26, 40),
        (40, 64),
        (64, 128),
        (128, 1024),
    ] {
        let mut t: Vec<f64> = all
            .iter()
            .filter(|(n, _)| *n >= lo && *n < hi)
            .map(|(_, ms)| *ms)
            .collect();
        if t.is_empty() {
            continue;
        }
        t.sort_by(f64::total_cmp);
        println!(
            "  tokens {lo:>3}..{hi:<4} {:>5} queries: p50 {:>7.2} ms, p99 {:>7.2} ms",
            t.len(),
            pct(&t, 0.5),
            pct(&t, 0.99)
        );
    }
}

#[cfg(not(feature = "semantic"))]
fn main() {
    eprintln!("built without the `semantic` feature: nothing measured");
}
