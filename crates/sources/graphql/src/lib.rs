//! Imports tools from a GraphQL schema.
//!
//! The schema comes as SDL, as an introspection result (JSON), or by running the introspection
//! query against a live endpoint. Every root field becomes one tool:
//!
//! | root       | tool path                          | annotations   |
//! |------------|------------------------------------|---------------|
//! | `Query`    | `<namespace>.query.<field_snake>`  | read-only     |
//! | `Mutation` | `<namespace>.mutation.<field_snake>` | destructive |
//!
//! (`allFilms` → `swapi.query.all_films`.) Two fields whose snake-case names collide get
//! `_2`, `_3`, ... suffixes in schema order. Subscription fields are not imported.
//!
//! A tool's input schema describes the field's arguments (see the `input` module), plus an
//! optional `_selection` string for fields returning objects: a raw selection set that replaces
//! the default one (see the `selection` module). Its output schema loosely describes
//! the `data` object the default selection returns. Calling a tool POSTs `{query, variables}` to
//! the endpoint (see [`operation`] for the document text and [`http`] for the request); GraphQL
//! `errors` and non-2xx answers become [`ToolErrorKind::Upstream`] errors.
//!
//! Requests go through the shared `toolshed-outbound` client with a
//! [`toolshed_outbound::AuthConfig`] ([`GraphqlOptions::auth`]): an API key in a header, the
//! query string or a cookie, a bearer token, basic auth, or OAuth2 client credentials (the token
//! is fetched once, cached and shared by introspection and every call until it nears expiry).
//! Secrets are blanked out of results and errors: the auth's secrets, the OAuth2 access
//! tokens fetched so far, the caller's own token, values of credential-named headers
//! (`Authorization`, `X-Api-Key`, ...) and [`GraphqlOptions::secrets`]. Ordinary header values
//! (`X-Tenant: acme`) are not secrets.
//!
//! Schema problems that do not prevent building tools (such as a field defined twice, as in
//! GitHub's published SDL) are returned as [`Imported::warnings`].

mod error;
pub mod http;
mod input;
mod load;
pub mod operation;
mod resources;
mod selection;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use apollo_compiler::{Name, Schema};
use serde_json::{json, Map, Value};
use toolshed_core::{
    path::to_segment, tool::title_case, Annotations, Tool, ToolContext, ToolDef, ToolError,
    ToolErrorKind, ToolHandler, ToolPath,
};
use toolshed_outbound::secret::{redact, redact_outcome};

pub use error::GraphqlError;
pub use http::MAX_RESPONSE_BYTES;
pub use operation::{Argument, GraphqlOperation, OperationKind};
pub use selection::MAX_UNION_FRAGMENTS;
pub use toolshed_outbound::{ApiKeyLocation, AuthConfig, Secret};

use http::{HttpClient, HttpFailure};
use input::InputSchemas;
use load::ParsedSchema;
use selection::Selections;

/// The argument name that overrides a tool's default selection set.
pub const SELECTION_ARG: &str = "_selection";

/// Where the schema comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaInput {
    /// Schema definition language text.
    Sdl(String),
    /// An introspection result: `{"__schema": ...}` or `{"data": {"__schema": ...}}`.
    IntrospectionJson(Value),
    /// A live endpoint to introspect (only with the async [`import`]).
    Endpoint { url: String },
}

/// How to import and call a GraphQL API. Debug shows header names, never their values.
#[derive(Clone, PartialEq, Eq)]
pub struct GraphqlOptions {
    /// First tool path segment, e.g. `github`.
    pub namespace: String,
    /// The URL tool calls are POSTed to. When empty, an `Endpoint` input's URL is used.
    pub endpoint: String,
    /// Object levels in default selection sets (the root field's type is level 1). Default 2.
    pub selection_depth: usize,
    /// Extra headers on every request (including live introspection). Values of headers with
    /// credential-like names (`Authorization`, `X-Api-Key`, ...) are blanked out of results and
    /// errors; list other secret values in [`Self::secrets`].
    pub headers: Vec<(String, String)>,
    /// More values to blank out of results and errors, e.g. header values read from `env:`.
    pub secrets: Vec<String>,
    /// Credentials on every request (including live introspection).
    pub auth: AuthConfig,
    /// An auth provider whose token each call asks of its `ToolContext`, sent as a bearer
    /// token (replacing any `Authorization` from `auth`). Live introspection has no context,
    /// so it goes without this credential.
    pub token_provider: Option<String>,
    /// Permit endpoints on loopback, private and link-local addresses.
    pub allow_private: bool,
    /// Upper bound for one request; a call's own `ToolContext::timeout` may shorten it.
    pub timeout: Duration,
    /// Dot-globs over the query tools that are also served as MCP resources
    /// ([`resources`]).
    pub resources: Vec<String>,
}

