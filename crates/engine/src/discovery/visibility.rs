//! Which entries of one catalog snapshot a search may rank, read in the ranking's inner loops.
//!
//! A search tests its candidates against the caller's view ([`toolshed_search::Query::filter`]):
//! the lexical matches, and on a large catalog every vector its sketch scan reads (at 125,000
//! tools some 400,000 tests per search). Looking each entry up in the catalog reads its own
//! allocation, and a restricted caller's access matches its path against glob patterns; on all
//! of APIs.guru the entry lookups alone took a search from p50 7.8 to 12.6 ms
//! (docs/benchmarks.md). So a snapshot's ranker keeps each entry's kind in one array, and per
//! restricted access (by its tool patterns) the entries it admits as one bit each, made on that
//! access's first search of the snapshot: a test is then a byte and a bit.

use parking_lot::Mutex;
use std::sync::Arc;
use toolshed_core::{Access, Catalog, EntryKind};

/// Restricted accesses whose views a snapshot keeps (the most recently used).
const VIEWS_KEPT: usize = 32;

/// The kinds of a snapshot's entries and the views of the restricted accesses that searched it.
pub(crate) struct Visibility {
    kinds: Vec<EntryKind>,
    /// Per restricted access, its tool patterns and the entries it admits; most recent first.
    views: Mutex<Vec<(Vec<String>, Arc<Bits>)>>,
}

/// One bit per entry.
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    fn contains(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
    }
}

impl Visibility {
    /// The kinds of `catalog`'s entries, in the catalog's order (the search index's documents).
    pub(crate) fn of(catalog: &Catalog) -> Self {
        Self {
            kinds: catalog.iter().map(|e| e.tool.def.kind).collect(),
            views: Mutex::new(Vec::new()),
        }
    }

