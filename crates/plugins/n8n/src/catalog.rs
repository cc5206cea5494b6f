//! The instance's node catalog: every node type installed on the n8n instance, as the editor
//! reads it from `GET /types/nodes.json` (one entry per type and version group: `name`,
//! `displayName`, `description`, `version` (a number or a list), `defaultVersion`, `group`,
//! `codex`, `credentials`, `properties`). n8n 2.41.1 serves 920 entries for 842 types, ~18 MB.
//!
//! Pure functions over that JSON: [`NodeCatalog::search`] ranks types by name, display name,
//! aliases and description; [`NodeCatalog::describe`] gives one type's versions, credentials and
//! its parameters compacted (optionally only those shown for a resource and operation), shrunk
//! until the answer fits [`DESCRIBE_BUDGET`] tokens.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::sanitize::{estimate_tokens, truncate_str};

/// The o200k token budget of [`NodeCatalog::describe`] (the node-detail budget).
pub const DESCRIBE_BUDGET: usize = crate::node::NODE_BUDGET;

/// What the pessimistic estimator aims for.
const TARGET: usize = 19_000;

/// Node types by full type name (e.g. `n8n-nodes-base.httpRequest`), each with its entries.
#[derive(Debug, Clone, Default)]
pub struct NodeCatalog {
    types: BTreeMap<String, Vec<Value>>,
}

