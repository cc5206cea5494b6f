//! Running workflows: `n8n.workflows.run` and `n8n.workflows.verify`.
//!
//! n8n's public API has no run endpoint, so a run takes one of two paths:
//! - **manual run** (`POST /rest/workflows/:id/run` on the editor API, with the configured
//!   login): the workflow as saved, started at its trigger with the input as the trigger's own
//!   output ([`crate::trigger`]); nothing is written to the workflow. `verify` always takes it.
//! - **production webhook** (`{site}/webhook/{path}`): `run` takes it for an active workflow
//!   whose trigger is a Webhook node with a fixed path, so the run is exactly what a caller of
//!   the webhook gets; the execution is the workflow's first new one after the request.
//!
//! Both then wait for the execution (polling the public API) until it ends, is `waiting`, or
//! the timeout passes (default 5 min, at most 10, within the call's own timeout); a run still
//! going at the timeout is stopped. Results are bounded: the last node's first items, shrunk.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolError, ToolErrorKind};

use super::{call, def, make, object, opt_str};
use crate::client::N8nClient;
use crate::execution::{node_status, output_item_count, run_error, Execution};
use crate::sanitize::{estimate_tokens, scrub, shrink, Limits};
use crate::trigger::{self, Trigger, TriggerKind};

/// Default wait for a run, in milliseconds.
pub const DEFAULT_RUN_TIMEOUT_MS: u64 = 300_000;
/// Longest wait a caller may ask for, in milliseconds.
pub const MAX_RUN_TIMEOUT_MS: u64 = 600_000;
/// The o200k budget of a run's `data`.
pub const RUN_DATA_BUDGET: usize = 1_500;
/// Statuses after which an execution will not change without someone acting.
const SETTLED: &[&str] = &["success", "error", "crashed", "canceled", "waiting"];

pub(crate) fn tools(c: &Arc<N8nClient>) -> Vec<Tool> {
    let props = json!({
        "workflowId": {"type": "string", "description": "The workflow to run."},
        "inputData": {"type": "object", "description": "What the trigger receives, shaped by its type: webhook → the body (or {headers, query, body}); form → the flat field map; chat → {chatInput, sessionId?}; schedule → omit; other triggers → one item."},
        "timeout": {"type": "integer", "minimum": 1000, "maximum": MAX_RUN_TIMEOUT_MS, "description": "Longest wait in ms (default 300000, max 600000); a run still going then is stopped."},
        "triggerNode": {"type": "string", "description": "The trigger to start from when the workflow has several (default: the first webhook-like one)."},
    });
    let timeout = Duration::from_millis(MAX_RUN_TIMEOUT_MS + 15_000);
    let mut run_def = def(
        "workflows.run",
        "Run Workflow",
        "Run a workflow and wait for it to end: {executionId, status, data (the last node's output, bounded), error?, startedAt, finishedAt}. An active workflow with a Webhook trigger runs through its production URL; any other through n8n's manual run (needs the configured login).",
        object(props.clone(), &["workflowId"]),
        Annotations::WRITE,
    );
    run_def = run_def.with_timeout(timeout);
    let mut verify_def = def(
        "workflows.verify",
        "Verify Workflow",
        "Test a workflow: run it by hand with inputData given to its trigger only (nothing saved in the workflow) and answer the evidence: {success, executionId, status, failedNode?, evidence: {trigger, nodes, output}}.",
        object(props, &["workflowId"]),
        Annotations::WRITE,
    );
    verify_def = verify_def.with_timeout(timeout);
    vec![make(c, run_def, run), make(c, verify_def, verify)]
}

/// What one started run is: its execution id, how it was started, and a note for the caller.
struct Started {
    execution_id: String,
    via: &'static str,
    trigger: Trigger,
    input_given: bool,
    note: Option<String>,
}

async fn run(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let deadline = deadline(&ctx, &args);
    let workflow = load_workflow(&c, &ctx, &args).await?;
    let trig = trigger::find(&workflow, opt_str(&args, "triggerNode").as_deref())
        .map_err(ToolError::invalid)?;
    let started = if production_webhook(&workflow, &trig).is_some() {
        start_by_webhook(&c, &ctx, &workflow, trig, &args).await?
    } else {
        start_manual(&c, &ctx, &workflow, trig, &args).await?
    };
    let raw = wait_for(&c, &ctx, &started.execution_id, deadline).await?;
    Ok(run_answer(&raw, &started))
}

