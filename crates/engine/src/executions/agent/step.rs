//! The loop of a run: ask the model, run the tool calls it makes, repeat until it answers
//! without calls or a limit ends the run.
//!
//! Every model request and every tool call takes the next key of the run's journal (the
//! `seq` of scripts): a step's model request, then its tool calls in the order the model made
//! them. The loop is deterministic given the journal, so a resumed run replays its earlier
//! steps from it and goes on from the first step not journaled.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use serde_json::{json, Value};
use toolshed_models::{ChatRequest, Completion, Message, ModelError, ToolCall, ToolSpec, Usage};
use toolshed_sandbox::{CallTarget, HostCall, HostError, HostReply};
use toolshed_store::{now_ms, AuditEntry};

use super::background;
use super::orchestration::{self, DELEGATE, UPDATE_TASKS};
use super::{Offered, RunSpec, AGENTS_RUN, AGENT_PREFIX, ASK_USER, WORKFLOWS_RUN};
use crate::events::Event;
use crate::executions::host::{nested_key, CallKey, HostCtx};
use crate::executions::run::End;
use crate::Caller;

/// Longest tool result handed to the model, in characters (about 4,000 tokens); the rest is
/// cut with a note saying so.
pub const MAX_RESULT_CHARS: usize = 16_000;

/// A sub-agent's first step key: its local key 0 holds its spec ([`super::nested`]).
pub(crate) const SUB_AGENT_FIRST_KEY: CallKey = 1;

/// Where a loop runs: on an execution's host, as a caller, with its keys either the
/// execution's own (a run) or nested under the call that started it (a sub-agent).
#[derive(Clone)]
pub(crate) struct Frame {
    pub ctx: Arc<HostCtx>,
    pub caller: Caller,
    /// The key of the call that runs this loop as a sub-agent; `None` for a run's own loop.
    pub parent: Option<CallKey>,
}

impl Frame {
    /// The execution's key of this loop's call `m`; `None` when nesting that deep cannot be
    /// keyed.
    fn key(&self, m: CallKey) -> Option<CallKey> {
        match self.parent {
            None => Some(m),
            Some(p) => nested_key(p, u32::try_from(m).ok()?),
        }
    }

    fn is_sub_agent(&self) -> bool {
        self.parent.is_some()
    }
}

