//! Finding tools: a ranked, filterable search over a tool catalog.
//!
//! Build a [`SearchIndex`] once from [`SearchDoc`]s (one per tool; a doc's id is
//! its position in the slice) and query it with [`Query`]. Ranking is BM25F over
//! the path segments, name, description and parameter names and descriptions,
//! with an identifier-aware tokenizer ([`tokenize`]) and a light English stemmer
//! ([`stem`]). A ranked tool is followed by the tools its parameters say their values come
//! from ([`prerequisites`]). [`param_docs_from_schema`] extracts parameters from a JSON Schema.
//!
//! ```
//! use toolshed_search::{Query, SearchDoc, SearchIndex};
//! let docs = vec![SearchDoc {
//!     path: "github.issues.create".into(),
//!     name: "Create Issue".into(),
//!     description: "Open a new issue in a repository.".into(),
//!     params: vec![],
//! }];
//! let index = SearchIndex::build(&docs);
//! let result = index.search(&Query::new("open a github issue", 10));
//! assert_eq!(result.hits[0].doc, 0);
//! ```

pub mod background;
pub mod boilerplate;
pub mod clauses;
mod cpu;
pub mod expand;
pub mod hybrid;
pub mod index;
pub mod params;
mod parts;
pub mod prerequisites;
pub mod query_cache;
pub mod scan;
#[cfg(feature = "semantic")]
pub mod semantic;
pub mod sketch;
pub mod stem;
pub mod tokenize;
pub mod vectors;

pub use hybrid::{
    EmbedError, Fusion, HeldForSearch, HybridConfig, HybridIndex, QueryVectors, SearchHold,
    TextEmbedder,
};
pub use index::{
    Bm25fConfig, FieldConfig, Hit, ParamDoc, Query, SearchDoc, SearchIndex, SearchResult,
};
pub use params::param_docs_from_schema;
pub use prerequisites::Prerequisites;
pub use query_cache::CachedEmbedder;
#[cfg(feature = "semantic")]
pub use semantic::{Embedder, SemanticError};
