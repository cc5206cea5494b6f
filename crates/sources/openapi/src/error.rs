//! Errors of parsing, loading and importing OpenAPI documents.

/// Why a document could not be parsed, loaded or imported.
#[derive(Debug, thiserror::Error)]
pub enum OpenApiError {
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("invalid YAML at line {line}, column {column}: {message}")]
    Yaml {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("the document is not an object (found {0})")]
    NotAnObject(&'static str),
    #[error(
        "unsupported OpenAPI version {0}: expected swagger \"2.0\", openapi \"3.0.x\" or \"3.1.x\""
    )]
    UnsupportedVersion(String),
    #[error("the document has no paths: nothing to import")]
    NoPaths,
    #[error("cannot resolve $ref '{reference}': {reason}")]
    UnresolvedRef { reference: String, reason: String },
    #[error("invalid namespace '{0}': use lowercase letters, digits and '_'")]
    Namespace(String),
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("cannot fetch {url}: {message}")]
    Fetch { url: String, message: String },
    #[error(
        "credentials are configured for security scheme \"{scheme}\", which the document does not define (it defines: {defined})"
    )]
    UnknownScheme { scheme: String, defined: String },
    #[error("the credentials for security scheme \"{scheme}\" do not fit it: it is {scheme_kind}, which takes {expected}; got {got}")]
    SchemeCredentials {
        scheme: String,
        scheme_kind: String,
        expected: String,
        got: String,
    },
    #[error("security scheme \"{scheme}\" has no usable token URL: {reason}")]
    TokenUrl { scheme: String, reason: String },
    #[error(
        "give either one auth for every operation or credentials per security scheme, not both"
    )]
    AuthConflict,
}
