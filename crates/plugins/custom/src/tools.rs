//! The `custom.*` tools: `custom.build`, `custom.list`, `custom.get`, `custom.delete`, and one
//! catalog tool `custom.<id>` per saved script.
//!
//! A saved tool runs its code through the engine ([`toolshed_core::EngineAccess::run_script`])
//! as its caller: every inner `tools.*` call takes the engine's call path with the caller's
//! policy, so a custom tool reaches nothing its caller cannot. A tool declared `readOnly` may
//! call read-only tools only; it is annotated read-only, a `destructive` one destructive, any
//! other a write.

use std::future::Future;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use toolshed_core::{
    Annotations, NestedRun, Plugin, Tool, ToolContext, ToolDef, ToolError, ToolPath,
};

use crate::repo::{CustomError, Repo};
use crate::spec::{
    check_spec, check_trial_input, check_trial_result, CustomSpec, Failure, TrialSpec,
};
use crate::PLUGIN_ID;

/// Awaited after a tool was saved or deleted, so the catalog is rebuilt before the answer.
pub type OnChange =
    Arc<dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// What the tools share.
#[derive(Clone)]
pub(crate) struct Custom {
    pub repo: Repo,
    pub on_change: OnChange,
}

impl From<CustomError> for ToolError {
    fn from(e: CustomError) -> Self {
        match &e {
            CustomError::Unknown(_) => ToolError::not_found(e.to_string()),
            _ => ToolError::internal(e.to_string()),
        }
    }
}

fn rejected(f: Failure) -> ToolError {
    ToolError::rejected(f.summary(), f.to_json())
}

fn def(path: &str, name: &str, description: &str, ann: Annotations, input: Value) -> ToolDef {
    let path = ToolPath::parse(path).unwrap_or_else(|e| panic!("tool path {path}: {e}"));
    let mut d = ToolDef::new(path, name, description)
        .with_annotations(ann)
        .with_input(input);
    d.origin = format!("plugin:{PLUGIN_ID}");
    d
}

fn tool<A, F, Fut>(custom: &Custom, def: ToolDef, f: F) -> Tool
where
    A: DeserializeOwned + Send + 'static,
    F: Fn(Custom, ToolContext, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    let custom = custom.clone();
    let f = Arc::new(f);
    Tool::from_fn(def, move |ctx, args| {
        let (custom, f) = (custom.clone(), f.clone());
        async move {
            let a: A =
                serde_json::from_value(args).map_err(|e| ToolError::invalid(e.to_string()))?;
            f(custom, ctx, a).await
        }
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BuildArgs {
    #[serde(flatten)]
    spec: BuildSpec,
    #[serde(default)]
    test: Option<TrialSpec>,
}

/// [`CustomSpec`] as `custom.build` takes it (the same fields).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BuildSpec {
    id: String,
    description: String,
    input_schema: Value,
    #[serde(default)]
    output_schema: Option<Value>,
    code: String,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    destructive: bool,
}

fn build_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "the tool becomes custom.<id>: lowercase letters, digits, '_'"},
            "description": {"type": "string"},
            "inputSchema": {"type": "object", "description": "JSON Schema of the input (an object)"},
            "outputSchema": {"type": "object", "description": "JSON Schema of the result"},
            "code": {"type": "string", "description": "JavaScript async function body; `input` holds the arguments, `tools` calls tools"},
            "readOnly": {"type": "boolean", "description": "it calls read-only tools only"},
            "destructive": {"type": "boolean"},
            "test": {"type": "object", "properties": {"input": {}, "expect": {}}, "required": ["input"], "additionalProperties": false, "description": "run once on input before saving; destructive calls are refused"}
        },
        "required": ["id", "description", "inputSchema", "code"],
        "additionalProperties": false
    })
}

