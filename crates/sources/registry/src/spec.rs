//! [`SourceSpec`]: how a tool source is declared, in `toolshed.toml` (`[[sources]]`) or in the
//! store (`toolshed sources add`).
//!
//! ```toml
//! [[sources]]
//! kind = "openapi"            # or "graphql", "mcp"
//! name = "pets"               # the namespace: pets.pet.add_pet, ...
//! spec = "specs/petstore.json"   # file path or http(s) URL
//! base_url = "https://pets.example.com/v2"
//! auth = { type = "bearer", token = "env:PETS_TOKEN" }
//! [[sources.overrides]]
//! pattern = "pets.store.*"
//! hidden = true
//! ```
//!
//! `auth` is one of `bearer`, `api_key` (`location` = `header`, `query` or `cookie`), `basic`
//! and `oauth2_client_credentials`, sent by every call. An OpenAPI source may instead give
//! credentials per security scheme of its document, by scheme name; each operation then sends
//! what its own `security` requirement asks for (see `toolshed_openapi::security`):
//!
//! ```toml
//! [[sources]]
//! kind = "openapi"
//! name = "pets"
//! spec = "specs/petstore.yaml"
//! [sources.auth.schemes.api_key_header]   # an apiKey scheme: name and location from the document
//! value = "env:PETS_KEY"
//! [sources.auth.schemes.bearer_auth]      # http bearer (or a static oauth2/openIdConnect token)
//! token = "env:PETS_TOKEN"
//! [sources.auth.schemes.basic_auth]       # http basic
//! username = "ann"
//! password = "env:PETS_PASSWORD"
//! [sources.auth.schemes.oauth]            # oauth2 client credentials; tokenUrl from the document
//! client_id = "toolshed"
//! client_secret = "env:PETS_CLIENT_SECRET"
//! scopes = ["read"]                       # optional: else the scopes each operation asks for
//! ```
//!
//! Secret strings (auth values, header values, MCP child environment values) are either a
//! literal, `env:NAME` (read when the source is loaded), or — only in the store — `sealed:...`
//! (see [`crate::secrets`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolshed_core::Pattern;

use crate::error::SourcesError;

/// What [`SourceSpec::redacted`] shows instead of a literal or sealed secret.
pub use toolshed_outbound::secret::REDACTED;

/// One declared tool source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SourceSpec {
    Openapi(OpenApiSpec),
    Graphql(GraphqlSpec),
    Mcp(McpSpec),
}

/// An OpenAPI (2.0, 3.0, 3.1) document imported as tools.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenApiSpec {
    pub name: String,
    /// Where the OpenAPI document is: a file path or an `http(s)` URL (`spec` in the
    /// configuration).
    #[serde(rename = "spec")]
    pub location: String,
    /// Replaces the document's servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// One auth for every operation, or credentials per security scheme (`auth.schemes`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de_auth"
    )]
    pub auth: Option<AuthSpec>,
    /// Permit loopback and private addresses (for the document URL and for calls).
    #[serde(default)]
    pub allow_private: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<OverrideSpec>,
    /// Dot-globs over the source's tool paths whose GET operations are also served as MCP
    /// resources (`<tool path>_resource`, URI `openapi://<name><path>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
}

/// A GraphQL API: schema from SDL, an introspection file, or live introspection of `endpoint`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphqlSpec {
    pub name: String,
    /// A file of schema definition language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sdl: Option<String>,
    /// A file holding an introspection result (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection: Option<String>,
    /// Where calls are POSTed; introspected live when neither `sdl` nor `introspection` is given.
    pub endpoint: String,
    /// Extra headers on every request; values are secrets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// One auth for every request (`auth.schemes` is for OpenAPI sources only).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de_auth"
    )]
    pub auth: Option<AuthSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection_depth: Option<usize>,
    #[serde(default)]
    pub allow_private: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<OverrideSpec>,
    /// Dot-globs over the source's query tools that are also served as MCP resources
    /// (`<tool path>_resource`, URI `graphql://<name>/<field>/{arg}...`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
}

/// An upstream MCP server: a stdio child (`command`) or a streamable HTTP endpoint (`url`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra environment of the child; values are secrets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Extra HTTP headers; values are secrets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub allow_private: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<OverrideSpec>,
    /// OAuth for a streamable HTTP upstream that asks for a token (secret fields accept
    /// `env:NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<toolshed_mcp_source::OAuthSpec>,
}

