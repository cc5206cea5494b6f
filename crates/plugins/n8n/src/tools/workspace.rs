//! Keeping a workspace tidy: `n8n.folders.list` and `n8n.folders.create` (the public API's
//! folder operations; n8n refuses them where its `feat:folders` licence is off, and the error
//! says so), `n8n.workflows.move` (the editor API, so it needs the configured login) and
//! `n8n.executions.cleanup` (deletes the finished test executions of a workflow through the
//! public API).

use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolError};

use super::{call, def, make, object, opt_str, opt_u64, path_id};
use crate::client::N8nClient;
use crate::error::N8nError;

/// The folder id n8n uses for "no folder" (a project's root).
pub const PROJECT_ROOT: &str = "0";
/// Most executions one cleanup deletes.
pub const MAX_CLEANUP: u64 = 250;
/// Execution modes that are test runs.
const TEST_MODES: &[&str] = &["manual"];
/// Statuses of executions that are over.
const FINISHED: &[&str] = &["success", "error", "crashed", "canceled"];

pub(crate) fn tools(c: &Arc<N8nClient>) -> Vec<Tool> {
    let project = json!({"type": "string", "description": "The project (default: the login's personal project; needed without a login)."});
    let list = def(
        "folders.list",
        "List Folders",
        "The folders of a project: id, name, parent folder.",
        object(
            json!({"projectId": project, "name": {"type": "string", "maxLength": 128, "description": "Only folders whose name contains this."}}),
            &[],
        ),
        Annotations::READ_ONLY,
    );
    let create = def(
        "folders.create",
        "Create Folder",
        "Create a folder in a project (optionally inside another folder).",
        object(
            json!({
                "name": {"type": "string", "minLength": 1, "maxLength": 128, "description": "The folder's name."},
                "parentFolderId": {"type": "string", "description": "The folder to create it in (default: the project's root)."},
                "projectId": project,
            }),
            &["name"],
        ),
        Annotations::WRITE,
    );
    let mv = def(
        "workflows.move",
        "Move Workflow To Folder",
        "Move a workflow into a folder of its project ('0' is the project's root). Needs the configured login.",
        object(
            json!({
                "workflowId": {"type": "string", "description": "The workflow."},
                "folderId": {"type": "string", "description": "The folder (see n8n.folders.list), or '0' for the root."},
            }),
            &["workflowId", "folderId"],
        ),
        Annotations::WRITE,
    );
    let mut cleanup_annotations = Annotations::WRITE;
    cleanup_annotations.destructive = true;
    let cleanup = def(
        "executions.cleanup",
        "Clean Up Test Executions",
        "Delete the finished test executions (manual runs, as n8n.workflows.run and verify make) of a workflow, up to 250 a call; production executions are kept.",
        object(
            json!({
                "workflowId": {"type": "string", "description": "The workflow."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_CLEANUP, "description": "Most executions to delete (default 250)."},
            }),
            &["workflowId"],
        ),
        cleanup_annotations,
    );
    vec![
        make(c, list, list_folders),
        make(c, create, create_folder),
        make(c, mv, move_workflow),
        make(c, cleanup, cleanup_executions),
    ]
}

/// A folders call refused (403) for want of the licence, said plainly; other failures as
/// they are.
fn folder_error(e: N8nError) -> ToolError {
    match e {
        N8nError::Forbidden { .. } => ToolError::unauthorized(
            "n8n refused the folder operation: folders need n8n's feat:folders licence on this instance, or the login lacks the project role",
        ),
        other => other.into(),
    }
}

