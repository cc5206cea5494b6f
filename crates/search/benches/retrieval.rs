//! Retrieval quality on tool-retrieval sets laid out as `<dir>/<set>/{tools.jsonl,queries.jsonl,qrels.tsv}`.
//!
//! `cargo bench -p toolshed-search --bench retrieval -- /work/shared/bench/retrieval`
//! prints R@1, R@5, R@10, nDCG@10 and MRR per set (percentages), first for the plain BM25
//! reference ([`bm25_baseline`]), then for the ranker. `scripts/retrieval-sets.sh DIR` writes
//! further public sets in the same layout; sets made elsewhere are read with the variants
//! `toolshed_testing::retrieval_set` accepts (a schema under `parameters` or `inputSchema`, BFCL's
//! `"dict"` types, judgements without a header or in TREC's four columns), and the requests it
//! cannot measure (no judgement, or judgements naming no tool) are counted on stderr. Judgements
//! name ids, so a ranking is judged by ids: a set that lists one id twice (one function defined
//! twice) has both tools searched, either counts as that id, and each id counts once in a top
//! five or ten. Options after the directory override ranking parameters, for experiments:
//! `--k1 X`, `--weights p,n,d,pn,pd`, `--b p,n,d,pn,pd`, `--feedback docs,terms,weight`,
//! `--namespace weight,pool`, `--expand synonym,path_word,format`, `--background DOCS` (the
//! background's weight in every word's idf, 0 for the catalog's own counts alone).
//!
//! Hybrid ranking: built with `--features semantic` and given a model directory in
//! `TOOLSHED_SEARCH_MODEL` (an all-MiniLM-L6-v2 sentence-transformers folder), it also embeds
//! every tool and query (a query as a search embeds it: its clauses, when it has several) and
//! prints, per set, the lexical, semantic-only (the whole query's vector) and hybrid figures with
//! the embedding cost. `--fusion rrf,K,W,DEPTH` or `--fusion convex,W,DEPTH` overrides the fusion
//! (`W` the semantic share, `DEPTH` taken from each side), `--clause-share S` the share of a
//! clause's own lexical evidence in a request of several (0: none). `--one-vector` embeds each
//! tool's whole text only, without the second vector of its description's first sentence.
//! `--one-namespace NS` puts every tool's path under `NS`, as when one upstream server serves
//! the whole set (a set's ranking should not change by it but where its own namespaces did).
//! `--extra-tools FILE` adds the tools of FILE (a `tools.jsonl`, relevant to no request) to every
//! set, as the gateway's own tools are beside a set served through the MCP face
//! (`scripts/gateway-tools.sh` writes them). `--pooled` searches each set among every set's
//! tools (the others' relevant to none of its requests; an id two sets share is renamed in the
//! other's copy): one large catalog of tools from unrelated sources, as a gateway in front of
//! many servers holds.
//!
//! Environment: `RETRIEVAL_DEBUG=1` prints each request the hybrid ranking misses with its top
//! five; `RETRIEVAL_DUMP=DIR` writes `DIR/SET.jsonl`, each request's hybrid top ten (as
//! `scripts/retrieval-mcp.sh` does for the MCP face, to compare the two request by request).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;
use toolshed_search::{
    param_docs_from_schema, Bm25fConfig, ParamDoc, Query, SearchDoc, SearchIndex,
};
use toolshed_testing::retrieval_set::{self, RetrievalSet, SetTool};

/// The tools of a `tools.jsonl`, or a clear stop naming the file and line.
fn read_tools(path: &Path) -> Vec<SetTool> {
    retrieval_set::read_tools(path).unwrap_or_else(|e| panic!("{e}"))
}

