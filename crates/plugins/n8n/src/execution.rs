//! A read-only view over the JSON n8n returns for `GET /executions/:id?includeData=true`.
//!
//! The facts an agent needs are spread over the reply, and this module is where they are put
//! together correctly:
//! - a node's type, parameters and `onError` come from `workflowData.nodes` (run data has none);
//! - a node may run many times (loops): `runData[name]` is a list of runs, each with its own
//!   outputs (`data.main[branch]`), several branches for IF/Switch and the error output;
//! - a node's input is the output branch of the node that fed it (`source`), not its own output;
//! - a run's end is `startTime + executionTime`;
//! - sticky notes are canvas decorations, not nodes.

use serde_json::{json, Map, Value};

use crate::sanitize::{scrub, truncate_str};

/// The n8n type of sticky notes, which are not nodes.
pub const STICKY_NOTE: &str = "n8n-nodes-base.stickyNote";

/// An execution reply, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct Execution<'a> {
    pub raw: &'a Value,
}

/// One node of the workflow, with what the execution says about it.
#[derive(Debug, Clone)]
pub struct NodeView<'a> {
    pub name: &'a str,
    /// From `workflowData.nodes`; `None` if the node is not in the workflow snapshot.
    pub def: Option<&'a Value>,
    pub runs: &'a [Value],
}

impl<'a> Execution<'a> {
    pub fn new(raw: &'a Value) -> Self {
        Self { raw }
    }

    pub fn id(&self) -> String {
        value_to_string(&self.raw["id"])
    }

    pub fn workflow_id(&self) -> String {
        let id = &self.raw["workflowId"];
        if id.is_null() {
            value_to_string(&self.raw["workflowData"]["id"])
        } else {
            value_to_string(id)
        }
    }