/// Credentials; secret fields accept `env:NAME`.
///
/// Written with a `type`, except per-scheme credentials, which may be written as just
/// `schemes = { ... }` (stored and shown with `type = "schemes"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AuthSpec {
    /// `Authorization: Bearer <token>`.
    Bearer {
        token: String,
    },
    /// A key in a header (default), the query string or a cookie.
    ApiKey {
        name: String,
        value: String,
        #[serde(default)]
        location: KeyLocation,
    },
    Basic {
        username: String,
        password: String,
    },
    /// OAuth2 client credentials grant; the token is cached until shortly before it expires.
    Oauth2ClientCredentials {
        token_url: String,
        client_id: String,
        client_secret: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        scopes: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        audience: Option<String>,
    },
    /// Each principal's own grant: the authorization-code flow with PKCE, run once per
    /// principal through Toolshed's `/connect/{source}`; until a principal has granted access,
    /// its calls pause with a link to do so. OpenAPI sources only.
    /// `authorization_url`, `token_url` and `scopes` default to the document's `oauth2`
    /// `authorizationCode` flow.
    Oauth2User {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        authorization_url: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        token_url: String,
        client_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_secret: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        scopes: Vec<String>,
        /// The API's resource indicator (RFC 8707).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource: Option<String>,
    },
    /// The calling principal's own sign-in token (the OAuth token it called Toolshed with)
    /// exchanged for a token of this API (RFC 8693), cached until it expires. OpenAPI sources
    /// only.
    TokenExchange {
        token_url: String,
        client_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_secret: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        audience: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        scopes: Vec<String>,
    },
    /// OpenAPI sources only: credentials per security scheme name of the document; each
    /// operation sends those its `security` requirement asks for.
    Schemes {
        schemes: BTreeMap<String, SchemeAuthSpec>,
    },
}

/// Credentials for one security scheme of an OpenAPI document. Give exactly one of: `value`
/// (an `apiKey` scheme), `token` (`http` `bearer`, or a static token for `oauth2` /
/// `openIdConnect`), `username` + `password` (`http` `basic`), or `client_id` +
/// `client_secret` (an `oauth2` scheme, client credentials grant; `token_url`, `scopes` and
/// `audience` optional). Secret fields accept `env:NAME`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemeAuthSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// Replaces the scheme's `tokenUrl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// Replaces the scopes each operation asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
}

/// What a [`SchemeAuthSpec`] holds, by its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemeAuthKind {
    ApiKey,
    Bearer,
    Basic,
    OAuth2ClientCredentials,
}

impl SchemeAuthSpec {
    /// Which credentials these are; an error says which fields are missing or conflict.
    pub fn kind(&self) -> Result<SchemeAuthKind, String> {
        let has = |o: &Option<String>| o.is_some();
        let groups = [
            (has(&self.value), "value"),
            (has(&self.token), "token"),
            (
                has(&self.username) || has(&self.password),
                "username/password",
            ),
            (
                has(&self.client_id)
                    || has(&self.client_secret)
                    || has(&self.token_url)
                    || self.scopes.is_some()
                    || has(&self.audience),
                "client_id/client_secret",
            ),
        ];
        let given: Vec<&str> = groups.iter().filter(|(g, _)| *g).map(|(_, n)| *n).collect();
        let hint = "give one of: value (apiKey), token (http bearer, or a static oauth2/openIdConnect token), username and password (http basic), client_id and client_secret (oauth2 client credentials)";
        match given.as_slice() {
            ["value"] => Ok(SchemeAuthKind::ApiKey),
            ["token"] => Ok(SchemeAuthKind::Bearer),
            ["username/password"] => match (&self.username, &self.password) {
                (Some(_), Some(_)) => Ok(SchemeAuthKind::Basic),
                (None, _) => Err("'password' without 'username'".into()),
                (_, None) => Err("'username' without 'password'".into()),
            },
            ["client_id/client_secret"] => match (&self.client_id, &self.client_secret) {
                (Some(_), Some(_)) => Ok(SchemeAuthKind::OAuth2ClientCredentials),
                (None, _) => Err("OAuth2 client credentials need 'client_id'".into()),
                (_, None) => Err("OAuth2 client credentials need 'client_secret'".into()),
            },
            [] => Err(format!("no credentials: {hint}")),
            many => Err(format!("{} given together: {hint}", many.join(", "))),
        }
    }

    fn secrets_mut(&mut self) -> Vec<&mut String> {
        [
            &mut self.value,
            &mut self.token,
            &mut self.password,
            &mut self.client_secret,
        ]
        .into_iter()
        .filter_map(Option::as_mut)
        .collect()
    }
}

