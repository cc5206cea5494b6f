//! The route table's entries and the OpenAPI 3.1 document generated from them.
//!
//! Each [`Route`] pairs the axum handler with what the document says about it: method, path,
//! summary, query parameters and request body (schemas generated from the Rust types with
//! `schemars`), the answers it gives and the error statuses it can answer. [`crate::router`]
//! builds the router and the document from the same list, so no route is served undocumented.
//!
//! Every error answers `{"error": {"code", "message", "data"?}}` ([`ErrorBody`]); 429 also
//! carries `Retry-After`. Authentication is `Authorization: Bearer <key>` (or `X-API-Key`);
//! a server without API keys serves the anonymous principal and needs none.

use std::collections::BTreeSet;

use axum::handler::Handler;
use axum::http::{Method, StatusCode};
use axum::routing::{self, MethodRouter};
use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// Makes the schema of a request or response body (a `$ref` into `components/schemas` for
/// named types).
pub(crate) type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// The schema of `T`, referenced from `components/schemas` when `T` is a named type.
pub(crate) fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// The inline schema of `T`, whose properties become query parameters.
fn inline_schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    T::json_schema(g)
}

/// Every error body: `{"error": {"code", "message", "data"?}}`.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Error")]
pub(crate) struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Serialize, JsonSchema)]
pub(crate) struct ErrorDetail {
    /// A stable machine-readable code such as `not_found`, `invalid_arguments`, `rate_limited`.
    pub code: String,
    /// What was wrong and where, for a person.
    pub message: String,
    /// Details where the code has them (e.g. the violations of invalid arguments).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// What the document says about one route.
pub(crate) struct Operation {
    pub method: Method,
    pub path: &'static str,
    pub id: &'static str,
    pub summary: &'static str,
    /// Whether the route authenticates the caller (every `/v1` route).
    pub authenticated: bool,
    /// A struct whose fields are the query parameters.
    pub query: Option<SchemaFn>,
    pub body: Option<(&'static str, SchemaFn)>,
    /// Answers with a body of their own: status, description, schema.
    /// Status, description, body schema and media type of each answer.
    pub answers: Vec<(StatusCode, &'static str, SchemaFn, &'static str)>,
    /// Error statuses of the route's own; [`Operation::error_statuses`] adds those every route
    /// of its kind can answer.
    pub errors: Vec<StatusCode>,
}

/// One route of the table: the handler and its description.
pub(crate) struct Route<S> {
    pub op: Operation,
    pub handler: MethodRouter<S>,
}

impl<S: Clone + Send + Sync + 'static> Route<S> {
    fn new(method: Method, path: &'static str, handler: MethodRouter<S>) -> Self {
        Self {
            op: Operation {
                method,
                path,
                id: "",
                summary: "",
                authenticated: true,
                query: None,
                body: None,
                answers: vec![],
                errors: vec![],
            },
            handler,
        }
    }

    /// `GET path`, answered by `handler`.
    pub fn get<H: Handler<T, S>, T: 'static>(path: &'static str, handler: H) -> Self {
        Self::new(Method::GET, path, routing::get(handler))
    }

    /// `POST path`, answered by `handler`.
    pub fn post<H: Handler<T, S>, T: 'static>(path: &'static str, handler: H) -> Self {
        Self::new(Method::POST, path, routing::post(handler))
    }

    /// `PUT path`, answered by `handler`.
    pub fn put<H: Handler<T, S>, T: 'static>(path: &'static str, handler: H) -> Self {
        Self::new(Method::PUT, path, routing::put(handler))
    }

    /// `PATCH path`, answered by `handler`.
    pub fn patch<H: Handler<T, S>, T: 'static>(path: &'static str, handler: H) -> Self {
        Self::new(Method::PATCH, path, routing::patch(handler))
    }

    /// `DELETE path`, answered by `handler`.
    pub fn delete<H: Handler<T, S>, T: 'static>(path: &'static str, handler: H) -> Self {
        Self::new(Method::DELETE, path, routing::delete(handler))
    }

    /// The operation id and one-line summary.
    pub fn doc(mut self, id: &'static str, summary: &'static str) -> Self {
        self.op.id = id;
        self.op.summary = summary;
        self
    }

    /// The route needs no API key.
    pub fn public(mut self) -> Self {
        self.op.authenticated = false;
        self
    }

    /// The query parameters are the fields of `T`.
    pub fn query<T: JsonSchema>(mut self) -> Self {
        self.op.query = Some(inline_schema_of::<T>);
        self
    }

    /// The JSON request body.
    pub fn body(mut self, description: &'static str, schema: SchemaFn) -> Self {
        self.op.body = Some((description, schema));
        self
    }

    /// An answer with a JSON body of this schema.
    pub fn answers(mut self, status: StatusCode, description: &'static str, s: SchemaFn) -> Self {
        self.op
            .answers
            .push((status, description, s, "application/json"));
        self
    }

    /// An answer streamed as Server-Sent Events (`text/event-stream`); `s` is the schema of
    /// each message's `data`.
    pub fn streams(mut self, status: StatusCode, description: &'static str, s: SchemaFn) -> Self {
        self.op
            .answers
            .push((status, description, s, "text/event-stream"));
        self
    }

    /// Error statuses of this route's own (engine errors).
    pub fn errors(mut self, statuses: &[StatusCode]) -> Self {
        self.op.errors.extend_from_slice(statuses);
        self
    }
}

