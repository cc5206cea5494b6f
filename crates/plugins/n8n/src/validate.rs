//! Checks a workflow against the instance's node types before it is saved
//! (`n8n.workflows.build`): every problem names the node and, where there is one, the
//! parameter, so a model can fix it in one edit.
//!
//! What is checked:
//! - the node type is installed and `typeVersion` is one of its versions;
//! - every parameter exists in that version and its value has the parameter's type (an
//!   expression, a string starting with `=`, fits any type; options without a load method must
//!   be one of the listed values);
//! - every required parameter shown for the node's settings is set;
//! - connections name existing nodes, an output type the source has and, where the number of
//!   outputs is fixed, an output index below it (one more with `onError:
//!   continueErrorOutput`);
//! - credentials name a type the node takes, and the credential exists with that type.
//!
//! Where the node catalog cannot say (outputs computed by an expression, display conditions
//! this module does not know), the check passes rather than rejecting a valid workflow.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::catalog::NodeCatalog;

/// Most problems listed in one answer.
pub const MAX_PROBLEMS: usize = 30;

/// One problem of a workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The node it concerns (the source node for a connection).
    pub node: String,
    /// The parameter, when it concerns one.
    pub parameter: Option<String>,
    /// What is wrong and, where possible, what would be right.
    pub message: String,
}

impl Problem {
    fn node(node: &str, message: String) -> Self {
        Self {
            node: node.into(),
            parameter: None,
            message,
        }
    }

    fn parameter(node: &str, parameter: &str, message: String) -> Self {
        Self {
            node: node.into(),
            parameter: Some(parameter.into()),
            message,
        }
    }

    /// The problem as JSON: `{node, parameter?, message}`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"node": self.node, "message": self.message});
        if let Some(p) = &self.parameter {
            v["parameter"] = json!(p);
        }
        v
    }
}

/// The instance's credentials: id → type.
pub type Credentials = BTreeMap<String, String>;

/// Every problem of `w` (`{nodes, connections}`), at most [`MAX_PROBLEMS`]. `credentials` is
/// `None` when they could not be listed (then only the types are checked).
pub fn validate(
    catalog: &NodeCatalog,
    w: &Value,
    credentials: Option<&Credentials>,
) -> Vec<Problem> {
    let mut out = Vec::new();
    let nodes: Vec<&Value> = w["nodes"].as_array().into_iter().flatten().collect();
    for n in &nodes {
        check_node(catalog, n, credentials, &mut out);
    }
    check_connections(catalog, &nodes, &w["connections"], &mut out);
    out.truncate(MAX_PROBLEMS);
    out
}

fn check_node(
    catalog: &NodeCatalog,
    n: &Value,
    credentials: Option<&Credentials>,
    out: &mut Vec<Problem>,
) {
    let name = n["name"].as_str().unwrap_or_default();
    let ty = n["type"].as_str().unwrap_or_default();
    if !catalog.contains(ty) {
        let similar = catalog.similar(ty, 5);
        let hint = if similar.is_empty() {
            "find one with n8n.nodes.search".to_string()
        } else {
            format!("did you mean {}?", similar.join(", "))
        };
        out.push(Problem::node(
            name,
            format!("the node type '{ty}' is not installed; {hint}"),
        ));
        return;
    }
    let Some(version) = n["typeVersion"].as_f64() else {
        out.push(Problem::node(name, "typeVersion is not a number".into()));
        return;
    };
    let Some(entry) = catalog.entry(ty, version) else {
        let versions: Vec<String> = catalog.versions(ty).iter().map(Value::to_string).collect();
        out.push(Problem::node(
            name,
            format!(
                "typeVersion {version} is not a version of {ty} (installed: {})",
                versions.join(", ")
            ),
        ));
        return;
    };
    let params = &n["parameters"];
    if !params.is_null() && !params.is_object() {
        out.push(Problem::node(name, "parameters must be an object".into()));
        return;
    }
    let props: Vec<&Value> = entry["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let ctx = Shown {
        props: &props,
        params,
        version,
    };
    for (key, value) in params.as_object().into_iter().flatten() {
        let candidates: Vec<&&Value> = props.iter().filter(|p| p["name"] == *key).collect();
        if candidates.is_empty() {
            out.push(Problem::parameter(
                name,
                key,
                format!(
                    "{ty}@{version} has no parameter '{key}'; see n8n.nodes.get_type for its parameters"
                ),
            ));
            continue;
        }
        // Properties of one name differ by display options (and so by type or options): the
        // value is wrong only when it fits none of them; the one shown says why.
        if candidates.iter().any(|p| type_problem(p, value).is_none()) {
            continue;
        }
        let prop = candidates
            .iter()
            .find(|p| ctx.shown(p) == Some(true))
            .unwrap_or(&candidates[0]);
        if let Some(m) = type_problem(prop, value) {
            out.push(Problem::parameter(name, key, m));
        }
    }
    for p in &props {
        if p["required"].as_bool() != Some(true) || ctx.shown(p) != Some(true) {
            continue;
        }
        let key = p["name"].as_str().unwrap_or_default();
        let value = params.get(key).unwrap_or(&p["default"]);
        if is_empty(value) {
            out.push(Problem::parameter(
                name,
                key,
                format!(
                    "the required parameter '{key}' ({}) is not set",
                    p["displayName"].as_str().unwrap_or(key)
                ),
            ));
        }
    }
    check_credentials(name, ty, entry, &n["credentials"], credentials, out);
}

