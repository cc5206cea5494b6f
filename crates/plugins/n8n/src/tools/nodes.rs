//! Node discovery. n8n's public API has no endpoint listing node types, so these tools look at
//! the node types the instance's own workflows use (read through `GET /workflows`, a bounded
//! number of pages). A type no workflow uses yet cannot be found this way.

use std::collections::BTreeMap;
use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolError};

use super::{call, def, make, object, opt_u64, req_str};
use crate::client::N8nClient;
use crate::execution::STICKY_NOTE;
use crate::sanitize::{shrink, Limits};

/// Most workflow pages (of 100) read per call.
pub const MAX_PAGES: usize = 10;

const LIMIT_NOTE: &str = "n8n's public API cannot list node types: this looks only at node types used by the workflows on this instance (up to 1,000 workflows). A node type no workflow uses yet will not be found; its name is usually n8n-nodes-base.<name> or @n8n/n8n-nodes-langchain.<name>.";

pub(crate) fn tools(c: &Arc<N8nClient>) -> Vec<Tool> {
    vec![
        make(
            c,
            def(
                "nodes.search",
                "Search Node Types",
                &format!("Search node types by name among those used in this instance's workflows: type, versions seen, how many nodes use it. {LIMIT_NOTE}"),
                object(
                    json!({
                        "query": {"type": "string", "description": "Part of the type name, e.g. \"http\" or \"slack\". Empty lists all."},
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
                &format!("How a node type is used in this instance's workflows: versions, the workflows and nodes using it, parameter names seen and one example node's parameters. {LIMIT_NOTE}"),
                object(
                    json!({"nodeType": {"type": "string", "description": "Full type name, e.g. n8n-nodes-base.httpRequest."}}),
                    &["nodeType"],
                ),
                Annotations::READ_ONLY,
            ),
            get_type,
        ),
    ]
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
    let (workflows, truncated) = all_workflows(&c, &ctx).await?;
    let usage = aggregate(&workflows);
    let query = args["query"].as_str().unwrap_or_default();
    let limit = opt_u64(&args, "limit").unwrap_or(25).clamp(1, 200) as usize;
    let results = search_types(&usage, query, limit);
    let mut out = json!({
        "nodeTypes": results,
        "workflowsScanned": workflows.len(),
        "note": LIMIT_NOTE,
    });
    if truncated {
        out["truncated"] = json!(true);
    }
    Ok(out)
}

async fn get_type(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let ty = req_str(&args, "nodeType")?;
    let (workflows, _) = all_workflows(&c, &ctx).await?;
    let usage = aggregate(&workflows);
    let Some(u) = usage.get(&ty) else {
        let close = search_types(&usage, ty.rsplit('.').next().unwrap_or(&ty), 10);
        return Err(ToolError::not_found(format!(
            "no workflow on this instance uses node type '{ty}' ({} workflows scanned). {LIMIT_NOTE}",
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
    Ok(json!({
        "nodeType": ty,
        "versions": u.versions,
        "usedIn": used_in,
        "usageCount": u.used_in.len(),
        "parameterNames": u.parameter_names,
        "exampleParameters": u.example_parameters,
        "note": LIMIT_NOTE,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn aggregates_types_over_workflows() {
        let mut wfs: Vec<Value> = [
            "wf1-webhook-set-code.json",
            "wf2-loop.json",
            "wf3-http-401.json",
            "wf4-error-output-stop-and-error.json",
        ]
        .iter()
        .map(|f| fixture(f))
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
