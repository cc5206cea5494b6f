//! Hybrid ranking: BM25F fused with sentence-embedding similarity.
//!
//! A [`HybridIndex`] holds a lexical [`SearchIndex`], a [`TextEmbedder`] and one unit vector per
//! tool, computed once when the index is built from [`doc_text`] (name, description and path words;
//! the path without its namespace where that holds most of the catalog, see
//! [`crowded_namespaces`]), plus a second one from [`lead_text`] for a tool whose description goes
//! on past its first sentence ([`EmbedTexts`]): where the lead sentence is nearer a request, it
//! lifts the tool's cosine half-way ([`lead_similarity`]), so a long description's details do not
//! hide what its first sentence says the tool does. The embedder is a trait so that the fusion is
//! always built and tested; the real sentence-transformers model (`semantic::Embedder`)
//! comes with the `semantic` feature. A search embeds the query, takes the lexical top
//! `lexical_depth` and the semantic (cosine) top `semantic_depth` among the documents the query may
//! see, and fuses the two rankings over their union (see [`Fusion`]). Lexical evidence keeps exact
//! identifiers and rare words strong; the embedding finds tools that the query describes in other
//! words. A request of several clauses ([`crate::clauses`]) is compared clause by clause as well
//! ([`QueryVectors`]): a tool's cosine is its best against the request or any of its clauses.
//!
//! The lexical path is untouched: [`SearchIndex::search`] ranks exactly as without the feature.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::boilerplate;
use crate::index::{split_namespace, top_k, Hit, Query, SearchDoc, SearchIndex, SearchResult};
use crate::scan::{self, Codes};
use crate::tokenize::split_words;

/// Why a text could not be embedded (the model's own error, as text).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("embedding failed: {0}")]
pub struct EmbedError(pub String);

/// A search's hold on a model's threads ([`TextEmbedder::hold_for_search`]); it ends when this
/// drops, on the thread that took it.
pub struct SearchHold<'a> {
    _held: Box<dyn HeldForSearch + 'a>,
}

impl<'a> SearchHold<'a> {
    /// A hold that ends when `held` drops.
    pub fn new(held: impl HeldForSearch + 'a) -> Self {
        Self {
            _held: Box::new(held),
        }
    }
}

/// A value whose drop ends a search's hold on a model's threads ([`SearchHold`]).
pub trait HeldForSearch {}

/// Turns texts into unit-length vectors of one fixed dimension.
pub trait TextEmbedder: Send + Sync + std::fmt::Debug {
    /// Length of every vector.
    fn dim(&self) -> usize;

    /// The unit vectors of `texts`, concatenated: text `i` is `out[i * dim .. (i + 1) * dim]`.
    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError>;

    /// Names the model and its weights, so that stored vectors are reused only for the same
    /// model (see [`crate::vectors`]); empty when the vectors should not be stored.
    fn model_id(&self) -> String {
        String::new()
    }

    /// The unit vector of one text.
    fn embed_text(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.embed_texts(&[text])
    }

    /// The unit vector a search compares the tools' vectors with. A model may read less of a
    /// long query than of a tool, to bound a search's latency; by default the text's vector.
    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.embed_text(text)
    }

    /// A key that stands for everything in `text` that decides its query vectors
    /// ([`TextEmbedder::embed_query_clauses`]): two texts with the same key get the same vectors.
    /// By default the text itself; a model that leaves part of a query unread (see
    /// [`crate::tokenize::naming_words`]) keys it by what it reads, so a cache of query vectors
    /// ([`crate::CachedEmbedder`]) serves "book 2 rooms" for "book 3 rooms".
    fn query_key<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Cow::Borrowed(text)
    }

    /// Holds the model's threads for one search until the value returned drops: work the model
    /// does meanwhile on other threads (a catalog embedded in the background) waits for it. By
    /// default nothing is held.
    fn hold_for_search(&self) -> Option<SearchHold<'_>> {
        None
    }

    /// The vectors a search compares the tools' vectors with: by default the query's
    /// ([`TextEmbedder::embed_query`]) and no clauses. A model may also give one vector per
    /// clause of a request that asks for several things (see [`crate::clauses`]).
    fn embed_query_clauses(&self, text: &str) -> Result<QueryVectors, EmbedError> {
        Ok(QueryVectors {
            whole: self.embed_query(text)?,
            clauses: Vec::new(),
        })
    }
}

/// A search's query vectors: the request's, and one per clause when it has several. A tool's
/// similarity to the query is its best similarity to any of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryVectors {
    pub whole: Vec<f32>,
    pub clauses: Vec<Vec<f32>>,
}

impl QueryVectors {
    /// The whole and then each clause.
    pub fn all(&self) -> impl Iterator<Item = &[f32]> {
        std::iter::once(self.whole.as_slice()).chain(self.clauses.iter().map(Vec::as_slice))
    }
}

/// Dot product; equal to the cosine for unit vectors.
///
/// A search of a catalog under 20,000 tools takes it for every tool's vectors and each query
/// vector (the request's and its clauses'): millions of products per query. Where the CPU has
/// AVX2 and FMA it runs four independent 8-wide fused multiply-add chains; elsewhere it sums
/// in eight lanes the compiler can vectorise.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::avx2_fma() {
        // SAFETY: AVX2 and FMA were detected; both slices hold n values.
        return unsafe { dot_avx2(a, b) };
    }
    dot_lanes(a, b)
}

/// [`dot`] in eight lanes of portable code.
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// [`dot`] with AVX2 and FMA: 32 products per step in four chains, then 8 at a time, then the
/// rest one by one.
///
/// # Safety
/// The CPU must have AVX2 and FMA; `a` and `b` must have the same length.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    debug_assert_eq!(a.len(), b.len());
    let n = a.len();
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: every load reads 8 values at an offset i with i + 8 ≤ n.
    unsafe {
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (j, s) in acc.iter_mut().enumerate() {
                let at = i + 8 * j;
                *s = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(at)), _mm256_loadu_ps(pb.add(at)), *s);
            }
            i += 32;
        }
        while i + 8 <= n {
            acc[0] = _mm256_fmadd_ps(
                _mm256_loadu_ps(pa.add(i)),
                _mm256_loadu_ps(pb.add(i)),
                acc[0],
            );
            i += 8;
        }
        let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
        let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        let q = _mm_add_ss(q, _mm_shuffle_ps::<1>(q, q));
        let mut total = _mm_cvtss_f32(q);
        for k in i..n {
            total += a[k] * b[k];
        }
        total
    }
}

/// How the lexical and semantic rankings are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion: `(1 − w) / (k + lexical rank) + w / (k + semantic rank)`, ranks
    /// from 1, a ranking that does not hold the document adding nothing. Needs no score scale.
    Rrf { k: f32 },
    /// Convex combination of normalised scores: `(1 − w) × bm25 / best bm25 + w × cosine
    /// rescaled so the union's lowest is 0 and its best is 1`; a document outside the lexical
    /// top gets 0 from it. The BM25F scores carry their namespaces' evidence relative to the
    /// best namespace's ([`SearchIndex::namespace_relative`]).
    Convex,
}

/// Parameters of the fusion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridConfig {
    /// Lexical hits taken into the fusion (at least the query's limit).
    pub lexical_depth: usize,
    /// Nearest documents by cosine taken into the fusion (at least the query's limit).
    pub semantic_depth: usize,
    /// Share `w` of the semantic side, 0 (lexical only) to 1 (semantic only).
    pub semantic_weight: f32,
    /// For a request of several clauses, the share of each clause's own lexical evidence
    /// (`HybridIndex::clause_evidence`); 0 judges the candidates by the request's words as a
    /// whole only.
    pub clause_share: f32,
    pub fusion: Fusion,
    /// Rows (tool vectors and lead vectors) from which a scan ranks one-bit sketches first
    /// ([`crate::sketch`]); `usize::MAX` never does. By default [`scan::SKETCH_FROM`] where the
    /// CPU scans sketches eight at a time, else never ([`crate::sketch::default_from`]).
    pub sketch_from: usize,
}

