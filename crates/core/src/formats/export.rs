//! The catalog written as tool definitions of another format: MCP `tools/list` entries, OpenAI
//! function tools, Anthropic tools.
//!
//! | format | name grammar | carries |
//! |---|---|---|
//! | `mcp` | `[A-Za-z0-9_.-]{1,128}` | name, title, description, input and output schemas, annotations |
//! | `openai` | `^[a-zA-Z0-9_-]{1,64}$` | name, description, parameters |
//! | `anthropic` | `^[a-zA-Z0-9_-]{1,64}$` | name, description, input_schema |
//!
//! Names are the tool path with `__` for each dot (`tables.rows.query` → `tables__rows__query`,
//! as MCP direct mode names tools). A name longer than the format allows, or one that two paths
//! would share, keeps its first characters and ends in `_` and eight hex digits of a hash of the
//! whole path, so every name maps back to one path ([`exported_path`]). What a format cannot
//! carry is left out: output schemas and annotations (read-only, destructive, idempotent) in
//! OpenAI and Anthropic definitions. A destructive tool's description says so in those formats,
//! since that is what a model reads.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::tool::ToolDef;

/// A format tools can be exported in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    Mcp,
    Openai,
    Anthropic,
}

impl ExportFormat {
    pub const ALL: [Self; 3] = [Self::Mcp, Self::Openai, Self::Anthropic];

    /// Reads a format name; the error lists the known ones.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mcp" => Ok(Self::Mcp),
            "openai" => Ok(Self::Openai),
            "anthropic" => Ok(Self::Anthropic),
            other => Err(format!(
                "unknown format '{other}': use mcp, openai or anthropic"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mcp => "mcp",
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
        }
    }

    /// The longest tool name the format accepts.
    pub fn max_name_len(self) -> usize {
        match self {
            Self::Mcp => 128,
            Self::Openai | Self::Anthropic => 64,
        }
    }
}

/// A path's name in the format before length and collisions are handled.
fn plain_name(path: &str) -> String {
    path.replace('.', "__")
}

/// FNV-1a, 64 bits: stable across versions and platforms, so exported names stay the same.
fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The name with a hash of the path, within `max` bytes.
fn hashed_name(path: &str, max: usize) -> String {
    let plain = plain_name(path);
    let keep = max.saturating_sub(9).min(plain.len());
    format!("{}_{:08x}", &plain[..keep], fnv1a(path) as u32)
}

/// The exported name of each path (in the same order), unique within the list.
pub fn export_names(paths: &[&str], format: ExportFormat) -> Vec<String> {
    let max = format.max_name_len();
    let mut uses: HashMap<String, usize> = HashMap::new();
    for p in paths {
        *uses.entry(plain_name(p)).or_default() += 1;
    }
    paths
        .iter()
        .map(|p| {
            let plain = plain_name(p);
            if plain.len() > max || uses[&plain] > 1 {
                hashed_name(p, max)
            } else {
                plain
            }
        })
        .collect()
}

/// The path an exported name stands for, among the paths it was exported with.
pub fn exported_path<'a>(name: &str, paths: &[&'a str], format: ExportFormat) -> Option<&'a str> {
    export_names(paths, format)
        .iter()
        .position(|n| n == name)
        .map(|i| paths[i])
}

/// The definitions in `format`, in the order given.
pub fn export(defs: &[ToolDef], format: ExportFormat) -> Vec<Value> {
    let paths: Vec<&str> = defs.iter().map(|d| d.path.as_str()).collect();
    export_names(&paths, format)
        .into_iter()
        .zip(defs)
        .map(|(name, d)| definition(d, name, format))
        .collect()
}

/// One tool's definition in `format` under `name` (from [`export_names`]).
pub fn definition(d: &ToolDef, name: String, format: ExportFormat) -> Value {
    match format {
        ExportFormat::Mcp => {
            let mut v = json!({
                "name": name,
                "title": d.name,
                "description": d.description,
                "inputSchema": d.input_schema,
                "annotations": {
                    "title": d.name,
                    "readOnlyHint": d.annotations.read_only,
                    "destructiveHint": d.annotations.destructive,
                    "idempotentHint": d.annotations.idempotent,
                },
            });
            if let Some(out) = &d.output_schema {
                v["outputSchema"] = out.clone();
            }
            v
        }
        ExportFormat::Openai => json!({
            "type": "function",
            "function": {
                "name": name,
                "description": model_description(d),
                "parameters": d.input_schema,
            },
        }),
        ExportFormat::Anthropic => json!({
            "name": name,
            "description": model_description(d),
            "input_schema": d.input_schema,
        }),
    }
}

