//! The execution summary: what happened, in at most [`SUMMARY_BUDGET`] tokens, never item data.
//!
//! Pure function of the execution JSON ([`summarize`]). The node list is in execution order,
//! capped so the budget holds (the failed node is always kept), and the answer ends with
//! `_guidance` naming the next call to make.

use serde_json::{json, Value};

use crate::execution::{
    duration_ms, node_status, output_item_count, run_error, Execution, NodeView,
};
use crate::sanitize::{estimate_tokens, truncate_str};

/// The o200k token budget of a summary.
pub const SUMMARY_BUDGET: usize = 1_000;

/// The budget the pessimistic estimator aims for, leaving a margin under [`SUMMARY_BUDGET`].
const TARGET: usize = 950;

/// Summarizes an execution reply (`GET /executions/:id?includeData=true`).
pub fn summarize(raw: &Value) -> Value {
    let e = Execution::new(raw);
    let id = e.id();
    let nodes = e.nodes();
    let executed: Vec<&NodeView> = nodes.iter().filter(|n| !n.runs.is_empty()).collect();
    let failed = e.failed_node();
    let successful = executed
        .iter()
        .filter(|n| node_status(n.runs) == "success")
        .count();
    let failed_count = executed
        .iter()
        .filter(|n| node_status(n.runs) == "error")
        .count();
    let items: usize = executed.iter().map(|n| output_item_count(n.runs)).sum();

    let mut out = json!({
        "id": id,
        "workflowId": e.workflow_id(),
        "workflowName": e.workflow_name().map(|n| truncate_str(n, 150)),
        "status": e.status(),
        "mode": raw["mode"],
        "startedAt": raw["startedAt"],
        "stoppedAt": raw["stoppedAt"],
        "duration": duration_ms(&raw["startedAt"], &raw["stoppedAt"]),
    });
    if !raw["retryOf"].is_null() {
        out["retryOf"] = raw["retryOf"].clone();
    }

    if e.data_too_large() || !e.has_data() {
        let node_names: Vec<Value> = e
            .node_defs()
            .iter()
            .map(|d| json!({"nodeName": d["name"], "nodeType": d["type"]}))
            .collect();
        out["statistics"] = json!({"totalNodes": node_names.len()});
        out["workflowNodes"] = Value::Array(node_names);
        let (why, next) = if e.data_too_large() {
            (
                format!(
                    "n8n left the run data out because it is larger than its display limit ({} bytes of JSON). ",
                    raw["jsonSizeBytes"]
                ),
                "n8n.executions.get_node reads it anyway and pages the items",
            )
        } else {
            (
                "This reply carries no run data. ".to_string(),
                "n8n.executions.get_node asks for the data and reads one node",
            )
        };
        out["dataTooLargeToDisplay"] = Value::Bool(e.data_too_large());
        let first = e
            .node_defs()
            .last()
            .and_then(|d| d["name"].as_str())
            .unwrap_or("")
            .to_string();
        out["_guidance"] = guidance(&id, &first, &format!("{why}{next}."));
        return fit_nodes(out, Vec::new(), None);
    }

    out["statistics"] = json!({
        "totalNodes": nodes.len(),
        "executedNodes": executed.len(),
        "successfulNodes": successful,
        "failedNodes": failed_count,
        "totalItemsProcessed": items,
    });
    if e.redacted() {
        out["redacted"] = Value::Bool(true);
    }
    let list: Vec<Value> = nodes
        .iter()
        .map(|n| {
            json!({
                "nodeName": truncate_str(n.name, 80),
                "nodeType": n.def.and_then(|d| d["type"].as_str()).unwrap_or("unknown"),
                "status": node_status(n.runs),
                "runs": n.runs.len(),
            })
        })
        .collect();

    if let Some(name) = &failed {
        let err = e
            .runs(name)
            .iter()
            .rev()
            .find_map(run_error)
            .or_else(|| e.execution_error());
        let mut short = json!({"node": name});
        if let Some(err) = err {
            for k in ["name", "message", "description", "httpCode"] {
                if let Some(v) = err.get(k) {
                    short[k] = match v {
                        Value::String(s) => Value::String(truncate_str(s, 200)),
                        other => other.clone(),
                    };
                }
            }
        }
        out["error"] = short;
        out["_guidance"] = guidance(
            &id,
            name,
            &format!(
                "Node '{name}' failed. Read its input, parameters and full error with n8n.executions.get_node, or call n8n.executions.debug for the trace."
            ),
        );
    } else {
        let last = raw["data"]["resultData"]["lastNodeExecuted"]
            .as_str()
            .map(str::to_string)
            .or_else(|| executed.last().map(|n| n.name.to_string()))
            .unwrap_or_default();
        out["_guidance"] = guidance(
            &id,
            &last,
            "Read any node's input and output items with n8n.executions.get_node.",
        );
    }
    fit_nodes(out, list, failed.as_deref())
}