impl Default for HybridConfig {
    /// The convex combination of normalised scores, 50 from each side, and a 0.6 share for the
    /// semantic side: agents' task sentences rarely name the tool, so meaning deserves a little
    /// more say than words. Scores keep what ranks lose (how far ahead the best match is), and
    /// this fusion ranks better than reciprocal rank fusion on all five public sets (chosen
    /// once over them together, see docs/benchmarks.md; never per query).
    fn default() -> Self {
        Self {
            lexical_depth: 50,
            semantic_depth: 50,
            semantic_weight: 0.6,
            clause_share: 0.5,
            fusion: Fusion::Convex,
            sketch_from: crate::sketch::default_from(),
        }
    }
}

/// The text a tool is embedded from: its name and path as words, then its description. In a
/// catalog the path may go without its namespace ([`EmbedTexts::of`]).
pub fn doc_text(doc: &SearchDoc) -> String {
    embed_text(&doc.name, &doc.path, &doc.description)
}

/// [`doc_text`] from parts: `path` is the path as it is to be spelled out (perhaps without its
/// namespace, see [`crowded_namespaces`]).
fn embed_text(name: &str, path: &str, description: &str) -> String {
    let name = split_words(name).join(" ");
    let path = split_words(path).join(" ");
    let mut text = String::with_capacity(name.len() + path.len() + description.len() + 8);
    text.push_str(&name);
    if !path.is_empty() && path != name {
        text.push_str(" (");
        text.push_str(&path);
        text.push(')');
    }
    if !description.trim().is_empty() {
        text.push_str(": ");
        text.push_str(description.trim());
    }
    text
}

/// The namespaces that hold more than half of a catalog's tools, such as the one upstream a
/// whole catalog comes from. A word shared by most tools cannot tell them apart (classic BM25
/// gives a word in more than half the documents a negative weight), yet in the text of a short
/// tool it pulls the tool's vector towards the word: a catalog served under one arbitrary
/// namespace ranked 2 points lower at R@5 than the same tools without it (docs/benchmarks.md).
/// So the text a tool is embedded from leaves out such a namespace ([`EmbedTexts::of`]); the
/// lexical index keeps it, so a request that names it still finds its tools.
pub fn crowded_namespaces(docs: &[SearchDoc]) -> std::collections::HashSet<&str> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for doc in docs {
        if let Some((ns, _)) = split_namespace(&doc.path) {
            *count.entry(ns).or_default() += 1;
        }
    }
    count
        .into_iter()
        .filter(|&(_, n)| 2 * n > docs.len())
        .map(|(ns, _)| ns)
        .collect()
}

/// The path of `doc` as its embedded text spells it: without its namespace when that is one of
/// `crowded`.
fn embedded_path<'a>(doc: &'a SearchDoc, crowded: &std::collections::HashSet<&str>) -> &'a str {
    match split_namespace(&doc.path) {
        Some((ns, rest)) if crowded.contains(ns) => rest,
        _ => &doc.path,
    }
}

/// The first of a description's sentences ([`boilerplate::sentences`]) when it has more than
/// one.
fn first_sentence<'a>(sentences: &[&'a str]) -> Option<&'a str> {
    (sentences.len() > 1).then(|| sentences[0])
}

/// The text of a tool's second vector: [`doc_text`] with only the first sentence of the
/// description; `None` when the description is one sentence (the tool has one vector).
pub fn lead_text(doc: &SearchDoc) -> Option<String> {
    let lead = first_sentence(&boilerplate::sentences(&doc.description))?;
    Some(embed_text(&doc.name, &doc.path, lead))
}

/// The cosine of a tool that has a lead vector, from its whole text's (`own`) and its lead's:
/// half of each of `own` and the better of the two. A lead sentence that matches a request
/// better than the whole text lifts the tool, but only half-way: a short text is more often
/// near a request by chance than a long one, and taking the better of the two outright lost
/// points on a set of long requests (docs/benchmarks.md).
pub fn lead_similarity(own: f32, lead: f32) -> f32 {
    0.5 * own + 0.5 * own.max(lead)
}

/// No lead row (see [`HybridIndex`]).
const NO_ROW: u32 = u32::MAX;

/// The texts a catalog's tools are embedded from, in the order of the rows that
/// [`HybridIndex::from_rows`] takes: [`doc_text`] of every tool in tool order, then
/// [`lead_text`] of every tool that has one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmbedTexts {
    pub texts: Vec<String>,
    /// The tool (document index) of each text after the first one per tool.
    pub extra_of: Vec<u32>,
}

impl EmbedTexts {
    /// The texts of a catalog's tools: [`doc_text`] and [`lead_text`], each without its
    /// namespace when that is one of the catalog's [`crowded_namespaces`], and without the
    /// sentences most of its descriptions repeat ([`boilerplate`]).
    pub fn of(docs: &[SearchDoc]) -> Self {
        let crowded = crowded_namespaces(docs);
        let paths: Vec<&str> = docs.iter().map(|d| embedded_path(d, &crowded)).collect();
        let mut split: Vec<Vec<&str>> = docs
            .iter()
            .map(|d| boilerplate::sentences(&d.description))
            .collect();
        let shared = boilerplate::Shared::of(&split);
        // A description that loses a note is its other sentences joined; any other stays as
        // written, cut once.
        let descriptions: Vec<Cow<'_, str>> = docs
            .iter()
            .zip(&split)
            .map(|(doc, sentences)| match shared.strip(sentences) {
                Some(kept) => Cow::Owned(kept.join(" ")),
                None => Cow::Borrowed(doc.description.as_str()),
            })
            .collect();
        // The joined ones are cut again for their lead (a few tools: only those with a note).
        for (sentences, description) in split.iter_mut().zip(&descriptions) {
            if let Cow::Owned(joined) = description {
                *sentences = boilerplate::sentences(joined);
            }
        }
        let mut texts: Vec<String> = docs
            .iter()
            .zip(paths.iter().zip(&descriptions))
            .map(|(d, (path, description))| embed_text(&d.name, path, description))
            .collect();
        let mut extra_of = Vec::new();
        for (d, (doc, (path, sentences))) in docs.iter().zip(paths.iter().zip(&split)).enumerate() {
            if let Some(lead) = first_sentence(sentences) {
                texts.push(embed_text(&doc.name, path, lead));
                extra_of.push(d as u32);
            }
        }
        Self { texts, extra_of }
    }
}

/// A lexical index plus tool embeddings; searches fuse both rankings.
#[derive(Debug, Clone)]
pub struct HybridIndex {
    lexical: Arc<SearchIndex>,
    embedder: Arc<dyn TextEmbedder>,
    /// Unit vectors, `dim` each, in the order of [`EmbedTexts`]: one per document in document
    /// order, then the extra rows.
    vectors: Vec<f32>,
    /// Per document, the row of its lead vector ([`lead_text`]) or [`NO_ROW`]; empty when
    /// there are no extra rows.
    lead: Vec<u32>,
    /// The document of each row after the first one per document.
    extra_of: Vec<u32>,
    /// Their 8-bit copies, scanned first in catalogs over [`scan::EXACT_UP_TO`] tools.
    codes: Arc<Codes>,
    config: HybridConfig,
}

