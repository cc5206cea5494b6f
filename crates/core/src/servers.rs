//! Virtual MCP servers: named views of the catalog that MCP clients connect to as if they were
//! the servers behind them (`/mcp/servers/{name}`, `toolshed serve --stdio --server NAME`).
//!
//! A [`ServerDef`] says which tools a server exposes (dot-globs over catalog paths) and under
//! which names:
//!
//! - `catalog` (the default): each tool under its catalog path (`github.issues.create`);
//! - `original`: each tool under the name its upstream gave it (`create_issue`), with the
//!   upstream's own title, icons, annotations and `_meta`. Allowed only when every pattern lies
//!   under one source (its first segment is the same literal in every pattern), so two tools
//!   can never answer to one name.
//!
//! What the server exposes is always narrowed by the caller's own access: a virtual server
//! never shows a principal a tool its roles do not allow, and every call still takes the
//! engine's one path (validation, call rules, approval, audit).

use serde::{Deserialize, Serialize};

use crate::policy::{Access, Pattern};
use crate::tool::ToolDef;

/// Longest server name.
pub const MAX_SERVER_NAME: usize = 64;
/// Longest description.
pub const MAX_SERVER_DESCRIPTION: usize = 4096;
/// Most patterns one server may list.
pub const MAX_SERVER_PATTERNS: usize = 256;

/// Under which names a virtual server lists its tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerNames {
    /// Catalog paths (`github.issues.create`).
    #[default]
    Catalog,
    /// The upstream's own names; one source only.
    Original,
}

/// A virtual server as configured (`[[servers]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerDef {
    /// The URL segment: `/mcp/servers/{name}`.
    pub name: String,
    /// Shown to clients as the server's instructions.
    #[serde(default)]
    pub description: String,
    /// Dot-globs over catalog paths: the tools the server exposes.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Dot-globs over the catalog paths of upstream resources the server exposes.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Dot-globs over the catalog paths of upstream prompts the server exposes.
    #[serde(default)]
    pub prompts: Vec<String>,
    /// `catalog` or `original`.
    #[serde(default)]
    pub names: ServerNames,
}

/// Why a server definition is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerError {
    #[error("server name '{name}' is not usable: {reason}")]
    Name { name: String, reason: String },
    #[error("server '{server}': {reason}")]
    Invalid { server: String, reason: String },
}

/// A checked [`ServerDef`] with its compiled patterns.
#[derive(Debug, Clone)]
pub struct VirtualServer {
    def: ServerDef,
    tools: Access,
    resources: Access,
    prompts: Access,
    /// With original names: the one source every pattern lies under.
    source: Option<String>,
}

