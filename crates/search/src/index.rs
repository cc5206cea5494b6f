//! The inverted index and its field-weighted BM25 (BM25F) ranking.
//!
//! Every document has five fields: path segments, name, description, parameter
//! names and parameter descriptions. At build time each (term, document) pair gets
//! one precomputed impact: the field-weighted, length-normalised term frequency
//! saturated with `k1`. A query then only sums `idf × impact` along the postings
//! of its terms, so search cost grows with the postings touched, not the catalog.
//!
//! A word's idf counts, besides the catalog's own tools, a background of how common the word is
//! in tools at large ([`crate::background`]), so a small catalog does not take a word every
//! API has for a rare one.
//!
//! Optional pseudo-relevance feedback adds the strongest terms of the first-pass
//! top documents to the query and runs it again.

use std::collections::HashMap;

use crate::expand::{self, ExpansionWeights};
use crate::prerequisites::Prerequisites;
use crate::tokenize::analyze_into;

/// One parameter of a tool, as far as search cares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParamDoc {
    pub name: String,
    pub description: String,
    /// The values the schema lists for it (its `enum`, or one behind a `$ref`, in its items or
    /// in `anyOf` / `oneOf` branches), as words: `"Dermatologist, Gynecologist"`; empty when it
    /// lists none, or so many that they are a table rather than kinds
    /// ([`param_docs_from_schema`](crate::param_docs_from_schema)). Indexed with the
    /// parameter's description; the prerequisites do not read it.
    pub values: String,
}

/// What the index knows about one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchDoc {
    /// Dot path, e.g. `github.issues.create`; its first segment is the namespace.
    pub path: String,
    /// Display name, e.g. `Create Issue`.
    pub name: String,
    pub description: String,
    pub params: Vec<ParamDoc>,
}

/// A query. `limit` caps the hits returned; `total` in the result counts all matches.
#[derive(Clone, Copy)]
pub struct Query<'a> {
    pub text: &'a str,
    pub limit: usize,
    /// Only documents whose path starts with this segment.
    pub namespace: Option<&'a str>,
    /// Only documents for which this returns `true` (e.g. the tools a policy lets the caller see).
    pub filter: Option<&'a (dyn Fn(usize) -> bool + Sync)>,
}

impl<'a> Query<'a> {
    /// A query over the whole index with no filters.
    pub fn new(text: &'a str, limit: usize) -> Self {
        Self {
            text,
            limit,
            namespace: None,
            filter: None,
        }
    }
}

impl std::fmt::Debug for Query<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query")
            .field("text", &self.text)
            .field("limit", &self.limit)
            .field("namespace", &self.namespace)
            .field("filter", &self.filter.is_some())
            .finish()
    }
}

/// One ranked document: `doc` is its position in the slice given to [`SearchIndex::build`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: usize,
    pub score: f32,
}

/// Ranked hits (best first, ties by document id) and how many documents matched at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchResult {
    pub hits: Vec<Hit>,
    pub total: usize,
}

/// Field indexes into [`Bm25fConfig::fields`].
pub const FIELD_PATH: usize = 0;
pub const FIELD_NAME: usize = 1;
pub const FIELD_DESCRIPTION: usize = 2;
pub const FIELD_PARAM_NAMES: usize = 3;
pub const FIELD_PARAM_DESCRIPTIONS: usize = 4;
const FIELDS: usize = 5;

/// Weight and length normalisation of one field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldConfig {
    /// How much one occurrence in this field counts.
    pub weight: f32,
    /// Length normalisation, 0 (none) to 1 (full).
    pub b: f32,
}