impl HybridIndex {
    /// Embeds every doc (in batches) and pairs the vectors with `lexical`, which must have
    /// been built from the same `docs`. Default fusion parameters.
    pub fn build(
        docs: &[SearchDoc],
        lexical: Arc<SearchIndex>,
        embedder: Arc<dyn TextEmbedder>,
    ) -> Result<Self, EmbedError> {
        Self::build_with(docs, lexical, embedder, HybridConfig::default())
    }

    /// [`HybridIndex::build`] with explicit fusion parameters.
    pub fn build_with(
        docs: &[SearchDoc],
        lexical: Arc<SearchIndex>,
        embedder: Arc<dyn TextEmbedder>,
        config: HybridConfig,
    ) -> Result<Self, EmbedError> {
        assert_eq!(
            docs.len(),
            lexical.len(),
            "lexical index built from other docs"
        );
        let texts = EmbedTexts::of(docs);
        let refs: Vec<&str> = texts.texts.iter().map(String::as_str).collect();
        let vectors = embedder.embed_texts(&refs)?;
        Ok(Self::from_rows(
            lexical,
            embedder,
            vectors,
            texts.extra_of,
            config,
        ))
    }

    /// Reuses embeddings computed before: `vectors` holds one vector (`embedder.dim()`
    /// values) per document of `lexical`, and no lead vectors.
    ///
    /// # Panics
    /// When `vectors` does not hold one vector per document.
    pub fn from_vectors(
        lexical: Arc<SearchIndex>,
        embedder: Arc<dyn TextEmbedder>,
        vectors: Vec<f32>,
        config: HybridConfig,
    ) -> Self {
        Self::from_rows(lexical, embedder, vectors, Vec::new(), config)
    }

    /// Reuses embeddings computed before (e.g. [`HybridIndex::vectors`] of an earlier index
    /// over the same docs): `vectors` holds the rows of [`EmbedTexts`], one vector per
    /// document then one per entry of `extra_of` (the document whose lead it is).
    ///
    /// # Panics
    /// When `vectors` does not hold those rows, or `extra_of` names a document that does not
    /// exist or one twice.
    pub fn from_rows(
        lexical: Arc<SearchIndex>,
        embedder: Arc<dyn TextEmbedder>,
        vectors: Vec<f32>,
        extra_of: Vec<u32>,
        config: HybridConfig,
    ) -> Self {
        let (docs, dim) = (lexical.len(), embedder.dim());
        assert_eq!(
            vectors.len(),
            (docs + extra_of.len()) * dim,
            "one {dim}-value vector per document and per extra row",
        );
        let mut lead = Vec::new();
        if !extra_of.is_empty() {
            lead = vec![NO_ROW; docs];
            for (i, &d) in extra_of.iter().enumerate() {
                let slot = &mut lead[d as usize];
                assert_eq!(*slot, NO_ROW, "document {d} has two lead rows");
                *slot = (docs + i) as u32;
            }
        }
        let codes = if docs > scan::EXACT_UP_TO {
            let rows = docs + extra_of.len();
            Codes::with_sketches(&vectors, dim, rows >= config.sketch_from)
        } else {
            Codes::default()
        };
        Self {
            lexical,
            embedder,
            vectors,
            lead,
            extra_of,
            codes: Arc::new(codes),
            config,
        }
    }

    /// Bytes the vectors take in memory (f32, plus the 8-bit copies of a large catalog).
    pub fn vector_bytes(&self) -> usize {
        self.vectors.len() * 4 + self.codes.bytes()
    }

    /// The lexical index; searching it directly ranks by BM25F alone.
    pub fn lexical(&self) -> &SearchIndex {
        &self.lexical
    }

    pub fn embedder(&self) -> &Arc<dyn TextEmbedder> {
        &self.embedder
    }

    /// The vectors, [`TextEmbedder::dim`] values each: one per document in document order,
    /// then the lead vectors (the rows of [`EmbedTexts`]).
    pub fn vectors(&self) -> &[f32] {
        &self.vectors
    }

    pub fn config(&self) -> &HybridConfig {
        &self.config
    }

    /// Embeds the query text (and its clauses, [`TextEmbedder::embed_query_clauses`]) and
    /// runs [`HybridIndex::search_clauses`].
    ///
    /// A query without text (only a namespace) is answered by the lexical index alone.
    pub fn search(&self, q: &Query<'_>) -> Result<SearchResult, EmbedError> {
        if q.text.trim().is_empty() {
            return Ok(self.lexical.search(q));
        }
        // The scan after the query's embedding is split among the cores on a large catalog, so
        // the hold covers the whole search.
        let _hold = self.embedder.hold_for_search();
        let v = self.embedder.embed_query_clauses(q.text)?;
        Ok(self.search_clauses(q, &v))
    }

    /// Fuses the lexical ranking of `q` with the cosine ranking of `query_vector` (the
    /// query's embedding). `total` counts the fused candidates (the union of both tops).
    pub fn search_embedded(&self, q: &Query<'_>, query_vector: &[f32]) -> SearchResult {
        self.search_clauses(
            q,
            &QueryVectors {
                whole: query_vector.to_vec(),
                clauses: Vec::new(),
            },
        )
    }

    /// [`HybridIndex::search_embedded`] with several query vectors: a tool's cosine is its best
    /// one, and the semantic candidates are the nearest tools by that cosine.
    pub fn search_clauses(&self, q: &Query<'_>, vectors: &QueryVectors) -> SearchResult {
        if q.text.trim().is_empty() {
            return self.lexical.search(q);
        }
        let lexical = self.lexical.rank(&Query {
            limit: self.config.lexical_depth.max(q.limit),
            ..*q
        });
        let depth = self.config.semantic_depth.max(q.limit);
        let cosine = |d: usize| {
            vectors
                .all()
                .map(|v| self.similarity(d, v))
                .fold(f32::NEG_INFINITY, f32::max)
        };
        let all: Vec<&[f32]> = vectors.all().collect();
        // The nearest `depth` by a tool's best cosine, however many vectors: past the query's
        // `limit` of them, a tool outside the lexical top cannot be among the `limit` best
        // fused (each of those nearer tools scores more), so more candidates change an answer
        // only through the cosine's rescaling (`fuse`), and they cost a large catalog's scan
        // (`nearest`'s candidates and exact products) in proportion.
        let semantic = self.nearest(q, &all, depth);
        // The words' scores with each namespace's evidence relative to the best namespace's:
        // evidence that every candidate shares must not flatten the words' own.
        let lexical = self.lexical.namespace_relative(q.text, &lexical.hits);
        let lexical = if vectors.clauses.is_empty() || self.config.clause_share <= 0.0 {
            lexical
        } else {
            self.clause_evidence(q.text, lexical, &semantic)
        };
        let candidates = fuse(&lexical, &semantic, cosine, &self.config);
        let total = candidates.len();
        let fused = SearchResult {
            hits: top_k(candidates, q.limit),
            total,
        };
        // Each ranked tool is followed by the tools its parameters take their values from.
        self.lexical.with_prerequisites(q, fused)
    }

