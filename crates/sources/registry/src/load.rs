//! Loading one source: import its tools, apply its overrides, and (for MCP) keep the session.
//!
//! [`load`] turns a [`SourceSpec`] into tools through the source crates (`toolshed-openapi`,
//! `toolshed-graphql`, `toolshed-mcp-source`); [`dry_run`] does the same and only reports what
//! it would create.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use toolshed_core::{Pattern, Tool};
use toolshed_graphql::{GraphqlOptions, SchemaInput};
use toolshed_mcp_source::{Transport, Upstream, UpstreamConfig};
pub use toolshed_openapi::import::ImportProgress;
use toolshed_openapi::{ImportOptions, SchemeCredentials};
use toolshed_outbound::{
    ApiKeyLocation, AuthConfig, Outbound, OutboundConfig, Secret, TokenExchange, UserOAuth,
};

use crate::error::SourcesError;
use crate::secrets::resolve;
use crate::spec::{
    is_env_ref, AuthSpec, GraphqlSpec, KeyLocation, McpSpec, OpenApiSpec, OverrideSpec,
    SchemeAuthKind, SchemeAuthSpec, SourceSpec,
};

/// Default time one outbound request of an OpenAPI or GraphQL source may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A loaded source: its tools (overrides applied), warnings, and the MCP session if any.
pub struct LoadedSource {
    pub tools: Vec<Tool>,
    pub warnings: Vec<String>,
    /// Kept alive while the source is served; its change counter triggers re-listing.
    pub upstream: Option<Upstream>,
    /// The per-user connection its calls use ([`user_connection`]), and whether its provider
    /// may be on a private address.
    pub connection: Option<(AuthConfig, bool)>,
}

impl std::fmt::Debug for LoadedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedSource")
            .field("tools", &self.tools.len())
            .field("warnings", &self.warnings)
            .field("upstream", &self.upstream.is_some())
            .finish()
    }
}

/// One tool as a dry run shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolSummary {
    pub path: String,
    pub name: String,
    pub destructive: bool,
    pub read_only: bool,
}

/// What a source would create.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub tools: Vec<ToolSummary>,
    pub warnings: Vec<String>,
}

impl Report {
    pub fn from_tools(tools: &[Tool], warnings: Vec<String>) -> Self {
        Self {
            tools: tools
                .iter()
                .map(|t| ToolSummary {
                    path: t.def.path.to_string(),
                    name: t.def.name.clone(),
                    destructive: t.def.annotations.destructive,
                    read_only: t.def.annotations.read_only,
                })
                .collect(),
            warnings,
        }
    }
}

/// Imports a source without keeping it: every tool it would create and every warning.
pub async fn dry_run(
    spec: &SourceSpec,
    progress: Option<ImportProgress>,
) -> Result<Report, SourcesError> {
    let loaded = load(spec, progress).await?;
    if let Some(up) = &loaded.upstream {
        up.shutdown().await;
    }
    Ok(Report::from_tools(&loaded.tools, loaded.warnings))
}

/// Imports a source's tools and applies its overrides.
pub async fn load(
    spec: &SourceSpec,
    progress: Option<ImportProgress>,
) -> Result<LoadedSource, SourcesError> {
    load_with(spec, progress, &McpContext::default()).await
}

/// What the registry gives the upstream MCP servers it loads.
#[derive(Debug, Clone, Default)]
pub struct McpContext {
    /// Where they publish their log messages and changed resources.
    pub notices: Option<toolshed_core::notices::Notices>,
    /// Where an authorization-code grant without an agent waits for a person (Toolshed's
    /// callback completes it).
    pub person: Option<std::sync::Arc<toolshed_mcp_source::person::PersonGrants>>,
}

/// [`load`], with upstream MCP servers given `mcp`.
pub async fn load_with(
    spec: &SourceSpec,
    progress: Option<ImportProgress>,
    mcp: &McpContext,
) -> Result<LoadedSource, SourcesError> {
    spec.validate()?;
    let mut loaded = match spec {
        SourceSpec::Openapi(s) => load_openapi(s, progress.clone()).await?,
        SourceSpec::Graphql(s) => load_graphql(s).await?,
        SourceSpec::Mcp(s) => load_mcp(s, mcp).await?,
    };
    if !matches!(spec, SourceSpec::Openapi(_)) {
        if let Some(p) = &progress {
            p(loaded.tools.len(), loaded.tools.len());
        }
    }
    let (tools, warnings) = apply_overrides(spec.name(), loaded.tools, spec.overrides())?;
    loaded.tools = tools;
    loaded.warnings.extend(warnings);
    Ok(loaded)
}