impl NodeCatalog {
    /// Reads the `/types/nodes.json` array. Entries without a `name` are skipped.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        let entries = v.as_array().ok_or("the node catalog is not a JSON array")?;
        let mut types: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for e in entries {
            if let Some(name) = e["name"].as_str().filter(|n| !n.is_empty()) {
                types.entry(name.to_string()).or_default().push(e.clone());
            }
        }
        if types.is_empty() {
            return Err("the node catalog has no node types".into());
        }
        Ok(Self { types })
    }

    /// How many node types the catalog holds.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// `true` when the catalog holds no node type.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// `true` when `node_type` is installed.
    pub fn contains(&self, node_type: &str) -> bool {
        self.types.contains_key(node_type)
    }

    /// The types matching `query` (all words, case-insensitive, in the name, display name,
    /// aliases, categories or description), best first, and how many matched in all.
    pub fn search(&self, query: &str, limit: usize) -> (Vec<Value>, usize) {
        let q = query.trim().to_lowercase();
        let words: Vec<&str> = q.split_whitespace().collect();
        let mut hits: Vec<(i64, &String, &Vec<Value>)> = Vec::new();
        for (name, entries) in &self.types {
            let e = newest(entries);
            if e["hidden"] == true {
                continue;
            }
            let score = if words.is_empty() {
                0
            } else {
                match score(name, e, &q, &words) {
                    Some(s) => s,
                    None => continue,
                }
            };
            hits.push((score, name, entries));
        }
        hits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        let total = hits.len();
        let out = hits
            .into_iter()
            .take(limit)
            .map(|(_, name, entries)| summary(name, entries))
            .collect();
        (out, total)
    }

    /// Names of installed types whose short name contains `node_type`'s short name (or the
    /// reverse), for a "did you mean".
    pub fn similar(&self, node_type: &str, limit: usize) -> Vec<String> {
        let short = short_name(node_type).to_lowercase();
        if short.is_empty() {
            return vec![];
        }
        self.types
            .keys()
            .filter(|n| {
                let s = short_name(n).to_lowercase();
                s.contains(&short) || short.contains(&s) || close(&s, &short)
            })
            .take(limit)
            .cloned()
            .collect()
    }

    /// The entry (version group) of `node_type` that holds `version` exactly.
    pub fn entry(&self, node_type: &str, version: f64) -> Option<&Value> {
        self.types
            .get(node_type)?
            .iter()
            .find(|e| versions_of(e).contains(&version))
    }

    /// Every installed version of `node_type`, ascending (empty when it is not installed).
    pub fn versions(&self, node_type: &str) -> Vec<Value> {
        self.types
            .get(node_type)
            .map(|e| all_versions(e))
            .unwrap_or_default()
    }

    /// The credential types a node of `node_type` at `version` with `parameters` needs: those
    /// marked required whose `displayOptions.show` (when any) match the parameters (a missing
    /// parameter counts as its default). `None` when the type is not installed.
    pub fn required_credentials(
        &self,
        node_type: &str,
        version: Option<f64>,
        parameters: &Value,
    ) -> Option<Vec<String>> {
        let entries = self.types.get(node_type)?;
        let entry = version
            .and_then(|v| entries.iter().find(|e| versions_of(e).contains(&v)))
            .unwrap_or_else(|| newest(entries));
        let value_of = |name: &str| -> Value {
            parameters.get(name).cloned().unwrap_or_else(|| {
                entry["properties"]
                    .as_array()
                    .and_then(|ps| ps.iter().find(|p| p["name"] == name))
                    .map(|p| p["default"].clone())
                    .unwrap_or(Value::Null)
            })
        };
        let shown = |c: &Value| {
            c["displayOptions"]["show"].as_object().is_none_or(|show| {
                show.iter().all(|(k, allowed)| {
                    let v = value_of(k);
                    allowed.as_array().is_some_and(|a| a.contains(&v))
                })
            })
        };
        Some(
            entry["credentials"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["required"].as_bool() == Some(true) && shown(c))
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect(),
        )
    }

    /// One type in detail: versions, credentials, inputs and outputs and its parameters for
    /// `version` (default: the type's default version), only those shown for `resource` and
    /// `operation` when given. `None` when the type is not installed.
    pub fn describe(
        &self,
        node_type: &str,
        version: Option<f64>,
        resource: Option<&str>,
        operation: Option<&str>,
    ) -> Option<Value> {
        let entries = self.types.get(node_type)?;
        let e = &entries[0];
        let default_version = e["defaultVersion"]
            .as_f64()
            .or_else(|| all_versions(entries).last().and_then(Value::as_f64));
        let wanted = version.or(default_version);
        let entry = wanted
            .and_then(|v| entries.iter().find(|e| versions_of(e).contains(&v)))
            .unwrap_or_else(|| newest(entries));
        let mut out = summary(node_type, entries);
        out["version"] = match wanted.filter(|v| versions_of(entry).contains(v)) {
            Some(v) => json!(v),
            None => json!(versions_of(entry).last()),
        };
        if let Some(v) = version.filter(|v| !versions_of(entry).contains(v)) {
            out["versionNote"] = json!(format!(
                "version {v} is not installed; showing the newest version group instead"
            ));
        }
        for key in ["inputs", "outputs"] {
            if !entry[key].is_null() {
                out[key] =
                    crate::sanitize::shrink(&entry[key], crate::sanitize::Limits::new(200, 10, 3));
            }
        }
        if let Some(creds) = entry["credentials"].as_array() {
            out["credentials"] = creds
                .iter()
                .map(|c| {
                    let mut o = json!({"name": c["name"], "required": c["required"].as_bool().unwrap_or(false)});
                    if let Some(show) = c["displayOptions"].get("show") {
                        o["show"] = show.clone();
                    }
                    o
                })
                .collect();
        }
        if let Some(url) = entry["codex"]["resources"]["primaryDocumentation"][0]["url"].as_str() {
            out["documentationUrl"] = json!(url);
        }
        let props: Vec<&Value> = entry["properties"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter(|p| !matches!(p["type"].as_str(), Some("notice" | "callout")))
                    .filter(|p| shown_for(p, "resource", resource))
                    .filter(|p| shown_for(p, "operation", operation))
                    .collect()
            })
            .unwrap_or_default();
        if resource.is_some() || operation.is_some() {
            out["filteredBy"] = json!({"resource": resource, "operation": operation});
        }
        out["parameterCount"] = json!(props.len());
        for level in 0..3 {
            let mut candidate = out.clone();
            candidate["parameters"] = props
                .iter()
                .map(|p| compact_property(p, level, 0))
                .collect();
            if estimate_tokens(&candidate) <= TARGET {
                return Some(candidate);
            }
        }
        // Still too big: keep the first parameters that fit and say how to see the rest.
        let compact: Vec<Value> = props.iter().map(|p| compact_property(p, 2, 0)).collect();
        let (mut lo, mut hi) = (0usize, compact.len());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let mut c = out.clone();
            c["parameters"] = Value::Array(compact[..mid].to_vec());
            if estimate_tokens(&c) <= TARGET - 200 {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        out["parameters"] = Value::Array(compact[..lo].to_vec());
        out["parametersTruncated"] = json!(format!(
            "showing {lo} of {} parameters to stay within the answer budget; pass resource and operation to see only the parameters of one operation",
            props.len()
        ));
        Some(out)
    }
}

