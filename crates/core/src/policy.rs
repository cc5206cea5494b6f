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
//!
//! Who decides approvals is policy too: a role's `decide` patterns name the tools whose pending
//! calls its principals may approve or deny (none by default), and `self_decide` says whether
//! they may decide their own executions through the agent-facing `resume` tool (off by default).
//! [`Access::may_decide`] and [`Access::self_decide`] carry both; the engine applies them.

use std::collections::HashMap;
use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use crate::rules::{CallRule, RuleList, Rules};
use crate::tool::Annotations;

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
    #[error("a principal has an empty id (roles {roles:?}): give every principal a non-empty id")]
    EmptyPrincipal { roles: Vec<String> },
    #[error("role '{role}', rule '{rule}': {source}")]
    Rule {
        role: String,
        rule: &'static str,
        source: PatternError,
    },
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

/// A role: a named set of patterns, and which pending calls its principals may decide.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub patterns: Vec<String>,
    /// Tools whose pending (destructive) calls this role's principals may approve or deny, from
    /// any principal's execution, through human channels (HTTP API, CLI, MCP elicitation).
    #[serde(default)]
    pub decide: Vec<String>,
    /// Whether the principals may also decide their own executions through the agent-facing
    /// `resume` tool, i.e. let the agent approve its own calls.
    #[serde(default)]
    pub self_decide: bool,
    /// Call rules ([`crate::rules`]): calls that run without confirmation (dot-globs or
    /// annotation classes).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Calls that pause for a human's confirmation.
    #[serde(default)]
    pub confirm: Vec<String>,
    /// Calls that are refused.
    #[serde(default)]
    pub deny: Vec<String>,
}

/// Someone calling tools: an API key's owner over HTTP, or the configured local principal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub id: String,
    pub roles: Vec<String>,
}

/// What one principal may see and call, and which pending calls it may decide. Cheap to clone.
#[derive(Clone, Default)]
pub struct Access {
    inner: Arc<AccessInner>,
}

#[derive(Default)]
struct AccessInner {
    tools: Globs,
    decide: Globs,
    self_decide: bool,
    rules: Rules,
}

/// A compiled union of patterns.
#[derive(Default)]
struct Globs {
    all: bool,
    set: Option<GlobSet>,
    patterns: Vec<String>,
}

impl Globs {
    fn new(patterns: &[Pattern]) -> Self {
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
            all,
            set,
            patterns: patterns.iter().map(|p| p.text.clone()).collect(),
        }
    }

    fn matches(&self, path: &str) -> bool {
        if self.all {
            return true;
        }
        let Some(set) = &self.set else {
            return false;
        };
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
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("patterns", &self.inner.tools.patterns)
            .field("decide", &self.inner.decide.patterns)
            .field("self_decide", &self.inner.self_decide)
            .finish()
    }
}

impl Access {
    /// Access to nothing (the default for unknown principals).
    pub fn none() -> Self {
        Self::default()
    }

    /// Access to everything (deciding nothing).
    pub fn all() -> Self {
        Self::from_patterns(&[Pattern::parse("*").unwrap()])
    }

    /// Access to what any of `patterns` matches; no decisions.
    pub fn from_patterns(patterns: &[Pattern]) -> Self {
        Self::with_decisions(patterns, &[], false)
    }

    /// Access to what `patterns` match, deciding pending calls of what `decide` matches;
    /// `self_decide` lets the principal decide its own executions through the agent's tool.
    pub fn with_decisions(patterns: &[Pattern], decide: &[Pattern], self_decide: bool) -> Self {
        Self {
            inner: Arc::new(AccessInner {
                tools: Globs::new(patterns),
                decide: Globs::new(decide),
                self_decide,
                rules: Rules::default(),
            }),
        }
    }

    /// The same access with these call rules.
    pub fn with_rules(self, rules: Rules) -> Self {
        let inner = &self.inner;
        Self {
            inner: Arc::new(AccessInner {
                tools: Globs::new(
                    &inner
                        .tools
                        .patterns
                        .iter()
                        .filter_map(|p| Pattern::parse(p).ok())
                        .collect::<Vec<_>>(),
                ),
                decide: Globs::new(
                    &inner
                        .decide
                        .patterns
                        .iter()
                        .filter_map(|p| Pattern::parse(p).ok())
                        .collect::<Vec<_>>(),
                ),
                self_decide: inner.self_decide,
                rules,
            }),
        }
    }