fn check_credentials(
    name: &str,
    ty: &str,
    entry: &Value,
    given: &Value,
    credentials: Option<&Credentials>,
    out: &mut Vec<Problem>,
) {
    let takes = crate::catalog::credential_names(entry);
    let any = crate::catalog::takes_any_credential(entry);
    for (cred_type, c) in given.as_object().into_iter().flatten() {
        if !any && !takes.contains(&cred_type.as_str()) {
            out.push(Problem::node(
                name,
                format!(
                    "{ty} takes no credential of type '{cred_type}' (it takes: {})",
                    if takes.is_empty() {
                        "none".to_string()
                    } else {
                        takes.join(", ")
                    }
                ),
            ));
            continue;
        }
        // A credential named without an id (an imported workflow) is resolved by n8n.
        let Some(id) = c["id"].as_str().filter(|id| !id.is_empty()) else {
            continue;
        };
        match credentials.map(|all| all.get(id)) {
            Some(None) => out.push(Problem::node(
                name,
                format!("the credential '{id}' ({cred_type}) does not exist; see n8n.credentials.list or n8n.credentials.setup"),
            )),
            Some(Some(actual)) if actual != cred_type => out.push(Problem::node(
                name,
                format!("the credential '{id}' is of type '{actual}', not '{cred_type}'"),
            )),
            _ => {}
        }
    }
}

/// Whether a property is shown, given a node's parameters and version.
struct Shown<'a> {
    props: &'a [&'a Value],
    params: &'a Value,
    version: f64,
}

impl Shown<'_> {
    /// How deep a parameter's default may depend on other parameters' display conditions.
    const MAX_DEPTH: usize = 4;

    /// `Some(true)` shown, `Some(false)` hidden, `None` when a condition is not understood.
    fn shown(&self, p: &Value) -> Option<bool> {
        self.shown_at(p, 0)
    }

    fn shown_at(&self, p: &Value, depth: usize) -> Option<bool> {
        let opts = &p["displayOptions"];
        if let Some(show) = opts["show"].as_object() {
            for (k, allowed) in show {
                if !self.any_matches(k, allowed, depth)? {
                    return Some(false);
                }
            }
        }
        if let Some(hide) = opts["hide"].as_object() {
            for (k, hidden) in hide {
                if self.any_matches(k, hidden, depth)? {
                    return Some(false);
                }
            }
        }
        Some(true)
    }

    fn any_matches(&self, key: &str, allowed: &Value, depth: usize) -> Option<bool> {
        let value = self.value_of(key, depth)?;
        let mut any = false;
        for a in allowed.as_array()? {
            if matches(a, &value)? {
                any = true;
            }
        }
        Some(any)
    }

    fn value_of(&self, key: &str, depth: usize) -> Option<Value> {
        if key == "@version" {
            return Some(json!(self.version));
        }
        let key = key.strip_prefix('/').unwrap_or(key);
        if key.contains('.') || key.starts_with('@') {
            return None;
        }
        if let Some(v) = self.params.get(key) {
            return Some(v.clone());
        }
        // A parameter not given counts as the default of the property of that name that is
        // itself shown (properties of one name, e.g. `operation` per `resource`, differ by
        // display options and defaults); past the depth, or when none is, the first.
        let candidates: Vec<&&Value> = self.props.iter().filter(|p| p["name"] == key).collect();
        let first = candidates.first()?;
        if depth < Self::MAX_DEPTH {
            if let Some(p) = candidates
                .iter()
                .find(|p| self.shown_at(p, depth + 1) == Some(true))
            {
                return Some(p["default"].clone());
            }
        }
        Some(first["default"].clone())
    }
}

