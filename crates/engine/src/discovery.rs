//! Discovery in the caller's view: listing, ranked search and compact descriptions.
//!
//! The search index is built lazily once per catalog snapshot and shared by every caller; the
//! caller's access is applied as a filter inside the ranking, so counts and hits only ever speak
//! of tools the caller may see.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolshed_core::{Catalog, ToolDef};
use toolshed_search::{param_docs_from_schema, Query, SearchDoc, SearchIndex};

use crate::{Caller, Engine, EngineError};

/// The search index of one catalog snapshot.
#[derive(Default)]
pub(crate) struct SearchCache {
    slot: Mutex<Option<(u64, Arc<SearchIndex>)>>,
}

impl SearchCache {
    fn get(&self, catalog: &Catalog) -> Arc<SearchIndex> {
        let mut slot = self.slot.lock();
        if let Some((v, idx)) = slot.as_ref() {
            if *v == catalog.version() {
                return idx.clone();
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
        let idx = Arc::new(SearchIndex::build(&docs));
        *slot = Some((catalog.version(), idx.clone()));
        idx
    }
}

/// One search hit, compact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    pub path: String,
    pub name: String,
    pub summary: String,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub destructive: bool,
}

/// A ranked answer: hits plus how many tools matched in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchAnswer {
    pub total: usize,
    pub hits: Vec<SearchHit>,
}

/// What `read_tool` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// Summary budget in width units: an ASCII character counts 1, any other character 2 (they cost
/// about a token each).
const SUMMARY_WIDTH: usize = 72;

fn one_line(s: &str) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let first_sentence = match line.find(". ") {
        Some(i) if i > 20 => &line[..=i],
        _ => line,
    };
    let mut width = 0;
    let mut out = String::new();
    for c in first_sentence.chars() {
        width += if c.is_ascii() { 1 } else { 2 };
        if width > SUMMARY_WIDTH - 1 {
            out.push('…');
            return out;
        }
        out.push(c);
    }
    out
}

impl Engine {
    /// The tool definitions the caller may see, in catalog order.
    pub fn list_tools(&self, caller: &Caller) -> Vec<ToolDef> {
        self.inner
            .catalog
            .load()
            .iter()
            .filter(|e| caller.allows(e.tool.def.path.as_str()))
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

    /// Builds the search index of the current snapshot now rather than on the first search.
    pub fn warm_search(&self) {
        let catalog = self.inner.catalog.load();
        self.inner.search.get(&catalog);
    }

    /// Ranked search in the caller's view.
    pub fn search(
        &self,
        caller: &Caller,
        text: &str,
        limit: usize,
        namespace: Option<&str>,
    ) -> SearchAnswer {
        let catalog = self.inner.catalog.load();
        let index = self.inner.search.get(&catalog);
        let filter = |i: usize| {
            caller.access.is_all()
                || catalog
                    .get_index(i)
                    .is_some_and(|e| caller.allows(e.tool.def.path.as_str()))
        };
        let result = index.search(&Query {
            text,
            limit: limit.clamp(1, 100),
            namespace,
            filter: Some(&filter),
        });
        let hits = result
            .hits
            .iter()
            .filter_map(|h| catalog.get_index(h.doc))
            .map(|e| {
                let d = &e.tool.def;
                SearchHit {
                    path: d.path.to_string(),
                    name: d.name.clone(),
                    summary: one_line(&d.description),
                    destructive: d.annotations.destructive,
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
    use super::one_line;

    #[test]
    fn summaries_are_one_short_line() {
        assert_eq!(one_line("\n  Lists pets.\nMore text"), "Lists pets.");
        let long = "word ".repeat(60);
        assert!(one_line(&long).chars().count() <= 72);
        let wide = "搜索".repeat(60);
        assert!(one_line(&wide).chars().count() <= 37);
        assert_eq!(
            one_line("Creates an issue in a repository. Requires push access."),
            "Creates an issue in a repository."
        );
    }
}