/// Reads `auth`: tagged by `type`, or `schemes = {...}` alone for per-scheme credentials.
fn de_auth<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<AuthSpec>, D::Error> {
    use serde::de::Error;
    let Some(mut v) = Option::<serde_json::Value>::deserialize(d)? else {
        return Ok(None);
    };
    let Some(m) = v.as_object_mut() else {
        return Err(D::Error::custom(
            "'auth' must be a table, e.g. { type = \"bearer\", token = \"env:TOKEN\" }",
        ));
    };
    if !m.contains_key("type") {
        if !m.contains_key("schemes") {
            return Err(D::Error::custom(
                "'auth' needs a 'type' (bearer, api_key, basic, oauth2_client_credentials) or credentials per security scheme under 'schemes'",
            ));
        }
        m.insert("type".into(), "schemes".into());
    }
    AuthSpec::deserialize(v)
        .map(Some)
        .map_err(|e| D::Error::custom(format!("auth: {e}")))
}

/// Where an API key goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyLocation {
    #[default]
    Header,
    Query,
    Cookie,
}

/// Changes annotations of, or hides, the imported tools whose path matches `pattern`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideSpec {
    /// A dot-glob over the whole tool path (`pets.store.*`, `pets.**`).
    pub pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(default)]
    pub hidden: bool,
}

impl SourceSpec {
    /// The name: also the namespace of its tools.
    pub fn name(&self) -> &str {
        match self {
            SourceSpec::Openapi(s) => &s.name,
            SourceSpec::Graphql(s) => &s.name,
            SourceSpec::Mcp(s) => &s.name,
        }
    }