impl Operation {
    /// Every error status the route can answer: its own, the guard's 403 (Host, Origin), 401
    /// without a valid key, 400 for a query string or body that does not parse, 415 for a body
    /// that is not JSON.
    pub fn error_statuses(&self) -> BTreeSet<u16> {
        let mut all: BTreeSet<u16> = self.errors.iter().map(StatusCode::as_u16).collect();
        all.insert(403);
        if self.authenticated {
            all.insert(401);
        }
        if self.query.is_some() || self.body.is_some() {
            all.insert(400);
        }
        if self.body.is_some() {
            all.insert(415);
        }
        all
    }
}

/// What an error status means on this API.
fn error_description(status: u16) -> &'static str {
    match status {
        400 => "The query string or body is malformed, or the arguments or decision are invalid (`bad_request`, `malformed_arguments`, `invalid_arguments`, `invalid_decision`); the message says what was wrong and where.",
        401 => "Missing or unknown API key (`unauthorized`).",
        403 => "Refused: the listener guard refused the `Host` or `Origin` (`forbidden_host`, `forbidden_origin`), or policy refused (`forbidden`, `denied`).",
        404 => "No such tool in the caller's view (`not_found`) or no such execution the caller may see (`unknown_execution`).",
        409 => "The execution was already settled or is being resumed (`already_settled`, `busy`).",
        410 => "The paused execution expired (`expired`).",
        415 => "The body is not `application/json` (`unsupported_media_type`).",
        429 => "Over the principal's rate limit (`rate_limited`); `Retry-After` says when to try again.",
        500 => "An internal failure (`store`, `broken_schema`, `journal_failed`).",
        502 => "The tool or its upstream failed, or answered outside its output schema (`invalid_output` and the tool's own codes); a tool's refusal of the input is 400, 404 or 409 by its kind.",
        504 => "The tool did not answer in time (`timeout`).",
        _ => "An error.",
    }
}

fn generator(contract: Contract) -> SchemaGenerator {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    settings.contract = contract;
    settings.into_generator()
}

/// The OpenAPI 3.1 document of `ops`.
pub(crate) fn document<'a>(ops: impl IntoIterator<Item = &'a Operation>) -> Value {
    // Requests are described as read (deserialized), answers as written (serialized).
    let mut requests = generator(Contract::Deserialize);
    let mut answers = generator(Contract::Serialize);
    let error = schema_of::<ErrorBody>(&mut answers).to_value();
    let mut paths = Map::new();
    for op in ops {
        let item = paths.entry(op.path).or_insert_with(|| json!({}));
        item[op.method.as_str().to_ascii_lowercase()] =
            operation(op, &mut requests, &mut answers, &error);
    }
    let mut schemas = requests.take_definitions(true);
    for (name, schema) in answers.take_definitions(true) {
        let previous = schemas.insert(name.clone(), schema.clone());
        assert!(
            previous.is_none_or(|p| p == schema),
            "schema {name} differs as request and as answer"
        );
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Toolshed API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Toolshed's HTTP API: search, describe and call tools, run scripts, settle paused executions, read the audit log. Every call goes through the engine's one path (validation, policy, approval, audit). This document is served at `GET /v1/openapi.json` and needs an API key like every `/v1` route when keys are configured.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "`Authorization: Bearer <key>`, a key of a configured principal. A server without API keys serves the anonymous principal without one.",
                },
                "api_key": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
        "security": [{"bearer": []}, {"api_key": []}],
    })
}