    pub fn workflow_name(&self) -> Option<&'a str> {
        self.raw["workflowData"]["name"].as_str()
    }

    pub fn status(&self) -> String {
        if let Some(s) = self.raw["status"].as_str() {
            return s.to_string();
        }
        match self.raw["finished"].as_bool() {
            Some(true) => "success".into(),
            _ => "unknown".into(),
        }
    }

    /// `true` when n8n left the data out because it is too big to display.
    pub fn data_too_large(&self) -> bool {
        self.raw["dataTooLargeToDisplay"].as_bool() == Some(true)
    }

    /// `true` when n8n redacted the item data.
    pub fn redacted(&self) -> bool {
        self.raw["data"]["redactionInfo"]["isRedacted"].as_bool() == Some(true)
    }

    /// `true` when the reply carries run data at all (not metadata-only).
    pub fn has_data(&self) -> bool {
        self.raw["data"]["resultData"]["runData"].is_object()
    }

    fn run_data(&self) -> Option<&'a Map<String, Value>> {
        self.raw["data"]["resultData"]["runData"].as_object()
    }

    /// The workflow's node definitions, sticky notes excluded.
    pub fn node_defs(&self) -> Vec<&'a Value> {
        self.raw["workflowData"]["nodes"]
            .as_array()
            .map(|nodes| {
                nodes
                    .iter()
                    .filter(|n| n["type"].as_str() != Some(STICKY_NOTE))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The definition of node `name` in `workflowData`; `None` for a sticky note (a canvas
    /// decoration, not a node).
    pub fn node_def(&self, name: &str) -> Option<&'a Value> {
        self.raw["workflowData"]["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["name"].as_str() == Some(name))
            .filter(|n| n["type"].as_str() != Some(STICKY_NOTE))
    }

    /// The runs of node `name` (empty if it did not run).
    pub fn runs(&self, name: &str) -> &'a [Value] {
        self.run_data()
            .and_then(|rd| rd.get(name))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Nodes that ran, in the order they first ran, then nodes that did not run, in workflow
    /// order. Sticky notes are left out.
    pub fn nodes(&self) -> Vec<NodeView<'a>> {
        let mut ran: Vec<(f64, NodeView<'a>)> = Vec::new();
        if let Some(rd) = self.run_data() {
            for (name, runs) in rd {
                let runs = runs.as_array().map(Vec::as_slice).unwrap_or(&[]);
                let is_sticky = self.raw["workflowData"]["nodes"]
                    .as_array()
                    .and_then(|n| n.iter().find(|n| n["name"].as_str() == Some(name.as_str())))
                    .is_some_and(|n| n["type"].as_str() == Some(STICKY_NOTE));
                if is_sticky {
                    continue;
                }
                let def = self.node_def(name);
                let order = runs
                    .first()
                    .map(|r| {
                        r["executionIndex"]
                            .as_f64()
                            .or_else(|| r["startTime"].as_f64())
                            .unwrap_or(f64::MAX)
                    })
                    .unwrap_or(f64::MAX);
                ran.push((order, NodeView { name, def, runs }));
            }
        }
        ran.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        let mut out: Vec<NodeView<'a>> = ran.into_iter().map(|(_, n)| n).collect();
        for def in self.node_defs() {
            if let Some(name) = def["name"].as_str() {
                if !out.iter().any(|n| n.name == name) {
                    out.push(NodeView {
                        name,
                        def: Some(def),
                        runs: &[],
                    });
                }
            }
        }
        out
    }

    /// The node whose error stopped the execution, if any.
    pub fn failed_node(&self) -> Option<String> {
        // A run with executionStatus "error" (or an error object) is the most precise signal.
        let mut failed: Option<(f64, String)> = None;
        for n in self.nodes() {
            for r in n.runs {
                if run_failed(r) {
                    let idx = r["executionIndex"].as_f64().unwrap_or(0.0);
                    if failed.as_ref().is_none_or(|(i, _)| idx >= *i) {
                        failed = Some((idx, n.name.to_string()));
                    }
                }
            }
        }
        if let Some((_, name)) = failed {
            return Some(name);
        }
        let rd = &self.raw["data"]["resultData"];
        if let Some(name) = rd["error"]["node"]["name"].as_str() {
            return Some(name.to_string());
        }
        if rd["error"].is_object() || rd["redactedError"].is_object() || self.status() == "error" {
            if let Some(last) = rd["lastNodeExecuted"].as_str() {
                return Some(last.to_string());
            }
        }
        None
    }

    /// The execution-level error (`resultData.error`), compacted.
    pub fn execution_error(&self) -> Option<Value> {
        let rd = &self.raw["data"]["resultData"];
        compact_error(&rd["error"]).or_else(|| compact_redacted_error(&rd["redactedError"]))
    }

    /// Input items of run `run` of node `name`, as `(sources, items)`.
    ///
    /// Follows `source` to the feeding node's output branch and run. Only when no source can be
    /// followed (none recorded, or the feeding run is missing) does it fall back to the run's
    /// `inputOverride`, then to the node's entry in `executionData.nodeExecutionStack` (where a
    /// node that failed before writing its run still has its input). A source that resolves to
    /// an empty branch is an input of zero items, not a reason to look elsewhere.
    pub fn input_of(&self, name: &str, run: usize) -> (Vec<Value>, Vec<&'a Value>) {
        let runs = self.runs(name);
        let mut sources = Vec::new();
        let mut items: Vec<&'a Value> = Vec::new();
        let mut resolved = false;
        if let Some(r) = runs.get(run) {
            if let Some(srcs) = r["source"].as_array() {
                for (input_index, s) in srcs.iter().enumerate() {
                    let Some(prev) = s["previousNode"].as_str() else {
                        continue;
                    };
                    let out = s["previousNodeOutput"].as_u64().unwrap_or(0) as usize;
                    let prev_run = s["previousNodeRun"].as_u64().unwrap_or(0) as usize;
                    let from = self
                        .runs(prev)
                        .get(prev_run)
                        .and_then(|pr| pr["data"]["main"].get(out))
                        .and_then(Value::as_array);
                    sources.push(json!({
                        "input": input_index,
                        "node": prev,
                        "outputIndex": out,
                        "run": prev_run,
                        "itemCount": from.map_or(0, Vec::len),
                    }));
                    if let Some(from) = from {
                        resolved = true;
                        items.extend(from.iter());
                    }
                }
            }
            if !resolved {
                if let Some(branches) = r["inputOverride"]["main"].as_array() {
                    for b in branches {
                        if let Some(b) = b.as_array() {
                            items.extend(b.iter());
                        }
                    }
                    resolved = true;
                    sources.push(json!({"from": "inputOverride", "itemCount": items.len()}));
                }
            }
        }
        if !resolved {
            let stack = self.raw["data"]["executionData"]["nodeExecutionStack"].as_array();
            if let Some(entry) =
                stack.and_then(|s| s.iter().find(|e| e["node"]["name"].as_str() == Some(name)))
            {
                if let Some(branches) = entry["data"]["main"].as_array() {
                    for b in branches {
                        if let Some(b) = b.as_array() {
                            items.extend(b.iter());
                        }
                    }
                }
                if sources.is_empty() {
                    if let Some(srcs) = entry["source"]["main"].as_array() {
                        for (input_index, s) in srcs.iter().enumerate() {
                            sources.push(json!({
                                "input": input_index,
                                "node": s["previousNode"],
                                "outputIndex": s["previousNodeOutput"].as_u64().unwrap_or(0),
                                "run": s["previousNodeRun"].as_u64().unwrap_or(0),
                            }));
                        }
                    }
                }
                sources.push(json!({"from": "nodeExecutionStack", "itemCount": items.len()}));
            }
        }
        (sources, items)
    }
}

/// `true` if the run ended in an error.
pub fn run_failed(run: &Value) -> bool {
    run["executionStatus"].as_str() == Some("error")
        || run["error"].is_object()
        || run["redactedError"].is_object()
}

/// The status of a node over all its runs: `error` if any failed, else the last run's status.
pub fn node_status(runs: &[Value]) -> String {
    if runs.is_empty() {
        return "not_executed".into();
    }
    if runs.iter().any(run_failed) {
        return "error".into();
    }
    runs.last()
        .and_then(|r| r["executionStatus"].as_str())
        .unwrap_or("success")
        .to_string()
}

/// Items over all output branches of all runs (every connection type).
pub fn output_item_count(runs: &[Value]) -> usize {
    runs.iter()
        .filter_map(|r| r["data"].as_object())
        .flat_map(|d| d.values())
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_array)
        .map(Vec::len)
        .sum()
}

/// An error object reduced to what helps: name, message, description, httpCode, messages.
/// Stack traces, request details and the node copy are left out.
pub fn compact_error(err: &Value) -> Option<Value> {
    let obj = err.as_object()?;
    let mut out = Map::new();
    for key in ["name", "message", "description", "httpCode"] {
        match obj.get(key) {
            Some(Value::Null) | None => {}
            Some(Value::String(s)) => {
                out.insert(key.into(), Value::String(truncate_str(s, 1000)));
            }
            Some(v) => {
                out.insert(key.into(), v.clone());
            }
        }
    }
    if let Some(Value::Array(msgs)) = obj.get("messages") {
        let msgs: Vec<Value> = msgs
            .iter()
            .take(3)
            .map(|m| match m {
                Value::String(s) => Value::String(truncate_str(s, 300)),
                other => other.clone(),
            })
            .collect();
        if !msgs.is_empty() {
            out.insert("messages".into(), Value::Array(msgs));
        }
    }
    if let Some(line) = obj.get("lineNumber").filter(|v| !v.is_null()) {
        out.insert("lineNumber".into(), line.clone());
    }
    if let Some(idx) = obj
        .get("context")
        .and_then(|c| c.get("itemIndex"))
        .filter(|v| !v.is_null())
    {
        out.insert("itemIndex".into(), idx.clone());
    }
    if out.is_empty() {
        return None;
    }
    let mut v = Value::Object(out);
    scrub(&mut v);
    Some(v)
}

/// What is left of an error when n8n redacted the execution data.
pub fn compact_redacted_error(err: &Value) -> Option<Value> {
    let ty = err["type"].as_str()?;
    Some(json!({
        "name": ty,
        "message": "the error message is redacted by the workflow's redaction policy",
    }))
}

/// The compact error of one run, if it failed.
pub fn run_error(run: &Value) -> Option<Value> {
    compact_error(&run["error"]).or_else(|| compact_redacted_error(&run["redactedError"]))
}

/// Epoch milliseconds as an RFC 3339 UTC timestamp.
pub fn millis_to_iso(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// Milliseconds between two RFC 3339 timestamps.
pub fn duration_ms(start: &Value, stop: &Value) -> Option<i64> {
    let a = chrono::DateTime::parse_from_rfc3339(start.as_str()?).ok()?;
    let b = chrono::DateTime::parse_from_rfc3339(stop.as_str()?).ok()?;
    Some((b - a).num_milliseconds())
}

/// A JSON id (string or number) as a string.
pub fn value_to_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use toolshed_testing::fixture;

    #[test]
    fn loop_nodes_are_in_execution_order_with_all_runs() {
        let raw = fixture!("execution-loop-success-id3.includeData.raw.json");
        let e = Execution::new(&raw);
        let names: Vec<_> = e.nodes().iter().map(|n| n.name.to_string()).collect();
        assert_eq!(
            names,
            [
                "Webhook",
                "Make Items",
                "Loop Over Items",
                "Process Item",
                "Summarize"
            ]
        );
        assert_eq!(e.runs("Loop Over Items").len(), 4);
        assert_eq!(e.runs("Process Item").len(), 3);
        assert_eq!(e.failed_node(), None);
    }

    #[test]
    fn failed_node_input_comes_from_the_feeding_branch() {
        let raw = fixture!("execution-error-id2.includeData.raw.json");
        let e = Execution::new(&raw);
        assert_eq!(e.failed_node().as_deref(), Some("Validate Order"));
        let (sources, items) = e.input_of("Validate Order", 0);
        assert_eq!(sources[0]["node"], "Prepare Fields");
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["json"]["greeting"], "hello Mallory");
    }

    #[test]
    fn error_output_feeds_the_next_node_from_branch_one() {
        let raw = fixture!("execution-erroroutput-nodeoperationerror-id5.includeData.raw.json");
        let e = Execution::new(&raw);
        let (sources, items) = e.input_of("Fail Loudly", 0);
        assert_eq!(sources[0]["outputIndex"], 1);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["json"]["error"]["status"], 401);
    }

    #[test]
    fn stack_is_the_last_fallback() {
        let mut raw = fixture!("execution-error-id2.includeData.raw.json");
        // Without a usable source, the node's input is read from the execution stack.
        raw["data"]["resultData"]["runData"]["Validate Order"][0]["source"] = json!([]);
        let e = Execution::new(&raw);
        let (sources, items) = e.input_of("Validate Order", 0);
        assert_eq!(items.len(), 1);
        assert!(sources
            .iter()
            .any(|s| s["from"] == "nodeExecutionStack" && s["itemCount"] == 1));
    }

    #[test]
    fn input_override_is_used_when_no_source_can_be_followed() {
        let mut raw = fixture!("execution-error-id2.includeData.raw.json");
        let run = &mut raw["data"]["resultData"]["runData"]["Validate Order"][0];
        run["source"] = json!([{"previousNode": "Gone Node", "previousNodeOutput": 0}]);
        run["inputOverride"] =
            json!({"main": [[{"json": {"from": "override", "n": 1}}, {"json": {"n": 2}}]]});
        let e = Execution::new(&raw);
        let (sources, items) = e.input_of("Validate Order", 0);
        assert_eq!(items.len(), 2);
        assert_eq!(items[0]["json"]["from"], "override");
        assert_eq!(sources[0]["node"], "Gone Node");
        assert_eq!(sources[0]["itemCount"], 0);
        assert_eq!(sources[1], json!({"from": "inputOverride", "itemCount": 2}));
        assert!(!sources.iter().any(|s| s["from"] == "nodeExecutionStack"));
    }

    #[test]
    fn an_empty_source_branch_is_zero_items_not_a_fallback() {
        let mut raw = fixture!("execution-error-id2.includeData.raw.json");
        // The stack still holds the failed node's input, and an override is present: neither
        // may replace what the feeding branch really carried (nothing).
        assert!(raw["data"]["executionData"]["nodeExecutionStack"]
            .as_array()
            .is_some_and(|s| s.iter().any(|e| e["node"]["name"] == "Validate Order")));
        raw["data"]["resultData"]["runData"]["Prepare Fields"][0]["data"]["main"][0] = json!([]);
        raw["data"]["resultData"]["runData"]["Validate Order"][0]["inputOverride"] =
            json!({"main": [[{"json": {"stale": true}}]]});
        let e = Execution::new(&raw);
        let (sources, items) = e.input_of("Validate Order", 0);
        assert!(items.is_empty(), "{items:?}");
        assert_eq!(sources.len(), 1);
        assert_eq!(sources[0]["node"], "Prepare Fields");
        assert_eq!(sources[0]["itemCount"], 0);
    }

    #[test]
    fn sticky_notes_are_not_nodes() {
        let mut raw = fixture!("execution-error-id2.includeData.raw.json");
        raw["workflowData"]["nodes"]
            .as_array_mut()
            .unwrap()
            .push(json!({
                "id": "sticky-1", "name": "Sticky Note", "type": STICKY_NOTE, "typeVersion": 1,
                "position": [0, -200], "parameters": {"content": "## Read me"}
            }));
        let e = Execution::new(&raw);
        assert!(e.node_def("Sticky Note").is_none());
        assert!(e.node_def("Validate Order").is_some());
        assert!(e.nodes().iter().all(|n| n.name != "Sticky Note"));
    }

    #[test]
    fn times_and_errors() {
        assert_eq!(
            millis_to_iso(1795255461553).unwrap(),
            "2026-11-21T10:04:21.553Z"
        );
        assert_eq!(
            duration_ms(
                &json!("2026-11-21T10:04:21.534Z"),
                &json!("2026-11-21T10:04:21.592Z")
            ),
            Some(58)
        );
        let raw = fixture!("execution-nodeapierror-id4.includeData.raw.json");
        let err =
            run_error(&raw["data"]["resultData"]["runData"]["Call Protected API"][0]).unwrap();
        assert_eq!(err["httpCode"], "401");
        assert_eq!(err["name"], "NodeApiError");
        assert!(err.get("stack").is_none());
    }
}
