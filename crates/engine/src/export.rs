//! The caller's view as tool definitions of another format ([`toolshed_core::formats::export`]),
//! for `GET /v1/tools?format=` and `toolshed export`, and the way back from an exported name to
//! the tool it stands for.

use serde_json::Value;
use toolshed_core::formats::export::{definition, export_names, exported_path, ExportFormat};
use toolshed_core::Pattern;

use crate::{Caller, Engine};

impl Engine {
    /// The tools of the caller's view (those matching `pattern`, when given) as definitions in
    /// `format`, ordered by path.
    pub fn export_tools(
        &self,
        caller: &Caller,
        format: ExportFormat,
        pattern: Option<&Pattern>,
    ) -> Vec<Value> {
        let mut defs = self.list_tools(caller);
        defs.sort_by(|a, b| a.path.cmp(&b.path));
        // Names are made unique over the whole view, so a pattern never changes one.
        let paths: Vec<&str> = defs.iter().map(|d| d.path.as_str()).collect();
        let names = export_names(&paths, format);
        names
            .into_iter()
            .zip(&defs)
            .filter(|(_, d)| pattern.is_none_or(|p| p.matches(d.path.as_str())))
            .map(|(name, d)| definition(d, name, format))
            .collect()
    }

    /// The path of the tool the caller's view exports as `name` in `format` (names are unique
    /// within the whole view, so this holds whatever pattern the export used).
    pub fn exported_path(
        &self,
        caller: &Caller,
        name: &str,
        format: ExportFormat,
    ) -> Option<String> {
        let defs = self.list_tools(caller);
        let mut paths: Vec<&str> = defs.iter().map(|d| d.path.as_str()).collect();
        paths.sort_unstable();
        exported_path(name, &paths, format).map(str::to_string)
    }

    /// The path a name of any exported format stands for in the caller's view.
    pub fn exported_name_path(&self, caller: &Caller, name: &str) -> Option<String> {
        [ExportFormat::Openai, ExportFormat::Mcp]
            .into_iter()
            .find_map(|f| self.exported_path(caller, name, f))
    }
}