/// Ranking parameters. [`Default`] is what the retrieval benchmarks were run with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25fConfig {
    /// Term-frequency saturation.
    pub k1: f32,
    /// Per field, in the order path, name, description, parameter names, parameter descriptions.
    pub fields: [FieldConfig; FIELDS],
    /// First-pass documents used for pseudo-relevance feedback; 0 turns it off.
    pub feedback_docs: usize,
    /// Expansion terms added from those documents.
    pub feedback_terms: usize,
    /// Weight of the expansion terms relative to the query's own.
    pub feedback_weight: f32,
    /// Share of its namespace's evidence added to a matched tool's score: tools of a
    /// namespace that matches the query as a whole rise together.
    pub namespace_weight: f32,
    /// How namespace evidence is pooled (0 = sum, 1 = max, 2 = sqrt of sum). Max pooling
    /// scores a tool by its own match plus a share of its server's best match.
    pub namespace_pool: u8,
    /// Weight of a synonym of a query word ([`crate::expand::SYNONYM_GROUPS`]); 0 turns synonyms off.
    pub synonym_weight: f32,
    /// Weight of the words inside a path or URL of the query.
    pub path_word_weight: f32,
    /// Weight of `file`/`url` and of the format words a file extension stands for.
    pub format_weight: f32,
    /// Documents of the background ([`crate::background`]) counted into every word's
    /// document frequency, each word as often as its background share says; 0 uses the
    /// catalog's own counts alone. 100, chosen once over the six public sets together (see
    /// docs/benchmarks.md): a catalog of a hundred tools weighs its own counts and the
    /// background's alike.
    pub background_docs: f32,
}

impl Default for Bm25fConfig {
    fn default() -> Self {
        let f = |weight, b| FieldConfig { weight, b };
        Self {
            k1: 1.2,
            fields: [
                f(1.5, 0.3),
                f(2.0, 0.3),
                f(1.0, 0.6),
                f(0.6, 0.5),
                f(0.3, 0.6),
            ],
            feedback_docs: 0,
            feedback_terms: 0,
            feedback_weight: 0.0,
            namespace_weight: 0.5,
            namespace_pool: 1,
            synonym_weight: 0.5,
            path_word_weight: 0.3,
            format_weight: 1.0,
            background_docs: 100.0,
        }
    }
}

/// An immutable inverted index over tool documents.
#[derive(Debug, Clone)]
pub struct SearchIndex {
    config: Bm25fConfig,
    vocab: HashMap<String, u32>,
    idf: Vec<f32>,
    /// Per term: (doc, impact), ordered by doc.
    postings: Vec<Vec<(u32, f32)>>,
    /// Per doc: its (term, impact) pairs, for feedback. `forward_start[d]..forward_start[d+1]`.
    forward: Vec<(u32, f32)>,
    forward_start: Vec<u32>,
    /// Namespace id of each doc.
    doc_namespace: Vec<u32>,
    namespaces: HashMap<String, u32>,
    namespace_docs: Vec<Vec<u32>>,
    /// The tools each tool's parameters say their values come from.
    prerequisites: Prerequisites,
}

/// The namespace of a path: its first dot-separated segment (the whole path when it has one).
fn namespace_of(path: &str) -> &str {
    split_namespace(path).map_or(path, |(ns, _)| ns)
}

/// A path of more than one segment as its namespace and the rest; `None` for one segment.
pub(crate) fn split_namespace(path: &str) -> Option<(&str, &str)> {
    path.split_once('.')
}

impl SearchIndex {
    /// Builds the index with the default ranking parameters. Doc ids are slice positions.
    pub fn build(docs: &[SearchDoc]) -> Self {
        Self::build_with(docs, Bm25fConfig::default())
    }

