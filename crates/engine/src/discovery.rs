//! Discovery in the caller's view: listing, ranked search and compact descriptions.
//!
//! The search index is built lazily once per catalog snapshot and shared by every caller; the
//! caller's access is applied as a filter inside the ranking, so counts and hits only ever speak
//! of tools the caller may see.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolshed_core::{Catalog, EntryKind, ToolDef};
use toolshed_search::hybrid::EmbedTexts;
use toolshed_search::vectors;
use toolshed_search::{
    param_docs_from_schema, HybridConfig, HybridIndex, Query, SearchDoc, SearchIndex, TextEmbedder,
};

use crate::{Caller, Engine, EngineError};

mod visibility;
use visibility::Visibility;

/// The search indexes of one catalog snapshot: BM25F always, plus the hybrid (BM25F fused with
/// embeddings) once a configured embedder has embedded every tool of the snapshot.
#[derive(Clone)]
pub(crate) struct Ranker {
    pub lexical: Arc<SearchIndex>,
    pub hybrid: Option<Arc<HybridIndex>>,
    /// What a search's filter reads per candidate.
    visibility: Arc<Visibility>,
}

struct Built {
    version: u64,
    ranker: Ranker,
}

/// The semantic stage: the embedder, and the vectors of tool texts embedded so far (kept
/// across catalog versions, so a change embeds only the tools it adds or alters).
struct Semantic {
    embedder: Arc<dyn TextEmbedder>,
    /// Vectors by [`vectors::text_key`] of the embedded text.
    vectors: Mutex<HashMap<u64, Arc<[f32]>>>,
    /// Where vectors are kept between runs (none: recomputed each run).
    file: Option<PathBuf>,
    /// The newest catalog version whose embeddings are done (or failed), for waiters.
    done: Mutex<Option<(u64, Option<String>)>>,
    changed: Condvar,
    /// Held by the one thread embedding at a time: snapshots are embedded in turn, and one
    /// that is no longer current when its turn comes is skipped.
    worker: Mutex<()>,
}

/// Search indexes per catalog snapshot, shared by every caller. The lexical index is built on
/// the first search of a snapshot; embeddings are computed on a background thread, and
/// searches rank lexically until they are ready. A snapshot whose texts all have vectors
/// already (stored from an earlier run or snapshot) gets its hybrid index at once.
#[derive(Default)]
pub(crate) struct SearchCache {
    slot: Arc<Mutex<Option<Built>>>,
    semantic: Option<Arc<Semantic>>,
}

impl SearchCache {
    pub(crate) fn with_embedder(embedder: Arc<dyn TextEmbedder>, file: Option<PathBuf>) -> Self {
        let model = embedder.model_id();
        let file = file.filter(|_| !model.is_empty());
        let stored = file
            .as_deref()
            .map(|f| vectors::load(f, &model, embedder.dim()))
            .unwrap_or_default();
        Self {
            slot: Arc::default(),
            semantic: Some(Arc::new(Semantic {
                embedder,
                vectors: Mutex::new(stored),
                file,
                done: Mutex::default(),
                changed: Condvar::new(),
                worker: Mutex::new(()),
            })),
        }
    }

    /// The embedding model, when the server has one (also used by agent thread memory).
    pub(crate) fn embedder(&self) -> Option<Arc<dyn TextEmbedder>> {
        self.semantic.as_ref().map(|s| s.embedder.clone())
    }

