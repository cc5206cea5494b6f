//! Node discovery: `nodes.search` and `nodes.get_type`.
//!
//! With a login configured, both read the instance's full node catalog (every installed node
//! type, from the editor's `GET /types/nodes.json`; see [`crate::catalog`]). Without one — or
//! when signing in fails — n8n's public API has no endpoint listing node types, so they look at
//! the node types the instance's own workflows use (read through `GET /workflows`, a bounded
//! number of pages), and every answer states that limit.

use std::collections::BTreeMap;
use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolError};

use super::{call, def, make, object, opt_str, opt_u64, req_str};
use crate::catalog::NodeCatalog;
use crate::client::N8nClient;
use crate::execution::STICKY_NOTE;
use crate::sanitize::{shrink, Limits};

/// Most workflow pages (of 100) read per call.
pub const MAX_PAGES: usize = 10;

/// The limit of the fallback, stated in its answers.
pub const LIMIT_NOTE: &str = "n8n's public API cannot list node types: this looks only at node types used by the workflows on this instance (up to 1,000 workflows). A node type no workflow uses yet will not be found; its name is usually n8n-nodes-base.<name> or @n8n/n8n-nodes-langchain.<name>. Configure [n8n] email and password to search the instance's full node catalog.";

/// Where catalog answers come from.
pub const CATALOG_NOTE: &str = "from the instance's full node catalog (every installed node type, as the n8n editor lists them)";

pub(crate) fn tools(c: &Arc<N8nClient>) -> Vec<Tool> {
    let (search_desc, get_desc) = if c.has_login() {
        (
            "Search every node type installed on this n8n instance (its full node catalog) by name, display name, alias, category or description: type, display name, versions, default version. Falls back to the types used in workflows if signing in fails.".to_string(),
            "One installed node type in detail, from the instance's node catalog: versions, credentials, inputs/outputs and its parameters (name, type, default, options, when shown). Pass resource and operation to see only that operation's parameters; version for an older version.".to_string(),
        )
    } else {
        (
            format!("Search node types by name among those used in this instance's workflows: type, versions seen, how many nodes use it. {LIMIT_NOTE}"),
            format!("How a node type is used in this instance's workflows: versions, the workflows and nodes using it, parameter names seen and one example node's parameters. {LIMIT_NOTE}"),
        )
    };
    vec![
        make(
            c,
            def(
                "nodes.search",
                "Search Node Types",
                &search_desc,
                object(
                    json!({
                        "query": {"type": "string", "description": "Words to look for, e.g. \"http\", \"slack\" or \"send email\". Empty lists all."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "Most results. Default 25."},
                    }),
                    &[],
                ),
                Annotations::READ_ONLY,
            ),
            search,
        ),
        make(
            c,
            def(
                "nodes.get_type",
                "Get Node Type",
                &get_desc,
                object(
                    json!({
                        "nodeType": {"type": "string", "description": "Full type name, e.g. n8n-nodes-base.httpRequest."},
                        "version": {"type": "number", "description": "Type version (catalog only). Default: the type's default version."},
                        "resource": {"type": "string", "description": "Only parameters shown for this resource (catalog only), e.g. message."},
                        "operation": {"type": "string", "description": "Only parameters shown for this operation (catalog only), e.g. post."},
                    }),
                    &["nodeType"],
                ),
                Annotations::READ_ONLY,
            ),
            get_type,
        ),
    ]
}

/// The catalog when a login is configured: `Ok(None)` without a login, `Err(message)` when
/// signing in or reading it failed (the caller falls back and says why).
async fn catalog(c: &N8nClient, ctx: &ToolContext) -> Result<Option<Arc<NodeCatalog>>, String> {
    c.node_catalog(Some(ctx.timeout))
        .await
        .map_err(|e| e.to_string())
}

/// One node type as seen across workflows.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TypeUsage {
    pub versions: Vec<Value>,
    /// `(workflow id, workflow name, node name)`.
    pub used_in: Vec<(Value, Value, String)>,
    pub parameter_names: Vec<String>,
    pub example_parameters: Option<Value>,
}

/// Aggregates node types over full workflow objects (sticky notes excluded).
pub fn aggregate(workflows: &[Value]) -> BTreeMap<String, TypeUsage> {
    let mut out: BTreeMap<String, TypeUsage> = BTreeMap::new();
    for w in workflows {
        for n in w["nodes"].as_array().into_iter().flatten() {
            let Some(ty) = n["type"].as_str() else {
                continue;
            };
            if ty == STICKY_NOTE {
                continue;
            }
            let u = out.entry(ty.to_string()).or_default();
            if !n["typeVersion"].is_null() && !u.versions.contains(&n["typeVersion"]) {
                u.versions.push(n["typeVersion"].clone());
            }
            u.used_in.push((
                w["id"].clone(),
                w["name"].clone(),
                n["name"].as_str().unwrap_or_default().to_string(),
            ));
            if let Some(p) = n["parameters"].as_object() {
                for k in p.keys() {
                    if !u.parameter_names.contains(k) {
                        u.parameter_names.push(k.clone());
                    }
                }
                if u.example_parameters.is_none() && !p.is_empty() {
                    u.example_parameters = Some(shrink(&n["parameters"], Limits::new(300, 10, 5)));
                }
            }
        }
    }
    out
}