/// Applies overrides in order: a later matching override wins for the fields it sets.
/// `read_only = true` alone also clears `destructive`, and `destructive = true` alone clears
/// `read_only`. Tools outside the namespace are dropped with a warning; overrides matching no
/// tool are warned about.
pub fn apply_overrides(
    name: &str,
    tools: Vec<Tool>,
    overrides: &[OverrideSpec],
) -> Result<(Vec<Tool>, Vec<String>), SourcesError> {
    let compiled: Vec<(Pattern, &OverrideSpec)> = overrides
        .iter()
        .map(|o| {
            Pattern::parse(&o.pattern)
                .map(|p| (p, o))
                .map_err(|e| SourcesError::invalid(name, format!("override: {e}")))
        })
        .collect::<Result<_, _>>()?;
    let mut used = vec![false; compiled.len()];
    let mut warnings = Vec::new();
    let mut out = Vec::with_capacity(tools.len());
    let origin = format!("source:{name}");
    for mut tool in tools {
        if tool.def.path.namespace() != name {
            warnings.push(format!(
                "tool '{}' is outside the namespace '{name}' and was dropped",
                tool.def.path
            ));
            continue;
        }
        if tool.def.origin.is_empty() {
            tool.def.origin = origin.clone();
        }
        let mut hidden = false;
        for (i, (pattern, o)) in compiled.iter().enumerate() {
            if !pattern.matches(tool.def.path.as_str()) {
                continue;
            }
            used[i] = true;
            let a = &mut tool.def.annotations;
            match (o.destructive, o.read_only) {
                (Some(d), Some(r)) => {
                    a.destructive = d;
                    a.read_only = r;
                }
                (Some(d), None) => {
                    a.destructive = d;
                    if d {
                        a.read_only = false;
                    }
                }
                (None, Some(r)) => {
                    a.read_only = r;
                    if r {
                        a.destructive = false;
                    }
                }
                (None, None) => {}
            }
            hidden |= o.hidden;
        }
        if !hidden {
            out.push(tool);
        }
    }
    for (i, (_, o)) in compiled.iter().enumerate() {
        if !used[i] {
            warnings.push(format!(
                "override pattern '{}' matched no tool of '{name}'",
                o.pattern
            ));
        }
    }
    Ok((out, warnings))
}

fn timeout(ms: Option<u64>) -> Duration {
    ms.map(Duration::from_millis).unwrap_or(DEFAULT_TIMEOUT)
}

/// The `toolshed-outbound` auth of a spec, secrets resolved. Per-scheme credentials are not
/// one auth: see [`scheme_credentials`].
pub fn auth_config(name: &str, auth: &AuthSpec) -> Result<AuthConfig, SourcesError> {
    let secret = |v: &str| resolve(name, v).map(Secret::new);
    Ok(match auth {
        AuthSpec::Bearer { token } => AuthConfig::Bearer {
            token: secret(token)?,
        },
        AuthSpec::ApiKey {
            name: key,
            value,
            location,
        } => AuthConfig::ApiKey {
            location: match location {
                KeyLocation::Header => ApiKeyLocation::Header,
                KeyLocation::Query => ApiKeyLocation::Query,
                KeyLocation::Cookie => ApiKeyLocation::Cookie,
            },
            name: key.clone(),
            value: secret(value)?,
        },
        AuthSpec::Basic { username, password } => AuthConfig::Basic {
            username: username.clone(),
            password: secret(password)?,
        },
        AuthSpec::Oauth2ClientCredentials {
            token_url,
            client_id,
            client_secret,
            scopes,
            audience,
        } => AuthConfig::OAuth2ClientCredentials {
            token_url: token_url.clone(),
            client_id: client_id.clone(),
            client_secret: secret(client_secret)?,
            scopes: scopes.clone(),
            audience: audience.clone(),
        },
        AuthSpec::Oauth2User {
            authorization_url,
            token_url,
            client_id,
            client_secret,
            scopes,
            resource,
        } => AuthConfig::OAuth2User(UserOAuth {
            connection: name.to_string(),
            authorization_url: authorization_url.clone(),
            token_url: token_url.clone(),
            client_id: client_id.clone(),
            client_secret: client_secret.as_deref().map(secret).transpose()?,
            scopes: scopes.clone(),
            resource: resource.clone(),
        }),
        AuthSpec::TokenExchange {
            token_url,
            client_id,
            client_secret,
            audience,
            resource,
            scopes,
        } => AuthConfig::TokenExchange(TokenExchange {
            connection: name.to_string(),
            token_url: token_url.clone(),
            client_id: client_id.clone(),
            client_secret: client_secret.as_deref().map(secret).transpose()?,
            audience: audience.clone(),
            resource: resource.clone(),
            scopes: scopes.clone(),
        }),
        AuthSpec::Schemes { .. } => {
            return Err(SourcesError::invalid(
                name,
                "credentials per security scheme ('auth.schemes') apply to OpenAPI sources only",
            ))
        }
    })
}