/// One allowed value (or `_cnd` condition) against a value.
fn matches(allowed: &Value, value: &Value) -> Option<bool> {
    let Some(cnd) = allowed.get("_cnd").and_then(Value::as_object) else {
        return Some(loose_eq(allowed, value));
    };
    let (op, arg) = cnd.iter().next()?;
    let num = || Some((value.as_f64()?, arg.as_f64()?));
    Some(match op.as_str() {
        "eq" => loose_eq(arg, value),
        "not" => !loose_eq(arg, value),
        "gte" => num().is_some_and(|(v, a)| v >= a),
        "lte" => num().is_some_and(|(v, a)| v <= a),
        "gt" => num().is_some_and(|(v, a)| v > a),
        "lt" => num().is_some_and(|(v, a)| v < a),
        "between" => {
            let v = value.as_f64()?;
            v >= arg["from"].as_f64()? && v <= arg["to"].as_f64()?
        }
        "startsWith" => value.as_str()?.starts_with(arg.as_str()?),
        "endsWith" => value.as_str()?.ends_with(arg.as_str()?),
        "includes" => value.as_str()?.contains(arg.as_str()?),
        "exists" => !value.is_null(),
        _ => return None,
    })
}

fn loose_eq(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Object(o) => o.get("__rl").is_some() && is_empty(&o["value"]),
        _ => false,
    }
}

/// What is wrong with `value` for the property `p`, if anything.
fn type_problem(p: &Value, value: &Value) -> Option<String> {
    if value.as_str().is_some_and(|s| s.starts_with('=')) {
        return None;
    }
    // A parameter that takes several values holds an array of them.
    if p["typeOptions"]["multipleValues"] == true && value.is_array() {
        let mut one = p.clone();
        one["typeOptions"]["multipleValues"] = Value::Bool(false);
        return value
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|v| type_problem(&one, v))
            .map(|m| format!("an item {m}"));
    }
    let ty = p["type"].as_str().unwrap_or_default();
    let ok = match ty {
        "string" | "color" | "hidden" => value.is_string(),
        "dateTime" => value.is_string() || value.is_number(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "json" => true,
        "multiOptions" => value.is_array(),
        "collection" | "fixedCollection" | "filter" | "assignmentCollection" | "resourceMapper" => {
            value.is_object()
        }
        "resourceLocator" => {
            value.is_string() || value.get("__rl").is_some() || value.get("mode").is_some()
        }
        "options" => return options_problem(p, value),
        _ => true,
    };
    (!ok).then(|| {
        format!(
            "must be {} (type {ty}), got {}",
            expected(ty),
            crate::sanitize::truncate_str(&value.to_string(), 80)
        )
    })
}

fn expected(ty: &str) -> &'static str {
    match ty {
        "number" => "a number",
        "boolean" => "true or false",
        "multiOptions" => "an array",
        "collection" | "fixedCollection" | "filter" | "assignmentCollection" | "resourceMapper" => {
            "an object"
        }
        "resourceLocator" => "a resource locator {\"__rl\":true,\"mode\":...,\"value\":...}",
        _ => "a string",
    }
}

fn options_problem(p: &Value, value: &Value) -> Option<String> {
    let dynamic = p["typeOptions"]["loadOptionsMethod"].is_string()
        || p["typeOptions"]["loadOptions"].is_object()
        || p["typeOptions"]["loadOptionsDependsOn"].is_array();
    let listed: BTreeSet<String> = p["options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o.get("value"))
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
        .collect();
    if dynamic || listed.is_empty() {
        return None;
    }
    let v = value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string);
    (!listed.contains(&v)).then(|| {
        let shown: Vec<&str> = listed.iter().take(20).map(String::as_str).collect();
        format!(
            "{} is not one of its options: {}{}",
            crate::sanitize::truncate_str(&value.to_string(), 60),
            shown.join(", "),
            if listed.len() > 20 { ", ..." } else { "" }
        )
    })
}