impl std::fmt::Debug for GraphqlOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("GraphqlOptions")
            .field("namespace", &self.namespace)
            .field("endpoint", &self.endpoint)
            .field("selection_depth", &self.selection_depth)
            .field("headers", &header_names)
            .field("secrets", &self.secrets.len())
            .field("auth", &self.auth)
            .field("token_provider", &self.token_provider)
            .field("allow_private", &self.allow_private)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl GraphqlOptions {
    /// Options with the defaults: depth 2, no headers or auth, public addresses only, 30 s.
    pub fn new(namespace: impl Into<String>, endpoint: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            endpoint: endpoint.into(),
            selection_depth: 2,
            headers: Vec::new(),
            secrets: Vec::new(),
            auth: AuthConfig::None,
            token_provider: None,
            allow_private: false,
            timeout: Duration::from_secs(30),
            resources: Vec::new(),
        }
    }
}

/// The result of an import.
#[derive(Debug, Clone)]
pub struct Imported {
    /// Query tools first, then mutation tools, each in schema order.
    pub tools: Vec<Tool>,
    /// Tolerated schema problems, one line each with its location.
    pub warnings: Vec<String>,
    /// The operation behind each tool, in the same order as `tools`.
    pub operations: Vec<Arc<GraphqlOperation>>,
}

/// Imports from SDL or introspection JSON. `SchemaInput::Endpoint` needs [`import`].
pub fn import_schema(input: &SchemaInput, opts: &GraphqlOptions) -> Result<Imported, GraphqlError> {
    let loaded = match input {
        SchemaInput::Sdl(sdl) => load::from_sdl(sdl, "schema.graphql")?,
        SchemaInput::IntrospectionJson(json) => {
            load::from_sdl(&load::introspection_to_sdl(json)?, "introspection.graphql")?
        }
        SchemaInput::Endpoint { .. } => return Err(GraphqlError::EndpointNeedsAsync),
    };
    let client = client_for(&opts.endpoint, opts, http::outbound_for(opts)?)?;
    build(loaded, opts, client)
}

/// Imports from any input; `SchemaInput::Endpoint` runs the introspection query there.
pub async fn import(input: SchemaInput, opts: &GraphqlOptions) -> Result<Imported, GraphqlError> {
    match input {
        SchemaInput::Endpoint { url } => {
            // One client for introspection and calls: an OAuth2 token is fetched once.
            let outbound = http::outbound_for(opts)?;
            let json = introspect_with(&HttpClient::new(&url, opts, outbound.clone())?).await?;
            let endpoint = if opts.endpoint.is_empty() {
                url.as_str()
            } else {
                opts.endpoint.as_str()
            };
            let loaded =
                load::from_sdl(&load::introspection_to_sdl(&json)?, "introspection.graphql")?;
            let client = client_for(endpoint, opts, outbound)?;
            build(loaded, opts, client)
        }
        other => import_schema(&other, opts),
    }
}

/// Runs the introspection query against `url` and returns the raw JSON answer's `data`.
pub async fn introspect(url: &str, opts: &GraphqlOptions) -> Result<Value, GraphqlError> {
    introspect_with(&HttpClient::new(url, opts, http::outbound_for(opts)?)?).await
}

async fn introspect_with(client: &HttpClient) -> Result<Value, GraphqlError> {
    use cynic::QueryBuilder;
    let url = client.url();
    let operation = cynic_introspection::IntrospectionQuery::build(());
    let body = json!({"query": operation.query, "variables": {}});
    let fail = |message: String| {
        let secrets = client.secrets();
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        GraphqlError::Request {
            url: url.to_string(),
            message: redact(&message, &secrets),
        }
    };
    let resp = client
        .post(&body, None, Duration::MAX)
        .await
        .map_err(|e| fail(e.to_string()))?;
    if let Some(errors) = resp.get("errors").and_then(Value::as_array) {
        if !errors.is_empty() {
            return Err(fail(format!("GraphQL errors: {}", error_messages(errors))));
        }
    }
    match resp.get("data") {
        Some(data) if data.is_object() => Ok(data.clone()),
        _ => Err(fail("the answer has no `data` object".into())),
    }
}

