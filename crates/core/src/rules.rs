//! Call rules: which calls run, which pause for a human's confirmation, which are refused.
//!
//! A role carries `allow`, `confirm` and `deny` lists. An entry is a dot-glob over tool paths
//! (`tables.rows.*`) or an annotation class: `read_only` (the tool changes nothing), `write`
//! (neither read-only nor destructive), `destructive` (deletes or overwrites; also every tool
//! without annotations, MCP's default), `draft` (it edits a draft kept by Toolshed, which acts on
//! nothing in the world). Across all of a principal's roles an explicit `deny` wins, then
//! `confirm`, then `allow`. When no rule matches, the default is the specification's: read-only
//! and draft tools run; every other tool (write or destructive) needs confirmation. Relaxing it
//! is one rule: `allow = ["tables.rows.*"]`.

use serde::{Deserialize, Serialize};

use crate::policy::{Pattern, PatternError};
use crate::tool::Annotations;

/// What happens to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallRule {
    /// It runs.
    Allow,
    /// It pauses its execution until a human approves it.
    Confirm,
    /// It is refused.
    Deny,
}

/// An annotation class a rule entry may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    ReadOnly,
    Write,
    Destructive,
    Draft,
}

impl Class {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "read_only" => Self::ReadOnly,
            "write" => Self::Write,
            "destructive" => Self::Destructive,
            "draft" => Self::Draft,
            _ => return None,
        })
    }

    /// The class of a tool with these annotations.
    pub fn of(a: &Annotations) -> Self {
        if a.read_only {
            Self::ReadOnly
        } else if a.draft {
            Self::Draft
        } else if a.destructive {
            Self::Destructive
        } else {
            Self::Write
        }
    }
}

/// One rule list (`allow`, `confirm` or `deny`), compiled.
#[derive(Debug, Clone, Default)]
pub struct RuleList {
    patterns: Vec<Pattern>,
    classes: Vec<Class>,
}

impl RuleList {
    /// Compiles the entries of one list; an entry that is neither a class nor a valid pattern
    /// is an error naming it.
    pub fn parse(entries: &[String]) -> Result<Self, PatternError> {
        let mut list = Self::default();
        for e in entries {
            match Class::parse(e) {
                Some(c) => list.classes.push(c),
                None => list.patterns.push(Pattern::parse(e).map_err(|mut err| {
                    err.reason = format!(
                        "{}; or use an annotation class: read_only, write, destructive, draft",
                        err.reason
                    );
                    err
                })?),
            }
        }
        Ok(list)
    }

    fn extend(&mut self, other: &RuleList) {
        self.patterns.extend(other.patterns.iter().cloned());
        self.classes.extend(other.classes.iter().copied());
    }

    fn matches(&self, path: &str, class: Class) -> bool {
        self.classes.contains(&class) || self.patterns.iter().any(|p| p.matches(path))
    }

    fn is_empty(&self) -> bool {
        self.patterns.is_empty() && self.classes.is_empty()
    }
}

/// The rules of one principal: its roles' lists merged.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    allow: RuleList,
    confirm: RuleList,
    deny: RuleList,
}

impl Rules {
    /// Merges another role's lists into these.
    pub fn extend(&mut self, allow: &RuleList, confirm: &RuleList, deny: &RuleList) {
        self.allow.extend(allow);
        self.confirm.extend(confirm);
        self.deny.extend(deny);
    }

    /// The rule for a call of `path`, a tool with `annotations`.
    pub fn rule(&self, path: &str, annotations: &Annotations) -> CallRule {
        self.explicit(path, annotations)
            .unwrap_or(match Class::of(annotations) {
                Class::ReadOnly | Class::Draft => CallRule::Allow,
                Class::Write | Class::Destructive => CallRule::Confirm,
            })
    }

    /// The rule a role states for the call, if any (no default).
    pub fn explicit(&self, path: &str, annotations: &Annotations) -> Option<CallRule> {
        let class = Class::of(annotations);
        [
            (&self.deny, CallRule::Deny),
            (&self.confirm, CallRule::Confirm),
            (&self.allow, CallRule::Allow),
        ]
        .into_iter()
        .find(|(list, _)| !list.is_empty() && list.matches(path, class))
        .map(|(_, rule)| rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], confirm: &[&str], deny: &[&str]) -> Rules {
        let list = |e: &[&str]| {
            RuleList::parse(&e.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
        };
        let mut r = Rules::default();
        r.extend(&list(allow), &list(confirm), &list(deny));
        r
    }

    #[test]
    fn the_default_confirms_everything_that_is_not_read_only() {
        let r = Rules::default();
        assert_eq!(r.rule("t.list", &Annotations::READ_ONLY), CallRule::Allow);
        assert_eq!(r.rule("t.insert", &Annotations::WRITE), CallRule::Confirm);
        assert_eq!(
            r.rule("t.drop", &Annotations::DESTRUCTIVE),
            CallRule::Confirm
        );
        assert_eq!(r.rule("agents.write", &Annotations::DRAFT), CallRule::Allow);
        // No annotations: MCP's default, destructive.
        assert_eq!(r.rule("x.y", &Annotations::default()), CallRule::Confirm);
    }

    #[test]
    fn deny_beats_confirm_beats_allow() {
        let r = rules(
            &["tables.rows.*", "read_only"],
            &["tables.rows.delete"],
            &["tables.rows.purge", "destructive"],
        );
        assert_eq!(
            r.rule("tables.rows.insert", &Annotations::WRITE),
            CallRule::Allow
        );
        assert_eq!(
            r.rule("tables.rows.delete", &Annotations::WRITE),
            CallRule::Confirm
        );
        assert_eq!(
            r.rule("tables.rows.purge", &Annotations::WRITE),
            CallRule::Deny
        );
        assert_eq!(
            r.rule("tables.drop", &Annotations::DESTRUCTIVE),
            CallRule::Deny
        );
        assert_eq!(
            r.rule("other.write", &Annotations::WRITE),
            CallRule::Confirm
        );
        let r = rules(&[], &["read_only"], &[]);
        assert_eq!(r.rule("t.list", &Annotations::READ_ONLY), CallRule::Confirm);
    }

    #[test]
    fn bad_entries_name_themselves_and_the_classes() {
        let e = RuleList::parse(&["Tables.*".to_string()]).unwrap_err();
        assert!(
            e.to_string().contains("Tables.*") && e.to_string().contains("read_only"),
            "{e}"
        );
    }
}