/// The project: given, else the workflow's, else the login's personal project.
async fn project_id(c: &N8nClient, ctx: &ToolContext, args: &Value) -> Result<String, ToolError> {
    if opt_str(args, "projectId").is_some() {
        return path_id(args, "projectId");
    }
    let p = c
        .rest(
            Method::GET,
            "/projects/personal",
            &[],
            None,
            Some(ctx.timeout),
        )
        .await
        .map_err(|e| match e {
            N8nError::NeedsLogin { .. } => ToolError::invalid(
                "give 'projectId' (the plugin has no login to find the personal project)",
            ),
            other => other.into(),
        })?;
    p["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| ToolError::upstream("n8n answered the personal project without an id"))
}

fn folder_view(f: &Value) -> Value {
    json!({
        "id": f["id"],
        "name": f["name"],
        "parentFolderId": f["parentFolderId"].as_str().or(f["parentFolder"]["id"].as_str()),
    })
}

async fn list_folders(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let project = project_id(&c, &ctx, &args).await?;
    let mut q = vec![("take", "100".to_string())];
    if let Some(name) = opt_str(&args, "name") {
        q.push(("filter", json!({"name": name}).to_string()));
    }
    let path = format!("/projects/{project}/folders");
    let r = c
        .request(Method::GET, &path, &q, None, Some(ctx.timeout))
        .await
        .map_err(folder_error)?;
    let items = r["data"]
        .as_array()
        .or(r.as_array())
        .cloned()
        .unwrap_or_default();
    let folders: Vec<Value> = items.iter().map(folder_view).collect();
    Ok(json!({"projectId": project, "folders": folders, "count": r["count"]}))
}

async fn create_folder(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let project = project_id(&c, &ctx, &args).await?;
    let mut body = json!({"name": super::req_str(&args, "name")?});
    if opt_str(&args, "parentFolderId").is_some() {
        body["parentFolderId"] = json!(path_id(&args, "parentFolderId")?);
    }
    let path = format!("/projects/{project}/folders");
    let f = c
        .request(Method::POST, &path, &[], Some(&body), Some(ctx.timeout))
        .await
        .map_err(folder_error)?;
    let mut out = folder_view(&f);
    out["projectId"] = json!(project);
    Ok(out)
}

async fn move_workflow(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let id = path_id(&args, "workflowId")?;
    let folder = path_id(&args, "folderId")?;
    let current = c
        .rest(
            Method::GET,
            &format!("/workflows/{id}"),
            &[],
            None,
            Some(ctx.timeout),
        )
        .await?;
    let body = json!({"parentFolderId": folder, "versionId": current["versionId"]});
    let w = c
        .rest(
            Method::PATCH,
            &format!("/workflows/{id}"),
            &[],
            Some(&body),
            Some(ctx.timeout),
        )
        .await
        .map_err(|e| match e {
            N8nError::NotFound(_) => ToolError::not_found(format!(
                "n8n has no folder '{folder}' in the workflow's project; see n8n.folders.list"
            )),
            other => folder_error(other),
        })?;
    Ok(json!({
        "workflowId": id,
        "folderId": w["parentFolder"]["id"].as_str().unwrap_or(PROJECT_ROOT),
        "folderName": w["parentFolder"]["name"],
    }))
}

async fn cleanup_executions(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let id = path_id(&args, "workflowId")?;
    let limit = opt_u64(&args, "limit")
        .unwrap_or(MAX_CLEANUP)
        .min(MAX_CLEANUP) as usize;
    let mut doomed: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut kept = 0usize;
    // A few pages at most: the newest executions first, as n8n lists them.
    for _ in 0..8 {
        let mut q = vec![("workflowId", id.clone()), ("limit", "250".to_string())];
        if let Some(c) = &cursor {
            q.push(("cursor", c.clone()));
        }
        let r = call(&c, &ctx, Method::GET, "/executions", &q, None).await?;
        for e in r["data"].as_array().into_iter().flatten() {
            let test = e["mode"].as_str().is_some_and(|m| TEST_MODES.contains(&m));
            let over = e["status"].as_str().is_some_and(|s| FINISHED.contains(&s));
            match (
                test && over,
                e["id"]
                    .as_str()
                    .map(str::to_string)
                    .or(e["id"].as_u64().map(|n| n.to_string())),
            ) {
                (true, Some(eid)) if doomed.len() < limit => doomed.push(eid),
                (true, Some(_)) => {}
                _ => kept += 1,
            }
        }
        cursor = r["nextCursor"].as_str().map(str::to_string);
        if cursor.is_none() || doomed.len() >= limit {
            break;
        }
    }
    let mut deleted = Vec::new();
    let mut failed = Vec::new();
    for eid in &doomed {
        match call(
            &c,
            &ctx,
            Method::DELETE,
            &format!("/executions/{eid}"),
            &[],
            None,
        )
        .await
        {
            Ok(_) => deleted.push(eid.clone()),
            Err(e) => failed.push(json!({"executionId": eid, "error": e.message})),
        }
    }
    let mut out = json!({
        "workflowId": id,
        "deleted": deleted.len(),
        "deletedIds": deleted,
        "keptOtherExecutions": kept,
    });
    if doomed.len() >= limit {
        out["more"] = json!("there may be more test executions: call again");
    }
    if !failed.is_empty() {
        out["failed"] = json!(failed);
    }
    Ok(out)
}