/// A tool row as the gateway would index it: the id becomes the dot path
/// (`server::tool` → `server.tool`), parameters come from the input schema or,
/// for API catalogs without one, from the listed argument names. `under` puts every path
/// under one namespace more, as when one upstream server serves the whole set.
fn to_doc(tool: &SetTool, under: Option<&str>) -> SearchDoc {
    let mut params = tool
        .schema
        .as_ref()
        .map(param_docs_from_schema)
        .unwrap_or_default();
    match tool.row.get("api_arguments") {
        Some(Value::Array(args)) => {
            params.extend(args.iter().filter_map(Value::as_str).map(|a| ParamDoc {
                name: a.to_string(),
                ..ParamDoc::default()
            }))
        }
        Some(Value::Object(args)) => params.extend(args.keys().map(|a| ParamDoc {
            name: a.clone(),
            ..ParamDoc::default()
        })),
        _ => {}
    }
    let path = tool.id.replace("::", ".");
    SearchDoc {
        path: match under {
            Some(namespace) => format!("{namespace}.{path}"),
            None => path,
        },
        name: tool.name.clone(),
        description: tool.description.clone(),
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

impl Metrics {
    /// Adds one query's ranking (best first) against its relevant docs.
    fn add(&mut self, ranked: &[usize], rel: &HashSet<usize>) {
        let found = |k: usize| ranked.iter().take(k).filter(|d| rel.contains(d)).count() as f64;
        let denom = rel.len() as f64;
        self.r1 += found(1) / denom;
        self.r5 += found(5) / denom;
        self.r10 += found(10) / denom;
        let dcg: f64 = ranked
            .iter()
            .take(10)
            .enumerate()
            .filter(|(_, d)| rel.contains(d))
            .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
            .sum();
        let idcg: f64 = (0..rel.len().min(10))
            .map(|i| 1.0 / ((i + 2) as f64).log2())
            .sum();
        self.ndcg10 += dcg / idcg;
        if let Some(pos) = ranked.iter().position(|d| rel.contains(d)) {
            self.mrr += 1.0 / (pos + 1) as f64;
        }
        self.n += 1;
    }

    fn print(&self, label: &str, seconds: f64) {
        let n = self.n.max(1) as f64 / 100.0;
        println!(
            "{:<30} {:>7} {:>6.1} {:>6.1} {:>6.1} {:>8.1} {:>6.1} {:>7.2}s",
            label,
            self.n,
            self.r1 / n,
            self.r5 / n,
            self.r10 / n,
            self.ndcg10 / n,
            self.mrr / n,
            seconds
        );
    }
}

/// One set: its docs, tool ids, and the queries that have relevant tools.
struct Set {
    ids: Vec<String>,
    /// Per doc, the first doc with its id ([`retrieval_set::first_of_id`]).
    first_of_id: Vec<usize>,
    docs: Vec<SearchDoc>,
    queries: Vec<(String, HashSet<usize>)>,
}

impl Set {
    /// A search's hits as the judgements see them ([`retrieval_set::judged_ranking`]).
    fn ranked(&self, result: &toolshed_search::SearchResult) -> Vec<usize> {
        retrieval_set::judged_ranking(&self.first_of_id, result.hits.iter().map(|h| h.doc))
    }
}

/// One set from `dir`, its paths under `under` if given, with `extra` tools (relevant to no
/// request) after its own.
fn load(dir: &Path, under: Option<&str>, extra: &[SetTool]) -> Option<Set> {
    if !dir.join("tools.jsonl").exists() {
        return None;
    }
    let set = RetrievalSet::read(dir).unwrap_or_else(|e| panic!("{e}"));
    let judged = set.judged();
    if judged.unjudged > 0 || judged.unknown_tools > 0 {
        eprintln!(
            "{}: {} requests without judgements not measured, {} judgements naming no tool of tools.jsonl left out",
            dir.display(),
            judged.unjudged,
            judged.unknown_tools
        );
    }
    let tools = set
        .tools
        .iter()
        .map(|t| (t, under))
        .chain(extra.iter().map(|t| (t, None)));
    let (ids, docs): (Vec<String>, Vec<SearchDoc>) = tools
        .map(|(t, under)| (t.id.clone(), to_doc(t, under)))
        .unzip();
    let first_of_id = retrieval_set::first_of_id(&ids);
    let repeated = first_of_id
        .iter()
        .enumerate()
        .filter(|&(d, &first)| first != d)
        .count();
    if repeated > 0 {
        eprintln!(
            "{}: {repeated} tools repeat an id listed before them: searched as tools, judged as that id",
            dir.display()
        );
    }
    Some(Set {
        ids,
        first_of_id,
        docs,
        queries: judged.queries,
    })
}

fn debug_miss(set: &Set, qtext: &str, ranked: &[usize], rel: &HashSet<usize>) {
    let found = ranked.iter().take(5).filter(|d| rel.contains(d)).count();
    if std::env::var_os("RETRIEVAL_DEBUG").is_none() || found >= rel.len().min(5) {
        return;
    }
    println!("Q {qtext}");
    for d in ranked.iter().take(5) {
        println!(
            "   {} {}",
            if rel.contains(d) { "+" } else { "-" },
            set.ids[*d]
        );
    }
    for d in rel
        .iter()
        .filter(|d| !ranked[..ranked.len().min(5)].contains(d))
    {
        println!("   missed {}", set.ids[*d]);
    }
}

/// One request's top ten as a JSON line: its text, R@5, the hits' ids and the relevant ids.
#[cfg(feature = "semantic")]
fn dump_ranking(
    out: &mut impl std::io::Write,
    set: &Set,
    qtext: &str,
    ranked: &[usize],
    rel: &HashSet<usize>,
) {
    let found = ranked.iter().take(5).filter(|d| rel.contains(d)).count();
    let id = |d: &usize| set.ids[*d].as_str();
    let mut relevant: Vec<&str> = rel.iter().map(id).collect();
    relevant.sort_unstable();
    let hits: Vec<&str> = ranked.iter().take(10).map(id).collect();
    let row = serde_json::json!({
        "text": qtext,
        "r5": found as f64 / rel.len() as f64,
        "hits": hits,
        "relevant": relevant,
    });
    writeln!(out, "{row}").expect("dump written");
}

fn evaluate(set: &Set, config: Bm25fConfig) -> Metrics {
    let index = SearchIndex::build_with(&set.docs, config);
    let mut m = Metrics::default();
    for (qtext, rel) in &set.queries {
        let ranked = set.ranked(&index.search(&Query::new(qtext, 10)));
        debug_miss(set, qtext, &ranked, rel);
        m.add(&ranked, rel);
    }
    m
}

/// The plain BM25 reference every set is reported against (k1 = 0.9, b = 0.4): one field of
/// the tool's name, description and parameter names and descriptions, lower-cased words split
/// at anything not a letter or digit, no stemming, Okapi idf.
fn bm25_baseline(set: &Set) -> Metrics {
    const K1: f64 = 0.9;
    const B: f64 = 0.4;
    fn words(text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    }
    let docs: Vec<HashMap<String, f64>> = set
        .docs
        .iter()
        .map(|d| {
            let mut text = format!("{} {}", d.name, d.description);
            for p in &d.params {
                text.push(' ');
                text.push_str(&p.name);
                text.push(' ');
                text.push_str(&p.description);
            }
            let mut tf = HashMap::new();
            for w in words(&text) {
                *tf.entry(w).or_insert(0.0) += 1.0;
            }
            tf
        })
        .collect();
    let lengths: Vec<f64> = docs.iter().map(|d| d.values().sum()).collect();
    let n = docs.len() as f64;
    let avg = lengths.iter().sum::<f64>() / n.max(1.0);
    let mut df: HashMap<&str, f64> = HashMap::new();
    for d in &docs {
        for w in d.keys() {
            *df.entry(w.as_str()).or_insert(0.0) += 1.0;
        }
    }
    let mut m = Metrics::default();
    for (qtext, rel) in &set.queries {
        let terms = words(qtext);
        let mut scores: Vec<(f64, usize)> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let norm = K1 * (1.0 - B + B * lengths[i] / avg.max(1e-9));
                let score = terms
                    .iter()
                    .filter_map(|t| {
                        let tf = *d.get(t)?;
                        let df = df[t.as_str()];
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        Some(idf * tf * (K1 + 1.0) / (tf + norm))
                    })
                    .sum();
                (score, i)
            })
            .filter(|(s, _)| *s > 0.0)
            .collect();
        scores.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let ranked = retrieval_set::judged_ranking(
            &set.first_of_id,
            scores.iter().take(10).map(|(_, i)| *i),
        );
        m.add(&ranked, rel);
    }
    m
}