    /// The test of entry `i` for a search of `kind` by `access` over `catalog` (the snapshot
    /// this was made of).
    pub(crate) fn filter(
        &self,
        catalog: &Catalog,
        access: &Access,
        kind: EntryKind,
    ) -> impl Fn(usize) -> bool + Sync + '_ {
        let view = (!access.is_all()).then(|| self.view(catalog, access));
        move |i: usize| {
            self.kinds.get(i) == Some(&kind) && view.as_ref().is_none_or(|v| v.contains(i))
        }
    }

    /// The entries `access` admits, made on its first search of the snapshot.
    fn view(&self, catalog: &Catalog, access: &Access) -> Arc<Bits> {
        let patterns = access.patterns();
        {
            let mut views = self.views.lock();
            if let Some(at) = views.iter().position(|(p, _)| p.as_slice() == patterns) {
                let found = views.remove(at);
                let bits = found.1.clone();
                views.insert(0, found);
                return bits;
            }
        }
        // Made outside the lock: another access's search need not wait for these matches. Only
        // the snapshot's own entries are read: a view never reaches past the kinds it goes with.
        debug_assert_eq!(
            catalog.len(),
            self.kinds.len(),
            "a view of another snapshot"
        );
        let mut words = vec![0u64; self.kinds.len().div_ceil(64)];
        for (i, e) in catalog.iter().enumerate().take(self.kinds.len()) {
            if access.allows(e.tool.def.path.as_str()) {
                words[i / 64] |= 1 << (i % 64);
            }
        }
        let bits = Arc::new(Bits(words));
        let mut views = self.views.lock();
        views.retain(|(p, _)| p.as_slice() != patterns);
        views.insert(0, (patterns.to_vec(), bits.clone()));
        views.truncate(VIEWS_KEPT);
        bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolshed_core::{CatalogBuilder, Pattern, Tool, ToolDef, ToolPath};

    fn catalog() -> Catalog {
        let mut b = CatalogBuilder::new();
        for (path, kind) in [
            ("clock.current", EntryKind::Tool),
            ("sky.outlook", EntryKind::Tool),
            ("sky.page", EntryKind::Resource),
            ("hidden.hour", EntryKind::Tool),
        ] {
            let mut def = ToolDef::new(ToolPath::parse(path).unwrap(), path, "A tool.")
                .with_input(json!({"type": "object"}));
            def.kind = kind;
            b.add_tool(Tool::from_fn(def, |_ctx, _args| async { Ok(json!(null)) }));
        }
        b.build().unwrap()
    }

    fn access(patterns: &[&str]) -> Access {
        let patterns: Vec<Pattern> = patterns
            .iter()
            .map(|p| Pattern::parse(p).unwrap())
            .collect();
        Access::from_patterns(&patterns)
    }

    /// The entries `filter` admits, by path.
    fn seen(v: &Visibility, catalog: &Catalog, access: &Access, kind: EntryKind) -> Vec<String> {
        let filter = v.filter(catalog, access, kind);
        catalog
            .iter()
            .enumerate()
            .filter(|(i, _)| filter(*i))
            .map(|(_, e)| e.tool.def.path.to_string())
            .collect()
    }

    #[test]
    fn a_search_sees_its_kind_in_the_callers_view_and_views_are_kept_per_access() {
        let catalog = catalog();
        let v = Visibility::of(&catalog);
        let all = Access::all();
        let sky = access(&["sky.**"]);
        let clock = access(&["clock.**", "hidden.**"]);
        for _ in 0..2 {
            assert_eq!(
                seen(&v, &catalog, &all, EntryKind::Tool),
                ["clock.current", "sky.outlook", "hidden.hour"]
            );
            assert_eq!(seen(&v, &catalog, &all, EntryKind::Resource), ["sky.page"]);
            assert_eq!(seen(&v, &catalog, &sky, EntryKind::Tool), ["sky.outlook"]);
            assert_eq!(seen(&v, &catalog, &sky, EntryKind::Resource), ["sky.page"]);
            assert_eq!(
                seen(&v, &catalog, &clock, EntryKind::Tool),
                ["clock.current", "hidden.hour"]
            );
            assert!(seen(&v, &catalog, &clock, EntryKind::Resource).is_empty());
            assert!(seen(&v, &catalog, &Access::none(), EntryKind::Tool).is_empty());
            // An access with the same patterns shares the view; everything needs none.
            assert_eq!(
                seen(&v, &catalog, &access(&["sky.**"]), EntryKind::Tool),
                ["sky.outlook"]
            );
            assert_eq!(v.views.lock().len(), 3, "sky, clock and none");
        }
        // Past an entry the index does not hold, nothing is seen.
        assert!(!v.filter(&catalog, &all, EntryKind::Tool)(4));
        assert!(!v.filter(&catalog, &sky, EntryKind::Tool)(4));
    }

    #[test]
    fn the_views_kept_are_bounded_and_the_latest_still_answers() {
        let catalog = catalog();
        let v = Visibility::of(&catalog);
        for n in 0..VIEWS_KEPT + 8 {
            let a = access(&["sky.**", &format!("other{n}.**")]);
            assert_eq!(seen(&v, &catalog, &a, EntryKind::Tool), ["sky.outlook"]);
        }
        assert_eq!(v.views.lock().len(), VIEWS_KEPT);
        let clock = access(&["clock.**"]);
        assert_eq!(
            seen(&v, &catalog, &clock, EntryKind::Tool),
            ["clock.current"]
        );
        assert_eq!(v.views.lock().len(), VIEWS_KEPT);
        assert_eq!(v.views.lock()[0].0, ["clock.**"]);
    }

    #[test]
    fn bits_hold_what_was_set_and_nothing_past_the_end() {
        let bits = Bits(vec![0b101, 1 << 63]);
        assert!(bits.contains(0) && !bits.contains(1) && bits.contains(2));
        assert!(bits.contains(127) && !bits.contains(126));
        assert!(!bits.contains(128) && !bits.contains(usize::MAX));
    }
}