/// Runs the loop until the run completes, fails or pauses.
pub(crate) async fn run_loop(frame: &Frame, spec: &Arc<RunSpec>) -> End {
    let mut messages = spec.history.clone();
    messages.push(Message::User {
        content: spec.input.clone(),
    });
    let tools = tool_specs(spec);
    let mut seq: CallKey = match frame.is_sub_agent() {
        true => SUB_AGENT_FIRST_KEY,
        false => 0,
    };
    let mut usage = Usage::default();
    let mut calls_made: u32 = 0;
    // A run with a plan: the task results already handed to the model.
    let plans = !frame.is_sub_agent() && spec.tools.iter().any(|t| t.path == background::PLAN);
    let mut delivered: std::collections::BTreeSet<String> = Default::default();
    // A background task's sub-agent: the corrections read so far.
    let mut corrected = 0;
    for step in 0..spec.limits.max_steps {
        if let Some(task) = &spec.task {
            let fresh = background::corrections(frame, seq, task, corrected).await;
            seq += 1;
            corrected += fresh.len();
            for c in fresh {
                messages.push(Message::User {
                    content: format!("Correction from the orchestrator: {c}"),
                });
            }
        }
        let answer = match model_step(frame, seq, spec, &messages, &tools).await {
            Ok(c) => c,
            Err(end) => return end,
        };
        seq += 1;
        usage.input_tokens += answer.usage.input_tokens;
        usage.output_tokens += answer.usage.output_tokens;
        let summary = |status: &str| {
            let mut s = json!({
                "status": status, "agent": spec.agent, "version": spec.version,
                "steps": step + 1, "toolCalls": calls_made,
                "usage": {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens},
            });
            if let Some(m) = &spec.memory {
                s["memory"] = m.clone();
            }
            s
        };
        if let Some(max) = spec.limits.max_tokens.filter(|m| usage.total() > *m) {
            return failed(
                "max_tokens",
                format!(
                    "the run used {} tokens, over its maxTokens of {max}",
                    usage.total()
                ),
                summary("max_tokens"),
            );
        }
        messages.push(Message::Assistant {
            content: answer.text.clone(),
            tool_calls: answer.tool_calls.clone(),
        });
        if answer.tool_calls.is_empty() {
            if plans {
                let waited = background::wait_for_results(frame, seq, &delivered).await;
                seq += 1;
                match waited {
                    Ok(Some((text, ids))) => {
                        delivered.extend(ids);
                        messages.push(Message::User { content: text });
                        continue;
                    }
                    Ok(None) => {}
                    Err(HostReply::Suspend) => return End::Suspended,
                    Err(HostReply::Err(e)) => return failed(&e.code, e.message, summary("failed")),
                    Err(HostReply::Ok(_)) => {}
                }
            }
            let mut result = summary("completed");
            result["output"] = json!(answer.text);
            return End::Completed(result);
        }
        let n = answer.tool_calls.len() as u32;
        if calls_made + n > spec.limits.max_tool_calls {
            return failed(
                "max_tool_calls",
                format!(
                    "the model asked for {} tool calls in all, over the run's maxToolCalls of {}",
                    calls_made + n,
                    spec.limits.max_tool_calls
                ),
                summary("max_tool_calls"),
            );
        }
        calls_made += n;
        let first = seq;
        seq += u64::from(n);
        match run_calls(frame, first, spec, &answer.tool_calls).await {
            Some(results) => messages.extend(results),
            None => return End::Suspended,
        }
    }
    failed(
        "max_steps",
        format!(
            "the run reached its maxSteps of {} without a final answer",
            spec.limits.max_steps
        ),
        json!({"status": "max_steps", "agent": spec.agent, "version": spec.version,
               "steps": spec.limits.max_steps, "toolCalls": calls_made,
               "usage": {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}}),
    )
}

/// The offered tools in the model API's form.
fn tool_specs(spec: &RunSpec) -> Vec<ToolSpec> {
    spec.tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.parameters.clone(),
        })
        .collect()
}

/// One step's tool calls, `toolCallConcurrency` at a time, with keys from `first`: their
/// results as messages for the model, or `None` when one of them waits (the run suspends).
async fn run_calls(
    frame: &Frame,
    first: CallKey,
    spec: &Arc<RunSpec>,
    calls: &[ToolCall],
) -> Option<Vec<Message>> {
    let pending: Vec<BoxFuture<'static, HostReply>> = calls
        .iter()
        .enumerate()
        .map(|(i, call)| tool_step(frame.clone(), first + i as u64, spec.clone(), call.clone()))
        .collect();
    let replies: Vec<HostReply> = stream::iter(pending)
        .buffered(spec.limits.tool_call_concurrency.max(1))
        .collect()
        .await;
    if replies.iter().any(|r| matches!(r, HostReply::Suspend)) {
        return None;
    }
    let mut out = Vec::with_capacity(calls.len());
    for (call, reply) in calls.iter().zip(replies) {
        let (content, is_error) = match reply {
            HostReply::Ok(v) => (result_text(&v), false),
            HostReply::Err(e) => (
                json!({"error": {"code": e.code, "message": e.message}}).to_string(),
                true,
            ),
            HostReply::Suspend => unreachable!("suspensions end the step above"),
        };
        out.push(Message::Tool {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error,
        });
    }
    Some(out)
}

/// A run that ends without an answer: `{code, message, run}`.
fn failed(code: &str, message: String, run: Value) -> End {
    End::Failed(json!({"code": code, "message": message, "run": run}))
}

