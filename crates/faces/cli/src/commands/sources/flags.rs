//! The flags of `toolshed sources add` and how they become a source specification (auth
//! forms, scheme credentials, overrides, endpoints), with the mistakes they refuse.

use super::*;

#[derive(Subcommand)]
pub enum AddKind {
    /// An OpenAPI 2.0 / 3.0 / 3.1 document (JSON or YAML).
    Openapi {
        name: String,
        /// File path or http(s) URL of the document.
        #[arg(long)]
        spec: String,
        /// Replaces the document's servers.
        #[arg(long)]
        base_url: Option<String>,
        #[command(flatten)]
        auth: AuthArgs,
        /// Credentials for one security scheme of the document, by its name: `SCHEME:FIELD=VALUE`
        /// (repeat for more fields and schemes). Fields: `value` (apiKey), `token` (http bearer),
        /// `username` + `password` (http basic), `client_id` + `client_secret` (oauth2 client
        /// credentials, optional `token_url`, `scopes` comma-separated, `audience`). Secret
        /// fields accept `env:VAR`. Instead of the single-auth flags.
        #[arg(long = "scheme", value_name = "SCHEME:FIELD=VALUE")]
        schemes: Vec<String>,
        /// Time one request may take.
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// Also serve the GET operations whose tool paths match this dot-glob as MCP resources
        /// (repeatable).
        #[arg(long = "resource", value_name = "GLOB")]
        resources: Vec<String>,
        #[command(flatten)]
        common: CommonAdd,
    },
    /// A GraphQL API: schema from SDL, an introspection file, or the live endpoint.
    Graphql {
        name: String,
        /// Schema definition language file.
        #[arg(long, conflicts_with = "introspection")]
        sdl: Option<PathBuf>,
        /// Introspection result file (JSON).
        #[arg(long)]
        introspection: Option<PathBuf>,
        /// Where calls go (and what is introspected without --sdl/--introspection).
        #[arg(long)]
        endpoint: Option<String>,
        #[command(flatten)]
        auth: AuthArgs,
        /// Extra header on every request (`env:VAR` allowed in the value).
        #[arg(long = "header", value_name = "NAME=VALUE")]
        headers: Vec<String>,
        #[arg(long)]
        selection_depth: Option<usize>,
        /// Time one request may take (introspection included).
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// Also serve the queries whose tool paths match this dot-glob as MCP resources
        /// (repeatable).
        #[arg(long = "resource", value_name = "GLOB")]
        resources: Vec<String>,
        #[command(flatten)]
        common: CommonAdd,
    },
    /// An upstream MCP server: a stdio command or a streamable HTTP URL.
    Mcp {
        name: String,
        /// The server command (stdio).
        #[arg(long, conflicts_with = "url", required_unless_present = "url")]
        command: Option<String>,
        /// One argument of the command (repeat for more).
        #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
        args: Vec<String>,
        /// Extra environment of the command (`env:VAR` allowed in the value).
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// Working directory of the command.
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// The streamable HTTP endpoint.
        #[arg(long)]
        url: Option<String>,
        /// Extra HTTP header (`env:VAR` allowed in the value).
        #[arg(long = "header", value_name = "NAME=VALUE")]
        headers: Vec<String>,
        /// Time to start (or reach) the server and complete the MCP handshake.
        #[arg(long, value_name = "MS")]
        connect_timeout_ms: Option<u64>,
        /// Time one tool call may take.
        #[arg(long, value_name = "MS")]
        call_timeout_ms: Option<u64>,
        #[command(flatten)]
        oauth: McpOAuthArgs,
        #[command(flatten)]
        common: CommonAdd,
    },
}

/// How Toolshed gets a token from an upstream MCP server's authorization server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum McpGrant {
    /// The authorization code with PKCE: a person approves at the link `toolshed serve` prints
    /// (and logs), or, with --oauth-headless, a server that approves at once.
    AuthorizationCode,
    /// A pre-registered client with --oauth-client-secret or --oauth-private-key.
    ClientCredentials,
}

