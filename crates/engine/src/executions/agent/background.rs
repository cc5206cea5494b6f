//! Plans and background tasks, for runs whose definition sets `config.orchestration`:
//!
//! - `plan {tasks: [{id, title, kind, spec, deps, tools?}]}` is checked (unique ids, known
//!   dependencies, no cycle, tools among the run's own), sent as a `tasks_update` event, and
//!   put to a human as an `input` wait ("approve this plan?", `{approved, feedback?}`). Declined,
//!   the model gets the feedback to revise the plan. Approved, the tasks are stored
//!   ([`toolshed_store::background`]) and each runs as a background sub-agent, an execution of
//!   its own, once the tasks it depends on succeeded (their results are added to its input);
//!   a task whose dependency failed or was cancelled is cancelled.
//! - When the run then gives a final answer while tasks are unfinished, it waits for them and
//!   gets their results as a message, then answers again.
//! - `cancel_background_task {taskId}` stops a task (`cancelled`, `task-completed`,
//!   `task-not-found`); `correct_background_task {taskId, correction}` queues a correction the
//!   task's sub-agent reads before its next step (`queued`, `task-completed`,
//!   `task-not-found`).
//!
//! Every answer of these tools, and the results the run waited for, are journaled, so a
//! replayed run takes the same path. Tasks are stored, so after a restart a task that was
//! running is an interrupted execution like any other and can be resumed; a task execution that
//! pauses (an approval, a question) is answered like any execution, and its end moves the plan
//! on.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use toolshed_sandbox::{CallTarget, HostCall, HostError, HostReply};
use toolshed_store::background::BackgroundTask;
use toolshed_store::{now_ms, ExecutionRecord, ExecutionStatus};

use super::orchestration::is_orchestration;
use super::step::Frame;
use super::{Offered, RunLimits, RunSpec, ASK_USER};
use crate::events::Event;
use crate::executions::host::{nested_key, CallKey};
use crate::{Caller, Engine, EngineError, Face, Outcome};

pub const PLAN: &str = "plan";
pub const CANCEL_TASK: &str = "cancel_background_task";
pub const CORRECT_TASK: &str = "correct_background_task";

/// Most tasks in one plan.
const MAX_TASKS: usize = 20;
/// Steps a background task's sub-agent may take.
const TASK_MAX_STEPS: u32 = 20;
/// Polls after which a running task whose execution does not exist is failed (about 5 s).
const MISSING_POLLS: u32 = 25;
/// How often a run waiting for its tasks looks at them.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(200);
/// How often (at most) a run waiting for its tasks marks itself alive in the store; more often
/// when runs count as interrupted sooner.
const TOUCH_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// The journal's name for the task results a run waited for.
const RESULTS_TARGET: &str = "background";
/// The journal's name for the corrections a task's sub-agent read.
const CORRECTIONS_TARGET: &str = "corrections";

/// The plan task a run stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    /// The orchestrating run.
    pub run: String,
    pub id: String,
}

/// The three tools as offered to the model.
pub(crate) fn offered() -> [Offered; 3] {
    let offered = |path: &str, description: &str, parameters: Value| Offered {
        name: String::new(),
        path: path.into(),
        description: description.into(),
        parameters,
        approval: false,
        workflow: None,
    };
    [
        offered(
            PLAN,
            "Proposes a plan of tasks to the user. Once approved, each task runs in the background as a sub-agent when the tasks it depends on have succeeded; their results come back to you when they finish. If the user declines, you get their feedback: revise the plan.",
            json!({
                "type": "object",
                "properties": {"tasks": {"type": "array", "items": {"type": "object", "properties": {
                    "id": {"type": "string", "description": "Stable id other tasks name in deps"},
                    "title": {"type": "string", "description": "Short title the user sees"},
                    "kind": {"type": "string", "enum": ["delegate", "research", "build-workflow", "manage-data-tables"]},
                    "spec": {"type": "string", "description": "The full briefing for the sub-agent"},
                    "deps": {"type": "array", "items": {"type": "string"}, "description": "Ids of tasks that must succeed first"},
                    "tools": {"type": "array", "items": {"type": "string"}, "description": "Names of your tools it may use (default: all of them)"}
                }, "required": ["id", "title", "kind", "spec", "deps"]}}},
                "required": ["tasks"]
            }),
        ),
        offered(
            CANCEL_TASK,
            "Stops a background task of your plan.",
            json!({"type": "object", "properties": {"taskId": {"type": "string"}}, "required": ["taskId"]}),
        ),
        offered(
            CORRECT_TASK,
            "Sends a correction to a background task; its sub-agent reads it before its next step.",
            json!({"type": "object", "properties": {"taskId": {"type": "string"}, "correction": {"type": "string"}}, "required": ["taskId", "correction"]}),
        ),
    ]
}