    /// What happens to a call of `path` (a tool with `annotations`): see [`crate::rules`].
    pub fn call_rule(&self, path: &str, annotations: &Annotations) -> CallRule {
        self.inner.rules.rule(path, annotations)
    }

    /// The rule the caller's roles state for the call, without the default.
    pub fn explicit_call_rule(&self, path: &str, annotations: &Annotations) -> Option<CallRule> {
        self.inner.rules.explicit(path, annotations)
    }

    /// May this principal see and call `path`?
    pub fn allows(&self, path: &str) -> bool {
        self.inner.tools.matches(path)
    }

    /// May this principal approve or deny a pending call of `path` (its own or another's)?
    pub fn may_decide(&self, path: &str) -> bool {
        self.inner.decide.matches(path)
    }

    /// Whether this principal decides anything at all.
    pub fn decides_any(&self) -> bool {
        self.inner.decide.all || self.inner.decide.set.is_some()
    }

    /// May this principal decide its own executions through the agent-facing `resume` tool?
    pub fn self_decide(&self) -> bool {
        self.inner.self_decide
    }

    /// Whether this access admits every path.
    pub fn is_all(&self) -> bool {
        self.inner.tools.all
    }

    /// The patterns this access was built from.
    pub fn patterns(&self) -> &[String] {
        &self.inner.tools.patterns
    }
}

/// One role, compiled.
#[derive(Debug, Clone)]
struct CompiledRole {
    role: Role,
    tools: Vec<Pattern>,
    decide: Vec<Pattern>,
    /// allow, confirm, deny.
    rules: [RuleList; 3],
}

/// Roles and principals, compiled. Unknown principals get no access.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    roles: HashMap<String, CompiledRole>,
    /// Each configured principal's roles.
    principals: HashMap<String, Vec<String>>,
    access: HashMap<String, Access>,
}