/// OAuth for a streamable HTTP upstream that answers `401` (the MCP authorization spec). Secret
/// values accept `env:VAR`; literal ones are sealed in the store.
#[derive(Args, Default)]
pub struct McpOAuthArgs {
    /// The grant; the other --oauth-* flags need it.
    #[arg(long, value_name = "GRANT")]
    oauth: Option<McpGrant>,
    /// A pre-registered client (without one, the authorization code registers dynamically or
    /// uses --oauth-client-metadata-url).
    #[arg(long, value_name = "ID")]
    oauth_client_id: Option<String>,
    /// The pre-registered client's secret; prefer `env:VAR` (a literal shows in process
    /// listings while the command runs).
    #[arg(long, value_name = "SECRET")]
    oauth_client_secret: Option<String>,
    /// A PEM private key for `private_key_jwt` (client credentials), e.g. `env:UPSTREAM_KEY`.
    #[arg(long, value_name = "PEM")]
    oauth_private_key: Option<String>,
    /// `RS256` (default), `RS384`, `RS512`, `ES256` or `ES384`, with --oauth-private-key.
    #[arg(long, value_name = "ALG")]
    oauth_signing_algorithm: Option<String>,
    /// A scope to ask for (repeatable, or comma-separated); by default the ones the upstream
    /// names.
    #[arg(long = "oauth-scope", value_name = "SCOPE")]
    oauth_scopes: Vec<String>,
    /// Accept only this authorization server (its issuer URL).
    #[arg(long, value_name = "URL")]
    oauth_issuer: Option<String>,
    /// The redirect URI registered for the client (default: this server's
    /// `/connect/upstreams/callback`).
    #[arg(long, value_name = "URL")]
    oauth_redirect_uri: Option<String>,
    /// The client's metadata document URL (a client ID metadata document).
    #[arg(long, value_name = "URL")]
    oauth_client_metadata_url: Option<String>,
    /// The name sent in dynamic registration.
    #[arg(long, value_name = "NAME")]
    oauth_client_name: Option<String>,
    /// Follow the authorization server's redirects without a person (servers that approve at
    /// once).
    #[arg(long)]
    oauth_headless: bool,
}

impl std::fmt::Debug for McpOAuthArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let given = |v: &Option<String>| v.as_ref().map(|_| "[REDACTED]");
        f.debug_struct("McpOAuthArgs")
            .field("oauth", &self.oauth)
            .field("oauth_client_id", &self.oauth_client_id)
            .field("oauth_client_secret", &given(&self.oauth_client_secret))
            .field("oauth_private_key", &given(&self.oauth_private_key))
            .field("oauth_scopes", &self.oauth_scopes)
            .field("oauth_issuer", &self.oauth_issuer)
            .finish_non_exhaustive()
    }
}

impl McpOAuthArgs {
    /// The source's `oauth` table, if --oauth was given; an --oauth-* flag without it is an
    /// error naming the flag.
    fn spec(&self) -> anyhow::Result<Option<toolshed_registry::OAuthSpec>> {
        let Some(grant) = self.oauth else {
            let stray = [
                ("--oauth-client-id", self.oauth_client_id.is_some()),
                ("--oauth-client-secret", self.oauth_client_secret.is_some()),
                ("--oauth-private-key", self.oauth_private_key.is_some()),
                (
                    "--oauth-signing-algorithm",
                    self.oauth_signing_algorithm.is_some(),
                ),
                ("--oauth-scope", !self.oauth_scopes.is_empty()),
                ("--oauth-issuer", self.oauth_issuer.is_some()),
                ("--oauth-redirect-uri", self.oauth_redirect_uri.is_some()),
                (
                    "--oauth-client-metadata-url",
                    self.oauth_client_metadata_url.is_some(),
                ),
                ("--oauth-client-name", self.oauth_client_name.is_some()),
                ("--oauth-headless", self.oauth_headless),
            ];
            if let Some((flag, _)) = stray.iter().find(|(_, given)| *given) {
                bail!("{flag} needs --oauth GRANT (authorization-code or client-credentials)");
            }
            return Ok(None);
        };
        Ok(Some(toolshed_registry::OAuthSpec {
            grant: match grant {
                McpGrant::AuthorizationCode => toolshed_registry::OAuthGrant::AuthorizationCode,
                McpGrant::ClientCredentials => toolshed_registry::OAuthGrant::ClientCredentials,
            },
            client_id: self.oauth_client_id.clone(),
            client_secret: self.oauth_client_secret.clone(),
            private_key: self.oauth_private_key.clone(),
            signing_algorithm: self.oauth_signing_algorithm.clone(),
            scopes: split_list(&self.oauth_scopes),
            redirect_uri: self.oauth_redirect_uri.clone(),
            client_metadata_url: self.oauth_client_metadata_url.clone(),
            client_name: self.oauth_client_name.clone(),
            headless: self.oauth_headless,
            issuer: self.oauth_issuer.clone(),
        }))
    }
}

