//! `n8n.workflows.get_as_code` and `n8n.workflows.build`: a workflow as the compact text of
//! [`crate::code`], and that text (whole, or patched with `{old, new}` replacements) checked
//! against the instance's node types ([`crate::validate`]) and saved.
//!
//! Patches apply to the last text this principal submitted for the workflow (kept in
//! Toolshed's store when the plugin has one, also when it failed the checks, so a fix is one
//! small patch), else to the workflow's current text. Node ids, webhook ids and positions of
//! nodes that keep their name are kept; credential names are filled in from their ids.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolError};
use toolshed_store::plugin_state::PutOutcome;
use toolshed_store::Store;

use super::workflows::{compact_summary, update_body, writable_nodes, writable_settings};
use super::{call, def, object, opt_str, path_id};
use crate::client::N8nClient;
use crate::code::{self, CodeError};
use crate::validate::{self, Credentials};

/// Most patches in one call.
const MAX_PATCHES: usize = 50;

/// The two tools; `store` keeps the last submitted text per principal and workflow.
pub(crate) fn tools(c: &Arc<N8nClient>, store: Option<&Store>) -> Vec<Tool> {
    let store = store.cloned().map(Arc::new);
    let get = {
        let (c, store) = (c.clone(), store.clone());
        Tool::from_fn(
            def(
                "workflows.get_as_code",
                "Get Workflow As Code",
                "A workflow as compact editable text (one 'node' line per node with indented JSON fields, one line per connection). Edit it and save it with n8n.workflows.build.",
                object(
                    json!({"workflowId": {"type": "string", "description": "The workflow."}}),
                    &["workflowId"],
                ),
                Annotations::READ_ONLY,
            ),
            move |ctx, args| {
                let (c, store) = (c.clone(), store.clone());
                async move { get_as_code(&c, store.as_deref(), &ctx, &args).await }
            },
        )
    };
    let build = {
        let (c, store) = (c.clone(), store.clone());
        Tool::from_fn(
            def(
                "workflows.build",
                "Build Workflow",
                "Create or replace a workflow from its text (the form of n8n.workflows.get_as_code): give the whole 'code', or 'patches' [{old, new}] replacing exact snippets of the last text sent or read. The text is checked against the installed node types (types, versions, parameters, required values, connections, credentials) and saved only when nothing is wrong; each problem names its node and parameter.",
                object(
                    json!({
                        "workflowId": {"type": "string", "description": "The workflow to replace; leave out to create one."},
                        "code": {"type": "string", "maxLength": code::MAX_CODE_BYTES, "description": "The whole text."},
                        "patches": {"type": "array", "maxItems": MAX_PATCHES, "items": {
                            "type": "object",
                            "properties": {"old": {"type": "string", "minLength": 1}, "new": {"type": "string"}},
                            "required": ["old", "new"], "additionalProperties": false
                        }, "description": "Replacements, each of a snippet that occurs exactly once."},
                        "projectId": {"type": "string", "description": "The project of a new workflow."},
                    }),
                    &[],
                ),
                Annotations::WRITE,
            ),
            move |ctx, args| {
                let (c, store) = (c.clone(), store.clone());
                async move { build(&c, store.as_deref(), &ctx, &args).await }
            },
        )
    };
    vec![get, build]
}

/// Where the last text of `workflow` (or `new`) sent by the caller is kept.
fn text_key(ctx: &ToolContext, workflow: Option<&str>) -> Option<String> {
    let key = format!("code:{}:{}", ctx.principal, workflow.unwrap_or("new"));
    (key.len() <= toolshed_store::plugin_state::MAX_PLUGIN_STATE_KEY).then_some(key)
}

/// The last text a principal sent or read for a workflow, and the workflow version it was
/// based on (`None` for a new workflow).
struct Kept {
    version: Option<String>,
    code: String,
}