/// The types matching `query` (case-insensitive substring), most used first.
pub fn search_types(usage: &BTreeMap<String, TypeUsage>, query: &str, limit: usize) -> Vec<Value> {
    let q = query.to_ascii_lowercase();
    let mut hits: Vec<(&String, &TypeUsage)> = usage
        .iter()
        .filter(|(t, _)| q.is_empty() || t.to_ascii_lowercase().contains(&q))
        .collect();
    hits.sort_by(|a, b| b.1.used_in.len().cmp(&a.1.used_in.len()).then(a.0.cmp(b.0)));
    hits.into_iter()
        .take(limit)
        .map(|(t, u)| {
            let workflows: std::collections::BTreeSet<String> =
                u.used_in.iter().map(|(id, _, _)| id.to_string()).collect();
            json!({"nodeType": t, "versions": u.versions, "nodes": u.used_in.len(), "workflows": workflows.len()})
        })
        .collect()
}

async fn all_workflows(c: &N8nClient, ctx: &ToolContext) -> Result<(Vec<Value>, bool), ToolError> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut q = vec![
            ("limit", "100".to_string()),
            ("excludePinnedData", "true".to_string()),
        ];
        if let Some(cur) = &cursor {
            q.push(("cursor", cur.clone()));
        }
        let r = call(c, ctx, Method::GET, "/workflows", &q, None).await?;
        out.extend(r["data"].as_array().cloned().unwrap_or_default());
        match r["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
            _ => return Ok((out, false)),
        }
    }
    Ok((out, true))
}

async fn search(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let query = args["query"].as_str().unwrap_or_default();
    let limit = opt_u64(&args, "limit").unwrap_or(25).clamp(1, 200) as usize;
    let catalog_error = match catalog(&c, &ctx).await {
        Ok(Some(cat)) => {
            let (results, total) = cat.search(query, limit);
            return Ok(json!({
                "nodeTypes": results,
                "matches": total,
                "catalogSize": cat.len(),
                "source": "catalog",
                "note": CATALOG_NOTE,
            }));
        }
        Ok(None) => None,
        Err(e) => Some(e),
    };
    let (workflows, truncated) = all_workflows(&c, &ctx).await?;
    let usage = aggregate(&workflows);
    let results = search_types(&usage, query, limit);
    let mut out = json!({
        "nodeTypes": results,
        "workflowsScanned": workflows.len(),
        "source": "workflows",
        "note": LIMIT_NOTE,
    });
    if truncated {
        out["truncated"] = json!(true);
    }
    if let Some(e) = catalog_error {
        out["catalogError"] = json!(e);
    }
    Ok(out)
}

async fn get_type(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let ty = req_str(&args, "nodeType")?;
    let catalog_error = match catalog(&c, &ctx).await {
        Ok(Some(cat)) => {
            let resource = opt_str(&args, "resource");
            let operation = opt_str(&args, "operation");
            let Some(mut d) = cat.describe(
                &ty,
                args["version"].as_f64(),
                resource.as_deref(),
                operation.as_deref(),
            ) else {
                let similar = cat.similar(&ty, 10);
                return Err(ToolError::not_found(format!(
                    "node type '{ty}' is not installed on this instance ({} types in its node catalog){}",
                    cat.len(),
                    if similar.is_empty() {
                        "; search with n8n.nodes.search".to_string()
                    } else {
                        format!("; similar: {}", similar.join(", "))
                    }
                ))
                .with_data(json!({"similar": similar})));
            };
            d["source"] = json!("catalog");
            return Ok(d);
        }
        Ok(None) => None,
        Err(e) => Some(e),
    };
    let (workflows, _) = all_workflows(&c, &ctx).await?;
    let usage = aggregate(&workflows);
    let catalog_note = catalog_error
        .as_ref()
        .map(|e| format!(" (the node catalog could not be read: {e})"))
        .unwrap_or_default();
    let Some(u) = usage.get(&ty) else {
        let close = search_types(&usage, ty.rsplit('.').next().unwrap_or(&ty), 10);
        return Err(ToolError::not_found(format!(
            "no workflow on this instance uses node type '{ty}' ({} workflows scanned). {LIMIT_NOTE}{catalog_note}",
            workflows.len()
        ))
        .with_data(json!({"similar": close})));
    };
    let used_in: Vec<Value> = u
        .used_in
        .iter()
        .take(20)
        .map(|(id, name, node)| json!({"workflowId": id, "workflowName": name, "nodeName": node}))
        .collect();
    let mut out = json!({
        "nodeType": ty,
        "versions": u.versions,
        "usedIn": used_in,
        "usageCount": u.used_in.len(),
        "parameterNames": u.parameter_names,
        "exampleParameters": u.example_parameters,
        "source": "workflows",
        "note": LIMIT_NOTE,
    });
    if let Some(e) = catalog_error {
        out["catalogError"] = json!(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use toolshed_testing::fixture;

    #[test]
    fn aggregates_types_over_workflows() {
        let mut wfs: Vec<Value> = [
            "wf1-webhook-set-code.json",
            "wf2-loop.json",
            "wf3-http-401.json",
            "wf4-error-output-stop-and-error.json",
        ]
        .iter()
        .map(|f| fixture!(f))
        .collect();
        wfs[0]["nodes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "Note", "type": STICKY_NOTE, "parameters": {"content": "hi"}}));
        let usage = aggregate(&wfs);
        assert!(!usage.contains_key(STICKY_NOTE));
        assert_eq!(usage["n8n-nodes-base.webhook"].used_in.len(), 4);
        let http = search_types(&usage, "HTTP", 10);
        assert_eq!(http.len(), 1);
        assert_eq!(http[0]["nodeType"], "n8n-nodes-base.httpRequest");
        assert_eq!(http[0]["nodes"], 2);
        assert_eq!(
            search_types(&usage, "", 100)[0]["nodeType"],
            "n8n-nodes-base.webhook"
        );
        assert!(usage["n8n-nodes-base.httpRequest"]
            .parameter_names
            .contains(&"url".to_string()));
    }
}
