//! Repeated queries cost nothing: [`CachedEmbedder`] wraps an embedder and keeps the vectors
//! of the last queries it embedded ([`TextEmbedder::embed_query_clauses`], what a search asks
//! for; tool texts and single query vectors pass through), so an agent that searches again
//! with the same words skips the model. Queries are kept by what the model reads of them
//! ([`TextEmbedder::query_key`]): a request repeated with other amounts or dates is served too.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::hybrid::{EmbedError, QueryVectors, TextEmbedder};

/// Texts kept by default.
pub const DEFAULT_QUERY_CACHE: usize = 1024;
/// Longer texts are not kept (they are rarely repeated and would crowd the cache).
pub const MAX_CACHED_TEXT: usize = 1024;

/// An embedder that remembers the vectors of its last [`DEFAULT_QUERY_CACHE`] queries.
#[derive(Debug)]
pub struct CachedEmbedder {
    inner: Arc<dyn TextEmbedder>,
    capacity: usize,
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    vectors: HashMap<String, Arc<QueryVectors>>,
    /// Insertion order, oldest first, for eviction.
    order: VecDeque<String>,
}

impl CachedEmbedder {
    /// Wraps `inner`, keeping at most `capacity` texts (0 keeps none).
    pub fn new(inner: Arc<dyn TextEmbedder>, capacity: usize) -> Self {
        Self {
            inner,
            capacity,
            kept: Mutex::default(),
        }
    }

    fn lookup(&self, text: &str) -> Option<Arc<QueryVectors>> {
        self.kept.lock().ok()?.vectors.get(text).cloned()
    }

    fn keep(&self, text: &str, vectors: &QueryVectors) {
        let Ok(mut k) = self.kept.lock() else {
            return;
        };
        if k.vectors.contains_key(text) {
            return;
        }
        while k.order.len() >= self.capacity {
            match k.order.pop_front() {
                Some(old) => {
                    k.vectors.remove(&old);
                }
                None => return,
            }
        }
        k.order.push_back(text.to_string());
        k.vectors
            .insert(text.to_string(), Arc::new(vectors.clone()));
    }
}

impl TextEmbedder for CachedEmbedder {
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn model_id(&self) -> String {
        self.inner.model_id()
    }

    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError> {
        self.inner.embed_texts(texts)
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.inner.embed_query(text)
    }

    fn query_key<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        self.inner.query_key(text)
    }

    fn hold_for_search(&self) -> Option<crate::hybrid::SearchHold<'_>> {
        self.inner.hold_for_search()
    }

    /// Keyed by what the model reads ([`TextEmbedder::query_key`]), so requests that differ only
    /// in the values they carry share one entry.
    fn embed_query_clauses(&self, text: &str) -> Result<QueryVectors, EmbedError> {
        if self.capacity == 0 || text.len() > MAX_CACHED_TEXT {
            return self.inner.embed_query_clauses(text);
        }
        let key = self.inner.query_key(text);
        if let Some(v) = self.lookup(&key) {
            return Ok(QueryVectors::clone(&v));
        }
        let v = self.inner.embed_query_clauses(text)?;
        self.keep(&key, &v);
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    impl TextEmbedder for Counting {
        fn dim(&self) -> usize {
            1
        }
        fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|t| t.len() as f32).collect())
        }
    }

    /// Gives every request two clauses.
    #[derive(Debug)]
    struct Clausing;

    impl TextEmbedder for Clausing {
        fn dim(&self) -> usize {
            1
        }
        fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError> {
            Ok(texts.iter().map(|t| t.len() as f32).collect())
        }
        fn embed_query_clauses(&self, text: &str) -> Result<QueryVectors, EmbedError> {
            Ok(QueryVectors {
                whole: vec![text.len() as f32],
                clauses: vec![vec![1.0], vec![2.0]],
            })
        }
    }

    /// Reads no digit of a query.
    #[derive(Debug, Default)]
    struct Wordy(AtomicUsize);

    impl TextEmbedder for Wordy {
        fn dim(&self) -> usize {
            1
        }
        fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, EmbedError> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|t| t.len() as f32).collect())
        }
        fn query_key<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
            text.replace(|c: char| c.is_ascii_digit(), "").into()
        }
    }

    #[test]
    fn a_request_with_other_values_is_served_from_the_cache() {
        let inner = Arc::new(Wordy::default());
        let c = CachedEmbedder::new(inner.clone(), 4);
        let first = c.embed_query_clauses("book 2 rooms").unwrap();
        assert_eq!(c.embed_query_clauses("book 3 rooms").unwrap(), first);
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
        c.embed_query_clauses("book 3 suites").unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_kept_request_keeps_its_clauses() {
        let c = CachedEmbedder::new(Arc::new(Clausing), 4);
        let first = c
            .embed_query_clauses("find a flight, book a hotel")
            .unwrap();
        assert_eq!(first.clauses.len(), 2);
        assert_eq!(
            c.embed_query_clauses("find a flight, book a hotel")
                .unwrap(),
            first
        );
    }

    #[test]
    fn queries_are_kept_texts_pass_through_and_the_oldest_go_first() {
        let inner = Arc::new(Counting::default());
        let c = CachedEmbedder::new(inner.clone(), 2);
        assert_eq!(c.embed_query_clauses("ab").unwrap().whole, [2.0]);
        assert_eq!(c.embed_query_clauses("ab").unwrap().whole, [2.0]);
        assert_eq!(inner.0.load(Ordering::SeqCst), 1, "the second was kept");
        // Tool texts (batches or one) always reach the model and are not kept.
        c.embed_texts(&["x", "yy"]).unwrap();
        c.embed_texts(&["x", "yy"]).unwrap();
        c.embed_text("ab").unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 6);
        // Two more queries: "ab" is evicted.
        c.embed_query_clauses("c").unwrap();
        c.embed_query_clauses("dd").unwrap();
        c.embed_query_clauses("ab").unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 9);
        // A long query is never kept.
        let long = "z".repeat(MAX_CACHED_TEXT + 1);
        c.embed_query_clauses(&long).unwrap();
        c.embed_query_clauses(&long).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 11);
    }
}
