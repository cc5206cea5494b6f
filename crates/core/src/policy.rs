//! Policy: roles hold dot-glob patterns over tool paths; principals hold roles; default deny.
//!
//! Pattern semantics (segments are separated by dots):
//! - `*` alone matches every path;
//! - `*` inside a pattern matches within exactly one segment (`github.issues.*`, `github.*_list`);
//! - `**` matches any number of segments (`github.**`).
//!
//! A principal's roles are compiled into one [`Access`] matcher when the policy is built, so a
//! check is one glob-set match. Faces must treat a tool outside the principal's access exactly like
//! a tool that does not exist.

use std::collections::HashMap;
use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

/// Why a pattern is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pattern '{pattern}': {reason}")]
pub struct PatternError {
    pub pattern: String,
    pub reason: String,
}

/// Why a policy is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("role '{role}': {source}")]
    Pattern { role: String, source: PatternError },
    #[error("principal '{principal}' names unknown role '{role}'")]
    UnknownRole { principal: String, role: String },
    #[error("role '{0}' is defined twice")]
    DuplicateRole(String),
}

/// One validated dot-glob pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let err = |reason: &str| PatternError {
            pattern: text.to_string(),
            reason: reason.to_string(),
        };
        if text.is_empty() {
            return Err(err("a pattern cannot be empty"));
        }
        if let Some(c) = text.chars().find(|c| {
            !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '*' | '?'))
        }) {
            return Err(err(&format!(
                "unexpected character {c:?}; use lowercase segments, '.', '*' and '**'"
            )));
        }
        for seg in text.split('.') {
            if seg.is_empty() {
                return Err(err("empty segment"));
            }
            if seg.contains("**") && seg != "**" {
                return Err(err("'**' must be a whole segment"));
            }
        }
        Ok(Self {
            text: text.to_string(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn matches_all(&self) -> bool {
        self.text == "*" || self.text == "**"
    }

    fn glob(&self) -> globset::Glob {
        // Paths never contain '/', so dots become the glob separator.
        GlobBuilder::new(&self.text.replace('.', "/"))
            .literal_separator(true)
            .build()
            .expect("validated pattern is a valid glob")
    }

    /// Does this single pattern match `path`?
    pub fn matches(&self, path: &str) -> bool {
        self.matches_all()
            || self
                .glob()
                .compile_matcher()
                .is_match(path.replace('.', "/"))
    }
}

/// A role: a named set of patterns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub patterns: Vec<String>,
}

/// Someone calling tools: an API key's owner over HTTP, or the configured local principal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub id: String,
    pub roles: Vec<String>,
}

/// What one principal may see and call. Cheap to clone.
#[derive(Clone, Default)]
pub struct Access {
    inner: Arc<AccessInner>,
}

#[derive(Default)]
struct AccessInner {
    all: bool,
    set: Option<GlobSet>,
    patterns: Vec<String>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("patterns", &self.inner.patterns)
            .finish()
    }
}

impl Access {
    /// Access to nothing (the default for unknown principals).
    pub fn none() -> Self {
        Self::default()
    }

    /// Access to everything.
    pub fn all() -> Self {
        Self::from_patterns(&[Pattern::parse("*").unwrap()])
    }

    /// Access to what any of `patterns` matches.
    pub fn from_patterns(patterns: &[Pattern]) -> Self {
        let all = patterns.iter().any(Pattern::matches_all);
        let set = if all || patterns.is_empty() {
            None
        } else {
            let mut b = GlobSetBuilder::new();
            for p in patterns {
                b.add(p.glob());
            }
            Some(b.build().expect("validated patterns build a glob set"))
        };
        Self {
            inner: Arc::new(AccessInner {
                all,
                set,
                patterns: patterns.iter().map(|p| p.text.clone()).collect(),
            }),
        }
    }

    /// May this principal see and call `path`?
    pub fn allows(&self, path: &str) -> bool {
        if self.inner.all {
            return true;
        }
        match &self.inner.set {
            Some(set) => {
                if path.contains('/') {
                    return false;
                }
                let mut buf = [0u8; 256];
                if path.len() <= buf.len() {
                    let b = &mut buf[..path.len()];
                    b.copy_from_slice(path.as_bytes());
                    for c in b.iter_mut() {
                        if *c == b'.' {
                            *c = b'/';
                        }
                    }
                    // Paths are ASCII, so this is valid UTF-8.
                    set.is_match(std::str::from_utf8(b).unwrap_or(""))
                } else {
                    set.is_match(path.replace('.', "/"))
                }
            }
            None => false,
        }
    }

    /// Whether this access admits every path.
    pub fn is_all(&self) -> bool {
        self.inner.all
    }

    /// The patterns this access was built from.
    pub fn patterns(&self) -> &[String] {
        &self.inner.patterns
    }
}

