//! The catalog: an immutable snapshot of every tool, swapped atomically when sources change.
//!
//! Readers take an `Arc<Catalog>` with [`SharedCatalog::load`] and keep a consistent view for as
//! long as they hold it; writers build a new catalog with [`CatalogBuilder`] and
//! [`SharedCatalog::store`] it. Compiled schema validators are created lazily, once per tool per
//! snapshot.
//!
//! Tool names are Title Case ("Create Issue"). A tool whose name is not
//! ([`crate::tool::is_title_case`]) is renamed with [`crate::tool::title_case`] when the
//! snapshot is built; [`Catalog::renamed`] lists every such rename with the tool's origin so
//! assembly can report it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use indexmap::IndexMap;

use crate::path::ToolPath;
use crate::plugin::Plugin;
use crate::schema::{CompiledSchema, SchemaError};
use crate::tool::{capitalize_words, is_title_case, title_case, Tool};

/// Why a catalog could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("duplicate tool path '{path}': defined by {first} and by {second}")]
    Duplicate {
        path: String,
        first: String,
        second: String,
    },
}

/// One tool in a snapshot, with its lazily compiled validators.
pub struct CatalogEntry {
    pub tool: Tool,
    input: OnceLock<Result<Arc<CompiledSchema>, SchemaError>>,
    output: OnceLock<Option<Result<Arc<CompiledSchema>, SchemaError>>>,
}

impl CatalogEntry {
    fn new(tool: Tool) -> Self {
        Self {
            tool,
            input: OnceLock::new(),
            output: OnceLock::new(),
        }
    }

    /// The compiled input schema (compiled on first use).
    pub fn input_validator(&self) -> Result<Arc<CompiledSchema>, SchemaError> {
        self.input
            .get_or_init(|| CompiledSchema::compile(&self.tool.def.input_schema).map(Arc::new))
            .clone()
    }

    /// The compiled output schema, if the tool declares one.
    pub fn output_validator(&self) -> Option<Result<Arc<CompiledSchema>, SchemaError>> {
        self.output
            .get_or_init(|| {
                self.tool
                    .def
                    .output_schema
                    .as_ref()
                    .map(|s| CompiledSchema::compile(s).map(Arc::new))
            })
            .clone()
    }
}

/// A tool whose name was not Title Case and was normalised when the catalog was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renamed {
    pub path: String,
    pub origin: String,
    pub from: String,
    pub to: String,
}

impl std::fmt::Display for Renamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tool '{}' from {}: name {:?} is not Title Case; using {:?}",
            self.path,
            origin_label(&self.origin),
            self.from,
            self.to
        )
    }
}

/// An immutable set of tools keyed by path, in insertion order.
#[derive(Default)]
pub struct Catalog {
    version: u64,
    entries: IndexMap<ToolPath, Arc<CatalogEntry>>,
    renamed: Vec<Renamed>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("version", &self.version)
            .field("tools", &self.entries.len())
            .finish()
    }
}

impl Catalog {
    /// Snapshot number; increases with every store into a [`SharedCatalog`].
    pub fn version(&self) -> u64 {
        self.version
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn get(&self, path: &str) -> Option<&Arc<CatalogEntry>> {
        self.entries.get(path)
    }
    /// The position of a tool in the snapshot (stable for this snapshot).
    pub fn index_of(&self, path: &str) -> Option<usize> {
        self.entries.get_index_of(path)
    }
    pub fn get_index(&self, i: usize) -> Option<&Arc<CatalogEntry>> {
        self.entries.get_index(i).map(|(_, e)| e)
    }
    pub fn iter(&self) -> impl Iterator<Item = &Arc<CatalogEntry>> {
        self.entries.values()
    }
    /// Tools whose names were normalised to Title Case when this snapshot was built.
    pub fn renamed(&self) -> &[Renamed] {
        &self.renamed
    }
    /// Tool counts per namespace, sorted by namespace, for the tools `keep` admits.
    pub fn namespaces(&self, mut keep: impl FnMut(&ToolPath) -> bool) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for p in self.entries.keys() {
            if keep(p) {
                *out.entry(p.namespace().to_string()).or_insert(0) += 1;
            }
        }
        out
    }
}

