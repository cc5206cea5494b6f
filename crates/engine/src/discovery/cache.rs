//! The search indexes of each catalog snapshot, and the background embedding of its tools.
//!
//! The lexical index is built on the first search of a snapshot, or, in a serving process, as
//! soon as the snapshot is stored (`Engine::warm_search` at start, `Engine::spawn_search_warmer`
//! after; both through [`SearchCache::get`]). With an embedder, the tools' texts are embedded on a
//! background thread, a chunk at a time ([`CHUNK`]): searches rank lexically until every text
//! has a vector, the progress is there to read ([`SearchState`]), a run stopped half-way keeps
//! what it embedded (the vectors are stored every [`SAVE_EVERY`] of work, and when a run fails
//! or stops early), and a snapshot replaced while it embeds stops at its next chunk, leaving
//! its vectors to the newer one. A thread that dies (a panic in the model) reports a failure,
//! so nothing waits for it and search says it ranks by words. The slot never goes back to an
//! older snapshot: a caller that loaded one just before a newer one was stored gets a ranker
//! of its own.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use toolshed_core::Catalog;
use toolshed_search::hybrid::EmbedTexts;
use toolshed_search::vectors;
use toolshed_search::{
    param_docs_from_schema, HybridConfig, HybridIndex, SearchDoc, SearchIndex, TextEmbedder,
};

use super::visibility::Visibility;

/// Texts embedded between two looks at the snapshot (still current?) and the progress.
const CHUNK: usize = 256;

/// Work between two stores of the vectors embedded so far, while a catalog embeds.
const SAVE_EVERY: Duration = Duration::from_secs(60);

/// Time between two progress lines in the log while a catalog embeds.
const LOG_EVERY: Duration = Duration::from_secs(15);

/// Where ranked search stands for the current catalog snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchState {
    /// By words only: no model is configured, or embedding the tools failed (the log says why).
    Lexical,
    /// By words only for now: `done` of the `total` tool texts the snapshot lacked vectors for
    /// are embedded.
    Embedding { done: usize, total: usize },
    /// By words and meaning, fused.
    Hybrid,
}

impl SearchState {
    /// `lexical`, `embedding` or `hybrid`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Lexical => "lexical",
            Self::Embedding { .. } => "embedding",
            Self::Hybrid => "hybrid",
        }
    }
}

/// The search indexes of one catalog snapshot: BM25F always, plus the hybrid (BM25F fused with
/// embeddings) once a configured embedder has embedded every tool of the snapshot.
#[derive(Clone)]
pub(crate) struct Ranker {
    pub lexical: Arc<SearchIndex>,
    pub hybrid: Option<Arc<HybridIndex>>,
    /// What a search's filter reads per candidate.
    pub visibility: Arc<Visibility>,
}

impl Ranker {
    /// A ranker of `catalog` by words only, kept nowhere.
    fn lexical(catalog: &Catalog, docs: &[SearchDoc]) -> Self {
        Self {
            lexical: Arc::new(SearchIndex::build(docs)),
            hybrid: None,
            visibility: Arc::new(Visibility::of(catalog)),
        }
    }
}

struct Built {
    version: u64,
    ranker: Ranker,
}

/// How far the embedding of one snapshot has got.
#[derive(Debug, Clone, Copy)]
struct Progress {
    version: u64,
    done: usize,
    total: usize,
}