    fn get(&self, catalog: &Catalog) -> Ranker {
        let mut slot = self.slot.lock();
        if let Some(b) = slot.as_ref() {
            if b.version == catalog.version() {
                return b.ranker.clone();
            }
        }
        let docs: Vec<SearchDoc> = catalog
            .iter()
            .map(|e| {
                let d = &e.tool.def;
                SearchDoc {
                    path: d.path.to_string(),
                    name: d.name.clone(),
                    description: d.description.clone(),
                    params: param_docs_from_schema(&d.input_schema),
                }
            })
            .collect();
        let lexical = Arc::new(SearchIndex::build(&docs));
        let version = catalog.version();
        let (hybrid, to_embed) = match &self.semantic {
            None => (None, None),
            // A snapshot whose texts are all embedded already (a listing read again, a tool
            // taken away) ranks with its vectors from its first search.
            Some(semantic) => match semantic.hybrid_from_stored(&docs, lexical.clone()) {
                Ok(hybrid) => {
                    // Said as after embedding, so a log reader learns it either way.
                    tracing::info!(tools = docs.len(), embedded = 0, "semantic search ready");
                    semantic.finish(version, None);
                    (Some(Arc::new(hybrid)), None)
                }
                Err(texts) => (None, Some(texts)),
            },
        };
        let ranker = Ranker {
            lexical: lexical.clone(),
            hybrid,
            visibility: Arc::new(Visibility::of(catalog)),
        };
        *slot = Some(Built {
            version,
            ranker: ranker.clone(),
        });
        if let (Some(semantic), Some(texts)) = (&self.semantic, to_embed) {
            let (semantic, slot) = (semantic.clone(), self.slot.clone());
            std::thread::Builder::new()
                .name("toolshed-embed".into())
                .spawn(move || embed_snapshot(&semantic, &slot, version, texts, lexical))
                .map_err(|e| tracing::warn!(error = %e, "cannot start the embedding thread"))
                .ok();
        }
        ranker
    }

    /// Waits until the embeddings of `version` (or of a newer snapshot) are done; `Ok(false)` on
    /// timeout, `Err` with the embedder's error when they failed. Without an embedder there is
    /// nothing to wait for.
    fn wait_semantic(&self, version: u64, timeout: Duration) -> Result<bool, String> {
        let Some(semantic) = &self.semantic else {
            return Ok(true);
        };
        let deadline = std::time::Instant::now() + timeout;
        let mut done = semantic.done.lock();
        loop {
            match done.as_ref() {
                Some((v, None)) if *v >= version => return Ok(true),
                Some((v, Some(e))) if *v >= version => return Err(e.clone()),
                _ => {}
            }
            if semantic.changed.wait_until(&mut done, deadline).timed_out() {
                return Ok(false);
            }
        }
    }
}

/// Runs model inference: on a multi-threaded tokio runtime the worker hands its other tasks
/// to the rest of the pool first (`block_in_place`), so a query embedding does not stall them.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Embeds the texts of one snapshot's tools ([`EmbedTexts`]; vectors of unchanged texts are
/// reused) and installs the hybrid index if the snapshot is still current.
fn embed_snapshot(
    semantic: &Semantic,
    slot: &Mutex<Option<Built>>,
    version: u64,
    texts: EmbedTexts,
    lexical: Arc<SearchIndex>,
) {
    let _turn = semantic.worker.lock();
    let current =
        |slot: &Mutex<Option<Built>>| slot.lock().as_ref().map(|b| b.version) == Some(version);
    if !current(slot) {
        return; // a newer snapshot's thread will embed (and report) instead
    }
    let tools = lexical.len();
    let EmbedTexts { texts, extra_of } = texts;
    let keys: Vec<u64> = texts.iter().map(|t| vectors::text_key(t)).collect();
    let dim = semantic.embedder.dim();
    let missing: Vec<(u64, &str)> = {
        let cache = semantic.vectors.lock();
        let mut seen = std::collections::HashSet::new();
        keys.iter()
            .zip(&texts)
            .filter(|(k, _)| !cache.contains_key(k) && seen.insert(**k))
            .map(|(k, t)| (*k, t.as_str()))
            .collect()
    };
    let started = std::time::Instant::now();
    let batch: Vec<&str> = missing.iter().map(|(_, t)| *t).collect();
    let outcome = semantic.embedder.embed_texts(&batch).and_then(|fresh| {
        if fresh.len() != missing.len() * dim {
            return Err(toolshed_search::EmbedError(format!(
                "the embedder returned {} values for {} texts of dimension {dim}",
                fresh.len(),
                missing.len()
            )));
        }
        let mut cache = semantic.vectors.lock();
        for ((k, _), v) in missing.iter().zip(fresh.chunks_exact(dim.max(1))) {
            cache.insert(*k, Arc::from(v));
        }
        let mut out = Vec::with_capacity(keys.len() * dim);
        for k in &keys {
            // Present: this thread is the only one changing the cache while it embeds.
            let v = cache.get(k).ok_or_else(|| {
                toolshed_search::EmbedError("a tool's vector went missing".to_string())
            })?;
            out.extend_from_slice(v);
        }
        // Keep only what the current snapshot uses, and store it for the next run.
        let current: std::collections::HashSet<u64> = keys.iter().copied().collect();
        cache.retain(|k, _| current.contains(k));
        if let Some(file) = semantic.file.as_deref().filter(|_| !missing.is_empty()) {
            if let Err(e) = vectors::save(file, &semantic.embedder.model_id(), dim, &cache) {
                tracing::warn!(file = %file.display(), error = %e, "cannot store tool embeddings");
            }
        }
        Ok(out)
    });
    let error = match outcome {
        Ok(vectors) => {
            let hybrid = HybridIndex::from_rows(
                lexical,
                semantic.embedder.clone(),
                vectors,
                extra_of,
                HybridConfig::default(),
            );
            let mut slot = slot.lock();
            if let Some(b) = slot.as_mut().filter(|b| b.version == version) {
                b.ranker.hybrid = Some(Arc::new(hybrid));
            }
            tracing::info!(
                tools,
                embedded = missing.len(),
                ms = started.elapsed().as_millis() as u64,
                "semantic search ready"
            );
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "tool embeddings failed: search stays lexical");
            Some(e.to_string())
        }
    };
    semantic.finish(version, error);
}