async fn verify(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let deadline = deadline(&ctx, &args);
    let workflow = load_workflow(&c, &ctx, &args).await?;
    let trig = trigger::find(&workflow, opt_str(&args, "triggerNode").as_deref())
        .map_err(ToolError::invalid)?;
    let started = start_manual(&c, &ctx, &workflow, trig, &args).await?;
    let raw = wait_for(&c, &ctx, &started.execution_id, deadline).await?;
    Ok(verify_answer(&raw, &started))
}

/// When the wait ends: the asked (or default) timeout, within the call's own timeout less the
/// time a stop needs.
fn deadline(ctx: &ToolContext, args: &Value) -> Instant {
    let asked = args["timeout"]
        .as_u64()
        .unwrap_or(DEFAULT_RUN_TIMEOUT_MS)
        .clamp(1_000, MAX_RUN_TIMEOUT_MS);
    let room = ctx.timeout.saturating_sub(Duration::from_secs(5));
    Instant::now() + Duration::from_millis(asked).min(room.max(Duration::from_secs(1)))
}

async fn load_workflow(c: &N8nClient, ctx: &ToolContext, args: &Value) -> Result<Value, ToolError> {
    let id = super::path_id(args, "workflowId")?;
    call(c, ctx, Method::GET, &format!("/workflows/{id}"), &[], None).await
}

/// The production webhook path of an active workflow whose trigger is a Webhook node with a
/// fixed path (one with `:params` needs values the caller did not give).
fn production_webhook(workflow: &Value, trig: &Trigger) -> Option<String> {
    if trig.kind != TriggerKind::Webhook || workflow["active"].as_bool() != Some(true) {
        return None;
    }
    let path = trig.parameters["path"]
        .as_str()
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .or_else(|| trig.webhook_id.clone())?;
    let path = path.trim_matches('/').to_string();
    (!path.contains(':') && !path.is_empty()).then_some(path)
}

async fn start_manual(
    c: &N8nClient,
    ctx: &ToolContext,
    workflow: &Value,
    trig: Trigger,
    args: &Value,
) -> Result<Started, ToolError> {
    let now = chrono::Utc::now();
    let session = format!("toolshed-{}", now.timestamp_nanos_opt().unwrap_or_default());
    let input = args.get("inputData").filter(|v| !v.is_null());
    let (from, note) = trigger::start_from(
        workflow,
        &trig,
        input,
        &now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        &session,
    )
    .map_err(ToolError::invalid)?;
    let id = super::path_id(args, "workflowId")?;
    let body = json!({"triggerToStartFrom": from});
    let r = c
        .rest(
            Method::POST,
            &format!("/workflows/{id}/run"),
            &[],
            Some(&body),
            Some(ctx.timeout),
        )
        .await
        .map_err(ToolError::from)?;
    if r["waitingForWebhook"].as_bool() == Some(true) {
        return Err(ToolError::invalid(format!(
            "the {} trigger '{}' waits for an outside event to start; give inputData so the run can start without it",
            trig.kind.name(),
            trig.name
        )));
    }
    let execution_id = id_string(&r["executionId"]).ok_or_else(|| {
        ToolError::new(
            ToolErrorKind::Upstream,
            "n8n started no execution (its answer had no executionId)",
        )
    })?;
    Ok(Started {
        execution_id,
        via: "manual",
        trigger: trig,
        input_given: input.is_some(),
        note,
    })
}

async fn start_by_webhook(
    c: &N8nClient,
    ctx: &ToolContext,
    workflow: &Value,
    trig: Trigger,
    args: &Value,
) -> Result<Started, ToolError> {
    let path = production_webhook(workflow, &trig).expect("checked by the caller");
    let wf_id = super::path_id(args, "workflowId")?;
    let before = newest_execution(c, ctx, &wf_id).await?;
    let input = args.get("inputData").filter(|v| !v.is_null());
    let shaped = trigger::shape_input(TriggerKind::Webhook, input.unwrap_or(&json!({})), "", "");
    let method = trig.parameters["httpMethod"]
        .as_str()
        .unwrap_or("GET")
        .to_ascii_uppercase();
    let method = Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET);
    let pairs = |v: &Value| -> Vec<(String, String)> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().map_or(v.to_string(), str::to_string)))
                    .collect()
            })
            .unwrap_or_default()
    };
    let body = (method != Method::GET && method != Method::HEAD).then_some(&shaped["body"]);
    let (status, reply) = c
        .site_request(
            method,
            &format!("/webhook/{path}"),
            &pairs(&shaped["query"]),
            &pairs(&shaped["headers"]),
            body,
            ctx.timeout,
        )
        .await
        .map_err(ToolError::from)?;
    if status == 404 {
        return Err(ToolError::not_found(format!(
            "n8n has no production webhook at /webhook/{path} (404): the workflow may have been deactivated"
        )));
    }
    let execution_id = first_execution_after(c, ctx, &wf_id, before).await?;
    Ok(Started {
        execution_id,
        via: "webhook",
        trigger: trig,
        input_given: input.is_some(),
        note: Some(format!(
            "started through the production webhook (HTTP {status}); the webhook answered {}",
            crate::sanitize::truncate_str(&reply.to_string(), 300)
        )),
    })
}

