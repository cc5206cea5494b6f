//! The meta-tools: their schemas, their view-dependent descriptions, and their dispatch into the
//! engine.

use rmcp::model::{CallToolResult, Tool as McpTool, ToolAnnotations};
use rmcp::{Peer, RoleServer};
use serde_json::{json, Value};
use toolshed_engine::{Caller, DecisionChannel, Engine, Op, OpAnswer};

use crate::{error_result, json_text, object_schema, outcome_result, text_result};

/// Names of the meta-tools (`resume` is left out with `[mcp] resume_tool = false`).
pub const META_TOOLS: [&str; 4] = ["search_tools", "read_tool", "run_script", "resume"];

pub(crate) fn meta_tools(engine: &Engine, caller: &Caller, resume_tool: bool) -> Vec<McpTool> {
    let mut tools = all_meta_tools(engine, caller);
    if !resume_tool {
        tools.retain(|t| t.name != "resume");
    }
    tools
}

/// The meta-tools: the engine's operations as MCP tools, their schemas from the one definition
/// ([`toolshed_engine::ops`]), the caller's view added to the descriptions of search and run.
fn all_meta_tools(engine: &Engine, caller: &Caller) -> Vec<McpTool> {
    let view = engine.view_summary(caller);
    META_TOOLS
        .iter()
        .filter_map(|name| Op::from_name(name))
        .map(|op| {
            let description = match op {
                Op::SearchTools | Op::RunScript => format!("{} {view}", op.description()),
                _ => op.description().to_string(),
            };
            let h = op.hints();
            McpTool::new(op.name(), description, object_schema(op.schema()))
                .with_title(op.title())
                .with_annotations(
                    ToolAnnotations::new()
                        .read_only(h.read_only)
                        .destructive(h.destructive)
                        .idempotent(h.idempotent),
                )
        })
        .collect()
}

/// The compact answer agents read: a count line, the answer's note on a line of its own when
/// it has one, then one line per hit, `path — Name: summary` with `[destructive]` where it
/// applies. The name is left out when it only restates the last path segment
/// (`tables.create` — "Create").
pub fn search_text(answer: &toolshed_engine::SearchAnswer) -> String {
    let mut out = format!("{} matching tools", answer.total);
    if answer.total > answer.hits.len() {
        out.push_str(&format!(", top {}", answer.hits.len()));
    }
    out.push('\n');
    if let Some(note) = &answer.note {
        out.push_str(note);
        out.push('\n');
    }
    for h in &answer.hits {
        out.push_str(&h.path);
        let last = h.path.rsplit('.').next().unwrap_or_default();
        let name_adds = !restates(&h.name, last);
        if name_adds {
            out.push_str(" — ");
            out.push_str(&h.name);
        }
        if !h.summary.is_empty() {
            out.push_str(if name_adds { ": " } else { " — " });
            out.push_str(&h.summary);
        }
        if h.destructive {
            out.push_str(" [destructive]");
        }
        out.push('\n');
    }
    out
}

/// Whether a hit's name only restates the last segment of its path: spelled as a segment, it
/// is that segment, or, when the engine clipped it ("…"), the segment's start.
fn restates(name: &str, last: &str) -> bool {
    use toolshed_core::path::to_segment;
    match name.strip_suffix('…') {
        Some(head) => last.starts_with(&to_segment(head)),
        None => to_segment(name) == last,
    }
}

/// How a meta-tool call is answered besides its arguments.
pub(crate) struct MetaCall<'a> {
    /// The session, to elicit waits through (none: waits come back as the answer).
    pub peer: Option<&'a Peer<RoleServer>>,
    /// The request's progress token: a script's events go out as progress notifications.
    pub progress: Option<rmcp::model::ProgressToken>,
    /// Whether `resume` is a meta-tool.
    pub resume_tool: bool,
    /// The client takes a paused run as a task.
    pub as_task: bool,
}

