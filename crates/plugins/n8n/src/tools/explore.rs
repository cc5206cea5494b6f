//! `n8n.nodes.explore_resources`: the values one node parameter can take on this instance (a
//! spreadsheet's id, a Slack channel, a sub-workflow), as the editor looks them up: a
//! resource locator's list search (`POST /rest/dynamic-node-parameters/resource-locator-results`)
//! or a load-options method (`POST /rest/dynamic-node-parameters/options`), run by n8n with
//! the chosen credential, which never leaves n8n. Static options come from the node catalog.
//! Needs the configured login.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolError};

use super::{def, make, object, opt_str, req_str};
use crate::client::N8nClient;
use crate::error::N8nError;
use crate::sanitize::truncate_str;

/// Most values answered.
pub const MAX_VALUES: usize = 100;

pub(crate) fn tools(c: &Arc<N8nClient>) -> Vec<Tool> {
    vec![make(
        c,
        def(
            "nodes.explore_resources",
            "Explore Node Resources",
            "List the values a node parameter can take on this instance, as the editor's dropdowns do (e.g. Google Sheets documentId, Slack channelId, Execute Workflow workflowId): [{name, value, url?}]. Give the credential the node would use; n8n runs the lookup with it. Needs the configured login.",
            object(
                json!({
                    "nodeType": {"type": "string", "description": "The full node type, e.g. n8n-nodes-base.googleSheets."},
                    "resource": {"type": "string", "description": "The parameter whose values to list, e.g. documentId."},
                    "credentialId": {"type": "string", "description": "The credential the lookup uses (see n8n.credentials.list)."},
                    "version": {"type": "number", "description": "The node's typeVersion (default: the newest)."},
                    "parameters": {"type": "object", "description": "The node's other parameters the lookup depends on (e.g. {resource, operation, documentId})."},
                    "filter": {"type": "string", "maxLength": 200, "description": "Words to search for, where the list is searchable."},
                    "paginationToken": {"type": "string", "description": "The paginationToken of the previous answer."},
                }),
                &["nodeType", "resource"],
            ),
            Annotations::READ_ONLY,
        ),
        explore,
    )]
}

/// How n8n looks a parameter's values up.
enum Lookup {
    /// A resource locator's list mode.
    ListSearch(String),
    /// A load-options method.
    Method(String),
    /// Declarative load options (`typeOptions.loadOptions`).
    Routing(Value),
    /// The options listed in the node type.
    Static(Vec<Value>),
}

fn lookup_of(p: &Value) -> Option<Lookup> {
    if let Some(m) = p["modes"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|m| m["typeOptions"]["searchListMethod"].as_str())
    {
        return Some(Lookup::ListSearch(m.to_string()));
    }
    if let Some(m) = p["typeOptions"]["loadOptionsMethod"].as_str() {
        return Some(Lookup::Method(m.to_string()));
    }
    if p["typeOptions"]["loadOptions"].is_object() {
        return Some(Lookup::Routing(p["typeOptions"]["loadOptions"].clone()));
    }
    p["options"]
        .as_array()
        .filter(|o| o.iter().any(|x| x.get("value").is_some()))
        .map(|o| Lookup::Static(o.clone()))
}

