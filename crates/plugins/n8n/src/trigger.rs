//! A workflow's trigger and the input a run gives it.
//!
//! n8n starts a manual run from a named node with optional task data
//! (`triggerToStartFrom: {name, data}` on `POST /rest/workflows/:id/run`). Triggers that receive
//! a request (webhook, form, chat, sub-workflow) pass that data through as their own output, so
//! the input is shaped as the trigger would emit it in production. Triggers that make their own
//! output (manual, schedule, polling and app triggers) ignore the data: with an input, the run
//! starts at the trigger's one downstream node with the input as a generic item; without one the
//! trigger runs as n8n runs it by hand (a schedule trigger emits the current date-time fields).
//!
//! Checked on a live n8n 2.41.1: a webhook trigger given `{headers, query, body}` emits it
//! unchanged; a manual trigger given data emits `{}`; starting at its child with data runs the
//! child on that data.

use serde_json::{json, Map, Value};

use crate::execution::STICKY_NOTE;

/// What kind of trigger a node is, for shaping a run's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerKind {
    Webhook,
    Form,
    Chat,
    SubWorkflow,
    Schedule,
    Manual,
    /// Any other trigger (app triggers, pollers).
    Other,
}

impl TriggerKind {
    /// The kind of a node type, `None` when the type is not a trigger.
    pub fn of(node_type: &str) -> Option<Self> {
        let short = node_type.rsplit('.').next().unwrap_or(node_type);
        Some(match short {
            "webhook" => Self::Webhook,
            "formTrigger" => Self::Form,
            "chatTrigger" => Self::Chat,
            "executeWorkflowTrigger" => Self::SubWorkflow,
            "scheduleTrigger" | "cron" | "interval" => Self::Schedule,
            "manualTrigger" | "start" => Self::Manual,
            s if s.ends_with("Trigger") => Self::Other,
            _ => return None,
        })
    }

    /// `true` when the trigger emits the data it is started with.
    pub fn passes_input_through(self) -> bool {
        matches!(
            self,
            Self::Webhook | Self::Form | Self::Chat | Self::SubWorkflow
        )
    }

    /// The name shown to callers.
    pub fn name(self) -> &'static str {
        match self {
            Self::Webhook => "webhook",
            Self::Form => "form",
            Self::Chat => "chat",
            Self::SubWorkflow => "sub-workflow",
            Self::Schedule => "schedule",
            Self::Manual => "manual",
            Self::Other => "other",
        }
    }
}

/// The trigger a run starts from.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub name: String,
    pub node_type: String,
    pub kind: TriggerKind,
    pub parameters: Value,
    pub webhook_id: Option<String>,
}

/// The workflow's trigger: the enabled one named `wanted`, else the first enabled trigger
/// (webhook-like triggers first, as they take input). Errors say what the workflow has.
pub fn find(workflow: &Value, wanted: Option<&str>) -> Result<Trigger, String> {
    let nodes = workflow["nodes"].as_array().cloned().unwrap_or_default();
    let triggers: Vec<Trigger> = nodes
        .iter()
        .filter(|n| n["disabled"].as_bool() != Some(true) && n["type"] != STICKY_NOTE)
        .filter_map(|n| {
            let node_type = n["type"].as_str()?;
            Some(Trigger {
                name: n["name"].as_str()?.to_string(),
                node_type: node_type.to_string(),
                kind: TriggerKind::of(node_type)?,
                parameters: n["parameters"].clone(),
                webhook_id: n["webhookId"].as_str().map(str::to_string),
            })
        })
        .collect();
    if let Some(name) = wanted {
        return triggers
            .into_iter()
            .find(|t| t.name == name)
            .ok_or_else(|| format!("the workflow has no enabled trigger node named '{name}'"));
    }
    let names: Vec<&str> = triggers.iter().map(|t| t.name.as_str()).collect();
    if triggers.is_empty() {
        return Err(
            "the workflow has no enabled trigger node; add one (a Manual Trigger, a Webhook...)"
                .into(),
        );
    }
    tracing::debug!(triggers = ?names, "workflow triggers");
    let mut sorted = triggers;
    sorted.sort_by_key(|t| !t.kind.passes_input_through());
    Ok(sorted.remove(0))
}

