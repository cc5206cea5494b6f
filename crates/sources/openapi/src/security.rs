//! OpenAPI security: the schemes a document defines (`components.securitySchemes` in 3.x,
//! `securityDefinitions` in 2.0), the document-level and per-operation `security`
//! requirements, and the credentials a source configures per scheme name.
//!
//! A requirement is a list of alternatives; an alternative is a set of schemes that must all
//! be satisfied. Each operation uses the first alternative whose every scheme has credentials
//! configured (an empty alternative, `{}`, makes auth optional: it is used only when no other
//! alternative can be met). `security: []` on an operation means no auth. An operation whose
//! requirement cannot be met still imports, with a warning, and its calls send no credentials.
//!
//! Scheme types: `apiKey` (header, query or cookie; the name comes from the scheme), `http`
//! `bearer` and `basic`, and `oauth2` with a client credentials flow (the token URL comes from
//! the scheme unless the credentials give one; the scopes are the operation's unless the
//! credentials give them). `oauth2` and `openIdConnect` schemes also accept a static `token`,
//! sent as a bearer token; `openIdConnect` discovery itself is not supported.
//!
//! The client secret goes to the document's `tokenUrl` only when that URL is on the host the
//! operator trusts: the pinned `base_url`'s host, else (for a document fetched from a URL) the
//! document URL's host. A token URL elsewhere (a changed document could point it anywhere)
//! needs an explicit `token_url` in the credentials; until then the operations that need the
//! scheme import with a warning and send no credentials.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;
use toolshed_outbound::secret::basic_credential;
use toolshed_outbound::{ApiKeyLocation, AuthConfig, Secret};

use crate::error::OpenApiError;
use crate::refs::Docs;
use crate::schema::Version;

/// Credentials for one named security scheme of the document. What they are must fit the
/// scheme's type; the rest (API key name and location, token URL) comes from the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemeCredentials {
    /// The key of an `apiKey` scheme.
    ApiKey { value: Secret },
    /// The token of an `http` `bearer` scheme, or a static access token for an `oauth2` or
    /// `openIdConnect` scheme.
    Bearer { token: Secret },
    /// The user and password of an `http` `basic` scheme.
    Basic { username: String, password: Secret },
    /// A client of an `oauth2` scheme, using the client credentials grant.
    OAuth2ClientCredentials {
        client_id: String,
        client_secret: Secret,
        /// Replaces the scheme's `tokenUrl` (needed when the scheme has no client credentials
        /// flow, or its token URL is relative and the document has no absolute server URL).
        token_url: Option<String>,
        /// Replaces the scopes the operations ask for.
        scopes: Option<Vec<String>>,
        audience: Option<String>,
    },
}

impl SchemeCredentials {
    /// What these credentials are, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            SchemeCredentials::ApiKey { .. } => "an API key (value)",
            SchemeCredentials::Bearer { .. } => "a bearer token (token)",
            SchemeCredentials::Basic { .. } => "a username and password",
            SchemeCredentials::OAuth2ClientCredentials { .. } => {
                "OAuth2 client credentials (client_id, client_secret)"
            }
        }
    }

    /// The secret values, for redacting text that might echo them, with what a request
    /// derives from them (the base64 `user:password` of basic auth).
    pub fn secrets(&self) -> Vec<Secret> {
        let basic =
            |user: &str, secret: &Secret| Secret::new(basic_credential(user, secret.expose()));
        match self {
            SchemeCredentials::ApiKey { value } => vec![value.clone()],
            SchemeCredentials::Bearer { token } => vec![token.clone()],
            SchemeCredentials::Basic { username, password } => {
                vec![password.clone(), basic(username, password)]
            }
            SchemeCredentials::OAuth2ClientCredentials {
                client_id,
                client_secret,
                ..
            } => vec![client_secret.clone(), basic(client_id, client_secret)],
        }
    }
}

