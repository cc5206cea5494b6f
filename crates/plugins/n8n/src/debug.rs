//! Why an execution failed, in one answer: the failed node, its error, its parameters, the first
//! item it received and the trace of runs that led there.
//!
//! Pure function of the execution JSON ([`debug_execution`]).

use serde_json::{json, Value};

use crate::execution::{millis_to_iso, run_error, run_failed, Execution};
use crate::node::UNTRUSTED_NOTE;
use crate::sanitize::{estimate_tokens, scrub, shrink, Limits};

/// Most runs listed in the trace.
pub const MAX_TRACE: usize = 60;

/// The o200k budget a debug answer aims under.
pub const DEBUG_BUDGET: usize = 6_000;

/// The debug view of an execution. See the module docs.
pub fn debug_execution(raw: &Value) -> Value {
    let e = Execution::new(raw);
    let id = e.id();
    // Every run of every node, ordered by executionIndex: the trace of what happened.
    let mut runs: Vec<(f64, &str, usize, &Value)> = Vec::new();
    for n in e.nodes() {
        for (i, r) in n.runs.iter().enumerate() {
            let order = r["executionIndex"]
                .as_f64()
                .or_else(|| r["startTime"].as_f64())
                .unwrap_or(f64::MAX);
            runs.push((order, n.name, i, r));
        }
    }
    runs.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    let total_runs = runs.len();
    let trace: Vec<Value> = runs
        .iter()
        .rev()
        .take(MAX_TRACE)
        .rev()
        .map(|(_, name, i, r)| {
            let out: Vec<usize> = r["data"]["main"]
                .as_array()
                .map(|b| {
                    b.iter()
                        .map(|x| x.as_array().map_or(0, Vec::len))
                        .collect()
                })
                .unwrap_or_default();
            let from = r["source"]
                .as_array()
                .and_then(|s| s.first())
                .and_then(|s| s["previousNode"].as_str());
            json!({
                "node": name,
                "run": i,
                "from": from,
                "status": if run_failed(r) { "error" } else { r["executionStatus"].as_str().unwrap_or("success") },
                "startTime": r["startTime"].as_i64().and_then(millis_to_iso),
                "executionTime": r["executionTime"],
                "itemsPerOutput": out,
            })
        })
        .collect();

    let mut out = json!({
        "executionId": id,
        "workflowId": e.workflow_id(),
        "workflowName": e.workflow_name(),
        "status": e.status(),
    });
    if e.data_too_large() {
        out["dataTooLargeToDisplay"] = json!(true);
    }
    match e.failed_node() {
        Some(name) => {
            let node_runs = e.runs(&name);
            let run_index = node_runs
                .iter()
                .rposition(run_failed)
                .unwrap_or(node_runs.len().saturating_sub(1));
            let def = e.node_def(&name);
            let error = node_runs
                .get(run_index)
                .and_then(run_error)
                .or_else(|| e.execution_error());
            let (sources, items) = e.input_of(&name, run_index);
            let mut params = def.map_or(json!({}), |d| d["parameters"].clone());
            scrub(&mut params);
            out["failedNode"] = json!({
                "nodeName": name,
                "nodeType": def.map_or(json!("unknown"), |d| d["type"].clone()),
                "runIndex": run_index,
                "parameters": shrink(&params, Limits::new(1_500, 20, 6)),
            });
            out["error"] = error.unwrap_or(Value::Null);
            out["firstInputItem"] = json!({
                "_untrusted": true,
                "note": UNTRUSTED_NOTE,
                "sources": sources,
                "totalItems": items.len(),
                "item": items.first().map(|i| shrink(&i["json"], Limits::new(500, 10, 5))),
            });
            out["_guidance"] = json!({
                "message": format!("Page through all input and output items of '{name}' with n8n.executions.get_node."),
                "example": format!(
                    "await tools.n8n.executions.get_node({{executionId: {}, nodeName: {}}})",
                    serde_json::to_string(&id).unwrap_or_default(),
                    serde_json::to_string(&name).unwrap_or_default()
                ),
            });
        }
        None => {
            out["failedNode"] = Value::Null;
            out["note"] = json!("no node failed in this execution");
        }
    }
    out["trace"] = json!(trace);
    if total_runs > MAX_TRACE {
        out["traceOmitted"] = json!(total_runs - MAX_TRACE);
    }
    scrub(&mut out);
    // Keep the answer compact even with pathological parameters or items.
    let mut max = 400;
    while estimate_tokens(&out) > DEBUG_BUDGET && max > 20 {
        out = shrink(&out, Limits::new(max, 30, 7));
        max /= 2;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use toolshed_testing::fixture;

    #[test]
    fn code_error_debug() {
        let d = debug_execution(&fixture!("execution-error-id2.includeData.raw.json"));
        assert_eq!(d["failedNode"]["nodeName"], "Validate Order");
        assert_eq!(d["failedNode"]["nodeType"], "n8n-nodes-base.code");
        assert_eq!(d["error"]["lineNumber"], 4);
        assert_eq!(d["firstInputItem"]["item"]["greeting"], "hello Mallory");
        assert_eq!(d["firstInputItem"]["_untrusted"], true);
        let trace = d["trace"].as_array().unwrap();
        assert_eq!(trace.len(), 3);
        assert_eq!(trace[2]["status"], "error");
        assert_eq!(trace[1]["from"], "Webhook");
        assert!(!d.to_string().contains("resumeToken"));
    }

    #[test]
    fn error_output_debug_follows_branch_one() {
        let d = debug_execution(&fixture!(
            "execution-erroroutput-nodeoperationerror-id5.includeData.raw.json",
        ));
        assert_eq!(d["failedNode"]["nodeName"], "Fail Loudly");
        assert_eq!(d["firstInputItem"]["sources"][0]["outputIndex"], 1);
        assert_eq!(d["trace"][1]["itemsPerOutput"], json!([0, 1]));
    }

    #[test]
    fn success_has_no_failed_node() {
        let d = debug_execution(&fixture!("execution-loop-success-id3.includeData.raw.json"));
        assert!(d["failedNode"].is_null());
        assert_eq!(d["trace"].as_array().unwrap().len(), 10);
        assert_eq!(d["trace"][3]["node"], "Process Item");
    }
}
