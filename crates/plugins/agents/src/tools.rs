//! The `agents.*` builder tools: definitions (schemas, annotations) and handlers. Writes and
//! patches go through [`crate::stages`] and answer `{ok: true, version, warnings?}`, or refuse
//! with the failing stage's `{ok: false, stage, errors}` as a `rejected` tool error (HTTP 422,
//! MCP `isError` with that object as `structuredContent`); a refused write stores nothing.
//!
//! Edits only ever change the draft: they act on nothing in the world, so they carry the
//! `draft` annotation class, which the default policy allows. `agents.publish` (a write) and
//! `agents.delete` (destructive) need confirmation under the default policy.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Plugin, Tool, ToolContext, ToolDef, ToolError, ToolPath};

use crate::repo::{AgentsError, Repo};
use crate::schema::{definition_schema, schema_text, NAME_PATTERN};
use crate::stages::{self, Failure, World};
use crate::{ModelCredential, PLUGIN_ID};

/// How often a patch is re-applied when another edit landed between reading and writing.
const PATCH_ATTEMPTS: usize = 10;

/// What the tools share.
#[derive(Clone)]
pub(crate) struct Agents {
    pub repo: Repo,
    pub credentials: Arc<Vec<ModelCredential>>,
}

impl From<AgentsError> for ToolError {
    fn from(e: AgentsError) -> Self {
        match &e {
            AgentsError::Unknown(_) | AgentsError::UnknownVersion { .. } => {
                ToolError::not_found(e.to_string())
            }
            AgentsError::Conflict(_) | AgentsError::NothingToPublish(_) => {
                ToolError::conflict(e.to_string())
            }
            AgentsError::Malformed { .. } | AgentsError::Db(_) | AgentsError::Store(_) => {
                ToolError::internal(e.to_string())
            }
        }
    }
}

fn rejected(f: Failure) -> ToolError {
    ToolError::rejected(f.summary(), f.to_json())
}

fn def(path: &str, name: &str, description: &str, ann: Annotations, input: Value) -> ToolDef {
    let path = ToolPath::parse(path).unwrap_or_else(|e| panic!("built-in tool path: {e}"));
    let mut d = ToolDef::new(path, name, description)
        .with_annotations(ann)
        .with_input(input);
    d.origin = format!("plugin:{PLUGIN_ID}");
    d
}

fn decode<A: DeserializeOwned>(args: Value) -> Result<A, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::invalid(e.to_string()))
}

fn tool<A, F, Fut>(agents: &Agents, def: ToolDef, f: F) -> Tool
where
    A: DeserializeOwned + Send + 'static,
    F: Fn(Agents, ToolContext, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    let agents = agents.clone();
    let f = Arc::new(f);
    Tool::from_fn(def, move |ctx, args| {
        let (agents, f) = (agents.clone(), f.clone());
        async move { f(agents, ctx, decode(args)?).await }
    })
}

fn name_prop() -> Value {
    json!({"type": "string", "pattern": NAME_PATTERN, "description": "The agent's name."})
}