/// Keeps `text` as the base of the next patches; a text too large to keep clears the base, so
/// that the next patches apply to the workflow as n8n has it, never to an older text.
async fn remember(
    store: Option<&Store>,
    ctx: &ToolContext,
    workflow: Option<&str>,
    text: &str,
    version: Option<&str>,
) {
    let (Some(store), Some(key)) = (store, text_key(ctx, workflow)) else {
        return;
    };
    let mut value = json!({"versionId": version, "code": text}).to_string();
    if value.len() > toolshed_store::plugin_state::MAX_PLUGIN_STATE_VALUE {
        value = json!({"versionId": null, "code": null}).to_string();
    }
    // The last writer wins: read the version, write over it, again if another write came
    // between.
    for _ in 0..3 {
        let read = match store.plugin_state(crate::PLUGIN_ID, &key).await {
            Ok(s) => s.map(|s| s.version),
            Err(e) => return tracing::warn!("n8n: cannot keep the workflow text: {e}"),
        };
        match store
            .put_plugin_state(crate::PLUGIN_ID, &key, read, &value)
            .await
        {
            Ok(PutOutcome::Written { .. }) => return,
            Ok(PutOutcome::Conflict) => continue,
            Err(e) => return tracing::warn!("n8n: cannot keep the workflow text: {e}"),
        }
    }
}

async fn recall(
    store: Option<&Store>,
    ctx: &ToolContext,
    workflow: Option<&str>,
) -> Result<Option<Kept>, ToolError> {
    let (Some(store), Some(key)) = (store, text_key(ctx, workflow)) else {
        return Ok(None);
    };
    let state = store
        .plugin_state(crate::PLUGIN_ID, &key)
        .await
        .map_err(|e| ToolError::internal(format!("cannot read the last workflow text: {e}")))?;
    let Some(v) = state.and_then(|s| serde_json::from_str::<Value>(&s.value).ok()) else {
        return Ok(None);
    };
    Ok(v["code"].as_str().map(|code| Kept {
        version: v["versionId"].as_str().map(str::to_string),
        code: code.to_string(),
    }))
}

async fn fetch_workflow(c: &N8nClient, ctx: &ToolContext, id: &str) -> Result<Value, ToolError> {
    call(c, ctx, Method::GET, &format!("/workflows/{id}"), &[], None).await
}

async fn get_as_code(
    c: &N8nClient,
    store: Option<&Store>,
    ctx: &ToolContext,
    args: &Value,
) -> Result<Value, ToolError> {
    let id = path_id(args, "workflowId")?;
    let w = fetch_workflow(c, ctx, &id).await?;
    let text = code::to_code(&w);
    remember(store, ctx, Some(&id), &text, w["versionId"].as_str()).await;
    Ok(json!({"workflowId": id, "versionId": w["versionId"], "code": text}))
}

fn code_error(e: CodeError) -> ToolError {
    ToolError::invalid(format!("the workflow text cannot be read: {e}"))
}