/// The description, saying what annotations would have said where they cannot be carried.
fn model_description(d: &ToolDef) -> String {
    if d.annotations.destructive && !d.annotations.read_only {
        format!("{} [destructive]", d.description)
    } else {
        d.description.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::parse_client_tools;
    use crate::path::ToolPath;
    use crate::tool::Annotations;

    fn def(path: &str) -> ToolDef {
        let mut d = ToolDef::new(
            ToolPath::parse(path).unwrap(),
            "Query Rows",
            "Rows of a table.",
        );
        d.input_schema = json!({"type": "object", "properties": {"table": {"type": "string"}}, "required": ["table"]});
        d.output_schema = Some(json!({"type": "array"}));
        d.annotations = Annotations::DESTRUCTIVE;
        d
    }

    fn grammar_ok(name: &str, format: ExportFormat) -> bool {
        !name.is_empty()
            && name.len() <= format.max_name_len()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_fit_each_grammar_and_map_back() {
        let long = format!("svc.{}", "very_long_segment_".repeat(8) + "end");
        let paths = vec!["tables.rows.query", long.as_str(), "a.b__c", "a__b.c"];
        for f in ExportFormat::ALL {
            let names = export_names(&paths, f);
            assert!(names.iter().all(|n| grammar_ok(n, f)), "{names:?}");
            assert_eq!(names[0], "tables__rows__query");
            // Two paths that would share a name each get their own.
            assert_ne!(names[2], names[3]);
            for (i, n) in names.iter().enumerate() {
                assert_eq!(exported_path(n, &paths, f), Some(paths[i]), "{n}");
            }
        }
        let openai = export_names(&paths, ExportFormat::Openai);
        assert_eq!(openai[1].len(), 64);
        assert!(openai[1].starts_with("svc__very_long"));
        // Stable: the same path always gets the same name.
        assert_eq!(openai, export_names(&paths, ExportFormat::Openai));
    }

    #[test]
    fn each_format_carries_what_it_can() {
        let d = def("tables.rows.query");
        let mcp = &export(std::slice::from_ref(&d), ExportFormat::Mcp)[0];
        assert_eq!(mcp["outputSchema"], json!({"type": "array"}));
        assert_eq!(mcp["annotations"]["destructiveHint"], true);
        let openai = &export(std::slice::from_ref(&d), ExportFormat::Openai)[0];
        assert_eq!(openai["function"]["parameters"], d.input_schema);
        assert!(openai["function"]["description"]
            .as_str()
            .unwrap()
            .ends_with("[destructive]"));
        let anthropic = &export(std::slice::from_ref(&d), ExportFormat::Anthropic)[0];
        assert_eq!(anthropic["input_schema"], d.input_schema);
        assert!(anthropic.get("annotations").is_none());
    }

    #[test]
    fn exported_definitions_declare_back_as_the_same_client_tools() {
        let defs = vec![def("tables.rows.query"), def("github.issues.create")];
        for f in ExportFormat::ALL {
            let exported = export(&defs, f);
            let read = parse_client_tools(&exported).unwrap();
            for (t, d) in read.iter().zip(&defs) {
                assert_eq!(t.read_as, f.as_str());
                assert_eq!(t.input_schema, d.input_schema, "{f:?}");
                assert_eq!(t.name, plain_name(d.path.as_str()));
            }
            if f == ExportFormat::Mcp {
                assert_eq!(read[0].output_schema, defs[0].output_schema);
            }
        }
    }

    #[test]
    fn unknown_formats_are_named() {
        assert_eq!(ExportFormat::parse("OpenAI"), Ok(ExportFormat::Openai));
        let e = ExportFormat::parse("gemini").unwrap_err();
        assert!(e.contains("gemini") && e.contains("anthropic"), "{e}");
    }
}