/// The model's answer for step key `seq`: from the journal when replayed, else asked (text
/// streamed as events) and journaled.
async fn model_step(
    frame: &Frame,
    local: CallKey,
    spec: &RunSpec,
    messages: &[Message],
    tools: &[ToolSpec],
) -> Result<Completion, End> {
    let ctx = &frame.ctx;
    let Some(seq) = frame.key(local) else {
        return Err(too_deep());
    };
    if let Some(reply) = ctx.replayed(seq, MODEL_TARGET) {
        return match reply {
            HostReply::Ok(v) => serde_json::from_value(v).map_err(|e| {
                failed(
                    "journal",
                    format!("step #{seq} of the journal cannot be read: {e}"),
                    Value::Null,
                )
            }),
            HostReply::Err(e) => Err(failed(&e.code, e.message, Value::Null)),
            HostReply::Suspend => Err(End::Suspended),
        };
    }
    let req = ChatRequest {
        model: spec.model_name().to_string(),
        system: spec.instructions.clone(),
        messages: messages.to_vec(),
        tools: tools.to_vec(),
        max_tokens: None,
    };
    let events = &ctx.engine.inner.events;
    let id = ctx.execution_id.clone();
    // A sub-agent's text is its answer to the calling run, not the run's own text.
    let sub_agent = frame.is_sub_agent();
    let mut on_text = |t: &str| {
        if !t.is_empty() && !sub_agent {
            events.emit(
                &id,
                Event::TextDelta {
                    text: t.to_string(),
                },
            );
        }
    };
    let answer = ctx
        .engine
        .inner
        .models
        .complete(&spec.credential, &req, &mut on_text)
        .await
        .map_err(|e| model_failure(spec, &e))?;
    events.emit(
        &id,
        Event::Usage {
            input_tokens: answer.usage.input_tokens,
            output_tokens: answer.usage.output_tokens,
        },
    );
    // Kept in the journal; it reaches the store with the step's first completed tool call (or
    // the run's end or pause), so a step costs one checkpoint. A crash before that asks the
    // model again, as for a request in flight.
    let value = serde_json::to_value(&answer).unwrap_or(Value::Null);
    ctx.record(seq, MODEL_TARGET, Ok(value));
    Ok(answer)
}

/// The journal's name for model requests.
const MODEL_TARGET: &str = "model";

fn model_failure(spec: &RunSpec, e: &ModelError) -> End {
    failed(
        e.code(),
        e.to_string(),
        json!({"agent": spec.agent, "model": spec.model, "credential": spec.credential}),
    )
}

/// One tool call of the model: an offered tool through the host (the engine's call path,
/// pauses, journal), anything else an error the model sees.
fn tool_step(
    frame: Frame,
    local: CallKey,
    spec: Arc<RunSpec>,
    call: ToolCall,
) -> BoxFuture<'static, HostReply> {
    Box::pin(async move { tool_reply(&frame, local, &spec, &call).await })
}

async fn tool_reply(frame: &Frame, local: CallKey, spec: &RunSpec, call: &ToolCall) -> HostReply {
    let ctx = &frame.ctx;
    let Some(seq) = frame.key(local) else {
        return HostReply::Err(HostError::new("too_deep", TOO_DEEP));
    };
    let Some(tool) = spec.tools.iter().find(|t| t.name == call.name) else {
        return refuse(ctx, seq, call);
    };
    if let Some(text) = call.arguments.get("_unparsed").and_then(Value::as_str) {
        return HostReply::Err(HostError::new(
            "malformed_arguments",
            format!(
                "the arguments of {} are not a JSON object: {}",
                call.name,
                crate::audit::truncated(text, 200)
            ),
        ));
    }
    match tool.path.as_str() {
        DELEGATE => return orchestration::delegate(frame, seq, spec, &call.arguments).await,
        UPDATE_TASKS => return orchestration::update_tasks(frame, seq, &call.arguments),
        background::PLAN => return background::plan(frame, seq, spec, &call.arguments).await,
        background::CANCEL_TASK => {
            return background::cancel_task(frame, seq, &call.arguments).await
        }
        background::CORRECT_TASK => {
            return background::correct_task(frame, seq, &call.arguments).await
        }
        _ => {}
    }
    let (target, args) = target_of(tool, &call.arguments);
    let call = HostCall {
        seq: seq as u32,
        target,
        args,
    };
    // The offered tool's own `requireApproval` (two agent tools share one catalog path).
    ctx.answer_in(seq, &frame.caller, call, tool.approval).await
}