/// The builder tools (the saved ones are added by [`saved_tool`]).
pub(crate) fn builder_tools(custom: &Custom) -> Vec<Tool> {
    let read = Annotations::READ_ONLY;
    let id_only = json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false});
    vec![
        tool(custom, def("custom.build", "Build Custom Tool", "Checks and saves JavaScript as the catalog tool custom.<id>. Answers {ok: true, path} or {ok: false, stage, errors} (stages: schema, compile, test); nothing is saved on failure.", Annotations::WRITE, build_schema()), |c, ctx, a: BuildArgs| async move {
            build(&c, &ctx, a).await
        }),
        tool(custom, def("custom.list", "List Custom Tools", "Every saved custom tool.", read, json!({"type": "object", "additionalProperties": false})), |c, _, _: Empty| async move {
            let list: Vec<Value> = c.repo.all().await?.into_iter().map(|(s, author, at)| json!({
                "path": format!("custom.{}", s.id), "id": s.id, "description": s.description,
                "readOnly": s.read_only, "destructive": s.destructive, "author": author, "updatedAt": at,
            })).collect();
            Ok(json!({"tools": list}))
        }),
        tool(custom, def("custom.get", "Get Custom Tool", "A saved custom tool's specification and code.", read, id_only.clone()), |c, _, a: IdArgs| async move {
            Ok(serde_json::to_value(c.repo.get(&a.id).await?).unwrap_or_default())
        }),
        tool(custom, def("custom.delete", "Delete Custom Tool", "Deletes a saved custom tool.", Annotations::DESTRUCTIVE, id_only), |c, _, a: IdArgs| async move {
            if !c.repo.delete(&a.id).await? {
                return Err(CustomError::Unknown(a.id).into());
            }
            (c.on_change)().await;
            Ok(json!({"ok": true, "deleted": format!("custom.{}", a.id)}))
        }),
    ]
}

async fn build(c: &Custom, ctx: &ToolContext, a: BuildArgs) -> Result<Value, ToolError> {
    let b = a.spec;
    let spec = CustomSpec {
        id: b.id,
        description: b.description,
        input_schema: b.input_schema,
        output_schema: b.output_schema,
        code: b.code,
        read_only: b.read_only,
        destructive: b.destructive,
    };
    check_spec(&spec).map_err(rejected)?;
    let engine = ctx
        .engine()
        .ok_or_else(|| ToolError::internal("custom.build needs the engine to check code"))?;
    let compile = NestedRun {
        compile_only: true,
        ..Default::default()
    };
    if let Err(e) = engine.run_script(&spec.code, Value::Null, compile).await {
        let data = e.data.unwrap_or(Value::Null);
        return Err(rejected(Failure::one(
            "compile",
            json!({"path": "/code", "message": data["message"].as_str().unwrap_or(&e.message), "line": data["line"], "column": data["column"]}),
        )));
    }
    if let Some(trial) = &a.test {
        check_trial_input(&spec, &trial.input).map_err(rejected)?;
        let how = NestedRun {
            read_only: spec.read_only,
            trial: true,
            compile_only: false,
        };
        let result = engine
            .run_script(&spec.code, trial.input.clone(), how)
            .await
            .map_err(|e| {
                rejected(Failure::one(
                    "test",
                    json!({"path": "/test", "message": e.message, "data": e.data}),
                ))
            })?;
        check_trial_result(&spec, trial, &result).map_err(rejected)?;
    }
    c.repo.put(&spec, &ctx.principal).await?;
    (c.on_change)().await;
    Ok(json!({"ok": true, "path": format!("custom.{}", spec.id)}))
}

/// The catalog tool of one saved script.
pub fn saved_tool(spec: CustomSpec) -> Option<Tool> {
    let path = ToolPath::parse(&format!("custom.{}", spec.id)).ok()?;
    let annotations = if spec.read_only {
        Annotations::READ_ONLY
    } else if spec.destructive {
        Annotations::DESTRUCTIVE
    } else {
        Annotations::WRITE
    };
    let mut d = ToolDef::new(
        path,
        toolshed_core::tool::title_case(&spec.id),
        spec.description.clone(),
    )
    .with_input(spec.input_schema.clone())
    .with_annotations(annotations);
    if let Some(out) = &spec.output_schema {
        d = d.with_output(out.clone());
    }
    // Saved code: the engine runs direct calls of it as script executions (so it can pause).
    d.origin = format!("script:custom.{}", spec.id);
    let spec = Arc::new(spec);
    Some(Tool::from_fn(d, move |ctx, args| {
        let spec = spec.clone();
        async move {
            let engine = ctx
                .engine()
                .ok_or_else(|| ToolError::internal("a custom tool runs inside the engine only"))?;
            let how = NestedRun {
                read_only: spec.read_only,
                ..Default::default()
            };
            engine.run_script(&spec.code, args, how).await
        }
    }))
}

/// The whole plugin: builder tools plus every saved tool.
pub(crate) fn plugin(custom: &Custom, saved: Vec<CustomSpec>) -> Plugin {
    let mut p = Plugin::new(PLUGIN_ID, "Custom tools", "Saved scripts offered as tools.");
    for t in builder_tools(custom) {
        p = p.with_tool(t);
    }
    for spec in saved {
        if let Some(t) = saved_tool(spec) {
            p = p.with_tool(t);
        }
    }
    p
}