/// The `toolshed-openapi` credentials per security scheme, secrets resolved.
pub fn scheme_credentials(
    name: &str,
    schemes: &BTreeMap<String, SchemeAuthSpec>,
) -> Result<BTreeMap<String, SchemeCredentials>, SourcesError> {
    let secret =
        |v: &Option<String>| resolve(name, v.as_deref().unwrap_or_default()).map(Secret::new);
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    schemes
        .iter()
        .map(|(scheme, c)| {
            let kind = c
                .kind()
                .map_err(|e| SourcesError::invalid(name, format!("auth.schemes.{scheme}: {e}")))?;
            let creds = match kind {
                SchemeAuthKind::ApiKey => SchemeCredentials::ApiKey {
                    value: secret(&c.value)?,
                },
                SchemeAuthKind::Bearer => SchemeCredentials::Bearer {
                    token: secret(&c.token)?,
                },
                SchemeAuthKind::Basic => SchemeCredentials::Basic {
                    username: text(&c.username),
                    password: secret(&c.password)?,
                },
                SchemeAuthKind::OAuth2ClientCredentials => {
                    SchemeCredentials::OAuth2ClientCredentials {
                        client_id: text(&c.client_id),
                        client_secret: secret(&c.client_secret)?,
                        token_url: c.token_url.clone(),
                        scopes: c.scopes.clone(),
                        audience: c.audience.clone(),
                    }
                }
            };
            Ok((scheme.clone(), creds))
        })
        .collect()
}

/// The source's guarded client (its timeout and address rule) and its document.
async fn openapi_document(s: &OpenApiSpec) -> Result<(Outbound, serde_json::Value), SourcesError> {
    let outbound = Outbound::new(OutboundConfig {
        timeout: timeout(s.timeout_ms),
        allow_private: s.allow_private,
        ..OutboundConfig::default()
    })
    .map_err(|e| SourcesError::import(&s.name, e))?;
    let doc = toolshed_openapi::load_document(&s.location, &outbound)
        .await
        .map_err(|e| SourcesError::import(&s.name, e))?;
    Ok((outbound, doc))
}

/// The per-user connection an OpenAPI source declares (`oauth2_user` or `token_exchange`),
/// secrets resolved, read when the source loads. An `oauth2_user` connection without
/// `authorization_url` or `token_url` takes them (and, without `scopes`, the scopes) from the
/// document's `oauth2` `authorizationCode` flow; the client secret goes to a token URL from the
/// document only on the host the operator trusts (the `base_url`'s, or the document URL's), as
/// for per-scheme credentials.
pub fn user_connection(
    s: &OpenApiSpec,
    doc: &serde_json::Value,
) -> Result<Option<AuthConfig>, SourcesError> {
    let name = s.name.as_str();
    let config = match &s.auth {
        Some(a @ (AuthSpec::Oauth2User { .. } | AuthSpec::TokenExchange { .. })) => {
            auth_config(name, a)?
        }
        _ => return Ok(None),
    };
    let AuthConfig::OAuth2User(mut user) = config else {
        return Ok(Some(config));
    };
    if !user.authorization_url.is_empty() && !user.token_url.is_empty() {
        return Ok(Some(AuthConfig::OAuth2User(user)));
    }
    let flow = authorization_code_flow(doc).ok_or_else(|| {
        SourcesError::invalid(
            name,
            "auth 'oauth2_user': the document declares no oauth2 authorizationCode flow; give authorization_url and token_url",
        )
    })?;
    if user.token_url.is_empty() {
        let trusted = [s.base_url.as_deref(), Some(s.location.as_str())]
            .into_iter()
            .flatten()
            .filter_map(|u| url::Url::parse(u).ok())
            .filter_map(|u| u.host_str().map(str::to_string))
            .collect::<Vec<_>>();
        let host = url::Url::parse(&flow.1)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string));
        let trusted_host = host.as_ref().is_some_and(|h| trusted.contains(h));
        if user.client_secret.is_some() && !trusted_host {
            return Err(SourcesError::invalid(
                name,
                format!(
                    "auth 'oauth2_user': the document's tokenUrl {} is not on the API's host ({}): set token_url to send the client secret there",
                    flow.1,
                    trusted.join(", ")
                ),
            ));
        }
        user.token_url = flow.1;
    }
    if user.authorization_url.is_empty() {
        user.authorization_url = flow.0;
    }
    if user.scopes.is_empty() {
        user.scopes = flow.2;
    }
    Ok(Some(AuthConfig::OAuth2User(user)))
}