pub fn is_background_tool(path: &str) -> bool {
    matches!(path, PLAN | CANCEL_TASK | CORRECT_TASK)
}

fn invalid(message: String) -> HostReply {
    HostReply::Err(HostError::new("invalid_arguments", message))
}

fn finish(frame: &Frame, seq: CallKey, target: &str, reply: Value) -> HostReply {
    frame.ctx.record(seq, target, Ok(reply.clone()));
    HostReply::Ok(reply)
}

/// One checked task of a proposed plan.
struct Planned {
    id: String,
    title: String,
    kind: String,
    spec: String,
    deps: Vec<String>,
    tools: Vec<Offered>,
}

/// Checks a proposed plan against the run's own tools.
fn check_plan(parent: &RunSpec, args: &Value) -> Result<Vec<Planned>, String> {
    let tasks = args
        .get("tasks")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty())
        .ok_or("plan needs {tasks: [{id, title, kind, spec, deps}]} with at least one task")?;
    if tasks.len() > MAX_TASKS {
        return Err(format!("a plan has at most {MAX_TASKS} tasks"));
    }
    let own: Vec<&Offered> = parent
        .tools
        .iter()
        .filter(|t| {
            !is_orchestration(&t.path) && !is_background_tool(&t.path) && t.path != ASK_USER
        })
        .collect();
    let mut out: Vec<Planned> = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let text = |k: &str, max: usize| -> Result<String, String> {
            match t.get(k).and_then(Value::as_str) {
                Some(s) if !s.trim().is_empty() && s.len() <= max => Ok(s.to_string()),
                _ => Err(format!(
                    "tasks[{i}].{k} must be a non-empty string of at most {max} bytes"
                )),
            }
        };
        let id = text("id", 64)?;
        if out.iter().any(|p| p.id == id) {
            return Err(format!("tasks[{i}].id '{id}' is used twice"));
        }
        let kind = text("kind", 64)?;
        if !matches!(
            kind.as_str(),
            "delegate" | "research" | "build-workflow" | "manage-data-tables"
        ) {
            return Err(format!(
                "tasks[{i}].kind '{kind}': use delegate, research, build-workflow or manage-data-tables"
            ));
        }
        let deps: Vec<String> = match t.get("deps") {
            Some(Value::Array(d)) => d
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            _ => return Err(format!("tasks[{i}].deps must be an array of task ids")),
        };
        let tools = match t.get("tools").and_then(Value::as_array) {
            // By default every tool of the run but its client tools (the client talks to the
            // run, not to its tasks).
            None => own
                .iter()
                .filter(|o| !o.path.starts_with("client."))
                .map(|o| (*o).clone())
                .collect(),
            Some(names) => {
                let mut picked: Vec<Offered> = Vec::new();
                for n in names.iter().filter_map(Value::as_str) {
                    let Some(o) = own.iter().find(|o| o.name == n || o.path == n) else {
                        return Err(format!(
                            "tasks[{i}].tools: '{}' is not one of your tools ({})",
                            crate::audit::truncated(n, 128),
                            own.iter()
                                .map(|o| o.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    };
                    picked.push((*o).clone());
                }
                picked
            }
        };
        out.push(Planned {
            id,
            title: text("title", 200)?,
            kind,
            spec: text("spec", 20_000)?,
            deps,
            tools,
        });
    }
    let ids: HashSet<&str> = out.iter().map(|p| p.id.as_str()).collect();
    for p in &out {
        if let Some(d) = p.deps.iter().find(|d| !ids.contains(d.as_str())) {
            return Err(format!(
                "task '{}' depends on '{d}', which is not in the plan",
                p.id
            ));
        }
    }
    // Kahn's algorithm: every task must be reachable without a cycle.
    let mut done: BTreeSet<&str> = BTreeSet::new();
    while done.len() < out.len() {
        let ready: Vec<&str> = out
            .iter()
            .filter(|p| {
                !done.contains(p.id.as_str()) && p.deps.iter().all(|d| done.contains(d.as_str()))
            })
            .map(|p| p.id.as_str())
            .collect();
        if ready.is_empty() {
            return Err("the plan's dependencies form a cycle".into());
        }
        done.extend(ready);
    }
    Ok(out)
}

/// The sub-agent spec of a planned task (its dependencies' results are added when it starts).
fn task_spec(parent: &RunSpec, run_id: &str, p: &Planned) -> RunSpec {
    let mut tools = p.tools.clone();
    tools.extend(parent.tools.iter().filter(|t| t.path == ASK_USER).cloned());
    RunSpec {
        agent: format!("{}.task", parent.agent),
        version: parent.version,
        model: parent.model.clone(),
        credential: parent.credential.clone(),
        instructions: format!(
            "You carry out one task of an approved plan: {} ({}). Do it with your tools and answer with its result.",
            p.title, p.kind
        ),
        tools,
        limits: RunLimits {
            max_steps: TASK_MAX_STEPS,
            ..parent.limits.clone()
        },
        input: p.spec.clone(),
        history: Vec::new(),
        thread: None,
        memory: None,
        task: Some(TaskRef {
            run: run_id.to_string(),
            id: p.id.clone(),
        }),
    }
}

/// `plan`: checks the plan, asks the human, and on approval stores and schedules the tasks.
pub(crate) async fn plan(frame: &Frame, seq: CallKey, spec: &RunSpec, args: &Value) -> HostReply {
    let ctx = &frame.ctx;
    if let Some(reply) = ctx.replayed(seq, PLAN) {
        return reply;
    }
    let planned = match check_plan(spec, args) {
        Ok(p) => p,
        Err(message) => return invalid(message),
    };
    let listed: Vec<Value> = planned
        .iter()
        .map(|p| json!({"id": p.id, "description": p.title, "status": "planned", "deps": p.deps}))
        .collect();
    ctx.engine.inner.events.emit(
        &ctx.execution_id,
        Event::TasksUpdate {
            tasks: Value::Array(listed.clone()),
        },
    );
    let Some(question_key) = nested_key(seq, 0) else {
        return HostReply::Err(HostError::new("too_deep", "plans cannot be made this deep"));
    };
    let lines: Vec<String> = planned
        .iter()
        .map(|p| {
            let after = match p.deps.is_empty() {
                true => String::new(),
                false => format!(" (after {})", p.deps.join(", ")),
            };
            format!("- {}: {}{after}", p.id, p.title)
        })
        .collect();
    let question = HostCall {
        seq: 0,
        target: CallTarget::Ask,
        args: json!({
            "message": format!("Approve this plan?\n{}", lines.join("\n")),
            "schema": {"type": "object", "properties": {
                "approved": {"type": "boolean"},
                "feedback": {"type": "string", "maxLength": 4000}
            }, "required": ["approved"]}
        }),
    };
    let answer = match ctx
        .answer_in(question_key, &frame.caller, question, false)
        .await
    {
        HostReply::Ok(v) => v,
        other => return other,
    };
    let approved = answer["action"] == "accept" && answer["content"]["approved"] == true;
    if !approved {
        let feedback = answer["content"]["feedback"]
            .as_str()
            .filter(|f| !f.trim().is_empty())
            .unwrap_or("the user declined the plan without a comment");
        return finish(
            frame,
            seq,
            PLAN,
            json!({"approved": false, "feedback": feedback, "result": "The plan was not approved: revise it with this feedback and propose it again."}),
        );
    }
    let run_id = ctx.execution_id.to_string();
    let tasks: Vec<BackgroundTask> = planned
        .iter()
        .map(|p| BackgroundTask {
            run_id: run_id.clone(),
            task_id: p.id.clone(),
            title: p.title.clone(),
            principal: frame.caller.principal.to_string(),
            spec: serde_json::to_string(&task_spec(spec, &run_id, p)).unwrap_or_default(),
            deps: p.deps.clone(),
            status: "pending".into(),
            execution_id: None,
            result: None,
            corrections: vec![],
        })
        .collect();
    if let Err(e) = ctx.engine.inner.store.add_background_tasks(&tasks).await {
        return HostReply::Err(HostError::new("store", e.to_string()));
    }
    ctx.engine.schedule_background(run_id);
    finish(
        frame,
        seq,
        PLAN,
        json!({"approved": true, "result": "The plan is approved: its tasks run in the background, and their results come back to you when they finish.", "tasks": planned.iter().map(|p| p.id.clone()).collect::<Vec<_>>()}),
    )
}

/// The task `taskId` of this run's plans.
async fn find_task(frame: &Frame, args: &Value) -> Result<Option<BackgroundTask>, HostReply> {
    let id = args
        .get("taskId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    frame
        .ctx
        .engine
        .inner
        .store
        .background_tasks(&frame.ctx.execution_id)
        .await
        .map(|all| all.into_iter().find(|t| t.task_id == id))
        .map_err(|e| HostReply::Err(HostError::new("store", e.to_string())))
}

/// `cancel_background_task`.
pub(crate) async fn cancel_task(frame: &Frame, seq: CallKey, args: &Value) -> HostReply {
    if let Some(reply) = frame.ctx.replayed(seq, CANCEL_TASK) {
        return reply;
    }
    let task = match find_task(frame, args).await {
        Ok(t) => t,
        Err(reply) => return reply,
    };
    let status = match task {
        None => "task-not-found",
        Some(t) if t.is_terminal() => "task-completed",
        Some(t) => {
            let engine = &frame.ctx.engine;
            let moved = engine
                .cancel_task_row(&t, "cancelled by the orchestrator")
                .await;
            engine.schedule_background(t.run_id.clone());
            if moved {
                "cancelled"
            } else {
                "task-completed"
            }
        }
    };
    finish(frame, seq, CANCEL_TASK, json!({"status": status}))
}

/// `correct_background_task`.
pub(crate) async fn correct_task(frame: &Frame, seq: CallKey, args: &Value) -> HostReply {
    if let Some(reply) = frame.ctx.replayed(seq, CORRECT_TASK) {
        return reply;
    }
    let Some(correction) = args
        .get("correction")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty())
    else {
        return invalid("correct_background_task needs {taskId, correction}".into());
    };
    let task = match find_task(frame, args).await {
        Ok(t) => t,
        Err(reply) => return reply,
    };
    let status = match task {
        None => "task-not-found",
        Some(t) if t.is_terminal() => "task-completed",
        Some(t) => match frame
            .ctx
            .engine
            .inner
            .store
            .queue_correction(&t.run_id, &t.task_id, correction)
            .await
        {
            Ok(true) => "queued",
            _ => "task-completed",
        },
    };
    finish(frame, seq, CORRECT_TASK, json!({"status": status}))
}

/// At a final answer of a run with a plan: waits until its tasks have all ended and answers
/// the results not handed to the model yet (`None` when there are none), journaled at `seq`.
pub(crate) async fn wait_for_results(
    frame: &Frame,
    seq: CallKey,
    delivered: &BTreeSet<String>,
) -> Result<Option<(String, Vec<String>)>, HostReply> {
    let ctx = &frame.ctx;
    let read = |v: &Value| -> Option<(String, Vec<String>)> {
        let text = v["text"].as_str()?.to_string();
        let ids = v["ids"]
            .as_array()?
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect();
        Some((text, ids))
    };
    if let Some(reply) = ctx.replayed(seq, RESULTS_TARGET) {
        return match reply {
            HostReply::Ok(v) => Ok(read(&v)),
            other => Err(other),
        };
    }
    let mut touched = std::time::Instant::now();
    // Polls for which a running task's execution was not found, by task.
    let mut missing: BTreeMap<String, u32> = BTreeMap::new();
    loop {
        let tasks = ctx
            .engine
            .inner
            .store
            .background_tasks(&ctx.execution_id)
            .await
            .map_err(|e| HostReply::Err(HostError::new("store", e.to_string())))?;
        if tasks.iter().all(BackgroundTask::is_terminal) {
            let fresh: Vec<&BackgroundTask> = tasks
                .iter()
                .filter(|t| !delivered.contains(&t.task_id))
                .collect();
            if fresh.is_empty() {
                ctx.record(seq, RESULTS_TARGET, Ok(json!({"none": true})));
                return Ok(None);
            }
            let mut text = String::from("The background tasks of your plan have finished:");
            for t in &fresh {
                text.push_str(&format!(
                    "\n- {} ({}): {}: {}",
                    t.task_id,
                    t.title,
                    t.status,
                    t.result.as_deref().unwrap_or("no result")
                ));
            }
            text.push_str("\nGive your final answer from these results.");
            let ids: Vec<String> = fresh.iter().map(|t| t.task_id.clone()).collect();
            ctx.record(seq, RESULTS_TARGET, Ok(json!({"text": text, "ids": ids})));
            return Ok(Some((text, ids)));
        }
        // Alive while it waits: a silent running run would count as interrupted.
        let c = &ctx.engine.inner.config;
        let every =
            ((c.max_call_timeout.max(c.call_timeout) + c.recovery_grace) / 4).min(TOUCH_EVERY);
        if touched.elapsed() >= every {
            touched = std::time::Instant::now();
            match ctx
                .engine
                .inner
                .store
                .touch_execution(&ctx.execution_id)
                .await
            {
                Ok(true) => {}
                // Cancelled (or settled) elsewhere meanwhile: stop waiting, stop the tasks.
                Ok(false) => {
                    ctx.engine.cancel_plan_of(&ctx.execution_id).await;
                    return Err(HostReply::Err(HostError::new(
                        "cancelled",
                        "the run was stopped while it waited for its background tasks",
                    )));
                }
                Err(e) => {
                    tracing::warn!(execution = %ctx.execution_id, error = %e, "a waiting run could not mark itself alive");
                }
            }
        }
        // Tasks whose executions ended without telling the plan (cancelled or expired while
        // paused, failed to start) are brought up to date, and ready ones are started.
        ctx.engine
            .reconcile_tasks(&ctx.execution_id, &mut missing)
            .await;
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// For a background task's sub-agent, before a step: the corrections queued since the last
/// step (journaled at `seq`), after the `taken` it read before.
pub(crate) async fn corrections(
    frame: &Frame,
    seq: CallKey,
    task: &TaskRef,
    taken: usize,
) -> Vec<String> {
    let ctx = &frame.ctx;
    if let Some(HostReply::Ok(v)) = ctx.replayed(seq, CORRECTIONS_TARGET) {
        return serde_json::from_value(v).unwrap_or_default();
    }
    // The run that planned this task may have expired while paused: that cancels its plan,
    // this task included, which then stops.
    if let Err(e) = ctx.engine.expire_due(toolshed_store::now_ms()).await {
        tracing::warn!(error = %e, "expiring paused executions failed");
    }
    let fresh: Vec<String> = ctx
        .engine
        .inner
        .store
        .background_tasks(&task.run)
        .await
        .ok()
        .and_then(|all| all.into_iter().find(|t| t.task_id == task.id))
        .map(|t| t.corrections.into_iter().skip(taken).collect())
        .unwrap_or_default();
    ctx.record(seq, CORRECTIONS_TARGET, Ok(json!(fresh)));
    fresh
}

impl Engine {
    /// Starts (in the background) every task of run `run_id` whose dependencies succeeded, and
    /// cancels those whose dependencies failed or were cancelled.
    pub(crate) fn schedule_background(&self, run_id: String) {
        let engine = self.clone();
        tokio::spawn(async move {
            if let Err(e) = engine.start_ready_tasks(&run_id).await {
                tracing::warn!(run = %run_id, error = %e, "background tasks could not be scheduled");
            }
        });
    }

    async fn start_ready_tasks(&self, run_id: &str) -> Result<(), EngineError> {
        let store = &self.inner.store;
        loop {
            let tasks = store.background_tasks(run_id).await?;
            let by_id: BTreeMap<&str, &BackgroundTask> =
                tasks.iter().map(|t| (t.task_id.as_str(), t)).collect();
            let mut changed = false;
            for t in tasks.iter().filter(|t| t.status == "pending") {
                let deps: Vec<&BackgroundTask> = t
                    .deps
                    .iter()
                    .filter_map(|d| by_id.get(d.as_str()).copied())
                    .collect();
                if deps
                    .iter()
                    .any(|d| matches!(d.status.as_str(), "failed" | "cancelled"))
                {
                    changed |= store
                        .move_background_task(
                            run_id,
                            &t.task_id,
                            &["pending"],
                            "cancelled",
                            None,
                            Some("a task it depends on did not succeed"),
                        )
                        .await?;
                    continue;
                }
                if !deps.iter().all(|d| d.status == "succeeded") {
                    continue;
                }
                let id = super::super::new_execution_id();
                if !store
                    .move_background_task(
                        run_id,
                        &t.task_id,
                        &["pending"],
                        "running",
                        Some(&id),
                        None,
                    )
                    .await?
                {
                    continue;
                }
                let mut spec: RunSpec = serde_json::from_str(&t.spec).map_err(|e| {
                    EngineError::InvalidRun(format!(
                        "stored task '{}' cannot be read: {e}",
                        t.task_id
                    ))
                })?;
                if !deps.is_empty() {
                    spec.input
                        .push_str("\n\nResults of the tasks this one builds on:");
                    for d in &deps {
                        spec.input.push_str(&format!(
                            "\n- {} ({}): {}",
                            d.task_id,
                            d.title,
                            d.result.as_deref().unwrap_or("")
                        ));
                    }
                }
                let owner = self.owner(&t.principal, Face::Script).await;
                let engine = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = engine.start_task_run(&owner, spec, id).await {
                        tracing::warn!(error = %e, "a background task could not start");
                    }
                });
            }
            if !changed {
                return Ok(());
            }
        }
    }

    /// Runs a background task's sub-agent as an execution of its own.
    async fn start_task_run(
        &self,
        caller: &Caller,
        spec: RunSpec,
        id: String,
    ) -> Result<Outcome, EngineError> {
        let task = spec.task.clone();
        if let Err(e) = self.ensure_model(&spec.credential).await {
            if let Some(t) = &task {
                self.task_ended(t, "failed", &e.to_string()).await;
            }
            return Err(e);
        }
        let meta = json!({"agent": spec.agent, "version": spec.version, "task": task});
        let mut rec = ExecutionRecord::new_running(
            id,
            &caller.principal,
            "run",
            serde_json::to_string(&spec).unwrap_or_default(),
            meta,
            now_ms(),
        );
        rec.version = 1;
        let id = rec.id.clone();
        self.inner.store.insert_execution(&rec).await?;
        // Cancelled between its start and now (the cancel found no execution yet): stop here.
        if let Some(t) = &task {
            let still = self
                .inner
                .store
                .background_tasks(&t.run)
                .await?
                .into_iter()
                .any(|b| {
                    b.task_id == t.id
                        && b.status == "running"
                        && b.execution_id.as_deref() == Some(id.as_str())
                });
            if !still {
                return self.cancel(caller, &id).await;
            }
        }
        self.drive_run(caller, rec, false).await
    }

    /// A task's execution settled: its end moves the plan on (a paused one waits for its
    /// answer).
    pub(crate) async fn task_settled(&self, task: &TaskRef, outcome: &Outcome) {
        match outcome {
            Outcome::Completed { result, .. } => {
                let output = result["output"].as_str().unwrap_or_default();
                self.task_ended(task, "succeeded", output).await;
            }
            Outcome::Failed { error, .. } => {
                let message = error["message"].as_str().unwrap_or("failed");
                self.task_ended(task, "failed", message).await;
            }
            Outcome::Cancelled { .. } => self.task_ended(task, "cancelled", "cancelled").await,
            _ => {}
        }
    }

    /// A run with a plan that failed or was cancelled: its unfinished tasks are cancelled
    /// (nobody would read their results).
    pub(crate) async fn cancel_plan(&self, run_id: &str, spec: &RunSpec) {
        if !spec.tools.iter().any(|t| t.path == PLAN) {
            return;
        }
        let Ok(tasks) = self.inner.store.background_tasks(run_id).await else {
            return;
        };
        for t in tasks.iter().filter(|t| !t.is_terminal()) {
            self.cancel_task_row(t, "the run that planned it ended")
                .await;
        }
    }

    /// Cancels an unfinished task and its execution; whether this call cancelled it.
    async fn cancel_task_row(&self, t: &BackgroundTask, why: &str) -> bool {
        let moved = self
            .inner
            .store
            .move_background_task(
                &t.run_id,
                &t.task_id,
                &["pending", "running"],
                "cancelled",
                None,
                Some(why),
            )
            .await
            .unwrap_or(false);
        if let (true, Some(exec)) = (moved, &t.execution_id) {
            let owner = self.owner(&t.principal, Face::Script).await;
            let _ = Box::pin(self.cancel(&owner, exec)).await;
        }
        moved
    }

    /// The unfinished tasks of a run whose plan no longer matters are cancelled; `run_id`'s
    /// spec says whether it has a plan at all.
    pub(crate) async fn cancel_plan_of(&self, run_id: &str) {
        let Ok(Some(rec)) = self.inner.store.get_execution(run_id).await else {
            return;
        };
        if let Ok(spec) = serde_json::from_str::<RunSpec>(&rec.source) {
            self.cancel_plan(run_id, &spec).await;
        }
    }

    /// Brings a run's running tasks in line with their executions: one that completed,
    /// failed, was cancelled or expired settles its task (an execution that never appeared, for
    /// [`MISSING_POLLS`] polls, fails it); then ready tasks are started.
    pub(crate) async fn reconcile_tasks(&self, run_id: &str, missing: &mut BTreeMap<String, u32>) {
        let Ok(tasks) = self.inner.store.background_tasks(run_id).await else {
            return;
        };
        for t in tasks.iter().filter(|t| t.status == "running") {
            let Some(exec) = &t.execution_id else {
                continue;
            };
            let task = TaskRef {
                run: run_id.to_string(),
                id: t.task_id.clone(),
            };
            match self.inner.store.get_execution(exec).await {
                Ok(Some(rec)) => {
                    missing.remove(&t.task_id);
                    let (status, text) = match rec.status {
                        ExecutionStatus::Completed => (
                            "succeeded",
                            rec.result
                                .as_ref()
                                .and_then(|r| r["output"].as_str())
                                .unwrap_or_default()
                                .to_string(),
                        ),
                        ExecutionStatus::Failed => (
                            "failed",
                            rec.error
                                .as_ref()
                                .and_then(|e| e["message"].as_str())
                                .unwrap_or("failed")
                                .to_string(),
                        ),
                        ExecutionStatus::Cancelled => ("cancelled", "cancelled".to_string()),
                        ExecutionStatus::Expired => ("cancelled", "its wait expired".to_string()),
                        _ => continue,
                    };
                    self.task_ended_quietly(&task, status, &text).await;
                }
                Ok(None) => {
                    let n = missing.entry(t.task_id.clone()).or_default();
                    *n += 1;
                    if *n >= MISSING_POLLS {
                        self.task_ended_quietly(&task, "failed", "its execution never started")
                            .await;
                    }
                }
                Err(_) => {}
            }
        }
        if tasks.iter().any(|t| t.status == "pending") {
            self.schedule_background(run_id.to_string());
        }
    }

    /// Moves a running task to its end state (no scheduling: the caller does that).
    async fn task_ended_quietly(&self, task: &TaskRef, status: &str, result: &str) {
        if let Err(e) = self
            .inner
            .store
            .move_background_task(
                &task.run,
                &task.id,
                &["running"],
                status,
                None,
                Some(result),
            )
            .await
        {
            tracing::warn!(run = %task.run, task = %task.id, error = %e, "a background task's end could not be stored");
        }
    }

    /// A task ended: its row moves, and the tasks waiting for it start or are cancelled.
    async fn task_ended(&self, task: &TaskRef, status: &str, result: &str) {
        self.task_ended_quietly(task, status, result).await;
        self.schedule_background(task.run.clone());
    }
}