/// Collects plugins and tools, then checks for duplicates.
#[derive(Default)]
pub struct CatalogBuilder {
    tools: Vec<Tool>,
}

impl CatalogBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds every tool of a plugin; tools without an origin get `plugin:<id>`.
    pub fn add_plugin(&mut self, plugin: &Plugin) -> &mut Self {
        let origin = plugin.origin();
        for t in &plugin.tools {
            let mut t = t.clone();
            if t.def.origin.is_empty() {
                t.def.origin = origin.clone();
            }
            self.tools.push(t);
        }
        self
    }

    pub fn add_tool(&mut self, tool: Tool) -> &mut Self {
        self.tools.push(tool);
        self
    }

    pub fn add_tools(&mut self, tools: impl IntoIterator<Item = Tool>) -> &mut Self {
        self.tools.extend(tools);
        self
    }

    /// Builds the snapshot; two tools with one path is an error naming both origins. Names that
    /// are not Title Case are normalised (see [`Catalog::renamed`]).
    pub fn build(self) -> Result<Catalog, CatalogError> {
        let mut entries: IndexMap<ToolPath, Arc<CatalogEntry>> =
            IndexMap::with_capacity(self.tools.len());
        let mut renamed = Vec::new();
        for mut t in self.tools {
            if !is_title_case(&t.def.name) {
                let to = normalized_name(&t.def.name, &t.def.path);
                renamed.push(Renamed {
                    path: t.def.path.to_string(),
                    origin: t.def.origin.clone(),
                    from: std::mem::replace(&mut t.def.name, to.clone()),
                    to,
                });
            }
            if let Some(prev) = entries.get(&t.def.path) {
                return Err(CatalogError::Duplicate {
                    path: t.def.path.to_string(),
                    first: origin_label(&prev.tool.def.origin),
                    second: origin_label(&t.def.origin),
                });
            }
            entries.insert(t.def.path.clone(), Arc::new(CatalogEntry::new(t)));
        }
        Ok(Catalog {
            version: 0,
            entries,
            renamed,
        })
    }
}

/// A Title Case name for a tool: its words capitalised (human text keeps its letters, an
/// identifier is split into words), or words from its path when the name has none.
fn normalized_name(name: &str, path: &ToolPath) -> String {
    let words = name.trim();
    if words.contains(char::is_alphanumeric) {
        let from_name = if words.contains(char::is_whitespace) && !words.contains('_') {
            capitalize_words(words)
        } else {
            title_case(words)
        };
        if is_title_case(&from_name) {
            return from_name;
        }
        return title_case(words);
    }
    let rest: Vec<&str> = path.segments().skip(1).collect();
    title_case(&rest.join("_"))
}

fn origin_label(o: &str) -> String {
    if o.is_empty() {
        "an unnamed origin".to_string()
    } else {
        o.to_string()
    }
}

/// The current catalog, swapped atomically.
pub struct SharedCatalog {
    current: ArcSwap<Catalog>,
    next_version: AtomicU64,
    /// The newest version stored, for those who act on a change ([`SharedCatalog::subscribe`]).
    versions: tokio::sync::watch::Sender<u64>,
}

impl Default for SharedCatalog {
    fn default() -> Self {
        Self::new(Catalog::default())
    }
}

impl SharedCatalog {
    pub fn new(mut initial: Catalog) -> Self {
        initial.version = 1;
        Self {
            current: ArcSwap::from_pointee(initial),
            next_version: AtomicU64::new(2),
            versions: tokio::sync::watch::Sender::new(1),
        }
    }