/// Roles and principals, compiled. Unknown principals get no access.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    roles: HashMap<String, Role>,
    access: HashMap<String, Access>,
}

impl Policy {
    pub fn new(roles: Vec<Role>, principals: Vec<Principal>) -> Result<Self, PolicyError> {
        let mut by_id: HashMap<String, (Role, Vec<Pattern>)> = HashMap::new();
        for r in roles {
            let mut compiled = Vec::with_capacity(r.patterns.len());
            for p in &r.patterns {
                compiled.push(Pattern::parse(p).map_err(|source| PolicyError::Pattern {
                    role: r.id.clone(),
                    source,
                })?);
            }
            if by_id.contains_key(&r.id) {
                return Err(PolicyError::DuplicateRole(r.id));
            }
            by_id.insert(r.id.clone(), (r, compiled));
        }
        let mut access = HashMap::new();
        for p in principals {
            let mut pats = Vec::new();
            for role in &p.roles {
                let (_, compiled) = by_id.get(role).ok_or_else(|| PolicyError::UnknownRole {
                    principal: p.id.clone(),
                    role: role.clone(),
                })?;
                pats.extend(compiled.iter().cloned());
            }
            access.insert(p.id.clone(), Access::from_patterns(&pats));
        }
        Ok(Self {
            roles: by_id.into_iter().map(|(k, (r, _))| (k, r)).collect(),
            access,
        })
    }

    /// The access of `principal` (none when unknown).
    pub fn access(&self, principal: &str) -> Access {
        self.access.get(principal).cloned().unwrap_or_default()
    }

    pub fn knows(&self, principal: &str) -> bool {
        self.access.contains_key(principal)
    }

    pub fn role(&self, id: &str) -> Option<&Role> {
        self.roles.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_semantics_table() {
        // (pattern, path, expected)
        let table: &[(&str, &str, bool)] = &[
            ("*", "github.issues.create", true),
            ("*", "a.b", true),
            ("github.issues.*", "github.issues.create", true),
            ("github.issues.*", "github.issues.comments.create", false),
            ("github.issues.*", "github.pulls.create", false),
            ("github.issues.*", "github.issues", false),
            ("github.**", "github.issues", true),
            ("github.**", "github.issues.comments.create", true),
            ("github.**", "gitlab.issues", false),
            ("github.**", "githubx.issues", false),
            ("*.list", "tables.list", true),
            ("*.list", "tables.rows.list", false),
            ("**.list", "tables.rows.list", true),
            ("tables.rows.*", "tables.rows.query", true),
            ("tables.rows.*", "tables.create", false),
            ("github.*_list", "github.issues_list", true),
            ("github.*_list", "github.issues_get", false),
            ("github.issues.create", "github.issues.create", true),
            ("github.issues.create", "github.issues.created", false),
            ("a.?", "a.b", true),
            ("a.?", "a.bc", false),
        ];
        for (pat, path, want) in table {
            let p = Pattern::parse(pat).unwrap();
            assert_eq!(p.matches(path), *want, "{pat} vs {path}");
            let a = Access::from_patterns(&[p]);
            assert_eq!(a.allows(path), *want, "access {pat} vs {path}");
        }
    }

    #[test]
    fn bad_patterns_are_rejected_with_reason() {
        for bad in ["", "a..b", "GitHub.*", "a/b", "a.**x", "a b"] {
            let e = Pattern::parse(bad).unwrap_err();
            assert_eq!(e.pattern, bad);
            assert!(!e.reason.is_empty());
        }
    }

    #[test]
    fn default_deny_and_role_union() {
        let policy = Policy::new(
            vec![
                Role {
                    id: "rows".into(),
                    name: "Rows".into(),
                    patterns: vec!["tables.rows.*".into()],
                },
                Role {
                    id: "gh".into(),
                    name: "GH".into(),
                    patterns: vec!["github.**".into()],
                },
            ],
            vec![
                Principal {
                    id: "alice".into(),
                    roles: vec!["rows".into(), "gh".into()],
                },
                Principal {
                    id: "bob".into(),
                    roles: vec![],
                },
            ],
        )
        .unwrap();
        let a = policy.access("alice");
        assert!(a.allows("tables.rows.insert"));
        assert!(a.allows("github.repos.get"));
        assert!(!a.allows("tables.create"));
        assert!(!policy.access("bob").allows("tables.rows.insert"));
        assert!(!policy.access("mallory").allows("tables.rows.insert"));
    }

    #[test]
    fn unknown_role_is_an_error() {
        let e = Policy::new(
            vec![],
            vec![Principal {
                id: "a".into(),
                roles: vec!["nope".into()],
            }],
        )
        .unwrap_err();
        assert!(e.to_string().contains("nope"));
    }
}