/// `true` when a node type's entry lets the node pick any credential type (HTTP Request's
/// generic and predefined authentication: a `credentialsSelect` parameter), so its credentials
/// are not limited to the types it lists.
pub fn takes_any_credential(entry: &Value) -> bool {
    entry["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|p| p["type"] == "credentialsSelect")
}

/// The credential types a node type's entry (one version group) takes.
pub fn credential_names(entry: &Value) -> Vec<&str> {
    entry["credentials"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect()
}

/// `true` when two names are at most two single-character edits apart (a typo).
fn close(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 2 || a.len() < 4 {
        return false;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()] <= 2
}

fn short_name(node_type: &str) -> &str {
    node_type.rsplit('.').next().unwrap_or(node_type)
}

/// The versions of one entry (`version` is a number or a list).
fn versions_of(e: &Value) -> Vec<f64> {
    match &e["version"] {
        Value::Array(a) => a.iter().filter_map(Value::as_f64).collect(),
        v => v.as_f64().into_iter().collect(),
    }
}

/// Every version of a type, ascending.
fn all_versions(entries: &[Value]) -> Vec<Value> {
    let mut v: Vec<f64> = entries.iter().flat_map(versions_of).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.dedup();
    v.into_iter().map(number).collect()
}

/// `3.0` as `3`, `4.2` as `4.2`.
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

/// The entry holding the highest version.
fn newest(entries: &[Value]) -> &Value {
    entries
        .iter()
        .max_by(|a, b| {
            let va = versions_of(a).into_iter().fold(f64::MIN, f64::max);
            let vb = versions_of(b).into_iter().fold(f64::MIN, f64::max);
            va.partial_cmp(&vb).unwrap_or(std::cmp::Ordering::Equal)
        })
        .unwrap_or(&entries[0])
}

fn score(name: &str, e: &Value, q: &str, words: &[&str]) -> Option<i64> {
    let short = short_name(name).to_lowercase();
    let display = e["displayName"].as_str().unwrap_or_default().to_lowercase();
    let aliases: Vec<String> = e["codex"]["alias"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_lowercase)
                .collect()
        })
        .unwrap_or_default();
    let categories: Vec<String> = e["codex"]["categories"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_lowercase)
                .collect()
        })
        .unwrap_or_default();
    let description = e["description"].as_str().unwrap_or_default().to_lowercase();
    let compact_q: String = q.chars().filter(|c| !c.is_whitespace()).collect();
    let mut s = 0i64;
    if short == compact_q || display == q {
        s += 100;
    } else if short.starts_with(&compact_q) || display.starts_with(q) {
        s += 60;
    } else if short.contains(&compact_q) || display.contains(q) {
        s += 40;
    }
    for w in words {
        let hit = if short.contains(w) || display.contains(w) {
            8
        } else if aliases.iter().any(|a| a.contains(w)) {
            5
        } else if categories.iter().any(|c| c.contains(w)) {
            3
        } else if description.contains(w) {
            2
        } else {
            return (s > 0).then_some(s);
        };
        s += hit;
    }
    // Prefer the plain node over its trigger for equal matches.
    if short.ends_with("trigger") && !q.contains("trigger") {
        s -= 1;
    }
    Some(s)
}

/// One search result.
fn summary(name: &str, entries: &[Value]) -> Value {
    let e = newest(entries);
    let mut out = json!({
        "nodeType": name,
        "displayName": e["displayName"],
        "description": truncate_str(e["description"].as_str().unwrap_or_default(), 200),
        "versions": all_versions(entries),
        "defaultVersion": e["defaultVersion"].as_f64().map(number).unwrap_or_else(|| all_versions(entries).last().cloned().unwrap_or(Value::Null)),
        "group": e["group"],
    });
    if let Some(c) = e["codex"]["categories"].as_array() {
        out["categories"] = json!(c);
    }
    if e["group"]
        .as_array()
        .is_some_and(|g| g.iter().any(|g| g == "trigger"))
    {
        out["trigger"] = json!(true);
    }
    out
}

