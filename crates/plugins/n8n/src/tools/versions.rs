//! Workflow versions, n8n's own history: `n8n.workflows.versions.list` and `.get` (a version
//! as the workflow text of [`crate::code`]) through the public API (`GET
//! /workflows/{id}/history`, `GET /workflows/{id}/versions/{versionId}`), `.restore` (the
//! version's nodes and connections saved as the workflow's current state, which n8n records as
//! a new version) and `.rename` (n8n's named versions through the editor API, so it needs the
//! configured login; a licensed feature: a community instance refuses it and the error says
//! so).

use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolError};

use super::workflows::{compact_summary, update_body};
use super::{call, def, make, object, opt_str, opt_u64, path_id};
use crate::client::N8nClient;
use crate::error::N8nError;

/// Most versions listed in one page.
const MAX_PAGE: u64 = 100;

pub(crate) fn tools(c: &Arc<N8nClient>) -> Vec<Tool> {
    let ids = json!({
        "workflowId": {"type": "string", "description": "The workflow."},
        "versionId": {"type": "string", "description": "A version id from n8n.workflows.versions.list."},
    });
    let list = def(
        "workflows.versions.list",
        "List Workflow Versions",
        "The saved versions of a workflow, newest first: versionId, when, who, name.",
        object(
            json!({
                "workflowId": {"type": "string", "description": "The workflow."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "description": "Page size (default 20)."},
                "cursor": {"type": "string", "description": "The nextCursor of the previous page."},
            }),
            &["workflowId"],
        ),
        Annotations::READ_ONLY,
    );
    let get = def(
        "workflows.versions.get",
        "Get Workflow Version",
        "One saved version of a workflow as workflow text (the form of n8n.workflows.get_as_code).",
        object(ids.clone(), &["workflowId", "versionId"]),
        Annotations::READ_ONLY,
    );
    let restore = def(
        "workflows.versions.restore",
        "Restore Workflow Version",
        "Make a saved version the workflow's current state (its nodes and connections; name and settings stay); n8n keeps the replaced state as a version too.",
        object(ids.clone(), &["workflowId", "versionId"]),
        Annotations::WRITE,
    );
    let mut rename_props = ids;
    rename_props["name"] = json!({"type": "string", "minLength": 1, "maxLength": 128, "description": "The version's new name."});
    rename_props["description"] =
        json!({"type": "string", "maxLength": 2048, "description": "What the version is."});
    let rename = def(
        "workflows.versions.rename",
        "Rename Workflow Version",
        "Name (and describe) a saved version. n8n offers named versions on licensed instances only; needs the configured login.",
        object(rename_props, &["workflowId", "versionId", "name"]),
        Annotations::WRITE,
    );
    vec![
        make(c, list, list_versions),
        make(c, get, get_version),
        make(c, restore, restore_version),
        make(c, rename, rename_version),
    ]
}

fn version_path(args: &Value) -> Result<String, ToolError> {
    Ok(format!(
        "/workflows/{}/versions/{}",
        path_id(args, "workflowId")?,
        path_id(args, "versionId")?
    ))
}

/// A version's metadata, without its nodes.
fn version_view(v: &Value) -> Value {
    let mut out = super::pick(
        v,
        &[
            "versionId",
            "createdAt",
            "updatedAt",
            "authors",
            "name",
            "description",
            "autosaved",
        ],
    );
    if let Some(o) = out.as_object_mut() {
        o.retain(|_, x| !x.is_null());
    }
    out
}

async fn list_versions(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let path = format!("/workflows/{}/history", path_id(&args, "workflowId")?);
    let mut q = vec![(
        "limit",
        opt_u64(&args, "limit")
            .unwrap_or(20)
            .min(MAX_PAGE)
            .to_string(),
    )];
    if let Some(cursor) = opt_str(&args, "cursor") {
        q.push(("cursor", cursor));
    }
    let r = call(&c, &ctx, Method::GET, &path, &q, None).await?;
    let versions: Vec<Value> = r["data"]
        .as_array()
        .into_iter()
        .flatten()
        .map(version_view)
        .collect();
    Ok(json!({"versions": versions, "nextCursor": r["nextCursor"]}))
}

async fn get_version(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let v = fetch_version(&c, &ctx, &args).await?;
    let mut out = version_view(&v);
    let current = call(
        &c,
        &ctx,
        Method::GET,
        &format!("/workflows/{}", path_id(&args, "workflowId")?),
        &[],
        None,
    )
    .await?;
    let mut as_workflow = v.clone();
    as_workflow["name"] = current["name"].clone();
    if as_workflow["settings"].is_null() {
        as_workflow["settings"] = current["settings"].clone();
    }
    out["workflowId"] = json!(path_id(&args, "workflowId")?);
    out["current"] = json!(current["versionId"] == v["versionId"]);
    out["code"] = json!(crate::code::to_code(&as_workflow));
    Ok(out)
}

async fn fetch_version(c: &N8nClient, ctx: &ToolContext, args: &Value) -> Result<Value, ToolError> {
    let path = version_path(args)?;
    call(c, ctx, Method::GET, &path, &[], None)
        .await
        .map_err(|e| match e.kind {
            toolshed_core::ToolErrorKind::NotFound => ToolError::not_found(format!(
                "workflow {} has no version '{}'; see n8n.workflows.versions.list",
                args["workflowId"].as_str().unwrap_or_default(),
                args["versionId"].as_str().unwrap_or_default()
            )),
            _ => e,
        })
}

async fn restore_version(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let id = path_id(&args, "workflowId")?;
    let v = fetch_version(&c, &ctx, &args).await?;
    if !v["nodes"].is_array() {
        return Err(ToolError::internal(
            "n8n answered the version without its nodes",
        ));
    }
    let path = format!("/workflows/{id}");
    let current = call(&c, &ctx, Method::GET, &path, &[], None).await?;
    let restored = json!({"nodes": v["nodes"], "connections": v["connections"]});
    let body = update_body(&current, &restored)?;
    let saved = call(&c, &ctx, Method::PUT, &path, &[], Some(&body)).await?;
    let mut out = compact_summary(&saved);
    out["restoredFrom"] = v["versionId"].clone();
    out["versionId"] = saved["versionId"].clone();
    Ok(out)
}

async fn rename_version(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let path = format!(
        "/workflow-history/workflow/{}/versions/{}",
        path_id(&args, "workflowId")?,
        path_id(&args, "versionId")?
    );
    let mut body = json!({"name": super::req_str(&args, "name")?});
    if let Some(d) = opt_str(&args, "description") {
        body["description"] = json!(d);
    }
    let r = c
        .rest(Method::PATCH, &path, &[], Some(&body), Some(ctx.timeout))
        .await
        .map_err(|e| match e {
            N8nError::Forbidden { .. } => ToolError::unauthorized(
                "n8n refused to name the version: named versions are a licensed n8n feature (feat:namedVersions) this instance does not have, or the login may not edit this workflow",
            ),
            other => other.into(),
        })?;
    Ok(version_view(&r))
}