/// A problem with the document's security that does not stop the import; shown as a warning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityWarning {
    #[error("security scheme \"{scheme}\" referenced by {operations} is not defined")]
    UndefinedScheme { scheme: String, operations: String },
    #[error("security scheme \"{scheme}\" ({kind}) is not supported: {reason}")]
    Unsupported {
        scheme: String,
        kind: String,
        reason: String,
    },
    #[error("{operations}: cannot meet the security requirement ({needed}): {missing}; calls send no credentials")]
    Unsatisfied {
        operations: String,
        needed: String,
        missing: String,
    },
    #[error("{0}")]
    Malformed(String),
}

/// A scheme as the document defines it.
#[derive(Debug, Clone)]
enum SchemeKind {
    ApiKey {
        location: ApiKeyLocation,
        name: String,
    },
    Bearer,
    Basic,
    OAuth2 {
        /// The client credentials flow's token URL, when the scheme has that flow.
        token_url: Option<String>,
        flows: Vec<String>,
    },
    OpenIdConnect,
    /// Anything else: its description and why it cannot be used.
    Unsupported {
        kind: String,
        reason: String,
    },
}

impl SchemeKind {
    fn describe(&self) -> String {
        match self {
            SchemeKind::ApiKey { location, name } => {
                let loc = match location {
                    ApiKeyLocation::Header => "header",
                    ApiKeyLocation::Query => "query",
                    ApiKeyLocation::Cookie => "cookie",
                };
                format!("apiKey in {loc} '{name}'")
            }
            SchemeKind::Bearer => "http bearer".into(),
            SchemeKind::Basic => "http basic".into(),
            SchemeKind::OAuth2 { .. } => "oauth2".into(),
            SchemeKind::OpenIdConnect => "openIdConnect".into(),
            SchemeKind::Unsupported { kind, .. } => kind.clone(),
        }
    }

    /// What credentials fit, for messages.
    fn expected(&self) -> &'static str {
        match self {
            SchemeKind::ApiKey { .. } => "an API key (value)",
            SchemeKind::Bearer => "a bearer token (token)",
            SchemeKind::Basic => "a username and password",
            SchemeKind::OAuth2 { .. } => {
                "OAuth2 client credentials (client_id, client_secret) or a static token"
            }
            SchemeKind::OpenIdConnect => "a static token",
            SchemeKind::Unsupported { .. } => "nothing: the scheme type is not supported",
        }
    }
}

fn str_at<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn parse_scheme(version: Version, s: &Value) -> SchemeKind {
    let ty = str_at(s, "type").unwrap_or("");
    match ty {
        "apiKey" => {
            let name = str_at(s, "name").unwrap_or("").to_string();
            let location = match str_at(s, "in").unwrap_or("") {
                "header" => ApiKeyLocation::Header,
                "query" => ApiKeyLocation::Query,
                "cookie" if version != Version::Swagger2 => ApiKeyLocation::Cookie,
                other => {
                    return SchemeKind::Unsupported {
                        kind: "apiKey".into(),
                        reason: format!("the key cannot be sent in '{other}'"),
                    }
                }
            };
            if name.is_empty() {
                return SchemeKind::Unsupported {
                    kind: "apiKey".into(),
                    reason: "the scheme has no 'name'".into(),
                };
            }
            SchemeKind::ApiKey { location, name }
        }
        "basic" if version == Version::Swagger2 => SchemeKind::Basic,
        "http" => match str_at(s, "scheme").map(str::to_ascii_lowercase).as_deref() {
            Some("bearer") => SchemeKind::Bearer,
            Some("basic") => SchemeKind::Basic,
            other => SchemeKind::Unsupported {
                kind: format!("http {}", other.unwrap_or("(no scheme)")),
                reason: "only the http schemes 'bearer' and 'basic' are supported".into(),
            },
        },
        "oauth2" if version == Version::Swagger2 => {
            let flow = str_at(s, "flow").unwrap_or("").to_string();
            let token_url = (flow == "application")
                .then(|| str_at(s, "tokenUrl").map(String::from))
                .flatten();
            SchemeKind::OAuth2 {
                token_url,
                flows: vec![flow],
            }
        }
        "oauth2" => {
            let flows = s.get("flows").and_then(Value::as_object);
            let token_url = flows
                .and_then(|f| f.get("clientCredentials"))
                .and_then(|c| str_at(c, "tokenUrl"))
                .map(String::from);
            SchemeKind::OAuth2 {
                token_url,
                flows: flows
                    .map(|f| f.keys().cloned().collect())
                    .unwrap_or_default(),
            }
        }
        "openIdConnect" => SchemeKind::OpenIdConnect,
        other => SchemeKind::Unsupported {
            kind: if other.is_empty() {
                "(no type)".into()
            } else {
                other.to_string()
            },
            reason: "unknown security scheme type".into(),
        },
    }
}