/// The semantic stage: the embedder, and the vectors of tool texts embedded so far (kept
/// across catalog versions, so a change embeds only the tools it adds or alters).
struct Semantic {
    embedder: Arc<dyn TextEmbedder>,
    /// Vectors by [`vectors::text_key`] of the embedded text.
    vectors: Mutex<HashMap<u64, Arc<[f32]>>>,
    /// Where vectors are kept between runs (none: recomputed each run).
    file: Option<PathBuf>,
    /// Work between two stores of the vectors while a snapshot embeds ([`SAVE_EVERY`]).
    save_every: Duration,
    /// The newest catalog version whose embeddings are done (or failed), for waiters.
    done: Mutex<Option<(u64, Option<String>)>>,
    changed: Condvar,
    /// The snapshot being embedded (or waiting for its turn), and how far it has got.
    progress: Mutex<Option<Progress>>,
    /// Held by the one thread embedding at a time: snapshots are embedded in turn, and one
    /// that is no longer current when its turn comes (or between two chunks) stops.
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
        Self::with_embedder_saving(embedder, file, SAVE_EVERY)
    }

    fn with_embedder_saving(
        embedder: Arc<dyn TextEmbedder>,
        file: Option<PathBuf>,
        save_every: Duration,
    ) -> Self {
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
                save_every,
                done: Mutex::default(),
                changed: Condvar::new(),
                progress: Mutex::default(),
                worker: Mutex::new(()),
            })),
        }
    }

    /// The embedding model, when the server has one (also used by agent thread memory).
    pub(crate) fn embedder(&self) -> Option<Arc<dyn TextEmbedder>> {
        self.semantic.as_ref().map(|s| s.embedder.clone())
    }

    /// The indexes of `catalog`, built now if this snapshot has none yet (and, with an
    /// embedder, its tools' embedding started in the background).
    pub(crate) fn get(&self, catalog: &Catalog) -> Ranker {
        let mut slot = self.slot.lock();
        let version = catalog.version();
        if let Some(b) = slot.as_ref().filter(|b| b.version == version) {
            return b.ranker.clone();
        }
        // A caller that loaded the catalog just before a newer one was stored: its ranker is
        // built for it alone (outside the lock), and the newer snapshot keeps the slot.
        if slot.as_ref().is_some_and(|b| b.version > version) {
            drop(slot);
            return Ranker::lexical(catalog, &search_docs(catalog));
        }
        let docs = search_docs(catalog);
        let lexical = Arc::new(SearchIndex::build(&docs));
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
                Err(missing) => (None, Some(missing)),
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
        if let (Some(semantic), Some(to_embed)) = (&self.semantic, to_embed) {
            semantic.set_progress(version, 0, to_embed.missing);
            let (embedding, slot) = (semantic.clone(), self.slot.clone());
            let spawned = std::thread::Builder::new()
                .name("toolshed-embed".into())
                .spawn(move || embed_snapshot(&embedding, &slot, version, to_embed, lexical));
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start the embedding thread: search stays lexical");
                semantic.finish(
                    version,
                    Some(format!("cannot start the embedding thread: {e}")),
                );
            }
        }
        ranker
    }

    /// Where search over `catalog` stands, given its `ranker` (from [`SearchCache::get`]).
    pub(crate) fn state(&self, catalog: &Catalog, ranker: &Ranker) -> SearchState {
        let read = (ranker.hybrid.is_some(), ranker.lexical.len());
        self.recorded_state(catalog.version(), Some(read))
    }

    /// [`SearchCache::state`] without waiting and without building: `None` when `catalog` has
    /// no indexes yet (the caller builds them, [`SearchCache::get`]). While another caller
    /// holds them (building a snapshot's), the state is read from the embedding's records.
    pub(crate) fn try_state(&self, catalog: &Catalog) -> Option<SearchState> {
        let version = catalog.version();
        let Some(slot) = self.slot.try_lock() else {
            return Some(self.recorded_state(version, None));
        };
        match slot.as_ref() {
            Some(b) if b.version == version => {
                let read = (b.ranker.hybrid.is_some(), b.ranker.lexical.len());
                drop(slot);
                Some(self.recorded_state(version, Some(read)))
            }
            Some(b) if b.version > version => {
                drop(slot);
                Some(self.recorded_state(version, None))
            }
            _ => None,
        }
    }

    /// The state of snapshot `version` from the embedding's records and, when it was read, its
    /// ranker's `(has a hybrid index, tools)`.
    fn recorded_state(&self, version: u64, ranker: Option<(bool, usize)>) -> SearchState {
        let Some(semantic) = &self.semantic else {
            return SearchState::Lexical;
        };
        let (hybrid, tools) = ranker.unwrap_or((false, 0));
        if hybrid {
            return SearchState::Hybrid;
        }
        match semantic.done.lock().as_ref() {
            Some((v, Some(_))) if *v >= version => return SearchState::Lexical,
            // Without the ranker, the records alone say the snapshot is done.
            Some((v, None)) if *v >= version && ranker.is_none() => return SearchState::Hybrid,
            _ => {}
        }
        match *semantic.progress.lock() {
            Some(p) if p.version == version => SearchState::Embedding {
                done: p.done,
                total: p.total,
            },
            // Its thread has not begun: every tool is still to embed, as far as is known.
            _ => SearchState::Embedding {
                done: 0,
                total: tools,
            },
        }
    }

    /// Waits until the embeddings of `version` (or of a newer snapshot) are done; `Ok(false)` on
    /// timeout, `Err` with the embedder's error when they failed. Without an embedder there is
    /// nothing to wait for.
    pub(crate) fn wait_semantic(&self, version: u64, timeout: Duration) -> Result<bool, String> {
        let Some(semantic) = &self.semantic else {
            return Ok(true);
        };
        let deadline = Instant::now() + timeout;
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

/// The search documents of a catalog's entries, in catalog order.
fn search_docs(catalog: &Catalog) -> Vec<SearchDoc> {
    catalog
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
        .collect()
}

/// Embeds the texts of one snapshot's tools ([`EmbedTexts`]; vectors of unchanged texts are
/// reused) and installs the hybrid index if the snapshot is still current.
fn embed_snapshot(
    semantic: &Semantic,
    slot: &Mutex<Option<Built>>,
    version: u64,
    to_embed: ToEmbed,
    lexical: Arc<SearchIndex>,
) {
    let _turn = semantic.worker.lock();
    let current =
        |slot: &Mutex<Option<Built>>| slot.lock().as_ref().map(|b| b.version) == Some(version);
    if !current(slot) {
        return; // a newer snapshot's thread will embed (and report) instead
    }
    let mut unfinished = Unfinished {
        semantic,
        version,
        armed: true,
    };
    let tools = lexical.len();
    let ToEmbed { texts, keys, .. } = to_embed;
    let EmbedTexts { texts, extra_of } = texts;
    let missing: Vec<(u64, &str)> = {
        let cache = semantic.vectors.lock();
        let mut seen = std::collections::HashSet::new();
        keys.iter()
            .zip(&texts)
            .filter(|(k, _)| !cache.contains_key(k) && seen.insert(**k))
            .map(|(k, t)| (*k, t.as_str()))
            .collect()
    };
    let started = Instant::now();
    let Some(outcome) = semantic.embed_missing(&missing, version, || current(slot)) else {
        unfinished.armed = false;
        return; // replaced while embedding: the newer snapshot's thread goes on from here
    };
    let outcome = outcome.and_then(|()| semantic.rows_of(&keys, !missing.is_empty()));
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
    unfinished.armed = false;
    semantic.finish(version, error);
}

/// A snapshot's texts to embed: all of them ([`EmbedTexts`]), their [`vectors::text_key`]s in
/// the same order, and how many distinct ones lacked a vector when the snapshot was indexed.
struct ToEmbed {
    texts: EmbedTexts,
    keys: Vec<u64>,
    missing: usize,
}

/// Reports a snapshot's embedding as failed when its thread ends without saying how it ended
/// (a panic in the model): the waiters wake, and search says `lexical`, not `embedding`.
struct Unfinished<'a> {
    semantic: &'a Semantic,
    version: u64,
    armed: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::warn!("the embedding thread stopped unexpectedly: search stays lexical");
            let why = "the embedding thread stopped unexpectedly".to_string();
            self.semantic.finish(self.version, Some(why));
        }
    }
}

