//! `n8n.workflows.report_verdict`: the verification loop of a work item (see [`crate::verdict`]),
//! its state kept in Toolshed's store so that it survives restarts and is shared by replicas.

use std::sync::Arc;

use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolError};
use toolshed_store::plugin_state::PutOutcome;
use toolshed_store::Store;

use super::{def, object, opt_str, req_str};
use crate::verdict::{Report, Verdict, WorkItem};

/// Longest work item id.
const MAX_WORK_ITEM_ID: usize = 128;
/// Times a report is retried when another writer changed the work item meanwhile.
const WRITE_ATTEMPTS: usize = 5;

/// The tools kept in Toolshed's store.
pub(crate) fn tools(store: &Store) -> Vec<Tool> {
    let store = Arc::new(store.clone());
    let verdicts: Vec<&str> = Verdict::NAMES.to_vec();
    let d = def(
        "workflows.report_verdict",
        "Report Verification Verdict",
        "Report what a verification run of a workflow being built showed, and get the next step. A deterministic loop per work item: patch, rebuild, ask the user, done or stop; the same failure signature reported again escalates instead of looping. Acts only on Toolshed's own bookkeeping.",
        object(
            json!({
                "workItemId": {"type": "string", "minLength": 1, "maxLength": MAX_WORK_ITEM_ID, "description": "Your id for the workflow being built; the same id across its reports."},
                "verdict": {"type": "string", "enum": verdicts},
                "failureSignature": {"type": "string", "maxLength": 1000, "description": "A stable text for the failure (e.g. node name and error class), to detect repeats."},
                "failedNodeName": {"type": "string", "maxLength": 1000},
                "diagnosis": {"type": "string", "maxLength": 4000},
            }),
            &["workItemId", "verdict"],
        ),
        Annotations::DRAFT,
    )
    .with_output(json!({"type": "object", "properties": {
        "guidance": {"type": "string"},
        "next": {"type": "string", "enum": ["patch", "rebuild", "ask_user", "done", "stop"]},
        "workItem": {"type": "object"}}}));
    vec![Tool::from_fn(d, move |_ctx, args| {
        let store = store.clone();
        async move { report_verdict(&store, &args).await }
    })]
}

async fn report_verdict(store: &Store, args: &Value) -> Result<Value, ToolError> {
    let id = req_str(args, "workItemId")?;
    if id.chars().count() > MAX_WORK_ITEM_ID {
        return Err(ToolError::invalid(format!(
            "'workItemId' is longer than {MAX_WORK_ITEM_ID} characters"
        )));
    }
    let verdict: Verdict = serde_json::from_value(args["verdict"].clone()).map_err(|_| {
        ToolError::invalid(format!(
            "'verdict' must be one of: {}",
            Verdict::NAMES.join(", ")
        ))
    })?;
    let report = Report {
        failure_signature: opt_str(args, "failureSignature"),
        failed_node: opt_str(args, "failedNodeName"),
        diagnosis: opt_str(args, "diagnosis"),
    };
    let key = format!("work_item:{id}");
    for _ in 0..WRITE_ATTEMPTS {
        let stored = store
            .plugin_state(crate::PLUGIN_ID, &key)
            .await
            .map_err(|e| ToolError::internal(format!("reading work item '{id}': {e}")))?;
        let mut item: WorkItem = match &stored {
            Some(s) => serde_json::from_str(&s.value).map_err(|e| {
                ToolError::internal(format!("work item '{id}' is stored malformed: {e}"))
            })?,
            None => WorkItem::default(),
        };
        let step = item.apply(verdict, &report);
        let text = serde_json::to_string(&item).expect("a work item serializes");
        let version = stored.as_ref().map(|s| s.version);
        match store
            .put_plugin_state(crate::PLUGIN_ID, &key, version, &text)
            .await
            .map_err(|e| ToolError::internal(format!("saving work item '{id}': {e}")))?
        {
            PutOutcome::Written { .. } => {
                return Ok(json!({
                    "guidance": step.guidance,
                    "next": step.next,
                    "workItem": {
                        "id": id,
                        "phase": item.phase,
                        "reports": item.reports,
                        "patches": item.patches,
                        "rebuilds": item.rebuilds,
                    },
                }))
            }
            PutOutcome::Conflict => continue,
        }
    }
    Err(ToolError::conflict(format!(
        "work item '{id}' kept changing under concurrent reports; report again"
    )))
}