impl Semantic {
    /// The hybrid index of `docs` from vectors embedded before, or, when a text of theirs has
    /// none yet, the texts to embed.
    fn hybrid_from_stored(
        &self,
        docs: &[SearchDoc],
        lexical: Arc<SearchIndex>,
    ) -> Result<HybridIndex, EmbedTexts> {
        let texts = EmbedTexts::of(docs);
        let mut rows = Vec::with_capacity(texts.texts.len() * self.embedder.dim());
        {
            let cache = self.vectors.lock();
            for t in &texts.texts {
                match cache.get(&vectors::text_key(t)) {
                    Some(v) => rows.extend_from_slice(v),
                    None => return Err(texts),
                }
            }
        }
        Ok(HybridIndex::from_rows(
            lexical,
            self.embedder.clone(),
            rows,
            texts.extra_of,
            HybridConfig::default(),
        ))
    }

    /// Records that the embeddings of `version` are done (`error`: why they failed) and wakes
    /// the waiters; an older version finishing later changes nothing.
    fn finish(&self, version: u64, error: Option<String>) {
        let mut done = self.done.lock();
        if done.as_ref().is_none_or(|(v, _)| *v <= version) {
            *done = Some((version, error));
        }
        self.changed.notify_all();
    }
}

/// One search hit, compact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchHit {
    pub path: String,
    pub name: String,
    pub summary: String,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub destructive: bool,
    /// `resource` or `prompt` for those entries; absent for tools.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kind: Option<String>,
}

/// A ranked answer: hits plus how many tools matched in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchAnswer {
    pub total: usize,
    pub hits: Vec<SearchHit>,
}

/// What `read_tool` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    pub path: String,
    pub name: String,
    /// The compact schema text with an example call.
    pub text: String,
    pub destructive: bool,
    pub read_only: bool,
    /// Raw schemas, only when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// Summary budget in width units ([`text_width`]): about 16 tokens (o200k) of English.
const SUMMARY_WIDTH: usize = 72;

/// A hit's name budget in width units: a name is a title ("List Pets"), but an upstream may
/// declare a paragraph as one, and every hit of an answer carries it.
const NAME_WIDTH: usize = 60;

/// A character's share of a width budget, set so that a width unit costs about the same tokens
/// whatever the script: ASCII 1 (about 4.5 characters a token), a character of the wide East
/// Asian scripts 3 (about 0.75 tokens each), any other character 2.
fn text_width(c: char) -> usize {
    if c.is_ascii() {
        return 1;
    }
    let wide = matches!(c as u32,
        0x1100..=0x115F | 0x2E80..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F | 0xFF00..=0xFF60 | 0xFFE0..=0xFFE6 | 0x20000..=0x3FFFD);
    if wide {
        3
    } else {
        2
    }
}

/// The first non-empty line of `s`, trimmed.
fn first_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// `text` within `budget` width units ([`text_width`]), ended by "…" where it was cut.
fn clip(text: &str, budget: usize) -> String {
    let mut width = 0;
    let mut out = String::new();
    for c in text.chars() {
        width += text_width(c);
        if width >= budget {
            out.push('…');
            return out;
        }
        out.push(c);
    }
    out
}