/// How configured credentials become an [`AuthConfig`] for one operation.
#[derive(Debug, Clone)]
enum Binding {
    Ready(AuthConfig),
    /// OAuth2 client credentials: the scopes are the operation's unless configured.
    OAuth2 {
        token_url: String,
        client_id: String,
        client_secret: Secret,
        scopes: Option<Vec<String>>,
        audience: Option<String>,
    },
}

impl Binding {
    fn config(&self, op_scopes: &[String]) -> AuthConfig {
        match self {
            Binding::Ready(a) => a.clone(),
            Binding::OAuth2 {
                token_url,
                client_id,
                client_secret,
                scopes,
                audience,
            } => AuthConfig::OAuth2ClientCredentials {
                token_url: token_url.clone(),
                client_id: client_id.clone(),
                client_secret: client_secret.clone(),
                scopes: scopes.clone().unwrap_or_else(|| op_scopes.to_vec()),
                audience: audience.clone(),
            },
        }
    }
}

/// One alternative of a requirement: (scheme name, scopes) pairs that must all be met.
type Alternative = Vec<(String, Vec<String>)>;

/// The credentials chosen for one operation.
#[derive(Debug, Clone, Default)]
pub(crate) struct OperationAuth {
    pub auths: Vec<AuthConfig>,
    /// Why no credentials are sent although the operation asks for some.
    pub unmet: Option<String>,
}

/// Resolves each operation's security against the configured credentials.
pub(crate) struct Security {
    schemes: BTreeMap<String, SchemeKind>,
    bindings: HashMap<String, Binding>,
    /// Schemes whose credentials are configured but not used, and why (a document token URL
    /// on a host that is not trusted).
    refused: HashMap<String, String>,
    default: Option<Vec<Alternative>>,
    /// Undefined scheme → operations referencing it.
    undefined: BTreeMap<String, Vec<String>>,
    /// Unsupported or unconfigured schemes referenced by an operation whose requirement is not
    /// met.
    unsupported_used: BTreeSet<String>,
    /// (needed, missing) → operations.
    unmet: BTreeMap<(String, String), Vec<String>>,
    malformed: Vec<String>,
}

fn quote_all<'a>(names: impl IntoIterator<Item = &'a str>, sep: &str) -> String {
    names
        .into_iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(sep)
}

fn list_ops(ops: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = ops
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if ops.len() > SHOWN {
        text.push_str(&format!(" and {} more operations", ops.len() - SHOWN));
    }
    text
}

/// Why the document's (absolute) token URL may not receive the client secret, if it may not:
/// its host differs from the host of `trusted` (`(what, url)`, e.g. the pinned base URL).
fn foreign_token_url(
    scheme: &str,
    token_url: &str,
    trusted: Option<(&str, &str)>,
) -> Option<String> {
    let (what, trusted_url) = trusted?;
    let host = |u: &str| {
        url::Url::parse(u)
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
    };
    let token_host = host(token_url);
    let trusted_host = host(trusted_url);
    if token_host.is_some() && token_host == trusted_host {
        return None;
    }
    Some(format!(
        "the tokenUrl '{token_url}' of \"{scheme}\" is not on the host of {what} ({}), so its client secret is not sent there; set token_url in its credentials to use it",
        trusted_host.as_deref().unwrap_or("no host")
    ))
}