/// `false` when the property's `displayOptions.show[key]` lists values and `value` is given and
/// not among them.
fn shown_for(p: &Value, key: &str, value: Option<&str>) -> bool {
    let Some(value) = value else {
        return true;
    };
    match p["displayOptions"]["show"][key].as_array() {
        Some(allowed) => allowed.iter().any(|a| a.as_str() == Some(value)),
        None => true,
    }
}

/// A property reduced to what helps write parameters; `level` 0 keeps descriptions, 1 drops
/// them, 2 keeps only names, types, defaults and option values.
fn compact_property(p: &Value, level: usize, depth: usize) -> Value {
    let mut out = Map::new();
    for key in ["name", "displayName", "type"] {
        if let Some(v) = p.get(key).filter(|v| !v.is_null()) {
            if level >= 2 && key == "displayName" {
                continue;
            }
            out.insert(key.into(), v.clone());
        }
    }
    match p.get("default") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.is_empty() => {}
        Some(v) => {
            out.insert(
                "default".into(),
                crate::sanitize::shrink(v, crate::sanitize::Limits::new(100, 5, 2)),
            );
        }
    }
    if p["required"] == true {
        out.insert("required".into(), json!(true));
    }
    if level == 0 {
        if let Some(d) = p["description"].as_str().filter(|d| !d.is_empty()) {
            out.insert("description".into(), json!(truncate_str(d, 200)));
        }
    }
    if let Some(show) = p["displayOptions"].get("show").filter(|s| s.is_object()) {
        out.insert(
            "show".into(),
            crate::sanitize::shrink(show, crate::sanitize::Limits::new(80, 12, 3)),
        );
    }
    if let Some(opts) = p["options"].as_array() {
        let max = [40, 20, 12][level.min(2)];
        let ty = p["type"].as_str().unwrap_or_default();
        let rendered: Vec<Value> = if matches!(ty, "options" | "multiOptions") {
            opts.iter()
                .take(max)
                .map(|o| {
                    if level == 0 && o["name"] != o["value"] {
                        json!({"name": o["name"], "value": o["value"]})
                    } else {
                        o["value"].clone()
                    }
                })
                .collect()
        } else if depth < 1 && level < 2 {
            // collection / fixedCollection: nested properties (fixedCollection groups hold them
            // under `values`).
            opts.iter()
                .take(max)
                .map(|o| match o["values"].as_array() {
                    Some(values) => json!({
                        "name": o["name"],
                        "values": values.iter().map(|v| compact_property(v, level, depth + 1)).collect::<Vec<_>>(),
                    }),
                    None => compact_property(o, level, depth + 1),
                })
                .collect()
        } else {
            opts.iter().take(max).map(|o| o["name"].clone()).collect()
        };
        if opts.len() > max {
            out.insert(
                "optionsShown".into(),
                json!(format!("{max} of {}", opts.len())),
            );
        }
        out.insert("options".into(), Value::Array(rendered));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> NodeCatalog {
        NodeCatalog::from_json(&json!([
            {"name": "n8n-nodes-base.httpRequest", "displayName": "HTTP Request", "description": "Makes an HTTP request and returns the response data",
             "version": [3, 4, 4.1, 4.2], "defaultVersion": 4.2, "group": ["output"], "codex": {"alias": ["API", "Request", "URL"], "categories": ["Development"]},
             "properties": [
                {"name": "method", "displayName": "Method", "type": "options", "default": "GET", "options": [{"name": "GET", "value": "GET"}, {"name": "POST", "value": "POST"}]},
                {"name": "url", "displayName": "URL", "type": "string", "default": "", "required": true, "description": "The URL to make the request to"},
                {"name": "notice", "displayName": "n", "type": "notice", "default": ""}
             ]},
            {"name": "n8n-nodes-base.httpRequest", "displayName": "HTTP Request", "version": 1, "defaultVersion": 4.2, "group": ["output"],
             "properties": [{"name": "oldUrl", "type": "string", "default": ""}]},
            {"name": "n8n-nodes-base.slack", "displayName": "Slack", "description": "Consume Slack API", "version": [2, 2.1], "defaultVersion": 2.1, "group": ["output"],
             "credentials": [{"name": "slackApi", "required": true, "displayOptions": {"show": {"authentication": ["accessToken"]}}}],
             "properties": [
                {"name": "resource", "type": "options", "default": "message", "options": [{"name": "Message", "value": "message"}, {"name": "Channel", "value": "channel"}]},
                {"name": "operation", "type": "options", "default": "post", "displayOptions": {"show": {"resource": ["message"]}}, "options": [{"name": "Send", "value": "post"}]},
                {"name": "channelId", "type": "string", "default": "", "displayOptions": {"show": {"resource": ["channel"]}}}
             ]},
            {"name": "n8n-nodes-base.slackTrigger", "displayName": "Slack Trigger", "description": "Handle Slack events", "version": 1, "group": ["trigger"], "properties": []},
            {"name": "n8n-nodes-base.hiddenThing", "displayName": "Hidden", "version": 1, "hidden": true, "properties": []},
            {"no": "name"}
        ]))
        .unwrap()
    }

    #[test]
    fn search_ranks_names_then_aliases_then_descriptions() {
        let c = sample();
        assert_eq!(c.len(), 4);
        let (hits, total) = c.search("slack", 10);
        assert_eq!(total, 2);
        assert_eq!(hits[0]["nodeType"], "n8n-nodes-base.slack");
        assert_eq!(hits[1]["trigger"], true);
        let (hits, _) = c.search("url", 10);
        assert_eq!(hits[0]["nodeType"], "n8n-nodes-base.httpRequest");
        assert_eq!(hits[0]["versions"], json!([1, 3, 4, 4.1, 4.2]));
        assert_eq!(hits[0]["defaultVersion"], json!(4.2));
        let (all, total) = c.search("", 100);
        assert_eq!((all.len(), total), (3, 3), "hidden types are left out");
        assert_eq!(c.search("nothing-like-this", 10).1, 0);
        assert_eq!(
            c.similar("n8n-nodes-base.slackV2", 5),
            ["n8n-nodes-base.slack"]
        );
    }

    #[test]
    fn describe_picks_the_version_group_and_filters_by_operation() {
        let c = sample();
        let d = c
            .describe("n8n-nodes-base.httpRequest", None, None, None)
            .unwrap();
        assert_eq!(d["version"], json!(4.2));
        let names: Vec<&str> = d["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["method", "url"], "notices are not parameters");
        assert_eq!(d["parameters"][1]["required"], true);
        let d = c
            .describe("n8n-nodes-base.httpRequest", Some(1.0), None, None)
            .unwrap();
        assert_eq!(d["parameters"][0]["name"], "oldUrl");
        let d = c
            .describe("n8n-nodes-base.httpRequest", Some(9.0), None, None)
            .unwrap();
        assert!(d["versionNote"].as_str().unwrap().contains("not installed"));
        let d = c
            .describe("n8n-nodes-base.slack", None, Some("channel"), None)
            .unwrap();
        let names: Vec<&str> = d["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["resource", "channelId"]);
        assert_eq!(d["credentials"][0]["name"], "slackApi");
        assert!(c
            .describe("n8n-nodes-base.nope", None, None, None)
            .is_none());
        assert!(NodeCatalog::from_json(&json!({"a": 1})).is_err());
        assert!(NodeCatalog::from_json(&json!([])).is_err());
    }

    #[test]
    fn a_huge_type_is_cut_to_the_budget() {
        let props: Vec<Value> = (0..3000)
            .map(|i| json!({"name": format!("p{i}"), "displayName": format!("Parameter number {i}"), "type": "string", "default": "x".repeat(50), "description": "d".repeat(300)}))
            .collect();
        let c =
            NodeCatalog::from_json(&json!([{"name": "x.big", "version": 1, "properties": props}]))
                .unwrap();
        let d = c.describe("x.big", None, None, None).unwrap();
        assert!(estimate_tokens(&d) <= DESCRIBE_BUDGET);
        assert!(d["parametersTruncated"]
            .as_str()
            .unwrap()
            .contains("of 3000 parameters"));
        assert!(!d["parameters"].as_array().unwrap().is_empty());
    }
}