    /// Builds the index with explicit ranking parameters.
    pub fn build_with(docs: &[SearchDoc], config: Bm25fConfig) -> Self {
        let mut vocab: HashMap<String, u32> = HashMap::new();
        // Per doc: (term, field) occurrences, and field lengths.
        let mut occurrences: Vec<Vec<(u32, u8)>> = Vec::with_capacity(docs.len());
        let mut lengths: Vec<[u32; FIELDS]> = Vec::with_capacity(docs.len());
        let mut buf = Vec::new();
        for doc in docs {
            let mut occ = Vec::new();
            let mut len = [0u32; FIELDS];
            for (field, text) in field_texts(doc) {
                buf.clear();
                for t in text {
                    analyze_into(t, &mut buf);
                }
                len[field] += buf.len() as u32;
                for term in buf.drain(..) {
                    let next = vocab.len() as u32;
                    let id = *vocab.entry(term).or_insert(next);
                    occ.push((id, field as u8));
                }
            }
            occ.sort_unstable();
            occurrences.push(occ);
            lengths.push(len);
        }

        let n = docs.len().max(1) as f32;
        let mut avg = [0f32; FIELDS];
        for l in &lengths {
            for f in 0..FIELDS {
                avg[f] += l[f] as f32;
            }
        }
        for a in &mut avg {
            *a = (*a / n).max(1.0);
        }

        let mut postings: Vec<Vec<(u32, f32)>> = vec![Vec::new(); vocab.len()];
        let mut forward = Vec::new();
        let mut forward_start = Vec::with_capacity(docs.len() + 1);
        for (d, occ) in occurrences.iter().enumerate() {
            forward_start.push(forward.len() as u32);
            let norm: [f32; FIELDS] = std::array::from_fn(|f| {
                let c = config.fields[f];
                c.weight / (1.0 - c.b + c.b * lengths[d][f] as f32 / avg[f])
            });
            let mut i = 0;
            while i < occ.len() {
                let term = occ[i].0;
                let mut tf = 0f32;
                while i < occ.len() && occ[i].0 == term {
                    tf += norm[occ[i].1 as usize];
                    i += 1;
                }
                let impact = tf / (config.k1 + tf);
                postings[term as usize].push((d as u32, impact));
                forward.push((term, impact));
            }
        }
        forward_start.push(forward.len() as u32);

        let mut words: Vec<&str> = vec![""; vocab.len()];
        for (word, &id) in &vocab {
            words[id as usize] = word;
        }
        // The background's documents: `mu` more in all, of which the word's share have it.
        let mu = config.background_docs.max(0.0);
        let background = |word: &str| {
            if mu > 0.0 {
                mu * crate::background::share(word)
            } else {
                0.0
            }
        };
        let idf = postings
            .iter()
            .zip(&words)
            .map(|(p, word)| {
                let df = p.len() as f32 + background(word);
                (1.0 + (n + mu - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();

        let mut namespaces: HashMap<String, u32> = HashMap::new();
        let mut namespace_docs: Vec<Vec<u32>> = Vec::new();
        let mut doc_namespace = Vec::with_capacity(docs.len());
        for (d, doc) in docs.iter().enumerate() {
            let next = namespaces.len() as u32;
            let id = *namespaces
                .entry(namespace_of(&doc.path).to_string())
                .or_insert(next);
            if id as usize == namespace_docs.len() {
                namespace_docs.push(Vec::new());
            }
            namespace_docs[id as usize].push(d as u32);
            doc_namespace.push(id);
        }

        Self {
            config,
            vocab,
            idf,
            postings,
            forward,
            forward_start,
            doc_namespace,
            namespaces,
            namespace_docs,
            prerequisites: Prerequisites::of(docs),
        }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.doc_namespace.len()
    }

    /// Whether the index holds no documents.
    pub fn is_empty(&self) -> bool {
        self.doc_namespace.is_empty()
    }

    /// The ranking parameters the index was built with.
    pub fn config(&self) -> &Bm25fConfig {
        &self.config
    }

    /// Whether `doc` passes the query's namespace and filter; `None` when the query names a
    /// namespace the index does not have (then nothing passes).
    pub(crate) fn visibility<'q>(
        &'q self,
        q: &'q Query<'q>,
    ) -> Option<impl Fn(usize) -> bool + 'q> {
        let namespace = match q.namespace {
            Some(ns) => Some(*self.namespaces.get(ns)?),
            None => None,
        };
        Some(move |d: usize| {
            namespace.is_none_or(|ns| self.doc_namespace[d] == ns) && q.filter.is_none_or(|f| f(d))
        })
    }

    /// Runs a query. An empty query (no meaningful word) with a namespace lists that
    /// namespace in document order; without a namespace it matches nothing. Each ranked tool
    /// is followed by its prerequisites ([`Prerequisites::follow`]).
    pub fn search(&self, q: &Query<'_>) -> SearchResult {
        let terms = self.query_terms(q.text);
        if terms.is_empty() {
            return self.list(q);
        }
        self.with_prerequisites(q, self.rank_terms(q, &terms))
    }

    /// The tools each tool's parameters say their values come from.
    pub fn prerequisites(&self) -> &Prerequisites {
        &self.prerequisites
    }

    /// `result`, a ranking of `q`, with each ranked tool's prerequisites the caller may see
    /// after it ([`Prerequisites::follow`]); what the lexical search and the hybrid one (after
    /// its fusion) both answer.
    pub(crate) fn with_prerequisites(
        &self,
        q: &Query<'_>,
        mut result: SearchResult,
    ) -> SearchResult {
        if self.prerequisites.is_empty() {
            return result;
        }
        if let Some(visible) = self.visibility(q) {
            result.hits = self.prerequisites.follow(result.hits, q.limit, visible);
            result.total = result.total.max(result.hits.len());
        }
        result
    }

    /// [`SearchIndex::search`] without the prerequisites: the words' own ranking, which a
    /// hybrid search fuses before it adds them.
    pub(crate) fn rank(&self, q: &Query<'_>) -> SearchResult {
        let terms = self.query_terms(q.text);
        if terms.is_empty() {
            return self.list(q);
        }
        self.rank_terms(q, &terms)
    }

    /// A query without a meaningful word: its namespace's tools in document order, or nothing
    /// without a namespace (or with one the index does not have).
    fn list(&self, q: &Query<'_>) -> SearchResult {
        let Some(&ns) = q.namespace.and_then(|ns| self.namespaces.get(ns)) else {
            return SearchResult::default();
        };
        let docs: Vec<usize> = self.namespace_docs[ns as usize]
            .iter()
            .map(|&d| d as usize)
            .filter(|&d| q.filter.is_none_or(|f| f(d)))
            .collect();
        SearchResult {
            total: docs.len(),
            hits: docs
                .into_iter()
                .take(q.limit)
                .map(|doc| Hit { doc, score: 0.0 })
                .collect(),
        }
    }

    /// The BM25F ranking of a query's `terms` among the documents it may see (none when it
    /// names a namespace the index does not have).
    fn rank_terms(&self, q: &Query<'_>, terms: &[(u32, f32)]) -> SearchResult {
        let Some(visible) = self.visibility(q) else {
            return SearchResult::default();
        };
        let mut scores = vec![0f32; self.len()];
        let mut touched = Vec::new();
        self.accumulate(terms, &mut scores, &mut touched);
        let mut candidates: Vec<Hit> = touched
            .iter()
            .map(|&d| d as usize)
            .filter(|&d| visible(d))
            .map(|doc| Hit {
                doc,
                score: scores[doc],
            })
            .collect();

        if self.config.feedback_docs > 0 && self.config.feedback_terms > 0 && !candidates.is_empty()
        {
            let top = top_k(candidates.clone(), self.config.feedback_docs);
            let expansion = self.expansion_terms(terms, &top);
            if !expansion.is_empty() {
                let mut extra = Vec::new();
                self.accumulate(&expansion, &mut scores, &mut extra);
                candidates.extend(
                    extra
                        .iter()
                        .map(|&d| d as usize)
                        .filter(|&d| visible(d))
                        .map(|doc| Hit { doc, score: 0.0 }),
                );
                for hit in &mut candidates {
                    hit.score = scores[hit.doc];
                }
            }
        }

        if self.config.namespace_weight > 0.0 {
            self.smooth_by_namespace(&mut candidates);
        }

        let total = candidates.len();
        SearchResult {
            hits: top_k(candidates, q.limit),
            total,
        }
    }

    /// The BM25F score of `text` for each of `docs` (its terms' weights times their impacts
    /// in the document, read from the forward lists), without the namespace's evidence or
    /// feedback: a re-scoring of candidates a search already has, which reads their terms,
    /// not the postings of the text's.
    pub fn score_docs(&self, text: &str, docs: &[usize]) -> Vec<f32> {
        let terms = self.query_terms(text);
        let score = |d: usize| -> f32 {
            let range = self.forward_start[d] as usize..self.forward_start[d + 1] as usize;
            self.forward[range]
                .iter()
                .filter_map(|&(term, impact)| {
                    let at = terms.binary_search_by_key(&term, |t| t.0).ok()?;
                    Some(terms[at].1 * self.idf[term as usize] * impact)
                })
                .sum()
        };
        docs.iter().map(|&d| score(d)).collect()
    }

    /// Adds to each candidate a share of the pooled scores of its namespace's candidates:
    /// a tool whose server matches the task as a whole rises with it.
    fn smooth_by_namespace(&self, candidates: &mut [Hit]) {
        let pooled = self.pool_by_namespace(candidates);
        for hit in candidates.iter_mut() {
            hit.score +=
                self.config.namespace_weight * pooled[self.doc_namespace[hit.doc] as usize];
        }
    }

    /// Each namespace's evidence pooled from `hits` as [`Bm25fConfig::namespace_pool`] says
    /// (indexed by namespace id; 0 where no hit is of the namespace).
    fn pool_by_namespace(&self, hits: &[Hit]) -> Vec<f32> {
        let mut pooled = vec![0f32; self.namespace_docs.len()];
        for hit in hits {
            let e = &mut pooled[self.doc_namespace[hit.doc] as usize];
            match self.config.namespace_pool {
                1 => *e = e.max(hit.score),
                _ => *e += hit.score,
            }
        }
        if self.config.namespace_pool == 2 {
            pooled.iter_mut().for_each(|p| *p = p.sqrt());
        }
        pooled
    }

    /// A search's `hits` scored for a fusion that divides by the best score: each hit's own
    /// words' score ([`SearchIndex::score_docs`], without feedback's terms) plus its
    /// namespace's evidence *relative to the best-matching namespace's*. The tools of the
    /// namespace that matches `text` best gain nothing, those of another namespace lose
    /// [`Bm25fConfig::namespace_weight`] times the difference, and a namespace of one tool
    /// has no evidence its tool's own score lacks. Evidence that every candidate shares, as
    /// when one server serves the whole catalog, so changes no score; added to each score as
    /// [`SearchIndex::search`] adds it, it would lift every matched tool towards the best and
    /// above the tools the words missed, and a catalog would rank otherwise under one
    /// namespace than without (docs/benchmarks.md). The order of the hits is the search's
    /// but for tools of one-tool namespaces; hits left without evidence are dropped; best
    /// first.
    pub fn namespace_relative(&self, text: &str, hits: &[Hit]) -> Vec<Hit> {
        let docs: Vec<usize> = hits.iter().map(|h| h.doc).collect();
        let mut own: Vec<Hit> = docs
            .iter()
            .zip(self.score_docs(text, &docs))
            .map(|(&doc, score)| Hit { doc, score })
            .collect();
        let shared = |d: usize| {
            let ns = self.doc_namespace[d] as usize;
            (self.namespace_docs[ns].len() > 1).then_some(ns)
        };
        let weight = self.config.namespace_weight;
        let pooled = self.pool_by_namespace(&own);
        let best = own
            .iter()
            .filter_map(|h| shared(h.doc))
            .map(|ns| pooled[ns])
            .fold(0.0f32, f32::max);
        for hit in &mut own {
            if let Some(ns) = shared(hit.doc) {
                hit.score -= weight * (best - pooled[ns]);
            }
        }
        own.retain(|h| h.score > 0.0);
        top_k(own, usize::MAX)
    }

    /// Adds `weight × idf × impact` of every posting of `terms` into `scores`.
    fn accumulate(&self, terms: &[(u32, f32)], scores: &mut [f32], touched: &mut Vec<u32>) {
        for &(term, weight) in terms {
            let w = weight * self.idf[term as usize];
            for &(d, impact) in &self.postings[term as usize] {
                let s = &mut scores[d as usize];
                if *s == 0.0 {
                    touched.push(d);
                }
                *s += w * impact;
            }
        }
    }

    /// Query terms with weights (see [`crate::expand::query_terms`]), limited to terms the
    /// index knows.
    fn query_terms(&self, text: &str) -> Vec<(u32, f32)> {
        let c = &self.config;
        let weights = ExpansionWeights {
            synonym: c.synonym_weight,
            path_word: c.path_word_weight,
            format: c.format_weight,
        };
        let mut terms: Vec<(u32, f32)> = Vec::new();
        for (term, w) in expand::query_terms(text, weights) {
            if let Some(&id) = self.vocab.get(&term) {
                match terms.iter_mut().find(|t| t.0 == id) {
                    Some(t) => t.1 += w,
                    None => terms.push((id, w)),
                }
            }
        }
        terms.sort_unstable_by_key(|t| t.0);
        terms
    }

    /// The strongest terms of the feedback documents that the query lacks.
    fn expansion_terms(&self, query: &[(u32, f32)], top: &[Hit]) -> Vec<(u32, f32)> {
        let Some(best) = top.first().map(|h| h.score) else {
            return Vec::new();
        };
        let mut gain: HashMap<u32, f32> = HashMap::new();
        for hit in top {
            let rel = hit.score / best;
            let range =
                self.forward_start[hit.doc] as usize..self.forward_start[hit.doc + 1] as usize;
            for &(term, impact) in &self.forward[range] {
                if query.iter().all(|q| q.0 != term) {
                    *gain.entry(term).or_default() += rel * impact * self.idf[term as usize];
                }
            }
        }
        let mut ranked: Vec<(u32, f32)> = gain.into_iter().collect();
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(self.config.feedback_terms);
        let Some(max) = ranked.first().map(|t| t.1) else {
            return Vec::new();
        };
        ranked
            .into_iter()
            .map(|(t, g)| (t, self.config.feedback_weight * g / max))
            .collect()
    }
}

/// Orders by score (descending), then doc id; keeps the first `k`.
pub(crate) fn top_k(mut hits: Vec<Hit>, k: usize) -> Vec<Hit> {
    let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc));
    if k == 0 {
        return Vec::new();
    }
    if hits.len() > k {
        hits.select_nth_unstable_by(k - 1, order);
        hits.truncate(k);
    }
    hits.sort_unstable_by(order);
    hits
}