    /// The version of each snapshot stored from now on (a receiver sees the newest; versions
    /// stored in a burst may be seen as one).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.versions.subscribe()
    }

    /// The current snapshot.
    pub fn load(&self) -> Arc<Catalog> {
        self.current.load_full()
    }

    /// Replaces the snapshot; returns its version.
    pub fn store(&self, mut catalog: Catalog) -> u64 {
        let v = self.next_version.fetch_add(1, Ordering::SeqCst);
        catalog.version = v;
        self.current.store(Arc::new(catalog));
        self.versions.send_replace(v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{ToolDef, ToolError};

    fn tool(path: &str, origin: &str) -> Tool {
        let mut def = ToolDef::new(ToolPath::parse(path).unwrap(), "T", "d");
        def.origin = origin.into();
        Tool::from_fn(def, |_c, _a| async {
            Err::<serde_json::Value, _>(ToolError::internal("x"))
        })
    }

    #[test]
    fn duplicate_paths_name_both_origins() {
        let mut b = CatalogBuilder::new();
        b.add_tool(tool("a.b", "source:one"))
            .add_tool(tool("a.b", "source:two"));
        let e = b.build().unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("a.b") && msg.contains("source:one") && msg.contains("source:two"),
            "{msg}"
        );
    }

    fn named(path: &str, name: &str, origin: &str) -> Tool {
        let mut t = tool(path, origin);
        t.def.name = name.into();
        t
    }

    #[test]
    fn names_are_normalised_to_title_case_and_reported() {
        let mut b = CatalogBuilder::new();
        b.add_tool(named("mem.read_file", "read file", "source:mem"))
            .add_tool(named("pets.list_pets", "listPets", "source:pets"))
            .add_tool(named("gh.issues.create", "", "source:gh"))
            .add_tool(named("ok.tool", "Already Fine", "plugin:ok"))
            .add_tool(named("gh.repos.get", "get GitHub repo", "source:gh"));
        let c = b.build().unwrap();
        let name = |p: &str| c.get(p).unwrap().tool.def.name.clone();
        assert_eq!(name("mem.read_file"), "Read File");
        assert_eq!(name("pets.list_pets"), "List Pets");
        assert_eq!(name("gh.issues.create"), "Issues Create");
        assert_eq!(name("ok.tool"), "Already Fine");
        assert_eq!(name("gh.repos.get"), "Get GitHub Repo");
        assert!(c.iter().all(|e| is_title_case(&e.tool.def.name)));
        let renamed = c.renamed();
        assert_eq!(renamed.len(), 4);
        let msg = renamed[0].to_string();
        assert!(
            msg.contains("mem.read_file")
                && msg.contains("source:mem")
                && msg.contains("\"read file\""),
            "{msg}"
        );
        assert_eq!(renamed[1].from, "listPets");
        assert_eq!(renamed[1].to, "List Pets");
    }

    #[test]
    fn swap_is_atomic_and_versioned() {
        let shared = SharedCatalog::default();
        let old = shared.load();
        assert_eq!(old.version(), 1);
        let mut b = CatalogBuilder::new();
        b.add_tool(tool("a.b", "x"));
        let v = shared.store(b.build().unwrap());
        assert_eq!(v, 2);
        assert!(old.get("a.b").is_none(), "old snapshot is unchanged");
        assert!(shared.load().get("a.b").is_some());
    }

    #[test]
    fn plugin_origin_is_filled_and_namespaces_counted() {
        let p = Plugin::new("tables", "Tables", "d")
            .with_tool(tool("tables.list", ""))
            .with_tool(tool("tables.rows.query", ""));
        let mut b = CatalogBuilder::new();
        b.add_plugin(&p)
            .add_tool(tool("github.issues.list", "source:github"));
        let c = b.build().unwrap();
        assert_eq!(
            c.get("tables.list").unwrap().tool.def.origin,
            "plugin:tables"
        );
        let ns = c.namespaces(|_| true);
        assert_eq!(ns.get("tables"), Some(&2));
        assert_eq!(ns.get("github"), Some(&1));
        let ns = c.namespaces(|p| p.namespace() != "github");
        assert!(!ns.contains_key("github"));
    }
}