/// The first `oauth2` authorization-code flow of a document: authorization URL, token URL and
/// scope names (3.x `flows.authorizationCode`, 2.0 `flow: accessCode`). Both URLs must be
/// absolute.
fn authorization_code_flow(doc: &serde_json::Value) -> Option<(String, String, Vec<String>)> {
    let schemes = doc
        .pointer("/components/securitySchemes")
        .or_else(|| doc.get("securityDefinitions"))?
        .as_object()?;
    schemes.values().find_map(|scheme| {
        if scheme.get("type")?.as_str()? != "oauth2" {
            return None;
        }
        let flow = match scheme.pointer("/flows/authorizationCode") {
            Some(f) => f,
            None if scheme.get("flow")?.as_str()? == "accessCode" => scheme,
            None => return None,
        };
        let absolute = |k: &str| {
            flow.get(k)?
                .as_str()
                .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
                .map(str::to_string)
        };
        let scopes = flow
            .get("scopes")
            .and_then(serde_json::Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        Some((absolute("authorizationUrl")?, absolute("tokenUrl")?, scopes))
    })
}

async fn load_openapi(
    s: &OpenApiSpec,
    progress: Option<ImportProgress>,
) -> Result<LoadedSource, SourcesError> {
    let name = s.name.as_str();
    let (auth, schemes) = match &s.auth {
        Some(AuthSpec::Schemes { schemes }) => {
            (AuthConfig::None, scheme_credentials(name, schemes)?)
        }
        Some(a) => (auth_config(name, a)?, BTreeMap::new()),
        None => (AuthConfig::None, BTreeMap::new()),
    };
    let (outbound, doc) = openapi_document(s).await?;
    let connection = user_connection(s, &doc)?.map(|auth| (auth, s.allow_private));
    let (is_remote, base_dir) = match toolshed_core::locate(&s.location) {
        toolshed_core::Location::Url(_) => (true, None),
        toolshed_core::Location::File(f) => (false, Path::new(f).parent().map(Path::to_path_buf)),
    };
    let opts = ImportOptions {
        namespace: name.to_string(),
        base_url: s.base_url.clone(),
        spec_url: is_remote.then(|| s.location.clone()),
        auth,
        scheme_credentials: schemes,
        outbound: Some(outbound),
        base_dir,
        progress,
        resources: s.resources.clone(),
    };
    let mut loaded = import_openapi_blocking(name, doc, opts).await?;
    loaded.connection = connection;
    Ok(loaded)
}

/// Runs the (CPU-bound) OpenAPI import of `doc` off the async workers; skipped operations
/// become warnings.
pub async fn import_openapi_blocking(
    name: &str,
    doc: serde_json::Value,
    opts: ImportOptions,
) -> Result<LoadedSource, SourcesError> {
    let imported = tokio::task::spawn_blocking(move || toolshed_openapi::import(&doc, &opts))
        .await
        .map_err(|e| SourcesError::import(name, format!("import task failed: {e}")))?
        .map_err(|e| SourcesError::import(name, e))?;
    let mut warnings = imported.warnings;
    warnings.extend(
        imported
            .skipped
            .into_iter()
            .map(|(op, why)| format!("skipped {op}: {why}")),
    );
    Ok(LoadedSource {
        tools: imported.tools,
        warnings,
        upstream: None,
        connection: None,
    })
}

async fn load_graphql(s: &GraphqlSpec) -> Result<LoadedSource, SourcesError> {
    let name = s.name.as_str();
    let mut opts = GraphqlOptions::new(name, s.endpoint.clone());
    opts.resources = s.resources.clone();
    opts.allow_private = s.allow_private;
    opts.timeout = timeout(s.timeout_ms);
    if let Some(d) = s.selection_depth {
        opts.selection_depth = d;
    }
    for (k, v) in &s.headers {
        let value = resolve(name, v)?;
        // A value kept in the environment is a secret whatever the header is called.
        if is_env_ref(v) {
            opts.secrets.push(value.clone());
        }
        opts.headers.push((k.clone(), value));
    }
    opts.auth = match &s.auth {
        None => AuthConfig::None,
        Some(AuthSpec::Oauth2User { .. } | AuthSpec::TokenExchange { .. }) => {
            return Err(SourcesError::invalid(
                name,
                "the caller's own credentials ('oauth2_user', 'token_exchange') apply to OpenAPI sources only",
            ))
        }
        Some(a) => auth_config(name, a)?,
    };
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map_err(|e| SourcesError::import(name, format!("cannot read {path}: {e}")))
    };
    let input = if let Some(p) = &s.sdl {
        SchemaInput::Sdl(read(p)?)
    } else if let Some(p) = &s.introspection {
        let json = serde_json::from_str(&read(p)?)
            .map_err(|e| SourcesError::import(name, format!("{p} is not JSON: {e}")))?;
        SchemaInput::IntrospectionJson(json)
    } else {
        SchemaInput::Endpoint {
            url: s.endpoint.clone(),
        }
    };
    let imported = toolshed_graphql::import(input, &opts)
        .await
        .map_err(|e| SourcesError::import(name, e))?;
    Ok(LoadedSource {
        tools: imported.tools,
        warnings: imported.warnings,
        upstream: None,
        connection: None,
    })
}

