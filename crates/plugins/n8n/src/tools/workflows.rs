//! Workflow tools: `list`, `get` (compact), `create`, `update`, `activate`/`deactivate`,
//! `archive`/`unarchive` and `delete`.
//!
//! `create` and `update` send only the fields n8n 2.41.1's public API accepts (`name`, `nodes`
//! with the node keys of its `node` schema, `connections`, `settings` limited to the keys of its
//! `workflowSettings` schema, `staticData`, and `description` on update); `update` fills what the
//! caller left out from the current workflow, so a rename does not wipe the nodes. Checked
//! against a live 2.41.1: nodes are replaced whole (a node key left out is lost, hence every
//! node key of the schema is kept, `continueOnFail` included), while `settings` keys, `pinData`,
//! `staticData`, `description` and `nodeGroups` left out of a PUT are kept by n8n.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Map, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolError};

use super::{call, def, make, merge, object, opt_str, paging, paging_query, path_id, pick};
use crate::client::N8nClient;

/// Settings keys the 2.41.1 spec accepts (it rejects any other). `binaryMode` is accepted but
/// ignored by n8n (derived internally); it is passed through so a round trip is not refused.
pub const WRITABLE_SETTINGS: &[&str] = &[
    "saveExecutionProgress",
    "saveManualExecutions",
    "saveDataErrorExecution",
    "saveDataSuccessExecution",
    "executionTimeout",
    "errorWorkflow",
    "timezone",
    "executionOrder",
    "binaryMode",
    "callerPolicy",
    "callerIds",
    "timeSavedMode",
    "timeSavedPerExecution",
    "redactionPolicy",
    "availableInMCP",
    "customTelemetryTags",
    "credentialResolverId",
];

/// Node keys the 2.41.1 spec accepts in a workflow body (all of its `node` schema but the
/// read-only `createdAt`/`updatedAt`).
pub const WRITABLE_NODE_KEYS: &[&str] = &[
    "id",
    "name",
    "webhookId",
    "disabled",
    "notesInFlow",
    "notes",
    "type",
    "typeVersion",
    "executeOnce",
    "alwaysOutputData",
    "retryOnFail",
    "maxTries",
    "waitBetweenTries",
    "continueOnFail",
    "onError",
    "position",
    "parameters",
    "credentials",
    "customTelemetryTags",
];

