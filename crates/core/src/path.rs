//! Tool paths: lowercase segments (`[a-z0-9_]+`) joined by dots, at least two segments.
//!
//! The first segment is the tool's namespace (the plugin or source it comes from).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a string is not a valid tool path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error(
        "tool path '{0}' needs at least two dot-separated segments, like 'github.issues_list'"
    )]
    TooFewSegments(String),
    #[error("tool path '{path}' has an empty segment at position {index}")]
    EmptySegment { path: String, index: usize },
    #[error(
        "tool path '{path}' has an invalid character {ch:?} in segment '{segment}': segments are lowercase letters, digits and '_'"
    )]
    InvalidChar {
        path: String,
        segment: String,
        ch: char,
    },
}

/// Namespaces Toolshed's own tools and script globals use; no tool source may take one.
pub const RESERVED_NAMESPACES: [&str; 12] = [
    "client",
    "agents",
    "custom",
    "web",
    "tables",
    "n8n",
    "resources",
    "prompts",
    "search",
    "describe",
    "servers",
    "agent",
];

/// Whether `name` is one of [`RESERVED_NAMESPACES`].
pub fn is_reserved_namespace(name: &str) -> bool {
    RESERVED_NAMESPACES.contains(&name)
}

/// The longest path a caller may name, in bytes. Longer names are not looked up: they answer like
/// any unknown tool, and never reach the audit log at full length.
pub const MAX_CALL_PATH_BYTES: usize = 256;

/// Whether `s` could name a tool: at most [`MAX_CALL_PATH_BYTES`] bytes, at least two non-empty
/// dot-separated segments of `[a-z0-9_]`. Checked without allocating, before any lookup.
pub fn is_callable_path(s: &str) -> bool {
    s.len() <= MAX_CALL_PATH_BYTES
        && s.contains('.')
        && s.split('.').all(|seg| {
            !seg.is_empty()
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
}

/// A validated tool path such as `github.issues.create`. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolPath(Arc<str>);

impl ToolPath {
    /// Parses and validates a path.
    pub fn parse(s: &str) -> Result<Self, PathError> {
        let mut count = 0;
        for (index, seg) in s.split('.').enumerate() {
            count += 1;
            if seg.is_empty() {
                return Err(PathError::EmptySegment {
                    path: s.to_string(),
                    index,
                });
            }
            if let Some(ch) = seg
                .chars()
                .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_'))
            {
                return Err(PathError::InvalidChar {
                    path: s.to_string(),
                    segment: seg.to_string(),
                    ch,
                });
            }
        }
        if count < 2 {
            return Err(PathError::TooFewSegments(s.to_string()));
        }
        Ok(Self(Arc::from(s)))
    }

    /// The whole path as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments, in order.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('.')
    }

    /// The first segment: the plugin or source namespace.
    pub fn namespace(&self) -> &str {
        self.0.split('.').next().unwrap_or_default()
    }

    /// Builds `namespace.rest`, validating the result.
    pub fn join(namespace: &str, rest: &str) -> Result<Self, PathError> {
        Self::parse(&format!("{namespace}.{rest}"))
    }
}

/// Turns free text (`listPets`, `GET /pets/{id}`, `Issues-Create`) into one path segment:
/// snake_case, lowercase, `[a-z0-9_]` only, never empty.
pub fn to_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() {
                let prev = i.checked_sub(1).map(|j| chars[j]);
                let next = chars.get(i + 1).copied();
                let boundary = match prev {
                    Some(p) if p.is_ascii_lowercase() || p.is_ascii_digit() => true,
                    Some(p) if p.is_ascii_uppercase() => {
                        next.is_some_and(|n| n.is_ascii_lowercase())
                    }
                    _ => false,
                };
                if boundary && !out.ends_with('_') && !out.is_empty() {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    while out.ends_with('_') {
        out.pop();
    }
    if out.is_empty() {
        out.push('x');
    }
    out
}

impl fmt::Display for ToolPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ToolPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ToolPath({})", self.0)
    }
}

impl std::str::FromStr for ToolPath {
    type Err = PathError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl AsRef<str> for ToolPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for ToolPath {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl Serialize for ToolPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ToolPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_paths() {
        for p in [
            "a.b",
            "github.issues.create",
            "n8n.executions.get_node",
            "x1.y_2",
        ] {
            assert_eq!(ToolPath::parse(p).unwrap().as_str(), p);
        }
        assert_eq!(
            ToolPath::parse("github.issues.create").unwrap().namespace(),
            "github"
        );
    }

    #[test]
    fn invalid_paths_say_why() {
        assert!(matches!(
            ToolPath::parse("github"),
            Err(PathError::TooFewSegments(_))
        ));
        assert!(matches!(
            ToolPath::parse("a..b"),
            Err(PathError::EmptySegment { index: 1, .. })
        ));
        assert!(matches!(
            ToolPath::parse(".a"),
            Err(PathError::EmptySegment { index: 0, .. })
        ));
        let e = ToolPath::parse("GitHub.issues").unwrap_err();
        assert!(matches!(e, PathError::InvalidChar { ch: 'G', .. }));
        assert!(e.to_string().contains("GitHub"));
        assert!(ToolPath::parse("a.b-c").is_err());
        assert!(ToolPath::parse("").is_err());
    }

    #[test]
    fn segments_from_free_text() {
        assert_eq!(to_segment("listPets"), "list_pets");
        assert_eq!(to_segment("GET /pets/{petId}"), "get_pets_pet_id");
        assert_eq!(to_segment("HTTPServer"), "http_server");
        assert_eq!(to_segment("issues/create-comment"), "issues_create_comment");
        assert_eq!(to_segment("***"), "x");
        assert_eq!(to_segment("v2Items"), "v2_items");
    }

    #[test]
    fn callable_paths_follow_the_grammar_and_the_length_cap() {
        assert!(is_callable_path("tables.rows.query"));
        assert!(is_callable_path(&format!(
            "a.{}",
            "b".repeat(MAX_CALL_PATH_BYTES - 2)
        )));
        for bad in [
            "",
            "tables",
            "tables.",
            ".rows",
            "a..b",
            "Tables.rows",
            "a.b-c",
            "a.b c",
            "a.é",
        ] {
            assert!(!is_callable_path(bad), "{bad:?}");
        }
        let long = format!("a.{}", "b".repeat(MAX_CALL_PATH_BYTES - 1));
        assert!(!is_callable_path(&long), "{} bytes", long.len());
    }
}