fn object(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaArgs {
    #[serde(default)]
    format: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    name: String,
    #[serde(default)]
    version: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestoreArgs {
    name: String,
    version: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    name: String,
    config: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchArgs {
    name: String,
    patch: Value,
}

/// The `agents` plugin.
pub(crate) fn plugin(agents: Agents) -> Plugin {
    let read = Annotations::READ_ONLY;
    let draft = Annotations::DRAFT;
    let mut p = Plugin::new(
        PLUGIN_ID,
        "Agents",
        "Agent definitions: write, patch, version, publish.",
    );
    let name_only = object(json!({"name": name_prop()}), &["name"]);
    p = p
        .with_tool(tool(&agents, def("agents.schema", "Agent Definition Schema", "The agent definition's schema as compact text (every field, type and constraint), or as JSON Schema with format json.", read, object(json!({"format": {"type": "string", "enum": ["text", "json"], "default": "text"}}), &[])), |_, _, f: SchemaArgs| async move {
            Ok(match f.format.as_deref() {
                Some("json") => json!({"schema": definition_schema()}),
                _ => json!({"text": schema_text()}),
            })
        }))
        .with_tool(tool(&agents, def("agents.list", "List Agents", "Every agent: name, description, model, draft and live versions.", read, object(json!({}), &[])), |a, _, _: Empty| async move {
            Ok(json!({"agents": a.repo.list().await?}))
        }))
        .with_tool(tool(&agents, def("agents.get", "Get Agent", "An agent's current draft and live definitions, or one version.", read, object(json!({"name": name_prop(), "version": {"type": "integer", "minimum": 1}}), &["name"])), |a, _, g: GetArgs| async move {
            get(&a, &g.name, g.version).await
        }))
        .with_tool(tool(&agents, def("agents.versions", "List Agent Versions", "Every stored version of an agent, newest first, with which is the draft and which is live.", read, name_only.clone()), |a, _, n: NameArgs| async move {
            versions(&a, &n.name).await
        }))
        .with_tool(tool(&agents, def("agents.config.write", "Write Agent Definition", "Writes a whole definition (JSON text or object) as the agent's new draft. Answers {ok: true, version, warnings?} or {ok: false, stage, errors} (stages: parse, schema, references); nothing is stored on failure.", draft, object(json!({"name": name_prop(), "config": {"description": "The whole definition: JSON text or an object."}}), &["name", "config"])), |a, ctx, w: WriteArgs| async move {
            write(&a, &ctx, &w.name, &w.config).await
        }))
        .with_tool(tool(&agents, def("agents.config.patch", "Patch Agent Definition", "Applies RFC 6902 JSON Patch operations (JSON text or an array) to the agent's current draft. Answers {ok: true, version, warnings?} or {ok: false, stage, errors} (stages: parse, patch, schema, references); nothing is stored on failure.", draft, object(json!({"name": name_prop(), "patch": {"description": "RFC 6902 operations: JSON text or an array."}}), &["name", "patch"])), |a, ctx, p: PatchArgs| async move {
            patch(&a, &ctx, &p.name, &p.patch).await
        }))
        .with_tool(tool(&agents, def("agents.restore", "Restore Agent Version", "Copies an earlier version into a new draft (checked again like a write).", draft, object(json!({"name": name_prop(), "version": {"type": "integer", "minimum": 1}}), &["name", "version"])), |a, ctx, r: RestoreArgs| async move {
            let old = a.repo.version(&r.name, r.version).await?;
            let heads = a.repo.heads(&r.name).await?;
            store_checked(&a, &ctx, &r.name, old.config, heads.map(|h| h.draft), &format!("restore {}", r.version)).await
        }))
        .with_tool(tool(&agents, def("agents.publish", "Publish Agent", "Makes the agent's current draft the live version that runs use.", Annotations::WRITE, name_only.clone()), |a, _, n: NameArgs| async move {
            let live = a.repo.publish(&n.name).await?;
            Ok(json!({"ok": true, "name": n.name, "liveVersion": live}))
        }))
        .with_tool(tool(&agents, def("agents.delete", "Delete Agent", "Deletes an agent and every version of it.", Annotations::DESTRUCTIVE, name_only), |a, _, n: NameArgs| async move {
            if !a.repo.delete(&n.name).await? {
                return Err(AgentsError::Unknown(n.name).into());
            }
            Ok(json!({"ok": true, "deleted": n.name}))
        }))
        .with_tool(tool(&agents, run_def(), |_, ctx, r: RunArgs| async move {
            let engine = ctx
                .engine()
                .ok_or_else(|| ToolError::internal("agent runs need the engine"))?
                .clone();
            engine.run_agent(&r.agent, r.input, r.thread_id).await
        }))
        .with_tool(tool(&agents, def("agents.credentials.list", "List Model Credentials", "The model credentials an agent definition may name in `credential` (ids and kinds; never secrets).", read, object(json!({}), &[])), |a, _, _: Empty| async move {
            Ok(json!({"credentials": all_credentials(&a).await?}))
        }));
    p
}

/// The origin of `agents.run`: its handler runs an agent whose every tool call is governed on
/// its own, as saved scripts' calls are (`script:` origins: the default policy does not ask to
/// confirm the whole run, and a direct call runs as a script execution so that the sub-run's
/// waits pause it).
const RUN_ORIGIN: &str = "script:agents.run";

/// How long an `agents.run` call may take (a run makes many model requests).
const RUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunArgs {
    agent: String,
    input: String,
    #[serde(default)]
    thread_id: Option<String>,
}

fn run_def() -> ToolDef {
    let mut d = def(
        "agents.run",
        "Run Agent",
        "Runs the live version of an agent on an input and answers its result {output, steps, toolCalls, usage}. The agent's tool calls are governed like any call of the caller: one that needs approval or an answer pauses the calling run or script. With threadId (the agent must enable memory) the run continues that thread.",
        Annotations::WRITE,
        object(
            json!({
                "agent": name_prop(),
                "input": {"type": "string", "minLength": 1, "maxLength": 100000, "description": "The message the agent answers."},
                "threadId": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$", "description": "A thread of the agent's memory to continue."}
            }),
            &["agent", "input"],
        ),
    )
    .with_timeout(RUN_TIMEOUT);
    d.origin = RUN_ORIGIN.to_string();
    d
}

async fn get(a: &Agents, name: &str, version: Option<i64>) -> Result<Value, ToolError> {
    if let Some(v) = version {
        let v = a.repo.version(name, v).await?;
        return Ok(
            json!({"name": name, "version": v.version, "config": v.config, "createdAt": v.created_at}),
        );
    }
    let heads = a
        .repo
        .heads(name)
        .await?
        .ok_or_else(|| AgentsError::Unknown(name.to_string()))?;
    let draft = a.repo.version(name, heads.draft).await?;
    let live = match heads.live {
        Some(v) => {
            let l = a.repo.version(name, v).await?;
            json!({"version": l.version, "config": l.config})
        }
        None => Value::Null,
    };
    Ok(
        json!({"name": name, "draft": {"version": draft.version, "config": draft.config}, "live": live}),
    )
}

async fn versions(a: &Agents, name: &str) -> Result<Value, ToolError> {
    let heads = a
        .repo
        .heads(name)
        .await?
        .ok_or_else(|| AgentsError::Unknown(name.to_string()))?;
    let list: Vec<Value> = a
        .repo
        .versions(name)
        .await?
        .into_iter()
        .map(|v| {
            json!({
                "version": v.version, "author": v.author, "note": v.note, "createdAt": v.created_at,
                "draft": v.version == heads.draft, "live": Some(v.version) == heads.live,
            })
        })
        .collect();
    Ok(json!({"name": name, "versions": list}))
}

async fn write(
    a: &Agents,
    ctx: &ToolContext,
    name: &str,
    config: &Value,
) -> Result<Value, ToolError> {
    let doc = stages::parse(config).map_err(rejected)?;
    for _ in 0..PATCH_ATTEMPTS {
        let expected = a.repo.heads(name).await?.map(|h| h.draft);
        match store_checked(a, ctx, name, doc.clone(), expected, "write").await {
            Err(e) if e.kind == toolshed_core::ToolErrorKind::Conflict => continue,
            other => return other,
        }
    }
    Err(AgentsError::Conflict(name.to_string()).into())
}

async fn patch(a: &Agents, ctx: &ToolContext, name: &str, ops: &Value) -> Result<Value, ToolError> {
    for _ in 0..PATCH_ATTEMPTS {
        let heads = a
            .repo
            .heads(name)
            .await?
            .ok_or_else(|| AgentsError::Unknown(name.to_string()))?;
        let current = a.repo.version(name, heads.draft).await?.config;
        let doc = stages::patch(&current, ops).map_err(rejected)?;
        match store_checked(a, ctx, name, doc, Some(heads.draft), "patch").await {
            // Another edit landed first: apply the patch to it.
            Err(e) if e.kind == toolshed_core::ToolErrorKind::Conflict => continue,
            other => return other,
        }
    }
    Err(AgentsError::Conflict(name.to_string()).into())
}

/// The schema and references stages, then a new draft version if the draft is still `expected`.
async fn store_checked(
    a: &Agents,
    ctx: &ToolContext,
    name: &str,
    doc: Value,
    expected: Option<i64>,
    note: &str,
) -> Result<Value, ToolError> {
    stages::schema(&doc).map_err(rejected)?;
    if doc["name"].as_str() != Some(name) {
        return Err(rejected(Failure {
            ok: false,
            stage: "references",
            errors: vec![
                json!({"path": "/name", "message": format!("the definition is named '{}' but is written as agent '{name}'", doc["name"].as_str().unwrap_or_default())}),
            ],
        }));
    }
    let warnings = check_references(a, ctx, &doc).await?;
    let version = a
        .repo
        .put_draft(name, expected, &doc, &ctx.principal, note)
        .await?;
    let mut answer = json!({"ok": true, "name": name, "version": version});
    if !warnings.is_empty() {
        answer["warnings"] = Value::Array(warnings);
    }
    Ok(answer)
}

/// The configured model credentials, then the runtime ones whose ids the configuration does
/// not use (a configured id wins).
async fn all_credentials(a: &Agents) -> Result<Vec<ModelCredential>, ToolError> {
    let mut all: Vec<ModelCredential> = a.credentials.as_ref().clone();
    for c in a.repo.runtime_credentials().await? {
        if !all.iter().any(|x| x.id == c.id) {
            all.push(c);
        }
    }
    Ok(all)
}

/// Gathers what the references stage checks against: credentials, the caller's view, n8n
/// workflows (through the engine, as the caller), the other agents.
async fn check_references(
    a: &Agents,
    ctx: &ToolContext,
    doc: &Value,
) -> Result<Vec<Value>, ToolError> {
    let credentials: BTreeSet<String> = all_credentials(a)
        .await?
        .into_iter()
        .map(|c| c.id)
        .collect();
    let visible = ctx.engine().map(|e| e.visible_paths()).unwrap_or_default();
    let wanted: Vec<String> = doc["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "workflow")
        .filter_map(|t| t["workflow"].as_str().map(str::to_string))
        .collect();
    // Each workflow is looked up by id through the engine, as the writer.
    let workflows = match ctx.engine() {
        Some(engine) if !wanted.is_empty() && visible.iter().any(|p| p == "n8n.workflows.get") => {
            let mut found = BTreeSet::new();
            for id in wanted {
                if engine
                    .call("n8n.workflows.get", json!({"workflowId": id}))
                    .await
                    .is_ok()
                {
                    found.insert(id);
                }
            }
            Some(found)
        }
        _ => None,
    };
    let name = doc["name"].as_str().unwrap_or_default();
    let agents: BTreeMap<String, Vec<String>> = a
        .repo
        .drafts()
        .await?
        .into_iter()
        .filter(|(n, _)| n != name)
        .map(|(n, d)| (n, stages::agent_refs(&d)))
        .collect();
    let world = World {
        credentials: &credentials,
        visible: &visible,
        workflows: workflows.as_ref(),
        agents: &agents,
    };
    stages::references(doc, &world).map_err(rejected)
}