pub(crate) fn tools(c: &Arc<N8nClient>) -> Vec<Tool> {
    let wf_id =
        json!({"type": "string", "description": "The workflow id, e.g. \"HUxyBqXXCHeIHixX\"."});
    let nodes = json!({"type": "array", "items": {"type": "object", "required": ["name", "type", "typeVersion", "parameters"]},
        "description": "Nodes: {name, type (e.g. n8n-nodes-base.set), typeVersion, parameters, position?, credentials?, onError?}."});
    let connections = json!({"type": "object", "description": "Connections keyed by source node name: {\"A\": {\"main\": [[{\"node\": \"B\", \"type\": \"main\", \"index\": 0}]]}}."});
    let settings = json!({"type": "object", "description": "Workflow settings, e.g. {\"executionOrder\": \"v1\"}. Unknown keys are dropped."});
    let id_only = object(json!({"workflowId": wf_id.clone()}), &["workflowId"]);
    vec![
        make(
            c,
            def(
                "workflows.list",
                "List Workflows",
                "List workflows: id, name, active, archived, tags, node count, last update. Filter by name, active, tags, project and archived; page with cursor.",
                object(
                    merge(
                        json!({
                            "name": {"type": "string", "description": "Only workflows with this name."},
                            "active": {"type": "boolean", "description": "Only active (true) or inactive (false) workflows."},
                            "tags": {"type": "string", "description": "Comma-separated tag names; workflows having them."},
                            "projectId": {"type": "string", "description": "Only workflows in this project."},
                            "archived": {"type": "boolean", "description": "Keep only archived (true) or only non-archived (false) workflows of the page (filtered by the plugin: n8n has no such query parameter)."},
                        }),
                        paging(250),
                    ),
                    &[],
                ),
                Annotations::READ_ONLY,
            )
            .with_output(json!({"type": "object", "properties": {
                "workflows": {"type": "array", "items": {"type": "object"}},
                "nextCursor": {"type": ["string", "null"]}}})),
            list,
        ),
        make(
            c,
            def(
                "workflows.get",
                "Get Workflow",
                "One workflow, compact: id, name, active, archived, tags, nodes {name, type, typeVersion, parameters, credentials (names), onError, disabled}, connections and settings. Positions only with includePositions.",
                object(
                    json!({
                        "workflowId": wf_id.clone(),
                        "includePositions": {"type": "boolean", "description": "Include node canvas positions. Default false."},
                    }),
                    &["workflowId"],
                ),
                Annotations::READ_ONLY,
            ),
            get,
        ),
        make(
            c,
            def(
                "workflows.create",
                "Create Workflow",
                "Create a workflow (inactive). Missing node positions are laid out left to right; settings default to {executionOrder: v1}.",
                object(
                    json!({
                        "name": {"type": "string", "description": "Workflow name."},
                        "nodes": nodes.clone(),
                        "connections": connections.clone(),
                        "settings": settings.clone(),
                        "projectId": {"type": "string", "description": "Project to create it in. Default: the key owner's personal project."},
                    }),
                    &["name", "nodes"],
                ),
                Annotations::WRITE,
            ),
            create,
        ),
        make(
            c,
            def(
                "workflows.update",
                "Update Workflow",
                "Replace parts of a workflow: give any of name, description, nodes, connections, settings, staticData; the rest is kept from the current version. Nodes keep their id, webhookId and position when a node of the same name exists.",
                object(
                    json!({
                        "workflowId": wf_id.clone(),
                        "name": {"type": "string", "description": "New name."},
                        "description": {"type": "string", "description": "New description."},
                        "nodes": nodes,
                        "connections": connections,
                        "settings": settings,
                        "staticData": {"type": ["object", "null"], "description": "Static data of the workflow."},
                    }),
                    &["workflowId"],
                ),
                Annotations::WRITE,
            ),
            update,
        ),
        make(
            c,
            def(
                "workflows.activate",
                "Activate Workflow",
                "Activate (publish) a workflow so its triggers run.",
                id_only.clone(),
                Annotations { read_only: false, destructive: false, idempotent: true, ..Default::default() },
            ),
            |c, ctx, args| action(c, ctx, args, "activate"),
        ),
        make(
            c,
            def(
                "workflows.deactivate",
                "Deactivate Workflow",
                "Deactivate a workflow so its triggers stop.",
                id_only.clone(),
                Annotations { read_only: false, destructive: false, idempotent: true, ..Default::default() },
            ),
            |c, ctx, args| action(c, ctx, args, "deactivate"),
        ),
        make(
            c,
            def(
                "workflows.archive",
                "Archive Workflow",
                "Archive a workflow (hides it; reversible with unarchive). n8n deactivates it first if needed.",
                id_only.clone(),
                Annotations { read_only: false, destructive: false, idempotent: true, ..Default::default() },
            ),
            |c, ctx, args| action(c, ctx, args, "archive"),
        ),
        make(
            c,
            def(
                "workflows.unarchive",
                "Unarchive Workflow",
                "Bring an archived workflow back.",
                id_only.clone(),
                Annotations { read_only: false, destructive: false, idempotent: true, ..Default::default() },
            ),
            |c, ctx, args| action(c, ctx, args, "unarchive"),
        ),
        make(
            c,
            def(
                "workflows.delete",
                "Delete Workflow",
                "Delete a workflow. Cannot be undone.",
                id_only,
                Annotations::DESTRUCTIVE,
            ),
            delete,
        ),
    ]
}

/// A compact list entry.
pub fn compact_summary(w: &Value) -> Value {
    json!({
        "id": w["id"],
        "name": w["name"],
        "active": w["active"],
        "isArchived": w["isArchived"],
        "tags": tag_names(w),
        "nodeCount": w["nodes"].as_array().map(|n| n.iter().filter(|n| n["type"] != crate::execution::STICKY_NOTE).count()),
        "updatedAt": w["updatedAt"],
    })
}

fn tag_names(w: &Value) -> Vec<Value> {
    w["tags"]
        .as_array()
        .map(|t| t.iter().map(|t| t["name"].clone()).collect())
        .unwrap_or_default()
}

/// The compact view of a full workflow.
pub fn compact_workflow(w: &Value, positions: bool) -> Value {
    let nodes: Vec<Value> = w["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .map(|n| {
                    let mut keys = vec![
                        "name",
                        "type",
                        "typeVersion",
                        "parameters",
                        "onError",
                        "disabled",
                        "webhookId",
                    ];
                    if positions {
                        keys.push("position");
                    }
                    let mut out = pick(n, &keys);
                    if let Some(creds) = n["credentials"].as_object() {
                        let names: Map<String, Value> = creds
                            .iter()
                            .map(|(k, v)| (k.clone(), json!({"id": v["id"], "name": v["name"]})))
                            .collect();
                        out["credentials"] = Value::Object(names);
                    }
                    out
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out = json!({
        "id": w["id"],
        "name": w["name"],
        "active": w["active"],
        "isArchived": w["isArchived"],
        "versionId": w["versionId"],
        "tags": tag_names(w),
        "nodes": nodes,
        "connections": w["connections"],
        "settings": w["settings"],
    });
    if let Some(desc) = w["description"].as_str() {
        out["description"] = json!(desc);
    }
    out
}

async fn list(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let mut q: Vec<(&str, String)> = vec![("excludePinnedData", "true".into())];
    for key in ["name", "tags", "projectId"] {
        if let Some(v) = opt_str(&args, key) {
            q.push((key, v));
        }
    }
    if let Some(a) = args["active"].as_bool() {
        q.push(("active", a.to_string()));
    }
    paging_query(&args, &mut q, 50);
    let r = call(&c, &ctx, Method::GET, "/workflows", &q, None).await?;
    let archived = args["archived"].as_bool();
    let workflows: Vec<Value> = r["data"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|w| {
                    archived.is_none_or(|want| w["isArchived"].as_bool().unwrap_or(false) == want)
                })
                .map(compact_summary)
                .collect()
        })
        .unwrap_or_default();
    Ok(json!({"workflows": workflows, "nextCursor": r["nextCursor"]}))
}