impl Semantic {
    /// The hybrid index of `docs` from vectors embedded before, or, when texts of theirs have
    /// none yet, what there is to embed.
    fn hybrid_from_stored(
        &self,
        docs: &[SearchDoc],
        lexical: Arc<SearchIndex>,
    ) -> Result<HybridIndex, ToEmbed> {
        let texts = EmbedTexts::of(docs);
        let keys: Vec<u64> = texts.texts.iter().map(|t| vectors::text_key(t)).collect();
        let mut rows = Vec::with_capacity(texts.texts.len() * self.embedder.dim());
        let mut missing = std::collections::HashSet::new();
        {
            let cache = self.vectors.lock();
            for key in &keys {
                match cache.get(key) {
                    Some(v) if missing.is_empty() => rows.extend_from_slice(v),
                    Some(_) => {}
                    None => {
                        missing.insert(*key);
                    }
                }
            }
        }
        if !missing.is_empty() {
            let missing = missing.len();
            return Err(ToEmbed {
                texts,
                keys,
                missing,
            });
        }
        Ok(HybridIndex::from_rows(
            lexical,
            self.embedder.clone(),
            rows,
            texts.extra_of,
            HybridConfig::default(),
        ))
    }

    /// Embeds `missing` ((key, text) pairs) a [`CHUNK`] at a time into the vector cache,
    /// counting them in the progress of `version`, storing what is done every
    /// [`Semantic::save_every`] and logging every [`LOG_EVERY`]. `None` when `current` says,
    /// between two chunks, that the snapshot was replaced.
    fn embed_missing(
        &self,
        missing: &[(u64, &str)],
        version: u64,
        current: impl Fn() -> bool,
    ) -> Option<Result<(), toolshed_search::EmbedError>> {
        let dim = self.embedder.dim();
        let total = missing.len();
        self.set_progress(version, 0, total);
        let (mut saved, mut logged) = (Instant::now(), Instant::now());
        // Whether vectors were embedded since the last store: kept when the run ends early.
        let mut unsaved = false;
        let keep = |unsaved: bool| {
            if unsaved {
                self.save_so_far();
            }
        };
        for (i, chunk) in missing.chunks(CHUNK).enumerate() {
            if i > 0 && !current() {
                keep(unsaved);
                return None;
            }
            let batch: Vec<&str> = chunk.iter().map(|(_, t)| *t).collect();
            let fresh = match self.embedder.embed_texts(&batch) {
                Ok(fresh) if fresh.len() == chunk.len() * dim => fresh,
                Ok(fresh) => {
                    keep(unsaved);
                    return Some(Err(toolshed_search::EmbedError(format!(
                        "the embedder returned {} values for {} texts of dimension {dim}",
                        fresh.len(),
                        chunk.len()
                    ))));
                }
                Err(e) => {
                    keep(unsaved);
                    return Some(Err(e));
                }
            };
            {
                let mut cache = self.vectors.lock();
                for ((k, _), v) in chunk.iter().zip(fresh.chunks_exact(dim.max(1))) {
                    cache.insert(*k, Arc::from(v));
                }
            }
            unsaved = true;
            let done = (i * CHUNK + chunk.len()).min(total);
            self.set_progress(version, done, total);
            if done < total && logged.elapsed() >= LOG_EVERY {
                tracing::info!(done, total, "embedding tools for semantic search");
                logged = Instant::now();
            }
            if done < total && saved.elapsed() >= self.save_every {
                self.save_so_far();
                (saved, unsaved) = (Instant::now(), false);
            }
        }
        Some(Ok(()))
    }