/// Dispatches a meta-tool call through the engine's operation definitions; `None` when `name`
/// is not a meta-tool (`resume` is not one when `resume_tool` is off).
pub(crate) async fn call_meta(
    engine: &Engine,
    caller: &Caller,
    name: &str,
    args: &Value,
    how: MetaCall<'_>,
) -> Option<MetaAnswer> {
    let MetaCall {
        peer,
        progress,
        resume_tool,
        as_task,
    } = how;
    if !META_TOOLS.contains(&name) || (name == "resume" && !resume_tool) {
        return None;
    }
    let op = Op::from_name(name)?;
    let text_search =
        op == Op::SearchTools && args.get("format").and_then(Value::as_str) != Some("json");
    let compact_read = op == Op::ReadTool
        && !args
            .get("schemas")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    // The agent decides through its own tool: the engine's rule says whether it may.
    // A script's events go to a client that asked for progress.
    let progress =
        match (op, peer, progress) {
            (Op::RunScript, Some(peer), Some(token)) => Some(
                crate::progress::ProgressRelay::start(engine, peer.clone(), token),
            ),
            _ => None,
        };
    let answer = engine
        .dispatch_as(
            caller,
            op,
            args.clone(),
            DecisionChannel::AgentTool,
            progress.as_ref().map(|p| p.execution_id.clone()),
        )
        .await;
    if let Some(p) = progress {
        p.finish(engine).await;
    }
    if let Ok(OpAnswer::Outcome(o)) = &answer {
        if as_task && o.is_paused() {
            return Some(MetaAnswer::Task(o.clone()));
        }
    }
    Some(MetaAnswer::Done(match answer {
        Err(e) => error_result(&e),
        Ok(OpAnswer::Search(a)) if text_search => text_result(search_text(&a), false),
        Ok(OpAnswer::Search(a)) => text_result(
            json_text(&serde_json::to_value(a).unwrap_or_default()),
            false,
        ),
        Ok(OpAnswer::Describe(d)) if compact_read => text_result(d.text, false),
        Ok(OpAnswer::Describe(d)) => text_result(
            json_text(&serde_json::to_value(d).unwrap_or_default()),
            false,
        ),
        Ok(OpAnswer::Outcome(o)) => {
            outcome_result(&crate::elicit::settle(engine, caller, o, peer).await)
        }
        Ok(OpAnswer::Waiting(list)) => text_result(json_text(&json!({"executions": list})), false),
    }))
}

/// A meta-tool's answer: a result, or a paused run to hand out as a task.
pub(crate) enum MetaAnswer {
    Done(CallToolResult),
    Task(toolshed_engine::Outcome),
}

#[cfg(test)]
mod tests {
    use super::search_text;
    use toolshed_engine::{SearchAnswer, SearchHit};

    fn hit(path: &str, name: &str) -> SearchHit {
        SearchHit {
            path: path.into(),
            name: name.into(),
            summary: "Does it.".into(),
            destructive: false,
            kind: None,
        }
    }

    #[test]
    fn a_name_is_shown_only_when_it_says_more_than_the_path() {
        let answer = SearchAnswer {
            total: 4,
            hits: vec![
                hit("tables.create", "Create"),
                hit("github.issues_create", "Open an issue"),
                // A name the engine clipped: its start restates the segment.
                hit(
                    "nestful.get_the_weather_forecast_for_a_city",
                    "Get The Weather Fore…",
                ),
                // A clipped name that does not.
                hit("weather.forecast", "Weather forecast for a…"),
            ],
            note: None,
        };
        let text = search_text(&answer);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "4 matching tools");
        assert_eq!(lines[1], "tables.create — Does it.");
        assert_eq!(lines[2], "github.issues_create — Open an issue: Does it.");
        assert_eq!(
            lines[3],
            "nestful.get_the_weather_forecast_for_a_city — Does it."
        );
        assert_eq!(
            lines[4],
            "weather.forecast — Weather forecast for a…: Does it."
        );
    }

    #[test]
    fn a_note_is_said_after_the_count() {
        let answer = SearchAnswer {
            total: 9,
            hits: vec![hit("tables.create", "Create")],
            note: Some(toolshed_engine::EMBEDDING_NOTE.to_string()),
        };
        let text = search_text(&answer);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "9 matching tools, top 1",
                toolshed_engine::EMBEDDING_NOTE,
                "tables.create — Does it."
            ]
        );
    }
}