async fn explore(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let node_type = req_str(&args, "nodeType")?;
    let resource = req_str(&args, "resource")?;
    let catalog = c.node_catalog(Some(ctx.timeout)).await?.ok_or_else(|| {
        ToolError::from(N8nError::NeedsLogin {
            what: "looking up a node parameter's values".into(),
        })
    })?;
    let version = match args["version"].as_f64() {
        Some(v) => v,
        None => catalog
            .versions(&node_type)
            .last()
            .and_then(Value::as_f64)
            .ok_or_else(|| {
                ToolError::not_found(format!(
                    "the node type '{node_type}' is not installed; find one with n8n.nodes.search"
                ))
            })?,
    };
    let entry = catalog.entry(&node_type, version).ok_or_else(|| {
        ToolError::not_found(format!(
            "'{node_type}' has no version {version}; installed: {:?}",
            catalog.versions(&node_type)
        ))
    })?;
    let props: Vec<&Value> = entry["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["name"] == resource.as_str())
        .collect();
    if props.is_empty() {
        return Err(ToolError::invalid(format!(
            "{node_type}@{version} has no parameter '{resource}'; see n8n.nodes.get_type for its parameters"
        )));
    }
    let Some(lookup) = props.iter().find_map(|p| lookup_of(p)) else {
        return Err(ToolError::invalid(format!(
            "the parameter '{resource}' of {node_type} takes free values: n8n has no list of them to look up"
        )));
    };
    if let Lookup::Static(options) = &lookup {
        let values: Vec<Value> = options.iter().take(MAX_VALUES).map(value_view).collect();
        return Ok(
            json!({"nodeType": node_type, "resource": resource, "values": values, "source": "node type"}),
        );
    }
    let credentials = match opt_str(&args, "credentialId") {
        Some(_) => Some(credential_ref(&c, &ctx, &args, entry).await?),
        None => None,
    };
    let mut body = json!({
        "path": format!("parameters.{resource}"),
        "nodeTypeAndVersion": {"name": node_type, "version": whole(version)},
        "currentNodeParameters": if args["parameters"].is_object() { args["parameters"].clone() } else { json!({}) },
    });
    if let Some(cr) = credentials {
        body["credentials"] = cr;
    }
    let (path, source) = match &lookup {
        Lookup::ListSearch(m) => {
            body["methodName"] = json!(m);
            if let Some(f) = opt_str(&args, "filter") {
                body["filter"] = json!(f);
            }
            if let Some(t) = opt_str(&args, "paginationToken") {
                body["paginationToken"] = json!(t);
            }
            (
                "/dynamic-node-parameters/resource-locator-results",
                "list search",
            )
        }
        Lookup::Method(m) => {
            body["methodName"] = json!(m);
            ("/dynamic-node-parameters/options", "load options")
        }
        Lookup::Routing(l) => {
            body["loadOptions"] = l.clone();
            ("/dynamic-node-parameters/options", "load options")
        }
        Lookup::Static(_) => unreachable!("answered above"),
    };
    let r = c
        .rest(Method::POST, path, &[], Some(&body), Some(ctx.timeout))
        .await
        .map_err(|e| {
            let t = ToolError::from(e);
            ToolError::new(
                t.kind,
                format!("n8n could not list the values of '{resource}': {} (a lookup usually needs the node's credential and the parameters it depends on)", t.message),
            )
        })?;
    let mut list = r["results"]
        .as_array()
        .or(r.as_array())
        .cloned()
        .unwrap_or_default();
    // Load options come whole: the filter is applied here, before the list is cut.
    let filter = opt_str(&args, "filter").map(|f| f.to_lowercase());
    if let (Some(f), Lookup::Method(_) | Lookup::Routing(_)) = (&filter, &lookup) {
        list.retain(|v| {
            v["name"]
                .as_str()
                .is_some_and(|n| n.to_lowercase().contains(f))
        });
    }
    let values: Vec<Value> = list.iter().take(MAX_VALUES).map(value_view).collect();
    let mut out =
        json!({"nodeType": node_type, "resource": resource, "values": values, "source": source});
    if list.len() > MAX_VALUES {
        out["truncated"] = json!(format!(
            "showing {MAX_VALUES} of {}; narrow with filter",
            list.len()
        ));
    }
    if !r["paginationToken"].is_null() {
        out["paginationToken"] = r["paginationToken"].clone();
    }
    Ok(out)
}

/// `1.0` as `1`, as n8n writes versions.
fn whole(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 1e9 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

fn value_view(v: &Value) -> Value {
    let mut out = json!({
        "name": v["name"].as_str().map(|n| truncate_str(n, 200)),
        "value": v["value"],
    });
    if let Some(u) = v["url"].as_str() {
        out["url"] = json!(truncate_str(u, 500));
    }
    out
}

/// `{type: {id, name}}` for the credential, checked to be one the node takes.
async fn credential_ref(
    c: &N8nClient,
    ctx: &ToolContext,
    args: &Value,
    entry: &Value,
) -> Result<Value, ToolError> {
    let id = super::path_id(args, "credentialId")?;
    let (all, _) = super::all_credentials(c, ctx).await?;
    let cred = all.iter().find(|x| x["id"] == id.as_str()).ok_or_else(|| {
        ToolError::not_found(format!(
            "there is no credential '{id}'; see n8n.credentials.list"
        ))
    })?;
    let ty = cred["type"].as_str().unwrap_or_default();
    let takes = crate::catalog::credential_names(entry);
    if !crate::catalog::takes_any_credential(entry) && !takes.contains(&ty) {
        return Err(ToolError::invalid(format!(
            "the credential '{id}' is of type '{ty}', which this node does not take (it takes: {})",
            takes.join(", ")
        )));
    }
    Ok(json!({ty: {"id": id, "name": cred["name"]}}))
}