/// How many outputs of `ty` a node has: `None` when the catalog cannot say.
fn output_count(entry: &Value, node: &Value, ty: &str) -> Option<usize> {
    let outputs = entry["outputs"].as_array()?;
    let mut count = outputs
        .iter()
        .filter(|o| o.as_str() == Some(ty) || o["type"].as_str() == Some(ty))
        .count();
    if ty == "main" && node["onError"] == "continueErrorOutput" {
        count += 1;
    }
    Some(count)
}

fn check_connections(
    catalog: &NodeCatalog,
    nodes: &[&Value],
    connections: &Value,
    out: &mut Vec<Problem>,
) {
    let by_name: BTreeMap<&str, &Value> = nodes
        .iter()
        .filter_map(|n| Some((n["name"].as_str()?, *n)))
        .collect();
    for (source, types) in connections.as_object().into_iter().flatten() {
        let Some(node) = by_name.get(source.as_str()) else {
            out.push(Problem::node(
                source,
                format!("a connection starts at {source:?}, which is not a node of the workflow"),
            ));
            continue;
        };
        let entry = node["typeVersion"]
            .as_f64()
            .and_then(|v| catalog.entry(node["type"].as_str().unwrap_or_default(), v));
        for (ty, outputs) in types.as_object().into_iter().flatten() {
            let count = entry.and_then(|e| output_count(e, node, ty));
            for (o, targets) in outputs.as_array().into_iter().flatten().enumerate() {
                let targets = targets.as_array().map(Vec::as_slice).unwrap_or_default();
                if targets.is_empty() {
                    continue;
                }
                match count {
                    Some(0) => out.push(Problem::node(
                        source,
                        format!("{source:?} has no '{ty}' output"),
                    )),
                    Some(c) if o >= c => out.push(Problem::node(
                        source,
                        format!(
                            "{source:?} has {c} '{ty}' output(s) (indexes 0-{}); output {o} does not exist",
                            c - 1
                        ),
                    )),
                    _ => {}
                }
                for t in targets {
                    let target = t["node"].as_str().unwrap_or_default();
                    if !by_name.contains_key(target) {
                        out.push(Problem::node(
                            source,
                            format!("{source:?} connects to {target:?}, which is not a node of the workflow"),
                        ));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> NodeCatalog {
        NodeCatalog::from_json(&json!([
            {"name": "n8n-nodes-base.webhook", "version": [1, 2], "outputs": "={{...}}", "inputs": [],
             "properties": [
                {"name": "httpMethod", "type": "options", "default": "GET",
                 "options": [{"name": "GET", "value": "GET"}, {"name": "POST", "value": "POST"}]},
                {"name": "path", "type": "string", "default": "", "required": true},
                {"name": "limit", "type": "number", "default": 5,
                 "displayOptions": {"show": {"@version": [{"_cnd": {"gte": 2}}]}}},
                {"name": "secret", "type": "string", "default": "", "required": true,
                 "displayOptions": {"show": {"httpMethod": ["POST"]}}}
             ]},
            {"name": "n8n-nodes-base.if", "version": [2, 2.2], "outputs": ["main", "main"], "inputs": ["main"],
             "properties": [{"name": "conditions", "type": "filter", "default": {}}],
             "credentials": [{"name": "httpBasicAuth", "required": false}]}
        ]))
        .unwrap()
    }

    fn creds() -> Credentials {
        [
            ("7".to_string(), "httpBasicAuth".to_string()),
            ("8".to_string(), "slackApi".to_string()),
        ]
        .into_iter()
        .collect()
    }

    fn messages(w: Value) -> Vec<String> {
        validate(&catalog(), &w, Some(&creds()))
            .into_iter()
            .map(|p| {
                format!(
                    "{} {}: {}",
                    p.node,
                    p.parameter.unwrap_or_default(),
                    p.message
                )
            })
            .collect()
    }

    #[test]
    fn a_valid_workflow_has_no_problems() {
        let w = json!({"nodes": [
            {"name": "In", "type": "n8n-nodes-base.webhook", "typeVersion": 2,
             "parameters": {"path": "x", "httpMethod": "POST", "secret": "={{ $env.S }}", "limit": 3}},
            {"name": "Check", "type": "n8n-nodes-base.if", "typeVersion": 2.2, "parameters": {"conditions": {}},
             "credentials": {"httpBasicAuth": {"id": "7"}}}
        ], "connections": {
            "In": {"main": [[{"node": "Check", "type": "main", "index": 0}]]},
            "Check": {"main": [[], [{"node": "In", "type": "main", "index": 0}]]}
        }});
        assert_eq!(messages(w), Vec::<String>::new());
    }

    #[test]
    fn each_problem_names_the_node_and_parameter() {
        let w = json!({"nodes": [
            {"name": "In", "type": "n8n-nodes-base.webhook", "typeVersion": 2,
             "parameters": {"httpMethod": "PUT", "limit": "five", "colour": 1}},
            {"name": "Old", "type": "n8n-nodes-base.if", "typeVersion": 1, "parameters": {}},
            {"name": "Hook2", "type": "n8n-nodes-base.webhok", "typeVersion": 1},
            {"name": "Check", "type": "n8n-nodes-base.if", "typeVersion": 2,
             "credentials": {"httpBasicAuth": {"id": "8"}, "slackApi": {"id": "8"}}},
            {"name": "Check2", "type": "n8n-nodes-base.if", "typeVersion": 2,
             "credentials": {"httpBasicAuth": {"id": "99"}}}
        ], "connections": {
            "Check": {"main": [[], [], [{"node": "In", "type": "main", "index": 0}]],
                      "ai_tool": [[{"node": "In", "type": "ai_tool", "index": 0}]]},
            "In": {"main": [[{"node": "Nowhere", "type": "main", "index": 0}]]},
            "Ghost": {"main": [[{"node": "In", "type": "main", "index": 0}]]}
        }});
        let m = messages(w);
        let expect = [
            "In httpMethod: \"PUT\" is not one of its options: GET, POST",
            "In limit: must be a number (type number), got \"five\"",
            "In colour: n8n-nodes-base.webhook@2 has no parameter 'colour'",
            "In path: the required parameter 'path' (path) is not set",
            "Old : typeVersion 1 is not a version of n8n-nodes-base.if (installed: 2, 2.2)",
            "Hook2 : the node type 'n8n-nodes-base.webhok' is not installed; did you mean n8n-nodes-base.webhook?",
            "Check : the credential '8' is of type 'slackApi', not 'httpBasicAuth'",
            "Check : n8n-nodes-base.if takes no credential of type 'slackApi' (it takes: httpBasicAuth)",
            "Check2 : the credential '99' (httpBasicAuth) does not exist",
            "Check : \"Check\" has 2 'main' output(s) (indexes 0-1); output 2 does not exist",
            "Check : \"Check\" has no 'ai_tool' output",
            "In : \"In\" connects to \"Nowhere\", which is not a node of the workflow",
            "Ghost : a connection starts at \"Ghost\", which is not a node of the workflow",
        ];
        for e in expect {
            assert!(
                m.iter().any(|x| x.starts_with(e)),
                "missing {e:?} in {m:#?}"
            );
        }
        // `secret` is required only for POST: with PUT (not an option, but the value counts)
        // it is hidden and not reported.
        assert!(!m.iter().any(|x| x.contains("'secret'")), "{m:#?}");
        assert_eq!(m.len(), expect.len(), "{m:#?}");
    }

    #[test]
    fn a_value_that_fits_any_property_of_its_name_is_accepted() {
        let c = NodeCatalog::from_json(&json!([
            {"name": "n8n-nodes-base.x", "version": 1, "outputs": ["main"], "inputs": ["main"],
             "properties": [
                {"name": "mode", "type": "options", "default": "a",
                 "options": [{"value": "a"}, {"value": "b"}],
                 "displayOptions": {"show": {"kind": ["one"]}}},
                {"name": "mode", "type": "options", "default": "c",
                 "options": [{"value": "c"}],
                 "displayOptions": {"show": {"kind": ["two"]}}},
                {"name": "kind", "type": "options", "default": "one",
                 "options": [{"value": "one"}, {"value": "two"}]}
             ]}
        ]))
        .unwrap();
        let node = |mode: &str| {
            json!({"nodes": [{"name": "N", "type": "n8n-nodes-base.x", "typeVersion": 1,
                              "parameters": {"kind": "two", "mode": mode}}], "connections": {}})
        };
        assert!(validate(&c, &node("c"), None).is_empty());
        assert!(
            validate(&c, &node("a"), None).is_empty(),
            "fits the other 'mode'"
        );
        let p = validate(&c, &node("z"), None);
        assert_eq!(p.len(), 1);
        assert!(p[0].message.contains("not one of its options: c"), "{p:?}");
    }

    #[test]
    fn any_credential_type_and_lists_of_values_are_accepted_where_the_node_allows_them() {
        let c = NodeCatalog::from_json(&json!([
            {"name": "n8n-nodes-base.httpRequest", "version": 4.2, "outputs": ["main"], "inputs": ["main"],
             "credentials": [{"name": "httpSslAuth"}],
             "properties": [
                {"name": "genericAuthType", "type": "credentialsSelect", "default": ""},
                {"name": "to", "type": "string", "default": [], "typeOptions": {"multipleValues": true}}
             ]}
        ]))
        .unwrap();
        let creds: Credentials = [("7".to_string(), "httpHeaderAuth".to_string())]
            .into_iter()
            .collect();
        let w = |to: Value, cred: &str| {
            json!({"nodes": [{"name": "H", "type": "n8n-nodes-base.httpRequest", "typeVersion": 4.2,
                              "parameters": {"genericAuthType": "httpHeaderAuth", "to": to},
                              "credentials": {cred: {"id": "7"}}}], "connections": {}})
        };
        assert!(validate(&c, &w(json!(["a", "b"]), "httpHeaderAuth"), Some(&creds)).is_empty());
        let p = validate(&c, &w(json!(["a", 1]), "httpHeaderAuth"), Some(&creds));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].message.starts_with("an item must be a string"),
            "{p:?}"
        );
        // The credential must still exist with the type it is given as.
        let p = validate(&c, &w(json!([]), "slackApi"), Some(&creds));
        assert!(
            p[0].message
                .contains("is of type 'httpHeaderAuth', not 'slackApi'"),
            "{p:?}"
        );
    }

    #[test]
    fn a_missing_parameter_takes_the_default_of_its_shown_variant() {
        // `operation` defaults to "send" for resource "message" and to "get" for "channel";
        // `text` is required only for the send operation.
        let c = NodeCatalog::from_json(&json!([
            {"name": "n8n-nodes-base.chat", "version": 1, "outputs": ["main"], "inputs": ["main"],
             "properties": [
                {"name": "resource", "type": "options", "default": "message",
                 "options": [{"value": "message"}, {"value": "channel"}]},
                {"name": "operation", "type": "options", "default": "send",
                 "options": [{"value": "send"}], "displayOptions": {"show": {"resource": ["message"]}}},
                {"name": "operation", "type": "options", "default": "get",
                 "options": [{"value": "get"}], "displayOptions": {"show": {"resource": ["channel"]}}},
                {"name": "text", "type": "string", "default": "", "required": true,
                 "displayOptions": {"show": {"operation": ["send"]}}}
             ]}
        ]))
        .unwrap();
        let node = |params: Value| {
            json!({"nodes": [{"name": "C", "type": "n8n-nodes-base.chat", "typeVersion": 1,
                              "parameters": params}], "connections": {}})
        };
        assert!(validate(&c, &node(json!({"resource": "channel"})), None).is_empty());
        let p = validate(&c, &node(json!({})), None);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].parameter.as_deref(), Some("text"));
    }

    #[test]
    fn version_conditions_and_error_outputs_are_understood() {
        // `limit` exists only from version 2 on, but existence is by name: it is not reported
        // for version 1; a required parameter hidden by version is not required.
        let w = json!({"nodes": [
            {"name": "In", "type": "n8n-nodes-base.webhook", "typeVersion": 1,
             "parameters": {"path": "p"}, "onError": "continueErrorOutput"},
            {"name": "Check", "type": "n8n-nodes-base.if", "typeVersion": 2.2, "parameters": {},
             "onError": "continueErrorOutput"}
        ], "connections": {
            "Check": {"main": [[], [], [{"node": "In", "type": "main", "index": 0}]]}
        }});
        assert_eq!(messages(w), Vec::<String>::new());
    }
}