fn client_for(
    endpoint: &str,
    opts: &GraphqlOptions,
    outbound: toolshed_outbound::Outbound,
) -> Result<Arc<HttpClient>, GraphqlError> {
    if endpoint.is_empty() {
        return Err(GraphqlError::Config(
            "an endpoint URL is required to call the imported tools".into(),
        ));
    }
    Ok(Arc::new(HttpClient::new(endpoint, opts, outbound)?))
}

fn root_type(schema: &Schema, kind: OperationKind) -> Option<Name> {
    let (declared, fallback) = match kind {
        OperationKind::Query => (&schema.schema_definition.query, "Query"),
        OperationKind::Mutation => (&schema.schema_definition.mutation, "Mutation"),
    };
    match declared {
        Some(name) => Some(name.as_ref().clone()),
        None => schema.get_object(fallback).map(|o| o.name.clone()),
    }
}

fn build(
    loaded: ParsedSchema,
    opts: &GraphqlOptions,
    client: Arc<HttpClient>,
) -> Result<Imported, GraphqlError> {
    let ParsedSchema {
        schema,
        mut warnings,
    } = loaded;
    for kind in [OperationKind::Query, OperationKind::Mutation] {
        ToolPath::join(&opts.namespace, &format!("{}.x", kind.keyword())).map_err(|e| {
            GraphqlError::InvalidNamespace {
                namespace: opts.namespace.clone(),
                reason: e.to_string(),
            }
        })?;
    }
    let query_root = root_type(&schema, OperationKind::Query).ok_or(GraphqlError::NoQueryType)?;
    if schema.get_object(&query_root).is_none() {
        return Err(GraphqlError::NoQueryType);
    }
    let mutation_root = root_type(&schema, OperationKind::Mutation);

    let mut resource_patterns = Vec::new();
    for p in &opts.resources {
        match toolshed_core::Pattern::parse(p) {
            Ok(p) => resource_patterns.push(p),
            Err(e) => warnings.push(format!("resources: pattern '{p}': {e}")),
        }
    }
    let mut inputs = InputSchemas::new(&schema);
    let mut selections = Selections::new(&schema, opts.selection_depth);
    let origin = format!("source:{}", opts.namespace);
    let mut tools = Vec::new();
    let mut operations = Vec::new();

    let roots = [
        (OperationKind::Query, Some(query_root)),
        (OperationKind::Mutation, mutation_root),
    ];
    for (kind, root) in roots {
        let Some(root) = root else { continue };
        let Some(object) = schema.get_object(&root) else {
            warnings.push(format!(
                "{} root type `{root}` is not an object type",
                kind.keyword()
            ));
            continue;
        };
        let mut used: HashSet<String> = HashSet::new();
        for field in object.fields.values() {
            if field.name.starts_with("__") {
                continue;
            }
            let segment = unique_segment(&mut used, &field.name);
            let path = ToolPath::join(&opts.namespace, &format!("{}.{segment}", kind.keyword()))
                .map_err(|e| GraphqlError::InvalidNamespace {
                    namespace: opts.namespace.clone(),
                    reason: e.to_string(),
                })?;
            let mut def = field_def(field, kind, path.clone(), &mut inputs, &mut selections);
            def.def.origin = origin.clone();
            let op = Arc::new(GraphqlOperation {
                path,
                kind,
                field: field.name.to_string(),
                arguments: field
                    .arguments
                    .iter()
                    .map(|a| Argument {
                        name: a.name.to_string(),
                        graphql_type: a.ty.to_string(),
                    })
                    .collect(),
                default_selection: def.selection,
            });
            let handler = GraphqlHandler {
                op: op.clone(),
                client: client.clone(),
            };
            if resources::wanted(&resource_patterns, def.def.path.as_str()) {
                match resources::resource_entry(
                    &opts.namespace,
                    &def.def,
                    field,
                    kind,
                    handler.clone(),
                ) {
                    Ok(entry) => tools.push(entry),
                    Err(why) => warnings.push(format!("not a resource: {why}")),
                }
            }
            tools.push(Tool::new(def.def, Arc::new(handler)));
            operations.push(op);
        }
    }
    if let Some(sub) = schema.schema_definition.subscription.as_ref() {
        if let Some(obj) = schema.get_object(sub) {
            warnings.push(format!(
                "{} subscription field(s) of `{sub}` were not imported",
                obj.fields.len()
            ));
        }
    }
    Ok(Imported {
        tools,
        warnings,
        operations,
    })
}