/// Lexical, semantic-only and hybrid figures of one set, with the embedding cost.
#[cfg(feature = "semantic")]
fn evaluate_hybrid(
    name: &str,
    set: &Set,
    config: Bm25fConfig,
    embedder: &std::sync::Arc<toolshed_search::Embedder>,
    hybrid_config: toolshed_search::HybridConfig,
    one_vector: bool,
) {
    use toolshed_search::HybridIndex;

    let start = Instant::now();
    let lexical = std::sync::Arc::new(SearchIndex::build_with(&set.docs, config));
    let lexical_build = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let index = if one_vector {
        let texts = toolshed_search::hybrid::EmbedTexts::of(&set.docs).texts;
        let refs: Vec<&str> = texts[..set.docs.len()].iter().map(String::as_str).collect();
        let vectors = toolshed_search::TextEmbedder::embed_texts(embedder.as_ref(), &refs)
            .expect("tools embed");
        HybridIndex::from_vectors(lexical, embedder.clone(), vectors, hybrid_config)
    } else {
        HybridIndex::build_with(&set.docs, lexical, embedder.clone(), hybrid_config)
            .expect("tools embed")
    };
    let embed_build = start.elapsed().as_secs_f64();

    // RETRIEVAL_DUMP=DIR writes DIR/SET.jsonl: each request's hybrid top ten, as
    // scripts/retrieval-mcp.sh does for the MCP face.
    let mut dump = std::env::var_os("RETRIEVAL_DUMP").map(|dir| {
        let path = Path::new(&dir).join(format!("{name}.jsonl"));
        std::io::BufWriter::new(std::fs::File::create(&path).expect("dump file"))
    });
    let (mut lex, mut sem, mut hyb) = (Metrics::default(), Metrics::default(), Metrics::default());
    let (mut t_lex, mut t_embed, mut t_sem, mut t_hyb) = (0f64, 0f64, 0f64, 0f64);
    let mut embed_times = Vec::with_capacity(set.queries.len());
    for (qtext, rel) in &set.queries {
        let q = Query::new(qtext, 10);
        let t = Instant::now();
        let r = index.lexical().search(&q);
        t_lex += t.elapsed().as_secs_f64();
        lex.add(&set.ranked(&r), rel);

        let t = Instant::now();
        let v = embedder.embed_query_clauses(qtext).expect("query embeds");
        let e = t.elapsed().as_secs_f64();
        t_embed += e;
        embed_times.push(e);

        let t = Instant::now();
        let r = index.search_semantic(&q, &v.whole);
        t_sem += t.elapsed().as_secs_f64();
        sem.add(&set.ranked(&r), rel);

        let t = Instant::now();
        let r = index.search_clauses(&q, &v);
        t_hyb += t.elapsed().as_secs_f64();
        let r = set.ranked(&r);
        debug_miss(set, qtext, &r, rel);
        if let Some(out) = dump.as_mut() {
            dump_ranking(out, set, qtext, &r, rel);
        }
        hyb.add(&r, rel);
    }
    embed_times.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        embed_times
            .get(((embed_times.len() as f64 * p) as usize).min(embed_times.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
            * 1e3
    };
    // Repeated queries: a second pass through the query cache the engine puts in front of the
    // model.
    let cached = toolshed_search::CachedEmbedder::new(embedder.clone(), set.queries.len());
    for (qtext, _) in &set.queries {
        let _ = toolshed_search::TextEmbedder::embed_query_clauses(&cached, qtext);
    }
    let mut repeat: Vec<f64> = set
        .queries
        .iter()
        .map(|(qtext, _)| {
            let t = Instant::now();
            let _ = toolshed_search::TextEmbedder::embed_query_clauses(&cached, qtext);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    repeat.sort_by(f64::total_cmp);
    let rp = |p: f64| repeat[((repeat.len() as f64 * p) as usize).min(repeat.len() - 1)];
    // Requests that differ only in what the model leaves unread share one entry.
    let distinct_texts: std::collections::HashSet<&str> =
        set.queries.iter().map(|(q, _)| q.as_str()).collect();
    let distinct_keys: std::collections::HashSet<String> = set
        .queries
        .iter()
        .map(|(q, _)| toolshed_search::TextEmbedder::query_key(embedder.as_ref(), q).into_owned())
        .collect();
    println!(
        "    repeated queries through the query cache: embed p50 {:.4} ms, p99 {:.4} ms; {} distinct requests, {} cache entries",
        rp(0.5),
        rp(0.99),
        distinct_texts.len(),
        distinct_keys.len()
    );
    lex.print(&format!("{name} lexical"), t_lex);
    sem.print(&format!("{name} semantic"), t_embed + t_sem);
    hyb.print(&format!("{name} hybrid"), t_embed + t_hyb);
    let n = set.queries.len().max(1) as f64;
    println!(
        "    {} tools: lexical build {:.3}s, tool embeddings {:.2}s ({:.1} ms/tool); per query: embed mean {:.2} ms (p50 {:.2}, p99 {:.2}), fusion {:.3} ms, lexical {:.3} ms",
        set.docs.len(),
        lexical_build,
        embed_build,
        embed_build * 1e3 / set.docs.len().max(1) as f64,
        t_embed * 1e3 / n,
        pct(0.5),
        pct(0.99),
        t_hyb * 1e3 / n,
        t_lex * 1e3 / n,
    );
}

fn floats(s: &str) -> Vec<f32> {
    s.split(',')
        .map(|x| x.trim().parse().expect("number"))
        .collect()
}

fn set_name(dir: &Path) -> String {
    dir.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// `extra` and the tools of every set in `pool` but `name`, an id already taken renamed
/// (`ID~SET`) so that no other set's tool stands for one of this set's.
fn others_tools(pool: &[(String, Vec<SetTool>)], name: &str, extra: &[SetTool]) -> Vec<SetTool> {
    let own = pool.iter().filter(|(n, _)| n == name);
    let mut taken: HashSet<String> = own
        .flat_map(|(_, t)| t.iter().map(|t| t.id.clone()))
        .collect();
    let mut out = extra.to_vec();
    taken.extend(extra.iter().map(|t| t.id.clone()));
    for (other, tools) in pool.iter().filter(|(n, _)| n != name) {
        for tool in tools {
            let mut tool = tool.clone();
            while !taken.insert(tool.id.clone()) {
                tool.id = format!("{}~{other}", tool.id);
            }
            out.push(tool);
        }
    }
    out
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
    #[cfg(feature = "semantic")]
    let mut hybrid_config = toolshed_search::HybridConfig::default();
    let mut it = args[1..].iter();
    let mut one_vector = false;
    let mut under: Option<String> = None;
    let mut extra: Vec<SetTool> = Vec::new();
    let mut pooled = false;
    while let Some(flag) = it.next() {
        if flag == "--one-vector" {
            one_vector = true;
            continue;
        }
        if flag == "--pooled" {
            pooled = true;
            continue;
        }
        let value = it.next().expect("flag value");
        match flag.as_str() {
            "--one-namespace" => under = Some(value.clone()),
            "--extra-tools" => extra = read_tools(Path::new(value)),
            "--background" => {
                config.background_docs = value.parse().expect("--background: a number")
            }
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
            #[cfg(feature = "semantic")]
            "--fusion" => {
                use toolshed_search::Fusion;
                let (kind, rest) = value.split_once(',').unwrap_or((value, ""));
                let v = if rest.is_empty() {
                    Vec::new()
                } else {
                    floats(rest)
                };
                let mut v = v.into_iter();
                if kind == "rrf" {
                    hybrid_config.fusion = Fusion::Rrf {
                        k: v.next().unwrap_or(60.0),
                    };
                } else {
                    assert_eq!(kind, "convex", "--fusion rrf,K,W,DEPTH or convex,W,DEPTH");
                    hybrid_config.fusion = Fusion::Convex;
                }
                if let Some(w) = v.next() {
                    hybrid_config.semantic_weight = w;
                }
                if let Some(depth) = v.next() {
                    hybrid_config.lexical_depth = depth as usize;
                    hybrid_config.semantic_depth = depth as usize;
                }
            }
            #[cfg(feature = "semantic")]
            "--clause-share" => {
                hybrid_config.clause_share = value.parse().expect("--clause-share: a number");
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
    #[cfg(not(feature = "semantic"))]
    let _ = one_vector;
    #[cfg(feature = "semantic")]
    let embedder = match toolshed_search::Embedder::from_env() {
        Some(model) => {
            let start = Instant::now();
            let model = std::sync::Arc::new(model.expect("the model directory loads"));
            println!(
                "{hybrid_config:?}\nmodel {} loaded in {:.2}s",
                model.dir().display(),
                start.elapsed().as_secs_f64()
            );
            Some(model)
        }
        None => {
            println!(
                "{} unset: lexical figures only",
                toolshed_search::semantic::MODEL_ENV
            );
            None
        }
    };
    println!(
        "{:<30} {:>7} {:>6} {:>6} {:>6} {:>8} {:>6} {:>8}",
        "set", "queries", "R@1", "R@5", "R@10", "nDCG@10", "MRR", "time"
    );
    let pool: Vec<(String, Vec<SetTool>)> = if pooled {
        let tools = |s: &PathBuf| read_tools(&s.join("tools.jsonl"));
        sets.iter().map(|s| (set_name(s), tools(s))).collect()
    } else {
        Vec::new()
    };
    for set in sets {
        let name = set_name(&set);
        let extra = if pooled {
            others_tools(&pool, &name, &extra)
        } else {
            extra.clone()
        };
        let Some(data) = load(&set, under.as_deref(), &extra) else {
            continue;
        };
        let start = Instant::now();
        bm25_baseline(&data).print(
            &format!("{name} bm25 (reference)"),
            start.elapsed().as_secs_f64(),
        );
        #[cfg(feature = "semantic")]
        if let Some(embedder) = &embedder {
            evaluate_hybrid(&name, &data, config, embedder, hybrid_config, one_vector);
            continue;
        }
        let start = Instant::now();
        evaluate(&data, config).print(&name, start.elapsed().as_secs_f64());
    }
}