    /// `openapi`, `graphql` or `mcp`.
    pub fn kind(&self) -> &'static str {
        match self {
            SourceSpec::Openapi(_) => "openapi",
            SourceSpec::Graphql(_) => "graphql",
            SourceSpec::Mcp(_) => "mcp",
        }
    }

    pub fn overrides(&self) -> &[OverrideSpec] {
        match self {
            SourceSpec::Openapi(s) => &s.overrides,
            SourceSpec::Graphql(s) => &s.overrides,
            SourceSpec::Mcp(s) => &s.overrides,
        }
    }

    pub fn overrides_mut(&mut self) -> &mut Vec<OverrideSpec> {
        match self {
            SourceSpec::Openapi(s) => &mut s.overrides,
            SourceSpec::Graphql(s) => &mut s.overrides,
            SourceSpec::Mcp(s) => &mut s.overrides,
        }
    }

    /// Whether `allow_private` is set.
    pub fn allow_private(&self) -> bool {
        match self {
            SourceSpec::Openapi(s) => s.allow_private,
            SourceSpec::Graphql(s) => s.allow_private,
            SourceSpec::Mcp(s) => s.allow_private,
        }
    }

    /// Checks everything that can be checked without reading files or the network.
    pub fn validate(&self) -> Result<(), SourcesError> {
        let name = self.name();
        validate_name(name)?;
        for o in self.overrides() {
            Pattern::parse(&o.pattern)
                .map_err(|e| SourcesError::invalid(name, format!("override: {e}")))?;
        }
        match self {
            SourceSpec::Openapi(s) => {
                if s.location.trim().is_empty() {
                    return Err(SourcesError::invalid(name, "'spec' is empty"));
                }
                if let Some(u) = &s.base_url {
                    check_http_url(name, "base_url", u)?;
                }
                if let Some(AuthSpec::Schemes { schemes }) = &s.auth {
                    if schemes.is_empty() {
                        return Err(SourcesError::invalid(
                            name,
                            "'auth.schemes' is empty: give credentials for at least one security scheme",
                        ));
                    }
                    for (scheme, creds) in schemes {
                        if scheme.trim().is_empty() {
                            return Err(SourcesError::invalid(
                                name,
                                "'auth.schemes' has an empty scheme name",
                            ));
                        }
                        creds.kind().map_err(|e| {
                            SourcesError::invalid(name, format!("auth.schemes.{scheme}: {e}"))
                        })?;
                        if let Some(u) = &creds.token_url {
                            check_http_url(name, &format!("auth.schemes.{scheme}.token_url"), u)?;
                        }
                    }
                }
                check_timeout(name, s.timeout_ms)?;
            }
            SourceSpec::Graphql(s) => {
                if s.sdl.is_some() && s.introspection.is_some() {
                    return Err(SourcesError::invalid(
                        name,
                        "give either 'sdl' or 'introspection', not both",
                    ));
                }
                check_http_url(name, "endpoint", &s.endpoint)?;
                if s.selection_depth == Some(0) {
                    return Err(SourcesError::invalid(
                        name,
                        "'selection_depth' must be at least 1",
                    ));
                }
                if matches!(s.auth, Some(AuthSpec::Schemes { .. })) {
                    return Err(SourcesError::invalid(
                        name,
                        "credentials per security scheme ('auth.schemes') apply to OpenAPI sources only; give one auth: bearer, api_key, basic or oauth2_client_credentials",
                    ));
                }
                check_timeout(name, s.timeout_ms)?;
            }
            SourceSpec::Mcp(s) => {
                match (&s.command, &s.url) {
                    (Some(_), Some(_)) => {
                        return Err(SourcesError::invalid(
                            name,
                            "give either 'command' (stdio) or 'url' (streamable HTTP), not both",
                        ))
                    }
                    (None, None) => {
                        return Err(SourcesError::invalid(
                            name,
                            "give 'command' (stdio) or 'url' (streamable HTTP)",
                        ))
                    }
                    (Some(c), None) if c.trim().is_empty() => {
                        return Err(SourcesError::invalid(name, "'command' is empty"))
                    }
                    (None, Some(u)) => check_http_url(name, "url", u)?,
                    _ => {}
                }
                if s.command.is_none() && (!s.args.is_empty() || !s.env.is_empty()) {
                    return Err(SourcesError::invalid(
                        name,
                        "'args' and 'env' only apply to a stdio 'command'",
                    ));
                }
                if s.url.is_none() && !s.headers.is_empty() {
                    return Err(SourcesError::invalid(
                        name,
                        "'headers' only apply to a 'url'",
                    ));
                }
                if let Some(o) = &s.oauth {
                    if s.url.is_none() {
                        return Err(SourcesError::invalid(
                            name,
                            "'oauth' only applies to a 'url'",
                        ));
                    }
                    o.check().map_err(|e| SourcesError::invalid(name, e))?;
                }
                check_timeout(name, s.connect_timeout_ms)?;
                check_timeout(name, s.call_timeout_ms)?;
            }
        }
        Ok(())
    }

    /// Every secret string of the spec, for sealing, opening and redacting.
    pub fn secrets_mut(&mut self) -> Vec<&mut String> {
        let mut out = Vec::new();
        match self {
            SourceSpec::Openapi(s) => {
                if let Some(a) = &mut s.auth {
                    out.extend(a.secrets_mut());
                }
            }
            SourceSpec::Graphql(s) => {
                out.extend(s.headers.values_mut());
                if let Some(a) = &mut s.auth {
                    out.extend(a.secrets_mut());
                }
            }
            SourceSpec::Mcp(s) => {
                out.extend(s.env.values_mut());
                out.extend(s.headers.values_mut());
                if let Some(o) = &mut s.oauth {
                    out.extend(o.client_secret.as_mut());
                    out.extend(o.private_key.as_mut());
                }
            }
        }
        out
    }

    /// A copy safe to show: literal and sealed secrets become `[REDACTED]`; `env:NAME`
    /// references stay (they name a variable, not a value).
    pub fn redacted(&self) -> SourceSpec {
        let mut copy = self.clone();
        for s in copy.secrets_mut() {
            if !is_env_ref(s) {
                *s = REDACTED.to_string();
            }
        }
        copy
    }

    /// Makes relative file paths (OpenAPI document, SDL, introspection, MCP `cwd`) absolute
    /// against `base`, so a stored spec works from any working directory.
    pub fn absolutize(&mut self, base: &Path) {
        let abs = |p: &mut String| {
            if let toolshed_core::Location::File(f) = toolshed_core::locate(p) {
                if Path::new(f).is_relative() {
                    *p = base.join(f).display().to_string();
                }
            }
        };
        match self {
            SourceSpec::Openapi(s) => abs(&mut s.location),
            SourceSpec::Graphql(s) => {
                if let Some(p) = &mut s.sdl {
                    abs(p);
                }
                if let Some(p) = &mut s.introspection {
                    abs(p);
                }
            }
            SourceSpec::Mcp(s) => {
                if let Some(c) = &mut s.cwd {
                    if c.is_relative() {
                        *c = base.join(&*c);
                    }
                }
            }
        }
    }
}

