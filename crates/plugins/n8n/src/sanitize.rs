//! Scrubbing and shrinking JSON before an agent sees it.
//!
//! - [`scrub`] removes what must never leave the plugin: `resumeToken`, `contextData`, stack
//!   traces, the headers n8n records of outgoing requests, and the values of headers named like
//!   a credential (`toolshed_outbound::secret::is_credential_name`) wherever a `headers` object
//!   appears.
//! - [`shrink`] caps long strings, long arrays and deep nesting, leaving a marker saying what
//!   was cut.
//! - [`estimate_tokens`] is a deliberately pessimistic token count used to hold the answer
//!   budgets without shipping a tokenizer (the tests check it against o200k).

use serde_json::{Map, Value};
use toolshed_outbound::secret::{is_credential_name, REDACTED};

/// Keys dropped wherever they appear.
const DROPPED_KEYS: &[&str] = &["resumeToken", "contextData", "stack", "stackTrace"];

/// Removes secrets, stack traces and request headers from `v`, in place.
pub fn scrub(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for k in DROPPED_KEYS {
                map.remove(*k);
            }
            if let Some(Value::Object(req)) = map.get_mut("request") {
                req.remove("headers");
                req.remove("auth");
            }
            if let Some(Value::Object(headers)) = map.get_mut("headers") {
                for (name, value) in headers.iter_mut() {
                    if is_credential_name(name) {
                        *value = Value::String(REDACTED.into());
                    }
                }
            }
            for (_, child) in map.iter_mut() {
                scrub(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(scrub),
        _ => {}
    }
}

/// Limits for [`shrink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest string kept whole, in characters.
    pub max_string: usize,
    /// Most array elements kept.
    pub max_array: usize,
    /// Deepest nesting kept.
    pub max_depth: usize,
}

impl Limits {
    pub const fn new(max_string: usize, max_array: usize, max_depth: usize) -> Self {
        Self {
            max_string,
            max_array,
            max_depth,
        }
    }
}

/// A copy of `v` within `limits`; every cut leaves a `…[truncated …]` marker.
pub fn shrink(v: &Value, limits: Limits) -> Value {
    shrink_at(v, limits, 0)
}

fn shrink_at(v: &Value, limits: Limits, depth: usize) -> Value {
    match v {
        Value::String(s) => Value::String(truncate_str(s, limits.max_string)),
        Value::Array(items) => {
            if depth >= limits.max_depth && !items.is_empty() {
                return Value::String(format!("…[truncated: array of {} items]", items.len()));
            }
            let mut out: Vec<Value> = items
                .iter()
                .take(limits.max_array)
                .map(|i| shrink_at(i, limits, depth + 1))
                .collect();
            if items.len() > limits.max_array {
                out.push(Value::String(format!(
                    "…[truncated: {} more items]",
                    items.len() - limits.max_array
                )));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            if depth >= limits.max_depth && !map.is_empty() {
                return Value::String(format!("…[truncated: object with {} keys]", map.len()));
            }
            let mut out = Map::new();
            for (i, (k, child)) in map.iter().enumerate() {
                if i >= limits.max_array.max(8) * 2 {
                    out.insert(
                        "…".into(),
                        Value::String(format!("[truncated: {} more keys]", map.len() - i)),
                    );
                    break;
                }
                out.insert(k.clone(), shrink_at(child, limits, depth + 1));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// `s` cut to `max` characters with a marker saying how many were dropped.
pub fn truncate_str(s: &str, max: usize) -> String {
    let count = s.chars().count();
    if count <= max {
        return s.to_string();
    }
    let kept: String = s.chars().take(max).collect();
    format!("{kept}…[truncated {} chars]", count - max)
}

/// A pessimistic estimate of the o200k token count of `v` serialized as compact JSON:
/// one token per two ASCII bytes and one per non-ASCII character.
pub fn estimate_tokens(v: &Value) -> usize {
    let s = serde_json::to_string(v).unwrap_or_default();
    estimate_str_tokens(&s)
}

/// [`estimate_tokens`] for text.
pub fn estimate_str_tokens(s: &str) -> usize {
    let mut ascii = 0usize;
    let mut other = 0usize;
    for c in s.chars() {
        if c.is_ascii() {
            ascii += 1;
        } else {
            other += 1;
        }
    }
    ascii.div_ceil(2) + other
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scrub_removes_secrets_everywhere() {
        let mut v = json!({
            "resumeToken": "abc",
            "data": {"executionData": {"contextData": {"x": 1}},
                     "error": {"stack": "Error: at x", "context": {"request": {"headers": {"accept": "*/*"}, "uri": "u"}}},
                     "items": [{"json": {"headers": {"Authorization": "Bearer s3cret", "host": "h"}}}]}
        });
        scrub(&mut v);
        let s = v.to_string();
        for bad in ["resumeToken", "contextData", "stack", "s3cret", "accept"] {
            assert!(!s.contains(bad), "{bad} survived: {s}");
        }
        assert_eq!(v["data"]["error"]["context"]["request"]["uri"], "u");
        assert_eq!(v["data"]["items"][0]["json"]["headers"]["host"], "h");
        assert_eq!(
            v["data"]["items"][0]["json"]["headers"]["Authorization"],
            REDACTED
        );
    }

    #[test]
    fn shrink_marks_every_cut() {
        let v = json!({"s": "x".repeat(50), "a": (0..30).collect::<Vec<_>>(), "d": {"e": {"f": {"g": 1}}}});
        let out = shrink(&v, Limits::new(10, 5, 3));
        assert_eq!(out["s"], format!("{}…[truncated 40 chars]", "x".repeat(10)));
        assert_eq!(out["a"].as_array().unwrap().len(), 6);
        assert_eq!(out["a"][5], "…[truncated: 25 more items]");
        assert_eq!(out["d"]["e"]["f"], "…[truncated: object with 1 keys]");
    }

    #[test]
    fn estimate_is_pessimistic_for_plain_text() {
        assert_eq!(estimate_str_tokens("abcd"), 2);
        assert_eq!(estimate_str_tokens("日本"), 2);
    }
}