    /// The lexical evidence for a request of several clauses (`text`): the candidates (the
    /// `lexical` and `semantic` tops) are also scored against each clause's words, so a tool
    /// that does one of the things the request asks for is not judged only by the request's
    /// words as a whole, most of which are about the other things. A candidate's evidence is
    /// the best of its score for the request relative to the best candidate's, and
    /// [`HybridConfig::clause_share`] of its score for each clause relative to that clause's
    /// best candidate. The clause scores come from the lexical index's forward lists
    /// ([`SearchIndex::score_docs`]): a hundred candidates' terms, not a clause's postings.
    /// Candidates without any evidence are left out; best first.
    fn clause_evidence(&self, text: &str, lexical: Vec<Hit>, semantic: &[Hit]) -> Vec<Hit> {
        let best = lexical.first().map_or(0.0, |h| h.score);
        let mut evidence: Vec<Hit> = lexical
            .into_iter()
            .map(|h| Hit {
                doc: h.doc,
                score: if best > 0.0 { h.score / best } else { 0.0 },
            })
            .collect();
        let held: std::collections::HashSet<usize> = evidence.iter().map(|h| h.doc).collect();
        let others = semantic.iter().filter(|h| !held.contains(&h.doc));
        evidence.extend(others.map(|h| Hit {
            doc: h.doc,
            score: 0.0,
        }));
        let docs: Vec<usize> = evidence.iter().map(|h| h.doc).collect();
        for clause in crate::clauses::clauses(text) {
            let scores = self.lexical.score_docs(&text[clause], &docs);
            let top = scores.iter().copied().fold(0.0f32, f32::max);
            if top <= 0.0 {
                continue;
            }
            for (hit, score) in evidence.iter_mut().zip(scores) {
                hit.score = hit.score.max(self.config.clause_share * score / top);
            }
        }
        evidence.retain(|h| h.score > 0.0);
        top_k(evidence, usize::MAX)
    }

    /// Ranks by cosine alone (no lexical evidence), honouring the query's namespace and
    /// filter; for comparison and diagnostics. The top `q.limit` are found as a hybrid search
    /// finds its semantic candidates (a large catalog's approximate scan, then the exact
    /// re-scoring), so a comparison of two scans sees what the scans found. `total` counts the
    /// visible documents.
    pub fn search_semantic(&self, q: &Query<'_>, query_vector: &[f32]) -> SearchResult {
        let total = match self.lexical.visibility(q) {
            Some(visible) => (0..self.lexical.len()).filter(|&d| visible(d)).count(),
            None => 0,
        };
        SearchResult {
            hits: self.nearest(q, &[query_vector], q.limit),
            total,
        }
    }

    fn row(&self, row: usize) -> &[f32] {
        let dim = self.embedder.dim();
        &self.vectors[row * dim..(row + 1) * dim]
    }

    /// A document's cosine with `v`, its lead vector's counted as [`lead_similarity`] says.
    fn similarity(&self, doc: usize, v: &[f32]) -> f32 {
        let own = dot(self.row(doc), v);
        match self.lead.get(doc) {
            Some(&row) if row != NO_ROW => lead_similarity(own, dot(self.row(row as usize), v)),
            _ => own,
        }
    }

    /// Asks the memory system for a document's vector and its lead's
    /// ([`crate::cpu::prefetch`]).
    fn prefetch_rows(&self, doc: usize) {
        crate::cpu::prefetch(self.row(doc));
        if let Some(&row) = self.lead.get(doc).filter(|&&row| row != NO_ROW) {
            crate::cpu::prefetch(self.row(row as usize));
        }
    }

    /// The document a row of [`HybridIndex::vectors`] belongs to.
    fn owner(&self, row: usize) -> usize {
        let docs = self.lexical.len();
        if row < docs {
            row
        } else {
            self.extra_of[row - docs] as usize
        }
    }

    /// The `k` visible documents nearest to any of `vs` by cosine (a document's score is its
    /// best), best first. A large catalog is scanned on its 8-bit copies first (all of `vs` in
    /// one pass, split among the cores from [`scan::SPLIT_FROM`] vectors on; from
    /// [`scan::SKETCH_FROM`] on, only the vectors its one-bit sketches rank best) and the best
    /// candidates re-scored exactly.
    fn nearest(&self, q: &Query<'_>, vs: &[&[f32]], k: usize) -> Vec<Hit> {
        let Some(visible) = self.lexical.visibility(q) else {
            return Vec::new();
        };
        let docs = self.lexical.len();
        let exact = |doc: usize| Hit {
            doc,
            score: vs
                .iter()
                .map(|v| self.similarity(doc, v))
                .fold(f32::NEG_INFINITY, f32::max),
        };
        if self.codes.is_empty() || scan::candidates(k) >= docs {
            let hits: Vec<Hit> = (0..docs).filter(|&d| visible(d)).map(exact).collect();
            return top_k(hits, k);
        }
        let scores =
            self.codes
                .candidate_scores(vs, |row| visible(self.owner(row)), scan::candidates(k));
        let rough: Vec<Hit> = if self.extra_of.is_empty() {
            let hit = |(doc, score)| Hit { doc, score };
            scores.into_iter().map(hit).collect()
        } else {
            // A document's rough score is its best row's: never below its exact similarity
            // (lead_similarity), so a tool lifted by its lead stays a candidate.
            let mut best = vec![f32::NEG_INFINITY; docs];
            for (row, score) in scores {
                let b = &mut best[self.owner(row)];
                *b = b.max(score);
            }
            let seen = best.into_iter().enumerate().filter(|(_, s)| s.is_finite());
            seen.map(|(doc, score)| Hit { doc, score }).collect()
        };
        let rough = top_k(rough, scan::candidates(k));
        let hits = rough.iter().enumerate().map(|(i, h)| {
            // The candidates lie scattered over the catalog: their rows are asked for ahead.
            if let Some(ahead) = rough.get(i + scan::AHEAD) {
                self.prefetch_rows(ahead.doc);
            }
            exact(h.doc)
        });
        top_k(hits.collect(), k)
    }
}