impl AuthSpec {
    fn secrets_mut(&mut self) -> Vec<&mut String> {
        match self {
            AuthSpec::Bearer { token } => vec![token],
            AuthSpec::ApiKey { value, .. } => vec![value],
            AuthSpec::Basic { password, .. } => vec![password],
            AuthSpec::Oauth2ClientCredentials { client_secret, .. } => vec![client_secret],
            AuthSpec::Oauth2User { client_secret, .. }
            | AuthSpec::TokenExchange { client_secret, .. } => client_secret.iter_mut().collect(),
            AuthSpec::Schemes { schemes } => schemes
                .values_mut()
                .flat_map(SchemeAuthSpec::secrets_mut)
                .collect(),
        }
    }
}

/// `env:NAME` or `${NAME}`: a reference to an environment variable (the one rule:
/// [`toolshed_outbound::secret::env_ref`]).
pub fn is_env_ref(s: &str) -> bool {
    toolshed_outbound::secret::env_ref(s).is_some()
}

/// A source name is one tool-path segment: lowercase letters, digits and `_`, and not a
/// namespace Toolshed uses itself ([`toolshed_core::path::RESERVED_NAMESPACES`]).
pub fn validate_name(name: &str) -> Result<(), SourcesError> {
    if toolshed_core::path::is_reserved_namespace(name) {
        return Err(SourcesError::invalid(
            name,
            format!(
                "'{name}' is a namespace Toolshed uses itself ({}); choose another name",
                toolshed_core::path::RESERVED_NAMESPACES.join(", ")
            ),
        ));
    }
    toolshed_core::ToolPath::join(name, "x")
        .ok()
        .filter(|p| p.segments().count() == 2)
        .map(|_| ())
        .ok_or_else(|| {
            SourcesError::invalid(
                name,
                "the name must be one path segment: lowercase letters, digits and '_'",
            )
        })
}

fn check_http_url(name: &str, field: &str, url: &str) -> Result<(), SourcesError> {
    let ok = toolshed_core::is_url(url)
        && url.split("://").nth(1).is_some_and(|rest| {
            !rest.is_empty() && !rest.starts_with('/') && !rest.starts_with(':')
        });
    if ok {
        Ok(())
    } else {
        Err(SourcesError::invalid(
            name,
            format!("'{field}' must be an http(s) URL with a host, got '{url}'"),
        ))
    }
}