/// The workflow's newest execution id, as a number (0 when it has none).
async fn newest_execution(c: &N8nClient, ctx: &ToolContext, wf: &str) -> Result<u64, ToolError> {
    let q = [("workflowId", wf.to_string()), ("limit", "1".to_string())];
    let r = call(c, ctx, Method::GET, "/executions", &q, None).await?;
    Ok(r["data"]
        .as_array()
        .and_then(|d| d.first())
        .and_then(|e| id_string(&e["id"]))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0))
}

/// The first execution of the workflow newer than `before`, waiting up to 10 s for n8n to
/// record it.
async fn first_execution_after(
    c: &N8nClient,
    ctx: &ToolContext,
    wf: &str,
    before: u64,
) -> Result<String, ToolError> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let q = [("workflowId", wf.to_string()), ("limit", "20".to_string())];
        let r = call(c, ctx, Method::GET, "/executions", &q, None).await?;
        let newer = r["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| id_string(&e["id"])?.parse::<u64>().ok())
            .filter(|id| *id > before)
            .min();
        if let Some(id) = newer {
            return Ok(id.to_string());
        }
        if Instant::now() >= until {
            return Err(ToolError::new(
                ToolErrorKind::Upstream,
                "the webhook answered but n8n recorded no new execution of the workflow within 10 s (its settings may not save production executions)",
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Polls the execution until it settles or the deadline passes; then stops it. Answers the
/// execution with its data.
async fn wait_for(
    c: &N8nClient,
    ctx: &ToolContext,
    id: &str,
    deadline: Instant,
) -> Result<Value, ToolError> {
    let mut pause = Duration::from_millis(150);
    let timed_out = loop {
        let e = call(c, ctx, Method::GET, &format!("/executions/{id}"), &[], None).await?;
        let status = e["status"].as_str().unwrap_or("");
        if SETTLED.contains(&status) {
            break false;
        }
        let now = Instant::now();
        if now >= deadline {
            break true;
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    };
    if timed_out {
        // Stopping may race the run's own end; either way the execution is read again below.
        if let Err(e) = call(
            c,
            ctx,
            Method::POST,
            &format!("/executions/{id}/stop"),
            &[],
            None,
        )
        .await
        {
            tracing::warn!(execution = id, error = %e.message, "stopping a timed-out n8n run failed");
        }
    }
    let q = [("includeData", "true".to_string())];
    let mut raw = call(c, ctx, Method::GET, &format!("/executions/{id}"), &q, None).await?;
    if timed_out {
        raw["_timedOut"] = json!(true);
    }
    Ok(raw)
}

fn id_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The last node's output items, shrunk until they fit [`RUN_DATA_BUDGET`].
fn last_output(raw: &Value) -> Option<Value> {
    let e = Execution::new(raw);
    let last = raw["data"]["resultData"]["lastNodeExecuted"].as_str()?;
    let run = e.runs(last).last()?;
    let items: Vec<Value> = run["data"]["main"]
        .as_array()?
        .iter()
        .filter_map(Value::as_array)
        .flatten()
        .map(|i| i["json"].clone())
        .collect();
    let total = items.len();
    let mut value = Value::Array(items);
    scrub(&mut value);
    for limits in [
        Limits::new(1_000, 20, 8),
        Limits::new(300, 10, 5),
        Limits::new(100, 3, 3),
    ] {
        let small = shrink(&value, limits);
        if estimate_tokens(&small) <= RUN_DATA_BUDGET {
            return Some(json!({"node": last, "items": total, "sample": small}));
        }
    }
    Some(
        json!({"node": last, "items": total, "sample": "…[too large to show; read it with n8n.executions.get_node]"}),
    )
}

fn error_of(raw: &Value) -> Option<Value> {
    let e = Execution::new(raw);
    let err = e.execution_error().or_else(|| {
        let failed = e.failed_node()?;
        e.runs(&failed).iter().rev().find_map(run_error)
    });
    if raw["_timedOut"] == true {
        let msg = "the run did not end within its timeout and was stopped";
        return Some(match err {
            Some(mut e) => {
                e["timeout"] = json!(msg);
                e
            }
            None => json!({"message": msg, "timeout": msg}),
        });
    }
    err
}

fn run_answer(raw: &Value, s: &Started) -> Value {
    let e = Execution::new(raw);
    let mut out = json!({
        "executionId": s.execution_id,
        "status": e.status(),
        "startedAt": raw["startedAt"],
        "finishedAt": raw["stoppedAt"],
        "via": s.via,
    });
    if let Some(d) = last_output(raw) {
        out["data"] = d;
    }
    if let Some(err) = error_of(raw) {
        out["error"] = err;
    }
    if let Some(n) = &s.note {
        out["note"] = json!(n);
    }
    out
}

fn verify_answer(raw: &Value, s: &Started) -> Value {
    let e = Execution::new(raw);
    let status = e.status();
    let failed = e.failed_node();
    let nodes: Vec<Value> = e
        .nodes()
        .iter()
        .take(60)
        .map(|n| {
            json!({
                "name": n.name,
                "type": n.def.map(|d| d["type"].clone()).unwrap_or(Value::Null),
                "status": if n.runs.is_empty() { "not_run".to_string() } else { node_status(n.runs) },
                "items": output_item_count(n.runs),
            })
        })
        .collect();
    let success = status == "success" && failed.is_none() && raw["_timedOut"] != true;
    let mut out = json!({
        "success": success,
        "executionId": s.execution_id,
        "status": status,
        "evidence": {
            "trigger": {"name": s.trigger.name, "kind": s.trigger.kind.name(), "inputGiven": s.input_given},
            "nodes": nodes,
        },
    });
    if let Some(name) = &failed {
        let def = e.node_def(name);
        out["failedNode"] = json!({
            "name": name,
            "type": def.map(|d| d["type"].clone()).unwrap_or(Value::Null),
            "error": error_of(raw),
        });
    } else if let Some(err) = error_of(raw) {
        out["evidence"]["error"] = err;
    }
    if let Some(d) = last_output(raw) {
        out["evidence"]["output"] = d;
    }
    if let Some(n) = &s.note {
        out["evidence"]["note"] = json!(n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started() -> Started {
        Started {
            execution_id: "7".into(),
            via: "manual",
            trigger: Trigger {
                name: "Hook".into(),
                node_type: "n8n-nodes-base.webhook".into(),
                kind: TriggerKind::Webhook,
                parameters: json!({}),
                webhook_id: None,
            },
            input_given: true,
            note: None,
        }
    }

    #[test]
    fn production_webhook_needs_an_active_fixed_path() {
        let t = started().trigger;
        let mut t2 = t.clone();
        t2.parameters = json!({"path": "/orders/"});
        assert_eq!(
            production_webhook(&json!({"active": true}), &t2).as_deref(),
            Some("orders")
        );
        assert_eq!(production_webhook(&json!({"active": false}), &t2), None);
        t2.parameters = json!({"path": "orders/:id"});
        assert_eq!(production_webhook(&json!({"active": true}), &t2), None);
        let mut t3 = t;
        t3.webhook_id = Some("abc".into());
        assert_eq!(
            production_webhook(&json!({"active": true}), &t3).as_deref(),
            Some("abc")
        );
    }

    #[test]
    fn answers_name_the_failed_node_and_bound_the_data() {
        let big: Vec<Value> = (0..500)
            .map(|i| json!({"i": i, "text": "x".repeat(400)}))
            .collect();
        let items: Vec<Value> = big.iter().map(|j| json!({"json": j})).collect();
        let raw = json!({
            "id": "7", "status": "error", "startedAt": "a", "stoppedAt": "b",
            "workflowData": {"nodes": [
                {"name": "Hook", "type": "n8n-nodes-base.webhook"},
                {"name": "Boom", "type": "n8n-nodes-base.code"}]},
            "data": {"resultData": {
                "lastNodeExecuted": "Hook",
                "runData": {
                    "Hook": [{"executionIndex": 0, "executionStatus": "success", "data": {"main": [items]}}],
                    "Boom": [{"executionIndex": 1, "executionStatus": "error", "error": {"message": "bad thing", "name": "NodeOperationError"}}],
                },
            }},
        });
        let v = verify_answer(&raw, &started());
        assert_eq!(v["success"], false);
        assert_eq!(v["failedNode"]["name"], "Boom");
        assert_eq!(v["failedNode"]["type"], "n8n-nodes-base.code");
        assert!(v["failedNode"]["error"].to_string().contains("bad thing"));
        assert_eq!(v["evidence"]["nodes"][0]["items"], 500);
        let r = run_answer(&raw, &started());
        assert_eq!(r["data"]["items"], 500);
        assert!(estimate_tokens(&r["data"]) <= RUN_DATA_BUDGET + 50);
        assert_eq!(r["status"], "error");
    }
}