/// The nodes `name` feeds on its main outputs, in connection order, without repeats.
pub fn children(workflow: &Value, name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let outputs = workflow["connections"][name]["main"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for target in outputs.iter().filter_map(Value::as_array).flatten() {
        if let Some(n) = target["node"].as_str() {
            if !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// The JSON item the trigger emits for `input`, shaped by its kind. `now_iso` is the current
/// time (RFC 3339) and `session` a fresh id for a chat without one.
pub fn shape_input(kind: TriggerKind, input: &Value, now_iso: &str, session: &str) -> Value {
    let fields = input.as_object().cloned().unwrap_or_else(|| {
        let mut m = Map::new();
        if !input.is_null() {
            m.insert("value".into(), input.clone());
        }
        m
    });
    match kind {
        TriggerKind::Webhook => {
            let is_request = fields.contains_key("body")
                && fields
                    .keys()
                    .all(|k| matches!(k.as_str(), "headers" | "query" | "body" | "params"));
            if is_request {
                json!({
                    "headers": fields.get("headers").cloned().unwrap_or_else(|| json!({})),
                    "params": fields.get("params").cloned().unwrap_or_else(|| json!({})),
                    "query": fields.get("query").cloned().unwrap_or_else(|| json!({})),
                    "body": fields["body"],
                })
            } else {
                json!({"headers": {}, "params": {}, "query": {}, "body": Value::Object(fields)})
            }
        }
        TriggerKind::Form => {
            let mut m = Map::new();
            m.insert("submittedAt".into(), json!(now_iso));
            m.insert("formMode".into(), json!("test"));
            m.extend(fields);
            Value::Object(m)
        }
        TriggerKind::Chat => {
            let mut m = fields;
            m.entry("sessionId").or_insert_with(|| json!(session));
            m.entry("action").or_insert_with(|| json!("sendMessage"));
            m.entry("chatInput").or_insert_with(|| json!(""));
            Value::Object(m)
        }
        _ => Value::Object(fields),
    }
}

/// Task data in the shape n8n's `triggerToStartFrom.data` takes: one item on the main output.
pub fn task_data(item: Value) -> Value {
    json!({
        "startTime": 0,
        "executionTime": 0,
        "executionIndex": 0,
        "source": [],
        "data": {"main": [[{"json": item}]]},
    })
}

/// Where a manual run starts and with what: the `triggerToStartFrom` value, and a note for the
/// caller when the input went somewhere other than the trigger.
pub fn start_from(
    workflow: &Value,
    trigger: &Trigger,
    input: Option<&Value>,
    now_iso: &str,
    session: &str,
) -> Result<(Value, Option<String>), String> {
    let Some(input) = input else {
        return Ok((json!({"name": trigger.name}), None));
    };
    let item = shape_input(trigger.kind, input, now_iso, session);
    if trigger.kind.passes_input_through() {
        return Ok((json!({"name": trigger.name, "data": task_data(item)}), None));
    }
    let next = children(workflow, &trigger.name);
    match next.as_slice() {
        [only] => Ok((
            json!({"name": only, "data": task_data(item)}),
            Some(format!(
                "a {} trigger makes its own output, so the input was given to '{only}', the node it feeds; '{}' did not run",
                trigger.kind.name(),
                trigger.name
            )),
        )),
        [] => Err(format!(
            "the {} trigger '{}' feeds no node, so there is nothing to give the input to",
            trigger.kind.name(),
            trigger.name
        )),
        many => Err(format!(
            "the {} trigger '{}' makes its own output and feeds {} nodes ({}), so the input has no single place to go; run without inputData, or start the workflow with a Webhook or Execute Workflow trigger",
            trigger.kind.name(),
            trigger.name,
            many.len(),
            many.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wf() -> Value {
        json!({
            "nodes": [
                {"name": "Note", "type": STICKY_NOTE, "parameters": {}},
                {"name": "Start", "type": "n8n-nodes-base.manualTrigger", "parameters": {}},
                {"name": "Hook", "type": "n8n-nodes-base.webhook", "parameters": {"path": "p"}, "webhookId": "w1"},
                {"name": "Off", "type": "n8n-nodes-base.webhook", "disabled": true, "parameters": {}},
                {"name": "Set", "type": "n8n-nodes-base.set", "parameters": {}},
                {"name": "Other", "type": "n8n-nodes-base.set", "parameters": {}},
            ],
            "connections": {
                "Start": {"main": [[{"node": "Set", "type": "main", "index": 0}, {"node": "Set", "type": "main", "index": 0}]]},
                "Hook": {"main": [[{"node": "Set", "type": "main", "index": 0}], [{"node": "Other", "type": "main", "index": 0}]]},
            }
        })
    }

    #[test]
    fn kinds_by_type() {
        assert_eq!(
            TriggerKind::of("n8n-nodes-base.webhook"),
            Some(TriggerKind::Webhook)
        );
        assert_eq!(
            TriggerKind::of("@n8n/n8n-nodes-langchain.chatTrigger"),
            Some(TriggerKind::Chat)
        );
        assert_eq!(
            TriggerKind::of("n8n-nodes-base.githubTrigger"),
            Some(TriggerKind::Other)
        );
        assert_eq!(TriggerKind::of("n8n-nodes-base.set"), None);
    }

    #[test]
    fn finds_the_webhook_first_and_by_name() {
        let w = wf();
        let t = find(&w, None).unwrap();
        assert_eq!((t.name.as_str(), t.kind), ("Hook", TriggerKind::Webhook));
        assert_eq!(find(&w, Some("Start")).unwrap().kind, TriggerKind::Manual);
        assert!(find(&w, Some("Off")).unwrap_err().contains("'Off'"));
        assert!(find(&json!({"nodes": []}), None)
            .unwrap_err()
            .contains("no enabled trigger"));
    }

    #[test]
    fn inputs_are_shaped_by_kind() {
        let now = "2026-01-01T00:00:00Z";
        let body = json!({"name": "Ann"});
        assert_eq!(
            shape_input(TriggerKind::Webhook, &body, now, "s"),
            json!({"headers": {}, "params": {}, "query": {}, "body": {"name": "Ann"}})
        );
        let request = json!({"query": {"a": "1"}, "body": [1]});
        assert_eq!(
            shape_input(TriggerKind::Webhook, &request, now, "s")["query"],
            json!({"a": "1"})
        );
        let form = shape_input(TriggerKind::Form, &body, now, "s");
        assert_eq!(form["submittedAt"], now);
        assert_eq!(form["formMode"], "test");
        assert_eq!(form["name"], "Ann");
        let chat = shape_input(TriggerKind::Chat, &json!({"chatInput": "hi"}), now, "s1");
        assert_eq!(
            chat,
            json!({"chatInput": "hi", "sessionId": "s1", "action": "sendMessage"})
        );
        assert_eq!(
            shape_input(TriggerKind::Other, &json!(3), now, "s"),
            json!({"value": 3})
        );
    }

    #[test]
    fn input_for_a_manual_trigger_goes_to_its_one_child() {
        let w = wf();
        let start = find(&w, Some("Start")).unwrap();
        let (from, note) = start_from(&w, &start, Some(&json!({"x": 1})), "t", "s").unwrap();
        assert_eq!(from["name"], "Set");
        assert_eq!(from["data"]["data"]["main"][0][0]["json"], json!({"x": 1}));
        assert!(note.unwrap().contains("'Start' did not run"));
        let (from, note) = start_from(&w, &start, None, "t", "s").unwrap();
        assert_eq!(from, json!({"name": "Start"}));
        assert!(note.is_none());
        let hook = find(&w, None).unwrap();
        let (from, _) = start_from(&w, &hook, Some(&json!({"x": 1})), "t", "s").unwrap();
        assert_eq!(from["name"], "Hook");
        let mut many = wf();
        many["connections"]["Start"]["main"][0][1]["node"] = json!("Other");
        let e = start_from(&many, &start, Some(&json!({})), "t", "s").unwrap_err();
        assert!(e.contains("feeds 2 nodes (Set, Other)"), "{e}");
    }
}