/// A hit's summary: the first sentence of the description's first line, clipped.
fn one_line(s: &str) -> String {
    let line = first_line(s);
    // The first sentence: up to ". " past the first 20 bytes, or up to a full-width "。".
    let latin_end = line
        .match_indices(". ")
        .map(|(i, _)| i + 1)
        .find(|&end| end > 21);
    let wide_end = line.find('。').map(|i| i + '。'.len_utf8());
    let first_sentence = match latin_end.into_iter().chain(wide_end).min() {
        Some(end) => &line[..end],
        None => line,
    };
    clip(first_sentence, SUMMARY_WIDTH)
}

/// A hit's name: the tool's name on one line, clipped.
fn hit_name(name: &str) -> String {
    clip(first_line(name), NAME_WIDTH)
}

impl Engine {
    /// The tool definitions the caller may see, in catalog order.
    pub fn list_tools(&self, caller: &Caller) -> Vec<ToolDef> {
        self.list_entries(caller, EntryKind::Tool)
    }

    /// The caller's entries of one kind: tools, or upstream resources or prompts.
    pub fn list_entries(&self, caller: &Caller, kind: EntryKind) -> Vec<ToolDef> {
        self.inner
            .catalog
            .load()
            .iter()
            .filter(|e| e.tool.def.kind == kind && caller.allows(e.tool.def.path.as_str()))
            .map(|e| e.tool.def.clone())
            .collect()
    }

    /// Tool counts per namespace in the caller's view.
    pub fn namespaces(&self, caller: &Caller) -> BTreeMap<String, usize> {
        self.inner
            .catalog
            .load()
            .namespaces(|p| caller.allows(p.as_str()))
    }

    /// Builds the search index of the current snapshot now rather than on the first search
    /// (and, with an embedder, starts embedding its tools in the background).
    pub fn warm_search(&self) {
        let catalog = self.inner.catalog.load();
        self.inner.search.get(&catalog);
    }

    /// Waits until search over the current snapshot ranks with embeddings too: `Ok(true)`
    /// when ready (or when no embedder is configured), `Ok(false)` on timeout, `Err` with the
    /// embedder's error when embedding failed (search then stays lexical).
    pub fn wait_semantic_search(&self, timeout: Duration) -> Result<bool, String> {
        let catalog = self.inner.catalog.load();
        self.inner.search.get(&catalog);
        self.inner.search.wait_semantic(catalog.version(), timeout)
    }