fn guidance(id: &str, node: &str, message: &str) -> Value {
    let id_json = serde_json::to_string(id).unwrap_or_default();
    let node_json = serde_json::to_string(&truncate_str(node, 80)).unwrap_or_default();
    json!({
        "message": message,
        "example": format!(
            "await tools.n8n.executions.get_node({{executionId: {id_json}, nodeName: {node_json}}})"
        ),
    })
}

/// Puts as many nodes into `availableNodes` as the budget allows, keeping the failed one.
fn fit_nodes(mut out: Value, list: Vec<Value>, failed: Option<&str>) -> Value {
    if list.is_empty() {
        return shrink_rest(out);
    }
    let total = list.len();
    let mut keep = total;
    loop {
        let mut chosen: Vec<Value> = list.iter().take(keep).cloned().collect();
        if let Some(f) = failed {
            if !chosen.iter().any(|n| n["nodeName"] == f) {
                if let Some(n) = list.iter().find(|n| n["nodeName"] == f) {
                    chosen.push(n.clone());
                }
            }
        }
        let omitted = total - chosen.len();
        let mut candidate = out.clone();
        if let Some(obj) = candidate.as_object_mut() {
            let guidance = obj.remove("_guidance");
            obj.insert("availableNodes".into(), Value::Array(chosen));
            if omitted > 0 {
                obj.insert("omittedNodes".into(), json!(omitted));
                obj.insert(
                    "omittedNote".into(),
                    json!(format!(
                        "{omitted} more nodes are not listed to keep this summary short; ask n8n.executions.get_node for any node by name"
                    )),
                );
            }
            if let Some(g) = guidance {
                obj.insert("_guidance".into(), g);
            }
        }
        if estimate_tokens(&candidate) <= TARGET || keep == 0 {
            out = candidate;
            break;
        }
        keep = keep.saturating_sub((keep / 4).max(1));
    }
    shrink_rest(out)
}