    /// Records how far the embedding of `version` has got; a report of an older snapshot's
    /// (its thread not yet stopped) does not replace a newer one's.
    fn set_progress(&self, version: u64, done: usize, total: usize) {
        let mut progress = self.progress.lock();
        if progress.is_none_or(|p| p.version <= version) {
            *progress = Some(Progress {
                version,
                done,
                total,
            });
        }
    }

    /// Stores every vector embedded so far (the map is copied, so searches that build an
    /// index need not wait for the file).
    fn save_so_far(&self) {
        let so_far = self.vectors.lock().clone();
        self.save(&so_far);
    }

    /// The vectors of `keys`, in order, from the cache, which then keeps only those; stored for
    /// the next run when `store` (something new was embedded).
    fn rows_of(&self, keys: &[u64], store: bool) -> Result<Vec<f32>, toolshed_search::EmbedError> {
        let mut cache = self.vectors.lock();
        let mut out = Vec::with_capacity(keys.len() * self.embedder.dim());
        for k in keys {
            // Present: this thread is the only one changing the cache while it embeds.
            let v = cache.get(k).ok_or_else(|| {
                toolshed_search::EmbedError("a tool's vector went missing".to_string())
            })?;
            out.extend_from_slice(v);
        }
        // Keep only what the current snapshot uses, and store it for the next run (written
        // from a copy, so the file is not written under the lock).
        let current: std::collections::HashSet<u64> = keys.iter().copied().collect();
        cache.retain(|k, _| current.contains(k));
        let kept = store.then(|| cache.clone());
        drop(cache);
        if let Some(kept) = kept {
            self.save(&kept);
        }
        Ok(out)
    }