/// The `toolshed-mcp-source` configuration of a spec, secrets resolved.
///
/// Values given as `env:NAME` become [`UpstreamConfig::secrets`] (blanked out of results);
/// values of credential-named variables and headers are blanked out by the upstream itself.
pub fn upstream_config(s: &McpSpec) -> Result<UpstreamConfig, SourcesError> {
    let name = s.name.as_str();
    let mut secrets = Vec::new();
    let mut resolve_all = |pairs: &BTreeMap<String, String>| {
        pairs
            .iter()
            .map(|(k, v)| {
                let value = resolve(name, v)?;
                if is_env_ref(v) {
                    secrets.push(value.clone());
                }
                Ok((k.clone(), value))
            })
            .collect::<Result<Vec<_>, SourcesError>>()
    };
    let transport = match (&s.command, &s.url) {
        (Some(command), _) => Transport::Stdio {
            command: command.clone(),
            args: s.args.clone(),
            env: resolve_all(&s.env)?,
            cwd: s.cwd.clone(),
        },
        (None, Some(url)) => Transport::Http {
            url: url.clone(),
            headers: resolve_all(&s.headers)?,
        },
        (None, None) => {
            return Err(SourcesError::invalid(
                name,
                "give 'command' (stdio) or 'url' (streamable HTTP)",
            ))
        }
    };
    let mut cfg = UpstreamConfig::new(name, transport)
        .with_allow_private(s.allow_private)
        .with_secrets(secrets);
    if let Some(ms) = s.connect_timeout_ms {
        cfg = cfg.with_connect_timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = s.call_timeout_ms {
        cfg = cfg.with_call_timeout(Duration::from_millis(ms));
    }
    if let Some(o) = &s.oauth {
        let oauth = o
            .resolve(s.allow_private)
            .map_err(|e| SourcesError::invalid(name, e))?;
        cfg = cfg.with_oauth(oauth);
    }
    Ok(cfg)
}

async fn load_mcp(s: &McpSpec, mcp: &McpContext) -> Result<LoadedSource, SourcesError> {
    let name = s.name.as_str();
    let mut cfg = upstream_config(s)?;
    cfg.notices = mcp.notices.clone();
    if let (Some(person), Some(spec)) = (&mcp.person, &s.oauth) {
        // Only an authorization code that no agent completes waits for a person: the others
        // keep their redirect URI.
        let keep_redirect_uri = spec.redirect_uri.is_some();
        cfg.oauth = cfg.oauth.take().map(|o| {
            if o.grant == toolshed_mcp_source::OAuthGrant::AuthorizationCode && o.agent.is_none() {
                o.with_person(person.clone(), keep_redirect_uri)
            } else {
                o
            }
        });
    }
    let upstream = Upstream::connect(cfg)
        .await
        .map_err(|e| SourcesError::import(name, e))?;
    match upstream.entries().await {
        Ok(tools) => Ok(LoadedSource {
            tools,
            warnings: Vec::new(),
            upstream: Some(upstream),
            connection: None,
        }),
        Err(e) => {
            upstream.shutdown().await;
            Err(SourcesError::import(name, e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's authorization-code flow (3.x and 2.0); none when it has none or its
    /// URLs are relative.
    #[test]
    fn the_authorization_code_flow_of_a_document() {
        let v3 = serde_json::json!({"components": {"securitySchemes": {
            "key": {"type": "apiKey", "in": "header", "name": "k"},
            "oauth": {"type": "oauth2", "flows": {"authorizationCode": {
                "authorizationUrl": "https://id.example/auth", "tokenUrl": "https://id.example/token",
                "scopes": {"read": "", "write": ""}}}}}}});
        assert_eq!(
            authorization_code_flow(&v3),
            Some((
                "https://id.example/auth".into(),
                "https://id.example/token".into(),
                vec!["read".into(), "write".into()]
            ))
        );
        let v2 = serde_json::json!({"securityDefinitions": {"o": {"type": "oauth2", "flow": "accessCode",
            "authorizationUrl": "https://a/x", "tokenUrl": "https://a/t", "scopes": {}}}});
        assert_eq!(authorization_code_flow(&v2).unwrap().1, "https://a/t");
        let relative = serde_json::json!({"components": {"securitySchemes": {"o": {"type": "oauth2",
            "flows": {"authorizationCode": {"authorizationUrl": "/auth", "tokenUrl": "/token"}}}}}});
        assert_eq!(authorization_code_flow(&relative), None);
        let cc = serde_json::json!({"components": {"securitySchemes": {"o": {"type": "oauth2",
            "flows": {"clientCredentials": {"tokenUrl": "https://a/t"}}}}}});
        assert_eq!(authorization_code_flow(&cc), None);
    }
    use toolshed_core::{Annotations, ToolDef, ToolError, ToolPath};

    fn tool(path: &str, a: Annotations) -> Tool {
        let def = ToolDef::new(ToolPath::parse(path).unwrap(), "T", "d").with_annotations(a);
        Tool::from_fn(def, |_c, _a| async {
            Err::<serde_json::Value, _>(ToolError::internal("unused"))
        })
    }

    fn ov(pattern: &str, d: Option<bool>, r: Option<bool>, hidden: bool) -> OverrideSpec {
        OverrideSpec {
            pattern: pattern.into(),
            destructive: d,
            read_only: r,
            hidden,
        }
    }

    #[test]
    fn overrides_mark_and_hide_by_pattern() {
        let tools = vec![
            tool("p.pet.add", Annotations::DESTRUCTIVE),
            tool("p.pet.find", Annotations::DESTRUCTIVE),
            tool("p.store.get", Annotations::READ_ONLY),
            tool("p.user.delete", Annotations::WRITE),
            tool("other.x", Annotations::WRITE),
        ];
        let (out, warnings) = apply_overrides(
            "p",
            tools,
            &[
                ov("p.pet.find", None, Some(true), false),
                ov("p.store.*", None, None, true),
                ov("p.user.*", Some(true), None, false),
                ov("p.nothing.*", Some(true), None, false),
            ],
        )
        .unwrap();
        let get = |p: &str| out.iter().find(|t| t.def.path.as_str() == p);
        assert!(get("p.store.get").is_none(), "hidden");
        assert!(get("other.x").is_none(), "outside the namespace");
        let find = get("p.pet.find").unwrap().def.annotations;
        assert!(find.read_only && !find.destructive);
        assert!(get("p.user.delete").unwrap().def.annotations.destructive);
        assert!(get("p.pet.add").unwrap().def.annotations.destructive);
        assert_eq!(get("p.pet.add").unwrap().def.origin, "source:p");
        assert!(warnings.iter().any(|w| w.contains("other.x")));
        assert!(warnings.iter().any(|w| w.contains("p.nothing.*")));
    }

    #[test]
    fn bad_override_patterns_are_errors() {
        let e = apply_overrides("p", vec![], &[ov("P..x", None, None, true)]).unwrap_err();
        assert!(e.to_string().contains("override"), "{e}");
    }

    #[test]
    fn auth_specs_resolve_secrets() {
        let a = auth_config(
            "p",
            &AuthSpec::ApiKey {
                name: "X-Key".into(),
                value: "k1".into(),
                location: KeyLocation::Header,
            },
        )
        .unwrap();
        assert_eq!(a.secrets(), vec!["k1"]);
        let e = auth_config(
            "p",
            &AuthSpec::Bearer {
                token: "env:TOOLSHED_SOURCES_TEST_NOPE".into(),
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("TOOLSHED_SOURCES_TEST_NOPE"));
    }
}