/// Joins a relative token URL to the API's base URL.
fn absolute_url(url: &str, base: Option<&str>) -> Option<String> {
    if toolshed_core::is_url(url) {
        return Some(url.to_string());
    }
    let base = base?;
    let base = if base.ends_with('/') {
        base.to_string()
    } else {
        format!("{base}/")
    };
    url::Url::parse(&base)
        .and_then(|b| b.join(url))
        .ok()
        .map(|u| u.to_string())
}

/// The document's security schemes by name; a scheme that cannot be read is noted in
/// `malformed` and left out.
fn read_schemes(
    doc: &Value,
    version: Version,
    docs: &Docs<'_>,
    malformed: &mut Vec<String>,
) -> BTreeMap<String, SchemeKind> {
    let defs = if version == Version::Swagger2 {
        doc.get("securityDefinitions")
    } else {
        doc.get("components").and_then(|c| c.get("securitySchemes"))
    };
    let mut schemes = BTreeMap::new();
    for (name, s) in defs.and_then(Value::as_object).into_iter().flatten() {
        match docs.deref(0, s) {
            Ok((_, s)) => {
                schemes.insert(name.clone(), parse_scheme(version, s));
            }
            Err(e) => malformed.push(format!("security scheme \"{name}\": {e}")),
        }
    }
    schemes
}

/// What configured credentials become for their scheme.
enum Bound {
    Ready(Binding),
    /// Not bound, and why: the document's token URL is on a host the client secret may not go to.
    Refused(String),
}

/// Binds one scheme's configured credentials; credentials of another type than the scheme's
/// are an error, and so is a client-credentials scheme without a usable token URL.
fn bind(
    name: &str,
    kind: &SchemeKind,
    cred: &SchemeCredentials,
    base_url: Option<&str>,
    trusted: Option<(&str, &str)>,
) -> Result<Bound, OpenApiError> {
    let binding = match (kind, cred) {
        (SchemeKind::ApiKey { location, name }, SchemeCredentials::ApiKey { value }) => {
            Binding::Ready(AuthConfig::ApiKey {
                location: *location,
                name: name.clone(),
                value: value.clone(),
            })
        }
        (
            SchemeKind::Bearer | SchemeKind::OAuth2 { .. } | SchemeKind::OpenIdConnect,
            SchemeCredentials::Bearer { token },
        ) => Binding::Ready(AuthConfig::Bearer {
            token: token.clone(),
        }),
        (SchemeKind::Basic, SchemeCredentials::Basic { username, password }) => {
            Binding::Ready(AuthConfig::Basic {
                username: username.clone(),
                password: password.clone(),
            })
        }
        (
            SchemeKind::OAuth2 { token_url, flows },
            SchemeCredentials::OAuth2ClientCredentials {
                client_id,
                client_secret,
                token_url: configured,
                scopes,
                audience,
            },
        ) => {
            let url = match (configured, token_url) {
                (Some(u), _) => u.clone(),
                (None, Some(u)) => {
                    let url = absolute_url(u, base_url).ok_or_else(|| OpenApiError::TokenUrl {
                        scheme: name.to_string(),
                        reason: format!(
                            "its tokenUrl '{u}' is relative and the document names no absolute server URL; set token_url in its credentials"
                        ),
                    })?;
                    if let Some(reason) = foreign_token_url(name, &url, trusted) {
                        return Ok(Bound::Refused(reason));
                    }
                    url
                }
                (None, None) => {
                    return Err(OpenApiError::TokenUrl {
                        scheme: name.to_string(),
                        reason: format!(
                            "it has no client credentials flow (its flows: {}); set token_url in its credentials",
                            if flows.is_empty() {
                                "none".to_string()
                            } else {
                                flows.join(", ")
                            }
                        ),
                    })
                }
            };
            Binding::OAuth2 {
                token_url: url,
                client_id: client_id.clone(),
                client_secret: client_secret.clone(),
                scopes: scopes.clone(),
                audience: audience.clone(),
            }
        }
        _ => {
            return Err(OpenApiError::SchemeCredentials {
                scheme: name.to_string(),
                scheme_kind: kind.describe(),
                expected: kind.expected().into(),
                got: cred.kind().into(),
            })
        }
    };
    Ok(Bound::Ready(binding))
}

