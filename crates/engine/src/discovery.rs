//! Discovery in the caller's view: listing, ranked search and compact descriptions.
//!
//! The search index is built lazily once per catalog snapshot and shared by every caller; the
//! caller's access is applied as a filter inside the ranking, so counts and hits only ever speak
//! of tools the caller may see.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolshed_core::{EntryKind, ToolDef};
use toolshed_search::Query;

use crate::{Caller, Engine, EngineError};

mod cache;
mod visibility;
pub(crate) use cache::SearchCache;
pub use cache::SearchState;

/// Runs model inference: on a multi-threaded tokio runtime the worker hands its other tasks
/// to the rest of the pool first (`block_in_place`), so a query embedding does not stall them.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
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
    /// Said while the ranking is by words only because the catalog's embeddings are still
    /// being computed ([`EMBEDDING_NOTE`]); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
}

/// [`SearchAnswer::note`] while the tools are being embedded: the ranking cannot yet find a
/// tool that a request describes in other words.
pub const EMBEDDING_NOTE: &str =
    "Ranked by words only for now: the tools' embeddings are still being computed.";

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

    /// Builds each new catalog snapshot's search indexes as soon as it is stored (and starts
    /// embedding its tools), off the async workers, so that neither the first search after a
    /// change nor `/healthz` pays for the build; for a serving process.
    pub fn spawn_search_warmer(&self) -> tokio::task::JoinHandle<()> {
        let engine = self.clone();
        let mut versions = self.inner.catalog.subscribe();
        tokio::spawn(async move {
            while versions.changed().await.is_ok() {
                let engine = engine.clone();
                if tokio::task::spawn_blocking(move || engine.warm_search())
                    .await
                    .is_err()
                {
                    tracing::warn!("building a new catalog's search index failed");
                }
            }
        })
    }

    /// Waits until search over the current snapshot ranks with embeddings too: `Ok(true)`
    /// when ready (or when no embedder is configured), `Ok(false)` on timeout, `Err` with the
    /// embedder's error when embedding failed (search then stays lexical).
    pub fn wait_semantic_search(&self, timeout: Duration) -> Result<bool, String> {
        let catalog = self.inner.catalog.load();
        self.inner.search.get(&catalog);
        self.inner.search.wait_semantic(catalog.version(), timeout)
    }

    /// Where search over the current snapshot stands: by words only, by words while the tools
    /// are being embedded (and how far that has got), or by words and meaning.
    pub fn search_state(&self) -> SearchState {
        let catalog = self.inner.catalog.load();
        let ranker = self.inner.search.get(&catalog);
        self.inner.search.state(&catalog, &ranker)
    }

    /// [`Engine::search_state`] without waiting for (or doing) the build of a new snapshot's
    /// indexes: `None` when the caller would have to build them.
    pub fn try_search_state(&self) -> Option<SearchState> {
        self.inner.search.try_state(&self.inner.catalog.load())
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
        let state = self.inner.search.state(&catalog, &ranker);
        let embedding = matches!(state, SearchState::Embedding { .. });
        SearchAnswer {
            total: result.total,
            hits,
            note: embedding.then(|| EMBEDDING_NOTE.to_string()),
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