    /// Stores `vectors` in the vector file, if there is one; a failure is logged.
    fn save(&self, vectors: &HashMap<u64, Arc<[f32]>>) {
        if let Some(file) = self.file.as_deref() {
            let model = self.embedder.model_id();
            if let Err(e) = vectors::save(file, &model, self.embedder.dim(), vectors) {
                tracing::warn!(file = %file.display(), error = %e, "cannot store tool embeddings");
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::EMBEDDING_NOTE;
    use crate::Engine;
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
        assert_eq!(engine.search_state(), SearchState::Hybrid);
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
        assert_eq!(engine.search_state(), SearchState::Hybrid);
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
        let engine_storing_in = |model: Arc<Concepts>, file: PathBuf| {
            engine_with(
                catalog(false),
                SearchCache::with_embedder(model, Some(file)),
            )
        };
        for expected in [3, 0] {
            let model = Arc::new(Concepts::default());
            let engine = engine_storing_in(model.clone(), file.clone()).await;
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
        let engine = engine_storing_in(model.clone(), file).await;
        assert_eq!(
            engine.wait_semantic_search(Duration::from_secs(10)),
            Ok(true)
        );
        assert_eq!(model.embedded.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    /// [`Concepts`] with a fault: every batch slow (50 ms, so snapshots overlap), or a panic on
    /// a batch of several texts.
    #[derive(Debug, Default)]
    struct Faulty(Concepts, bool);

    impl TextEmbedder for Faulty {
        fn dim(&self) -> usize {
            self.0.dim()
        }

        fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError> {
            let Faulty(model, panics) = self;
            assert!(!panics || texts.len() < 2, "a model that breaks");
            std::thread::sleep(Duration::from_millis(50));
            model.embed_texts(texts)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn snapshots_changing_while_embedding_end_on_the_newest() {
        let cache = SearchCache::with_embedder(Arc::new(Faulty::default()), None);
        let engine = engine_with(catalog(true), cache).await;
        engine.warm_search();
        // Tools come and go faster than they are embedded.
        for extra in [false, true, false] {
            engine.inner.catalog.store(catalog(extra));
            engine.warm_search();
        }
        assert_eq!(
            engine.wait_semantic_search(Duration::from_secs(10)),
            Ok(true)
        );
        assert_eq!(engine.search_state(), SearchState::Hybrid);
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
        let engine = engine_with(catalog(false), SearchCache::default()).await;
        assert_eq!(
            engine.wait_semantic_search(Duration::from_millis(1)),
            Ok(true)
        );
        assert_eq!(engine.search_state(), SearchState::Lexical);
    }

    /// A model that embeds a batch of several texts only when the test lets it (one permit a
    /// batch; a closed channel fails the batch); a single text (a query) at once.
    #[derive(Debug)]
    struct Gated {
        model: Concepts,
        permits: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl TextEmbedder for Gated {
        fn dim(&self) -> usize {
            self.model.dim()
        }

        fn model_id(&self) -> String {
            self.model.model_id()
        }

        fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError> {
            if texts.len() > 1 {
                let permits = self.permits.lock().unwrap();
                permits
                    .recv_timeout(Duration::from_secs(20))
                    .map_err(|e| EmbedError(format!("no permit: {e}")))?;
            }
            self.model.embed_texts(texts)
        }
    }

    fn gated() -> (Arc<Gated>, std::sync::mpsc::Sender<()>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let model = Gated {
            model: Concepts::default(),
            permits: std::sync::Mutex::new(rx),
        };
        (Arc::new(model), tx)
    }

    /// `n` tools of one sentence each (one text apiece), the first of them the clock tool.
    fn many_tools(n: usize) -> toolshed_core::Catalog {
        let mut b = CatalogBuilder::new();
        b.add_tool(tool("clock.current", "Return the current hour in a zone."));
        for i in 1..n {
            b.add_tool(tool(&format!("misc.tool_{i}"), "Does a misc thing."));
        }
        b.build().unwrap()
    }

    /// An engine whose search cache is `cache`.
    async fn engine_with(catalog: toolshed_core::Catalog, cache: SearchCache) -> Engine {
        let store = toolshed_store::Store::open("sqlite::memory:")
            .await
            .unwrap();
        let shared = Arc::new(SharedCatalog::new(catalog));
        let engine = Engine::new(
            shared,
            everything_for_alice(),
            store,
            EngineConfig::default(),
        );
        let inner = Arc::try_unwrap(engine.inner).unwrap_or_else(|_| panic!("shared"));
        Engine {
            inner: Arc::new(crate::EngineState {
                search: cache,
                ..inner
            }),
        }
    }

    /// Polls `engine`'s search state until it is `want` (for at most ten seconds).
    fn until_state(engine: &Engine, want: SearchState) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while engine.search_state() != want {
            assert!(Instant::now() < deadline, "{:?}", engine.search_state());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_catalog_embeds_a_chunk_at_a_time_and_searches_say_so_until_it_is_done() {
        let (model, permits) = gated();
        let engine = engine_with(many_tools(600), SearchCache::with_embedder(model, None)).await;
        engine.warm_search();
        let alice = engine.caller("alice", Face::Cli);
        let query = "how late is it at the moment";

        // Nothing is embedded yet: by words, and the answer says so.
        assert_eq!(
            engine.search_state(),
            SearchState::Embedding {
                done: 0,
                total: 600
            }
        );
        let early = engine.search(&alice, query, 5, None);
        assert_eq!(early.note.as_deref(), Some(EMBEDDING_NOTE));
        assert!(early.hits.iter().all(|h| h.path != "clock.current"));

        for done in [CHUNK, 2 * CHUNK] {
            permits.send(()).unwrap();
            until_state(&engine, SearchState::Embedding { done, total: 600 });
            assert!(engine.search(&alice, query, 5, None).note.is_some());
        }
        permits.send(()).unwrap();
        assert_eq!(
            engine.wait_semantic_search(Duration::from_secs(10)),
            Ok(true)
        );
        assert_eq!(engine.search_state(), SearchState::Hybrid);
        let ready = engine.search(&alice, query, 5, None);
        assert_eq!(ready.note, None);
        assert_eq!(ready.hits[0].path, "clock.current", "{ready:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_stopped_half_way_keeps_what_it_embedded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tool-vectors.bin");
        let (model, permits) = gated();
        let (id, dim) = (model.model_id(), model.dim());
        // Stored after every chunk.
        let cache = SearchCache::with_embedder_saving(model, Some(file.clone()), Duration::ZERO);
        let engine = engine_with(many_tools(600), cache).await;
        engine.warm_search();
        permits.send(()).unwrap();
        until_state(
            &engine,
            SearchState::Embedding {
                done: CHUNK,
                total: 600,
            },
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while vectors::load(&file, &id, dim).len() < CHUNK {
            assert!(Instant::now() < deadline, "the first chunk was not stored");
            std::thread::sleep(Duration::from_millis(5));
        }

        // The model fails its next batch (the run ends): search stays lexical, quietly.
        drop(permits);
        assert!(engine
            .wait_semantic_search(Duration::from_secs(10))
            .is_err());
        assert_eq!(engine.search_state(), SearchState::Lexical);
        let alice = engine.caller("alice", Face::Cli);
        assert_eq!(engine.search(&alice, "hour", 5, None).note, None);

        // The next run embeds only what the first did not get to.
        let next = Arc::new(Concepts::default());
        let cache = SearchCache::with_embedder(next.clone(), Some(file.clone()));
        let engine = engine_with(many_tools(600), cache).await;
        assert_eq!(
            engine.wait_semantic_search(Duration::from_secs(10)),
            Ok(true)
        );
        assert_eq!(
            next.embedded.load(std::sync::atomic::Ordering::SeqCst),
            600 - CHUNK
        );
        assert_eq!(vectors::load(&file, &id, dim).len(), 600);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_snapshot_replaced_while_it_embeds_stops_and_leaves_its_vectors_to_the_newer() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tool-vectors.bin");
        let (model, permits) = gated();
        let (id, dim) = (model.model_id(), model.dim());
        // Never stored on the clock: only when a run ends.
        let hour = Duration::from_secs(3600);
        let cache = SearchCache::with_embedder_saving(model.clone(), Some(file.clone()), hour);
        let engine = engine_with(many_tools(600), cache).await;
        assert_eq!(engine.try_search_state(), None, "nothing built yet");
        engine.warm_search();
        assert_eq!(engine.try_search_state(), Some(engine.search_state()));
        permits.send(()).unwrap();
        until_state(
            &engine,
            SearchState::Embedding {
                done: CHUNK,
                total: 600,
            },
        );
        // A tool is added while the second chunk waits: the newer snapshot lacks the rest.
        engine.inner.catalog.store(many_tools(601));
        engine.warm_search();
        let rest = 601 - CHUNK;
        assert_eq!(
            engine.search_state(),
            SearchState::Embedding {
                done: 0,
                total: rest
            }
        );
        // The older snapshot finishes the chunk it is in, then stops (a third permit would let
        // it go on) and stores what it did; the newer one goes on with what no chunk held.
        permits.send(()).unwrap();
        until_state(
            &engine,
            SearchState::Embedding {
                done: 0,
                total: 601 - 2 * CHUNK,
            },
        );
        assert_eq!(vectors::load(&file, &id, dim).len(), 2 * CHUNK);
        permits.send(()).unwrap();
        assert_eq!(
            engine.wait_semantic_search(Duration::from_secs(10)),
            Ok(true)
        );
        assert_eq!(engine.search_state(), SearchState::Hybrid);
        // Each text embedded once.
        let embedded = model
            .model
            .embedded
            .load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(embedded, 601);
        assert_eq!(vectors::load(&file, &id, dim).len(), 601);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_embedding_thread_that_panics_leaves_search_lexical_and_wakes_the_waiters() {
        let cache = SearchCache::with_embedder(Arc::new(Faulty(Concepts::default(), true)), None);
        let engine = engine_with(many_tools(3), cache).await;
        let waited = engine.wait_semantic_search(Duration::from_secs(10));
        assert!(waited.is_err_and(|e| e.contains("stopped unexpectedly")));
        assert_eq!(engine.search_state(), SearchState::Lexical);
        let alice = engine.caller("alice", Face::Cli);
        let answer = engine.search(&alice, "current hour", 5, None);
        assert_eq!(answer.note, None);
        assert_eq!(answer.hits[0].path, "clock.current");
    }

    #[tokio::test]
    async fn a_caller_with_an_older_snapshot_does_not_take_the_cache_back() {
        let model = Arc::new(Concepts::default());
        let cache = SearchCache::with_embedder(model.clone(), None);
        let engine = engine_with(catalog(false), cache).await;
        let older = engine.inner.catalog.load();
        engine.inner.catalog.store(catalog(true));
        assert_eq!(
            engine.wait_semantic_search(Duration::from_secs(10)),
            Ok(true)
        );
        let embedded = model.embedded.load(std::sync::atomic::Ordering::SeqCst);
        // A search that loaded the catalog before the newer one was stored.
        let ranker = engine.inner.search.get(&older);
        assert!(ranker.hybrid.is_none());
        assert_eq!(ranker.lexical.len(), 3);
        assert_eq!(engine.search_state(), SearchState::Hybrid);
        let alice = engine.caller("alice", Face::Cli);
        let r = engine.search(&alice, "storm alerts", 1, None);
        assert_eq!(r.hits[0].path, "sky.alerts", "{r:?}");
        assert_eq!(
            model.embedded.load(std::sync::atomic::Ordering::SeqCst),
            embedded + 1,
            "only the query was embedded"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stored_catalog_is_indexed_and_embedded_before_any_search() {
        let model = Arc::new(Concepts::default());
        let cache = SearchCache::with_embedder(model.clone(), None);
        let engine = engine_with(catalog(false), cache).await;
        let _warm = engine.spawn_search_warmer();
        engine.inner.catalog.store(catalog(true));
        // Nobody searches: the warmer builds the new snapshot's indexes, and its tools embed.
        let deadline = Instant::now() + Duration::from_secs(10);
        while engine.try_search_state() != Some(SearchState::Hybrid) {
            assert!(Instant::now() < deadline, "{:?}", engine.try_search_state());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(model.embedded.load(std::sync::atomic::Ordering::SeqCst), 4);
    }
}