/// The tool segment of a root field: its name in the path grammar, numbered when two fields
/// map to the same segment.
fn unique_segment(used: &mut HashSet<String>, field: &str) -> String {
    let base = to_segment(field);
    let mut segment = base.clone();
    let mut n = 2;
    while !used.insert(segment.clone()) {
        segment = format!("{base}_{n}");
        n += 1;
    }
    segment
}

/// A root field's tool definition, and its default selection set when it returns a composite
/// type.
struct FieldTool {
    def: ToolDef,
    selection: Option<String>,
}

/// The tool of one root field: its arguments (and `_selection` for a composite result) as the
/// input schema, the `data` object as the output schema, the field's description, read-only for
/// a query and destructive for a mutation.
fn field_def(
    field: &apollo_compiler::schema::FieldDefinition,
    kind: OperationKind,
    path: ToolPath,
    inputs: &mut InputSchemas<'_>,
    selections: &mut Selections<'_>,
) -> FieldTool {
    let return_type = field.ty.inner_named_type();
    let composite = selections.is_composite(return_type);
    let (selection, value_schema) = if composite {
        let sel = selections.for_root(return_type);
        (Some(sel.text.clone()), sel.schema.clone())
    } else {
        (None, selections.leaf_schema(return_type))
    };
    let extra = composite.then(|| {
        (
            SELECTION_ARG,
            json!({
                "type": "string",
                "description": format!(
                    "Optional GraphQL selection set on `{return_type}` replacing the default one, e.g. `{{ id }}`."
                )
            }),
        )
    });
    let input_schema = inputs.arguments(&field.arguments, extra);
    let mut output_props = Map::new();
    output_props.insert(
        field.name.to_string(),
        selection::wrap(&field.ty, value_schema),
    );
    let output_schema = json!({
        "type": "object",
        "description": "The GraphQL `data` object; its shape follows the default selection unless `_selection` is given.",
        "properties": output_props,
    });
    let annotations = match kind {
        OperationKind::Query => Annotations::READ_ONLY,
        OperationKind::Mutation => Annotations::DESTRUCTIVE,
    };
    let def = ToolDef::new(
        path,
        title_case(&field.name),
        field_description(field, kind),
    )
    .with_input(input_schema)
    .with_output(output_schema)
    .with_annotations(annotations);
    FieldTool { def, selection }
}

/// The field's own description (or a line naming it), its return type and any deprecation.
fn field_description(
    field: &apollo_compiler::schema::FieldDefinition,
    kind: OperationKind,
) -> String {
    let mut description = field
        .description
        .as_ref()
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| {
            format!(
                "Calls the GraphQL {} field `{}`.",
                kind.keyword(),
                field.name
            )
        });
    description.push_str(&format!("\n\nReturns `{}`.", field.ty));
    if let Some(reason) = input::deprecation(&field.directives) {
        description.push_str(&format!(" Deprecated: {reason}"));
    }
    description
}

/// Calls one root field over HTTP.
#[derive(Clone)]
struct GraphqlHandler {
    op: Arc<GraphqlOperation>,
    client: Arc<HttpClient>,
}

#[async_trait::async_trait]
impl ToolHandler for GraphqlHandler {
    /// Performs the call; configured secrets, fetched OAuth2 tokens and the caller's own token
    /// are blanked out of the result and of errors.
    async fn call(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        let mut caller_token = None;
        let outcome = self.perform(ctx, args, &mut caller_token).await;
        let mut owned = self.client.secrets();
        owned.extend(caller_token.filter(|t| t.len() >= 3));
        let secrets: Vec<&str> = owned.iter().map(String::as_str).collect();
        redact_outcome(outcome, &secrets)
    }
}