/// The text to build: `code`, or `patches` applied to the last text, which must still be of
/// the workflow as n8n has it (`current`): when the workflow changed since (edited in n8n, or
/// by another call), the patches apply to its current text instead.
async fn submitted_text(
    store: Option<&Store>,
    ctx: &ToolContext,
    args: &Value,
    id: Option<&str>,
    current: Option<&Value>,
) -> Result<String, ToolError> {
    match (args["code"].as_str(), args["patches"].as_array()) {
        (Some(text), None) => Ok(text.to_string()),
        (None, Some(patches)) => {
            let kept = recall(store, ctx, id).await?;
            let base = match (kept, current) {
                (Some(k), Some(w)) if k.version.as_deref() == w["versionId"].as_str() => k.code,
                (_, Some(w)) => code::to_code(w),
                (Some(k), None) => k.code,
                (None, None) => return Err(ToolError::invalid(
                    "there is no earlier text of a new workflow to patch: send the whole 'code'",
                )),
            };
            let pairs: Vec<(String, String)> = patches
                .iter()
                .map(|p| {
                    (
                        p["old"].as_str().unwrap_or_default().to_string(),
                        p["new"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect();
            code::apply_patches(&base, &pairs).map_err(code_error)
        }
        _ => Err(ToolError::invalid(
            "give exactly one of 'code' (the whole text) and 'patches'",
        )),
    }
}

/// The instance's credentials (id → type), `None` when they cannot all be listed.
async fn credential_types(c: &N8nClient, ctx: &ToolContext) -> Option<(Credentials, Value)> {
    let (list, complete) = super::all_credentials(c, ctx).await.ok()?;
    if !complete {
        return None;
    }
    let types = list
        .iter()
        .filter_map(|x| {
            Some((
                x["id"].as_str()?.to_string(),
                x["type"].as_str()?.to_string(),
            ))
        })
        .collect();
    Some((types, Value::Array(list)))
}

/// Fills each credential's name from the instance's list.
fn name_credentials(nodes: &mut Value, list: &Value) {
    for n in nodes.as_array_mut().into_iter().flatten() {
        let creds = n.get_mut("credentials").and_then(Value::as_object_mut);
        for (_, cred) in creds.into_iter().flatten() {
            let id = cred["id"].as_str().unwrap_or_default().to_string();
            if let Some(found) = list
                .as_array()
                .into_iter()
                .flatten()
                .find(|x| x["id"] == id.as_str())
            {
                cred["name"] = found["name"].clone();
            }
        }
    }
}

async fn build(
    c: &N8nClient,
    store: Option<&Store>,
    ctx: &ToolContext,
    args: &Value,
) -> Result<Value, ToolError> {
    let id = match opt_str(args, "workflowId") {
        Some(_) => Some(path_id(args, "workflowId")?),
        None => None,
    };
    let current = match &id {
        Some(id) => Some(fetch_workflow(c, ctx, id).await?),
        None => None,
    };
    let based_on = current.as_ref().and_then(|w| w["versionId"].as_str());
    let text = submitted_text(store, ctx, args, id.as_deref(), current.as_ref()).await?;
    // Kept before the checks, so a failed text can be fixed with a patch.
    remember(store, ctx, id.as_deref(), &text, based_on).await;
    let mut draft = code::parse(&text).map_err(code_error)?;
    let catalog = c.node_catalog(Some(ctx.timeout)).await?;
    let creds = credential_types(c, ctx).await;
    let mut notes = Vec::new();
    match &catalog {
        Some(catalog) => {
            let problems = validate::validate(catalog, &draft, creds.as_ref().map(|c| &c.0));
            if !problems.is_empty() {
                let list: Vec<String> = problems
                    .iter()
                    .map(|p| match &p.parameter {
                        Some(param) => format!("node {:?}, parameter '{param}': {}", p.node, p.message),
                        None => format!("node {:?}: {}", p.node, p.message),
                    })
                    .collect();
                return Err(ToolError::invalid(format!(
                    "the workflow was not saved; {} problem(s): {}",
                    problems.len(),
                    list.join("; ")
                ))
                .with_data(json!({"problems": problems.iter().map(validate::Problem::to_json).collect::<Vec<_>>()})));
            }
        }
        None => notes.push(
            "node types were not checked: the plugin has no login to read the instance's node catalog",
        ),
    }
    if creds.is_none() {
        notes.push("credentials were not checked: they could not be listed");
    }
    if let Some((_, list)) = &creds {
        name_credentials(&mut draft["nodes"], list);
    }
    let saved = match (&id, &current) {
        (Some(id), Some(current)) => {
            let path = format!("/workflows/{id}");
            let body = update_body(current, &draft)?;
            call(c, ctx, Method::PUT, &path, &[], Some(&body)).await?
        }
        _ => {
            let mut body = json!({
                "name": draft["name"],
                "nodes": writable_nodes(&draft["nodes"], None)?,
                "connections": draft["connections"],
                "settings": writable_settings(&draft["settings"]),
            });
            if let Some(d) = draft["description"].as_str() {
                body["description"] = json!(d);
            }
            if let Some(p) = opt_str(args, "projectId") {
                body["projectId"] = json!(p);
            }
            call(c, ctx, Method::POST, "/workflows", &[], Some(&body)).await?
        }
    };
    // What was saved is the base of the next patches, at the version n8n gave it.
    if let Some(saved_id) = saved["id"].as_str() {
        remember(
            store,
            ctx,
            Some(saved_id),
            &text,
            saved["versionId"].as_str(),
        )
        .await;
    }
    let mut out = compact_summary(&saved);
    out["workflowId"] = saved["id"].clone();
    out["versionId"] = saved["versionId"].clone();
    out["saved"] = json!(true);
    if !notes.is_empty() {
        out["notes"] = json!(notes);
    }
    Ok(out)
}