fn check_timeout(name: &str, ms: Option<u64>) -> Result<(), SourcesError> {
    if ms == Some(0) {
        return Err(SourcesError::invalid(
            name,
            "timeouts must be greater than zero",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openapi(name: &str) -> SourceSpec {
        SourceSpec::Openapi(OpenApiSpec {
            name: name.into(),
            location: "a.json".into(),
            ..Default::default()
        })
    }

    #[test]
    fn tagged_by_kind_in_toml_and_json() {
        let s: SourceSpec = serde_json::from_value(serde_json::json!({
            "kind": "mcp", "name": "mem", "command": "npx", "args": ["-y", "x"],
            "overrides": [{"pattern": "mem.*", "read_only": true}]
        }))
        .unwrap();
        assert_eq!(s.kind(), "mcp");
        assert_eq!(s.name(), "mem");
        assert_eq!(s.overrides()[0].read_only, Some(true));
        let back = serde_json::to_value(&s).unwrap();
        assert_eq!(back["kind"], "mcp");
        let bad = serde_json::from_value::<SourceSpec>(serde_json::json!({
            "kind": "openapi", "name": "x", "spec": "a", "colour": "blue"
        }));
        assert!(bad.unwrap_err().to_string().contains("colour"));
    }

    #[test]
    fn an_mcp_sources_oauth_is_read_and_checked_with_the_field_named() {
        let spec = |oauth: serde_json::Value| -> McpSpec {
            serde_json::from_value(serde_json::json!({
                "name": "tracker", "url": "https://mcp.example.com/mcp", "oauth": oauth
            }))
            .unwrap()
        };
        std::env::set_var("TRACKER_TEST_SECRET", "s3cret");
        let ok = spec(serde_json::json!({
            "grant": "client_credentials", "client_id": "toolshed",
            "client_secret": "env:TRACKER_TEST_SECRET", "scopes": ["issues:read"]
        }));
        let cfg = crate::load::upstream_config(&ok).unwrap();
        assert!(cfg.oauth.is_some());
        assert!(
            !format!("{cfg:?}").contains("s3cret"),
            "the secret stays out of Debug"
        );
        let missing = spec(serde_json::json!({"grant": "client_credentials"}));
        let e = crate::load::upstream_config(&missing)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tracker") && e.contains("oauth.client_id"),
            "{e}"
        );
        let unknown = serde_json::from_value::<McpSpec>(serde_json::json!({
            "name": "t", "url": "https://x/mcp", "oauth": {"grant": "password"}
        }));
        assert!(unknown.unwrap_err().to_string().contains("password"));
    }

    #[test]
    fn an_mcp_sources_oauth_issuer_pin_is_carried_and_checked() {
        let spec = |issuer: &str| -> McpSpec {
            serde_json::from_value(serde_json::json!({
                "name": "tracker", "url": "https://mcp.example.com/mcp",
                "oauth": {"grant": "authorization_code", "client_id": "toolshed", "issuer": issuer}
            }))
            .unwrap()
        };
        let cfg = crate::load::upstream_config(&spec("https://login.example.com")).unwrap();
        let oauth = cfg.oauth.expect("oauth");
        assert_eq!(oauth.issuer.as_deref(), Some("https://login.example.com"));
        let e = crate::load::upstream_config(&spec("http://login.example.com"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("tracker") && e.contains("oauth.issuer"), "{e}");
    }

    #[test]
    fn names_are_one_segment() {
        assert!(openapi("pets_2").validate().is_ok());
        for reserved in toolshed_core::path::RESERVED_NAMESPACES {
            let e = openapi(reserved).validate().unwrap_err().to_string();
            assert!(e.contains("uses itself") && e.contains(reserved), "{e}");
        }
        for bad in ["", "Pets", "a.b", "a-b", "a b"] {
            let e = openapi(bad).validate().unwrap_err();
            assert!(e.to_string().contains("one path segment"), "{bad}: {e}");
        }
    }

    #[test]
    fn conflicting_fields_are_refused() {
        let mcp = SourceSpec::Mcp(McpSpec {
            name: "m".into(),
            command: Some("x".into()),
            url: Some("http://h/mcp".into()),
            ..Default::default()
        });
        assert!(mcp.validate().unwrap_err().to_string().contains("not both"));
        let mcp = SourceSpec::Mcp(McpSpec {
            name: "m".into(),
            ..Default::default()
        });
        assert!(mcp.validate().is_err());
        let gql = SourceSpec::Graphql(GraphqlSpec {
            name: "g".into(),
            endpoint: "ftp://x".into(),
            ..Default::default()
        });
        assert!(gql.validate().unwrap_err().to_string().contains("endpoint"));
        let mut o = openapi("p");
        o.overrides_mut().push(OverrideSpec {
            pattern: "P.*".into(),
            ..Default::default()
        });
        assert!(o.validate().unwrap_err().to_string().contains("override"));
    }

    #[test]
    fn redaction_keeps_env_references() {
        let s = SourceSpec::Graphql(GraphqlSpec {
            name: "g".into(),
            endpoint: "https://g.example.com/graphql".into(),
            headers: [("X-A".to_string(), "literal-secret".to_string())].into(),
            auth: Some(AuthSpec::Bearer {
                token: "env:G_TOKEN".into(),
            }),
            ..Default::default()
        });
        let text = serde_json::to_string(&s.redacted()).unwrap();
        assert!(!text.contains("literal-secret"), "{text}");
        assert!(
            text.contains(REDACTED) && text.contains("env:G_TOKEN"),
            "{text}"
        );
    }

    #[test]
    fn an_mcp_sources_oauth_secrets_are_redacted() {
        let s: SourceSpec = serde_json::from_value(serde_json::json!({
            "kind": "mcp", "name": "t", "url": "https://t.example.com/mcp",
            "oauth": {"client_id": "c", "client_secret": "literal-oauth-secret",
                      "private_key": "-----BEGIN PRIVATE KEY-----literal"}
        }))
        .unwrap();
        let text = serde_json::to_string(&s.redacted()).unwrap();
        assert!(!text.contains("literal"), "{text}");
        assert!(text.contains(REDACTED), "{text}");
    }

    #[test]
    fn relative_paths_become_absolute() {
        let mut s = openapi("p");
        s.absolutize(Path::new("/base"));
        let SourceSpec::Openapi(o) = &s else {
            unreachable!()
        };
        assert_eq!(o.location, "/base/a.json");
        let mut u = SourceSpec::Openapi(OpenApiSpec {
            name: "p".into(),
            location: "https://x/spec.json".into(),
            ..Default::default()
        });
        u.absolutize(Path::new("/base"));
        assert!(matches!(&u, SourceSpec::Openapi(o) if o.location == "https://x/spec.json"));
    }
}