impl CompiledRole {
    fn new(r: Role) -> Result<Self, PolicyError> {
        let compile = |texts: &[String]| {
            texts
                .iter()
                .map(|p| {
                    Pattern::parse(p).map_err(|source| PolicyError::Pattern {
                        role: r.id.clone(),
                        source,
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let (tools, decide) = (compile(&r.patterns)?, compile(&r.decide)?);
        let rule_list = |which: &'static str, entries: &[String]| {
            RuleList::parse(entries).map_err(|source| PolicyError::Rule {
                role: r.id.clone(),
                rule: which,
                source,
            })
        };
        let rules = [
            rule_list("allow", &r.allow)?,
            rule_list("confirm", &r.confirm)?,
            rule_list("deny", &r.deny)?,
        ];
        Ok(Self {
            role: r,
            tools,
            decide,
            rules,
        })
    }
}

impl Policy {
    pub fn new(roles: Vec<Role>, principals: Vec<Principal>) -> Result<Self, PolicyError> {
        let mut compiled: HashMap<String, CompiledRole> = HashMap::new();
        for r in roles {
            if compiled.contains_key(&r.id) {
                return Err(PolicyError::DuplicateRole(r.id));
            }
            compiled.insert(r.id.clone(), CompiledRole::new(r)?);
        }
        let mut policy = Self {
            roles: compiled,
            principals: HashMap::new(),
            access: HashMap::new(),
        };
        for p in principals {
            if p.id.trim().is_empty() {
                return Err(PolicyError::EmptyPrincipal { roles: p.roles });
            }
            if let Some(role) = p.roles.iter().find(|r| !policy.roles.contains_key(*r)) {
                return Err(PolicyError::UnknownRole {
                    principal: p.id.clone(),
                    role: role.clone(),
                });
            }
            let access = policy.union(p.roles.iter().map(String::as_str));
            policy.access.insert(p.id.clone(), access);
            policy.principals.insert(p.id, p.roles);
        }
        Ok(policy)
    }

    /// The access the union of `roles` grants; roles the policy does not define grant nothing.
    fn union<'a>(&self, roles: impl Iterator<Item = &'a str>) -> Access {
        let (mut pats, mut decide, mut self_decide) = (Vec::new(), Vec::new(), false);
        let mut rules = Rules::default();
        for role in roles {
            let Some(r) = self.roles.get(role) else {
                continue;
            };
            pats.extend(r.tools.iter().cloned());
            decide.extend(r.decide.iter().cloned());
            self_decide |= r.role.self_decide;
            let [allow, confirm, deny] = &r.rules;
            rules.extend(allow, confirm, deny);
        }
        Access::with_decisions(&pats, &decide, self_decide).with_rules(rules)
    }

    /// The access of `principal` (none when unknown or empty).
    pub fn access(&self, principal: &str) -> Access {
        if principal.is_empty() {
            return Access::none();
        }
        self.access.get(principal).cloned().unwrap_or_default()
    }

    /// The access of `principal` holding `roles` besides those the policy gives it (a principal
    /// signed in with a token whose claims name roles). Roles the policy does not define grant
    /// nothing; an empty principal id gets no access.
    pub fn access_with_roles(&self, principal: &str, roles: &[String]) -> Access {
        if principal.is_empty() {
            return Access::none();
        }
        let configured = self.principals.get(principal).into_iter().flatten();
        self.union(configured.chain(roles).map(String::as_str))
    }

    pub fn knows(&self, principal: &str) -> bool {
        !principal.is_empty() && self.access.contains_key(principal)
    }

    /// Whether the policy defines role `id`.
    pub fn has_role(&self, id: &str) -> bool {
        self.roles.contains_key(id)
    }

    pub fn role(&self, id: &str) -> Option<&Role> {
        self.roles.get(id).map(|r| &r.role)
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
                    ..Role::default()
                },
                Role {
                    id: "gh".into(),
                    name: "GH".into(),
                    patterns: vec!["github.**".into()],
                    ..Role::default()
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

    /// `decide` and `self_decide` are unions over a principal's roles; none by default.
    #[test]
    fn decisions_follow_roles() {
        let role = |id: &str, decide: &[&str], self_decide: bool| Role {
            id: id.into(),
            patterns: vec!["*".into()],
            decide: decide.iter().map(|d| d.to_string()).collect(),
            self_decide,
            ..Role::default()
        };
        let principal = |id: &str, roles: &[&str]| Principal {
            id: id.into(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
        };
        let policy = Policy::new(
            vec![
                role("user", &[], false),
                role("rows", &["tables.rows.*"], false),
                role("agent", &[], true),
            ],
            vec![
                principal("plain", &["user"]),
                principal("clerk", &["user", "rows"]),
                principal("bot", &["rows", "agent"]),
            ],
        )
        .unwrap();
        let plain = policy.access("plain");
        assert!(!plain.may_decide("tables.rows.delete") && !plain.decides_any());
        assert!(!plain.self_decide());
        let clerk = policy.access("clerk");
        assert!(clerk.may_decide("tables.rows.delete") && !clerk.may_decide("tables.drop"));
        assert!(!clerk.self_decide());
        assert!(policy.access("bot").self_decide());
        let e = Policy::new(
            vec![role("bad", &["Tables.*"], false)],
            vec![principal("x", &["bad"])],
        )
        .unwrap_err();
        assert!(e.to_string().contains("Tables.*"), "{e}");
    }

    /// A principal with an empty id is refused, and the empty id never has access.
    #[test]
    fn empty_principal_ids_are_refused() {
        let e = Policy::new(
            vec![],
            vec![Principal {
                id: " ".into(),
                roles: vec![],
            }],
        )
        .unwrap_err();
        assert!(matches!(e, PolicyError::EmptyPrincipal { .. }), "{e}");
        let p = Policy::new(
            vec![Role {
                id: "all".into(),
                patterns: vec!["*".into()],
                decide: vec!["**".into()],
                ..Role::default()
            }],
            vec![],
        )
        .unwrap();
        assert!(!p.knows("") && !p.access("").allows("a.b"));
    }

    /// Roles named by a token add to what the policy gives a principal; undefined roles add
    /// nothing.
    #[test]
    fn token_roles_add_to_configured_ones() {
        let role = |id: &str, pattern: &str| Role {
            id: id.into(),
            patterns: vec![pattern.into()],
            ..Role::default()
        };
        let p = Policy::new(
            vec![role("rows", "tables.**"), role("gh", "github.**")],
            vec![Principal {
                id: "https://id.example#alice".into(),
                roles: vec!["gh".into()],
            }],
        )
        .unwrap();
        let bob = p.access_with_roles("https://id.example#bob", &["rows".into()]);
        assert!(bob.allows("tables.list") && !bob.allows("github.issues"));
        let alice = p.access_with_roles("https://id.example#alice", &["rows".into()]);
        assert!(alice.allows("tables.list") && alice.allows("github.issues"));
        let ghost = p.access_with_roles("x#y", &["nope".into()]);
        assert!(!ghost.allows("tables.list"));
        assert!(!p
            .access_with_roles("", &["rows".into()])
            .allows("tables.list"));
        assert!(p.has_role("rows") && !p.has_role("nope"));
    }
}