const TOO_DEEP: &str = "agents and saved scripts nest too deep in this execution";

fn too_deep() -> End {
    failed("too_deep", TOO_DEEP.to_string(), Value::Null)
}

fn target_of(tool: &Offered, args: &Value) -> (CallTarget, Value) {
    if tool.path == ASK_USER {
        let mut a = json!({"message": args.get("question").cloned().unwrap_or(Value::Null)});
        if let Some(s) = args.get("schema") {
            a["schema"] = s.clone();
        }
        return (CallTarget::Ask, a);
    }
    if let Some(agent) = tool.path.strip_prefix(AGENT_PREFIX) {
        // Only the input: the model does not choose threads or anything else of the run.
        let a = json!({"agent": agent, "input": args.get("input").cloned().unwrap_or(Value::Null)});
        return (CallTarget::Tool(AGENTS_RUN.into()), a);
    }
    if let Some(workflow) = &tool.workflow {
        // Only the trigger's input: the model does not choose the workflow or the timeout.
        let mut a = json!({"workflowId": workflow});
        if let Some(input) = args.get("inputData").filter(|v| v.is_object()) {
            a["inputData"] = input.clone();
        }
        return (CallTarget::Tool(WORKFLOWS_RUN.into()), a);
    }
    (CallTarget::Tool(tool.path.clone()), args.clone())
}

/// A call of a tool the run does not offer: audited, answered as an error, never run.
fn refuse(ctx: &HostCtx, seq: CallKey, call: &ToolCall) -> HostReply {
    let path = call.name.replace("__", ".");
    let message = format!(
        "'{}' is not one of this agent's tools; call only the tools you were given",
        crate::audit::truncated(&call.name, 128)
    );
    ctx.engine.inner.audit.record(AuditEntry {
        id: uuid::Uuid::now_v7().to_string(),
        ts: now_ms(),
        principal: ctx.caller.principal.to_string(),
        face: ctx.caller.face.as_str().to_string(),
        path: crate::audit::truncated(&path, crate::audit::MAX_PATH_BYTES),
        execution_id: Some(ctx.execution_id.to_string()),
        args: crate::audit::audit_args(&call.arguments),
        outcome: "not_offered".into(),
        error: Some(message.clone()),
        duration_us: 0,
    });
    tracing::debug!(execution = %ctx.execution_id, seq, tool = %call.name, "refused a tool the run does not offer");
    HostReply::Err(HostError::new("not_offered", message))
}

/// A tool result as text for the model, cut at [`MAX_RESULT_CHARS`] with a note.
pub fn result_text(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match text.char_indices().nth(MAX_RESULT_CHARS) {
        Some((at, _)) => format!(
            "{}\n[cut: the result was {} characters long; only the first {MAX_RESULT_CHARS} are shown. Ask for less (filters, limits, fields) to see the rest.]",
            &text[..at],
            text.chars().count()
        ),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_are_cut_with_a_note() {
        let long = Value::String("x".repeat(MAX_RESULT_CHARS + 10));
        let t = result_text(&long);
        assert!(t.starts_with(&"x".repeat(100)));
        assert!(t.contains("[cut: the result was 16010 characters long"));
        assert_eq!(result_text(&json!({"a": 1})), "{\"a\":1}");
    }
}
