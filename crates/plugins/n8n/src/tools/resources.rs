//! Credentials (metadata only, never secrets), credential type schemas, tags, projects and
//! variables (names only unless asked for values).

use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolError};

use super::{call, def, make, merge, object, opt_str, paging, paging_query, path_id, pick};
use crate::client::N8nClient;

/// The credential fields ever shown: metadata, no `data`.
pub const CREDENTIAL_FIELDS: &[&str] = &[
    "id",
    "name",
    "type",
    "isManaged",
    "isGlobal",
    "createdAt",
    "updatedAt",
];

pub(crate) fn tools(c: &Arc<N8nClient>) -> Vec<Tool> {
    let cred_id = json!({"type": "string", "description": "The credential id."});
    vec![
        make(
            c,
            def(
                "credentials.list",
                "List Credentials",
                "List credentials: id, name, type, owner projects. Never returns secret values.",
                object(paging(250), &[]),
                Annotations::READ_ONLY,
            ),
            credentials_list,
        ),
        make(
            c,
            def(
                "credentials.get",
                "Get Credential",
                "One credential's metadata: id, name, type, dates. Never returns secret values.",
                object(json!({"credentialId": cred_id.clone()}), &["credentialId"]),
                Annotations::READ_ONLY,
            ),
            credentials_get,
        ),
        make(
            c,
            def(
                "credentials.schema",
                "Get Credential Schema",
                "The JSON schema of the data a credential type needs (e.g. httpHeaderAuth), to create one.",
                object(
                    json!({"credentialType": {"type": "string", "description": "Credential type name, e.g. httpHeaderAuth, slackApi."}}),
                    &["credentialType"],
                ),
                Annotations::READ_ONLY,
            ),
            credentials_schema,
        ),
        make(
            c,
            def(
                "credentials.delete",
                "Delete Credential",
                "Delete a credential. Workflows using it will fail. Cannot be undone.",
                object(json!({"credentialId": cred_id}), &["credentialId"]),
                Annotations::DESTRUCTIVE,
            ),
            credentials_delete,
        ),
        make(
            c,
            def(
                "tags.list",
                "List Tags",
                "List workflow tags: id and name.",
                object(paging(250), &[]),
                Annotations::READ_ONLY,
            ),
            tags_list,
        ),
        make(
            c,
            def(
                "projects.list",
                "List Projects",
                "List projects: id, name, type (personal or team). Needs a license with projects.",
                object(paging(250), &[]),
                Annotations::READ_ONLY,
            ),
            projects_list,
        ),
        make(
            c,
            def(
                "variables.list",
                "List Variables",
                "List instance variables by key. Values are left out unless includeValues is true.",
                object(
                    merge(
                        json!({
                            "includeValues": {"type": "boolean", "description": "Also return each variable's value. Default false."},
                            "projectId": {"type": "string", "description": "Only variables of this project."},
                        }),
                        paging(250),
                    ),
                    &[],
                ),
                Annotations::READ_ONLY,
            ),
            variables_list,
        ),
    ]
}

/// A credential's metadata and owner projects; nothing else.
pub fn credential_metadata(c: &Value) -> Value {
    let mut out = pick(c, CREDENTIAL_FIELDS);
    if let Some(shared) = c["shared"].as_array() {
        out["projects"] = shared
            .iter()
            .map(|s| json!({"id": s["id"], "name": s["name"], "role": s["role"]}))
            .collect();
    }
    out
}

async fn credentials_list(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let mut q = Vec::new();
    paging_query(&args, &mut q, 100);
    let r = call(&c, &ctx, Method::GET, "/credentials", &q, None).await?;
    let creds: Vec<Value> = r["data"]
        .as_array()
        .map(|a| a.iter().map(credential_metadata).collect())
        .unwrap_or_default();
    Ok(json!({"credentials": creds, "nextCursor": r["nextCursor"]}))
}

async fn credentials_get(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let id = path_id(&args, "credentialId")?;
    let r = call(
        &c,
        &ctx,
        Method::GET,
        &format!("/credentials/{id}"),
        &[],
        None,
    )
    .await?;
    Ok(credential_metadata(&r))
}

async fn credentials_schema(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let ty = path_id(&args, "credentialType")?;
    call(
        &c,
        &ctx,
        Method::GET,
        &format!("/credentials/schema/{ty}"),
        &[],
        None,
    )
    .await
}

async fn credentials_delete(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let id = path_id(&args, "credentialId")?;
    let r = call(
        &c,
        &ctx,
        Method::DELETE,
        &format!("/credentials/{id}"),
        &[],
        None,
    )
    .await?;
    Ok(json!({"deleted": true, "credential": credential_metadata(&r)}))
}

async fn tags_list(c: Arc<N8nClient>, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let mut q = Vec::new();
    paging_query(&args, &mut q, 100);
    let r = call(&c, &ctx, Method::GET, "/tags", &q, None).await?;
    let tags: Vec<Value> = r["data"]
        .as_array()
        .map(|a| a.iter().map(|t| pick(t, &["id", "name"])).collect())
        .unwrap_or_default();
    Ok(json!({"tags": tags, "nextCursor": r["nextCursor"]}))
}

async fn projects_list(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let mut q = Vec::new();
    paging_query(&args, &mut q, 100);
    let r = call(&c, &ctx, Method::GET, "/projects", &q, None).await?;
    let projects: Vec<Value> = r["data"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| pick(p, &["id", "name", "type", "description"]))
                .collect()
        })
        .unwrap_or_default();
    Ok(json!({"projects": projects, "nextCursor": r["nextCursor"]}))
}

/// A variable with or without its value.
pub fn variable_entry(v: &Value, include_value: bool) -> Value {
    let mut out = pick(v, &["id", "key", "type"]);
    if let Some(p) = v["project"].as_object() {
        out["project"] = json!({"id": p.get("id"), "name": p.get("name")});
    }
    if include_value {
        out["value"] = v["value"].clone();
    }
    out
}

async fn variables_list(
    c: Arc<N8nClient>,
    ctx: ToolContext,
    args: Value,
) -> Result<Value, ToolError> {
    let mut q = Vec::new();
    if let Some(p) = opt_str(&args, "projectId") {
        q.push(("projectId", p));
    }
    paging_query(&args, &mut q, 100);
    let r = call(&c, &ctx, Method::GET, "/variables", &q, None).await?;
    let include = args["includeValues"].as_bool().unwrap_or(false);
    let vars: Vec<Value> = r["data"]
        .as_array()
        .map(|a| a.iter().map(|v| variable_entry(v, include)).collect())
        .unwrap_or_default();
    let mut out = json!({"variables": vars, "nextCursor": r["nextCursor"]});
    if !include {
        out["note"] = json!("values left out; pass includeValues: true to read them");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_metadata_never_has_data() {
        let c = json!({"id": "1", "name": "n", "type": "httpHeaderAuth", "data": {"value": "s3cret"},
                       "shared": [{"id": "p", "name": "P", "role": "credential:owner"}]});
        let m = credential_metadata(&c);
        assert!(!m.to_string().contains("s3cret"));
        assert_eq!(m["projects"][0]["role"], "credential:owner");
        let raw: Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/tests/fixtures/credential-create-response.json",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(credential_metadata(&raw)["type"], "httpHeaderAuth");
    }

    #[test]
    fn variable_values_only_on_request() {
        let v = json!({"id": "1", "key": "API_URL", "value": "https://x", "type": "string"});
        assert!(variable_entry(&v, false).get("value").is_none());
        assert_eq!(variable_entry(&v, true)["value"], "https://x");
    }
}