impl VirtualServer {
    /// Checks a definition: a URL-safe name, a bounded description, at least one valid
    /// pattern, and one source for original names.
    pub fn new(def: ServerDef) -> Result<Self, ServerError> {
        check_name(&def.name)?;
        let invalid = |reason: String| ServerError::Invalid {
            server: def.name.clone(),
            reason,
        };
        if def.description.len() > MAX_SERVER_DESCRIPTION {
            return Err(invalid(format!(
                "description is {} bytes; at most {MAX_SERVER_DESCRIPTION} are allowed",
                def.description.len()
            )));
        }
        if def.tools.is_empty() && def.resources.is_empty() && def.prompts.is_empty() {
            return Err(invalid(
                "tools, resources and prompts are all empty: list the dot-globs of what it exposes, e.g. tools = [\"github.**\"]"
                    .into(),
            ));
        }
        let compile = |field: &str, list: &[String]| -> Result<Access, ServerError> {
            if list.len() > MAX_SERVER_PATTERNS {
                return Err(invalid(format!(
                    "{field} lists {} patterns; at most {MAX_SERVER_PATTERNS} are allowed",
                    list.len()
                )));
            }
            let mut patterns = Vec::with_capacity(list.len());
            for (i, text) in list.iter().enumerate() {
                let p = Pattern::parse(text).map_err(|e| invalid(format!("{field}[{i}]: {e}")))?;
                patterns.push(p);
            }
            Ok(Access::from_patterns(&patterns))
        };
        let tools = compile("tools", &def.tools)?;
        let resources = compile("resources", &def.resources)?;
        let prompts = compile("prompts", &def.prompts)?;
        let source = match def.names {
            ServerNames::Catalog => None,
            ServerNames::Original => {
                let all: Vec<String> = def
                    .tools
                    .iter()
                    .chain(&def.resources)
                    .chain(&def.prompts)
                    .cloned()
                    .collect();
                Some(one_source(&all).map_err(invalid)?)
            }
        };
        Ok(Self {
            tools,
            resources,
            prompts,
            def,
            source,
        })
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    pub fn def(&self) -> &ServerDef {
        &self.def
    }

    /// Whether the server exposes the tool at `path` (before the caller's own access).
    pub fn exposes(&self, path: &str) -> bool {
        !self.def.tools.is_empty() && self.tools.allows(path)
    }

    /// Whether the server exposes the resource at `path` (before the caller's own access).
    pub fn exposes_resource(&self, path: &str) -> bool {
        !self.def.resources.is_empty() && self.resources.allows(path)
    }

    /// Whether the server exposes the prompt at `path` (before the caller's own access).
    pub fn exposes_prompt(&self, path: &str) -> bool {
        !self.def.prompts.is_empty() && self.prompts.allows(path)
    }

    pub fn has_tools(&self) -> bool {
        !self.def.tools.is_empty()
    }

    pub fn has_resources(&self) -> bool {
        !self.def.resources.is_empty()
    }

    pub fn has_prompts(&self) -> bool {
        !self.def.prompts.is_empty()
    }

    /// The name a client sees for `tool`.
    pub fn name_of(&self, tool: &ToolDef) -> String {
        match &self.source {
            None => tool.path.as_str().to_string(),
            Some(source) => original_name(tool).unwrap_or_else(|| {
                let path = tool.path.as_str();
                path.strip_prefix(source.as_str())
                    .and_then(|rest| rest.strip_prefix('.'))
                    .unwrap_or(path)
                    .to_string()
            }),
        }
    }

    /// With original names, the source every tool comes from.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }
}

/// The upstream's own name of a tool, when it has one.
pub fn original_name(tool: &ToolDef) -> Option<String> {
    tool.native
        .as_ref()
        .and_then(|n| n.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_string)
}

/// Whether `uri` has the form of a URI template: its literal parts in order, each expression
/// (`{id}`, `{+path}`...) standing for at least one character.
pub fn uri_template_matches(template: &str, uri: &str) -> bool {
    let mut literals = Vec::new();
    let mut rest = template;
    loop {
        match rest.find('{') {
            None => {
                literals.push(rest);
                break;
            }
            Some(start) => {
                literals.push(&rest[..start]);
                let Some(end) = rest[start..].find('}') else {
                    return false;
                };
                rest = &rest[start + end + 1..];
            }
        }
    }
    if literals.len() == 1 {
        return uri == template;
    }
    let (first, last) = (literals[0], literals[literals.len() - 1]);
    let Some(body) = uri.strip_prefix(first) else {
        return false;
    };
    let Some(mut body) = body.strip_suffix(last) else {
        return false;
    };
    for lit in &literals[1..literals.len() - 1] {
        if lit.is_empty() {
            continue;
        }
        match body.get(1..).and_then(|b| b.find(lit)) {
            Some(pos) => body = &body[1 + pos + lit.len()..],
            None => return false,
        }
    }
    !body.is_empty()
}

fn check_name(name: &str) -> Result<(), ServerError> {
    let err = |reason: &str| ServerError::Name {
        name: name.chars().take(MAX_SERVER_NAME).collect(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(err("it is empty"));
    }
    if name.len() > MAX_SERVER_NAME {
        return Err(err("it is longer than 64 bytes"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        return Err(err("use lowercase letters, digits, '_' and '-'"));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(err("it must start with a letter or a digit"));
    }
    Ok(())
}

/// The first segment every pattern shares, literally (no wildcard), for original names.
fn one_source(patterns: &[String]) -> Result<String, String> {
    let mut source: Option<&str> = None;
    for p in patterns {
        let first = p.split('.').next().unwrap_or_default();
        if first.contains(['*', '?']) {
            return Err(format!(
                "names = \"original\" needs every pattern under one source, but '{p}' starts with a wildcard"
            ));
        }
        match source {
            None => source = Some(first),
            Some(s) if s == first => {}
            Some(s) => {
                return Err(format!(
                    "names = \"original\" needs every pattern under one source, but '{s}' and '{first}' are two: \
                     use names = \"catalog\" or one server per source"
                ))
            }
        }
    }
    Ok(source.unwrap_or_default().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::ToolPath;

    fn def(name: &str, tools: &[&str], names: ServerNames) -> ServerDef {
        ServerDef {
            name: name.into(),
            description: String::new(),
            tools: tools.iter().map(|s| s.to_string()).collect(),
            resources: vec![],
            prompts: vec![],
            names,
        }
    }

    fn tool(path: &str, native: Option<&str>) -> ToolDef {
        let mut d = ToolDef::new(ToolPath::parse(path).unwrap(), "T", "");
        d.native = native.map(|n| serde_json::json!({"name": n}));
        d
    }

    #[test]
    fn templates_match_uris_of_their_form() {
        assert!(uri_template_matches(
            "test://static/resource/{id}",
            "test://static/resource/7"
        ));
        assert!(!uri_template_matches(
            "test://static/resource/{id}",
            "test://static/resource/"
        ));
        assert!(!uri_template_matches(
            "test://static/resource/{id}",
            "file:///etc/passwd"
        ));
        assert!(uri_template_matches(
            "repo://{owner}/{name}/readme",
            "repo://a/b/readme"
        ));
        assert!(!uri_template_matches(
            "repo://{owner}/{name}/readme",
            "repo://a/b/license"
        ));
        assert!(uri_template_matches("plain://x", "plain://x"));
        assert!(!uri_template_matches("plain://x", "plain://y"));
    }

    #[test]
    fn catalog_names_are_paths_and_patterns_filter() {
        let s = VirtualServer::new(def(
            "dev",
            &["github.issues.*", "tables.**"],
            ServerNames::Catalog,
        ))
        .unwrap();
        assert!(s.exposes("github.issues.create"));
        assert!(s.exposes("tables.rows.query"));
        assert!(!s.exposes("github.repos.get"));
        assert_eq!(
            s.name_of(&tool("tables.rows.query", None)),
            "tables.rows.query"
        );
    }

    #[test]
    fn resources_and_prompts_have_their_own_patterns() {
        let mut d = def("docs", &[], ServerNames::Original);
        d.resources = vec!["docs.**".into()];
        d.prompts = vec!["docs.review_*".into()];
        let s = VirtualServer::new(d).unwrap();
        assert!(!s.has_tools() && s.has_resources() && s.has_prompts());
        assert!(!s.exposes("docs.handbook"));
        assert!(s.exposes_resource("docs.handbook"));
        assert!(s.exposes_prompt("docs.review_code"));
        assert!(!s.exposes_prompt("docs.handbook"));
    }

    #[test]
    fn original_names_come_from_the_upstream_or_lose_the_source_prefix() {
        let s = VirtualServer::new(def("mem", &["memory.**"], ServerNames::Original)).unwrap();
        assert_eq!(s.source(), Some("memory"));
        assert_eq!(
            s.name_of(&tool("memory.create_entities", Some("createEntities"))),
            "createEntities"
        );
        assert_eq!(s.name_of(&tool("memory.repos.get", None)), "repos.get");
    }

    #[test]
    fn bad_definitions_say_what_is_wrong() {
        let e = VirtualServer::new(def("Dev", &["a.*"], ServerNames::Catalog)).unwrap_err();
        assert!(e.to_string().contains("lowercase"), "{e}");
        let e = VirtualServer::new(def("", &["a.*"], ServerNames::Catalog)).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        let e = VirtualServer::new(def("dev", &[], ServerNames::Catalog)).unwrap_err();
        assert!(e.to_string().contains("all empty"), "{e}");
        let e = VirtualServer::new(def("dev", &["a.*", "B"], ServerNames::Catalog)).unwrap_err();
        assert!(e.to_string().contains("tools[1]"), "{e}");
        let e = VirtualServer::new(def("dev", &["a.*", "b.*"], ServerNames::Original)).unwrap_err();
        assert!(e.to_string().contains("'a' and 'b' are two"), "{e}");
        let e = VirtualServer::new(def("dev", &["**"], ServerNames::Original)).unwrap_err();
        assert!(e.to_string().contains("wildcard"), "{e}");
        let mut mixed = def("dev", &["a.*"], ServerNames::Original);
        mixed.prompts = vec!["b.*".into()];
        let e = VirtualServer::new(mixed).unwrap_err();
        assert!(e.to_string().contains("'a' and 'b' are two"), "{e}");
        let e = VirtualServer::new(def("../x", &["a.*"], ServerNames::Catalog)).unwrap_err();
        assert!(e.to_string().contains("'../x'"), "{e}");
    }
}