/// One auth for every request of an OpenAPI or GraphQL source; give at most one form. Secret
/// values accept `env:VAR`; literal ones are sealed in the store.
#[derive(Args, Default)]
pub struct AuthArgs {
    /// `Authorization: Bearer` token.
    #[arg(long, value_name = "TOKEN")]
    bearer: Option<String>,
    /// An API key header, e.g. `X-Api-Key=env:PETS_KEY`.
    #[arg(long, value_name = "NAME=VALUE")]
    api_key_header: Option<String>,
    /// An API key in the query string, e.g. `api_key=env:PETS_KEY`.
    #[arg(long, value_name = "NAME=VALUE")]
    api_key_query: Option<String>,
    /// An API key cookie, e.g. `session=env:PETS_SESSION`.
    #[arg(long, value_name = "NAME=VALUE")]
    api_key_cookie: Option<String>,
    /// HTTP basic auth: `USER:PASSWORD` (the password may be `env:VAR`).
    #[arg(long, value_name = "USER:PASSWORD")]
    basic: Option<String>,
    /// OAuth2 client credentials: the token endpoint (with --oauth2-client-id and
    /// --oauth2-client-secret).
    #[arg(long, value_name = "URL")]
    oauth2_token_url: Option<String>,
    #[arg(long, value_name = "ID")]
    oauth2_client_id: Option<String>,
    #[arg(long, value_name = "SECRET")]
    oauth2_client_secret: Option<String>,
    /// A scope to ask for (repeatable, or comma-separated).
    #[arg(long = "oauth2-scope", value_name = "SCOPE")]
    oauth2_scopes: Vec<String>,
    #[arg(long, value_name = "AUDIENCE")]
    oauth2_audience: Option<String>,
    /// Each principal's own grant instead of client credentials (OpenAPI): calls pause until
    /// the caller grants access through Toolshed's `/connect`. Uses --oauth2-client-id,
    /// --oauth2-client-secret (optional), --oauth2-scope, and the endpoints below or, without
    /// them, the document's authorizationCode flow.
    #[arg(long)]
    oauth2_user: bool,
    /// With --oauth2-user: the provider's authorization endpoint.
    #[arg(long, value_name = "URL", requires = "oauth2_user")]
    oauth2_authorization_url: Option<String>,
    /// With --oauth2-user: the API's resource indicator (RFC 8707).
    #[arg(long, value_name = "URI", requires = "oauth2_user")]
    oauth2_resource: Option<String>,
}

/// Names the auth forms given, never their values.
impl std::fmt::Debug for AuthArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let given = |o: &Option<String>| o.as_ref().map(|_| toolshed_outbound::secret::REDACTED);
        f.debug_struct("AuthArgs")
            .field("bearer", &given(&self.bearer))
            .field("api_key_header", &given(&self.api_key_header))
            .field("api_key_query", &given(&self.api_key_query))
            .field("api_key_cookie", &given(&self.api_key_cookie))
            .field("basic", &given(&self.basic))
            .field("oauth2_token_url", &self.oauth2_token_url)
            .field("oauth2_client_id", &self.oauth2_client_id)
            .field("oauth2_client_secret", &given(&self.oauth2_client_secret))
            .field("oauth2_scopes", &self.oauth2_scopes)
            .field("oauth2_audience", &self.oauth2_audience)
            .field("oauth2_user", &self.oauth2_user)
            .finish()
    }
}