impl Security {
    /// Reads the document's schemes and default requirement and binds `credentials` to them.
    /// Credentials for a scheme the document does not define, or that do not fit the scheme's
    /// type, are errors. `trusted` (`(what, url)`) is the URL whose host a document's token URL
    /// must be on to receive a client secret without an explicit `token_url`.
    pub(crate) fn new(
        doc: &Value,
        version: Version,
        docs: &Docs<'_>,
        credentials: &BTreeMap<String, SchemeCredentials>,
        base_url: Option<&str>,
        trusted: Option<(&str, &str)>,
    ) -> Result<Self, OpenApiError> {
        let mut malformed = Vec::new();
        let schemes = read_schemes(doc, version, docs, &mut malformed);
        let mut bindings = HashMap::new();
        let mut refused = HashMap::new();
        for (name, cred) in credentials {
            let Some(kind) = schemes.get(name) else {
                return Err(OpenApiError::UnknownScheme {
                    scheme: name.clone(),
                    defined: if schemes.is_empty() {
                        "none".into()
                    } else {
                        quote_all(schemes.keys().map(String::as_str), ", ")
                    },
                });
            };
            match bind(name, kind, cred, base_url, trusted)? {
                Bound::Ready(binding) => {
                    bindings.insert(name.clone(), binding);
                }
                Bound::Refused(reason) => {
                    refused.insert(name.clone(), reason);
                }
            }
        }
        let default = doc
            .get("security")
            .map(|v| Self::parse_requirement(v, "the document", &mut malformed));
        Ok(Self {
            schemes,
            bindings,
            refused,
            default,
            undefined: BTreeMap::new(),
            unsupported_used: BTreeSet::new(),
            unmet: BTreeMap::new(),
            malformed,
        })
    }