fn operation(
    op: &Operation,
    requests: &mut SchemaGenerator,
    answers: &mut SchemaGenerator,
    error: &Value,
) -> Value {
    let mut out = json!({"operationId": op.id, "summary": op.summary});
    let mut parameters = path_parameters(op.path);
    if let Some(query) = op.query {
        parameters.extend(query_parameters(query(requests).to_value()));
    }
    if !parameters.is_empty() {
        out["parameters"] = Value::Array(parameters);
    }
    if let Some((description, schema)) = op.body {
        out["requestBody"] = json!({
            "description": description,
            "required": true,
            "content": {"application/json": {"schema": schema(requests)}},
        });
    }
    if !op.authenticated {
        out["security"] = json!([]);
    }
    let mut responses = Map::new();
    for (status, description, schema, media) in &op.answers {
        responses.insert(
            status.as_u16().to_string(),
            json!({
                "description": description,
                "content": {*media: {"schema": schema(answers)}},
            }),
        );
    }
    for status in op.error_statuses() {
        let mut answer = json!({
            "description": error_description(status),
            "content": {"application/json": {"schema": error}},
        });
        if status == 429 {
            answer["headers"] = json!({"Retry-After": {
                "description": "Seconds until a retry may succeed.",
                "schema": {"type": "integer", "minimum": 0},
            }});
        }
        responses.entry(status.to_string()).or_insert(answer);
    }
    out["responses"] = Value::Object(responses);
    out
}

/// `{name}` segments of a path, each a required string parameter.
fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let description = match name {
                "path" => "A tool path, e.g. `tables.rows.query`.",
                "id" => "An execution id (`ex_...`).",
                _ => "",
            };
            json!({
                "name": name,
                "in": "path",
                "required": true,
                "description": description,
                "schema": {"type": "string"},
            })
        })
        .collect()
}

/// The properties of an object schema as query parameters (an optional field is a parameter
/// that may be left out, not a nullable one).
fn query_parameters(schema: Value) -> Vec<Value> {
    let required: BTreeSet<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some(properties) = schema["properties"].as_object() else {
        return vec![];
    };
    properties
        .iter()
        .map(|(name, property)| {
            let mut property = property.clone();
            let description = property
                .as_object_mut()
                .and_then(|p| p.remove("description"));
            if let Some(types) = property["type"].as_array() {
                let kept: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                if kept.len() == 1 {
                    property["type"] = kept[0].clone();
                }
            }
            let mut parameter = json!({
                "name": name,
                "in": "query",
                "required": required.contains(name.as_str()),
                "schema": property,
            });
            if let Some(d) = description {
                parameter["description"] = d;
            }
            parameter
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Params {
        /// How many.
        limit: Option<usize>,
        text: String,
    }

    #[test]
    fn optional_fields_are_optional_query_parameters_not_nullable_ones() {
        let mut g = generator(Contract::Deserialize);
        let params = query_parameters(inline_schema_of::<Params>(&mut g).to_value());
        assert_eq!(params.len(), 2, "{params:?}");
        assert_eq!(params[0]["name"], "limit");
        assert_eq!(params[0]["required"], false);
        assert_eq!(params[0]["schema"]["type"], "integer");
        assert_eq!(params[0]["description"], "How many.");
        assert_eq!(params[1]["name"], "text");
        assert_eq!(params[1]["required"], true);
    }

    #[test]
    fn path_segments_in_braces_are_parameters() {
        let params = path_parameters("/v1/executions/{id}/resume");
        assert_eq!(params.len(), 1);
        assert_eq!(params[0]["name"], "id");
        assert_eq!(params[0]["in"], "path");
        assert_eq!(params[0]["required"], true);
        assert!(path_parameters("/v1/tools").is_empty());
    }

    #[test]
    fn every_route_kind_documents_its_errors() {
        let mut r = Route::<()>::post("/x", || async {}).body("b", schema_of::<String>);
        r = r.errors(&[StatusCode::NOT_FOUND]);
        assert_eq!(
            r.op.error_statuses().into_iter().collect::<Vec<_>>(),
            [400, 401, 403, 404, 415]
        );
        let public = Route::<()>::get("/y", || async {}).public();
        assert_eq!(
            public.op.error_statuses().into_iter().collect::<Vec<_>>(),
            [403]
        );
    }
}