    /// `"hybrid"` when searches of the current snapshot fuse embeddings with BM25F, else
    /// `"lexical"`.
    pub fn search_mode(&self) -> &'static str {
        let catalog = self.inner.catalog.load();
        match self.inner.search.get(&catalog).hybrid {
            Some(_) => "hybrid",
            None => "lexical",
        }
    }

    /// Ranked search of tools in the caller's view.
    pub fn search(
        &self,
        caller: &Caller,
        text: &str,
        limit: usize,
        namespace: Option<&str>,
    ) -> SearchAnswer {
        self.search_kind(caller, text, limit, namespace, EntryKind::Tool)
    }

    /// Ranked search of one kind of entry (tools, resources or prompts) in the caller's view.
    pub fn search_kind(
        &self,
        caller: &Caller,
        text: &str,
        limit: usize,
        namespace: Option<&str>,
        kind: EntryKind,
    ) -> SearchAnswer {
        let catalog = self.inner.catalog.load();
        let ranker = self.inner.search.get(&catalog);
        let filter = ranker.visibility.filter(&catalog, &caller.access, kind);
        let query = Query {
            text,
            limit: limit.clamp(1, 100),
            namespace,
            filter: Some(&filter),
        };
        let result = match &ranker.hybrid {
            Some(hybrid) => blocking(|| hybrid.search(&query)).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "query embedding failed: ranking lexically");
                ranker.lexical.search(&query)
            }),
            None => ranker.lexical.search(&query),
        };
        let hits = result
            .hits
            .iter()
            .filter_map(|h| catalog.get_index(h.doc))
            .map(|e| {
                let d = &e.tool.def;
                SearchHit {
                    path: d.path.to_string(),
                    name: hit_name(&d.name),
                    summary: one_line(&d.description),
                    destructive: d.annotations.destructive,
                    kind: (!d.kind.is_tool()).then(|| d.kind.as_str().to_string()),
                }
            })
            .collect();
        SearchAnswer {
            total: result.total,
            hits,
        }
    }

    /// The compact description of one tool (`read_tool`), optionally with raw schemas.
    pub fn describe(
        &self,
        caller: &Caller,
        path: &str,
        with_schemas: bool,
    ) -> Result<Description, EngineError> {
        let entry = self.resolve(caller, path)?;
        let d = &entry.tool.def;
        let text = toolshed_schema::render_tool(
            d.path.as_str(),
            &d.name,
            &d.description,
            &d.input_schema,
            d.output_schema.as_ref(),
            d.annotations.destructive,
        );
        Ok(Description {
            path: d.path.to_string(),
            name: d.name.clone(),
            text,
            destructive: d.annotations.destructive,
            read_only: d.annotations.read_only,
            input_schema: with_schemas.then(|| d.input_schema.clone()),
            output_schema: if with_schemas {
                d.output_schema.clone()
            } else {
                None
            },
        })
    }

    /// A sentence for meta-tool descriptions: how many tools, in which namespaces.
    pub fn view_summary(&self, caller: &Caller) -> String {
        let ns = self.namespaces(caller);
        let total: usize = ns.values().sum();
        if total == 0 {
            return "No tools are available to you.".to_string();
        }
        let mut parts: Vec<String> = ns.iter().map(|(k, v)| format!("{k} ({v})")).collect();
        if parts.len() > 25 {
            let more = parts.len() - 25;
            parts.truncate(25);
            parts.push(format!("and {more} more"));
        }
        format!("{total} tools in namespaces: {}.", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::{hit_name, one_line};

    #[test]
    fn summaries_are_one_short_line() {
        assert_eq!(one_line("\n  Lists pets.\nMore text"), "Lists pets.");
        let long = "word ".repeat(60);
        assert!(one_line(&long).chars().count() <= 72);
        let wide = "搜索".repeat(60);
        assert_eq!(
            one_line(&wide).chars().count(),
            24,
            "23 wide characters and the ellipsis"
        );
        let hangul = "검색".repeat(60);
        assert_eq!(one_line(&hangul).chars().count(), 24);
        let accented = "é".repeat(60);
        assert_eq!(one_line(&accented).chars().count(), 36);
        assert_eq!(
            one_line("Creates an issue in a repository. Requires push access."),
            "Creates an issue in a repository."
        );
        assert_eq!(
            one_line("根据八字获取公历时间列表。返回的时间格式为：YYYY-MM-DD"),
            "根据八字获取公历时间列表。"
        );
        assert_eq!(one_line("Gets a pet. See below."), "Gets a pet. See below.");
    }

    #[test]
    fn hit_names_are_one_short_line() {
        assert_eq!(hit_name("List Pets"), "List Pets");
        assert_eq!(hit_name("\n  Search\nEverything"), "Search");
        let long = "Word ".repeat(100);
        let name = hit_name(&long);
        assert_eq!(name.chars().count(), 60, "59 characters and the ellipsis");
        assert!(name.ends_with('…'));
        assert_eq!(hit_name(&"名".repeat(50)).chars().count(), 20);
    }
}

#[cfg(test)]
mod semantic_tests {
    use super::*;
    use serde_json::json;
    use toolshed_core::{Annotations, CatalogBuilder, Policy, SharedCatalog, Tool, ToolPath};
    use toolshed_search::EmbedError;

    use crate::{EngineConfig, Face};

    /// A stand-in model: words vote for a concept axis; counts how many texts it embedded.
    #[derive(Debug, Default)]
    struct Concepts {
        embedded: std::sync::atomic::AtomicUsize,
    }

    const AXES: [&[&str]; 2] = [
        &["time", "clock", "late", "hour", "moment"],
        &["rain", "weather", "forecast", "wind"],
    ];

    impl TextEmbedder for Concepts {
        fn dim(&self) -> usize {
            AXES.len() + 1
        }

        fn model_id(&self) -> String {
            "concepts-1".into()
        }

        fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError> {
            self.embedded
                .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            let mut out = Vec::new();
            for t in texts {
                let mut v = vec![0f32; self.dim()];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let w = w.to_lowercase();
                    let axis = AXES.iter().position(|a| a.contains(&w.as_str()));
                    v[axis.unwrap_or(AXES.len())] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                out.extend(v.iter().map(|x| x / n));
            }
            Ok(out)
        }
    }

    /// A policy under which alice sees every tool.
    fn everything_for_alice() -> Policy {
        Policy::new(
            vec![toolshed_core::Role {
                id: "all".into(),
                name: "All".into(),
                patterns: vec!["*".into()],
                ..Default::default()
            }],
            vec![toolshed_core::Principal {
                id: "alice".into(),
                roles: vec!["all".into()],
            }],
        )
        .unwrap()
    }

    fn tool(path: &str, description: &str) -> Tool {
        Tool::from_fn(
            toolshed_core::ToolDef::new(ToolPath::parse(path).unwrap(), path, description)
                .with_input(json!({"type": "object"}))
                .with_annotations(Annotations::READ_ONLY),
            |_ctx, _args| async { Ok(json!(null)) },
        )
    }

    fn catalog(extra: bool) -> toolshed_core::Catalog {
        let mut b = CatalogBuilder::new();
        b.add_tool(tool("clock.current", "Return the current hour in a zone."));
        b.add_tool(tool("sky.outlook", "Rain and wind outlook for a city."));
        b.add_tool(tool("hidden.hour", "The hour, for admins only."));
        if extra {
            b.add_tool(tool("sky.alerts", "Storm alerts."));
        }
        b.build().unwrap()
    }

    #[tokio::test]
    async fn hybrid_search_ranks_by_meaning_in_the_callers_view_and_reembeds_only_changes() {
        let shared = Arc::new(SharedCatalog::new(catalog(false)));
        let policy = Policy::new(
            vec![toolshed_core::Role {
                id: "r".into(),
                name: "R".into(),
                patterns: vec!["clock.**".into(), "sky.**".into()],
                ..Default::default()
            }],
            vec![toolshed_core::Principal {
                id: "alice".into(),
                roles: vec!["r".into()],
            }],
        )
        .unwrap();
        let store = toolshed_store::Store::open("sqlite::memory:")
            .await
            .unwrap();
        let model = Arc::new(Concepts::default());
        let engine = Engine::new(shared.clone(), policy, store, EngineConfig::default())
            .with_embedder(model.clone(), None);
        let alice = engine.caller("alice", Face::Cli);

        // No word of the query is in the clock tool: lexical ranking alone cannot find it.
        let query = "how late is it at the moment";
        let before = engine.search(&alice, query, 5, None);
        assert!(
            before.hits.iter().all(|h| h.path != "clock.current"),
            "{before:?}"
        );

        assert_eq!(
            engine.wait_semantic_search(Duration::from_secs(10)),
            Ok(true)
        );
        assert_eq!(engine.search_mode(), "hybrid");
        let after = engine.search(&alice, query, 5, None);
        assert_eq!(after.hits[0].path, "clock.current", "{after:?}");
        // The caller's view still applies: the hidden tool never shows.
        assert!(after.hits.iter().all(|h| h.path != "hidden.hour"));
        // Three tools, then one query.
        assert_eq!(model.embedded.load(std::sync::atomic::Ordering::SeqCst), 4);

        // A new snapshot embeds only the tool it adds.
        shared.store(catalog(true));
        assert_eq!(
            engine.wait_semantic_search(Duration::from_secs(10)),
            Ok(true)
        );
        assert_eq!(model.embedded.load(std::sync::atomic::Ordering::SeqCst), 5);
        let r = engine.search(&alice, "weather", 5, Some("sky"));
        assert!(r.hits.iter().all(|h| h.path.starts_with("sky.")), "{r:?}");

        // A snapshot of tools embedded before (one taken away) ranks by meaning from its first
        // search, without waiting and without the model (the query is in the query cache).
        let embedded = model.embedded.load(std::sync::atomic::Ordering::SeqCst);
        shared.store(catalog(false));
        assert_eq!(engine.search_mode(), "hybrid");
        let first = engine.search(&alice, query, 5, None);
        assert_eq!(first.hits[0].path, "clock.current", "{first:?}");
        assert_eq!(
            engine.wait_semantic_search(Duration::from_millis(1)),
            Ok(true)
        );
        assert_eq!(
            model.embedded.load(std::sync::atomic::Ordering::SeqCst),
            embedded
        );
    }

    #[tokio::test]
    async fn stored_vectors_spare_the_next_run_from_embedding_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tool-vectors.bin");
        for expected in [3, 0] {
            let model = Arc::new(Concepts::default());
            let store = toolshed_store::Store::open("sqlite::memory:")
                .await
                .unwrap();
            let shared = Arc::new(SharedCatalog::new(catalog(false)));
            let engine = Engine::new(
                shared,
                everything_for_alice(),
                store,
                EngineConfig::default(),
            )
            .with_embedder(model.clone(), Some(file.clone()));
            assert_eq!(
                engine.wait_semantic_search(Duration::from_secs(10)),
                Ok(true)
            );
            assert_eq!(
                model.embedded.load(std::sync::atomic::Ordering::SeqCst),
                expected
            );
            let alice = engine.caller("alice", Face::Cli);
            let r = engine.search(&alice, "what is the current hour", 1, None);
            assert_eq!(r.hits[0].path, "clock.current", "{r:?}");
        }
        // A damaged file only costs time.
        std::fs::write(&file, b"TSVEC1\nconcepts-1\n3\n123").unwrap();
        let model = Arc::new(Concepts::default());
        let store = toolshed_store::Store::open("sqlite::memory:")
            .await
            .unwrap();
        let engine = Engine::new(
            Arc::new(SharedCatalog::new(catalog(false))),
            everything_for_alice(),
            store,
            EngineConfig::default(),
        )
        .with_embedder(model.clone(), Some(file));
        assert_eq!(
            engine.wait_semantic_search(Duration::from_secs(10)),
            Ok(true)
        );
        assert_eq!(model.embedded.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    /// A slow stand-in: every batch takes 50 ms, so snapshots overlap.
    #[derive(Debug, Default)]
    struct Slow(Concepts);

    impl TextEmbedder for Slow {
        fn dim(&self) -> usize {
            self.0.dim()
        }

        fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError> {
            std::thread::sleep(Duration::from_millis(50));
            self.0.embed_texts(texts)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn snapshots_changing_while_embedding_end_on_the_newest() {
        let shared = Arc::new(SharedCatalog::new(catalog(true)));
        let store = toolshed_store::Store::open("sqlite::memory:")
            .await
            .unwrap();
        let model = Arc::new(Slow::default());
        let policy = everything_for_alice();
        let engine = Engine::new(shared.clone(), policy, store, EngineConfig::default())
            .with_embedder(model.clone(), None);
        engine.warm_search();
        // Tools come and go faster than they are embedded.
        for extra in [false, true, false] {
            shared.store(catalog(extra));
            engine.warm_search();
        }
        assert_eq!(
            engine.wait_semantic_search(Duration::from_secs(10)),
            Ok(true)
        );
        assert_eq!(engine.search_mode(), "hybrid");
        let alice = engine.caller("alice", Face::Cli);
        let r = engine.search(&alice, "how late is it at the moment", 3, None);
        let top: Vec<&str> = r.hits.iter().take(2).map(|h| h.path.as_str()).collect();
        assert!(
            top.contains(&"clock.current") && top.contains(&"hidden.hour"),
            "{r:?}"
        );
        // The newest snapshot has no `sky.alerts`; its vector is not searched.
        assert!(engine
            .search(&alice, "storm alerts", 5, None)
            .hits
            .iter()
            .all(|h| h.path != "sky.alerts"));
    }

    #[tokio::test]
    async fn without_an_embedder_search_is_lexical_and_nothing_waits() {
        let shared = Arc::new(SharedCatalog::new(catalog(false)));
        let store = toolshed_store::Store::open("sqlite::memory:")
            .await
            .unwrap();
        let policy = everything_for_alice();
        let engine = Engine::new(shared, policy, store, EngineConfig::default());
        assert_eq!(
            engine.wait_semantic_search(Duration::from_millis(1)),
            Ok(true)
        );
        assert_eq!(engine.search_mode(), "lexical");
    }
}