    fn parse_requirement(v: &Value, owner: &str, malformed: &mut Vec<String>) -> Vec<Alternative> {
        let Some(list) = v.as_array() else {
            malformed.push(format!(
                "'security' of {owner} is not an array; it is ignored"
            ));
            return Vec::new();
        };
        let mut out = Vec::new();
        for alt in list {
            let Some(map) = alt.as_object() else {
                malformed.push(format!(
                    "a 'security' entry of {owner} is not an object; it is ignored"
                ));
                continue;
            };
            out.push(
                map.iter()
                    .map(|(name, scopes)| {
                        let scopes = scopes
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|s| s.as_str().map(String::from))
                                    .collect()
                            })
                            .unwrap_or_default();
                        (name.clone(), scopes)
                    })
                    .collect(),
            );
        }
        out
    }

    /// The credentials `op` (at `where_`, e.g. `GET /pets`) sends.
    pub(crate) fn for_operation(&mut self, where_: &str, op: &Value) -> OperationAuth {
        let requirement = match op.get("security") {
            Some(v) => Self::parse_requirement(v, where_, &mut self.malformed),
            None => match &self.default {
                Some(d) => d.clone(),
                None => return OperationAuth::default(),
            },
        };
        if requirement.is_empty() {
            return OperationAuth::default();
        }
        let mut optional = false;
        let mut missing: BTreeSet<String> = BTreeSet::new();
        for alt in &requirement {
            if alt.is_empty() {
                optional = true;
                continue;
            }
            let mut ok = true;
            for (name, _) in alt {
                if !self.schemes.contains_key(name) {
                    let ops = self.undefined.entry(name.clone()).or_default();
                    if !ops.iter().any(|o| o == where_) {
                        ops.push(where_.to_string());
                    }
                    ok = false;
                    missing.insert(name.clone());
                } else if !self.bindings.contains_key(name) {
                    ok = false;
                    missing.insert(name.clone());
                }
            }
            if ok {
                return OperationAuth {
                    auths: alt
                        .iter()
                        .map(|(name, scopes)| self.bindings[name].config(scopes))
                        .collect(),
                    unmet: None,
                };
            }
        }
        if optional {
            return OperationAuth::default();
        }
        let needed = requirement
            .iter()
            .map(|alt| quote_all(alt.iter().map(|(n, _)| n.as_str()), " and "))
            .collect::<Vec<_>>()
            .join(" or ");
        let mut reasons = Vec::new();
        for name in &missing {
            if let Some(reason) = self.refused.get(name) {
                reasons.push(reason.clone());
                continue;
            }
            match self.schemes.get(name) {
                None => reasons.push(format!("\"{name}\" is not defined")),
                Some(SchemeKind::Unsupported { .. }) => {
                    self.unsupported_used.insert(name.clone());
                    reasons.push(format!("\"{name}\" is of an unsupported type"));
                }
                Some(SchemeKind::OpenIdConnect) => {
                    self.unsupported_used.insert(name.clone());
                    reasons.push(format!(
                        "\"{name}\" (openIdConnect) is not supported and has no static token configured"
                    ));
                }
                Some(kind) => reasons.push(format!(
                    "no credentials are configured for \"{name}\" ({})",
                    kind.describe()
                )),
            }
        }
        let missing = reasons.join(", ");
        let ops = self
            .unmet
            .entry((needed.clone(), missing.clone()))
            .or_default();
        ops.push(where_.to_string());
        OperationAuth {
            auths: Vec::new(),
            unmet: Some(format!(
                "{where_} needs security {needed}, but {missing}; no credentials were sent (configure them under the source's auth.schemes)"
            )),
        }
    }

    /// The warnings gathered: malformed requirements, undefined and unsupported schemes, and
    /// operations whose requirement cannot be met.
    pub(crate) fn warnings(&self) -> Vec<SecurityWarning> {
        let mut out: Vec<SecurityWarning> = self
            .malformed
            .iter()
            .cloned()
            .map(SecurityWarning::Malformed)
            .collect();
        for (scheme, ops) in &self.undefined {
            out.push(SecurityWarning::UndefinedScheme {
                scheme: scheme.clone(),
                operations: list_ops(ops),
            });
        }
        for name in &self.unsupported_used {
            let (kind, reason) = match &self.schemes[name] {
                SchemeKind::Unsupported { kind, reason } => (kind.clone(), reason.clone()),
                SchemeKind::OpenIdConnect => (
                    "openIdConnect".to_string(),
                    "OpenID Connect discovery is not implemented; configure a static token for it to send a bearer token".to_string(),
                ),
                other => (other.describe(), String::new()),
            };
            out.push(SecurityWarning::Unsupported {
                scheme: name.clone(),
                kind,
                reason,
            });
        }
        for ((needed, missing), ops) in &self.unmet {
            out.push(SecurityWarning::Unsatisfied {
                operations: list_ops(ops),
                needed: needed.clone(),
                missing: missing.clone(),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sec(doc: &Value, creds: &[(&str, SchemeCredentials)]) -> Result<Security, OpenApiError> {
        let docs = Docs::new(doc, None);
        let creds: BTreeMap<String, SchemeCredentials> = creds
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        Security::new(
            doc,
            Version::OpenApi30,
            &docs,
            &creds,
            Some("https://api.example.com/v1"),
            None,
        )
    }

    fn doc() -> Value {
        json!({"openapi": "3.0.3", "paths": {},
            "components": {"securitySchemes": {
                "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                "bearer": {"type": "http", "scheme": "Bearer"},
                "oauth": {"type": "oauth2", "flows": {"clientCredentials": {
                    "tokenUrl": "/oauth/token", "scopes": {"read": "r"}}}},
                "code": {"type": "oauth2", "flows": {"authorizationCode": {
                    "authorizationUrl": "https://a/x", "tokenUrl": "https://a/t", "scopes": {}}}},
                "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://a/.well-known"},
                "digest": {"type": "http", "scheme": "digest"}}},
            "security": [{"key": []}]})
    }

    fn key() -> SchemeCredentials {
        SchemeCredentials::ApiKey {
            value: Secret::new("k"),
        }
    }

    #[test]
    fn first_configured_alternative_wins() {
        let mut s = sec(&doc(), &[("key", key())]).unwrap();
        let a = s.for_operation(
            "GET /a",
            &json!({"security": [{"bearer": []}, {"key": []}]}),
        );
        assert!(matches!(&a.auths[..], [AuthConfig::ApiKey { name, .. }] if name == "X-Key"));
        assert!(a.unmet.is_none());
        // Document default.
        let a = s.for_operation("GET /b", &json!({}));
        assert_eq!(a.auths.len(), 1);
        // security: [] means none, without warning.
        let a = s.for_operation("GET /c", &json!({"security": []}));
        assert!(a.auths.is_empty() && a.unmet.is_none());
        // Optional auth: credentials when they can be sent, else nothing, without warning.
        let a = s.for_operation("GET /d", &json!({"security": [{}, {"key": []}]}));
        assert_eq!(a.auths.len(), 1);
        let a = s.for_operation("GET /e", &json!({"security": [{}, {"bearer": []}]}));
        assert!(a.auths.is_empty() && a.unmet.is_none());
        assert!(s.warnings().is_empty(), "{:?}", s.warnings());
    }

    #[test]
    fn unmet_and_undefined_requirements_warn() {
        let mut s = sec(&doc(), &[]).unwrap();
        let a = s.for_operation("GET /pets", &json!({"security": [{"ghost": []}]}));
        assert!(a.auths.is_empty());
        assert!(a.unmet.unwrap().contains("\"ghost\" is not defined"));
        s.for_operation("GET /x", &json!({"security": [{"oidc": []}]}));
        s.for_operation("GET /y", &json!({"security": [{"bearer": []}]}));
        let w: Vec<String> = s.warnings().iter().map(ToString::to_string).collect();
        assert!(
            w.contains(&"security scheme \"ghost\" referenced by GET /pets is not defined".into()),
            "{w:?}"
        );
        assert!(w
            .iter()
            .any(|w| w.contains("\"oidc\" (openIdConnect) is not supported")));
        assert!(
            w.iter().any(|w| w
                .starts_with("GET /y: cannot meet the security requirement (\"bearer\")")
                && w.contains("no credentials are configured for \"bearer\" (http bearer)")),
            "{w:?}"
        );
    }

    #[test]
    fn oauth2_scopes_and_token_urls() {
        let cc = |token_url: Option<&str>, scopes: Option<Vec<String>>| {
            SchemeCredentials::OAuth2ClientCredentials {
                client_id: "c".into(),
                client_secret: Secret::new("s"),
                token_url: token_url.map(String::from),
                scopes,
                audience: None,
            }
        };
        let mut s = sec(&doc(), &[("oauth", cc(None, None))]).unwrap();
        let a = s.for_operation("GET /a", &json!({"security": [{"oauth": ["read"]}]}));
        match &a.auths[..] {
            [AuthConfig::OAuth2ClientCredentials {
                token_url, scopes, ..
            }] => {
                // Resolved against the server URL as a URI reference (RFC 3986).
                assert_eq!(token_url, "https://api.example.com/oauth/token");
                assert_eq!(scopes, &vec!["read".to_string()]);
            }
            other => panic!("{other:?}"),
        }
        let mut s = sec(&doc(), &[("oauth", cc(Some("https://t/x"), Some(vec![])))]).unwrap();
        let a = s.for_operation("GET /a", &json!({"security": [{"oauth": ["read"]}]}));
        assert!(matches!(&a.auths[..],
            [AuthConfig::OAuth2ClientCredentials { token_url, scopes, .. }]
                if token_url == "https://t/x" && scopes.is_empty()));
        let e = sec(&doc(), &[("code", cc(None, None))]).err().unwrap();
        assert!(matches!(e, OpenApiError::TokenUrl { .. }));
        assert!(e.to_string().contains("authorizationCode"), "{e}");
        assert!(sec(&doc(), &[("code", cc(Some("https://a/t"), None))]).is_ok());
    }

    /// A document token URL on another host than the pinned base URL gets no client secret
    /// unless the credentials name the token URL themselves.
    #[test]
    fn foreign_token_urls_need_an_explicit_token_url() {
        let doc = json!({"openapi": "3.0.3", "paths": {},
            "components": {"securitySchemes": {
                "far": {"type": "oauth2", "flows": {"clientCredentials": {
                    "tokenUrl": "https://evil.example.net/token", "scopes": {}}}},
                "near": {"type": "oauth2", "flows": {"clientCredentials": {
                    "tokenUrl": "/oauth/token", "scopes": {}}}}}}});
        let cc = |token_url: Option<&str>| SchemeCredentials::OAuth2ClientCredentials {
            client_id: "c".into(),
            client_secret: Secret::new("s"),
            token_url: token_url.map(String::from),
            scopes: None,
            audience: None,
        };
        let pinned = "https://API.example.com/v1";
        let with = |creds: Vec<(&str, SchemeCredentials)>, trusted: Option<(&str, &str)>| {
            let creds: BTreeMap<String, SchemeCredentials> =
                creds.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            Security::new(
                &doc,
                Version::OpenApi30,
                &Docs::new(&doc, None),
                &creds,
                Some(pinned),
                trusted,
            )
            .unwrap()
        };
        let trusted = Some(("the pinned base_url", pinned));
        let mut s = with(vec![("far", cc(None)), ("near", cc(None))], trusted);
        let a = s.for_operation("GET /far", &json!({"security": [{"far": []}]}));
        assert!(a.auths.is_empty(), "{:?}", a.auths);
        let unmet = a.unmet.unwrap();
        assert!(
            unmet.contains("https://evil.example.net/token") && unmet.contains("set token_url"),
            "{unmet}"
        );
        let w: Vec<String> = s.warnings().iter().map(ToString::to_string).collect();
        assert!(
            w.iter().any(|w| w.starts_with("GET /far: cannot meet")
                && w.contains("api.example.com")
                && w.ends_with("calls send no credentials")),
            "{w:?}"
        );
        // Same host (a relative token URL resolved against the pinned base URL) is fine.
        let a = s.for_operation("GET /near", &json!({"security": [{"near": []}]}));
        assert!(matches!(&a.auths[..],
            [AuthConfig::OAuth2ClientCredentials { token_url, .. }]
                if token_url == "https://api.example.com/oauth/token"));
        // An explicit token URL is the operator's choice.
        let mut s = with(
            vec![("far", cc(Some("https://evil.example.net/token")))],
            trusted,
        );
        let a = s.for_operation("GET /far", &json!({"security": [{"far": []}]}));
        assert_eq!(a.auths.len(), 1);
        // Nothing pinned and a local document: the document is trusted.
        let mut s = with(vec![("far", cc(None))], None);
        let a = s.for_operation("GET /far", &json!({"security": [{"far": []}]}));
        assert_eq!(a.auths.len(), 1);
    }

    #[test]
    fn configuration_errors_name_the_scheme() {
        let e = sec(&doc(), &[("nope", key())]).err().unwrap();
        assert!(
            e.to_string().contains("\"nope\"") && e.to_string().contains("\"key\""),
            "{e}"
        );
        let e = sec(&doc(), &[("bearer", key())]).err().unwrap();
        assert!(matches!(e, OpenApiError::SchemeCredentials { .. }), "{e}");
        assert!(e.to_string().contains("http bearer"), "{e}");
        let e = sec(&doc(), &[("digest", key())]).err().unwrap();
        assert!(e.to_string().contains("not supported"), "{e}");
        // A static token for OpenID Connect is fine.
        let token = SchemeCredentials::Bearer {
            token: Secret::new("t"),
        };
        let mut s = sec(&doc(), &[("oidc", token)]).unwrap();
        let a = s.for_operation("GET /a", &json!({"security": [{"oidc": []}]}));
        assert!(matches!(&a.auths[..], [AuthConfig::Bearer { .. }]));
    }
}