impl AuthArgs {
    /// The auth these flags describe, or `None`; an error names conflicting or missing flags.
    fn spec(&self) -> anyhow::Result<Option<AuthSpec>> {
        let key = |text: &Option<String>, flag: &str, location: KeyLocation| {
            text.as_ref()
                .map(|t| {
                    pair(t, flag).map(|(name, value)| AuthSpec::ApiKey {
                        name,
                        value,
                        location,
                    })
                })
                .transpose()
        };
        let oauth2_given = self.oauth2_token_url.is_some()
            || self.oauth2_client_id.is_some()
            || self.oauth2_client_secret.is_some()
            || !self.oauth2_scopes.is_empty()
            || self.oauth2_audience.is_some();
        let oauth2 = if self.oauth2_user {
            Some(AuthSpec::Oauth2User {
                authorization_url: self.oauth2_authorization_url.clone().unwrap_or_default(),
                token_url: self.oauth2_token_url.clone().unwrap_or_default(),
                client_id: self.oauth2_client_id.clone().context(
                    "--oauth2-user needs --oauth2-client-id (the client registered at the provider)",
                )?,
                client_secret: self.oauth2_client_secret.clone(),
                scopes: split_list(&self.oauth2_scopes),
                resource: self.oauth2_resource.clone(),
            })
        } else if oauth2_given {
            let need = |v: &Option<String>, flag: &str| {
                v.clone().with_context(|| {
                    format!("OAuth2 client credentials need {flag} (with --oauth2-token-url, --oauth2-client-id and --oauth2-client-secret)")
                })
            };
            Some(AuthSpec::Oauth2ClientCredentials {
                token_url: need(&self.oauth2_token_url, "--oauth2-token-url")?,
                client_id: need(&self.oauth2_client_id, "--oauth2-client-id")?,
                client_secret: need(&self.oauth2_client_secret, "--oauth2-client-secret")?,
                scopes: split_list(&self.oauth2_scopes),
                audience: self.oauth2_audience.clone(),
            })
        } else {
            None
        };
        let basic = self
            .basic
            .as_ref()
            .map(|b| match b.split_once(':') {
                Some((user, password)) if !user.is_empty() => Ok(AuthSpec::Basic {
                    username: user.to_string(),
                    password: password.to_string(),
                }),
                // The value is not echoed: without `USER:` it is the password itself.
                _ => bail!("--basic expects USER:PASSWORD (the value given has no user before ':'; it is not shown, as it may be the password)"),
            })
            .transpose()?;
        let given: Vec<(&str, AuthSpec)> = [
            (
                "--bearer",
                self.bearer
                    .as_ref()
                    .map(|t| AuthSpec::Bearer { token: t.clone() }),
            ),
            (
                "--api-key-header",
                key(
                    &self.api_key_header,
                    "--api-key-header",
                    KeyLocation::Header,
                )?,
            ),
            (
                "--api-key-query",
                key(&self.api_key_query, "--api-key-query", KeyLocation::Query)?,
            ),
            (
                "--api-key-cookie",
                key(
                    &self.api_key_cookie,
                    "--api-key-cookie",
                    KeyLocation::Cookie,
                )?,
            ),
            ("--basic", basic),
            ("--oauth2-*", oauth2),
        ]
        .into_iter()
        .filter_map(|(flag, a)| a.map(|a| (flag, a)))
        .collect();
        match given.len() {
            0 => Ok(None),
            1 => Ok(given.into_iter().next().map(|(_, a)| a)),
            _ => bail!(
                "give one auth, not {}: {}",
                given.len(),
                given.iter().map(|(f, _)| *f).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// Repeated and comma-separated values, trimmed, empty ones dropped.
pub(super) fn split_list(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(String::from)
        .collect()
}

/// `--scheme SCHEME:FIELD=VALUE` flags as credentials per security scheme.
pub(super) fn scheme_specs(flags: &[String]) -> anyhow::Result<BTreeMap<String, SchemeAuthSpec>> {
    let mut out: BTreeMap<String, SchemeAuthSpec> = BTreeMap::new();
    for flag in flags {
        let Some((scheme, rest)) = flag.split_once(':') else {
            bail!("--scheme expects SCHEME:FIELD=VALUE (e.g. api_key:value=env:KEY); the value given has no ':' (it is not shown, as it may hold a secret)");
        };
        let scheme = scheme.trim();
        if scheme.is_empty() {
            bail!("--scheme '{flag}' has no scheme name before ':'");
        }
        let (field, value) = pair(rest, "--scheme SCHEME:")?;
        let creds = out.entry(scheme.to_string()).or_default();
        let slot = match field.as_str() {
            "value" => &mut creds.value,
            "token" => &mut creds.token,
            "username" => &mut creds.username,
            "password" => &mut creds.password,
            "client_id" => &mut creds.client_id,
            "client_secret" => &mut creds.client_secret,
            "token_url" => &mut creds.token_url,
            "audience" => &mut creds.audience,
            "scopes" => {
                creds
                    .scopes
                    .get_or_insert_with(Vec::new)
                    .extend(split_list(&[value]));
                continue;
            }
            other => bail!(
                "--scheme {scheme}: unknown field '{other}'; use value, token, username, password, client_id, client_secret, token_url, scopes or audience"
            ),
        };
        if slot.is_some() {
            bail!("--scheme {scheme}: '{field}' is given twice");
        }
        *slot = Some(value);
    }
    Ok(out)
}

/// Flags every `sources add` takes.
#[derive(Args, Debug)]
pub struct CommonAdd {
    /// Permit loopback and private addresses.
    #[arg(long)]
    allow_private: bool,
    /// Print every tool and warning the import would create; store nothing.
    #[arg(long)]
    pub(super) dry_run: bool,
    /// Replace a stored source of the same name.
    #[arg(long)]
    pub(super) replace: bool,
    /// Hide the tools matching this dot-glob (repeatable).
    #[arg(long, value_name = "PATTERN")]
    hide: Vec<String>,
    /// Mark the tools matching this dot-glob read-only (repeatable).
    #[arg(long, value_name = "PATTERN")]
    read_only: Vec<String>,
    /// Mark the tools matching this dot-glob destructive (repeatable).
    #[arg(long, value_name = "PATTERN")]
    destructive: Vec<String>,
}

impl CommonAdd {
    fn overrides(&self) -> Vec<OverrideSpec> {
        let mut out = Vec::new();
        for p in &self.hide {
            out.push(OverrideSpec {
                pattern: p.clone(),
                hidden: true,
                ..Default::default()
            });
        }
        for p in &self.read_only {
            out.push(OverrideSpec {
                pattern: p.clone(),
                read_only: Some(true),
                ..Default::default()
            });
        }
        for p in &self.destructive {
            out.push(OverrideSpec {
                pattern: p.clone(),
                destructive: Some(true),
                ..Default::default()
            });
        }
        out
    }
}

pub(super) fn pair(text: &str, flag: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        // The text is not echoed: without `NAME=` it may be the secret value itself.
        Some(_) => bail!("{flag} expects NAME=VALUE; the name before '=' is empty"),
        None => bail!(
            "{flag} expects NAME=VALUE; the value given has no '=' (it is not shown, as it may hold a secret)"
        ),
    }
}

/// The spec an `add` describes, relative paths made absolute.
pub(super) fn spec_of(kind: &AddKind) -> anyhow::Result<(SourceSpec, &CommonAdd)> {
    let (mut spec, common) = match kind {
        AddKind::Openapi {
            name,
            spec,
            base_url,
            auth,
            schemes,
            timeout_ms,
            resources,
            common,
        } => {
            let auth = match (auth.spec()?, schemes.is_empty()) {
                (a, true) => a,
                (None, false) => Some(AuthSpec::Schemes {
                    schemes: scheme_specs(schemes)?,
                }),
                (Some(_), false) => bail!(
                    "give either --scheme credentials or one auth (--bearer, --api-key-*, --basic, --oauth2-*), not both"
                ),
            };
            let s = OpenApiSpec {
                name: name.clone(),
                location: spec.clone(),
                base_url: base_url.clone(),
                auth,
                allow_private: common.allow_private,
                timeout_ms: *timeout_ms,
                overrides: common.overrides(),
                resources: resources.clone(),
            };
            (SourceSpec::Openapi(s), common)
        }
        AddKind::Graphql {
            name,
            sdl,
            introspection,
            endpoint,
            auth,
            headers,
            selection_depth,
            timeout_ms,
            resources,
            common,
        } => {
            let Some(endpoint) = endpoint.clone() else {
                bail!("GraphQL sources need --endpoint URL: calls are sent there");
            };
            let s = GraphqlSpec {
                name: name.clone(),
                sdl: sdl.as_ref().map(|p| p.display().to_string()),
                introspection: introspection.as_ref().map(|p| p.display().to_string()),
                endpoint,
                headers: headers
                    .iter()
                    .map(|h| pair(h, "--header"))
                    .collect::<anyhow::Result<_>>()?,
                auth: auth.spec()?,
                selection_depth: *selection_depth,
                allow_private: common.allow_private,
                timeout_ms: *timeout_ms,
                overrides: common.overrides(),
                resources: resources.clone(),
            };
            (SourceSpec::Graphql(s), common)
        }
        AddKind::Mcp {
            name,
            command,
            args,
            env,
            cwd,
            url,
            headers,
            connect_timeout_ms,
            call_timeout_ms,
            oauth,
            common,
        } => {
            let s = McpSpec {
                name: name.clone(),
                command: command.clone(),
                args: args.clone(),
                env: env
                    .iter()
                    .map(|h| pair(h, "--env"))
                    .collect::<anyhow::Result<_>>()?,
                cwd: cwd.clone(),
                url: url.clone(),
                headers: headers
                    .iter()
                    .map(|h| pair(h, "--header"))
                    .collect::<anyhow::Result<_>>()?,
                allow_private: common.allow_private,
                connect_timeout_ms: *connect_timeout_ms,
                call_timeout_ms: *call_timeout_ms,
                overrides: common.overrides(),
                oauth: oauth.spec()?,
            };
            if s.oauth.is_some() && s.url.is_none() {
                bail!("--oauth applies to a streamable HTTP upstream (--url), not to a command");
            }
            (SourceSpec::Mcp(s), common)
        }
    };
    spec.absolutize(&std::env::current_dir().context("reading the working directory")?);
    Ok((spec, common))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(subcommand)]
        action: SourcesAction,
    }

    fn parse(args: &[&str]) -> SourcesAction {
        T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap()
            .action
    }

    #[test]
    fn auth_args_debug_never_shows_secrets() {
        let auth = AuthArgs {
            bearer: Some("tok-123".into()),
            basic: Some("me:pw-456".into()),
            oauth2_client_id: Some("client".into()),
            oauth2_client_secret: Some("sec-789".into()),
            ..AuthArgs::default()
        };
        let text = format!("{auth:?}");
        for secret in ["tok-123", "pw-456", "sec-789"] {
            assert!(!text.contains(secret), "{text}");
        }
        assert!(
            text.contains("client") && text.contains("[REDACTED]"),
            "{text}"
        );
    }

    #[test]
    fn openapi_add_flags_make_a_spec() {
        let SourcesAction::Add { kind } = parse(&[
            "add",
            "openapi",
            "pets",
            "--spec",
            "/x/p.json",
            "--base-url",
            "http://h/v2",
            "--api-key-header",
            "X-Key=env:K",
            "--hide",
            "pets.store.*",
            "--allow-private",
        ]) else {
            panic!("expected add");
        };
        let (spec, common) = spec_of(&kind).unwrap();
        assert!(common.allow_private && !common.dry_run);
        let SourceSpec::Openapi(o) = spec else {
            panic!("expected openapi")
        };
        assert_eq!(o.location, "/x/p.json");
        assert_eq!(
            o.auth,
            Some(AuthSpec::ApiKey {
                name: "X-Key".into(),
                value: "env:K".into(),
                location: KeyLocation::Header
            })
        );
        assert!(o.overrides[0].hidden);
    }

    fn openapi_auth(extra: &[&str]) -> anyhow::Result<Option<AuthSpec>> {
        let mut args = vec!["add", "openapi", "pets", "--spec", "/x/p.json"];
        args.extend_from_slice(extra);
        let SourcesAction::Add { kind } = parse(&args) else {
            panic!("expected add");
        };
        let (spec, _) = spec_of(&kind)?;
        let SourceSpec::Openapi(o) = spec else {
            panic!("expected openapi")
        };
        Ok(o.auth)
    }

    #[test]
    fn every_auth_form_has_flags() {
        assert_eq!(
            openapi_auth(&["--api-key-query", "api_key=k1"]).unwrap(),
            Some(AuthSpec::ApiKey {
                name: "api_key".into(),
                value: "k1".into(),
                location: KeyLocation::Query
            })
        );
        assert_eq!(
            openapi_auth(&["--api-key-cookie", "sid=env:SID"]).unwrap(),
            Some(AuthSpec::ApiKey {
                name: "sid".into(),
                value: "env:SID".into(),
                location: KeyLocation::Cookie
            })
        );
        assert_eq!(
            openapi_auth(&["--basic", "ann:pa:ss"]).unwrap(),
            Some(AuthSpec::Basic {
                username: "ann".into(),
                password: "pa:ss".into()
            })
        );
        assert_eq!(
            openapi_auth(&[
                "--oauth2-token-url",
                "https://id.example.com/token",
                "--oauth2-client-id",
                "toolshed",
                "--oauth2-client-secret",
                "env:CS",
                "--oauth2-scope",
                "read,write",
                "--oauth2-scope",
                "admin",
                "--oauth2-audience",
                "pets",
            ])
            .unwrap(),
            Some(AuthSpec::Oauth2ClientCredentials {
                token_url: "https://id.example.com/token".into(),
                client_id: "toolshed".into(),
                client_secret: "env:CS".into(),
                scopes: vec!["read".into(), "write".into(), "admin".into()],
                audience: Some("pets".into()),
            })
        );
        let Some(AuthSpec::Schemes { schemes }) = openapi_auth(&[
            "--scheme",
            "api_key:value=env:KEY",
            "--scheme",
            "oauth:client_id=toolshed",
            "--scheme",
            "oauth:client_secret=s3",
            "--scheme",
            "oauth:scopes=read:pets,write:pets",
        ])
        .unwrap() else {
            panic!("expected schemes")
        };
        assert_eq!(schemes["api_key"].value.as_deref(), Some("env:KEY"));
        assert_eq!(schemes["oauth"].client_secret.as_deref(), Some("s3"));
        assert_eq!(
            schemes["oauth"].scopes,
            Some(vec!["read:pets".to_string(), "write:pets".into()])
        );
    }

    #[test]
    fn auth_flag_mistakes_are_clear() {
        let e = openapi_auth(&["--bearer", "t", "--basic", "a:b"]).unwrap_err();
        assert!(e.to_string().contains("--bearer, --basic"), "{e}");
        let e = openapi_auth(&["--oauth2-client-id", "c"]).unwrap_err();
        assert!(e.to_string().contains("--oauth2-token-url"), "{e}");
        let e = openapi_auth(&["--basic", "nocolon"]).unwrap_err();
        assert!(e.to_string().contains("USER:PASSWORD"), "{e}");
        // A value without `USER:` is the password: it is never echoed.
        for given in ["hunter2-secret", ":hunter2-secret"] {
            let e = openapi_auth(&["--basic", given]).unwrap_err();
            let text = format!("{e:#} {e:?}");
            assert!(
                text.contains("USER:PASSWORD") && !text.contains("hunter2-secret"),
                "{text}"
            );
        }
        let e = openapi_auth(&["--scheme", "k:value=1", "--bearer", "t"]).unwrap_err();
        assert!(e.to_string().contains("not both"), "{e}");
        let e = openapi_auth(&["--scheme", "novalue"]).unwrap_err();
        assert!(e.to_string().contains("SCHEME:FIELD=VALUE"), "{e}");
        // Values that may be secrets are not echoed in these errors either.
        for args in [
            &["--scheme", "key-secret-value"][..],
            &["--scheme", "k:key-secret-value"],
            &["--api-key-header", "key-secret-value"],
        ] {
            let e = openapi_auth(args).unwrap_err();
            let text = format!("{e:#}");
            assert!(
                text.contains("expects") && !text.contains("key-secret-value"),
                "{text}"
            );
        }
        let e = openapi_auth(&["--scheme", "k:colour=blue"]).unwrap_err();
        assert!(e.to_string().contains("unknown field 'colour'"), "{e}");
        let e = openapi_auth(&["--scheme", "k:value=1", "--scheme", "k:value=2"]).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
    }

    #[test]
    fn graphql_takes_auth_and_a_timeout() {
        let SourcesAction::Add { kind } = parse(&[
            "add",
            "graphql",
            "g",
            "--endpoint",
            "https://g.example.com/graphql",
            "--basic",
            "u:p",
            "--timeout-ms",
            "1500",
        ]) else {
            panic!("expected add");
        };
        let (spec, _) = spec_of(&kind).unwrap();
        let SourceSpec::Graphql(g) = spec else {
            panic!("expected graphql")
        };
        assert_eq!(g.timeout_ms, Some(1500));
        assert!(matches!(g.auth, Some(AuthSpec::Basic { .. })));
    }

    #[test]
    fn mcp_needs_a_command_or_a_url() {
        assert!(T::try_parse_from(["t", "add", "mcp", "m"]).is_err());
        assert!(T::try_parse_from([
            "t",
            "add",
            "mcp",
            "m",
            "--command",
            "c",
            "--url",
            "http://h"
        ])
        .is_err());
        let SourcesAction::Add { kind } = parse(&[
            "add",
            "mcp",
            "m",
            "--command",
            "srv",
            "--arg",
            "--flag",
            "--env",
            "A=1",
        ]) else {
            panic!("expected add");
        };
        let (spec, _) = spec_of(&kind).unwrap();
        let SourceSpec::Mcp(m) = spec else {
            panic!("expected mcp")
        };
        assert_eq!(m.args, vec!["--flag"]);
        assert_eq!(m.env.get("A").map(String::as_str), Some("1"));
    }

    #[test]
    fn bad_pairs_and_missing_endpoints_are_clear() {
        let SourcesAction::Add { kind } = parse(&["add", "graphql", "g", "--sdl", "s.graphql"])
        else {
            panic!("expected add");
        };
        assert!(spec_of(&kind)
            .unwrap_err()
            .to_string()
            .contains("--endpoint"));
        assert!(pair("novalue", "--header").is_err());
    }

    #[test]
    fn mcp_oauth_flags_make_the_oauth_table() {
        let SourcesAction::Add { kind } = parse(&[
            "add",
            "mcp",
            "tracker",
            "--url",
            "https://mcp.example.com/mcp",
            "--oauth",
            "authorization-code",
            "--oauth-client-id",
            "toolshed",
            "--oauth-client-secret",
            "env:TRACKER_SECRET",
            "--oauth-scope",
            "read,write",
            "--oauth-issuer",
            "https://auth.example.com",
        ]) else {
            panic!("expected add");
        };
        let (spec, _) = spec_of(&kind).unwrap();
        spec.validate().unwrap();
        let SourceSpec::Mcp(m) = spec else {
            panic!("expected mcp")
        };
        let o = m.oauth.expect("an oauth table");
        assert_eq!(o.grant, toolshed_registry::OAuthGrant::AuthorizationCode);
        assert_eq!(o.client_id.as_deref(), Some("toolshed"));
        assert_eq!(o.client_secret.as_deref(), Some("env:TRACKER_SECRET"));
        assert_eq!(o.scopes, ["read", "write"]);
        assert_eq!(o.issuer.as_deref(), Some("https://auth.example.com"));
        assert!(o.redirect_uri.is_none() && !o.headless);
    }

    #[test]
    fn mcp_oauth_mistakes_name_the_flag() {
        // A client flag without the grant.
        let SourcesAction::Add { kind } = parse(&[
            "add",
            "mcp",
            "t",
            "--url",
            "https://x/mcp",
            "--oauth-client-id",
            "c",
        ]) else {
            panic!("expected add");
        };
        let e = spec_of(&kind).unwrap_err().to_string();
        assert!(e.contains("--oauth-client-id needs --oauth"), "{e}");
        // OAuth for a stdio command.
        let SourcesAction::Add { kind } = parse(&[
            "add",
            "mcp",
            "t",
            "--command",
            "srv",
            "--oauth",
            "client-credentials",
        ]) else {
            panic!("expected add");
        };
        let e = spec_of(&kind).unwrap_err().to_string();
        assert!(
            e.contains("--oauth applies to a streamable HTTP upstream"),
            "{e}"
        );
        // An unknown grant lists the known ones.
        let e = T::try_parse_from([
            "t",
            "add",
            "mcp",
            "t",
            "--url",
            "https://x/mcp",
            "--oauth",
            "password",
        ])
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("authorization-code") && e.contains("client-credentials"),
            "{e}"
        );
        // Client credentials without a secret: the spec's own check names the field.
        let SourcesAction::Add { kind } = parse(&[
            "add",
            "mcp",
            "t",
            "--url",
            "https://x/mcp",
            "--oauth",
            "client-credentials",
            "--oauth-client-id",
            "c",
        ]) else {
            panic!("expected add");
        };
        let (spec, _) = spec_of(&kind).unwrap();
        let e = spec.validate().unwrap_err().to_string();
        assert!(e.contains("oauth."), "{e}");
        // The secret never shows in the flags' debug text.
        let args = McpOAuthArgs {
            oauth_client_secret: Some("sec-4711".into()),
            ..McpOAuthArgs::default()
        };
        assert!(!format!("{args:?}").contains("sec-4711"));
    }
}