/// Last resort for pathological names: cut every string until the budget holds.
fn shrink_rest(mut out: Value) -> Value {
    let mut max = 120;
    while estimate_tokens(&out) > TARGET && max > 10 {
        out = crate::sanitize::shrink(&out, crate::sanitize::Limits::new(max, 200, 6));
        max /= 2;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use toolshed_testing::fixture;

    #[test]
    fn success_summary_has_every_field() {
        let s = summarize(&fixture!("execution-success-id1.includeData.raw.json"));
        assert_eq!(s["id"], "1");
        assert_eq!(s["workflowId"], "HUxyBqXXCHeIHixX");
        assert_eq!(s["workflowName"], "MCP demo: webhook -> set -> code");
        assert_eq!(s["status"], "success");
        assert_eq!(s["startedAt"], "2026-11-21T10:04:21.304Z");
        assert_eq!(s["stoppedAt"], "2026-11-21T10:04:21.490Z");
        assert_eq!(s["duration"], 186);
        assert_eq!(
            s["statistics"],
            json!({"totalNodes": 3, "executedNodes": 3, "successfulNodes": 3, "failedNodes": 0, "totalItemsProcessed": 3})
        );
        assert_eq!(
            s["availableNodes"][1],
            json!({"nodeName": "Prepare Fields", "nodeType": "n8n-nodes-base.set", "status": "success", "runs": 1})
        );
        assert!(s.get("error").is_none());
        assert_eq!(
            s["_guidance"]["example"],
            "await tools.n8n.executions.get_node({executionId: \"1\", nodeName: \"Validate Order\"})"
        );
        // No item data.
        assert!(!s.to_string().contains("hello Alice"));
    }

    #[test]
    fn code_error_points_at_the_failed_node() {
        let s = summarize(&fixture!("execution-error-id2.includeData.raw.json"));
        assert_eq!(s["status"], "error");
        assert_eq!(s["statistics"]["failedNodes"], 1);
        assert_eq!(s["statistics"]["successfulNodes"], 2);
        assert_eq!(s["error"]["node"], "Validate Order");
        assert_eq!(s["error"]["name"], "WrappedExecutionError");
        assert!(s["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Order rejected"));
        assert_eq!(
            s["_guidance"]["example"],
            "await tools.n8n.executions.get_node({executionId: \"2\", nodeName: \"Validate Order\"})"
        );
        assert_eq!(s["availableNodes"][2]["nodeType"], "n8n-nodes-base.code");
        assert_eq!(s["availableNodes"][2]["status"], "error");
    }

    #[test]
    fn loop_counts_runs() {
        let s = summarize(&fixture!("execution-loop-success-id3.includeData.raw.json"));
        let loop_node = s["availableNodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["nodeName"] == "Loop Over Items")
            .unwrap();
        assert_eq!(loop_node["runs"], 4);
        assert_eq!(loop_node["nodeType"], "n8n-nodes-base.splitInBatches");
        // 1 + 3 + (1+1+1+3) + 3 + 1
        assert_eq!(s["statistics"]["totalItemsProcessed"], 14);
    }

    #[test]
    fn error_output_run_lists_unexecuted_nodes_last() {
        let s = summarize(&fixture!(
            "execution-erroroutput-nodeoperationerror-id5.includeData.raw.json",
        ));
        assert_eq!(s["error"]["node"], "Fail Loudly");
        assert_eq!(s["error"]["name"], "NodeOperationError");
        let nodes = s["availableNodes"].as_array().unwrap();
        assert_eq!(nodes.last().unwrap()["nodeName"], "Use Result");
        assert_eq!(nodes.last().unwrap()["status"], "not_executed");
        assert_eq!(s["statistics"]["totalNodes"], 4);
        assert_eq!(s["statistics"]["executedNodes"], 3);
    }

    #[test]
    fn too_large_gives_metadata_and_guidance() {
        let s = summarize(&fixture!(
            "execution-big-id6.includeData.dataTooLargeToDisplay.raw.json",
        ));
        assert_eq!(s["dataTooLargeToDisplay"], true);
        assert_eq!(s["workflowName"], "MCP demo: big output (2000 items)");
        assert_eq!(s["statistics"]["totalNodes"], 3);
        assert!(s["_guidance"]["message"]
            .as_str()
            .unwrap()
            .contains("get_node"));
    }

    #[test]
    fn many_nodes_are_capped_and_counted() {
        let mut raw = fixture!("execution-success-id1.includeData.raw.json");
        let mut nodes = Vec::new();
        let mut run_data = serde_json::Map::new();
        for i in 0..300 {
            let name = format!("Some Rather Long Node Name Number {i}");
            nodes.push(json!({"name": name, "type": "n8n-nodes-base.set", "parameters": {}}));
            run_data.insert(
                name,
                json!([{"startTime": 1, "executionIndex": i, "executionTime": 1,
                        "executionStatus": if i == 250 { "error" } else { "success" },
                        "data": {"main": [[{"json": {}}]]}}]),
            );
        }
        raw["workflowData"]["nodes"] = Value::Array(nodes);
        raw["data"]["resultData"]["runData"] = Value::Object(run_data);
        let s = summarize(&raw);
        assert!(estimate_tokens(&s) <= TARGET);
        let listed = s["availableNodes"].as_array().unwrap();
        assert_eq!(
            listed.len() + s["omittedNodes"].as_u64().unwrap() as usize,
            300
        );
        assert!(listed
            .iter()
            .any(|n| n["nodeName"] == "Some Rather Long Node Name Number 250"));
    }
}