impl GraphqlHandler {
    async fn perform(
        &self,
        ctx: ToolContext,
        args: Value,
        caller_token: &mut Option<String>,
    ) -> Result<Value, ToolError> {
        let mut vars = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ToolError::invalid(format!(
                    "arguments must be an object, got {other}"
                )))
            }
        };
        let selection = match vars.remove(SELECTION_ARG) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(ToolError::invalid("'_selection' must be a string")),
        };
        let query = self
            .op
            .document(&vars, selection.as_deref())
            .map_err(ToolError::invalid)?;
        let token = match self.client.token_provider() {
            Some(provider) => Some(ctx.token(provider).await?),
            None => None,
        };
        caller_token.clone_from(&token);
        let body = json!({"query": query, "variables": vars});
        let resp = self
            .client
            .post(&body, token.as_deref(), ctx.timeout)
            .await
            .map_err(|f| failure_to_error(f, self.client.url()))?;
        interpret(resp)
    }
}

fn failure_to_error(failure: HttpFailure, url: &str) -> ToolError {
    match failure {
        HttpFailure::Status { status, excerpt } => ToolError::upstream(format!(
            "GraphQL endpoint {url} answered HTTP {status}: {excerpt}"
        ))
        .with_data(json!({"status": status, "body": excerpt})),
        HttpFailure::Timeout => ToolError::new(
            ToolErrorKind::Timeout,
            format!("GraphQL endpoint {url} did not answer in time"),
        ),
        HttpFailure::Auth(m) => ToolError::new(
            ToolErrorKind::Unauthorized,
            format!("GraphQL endpoint {url}: cannot obtain credentials: {m}"),
        ),
        other => ToolError::upstream(format!("GraphQL endpoint {url}: {other}")),
    }
}

fn error_messages(errors: &[Value]) -> String {
    errors
        .iter()
        .map(|e| {
            e.get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A GraphQL response body → the `data` object, or an upstream error carrying `errors`
/// (and any partial `data`).
fn interpret(resp: Value) -> Result<Value, ToolError> {
    let data = resp.get("data").cloned().unwrap_or(Value::Null);
    if let Some(errors) = resp.get("errors").and_then(Value::as_array) {
        if !errors.is_empty() {
            return Err(
                ToolError::upstream(format!("GraphQL errors: {}", error_messages(errors)))
                    .with_data(json!({"errors": errors, "data": data})),
            );
        }
    }
    if data.is_object() {
        Ok(data)
    } else {
        Err(
            ToolError::upstream("the GraphQL response has no `data` object")
                .with_data(json!({"response": resp})),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_become_upstream_with_partial_data() {
        let e = interpret(
            json!({"data": {"a": null}, "errors": [{"message": "boom"}, {"message": "bang"}]}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::Upstream);
        assert_eq!(e.message, "GraphQL errors: boom; bang");
        assert_eq!(e.data.unwrap()["data"], json!({"a": null}));
        assert_eq!(
            interpret(json!({"data": {"a": 1}})).unwrap(),
            json!({"a": 1})
        );
        assert!(interpret(json!({"x": 1})).is_err());
    }

    #[test]
    fn http_failures_map_to_kinds() {
        let e = failure_to_error(
            HttpFailure::Status {
                status: 502,
                excerpt: "bad gateway".into(),
            },
            "http://h/g",
        );
        assert_eq!(e.kind, ToolErrorKind::Upstream);
        assert!(e.message.contains("502") && e.message.contains("bad gateway"));
        assert_eq!(
            failure_to_error(HttpFailure::Timeout, "u").kind,
            ToolErrorKind::Timeout
        );
    }

    #[test]
    fn paths_are_unique_and_namespaced() {
        let sdl = "type Query { fooBar: Int foo_bar: Int } type Mutation { doIt(x: Int!): Int }";
        let opts = GraphqlOptions::new("demo", "http://127.0.0.1:1/graphql");
        let imported = import_schema(&SchemaInput::Sdl(sdl.into()), &opts).unwrap();
        let paths: Vec<&str> = imported.tools.iter().map(|t| t.def.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "demo.query.foo_bar",
                "demo.query.foo_bar_2",
                "demo.mutation.do_it"
            ]
        );
        let bad = GraphqlOptions::new("Bad-NS", "http://127.0.0.1:1/graphql");
        assert!(matches!(
            import_schema(&SchemaInput::Sdl(sdl.into()), &bad),
            Err(GraphqlError::InvalidNamespace { .. })
        ));
        assert!(matches!(
            import_schema(&SchemaInput::Sdl("type Foo { a: Int }".into()), &opts),
            Err(GraphqlError::NoQueryType)
        ));
    }
}