async fn get(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let id = path_id(&args, "workflowId")?;
    let w = call(
        &c,
        &ctx,
        Method::GET,
        &format!("/workflows/{id}"),
        &[],
        None,
    )
    .await?;
    Ok(compact_workflow(
        &w,
        args["includePositions"].as_bool().unwrap_or(false),
    ))
}

/// Settings reduced to the keys n8n accepts.
pub fn writable_settings(s: &Value) -> Value {
    let mut out = pick(s, WRITABLE_SETTINGS);
    if out
        .as_object()
        .is_some_and(|o| !o.contains_key("executionOrder"))
    {
        out["executionOrder"] = json!("v1");
    }
    out
}

/// Nodes reduced to accepted keys; id, webhookId and position come from `current` nodes of the
/// same name when missing, and new nodes without a position are placed in a row.
pub fn writable_nodes(nodes: &Value, current: Option<&Value>) -> Result<Value, ToolError> {
    let nodes = nodes
        .as_array()
        .ok_or_else(|| ToolError::invalid("'nodes' must be an array of node objects"))?;
    let existing = current.and_then(Value::as_array);
    let mut out = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let name = n["name"]
            .as_str()
            .ok_or_else(|| ToolError::invalid(format!("node {i} has no 'name'")))?;
        if n["type"].as_str().is_none() {
            return Err(ToolError::invalid(format!("node '{name}' has no 'type'")));
        }
        let mut node = pick(n, WRITABLE_NODE_KEYS);
        let old = existing.and_then(|e| e.iter().find(|o| o["name"].as_str() == Some(name)));
        for key in ["id", "webhookId", "position"] {
            if node.get(key).is_none() {
                if let Some(v) = old.and_then(|o| o.get(key)).filter(|v| !v.is_null()) {
                    node[key] = v.clone();
                }
            }
        }
        if node.get("position").is_none() {
            node["position"] = json!([i as i64 * 220, 0]);
        }
        if node.get("parameters").is_none() {
            node["parameters"] = json!({});
        }
        if node.get("typeVersion").is_none() {
            node["typeVersion"] = json!(1);
        }
        out.push(node);
    }
    Ok(Value::Array(out))
}

async fn create(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let name = super::req_str(&args, "name")?;
    let mut body = json!({
        "name": name,
        "nodes": writable_nodes(&args["nodes"], None)?,
        "connections": if args["connections"].is_object() { args["connections"].clone() } else { json!({}) },
        "settings": writable_settings(&args["settings"]),
    });
    if let Some(p) = opt_str(&args, "projectId") {
        body["projectId"] = json!(p);
    }
    let w = call(&c, &ctx, Method::POST, "/workflows", &[], Some(&body)).await?;
    Ok(compact_workflow(&w, false))
}

async fn update(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let id = path_id(&args, "workflowId")?;
    let path = format!("/workflows/{id}");
    let current = call(&c, &ctx, Method::GET, &path, &[], None).await?;
    let body = update_body(&current, &args)?;
    let w = call(&c, &ctx, Method::PUT, &path, &[], Some(&body)).await?;
    Ok(compact_workflow(&w, false))
}

/// The PUT body for an update: the caller's fields over the current workflow, writable keys only.
pub fn update_body(current: &Value, args: &Value) -> Result<Value, ToolError> {
    let nodes = if args["nodes"].is_array() {
        writable_nodes(&args["nodes"], Some(&current["nodes"]))?
    } else {
        writable_nodes(&current["nodes"], None)?
    };
    let mut body = json!({
        "name": args["name"].as_str().map_or(current["name"].clone(), |n| json!(n)),
        "nodes": nodes,
        "connections": if args["connections"].is_object() { args["connections"].clone() } else { current["connections"].clone() },
        "settings": writable_settings(if args["settings"].is_object() { &args["settings"] } else { &current["settings"] }),
    });
    if let Some(d) = args["description"].as_str() {
        body["description"] = json!(d);
    }
    if args.get("staticData").is_some() {
        body["staticData"] = args["staticData"].clone();
    } else if !current["staticData"].is_null() {
        body["staticData"] = current["staticData"].clone();
    }
    Ok(body)
}

