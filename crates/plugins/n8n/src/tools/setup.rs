//! Credentials a person enters in n8n themselves: `n8n.credentials.search_types`,
//! `n8n.credentials.setup` and `n8n.workflows.setup`.
//!
//! Secrets never pass through Toolshed or the agent. `setup` answers an
//! [`ActionRequired`](toolshed_core::ToolErrorKind::ActionRequired) error with a link to n8n's
//! own page; the engine pauses the call on an `input` wait (`mode: "url"`) and runs it again
//! once the person answers, and the handler then checks that it was done:
//! - `credentials.setup` remembers (in Toolshed's store, per execution and type) which
//!   credentials of the type existed when it asked, and answers the one created since; it is
//!   offered only where the plugin has the store.
//! - `workflows.setup` asks while a node lacks a credential its type requires (read from the
//!   node catalog, so it needs the login) or names one that does not exist.

use std::collections::BTreeSet;
use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolError};
use toolshed_store::Store;

use super::{call, def, object, opt_u64, req_str};
use crate::client::N8nClient;
use crate::sanitize::truncate_str;

/// Most credential types one search answers.
const MAX_TYPES: u64 = 50;

/// The tools; `credentials.setup` only with a store (it remembers what existed when it asked).
pub(crate) fn tools(c: &Arc<N8nClient>, store: Option<&Store>) -> Vec<Tool> {
    let search = {
        let c = c.clone();
        Tool::from_fn(
            def(
                "credentials.search_types",
                "Search Credential Types",
                "Find credential types installed on the instance by words in their name (e.g. 'slack', 'google sheets oauth'): name, displayName, the fields a person fills in. Needs the configured login.",
                object(
                    json!({
                        "query": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Words to look for."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_TYPES, "description": "Most types answered (default 10)."},
                    }),
                    &["query"],
                ),
                Annotations::READ_ONLY,
            ),
            move |ctx, args| {
                let c = c.clone();
                async move { search_types(&c, &ctx, &args).await }
            },
        )
    };
    let setup = store.map(|store| {
        let c = c.clone();
        let store = Arc::new(store.clone());
        Tool::from_fn(
            def(
                "credentials.setup",
                "Set Up Credential",
                "Have a person create a credential of a type in n8n's own page (the secret never passes through here): the call waits for them with a link, then answers the new credential's id.",
                object(
                    json!({"credentialType": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The credential type, e.g. slackApi (see n8n.credentials.search_types)."}}),
                    &["credentialType"],
                ),
                Annotations::WRITE,
            ),
            move |ctx, args| {
                let (c, store) = (c.clone(), store.clone());
                async move { setup_credential(&c, &store, &ctx, &args).await }
            },
        )
    });
    let workflow = {
        let c = c.clone();
        Tool::from_fn(
            def(
                "workflows.setup",
                "Set Up Workflow Credentials",
                "Have a person assign the credentials a workflow's nodes still need, in n8n's editor (secrets never pass through here): answers at once when nothing is missing, else waits for them with a link and checks again. Needs the configured login.",
                object(
                    json!({"workflowId": {"type": "string", "description": "The workflow."}}),
                    &["workflowId"],
                ),
                Annotations::WRITE,
            ),
            move |ctx, args| {
                let c = c.clone();
                async move { setup_workflow(&c, &ctx, &args).await }
            },
        )
    };
    let mut tools = vec![search, workflow];
    tools.extend(setup);
    tools
}

async fn search_types(c: &N8nClient, ctx: &ToolContext, args: &Value) -> Result<Value, ToolError> {
    let query = req_str(args, "query")?.to_lowercase();
    let limit = opt_u64(args, "limit").unwrap_or(10).min(MAX_TYPES) as usize;
    let types = c
        .credential_types(Some(ctx.timeout))
        .await?
        .ok_or_else(|| {
            ToolError::from(crate::N8nError::NeedsLogin {
                what: "GET /types/credentials.json".into(),
            })
        })?;
    let words: Vec<&str> = query.split_whitespace().collect();
    let mut hits: Vec<(usize, &Value)> = types
        .iter()
        .filter_map(|t| {
            let name = t["name"].as_str()?.to_lowercase();
            let display = t["displayName"].as_str().unwrap_or_default().to_lowercase();
            let all = words
                .iter()
                .all(|w| name.contains(w) || display.contains(w));
            // Exact and prefix matches of the name first.
            let rank = match () {
                _ if name == query.replace(' ', "") => 0,
                _ if name.starts_with(words[0]) => 1,
                _ => 2,
            };
            all.then_some((rank, t))
        })
        .collect();
    hits.sort_by_key(|(rank, t)| (*rank, t["name"].as_str().unwrap_or_default().len()));
    let total = hits.len();
    let types: Vec<Value> = hits
        .into_iter()
        .take(limit)
        .map(|(_, t)| type_view(t))
        .collect();
    Ok(json!({"types": types, "total": total}))
}

/// A credential type as an agent needs it: names and the fields a person fills in.
fn type_view(t: &Value) -> Value {
    let fields: Vec<Value> = t["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] != "notice" && p["type"] != "hidden")
        .take(12)
        .filter_map(|p| p["name"].as_str().map(|n| json!(n)))
        .collect();
    let mut v = json!({
        "name": t["name"],
        "displayName": t["displayName"].as_str().map(|d| truncate_str(d, 120)),
        "fields": fields,
    });
    if let Some(e) = t["extends"].as_array().filter(|e| !e.is_empty()) {
        v["extends"] = json!(e);
    }
    v
}

async fn credentials_of_type(
    c: &N8nClient,
    ctx: &ToolContext,
    ty: &str,
) -> Result<Vec<Value>, ToolError> {
    let (all, _) = super::all_credentials(c, ctx).await?;
    Ok(all.into_iter().filter(|x| x["type"] == ty).collect())
}

/// The display name of a credential type, checking it exists: from the editor's list when a
/// login is configured, else from the public API's schema endpoint.
async fn credential_type_name(
    c: &N8nClient,
    ctx: &ToolContext,
    ty: &str,
) -> Result<String, ToolError> {
    if let Some(types) = c.credential_types(Some(ctx.timeout)).await? {
        return types
            .iter()
            .find(|t| t["name"] == ty)
            .map(|t| t["displayName"].as_str().unwrap_or(ty).to_string())
            .ok_or_else(|| {
                ToolError::not_found(format!(
                    "n8n has no credential type '{ty}'; find one with n8n.credentials.search_types"
                ))
            });
    }
    let path = format!(
        "/credentials/schema/{}",
        super::path_id(&json!({"t": ty}), "t")?
    );
    call(c, ctx, Method::GET, &path, &[], None)
        .await
        .map_err(|e| match e.kind {
            toolshed_core::ToolErrorKind::NotFound => ToolError::not_found(format!(
                "n8n has no credential type '{ty}'; find one with n8n.credentials.search_types"
            )),
            _ => e,
        })?;
    Ok(ty.to_string())
}

/// The key under which `credentials.setup` remembers what existed when it asked.
fn snapshot_key(ctx: &ToolContext, ty: &str) -> Option<String> {
    let key = format!("setup:{}:{ty}", ctx.execution_id.as_deref()?);
    (key.len() <= toolshed_store::plugin_state::MAX_PLUGIN_STATE_KEY).then_some(key)
}

async fn setup_credential(
    c: &N8nClient,
    store: &Store,
    ctx: &ToolContext,
    args: &Value,
) -> Result<Value, ToolError> {
    let ty = req_str(args, "credentialType")?;
    let display = credential_type_name(c, ctx, &ty).await?;
    let now: Vec<Value> = credentials_of_type(c, ctx, &ty).await?;
    let ids = |v: &[Value]| -> BTreeSet<String> {
        v.iter()
            .filter_map(|x| x["id"].as_str().map(str::to_string))
            .collect()
    };
    let key = snapshot_key(ctx, &ty);
    let saved = match &key {
        Some(k) => store
            .plugin_state(crate::PLUGIN_ID, k)
            .await
            .map_err(|e| ToolError::internal(format!("cannot read the setup state: {e}")))?,
        None => None,
    };
    let url = format!("{}/home/credentials/create", c.site());
    let ask = || {
        ToolError::action_required(
            format!(
                "A person must create a '{display}' credential (type {ty}) in n8n: open the link, choose '{display}', enter the secret there and save."
            ),
            &url,
        )
    };
    match saved {
        // Asked before: the credential created since is the answer.
        Some(state) => {
            let before: BTreeSet<String> = serde_json::from_str(&state.value).unwrap_or_default();
            let created = now
                .iter()
                .filter(|x| x["id"].as_str().is_some_and(|id| !before.contains(id)))
                .max_by_key(|x| x["createdAt"].as_str().unwrap_or_default().to_string());
            let Some(created) = created else {
                return Err(ask());
            };
            // Answered: the next setup of this type in this execution asks anew, measured
            // against what exists now.
            if let Some(k) = &key {
                let known = serde_json::to_string(&ids(&now)).unwrap_or_default();
                let _ = store
                    .put_plugin_state(crate::PLUGIN_ID, k, Some(state.version), &known)
                    .await;
            }
            Ok(credential_answer(created))
        }
        None => {
            // First ask: remember what exists now. Outside an execution nothing can wait, so
            // the error with the link is the answer.
            if let Some(k) = &key {
                let known = serde_json::to_string(&ids(&now)).unwrap_or_default();
                store
                    .put_plugin_state(crate::PLUGIN_ID, k, None, &known)
                    .await
                    .map_err(|e| {
                        ToolError::internal(format!("cannot keep the setup state: {e}"))
                    })?;
            }
            Err(ask())
        }
    }
}

fn credential_answer(x: &Value) -> Value {
    json!({"credentialId": x["id"], "name": x["name"], "type": x["type"], "createdAt": x["createdAt"]})
}

async fn setup_workflow(
    c: &N8nClient,
    ctx: &ToolContext,
    args: &Value,
) -> Result<Value, ToolError> {
    let id = super::path_id(args, "workflowId")?;
    let wf = call(c, ctx, Method::GET, &format!("/workflows/{id}"), &[], None).await?;
    let catalog = c.node_catalog(Some(ctx.timeout)).await?.ok_or_else(|| {
        ToolError::from(crate::N8nError::NeedsLogin {
            what: "reading which credentials each node type requires".into(),
        })
    })?;
    let (all, complete) = super::all_credentials(c, ctx).await?;
    let existing: BTreeSet<String> = all
        .iter()
        .filter_map(|x| x["id"].as_str().map(str::to_string))
        .collect();
    let mut missing: Vec<Value> = Vec::new();
    let mut assigned: Vec<Value> = Vec::new();
    for node in wf["nodes"].as_array().into_iter().flatten() {
        if node["disabled"] == true {
            continue;
        }
        let (Some(name), Some(ty)) = (node["name"].as_str(), node["type"].as_str()) else {
            continue;
        };
        let needed = catalog
            .required_credentials(ty, node["typeVersion"].as_f64(), &node["parameters"])
            .unwrap_or_default();
        for cred in needed {
            let set = &node["credentials"][&cred];
            let cid = set["id"].as_str();
            match cid {
                Some(cid) if existing.contains(cid) || !complete => {
                    assigned.push(json!({"node": name, "credentialType": cred, "credentialId": cid}));
                }
                _ => missing.push(json!({"node": name, "credentialType": cred,
                    "problem": if cid.is_some() { "names a credential that does not exist" } else { "none assigned" }})),
            }
        }
    }
    if missing.is_empty() {
        return Ok(json!({"ready": true, "workflowId": id, "credentials": assigned}));
    }
    let list: Vec<String> = missing
        .iter()
        .take(10)
        .map(|m| {
            format!(
                "'{}' needs {}",
                m["node"].as_str().unwrap_or_default(),
                m["credentialType"].as_str().unwrap_or_default()
            )
        })
        .collect();
    Err(ToolError::action_required(
        format!(
            "A person must assign credentials in n8n's editor: {}{}. Open the link, select or create each credential in its node, and save the workflow.",
            list.join("; "),
            if missing.len() > 10 { format!(" and {} more", missing.len() - 10) } else { String::new() }
        ),
        &format!("{}/workflow/{id}", c.site()),
    )
    .with_data(json!({"url": format!("{}/workflow/{id}", c.site()), "missing": missing})))
}
