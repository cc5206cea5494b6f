//! Errors returned while importing a GraphQL schema.

/// Why a schema could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum GraphqlError {
    /// The SDL text is not valid GraphQL syntax.
    #[error("invalid GraphQL SDL at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// The introspection JSON does not have the expected `__schema` shape.
    #[error("invalid introspection JSON: {0}")]
    Introspection(String),
    /// The schema has no query root type with fields to import.
    #[error(
        "the schema has no query root type (looked for `schema {{ query }}` and `type Query`)"
    )]
    NoQueryType,
    /// The namespace does not make valid tool paths.
    #[error("invalid namespace '{namespace}': {reason}")]
    InvalidNamespace { namespace: String, reason: String },
    /// `SchemaInput::Endpoint` was given to the synchronous importer.
    #[error("an endpoint must be introspected with the async `import`, not `import_schema`")]
    EndpointNeedsAsync,
    /// The endpoint URL or a header is not usable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The endpoint could not be reached or answered badly during introspection.
    #[error("introspection request to {url} failed: {message}")]
    Request { url: String, message: String },
}