async fn action(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
    verb: &'static str,
) -> Result<Value, ToolError> {
    let id = path_id(&args, "workflowId")?;
    let w = call(
        &c,
        &ctx,
        Method::POST,
        &format!("/workflows/{id}/{verb}"),
        &[],
        None,
    )
    .await?;
    Ok(json!({
        "id": w["id"],
        "name": w["name"],
        "active": w["active"],
        "isArchived": w["isArchived"],
    }))
}

async fn delete(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let id = path_id(&args, "workflowId")?;
    let w = call(
        &c,
        &ctx,
        Method::DELETE,
        &format!("/workflows/{id}"),
        &[],
        None,
    )
    .await?;
    Ok(json!({"deleted": true, "id": w["id"], "name": w["name"]}))
}

#[cfg(test)]
mod tests {
    use super::*;

    use toolshed_testing::fixture;

    #[test]
    fn compact_workflow_drops_the_noise() {
        let w = fixture!("GET-workflow-response-wf1.json");
        let c = compact_workflow(&w, false);
        assert_eq!(c["name"], "MCP demo: webhook -> set -> code");
        assert_eq!(c["tags"], json!(["mcp-demo"]));
        assert_eq!(c["nodes"].as_array().unwrap().len(), 3);
        assert_eq!(c["nodes"][2]["type"], "n8n-nodes-base.code");
        assert!(c["nodes"][0].get("position").is_none());
        assert!(c.get("shared").is_none() && c.get("activeVersion").is_none());
        assert_eq!(
            c["connections"]["Webhook"]["main"][0][0]["node"],
            "Prepare Fields"
        );
        let s = compact_summary(&w);
        assert_eq!(s["nodeCount"], 3);
    }

    #[test]
    fn update_keeps_what_is_not_given_and_sends_only_writable_fields() {
        let current = fixture!("GET-workflow-response-wf1.json");
        let body = update_body(&current, &json!({"name": "Renamed"})).unwrap();
        assert_eq!(body["name"], "Renamed");
        assert_eq!(body["nodes"].as_array().unwrap().len(), 3);
        assert_eq!(
            body["nodes"][0]["webhookId"],
            "5d3e8f0a-2222-4b4b-9c1d-000000000001"
        );
        let keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["name", "nodes", "connections", "settings"]);
        // Nodes given without position or id keep the current ones.
        let body = update_body(
            &current,
            &json!({"nodes": [{"name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2, "parameters": {"path": "x"}, "createdAt": "nope"}]}),
        )
        .unwrap();
        assert_eq!(body["nodes"][0]["position"], json!([0, 0]));
        assert_eq!(
            body["nodes"][0]["id"],
            "0f5c2b7e-1111-4a4b-9c1d-000000000001"
        );
        assert!(body["nodes"][0].get("createdAt").is_none());
    }

    #[test]
    fn settings_are_limited_to_known_keys() {
        let s = writable_settings(
            &json!({"binaryMode": "separate", "timezone": "UTC", "unknownKey": 1, "versionId": "x"}),
        );
        assert_eq!(
            s,
            json!({"binaryMode": "separate", "timezone": "UTC", "executionOrder": "v1"})
        );
        assert!(writable_nodes(&json!([{"type": "x"}]), None).is_err());
    }

    #[test]
    fn an_update_keeps_every_node_field() {
        let current = json!({"name": "w", "connections": {}, "settings": {"binaryMode": "separate"}, "nodes": [
            {"id": "n1", "name": "Set", "type": "n8n-nodes-base.set", "typeVersion": 3.4, "position": [0, 0],
             "parameters": {}, "continueOnFail": true, "alwaysOutputData": true, "notes": "keep me",
             "notesInFlow": true, "retryOnFail": true, "maxTries": 3, "waitBetweenTries": 500,
             "executeOnce": true, "customTelemetryTags": {"tag": [{"key": "team", "value": "ops"}]},
             "createdAt": "2026-11-22T00:00:00Z"}
        ]});
        let body = update_body(&current, &json!({"name": "renamed", "description": "d"})).unwrap();
        let node = body["nodes"][0].as_object().unwrap();
        for key in [
            "continueOnFail",
            "alwaysOutputData",
            "notes",
            "notesInFlow",
            "retryOnFail",
            "maxTries",
            "waitBetweenTries",
            "executeOnce",
            "customTelemetryTags",
        ] {
            assert_eq!(node[key], current["nodes"][0][key], "{key}");
        }
        assert!(!node.contains_key("createdAt"));
        assert_eq!(body["description"], "d");
        assert_eq!(body["settings"]["binaryMode"], "separate");
    }
}