/// The analysed words of a tool's text, every field, in order and with repeats: what the index
/// holds of it.
pub fn doc_terms(doc: &SearchDoc) -> Vec<String> {
    let mut out = Vec::new();
    for (_, texts) in field_texts(doc) {
        for t in texts {
            analyze_into(t, &mut out);
        }
    }
    out
}

/// The texts of each field of a document.
fn field_texts(doc: &SearchDoc) -> [(usize, Vec<&str>); FIELDS] {
    [
        (FIELD_PATH, vec![doc.path.as_str()]),
        (FIELD_NAME, vec![doc.name.as_str()]),
        (FIELD_DESCRIPTION, vec![doc.description.as_str()]),
        (
            FIELD_PARAM_NAMES,
            doc.params.iter().map(|p| p.name.as_str()).collect(),
        ),
        (
            FIELD_PARAM_DESCRIPTIONS,
            doc.params
                .iter()
                .flat_map(|p| [p.description.as_str(), p.values.as_str()])
                .filter(|t| !t.is_empty())
                .collect(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(path: &str, name: &str, description: &str) -> SearchDoc {
        SearchDoc {
            path: path.into(),
            name: name.into(),
            description: description.into(),
            params: Vec::new(),
        }
    }

    #[test]
    fn top_k_orders_by_score_then_doc() {
        let hits = vec![
            Hit { doc: 3, score: 1.0 },
            Hit { doc: 1, score: 2.0 },
            Hit { doc: 0, score: 1.0 },
            Hit { doc: 2, score: 0.5 },
        ];
        let top: Vec<usize> = top_k(hits, 3).iter().map(|h| h.doc).collect();
        assert_eq!(top, [1, 0, 3]);
    }

    #[test]
    fn rare_terms_outweigh_common_ones() {
        let index = SearchIndex::build(&[
            doc("a.list", "List Things", "List things in a store"),
            doc("a.export", "Export Things", "Export things as csv"),
            doc("a.count", "Count Things", "Count things"),
        ]);
        assert!(index.idf[index.vocab["csv"] as usize] > index.idf[index.vocab["thing"] as usize]);
        let r = index.search(&Query::new("things csv", 5));
        assert_eq!(r.hits[0].doc, 1);
        assert_eq!(r.total, 3);
    }

    #[test]
    fn a_parameters_listed_values_tell_twin_tools_apart() {
        let provider = |path: &str, kinds: &str| SearchDoc {
            params: vec![ParamDoc {
                name: "type".into(),
                description: "The kind of provider".into(),
                values: kinds.into(),
            }],
            ..doc(path, "FindProvider", "Find a service provider in a city")
        };
        let index = SearchIndex::build(&[
            provider("salon.find_provider", "Hair Stylist, Barber"),
            provider("medical.find_provider", "Dermatologist, Gynecologist"),
        ]);
        let r = index.search(&Query::new("find a dermatologist in Berkeley", 5));
        assert_eq!(r.hits[0].doc, 1);
        let r = index.search(&Query::new("I need a barber", 5));
        assert_eq!(r.hits[0].doc, 0);
    }

    #[test]
    fn compounds_of_adjacent_query_words_match_joined_identifiers() {
        let index = SearchIndex::build(&[
            doc("x.wordcloud", "wordcloud", "Render a picture"),
            doc("x.count", "Count", "Count words in text"),
        ]);
        let r = index.search(&Query::new("make a word cloud", 5));
        assert_eq!(r.hits[0].doc, 0);
    }

    #[test]
    fn synonyms_reach_tools_worded_differently_but_rank_below_exact_words() {
        let docs = [
            doc("fs.write_file", "write_file", "Write content to a file"),
            doc("fs.read_file", "read_file", "Read a file"),
            doc("notes.save_note", "save_note", "Save a note"),
        ];
        let index = SearchIndex::build(&docs);
        // "store" reaches write_file through its synonym group, ahead of read_file.
        let r = index.search(&Query::new("store the file", 5));
        assert_eq!(r.hits[0].doc, 0);
        // An exact word still beats a synonym of it.
        let r = index.search(&Query::new("save", 5));
        assert_eq!(r.hits[0].doc, 2);
        assert_eq!(r.hits[1].doc, 0);
        let off = SearchIndex::build_with(
            &docs,
            Bm25fConfig {
                synonym_weight: 0.0,
                ..Bm25fConfig::default()
            },
        );
        assert_eq!(off.search(&Query::new("save", 5)).total, 1);
    }

    #[test]
    fn file_paths_in_a_query_point_at_file_and_format_tools() {
        let index = SearchIndex::build(&[
            doc("fs.write_file", "write_file", "Write content to a file"),
            doc(
                "md.to_html",
                "markdown_to_html",
                "Convert markdown text to HTML",
            ),
            doc("web.root", "root_page", "Open the root page of a site"),
        ]);
        let r = index.search(&Query::new("store it at /root/out/notes.md", 5));
        assert_eq!(r.hits[0].doc, 0);
        // Folder words count less than the format the extension names.
        let pos = |d| r.hits.iter().position(|h| h.doc == d).unwrap();
        assert!(pos(1) < pos(2));
    }

    #[test]
    fn namespace_max_pooling_lifts_siblings_of_the_best_match() {
        let docs = [
            doc(
                "maps.geocode",
                "geocode",
                "Turn an address into coordinates",
            ),
            doc("maps.parking", "find_parking", "Find parking near a place"),
            doc(
                "cars.park",
                "park_assist",
                "Assist with parking a car and coordinates",
            ),
        ];
        let q = Query::new("parking near the address", 5);
        let plain = SearchIndex::build_with(
            &docs,
            Bm25fConfig {
                namespace_weight: 0.0,
                ..Bm25fConfig::default()
            },
        );
        let pooled = SearchIndex::build(&docs);
        let score = |index: &SearchIndex, d: usize| {
            index
                .search(&q)
                .hits
                .iter()
                .find(|h| h.doc == d)
                .unwrap()
                .score
        };
        // Every tool gains its namespace's best score times the weight.
        let w = Bm25fConfig::default().namespace_weight;
        let best_maps = score(&plain, 0).max(score(&plain, 1));
        assert!((score(&pooled, 0) - score(&plain, 0) - w * best_maps).abs() < 1e-4);
        assert!((score(&pooled, 2) - score(&plain, 2) * (1.0 + w)).abs() < 1e-4);
    }

    /// A route planner and a geocoder (`maps`) and a parking assistant (`cars`).
    fn trip_tools() -> Vec<SearchDoc> {
        vec![
            doc(
                "maps.route",
                "plan_route",
                "Plan a driving route between two places",
            ),
            doc(
                "maps.geocode",
                "geocode",
                "Turn an address into coordinates",
            ),
            doc(
                "cars.park",
                "park_assist",
                "Assist with parking a car near a place",
            ),
        ]
    }

    #[test]
    fn a_text_scored_on_given_documents_scores_as_its_search_does() {
        let mut docs = trip_tools();
        docs.push(doc("mail.send", "send", "Send an email"));
        let index = SearchIndex::build_with(
            &docs,
            Bm25fConfig {
                namespace_weight: 0.0,
                ..Bm25fConfig::default()
            },
        );
        let text = "a driving route to a parking place";
        let searched = index.search(&Query::new(text, 10)).hits;
        let scored = index.score_docs(text, &[3, 2, 1, 0]);
        assert_eq!(scored[0], 0.0, "no word of the text: nothing");
        for hit in &searched {
            let at = 3 - hit.doc;
            assert!(
                (scored[at] - hit.score).abs() < 1e-5,
                "{hit:?}: {}",
                scored[at]
            );
        }
        assert!(searched.len() >= 2);
    }

    #[test]
    fn in_a_small_catalog_a_word_most_apis_have_counts_for_less_than_a_rare_one() {
        // `get` is in one tool's name here, as rare in this catalog as `order`; across APIs,
        // most have it. With the background, the order history wins "get the orders".
        let mut docs = trip_tools();
        docs.push(doc("agents.get", "Get Agent", "One agent's definition."));
        docs.push(doc(
            "shop.history",
            "Purchase History",
            "Every order a customer placed, with dates and totals.",
        ));
        let first = |background_docs| {
            let config = Bm25fConfig {
                background_docs,
                ..Bm25fConfig::default()
            };
            let index = SearchIndex::build_with(&docs, config);
            index.search(&Query::new("get the orders", 5)).hits[0].doc
        };
        assert_eq!(first(0.0), 3, "the catalog's own counts alone");
        assert_eq!(first(Bm25fConfig::default().background_docs), 4);
        // In a large catalog a word's own count outweighs the background's: `get`, in one tool
        // of ten among twenty thousand, is as telling with it as without.
        let mut large = docs.clone();
        large.extend((0..20_000).map(|i| match i % 10 {
            0 => doc(&format!("n{i}.get"), "Get Item", "An item."),
            _ => doc(&format!("n{i}.fetch"), "Fetch Thing", "A thing."),
        }));
        let idf = |background_docs| {
            let config = Bm25fConfig {
                background_docs,
                ..Bm25fConfig::default()
            };
            let index = SearchIndex::build_with(&large, config);
            index.idf[index.vocab["get"] as usize]
        };
        let (with, without) = (idf(Bm25fConfig::default().background_docs), idf(0.0));
        assert!((with - without).abs() < 0.01 * without, "{with} {without}");
    }

    #[test]
    fn a_namespace_that_matches_worse_loses_the_gap_and_one_shared_by_all_changes_nothing() {
        let mut docs = trip_tools();
        docs.push(doc("cars.rent", "rent", "Rent a car"));
        docs.push(doc("mail.send", "send", "Send an email about a place"));
        let index = SearchIndex::build(&docs);
        let text = "a driving route to a parking place";
        let hits = index.search(&Query::new(text, 10)).hits;
        let relative = index.namespace_relative(text, &hits);
        let own = index.score_docs(text, &[0, 1, 2, 3, 4]);
        let score = |d: usize| relative.iter().find(|h| h.doc == d).map(|h| h.score);
        // maps matches best (its route tool); cars loses half the gap to it; mail, a namespace
        // of one tool, keeps its words' score.
        let gap = own[0].max(own[1]) - own[2].max(own[3]);
        assert!(own[0] > own[2] && gap > 0.0, "{own:?}");
        assert_eq!(score(0), Some(own[0]));
        assert_eq!(score(4), Some(own[4]));
        let cars = score(2).unwrap_or(0.0);
        assert!(
            (cars - (own[2] - 0.5 * gap).max(0.0)).abs() < 1e-5,
            "{relative:?}"
        );
        assert_eq!(relative[0].doc, 0);

        // Under one namespace the words' own scores are what a fusion sees, where a search
        // adds half the best score to every candidate.
        let one: Vec<SearchDoc> = docs
            .iter()
            .map(|d| SearchDoc {
                path: format!("all.{}", d.path.replace('.', "_")),
                ..d.clone()
            })
            .collect();
        let index = SearchIndex::build(&one);
        let hits = index.search(&Query::new(text, 10)).hits;
        let relative = index.namespace_relative(text, &hits);
        let docs: Vec<usize> = hits.iter().map(|h| h.doc).collect();
        let own = index.score_docs(text, &docs);
        assert_eq!(relative.len(), hits.len());
        for (hit, own) in relative.iter().zip(own) {
            assert_eq!(hit.score, own, "{relative:?}");
        }
        let (best, last) = (hits[0].score, hits[hits.len() - 1].score);
        assert!(last / best > relative[relative.len() - 1].score / relative[0].score);
    }

    #[test]
    fn zero_limit_still_counts() {
        let index = SearchIndex::build(&[doc("a.b", "B", "thing")]);
        let r = index.search(&Query::new("thing", 0));
        assert!(r.hits.is_empty());
        assert_eq!(r.total, 1);
    }
}