/// Fuses a lexical and a semantic ranking (each best first) over their union; `cosine` gives
/// any document's similarity to the query (for [`Fusion::Convex`]). Unordered.
fn fuse(
    lexical: &[Hit],
    semantic: &[Hit],
    cosine: impl Fn(usize) -> f32,
    config: &HybridConfig,
) -> Vec<Hit> {
    let w = config.semantic_weight;
    let mut fused: HashMap<usize, f32> = HashMap::new();
    match config.fusion {
        Fusion::Rrf { k } => {
            for (rank, hit) in lexical.iter().enumerate() {
                *fused.entry(hit.doc).or_default() += (1.0 - w) / (k + rank as f32 + 1.0);
            }
            for (rank, hit) in semantic.iter().enumerate() {
                *fused.entry(hit.doc).or_default() += w / (k + rank as f32 + 1.0);
            }
        }
        Fusion::Convex => {
            let best = lexical.first().map_or(0.0, |h| h.score);
            for hit in lexical {
                let s = if best > 0.0 { hit.score / best } else { 0.0 };
                fused.insert(hit.doc, (1.0 - w) * s);
            }
            for hit in semantic {
                fused.entry(hit.doc).or_default();
            }
            // A similarity that is not a number (a damaged vector) counts as the lowest.
            let cos: Vec<(usize, f32)> = fused
                .keys()
                .map(|&d| (d, cosine(d)))
                .filter(|c| c.1.is_finite())
                .collect();
            let lo = cos.iter().map(|c| c.1).fold(f32::INFINITY, f32::min);
            let hi = cos.iter().map(|c| c.1).fold(f32::NEG_INFINITY, f32::max);
            let span = (hi - lo).max(1e-6);
            for (d, c) in cos {
                *fused.entry(d).or_default() += w * (c - lo) / span;
            }
        }
    }
    fused
        .into_iter()
        .map(|(doc, score)| Hit { doc, score })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// A model that is never asked to embed: the tests give it vectors of 48 values, or of
    /// `Unused(dim)` values.
    #[derive(Debug, Default)]
    struct Unused(usize);
    impl TextEmbedder for Unused {
        fn dim(&self) -> usize {
            if self.0 == 0 {
                48
            } else {
                self.0
            }
        }
        fn embed_texts(&self, _: &[&str]) -> Result<Vec<f32>, EmbedError> {
            Err(EmbedError("not used".into()))
        }
    }

    /// `n` pseudo-random unit vectors of `dim` values.
    fn random_unit_vectors(n: usize, dim: usize, mut seed: u64) -> Vec<f32> {
        let mut vectors = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let v: Vec<f32> = (0..dim)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed % 2001) as f32 / 1000.0 - 1.0
                })
                .collect();
            let norm = dot(&v, &v).sqrt();
            vectors.extend(v.iter().map(|x| x / norm));
        }
        vectors
    }

    fn nameless_docs(n: usize) -> Vec<SearchDoc> {
        (0..n)
            .map(|i| SearchDoc {
                path: format!("s.t{i}"),
                name: format!("t{i}"),
                description: String::new(),
                params: Vec::new(),
            })
            .collect()
    }

    /// The default configuration, and one whose scans rank one-bit sketches first.
    fn with_and_without_sketches() -> [HybridConfig; 2] {
        [
            HybridConfig::default(),
            HybridConfig {
                sketch_from: 0,
                ..HybridConfig::default()
            },
        ]
    }

    #[test]
    fn a_large_catalog_scanned_on_8_bit_copies_finds_the_exact_nearest() {
        let n = scan::EXACT_UP_TO + 500;
        let docs = nameless_docs(n);
        let vectors = random_unit_vectors(n, 48, 0x2545_F491_4F6C_DD1D);
        let lexical = Arc::new(SearchIndex::build(&docs));
        for config in with_and_without_sketches() {
            let sketched = config.sketch_from == 0;
            let index = HybridIndex::from_vectors(
                lexical.clone(),
                Arc::new(Unused::default()),
                vectors.clone(),
                config,
            );
            // One word, one scale and one count of set bits per vector, in blocks of eight;
            // the mean vector; for the AVX2 kernel the word again, in groups of 32.
            let blocks = n.div_ceil(8) * 8;
            let groups = if crate::sketch::half_bytes() {
                n.div_ceil(32) * 32 * 8
            } else {
                0
            };
            let sketch_bytes = if sketched {
                blocks * (8 + 4 + 4) + 48 * 4 + groups
            } else {
                0
            };
            assert_eq!(
                index.vector_bytes(),
                n * 48 * 4 + n * 48 + n * 8 + sketch_bytes
            );
            large_catalog_probes(&index, &vectors, n);
        }
    }

    /// The ten nearest of three tools' own vectors are the exact ten nearest.
    fn large_catalog_probes(index: &HybridIndex, vectors: &[f32], n: usize) {
        for probe in [3usize, 777, n - 1] {
            let v = &vectors[probe * 48..(probe + 1) * 48];
            let q = Query::new("anything", 10);
            let got: Vec<usize> = index.nearest(&q, &[v], 10).iter().map(|h| h.doc).collect();
            let mut exact: Vec<(usize, f32)> = (0..n)
                .map(|d| (d, dot(&vectors[d * 48..(d + 1) * 48], v)))
                .collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let want: Vec<usize> = exact.iter().take(10).map(|e| e.0).collect();
            assert_eq!(got, want, "probe {probe}");
            let semantic = index.search_semantic(&q, v);
            let docs: Vec<usize> = semantic.hits.iter().map(|h| h.doc).collect();
            assert_eq!((docs, semantic.total), (want, n), "probe {probe}");
        }
    }

    #[test]
    fn a_large_catalog_scan_keeps_a_tool_its_lead_vector_lifts() {
        const DIM: usize = 256;
        let n = scan::EXACT_UP_TO + 500;
        let docs = nameless_docs(n);
        // Every seventh tool has a lead vector.
        let extra_of: Vec<u32> = (0..n as u32).step_by(7).collect();
        let mut rows = random_unit_vectors(n + extra_of.len(), DIM, 0x9E37_79B9_7F4A_7C15);
        // Three tools whose own vector is far from their lead (cosine about 0.1): only the lead
        // can bring them up.
        let probes = [0usize, 700, 7 * (extra_of.len() - 1)];
        for &d in &probes {
            let lead = n + d / 7;
            let l: Vec<f32> = rows[lead * DIM..(lead + 1) * DIM].to_vec();
            let own = &mut rows[d * DIM..(d + 1) * DIM];
            for (o, l) in own.iter_mut().zip(&l) {
                *o = 0.995 * *o + 0.1 * l;
            }
            let norm = dot(own, own).sqrt();
            own.iter_mut().for_each(|x| *x /= norm);
        }
        let lexical = Arc::new(SearchIndex::build(&docs));
        for config in with_and_without_sketches() {
            let index = HybridIndex::from_rows(
                lexical.clone(),
                Arc::new(Unused(DIM)),
                rows.clone(),
                extra_of.clone(),
                config,
            );
            lead_probes(&index, &rows, &extra_of, &probes, n);
        }
    }

    /// Each probe tool comes first for its lead vector, and the ten nearest are the exact ones.
    fn lead_probes(
        index: &HybridIndex,
        rows: &[f32],
        extra_of: &[u32],
        probes: &[usize],
        n: usize,
    ) {
        const DIM: usize = 256;
        let row = |r: usize| &rows[r * DIM..(r + 1) * DIM];
        let exact = |d: usize, v: &[f32]| {
            let own = dot(row(d), v);
            match extra_of.iter().position(|&e| e as usize == d) {
                Some(i) => lead_similarity(own, dot(row(n + i), v)),
                None => own,
            }
        };
        for &d in probes {
            let v = row(n + d / 7);
            assert!(
                dot(row(d), v) < 0.3,
                "tool {d}'s own vector is far from its lead"
            );
            let q = Query::new("anything", 10);
            let got: Vec<usize> = index.nearest(&q, &[v], 10).iter().map(|h| h.doc).collect();
            let mut want: Vec<(usize, f32)> = (0..n).map(|t| (t, exact(t, v))).collect();
            want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let want: Vec<usize> = want.iter().take(10).map(|e| e.0).collect();
            assert_eq!(got, want, "probe {d}");
            assert_eq!(got[0], d, "the tool whose lead the probe is comes first");
        }
    }

    #[test]
    fn a_lead_sentence_lifts_a_tool_half_way() {
        assert_eq!(lead_similarity(0.4, 0.2), 0.4);
        assert_eq!(lead_similarity(0.2, 0.8), 0.5);
    }

    #[test]
    fn dot_sums_every_product_whatever_the_length() {
        // Lengths around the AVX2 path's steps of 32 and 8, in both paths.
        for n in [0usize, 1, 7, 8, 9, 17, 31, 32, 33, 40, 384, 389] {
            let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
            let b: Vec<f32> = (0..n).map(|i| 1.0 - i as f32 * 0.25).collect();
            let plain: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(x * y)).sum();
            for got in [dot(&a, &b), dot_lanes(&a, &b)] {
                assert!(
                    (f64::from(got) - plain).abs() <= 1e-5 * plain.abs().max(1.0),
                    "n={n}: {got} vs {plain}"
                );
            }
        }
        // Unequal lengths: the shorter decides.
        assert_eq!(dot(&[1.0, 2.0, 3.0], &[1.0, 1.0]), 3.0);
    }

    #[test]
    fn doc_text_spells_out_identifiers() {
        let doc = SearchDoc {
            path: "github.issues.createIssue".into(),
            name: "create_issue".into(),
            description: " Open a new issue. ".into(),
            params: Vec::new(),
        };
        assert_eq!(
            doc_text(&doc),
            "create issue (github issues create issue): Open a new issue."
        );
    }

    #[test]
    fn a_namespace_of_most_of_the_catalog_is_left_out_of_the_embedded_texts() {
        let tool = |path: &str, description: &str| SearchDoc {
            path: path.into(),
            name: path.rsplit('.').next().unwrap().into(),
            description: description.into(),
            params: Vec::new(),
        };
        // Three of four tools come from `bench`: its name says nothing about any of them.
        let docs = [
            tool("bench.send_mail", "Send an email message. Retries twice."),
            tool("bench.read_mail", "Read a box."),
            tool("bench.github.create_issue", "Open an issue."),
            tool("tables.query", "Query a table."),
        ];
        assert_eq!(
            crowded_namespaces(&docs),
            std::collections::HashSet::from(["bench"])
        );
        let texts = EmbedTexts::of(&docs).texts;
        assert_eq!(
            texts,
            [
                "send mail: Send an email message. Retries twice.",
                "read mail: Read a box.",
                "create issue (github create issue): Open an issue.",
                "query (tables query): Query a table.",
                "send mail: Send an email message.",
            ]
        );
        // Half is not most: two namespaces of two tools each keep their names.
        let even = [
            tool("mail.send", "Send."),
            tool("mail.read", "Read."),
            tool("chat.post", "Post."),
            tool("chat.read", "Read."),
        ];
        assert!(crowded_namespaces(&even).is_empty());
        assert_eq!(EmbedTexts::of(&even).texts[0], "send (mail send): Send.");
        // A path of one segment has no namespace, however many tools share it.
        let flat = [tool("send", "Send."), tool("send", "Send again.")];
        assert!(crowded_namespaces(&flat).is_empty());
    }

    #[test]
    fn a_note_most_tools_repeat_is_left_out_of_their_texts_and_leads() {
        let note = "Only works within allowed directories.";
        let tool = |name: &str, description: String| SearchDoc {
            path: name.into(),
            name: name.into(),
            description,
            params: Vec::new(),
        };
        let mut docs: Vec<SearchDoc> = ["read", "write", "move", "list", "stat"]
            .iter()
            .map(|n| tool(n, format!("{n} a file. {note}")))
            .collect();
        docs.push(tool("grep", format!("Search files. {note} Matches regex.")));
        let texts = EmbedTexts::of(&docs);
        assert_eq!(texts.texts[0], "read: read a file.");
        // The note's tools are left with one sentence each, so no lead text either, except
        // the one whose description goes on past the note.
        assert_eq!(
            texts.texts[5..],
            ["grep: Search files. Matches regex.", "grep: Search files."]
        );
        assert_eq!(texts.extra_of, [5]);
    }

    #[test]
    fn a_description_of_several_sentences_gets_a_lead_text() {
        let with = |description: &str| SearchDoc {
            path: "mail.send".into(),
            name: "send".into(),
            description: description.into(),
            params: Vec::new(),
        };
        // One sentence, or none: one vector.
        assert_eq!(lead_text(&with("")), None);
        assert_eq!(lead_text(&with("  Send an email message.  ")), None);
        // A sentence ends at . ! ? followed by white space, after 20 bytes at least.
        assert_eq!(
            lead_text(&with("Send an email message. Retries twice on errors.")).as_deref(),
            Some("send (mail send): Send an email message.")
        );
        assert_eq!(
            lead_text(&with(
                "Sends mail, e.g. to a contact you name! Then logs it."
            ))
            .as_deref(),
            Some("send (mail send): Sends mail, e.g. to a contact you name!")
        );
        // Or at a line break; a dot inside a word or a version does not end it.
        assert_eq!(
            lead_text(&with(
                "Send mail via smtp.example.com v1.2\n\nArgs: to, body"
            ))
            .as_deref(),
            Some("send (mail send): Send mail via smtp.example.com v1.2")
        );
        let docs = [
            with("One sentence only."),
            with("Send an email message. Retries twice on errors."),
            SearchDoc {
                path: "chat.post".into(),
                ..with("Post a message.")
            },
            SearchDoc {
                path: "files.put".into(),
                ..with("Store a file.")
            },
        ];
        let texts = EmbedTexts::of(&docs);
        assert_eq!(texts.texts.len(), 5);
        assert_eq!(texts.texts[4], "send (mail send): Send an email message.");
        assert_eq!(texts.extra_of, [1]);
    }

    #[test]
    fn a_long_description_does_not_hide_what_its_first_sentence_says() {
        // The first tool's first sentence is about mail, the rest of its description is not:
        // its whole text is far from a mail request, its lead sentence close to it.
        let docs = [
            doc(
                "post.deliver",
                "Send an email message. Accepts plain or rich bodies, attachments up to a \
                 size limit, several recipients, copies, and reply addresses.",
            ),
            doc("mail.digest", "Read a box."),
        ];
        let lexical = Arc::new(SearchIndex::build(&docs));
        let index = HybridIndex::build(&docs, lexical.clone(), Arc::new(Concepts)).unwrap();
        assert_eq!(
            index.vectors().len(),
            3 * 4,
            "two tools and one lead vector"
        );
        let v = Concepts.embed_query("inbox").unwrap();
        let q = Query::new("inbox", 2);
        let first = |index: &HybridIndex| index.search_semantic(&q, &v).hits[0].doc;
        assert_eq!(first(&index), 0);
        // The same tools with their whole texts only: the other tool comes first.
        let whole = index.vectors()[..2 * 4].to_vec();
        let single =
            HybridIndex::from_vectors(lexical, Arc::new(Concepts), whole, HybridConfig::default());
        assert_eq!(first(&single), 1);
        // The fused ranking uses the lead vector too.
        assert_eq!(index.search(&q).unwrap().hits[0].doc, 0);
    }

    #[test]
    fn a_tool_for_one_clause_of_a_request_gains_that_clauses_lexical_evidence() {
        // The request's words are mostly about its first clause; the second clause's tool
        // matches few of them, so by the whole request it trails a near-twin of the first
        // clause's tool. Every tool has the same vector: only words decide.
        let docs = [
            doc(
                "loans.payment",
                "Monthly payment of a loan with an interest rate and a term.",
            ),
            doc(
                "loans.mortgage",
                "Monthly mortgage payment with an interest rate and a term.",
            ),
            doc("geo.distance", "Distance between two cities."),
            doc("mail.send", "Send an email."),
        ];
        let lexical = Arc::new(SearchIndex::build(&docs));
        let same = [0.5f32, 0.5, 0.5, 0.5].repeat(docs.len());
        let with = |clause_share: f32| {
            let config = HybridConfig {
                clause_share,
                ..HybridConfig::default()
            };
            HybridIndex::from_vectors(lexical.clone(), Arc::new(Unused(4)), same.clone(), config)
        };
        let text = "Compute the monthly payment of a loan at a 5% interest rate over a 5 year \
                    term and the monthly payment at a 6% interest rate over the same term, \
                    then find the distance by car.";
        let v = vec![0.5f32; 4];
        let vectors = QueryVectors {
            whole: v.clone(),
            clauses: vec![v.clone(), v],
        };
        let q = Query::new(text, 2);
        let top = |index: &HybridIndex| -> Vec<usize> {
            let hits = index.search_clauses(&q, &vectors).hits;
            hits.iter().map(|h| h.doc).collect()
        };
        assert_eq!(
            top(&with(0.0)),
            [0, 1],
            "by the whole request: the two loan tools"
        );
        // The distance tool is its clause's best: with a full share it counts as much as the
        // request's best tool, with half a share half as much.
        assert_eq!(
            top(&with(1.0)),
            [0, 2],
            "the distance clause's tool comes second"
        );
        let score_of = |index: &HybridIndex, doc: usize| {
            let all = Query::new(text, 4);
            let hits = index.search_clauses(&all, &vectors).hits;
            hits.iter().find(|h| h.doc == doc).map_or(0.0, |h| h.score)
        };
        let (none, half) = (score_of(&with(0.0), 2), score_of(&with(0.5), 2));
        assert!(half > none, "half a share lifts it: {none} -> {half}");
        assert!(
            (half - 0.4 * 0.5).abs() < 1e-5,
            "0.4 of the lexical side: {half}"
        );
        // A request of one clause is judged as a whole, whatever the share.
        let single = QueryVectors {
            whole: vec![0.5f32; 4],
            clauses: Vec::new(),
        };
        let hits = with(0.5).search_clauses(&q, &single).hits;
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), [0, 1]);
    }

    fn ranking(docs: &[usize]) -> Vec<Hit> {
        docs.iter()
            .enumerate()
            .map(|(i, &doc)| Hit {
                doc,
                score: 10.0 - i as f32,
            })
            .collect()
    }

    fn order(mut hits: Vec<Hit>) -> Vec<usize> {
        hits = top_k(hits, usize::MAX);
        hits.iter().map(|h| h.doc).collect()
    }

    #[test]
    fn rrf_favours_documents_both_rankings_hold() {
        let config = HybridConfig {
            fusion: Fusion::Rrf { k: 60.0 },
            ..HybridConfig::default()
        };
        let lexical = ranking(&[1, 2, 3]);
        let semantic = ranking(&[4, 3, 1]);
        let fused = fuse(&lexical, &semantic, |_| 0.0, &config);
        // 1: ranks 1 and 3; 3: ranks 3 and 2; then the single-list firsts 4 (and 2).
        assert_eq!(order(fused), [1, 3, 4, 2]);
        // Weight 0 keeps the lexical order (semantic-only documents trail with score 0).
        let lexical_only = HybridConfig {
            semantic_weight: 0.0,
            ..config
        };
        assert_eq!(
            order(fuse(&lexical, &semantic, |_| 0.0, &lexical_only)),
            [1, 2, 3, 4]
        );
    }

    /// A stand-in model: each word votes for the concept it belongs to (unknown words for a
    /// last "other" axis), and the vector is normalised. Enough to tell paraphrases apart
    /// from unrelated texts without a real model.
    #[derive(Debug)]
    struct Concepts;

    const CONCEPTS: [&[&str]; 3] = [
        &["time", "clock", "late", "hour", "now", "moment", "date"],
        &["rain", "weather", "forecast", "wind", "sunny"],
        &["mail", "email", "send", "message", "inbox"],
    ];

    impl TextEmbedder for Concepts {
        fn dim(&self) -> usize {
            CONCEPTS.len() + 1
        }

        fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError> {
            let mut out = Vec::new();
            for t in texts {
                if t.contains("FAIL") {
                    return Err(EmbedError("cannot embed".into()));
                }
                let mut v = vec![0f32; self.dim()];
                for w in split_words(t) {
                    let axis = CONCEPTS
                        .iter()
                        .position(|c| c.contains(&w.as_str()))
                        .unwrap_or(CONCEPTS.len());
                    v[axis] += 1.0;
                }
                let norm = dot(&v, &v).sqrt().max(1e-6);
                out.extend(v.iter().map(|x| x / norm));
            }
            Ok(out)
        }
    }

    fn doc(path: &str, description: &str) -> SearchDoc {
        SearchDoc {
            path: path.into(),
            name: path.rsplit('.').next().unwrap().into(),
            description: description.into(),
            params: Vec::new(),
        }
    }

    #[test]
    fn fused_search_finds_what_words_alone_miss_and_keeps_exact_matches() {
        let docs = [
            doc("clock.current", "Return the current hour in a zone."),
            doc("sky.outlook", "Rain and wind outlook for a city."),
            doc("post.deliver", "Send an email message to a contact."),
            doc("tables.rows.query", "Query rows of a data table."),
        ];
        let lexical = Arc::new(SearchIndex::build(&docs));
        let index = HybridIndex::build(&docs, lexical.clone(), Arc::new(Concepts)).unwrap();
        assert_eq!(index.vectors().len(), docs.len() * 4);

        // No word in common with the clock tool: BM25F alone cannot find it.
        let q = Query::new("how late is it at the moment", 3);
        assert!(lexical.search(&q).hits.iter().all(|h| h.doc != 0));
        assert_eq!(index.search(&q).unwrap().hits[0].doc, 0);

        // Exact words still win.
        let q = Query::new("query table rows", 3);
        assert_eq!(index.search(&q).unwrap().hits[0].doc, 3);

        // Namespace filters apply to the semantic side too.
        let q = Query {
            namespace: Some("sky"),
            ..Query::new("what time is it now", 3)
        };
        let r = index.search(&q).unwrap();
        assert!(r.hits.iter().all(|h| h.doc == 1), "{r:?}");

        // A query without text is lexical; an embedding failure is an error, not a panic.
        assert!(index.search(&Query::new("FAIL now", 3)).is_err());
    }

    /// [`Concepts`] whose searches hold it: it counts the holds open now, and notes how many
    /// were open when a query was embedded.
    #[derive(Debug, Default)]
    struct Holding {
        open: Arc<AtomicUsize>,
        open_at_query: AtomicUsize,
    }

    struct Held(Arc<AtomicUsize>);

    impl HeldForSearch for Held {}

    impl Drop for Held {
        fn drop(&mut self) {
            self.0.fetch_sub(1, SeqCst);
        }
    }

    impl TextEmbedder for Holding {
        fn dim(&self) -> usize {
            Concepts.dim()
        }

        fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError> {
            Concepts.embed_texts(texts)
        }

        fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
            self.open_at_query.store(self.open.load(SeqCst), SeqCst);
            Concepts.embed_query(text)
        }

        fn hold_for_search(&self) -> Option<SearchHold<'_>> {
            self.open.fetch_add(1, SeqCst);
            Some(SearchHold::new(Held(self.open.clone())))
        }
    }

    #[test]
    fn a_search_holds_the_model_while_it_embeds_and_scans_and_lets_go_after() {
        let docs = [
            doc("clock.current", "Return the current hour in a zone."),
            doc("sky.outlook", "Rain and wind outlook for a city."),
        ];
        let lexical = Arc::new(SearchIndex::build(&docs));
        let model = Arc::new(Holding::default());
        let index = HybridIndex::build(&docs, lexical, model.clone()).unwrap();
        let r = index.search(&Query::new("how late is it", 2)).unwrap();
        assert_eq!(r.hits[0].doc, 0);
        assert_eq!(model.open_at_query.load(SeqCst), 1, "held while embedding");
        assert_eq!(model.open.load(SeqCst), 0, "let go after the search");
        // An embedding failure lets go too.
        assert!(index.search(&Query::new("FAIL now", 2)).is_err());
        assert_eq!(model.open.load(SeqCst), 0);
    }

    #[test]
    fn a_tool_that_matches_one_clause_of_a_request_ranks_with_its_best_similarity() {
        let docs = [
            doc("clock.now", "one"),
            doc("sky.outlook", "two"),
            doc("both.blend", "three"),
        ];
        let lexical = Arc::new(SearchIndex::build(&docs));
        // Tool 2 sits between the request's two clauses, tools 0 and 1 on one each.
        let vectors = vec![
            1.0, 0.0, 0.0, 0.0, //
            0.0, 1.0, 0.0, 0.0, //
            0.6, 0.6, 0.0, 0.529_15,
        ];
        let index = HybridIndex::from_vectors(
            lexical,
            Arc::new(Concepts),
            vectors,
            HybridConfig::default(),
        );
        let half = std::f32::consts::FRAC_1_SQRT_2;
        let whole = vec![half, half, 0.0, 0.0];
        let q = Query::new("xyzzy plugh", 2);
        let sorted = |r: SearchResult| {
            let mut d: Vec<usize> = r.hits.iter().map(|h| h.doc).collect();
            d.sort_unstable();
            d
        };
        // The sentence alone: the blend first.
        assert_eq!(index.search_embedded(&q, &whole).hits[0].doc, 2);
        // With its clauses: each clause's own tool.
        let request = QueryVectors {
            whole,
            clauses: vec![vec![1.0, 0.0, 0.0, 0.0], vec![0.0, 1.0, 0.0, 0.0]],
        };
        assert_eq!(sorted(index.search_clauses(&q, &request)), [0, 1]);
        // A namespace still limits every clause's candidates.
        let scoped = Query {
            namespace: Some("both"),
            ..Query::new("xyzzy plugh", 2)
        };
        assert_eq!(sorted(index.search_clauses(&scoped, &request)), [2]);
        // An embedder without clauses searches with the sentence.
        let r = index.search(&Query::new("clock weather", 1)).unwrap();
        assert_eq!(r.hits.len(), 1);
    }

    #[test]
    fn a_request_of_several_vectors_takes_the_nearest_by_best_cosine_not_more() {
        let docs: Vec<SearchDoc> = ["a.one", "b.two", "c.three", "d.four", "e.five", "f.six"]
            .iter()
            .map(|p| doc(p, "none"))
            .collect();
        let lexical = Arc::new(SearchIndex::build(&docs));
        // Each tool lies on one axis, at its own distance from the origin's direction.
        #[rustfmt::skip]
        let vectors = vec![
            1.0, 0.0, 0.0, 0.0,
            0.0, 1.0, 0.0, 0.0,
            0.0, 0.0, 1.0, 0.0,
            0.8, 0.0, 0.0, 0.6,
            0.0, 0.8, 0.0, 0.6,
            0.0, 0.0, 0.8, 0.6,
        ];
        let config = HybridConfig {
            semantic_depth: 2,
            ..HybridConfig::default()
        };
        let index = HybridIndex::from_vectors(lexical, Arc::new(Concepts), vectors, config);
        // Three vectors, the third clause nearest tool 2: by best cosine tools 0, 1 and 2 tie
        // at 1.0 and the rest follow at 0.8; two are taken, whatever the vectors' count.
        let request = QueryVectors {
            whole: vec![1.0, 0.0, 0.0, 0.0],
            clauses: vec![vec![0.0, 1.0, 0.0, 0.0], vec![0.0, 0.0, 1.0, 0.0]],
        };
        let r = index.search_clauses(&Query::new("xyzzy plugh", 2), &request);
        assert_eq!(r.total, 2, "no words match: only the semantic candidates");
        assert_eq!(r.hits.len(), 2);
        assert!(r.hits.iter().all(|h| h.doc < 3), "{:?}", r.hits);
        // A deeper search takes the next nearest as well.
        let r = index.search_clauses(&Query::new("xyzzy plugh", 4), &request);
        assert_eq!(r.total, 4);
    }

    #[test]
    fn building_reports_embedding_failures() {
        let docs = [doc("a.fail", "FAIL")];
        let err = HybridIndex::build(
            &docs,
            Arc::new(SearchIndex::build(&docs)),
            Arc::new(Concepts),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "embedding failed: cannot embed");
    }

    #[test]
    fn a_catalog_ranks_the_same_under_one_namespace_as_without_one() {
        // 0: every word of the request; 1: one of its words, near in meaning; 2: no word of
        // it, the nearest in meaning.
        let tools = [
            ("hotel_book", "Book a hotel room for the given dates."),
            (
                "notes_keep",
                "Keep notes of anything at all, say about a room, for later.",
            ),
            ("stay_reserve", "Reserve a stay somewhere."),
        ];
        let catalog = |namespace: &str| -> Vec<SearchDoc> {
            let doc = |(path, description): &(&str, &str)| SearchDoc {
                path: format!("{namespace}{path}"),
                name: path.replace('_', " "),
                description: description.to_string(),
                params: Vec::new(),
            };
            tools.iter().map(doc).collect()
        };
        let vectors = vec![
            0.0, 1.0, 0.0, 0.0, //
            0.8, 0.6, 0.0, 0.0, //
            1.0, 0.0, 0.0, 0.0,
        ];
        let q = Query::new("book a hotel room", 3);
        let rank = |docs: Vec<SearchDoc>| -> Vec<usize> {
            let lexical = Arc::new(SearchIndex::build(&docs));
            let own = lexical.score_docs(q.text, &[0, 1, 2]);
            assert!(
                own[1] > 0.0 && own[1] < 0.3 * own[0] && own[2] == 0.0,
                "{own:?}"
            );
            let index = HybridIndex::from_vectors(
                lexical,
                Arc::new(Unused(4)),
                vectors.clone(),
                HybridConfig::default(),
            );
            let hits = index.search_embedded(&q, &[1.0, 0.0, 0.0, 0.0]).hits;
            hits.iter().map(|h| h.doc).collect()
        };
        // The nearest tool first, then the one near in meaning with a word, then the words'
        // best; one server's namespace on every tool changes nothing (its evidence, shared by
        // all, once lifted the tool of one word above the nearest).
        assert_eq!(rank(catalog("")), [2, 1, 0]);
        assert_eq!(rank(catalog("stays.")), [2, 1, 0]);
    }

    #[test]
    fn the_default_fusion_lets_a_clear_semantic_match_pass_a_weak_lexical_one() {
        let config = HybridConfig::default();
        assert_eq!(config.fusion, Fusion::Convex);
        let lexical = ranking(&[1, 2, 3]);
        let semantic = ranking(&[4, 3, 1]);
        let cos = |d: usize| [0.0, 0.2, 0.1, 0.9, 0.95][d];
        // 3: a fair lexical match and a near semantic one; 4: the nearest, no words in common;
        // 1: the best lexical match, far in meaning; 2: weak both ways.
        assert_eq!(order(fuse(&lexical, &semantic, cos, &config)), [3, 4, 1, 2]);
    }

    #[test]
    fn a_similarity_that_is_not_a_number_ranks_lowest() {
        let config = HybridConfig::default();
        let lexical = ranking(&[1, 2]);
        let semantic = ranking(&[2, 3, 1]);
        // 1: the best words, a damaged vector (no semantic share); 2: good both ways; 3: the
        // least similar of the others.
        let cos = |d: usize| [0.0, f32::NAN, 0.9, 0.1][d];
        let fused = fuse(&lexical, &semantic, cos, &config);
        assert!(fused.iter().all(|h| h.score.is_finite()), "{fused:?}");
        assert_eq!(order(fused), [2, 1, 3]);
    }

    #[test]
    fn convex_fusion_blends_normalised_scores() {
        let config = HybridConfig {
            fusion: Fusion::Convex,
            semantic_weight: 0.5,
            ..HybridConfig::default()
        };
        let lexical = [Hit { doc: 0, score: 4.0 }, Hit { doc: 1, score: 1.0 }];
        let semantic = [Hit { doc: 2, score: 0.9 }, Hit { doc: 1, score: 0.8 }];
        let cos = |d: usize| [0.1, 0.8, 0.9][d];
        let fused = fuse(&lexical, &semantic, cos, &config);
        let score = |d: usize| fused.iter().find(|h| h.doc == d).unwrap().score;
        assert!((score(0) - 0.5).abs() < 1e-6);
        assert!((score(1) - (0.5 * 0.25 + 0.5 * 0.875)).abs() < 1e-6);
        assert!((score(2) - 0.5).abs() < 1e-6);
    }
}
