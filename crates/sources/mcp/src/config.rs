//! How to reach an upstream MCP server: [`Transport`] and [`UpstreamConfig`].

use std::path::PathBuf;
use std::time::Duration;

use toolshed_outbound::secret::{is_credential_name, scheme_credential, REDACTED};

use crate::error::McpSourceError;
use crate::oauth::OAuthConfig;

/// The way Toolshed talks to an upstream server.
///
/// Debug shows environment variable and header names, never their values.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP over stdin/stdout. It is supervised: restarted with
    /// exponential backoff when it dies, killed on shutdown and on drop.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Extra environment variables (the parent's environment is inherited).
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint such as `https://example.com/mcp`.
    Http {
        url: String,
        /// Extra headers sent with every request (e.g. `Authorization`).
        headers: Vec<(String, String)>,
    },
}

/// Names with values hidden, for Debug.
struct Redacted<'a>(&'a [(String, String)]);

impl std::fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, _)| (k, REDACTED)))
            .finish()
    }
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &Redacted(env))
                .field("cwd", cwd)
                .finish(),
            Transport::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &Redacted(headers))
                .finish(),
        }
    }
}

/// Everything needed to connect one upstream.
///
/// Debug hides the values of environment variables, headers and [`Self::secrets`].
#[derive(Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// The namespace: the first segment of every imported tool path (`memory.create_entities`).
    pub name: String,
    pub transport: Transport,
    /// Budget for spawning/connecting and completing the MCP handshake (default 15 s).
    pub connect_timeout: Duration,
    /// Budget for one tool call, including waiting for a reconnect (default 60 s).
    pub call_timeout: Duration,
    /// Allow streamable HTTP to loopback, private and link-local addresses (default false).
    pub allow_private: bool,
    /// Values blanked out of tool results and errors, in case the upstream echoes them (for
    /// example environment or header values read from `env:` references). Values of
    /// environment variables and headers with credential-like names (`*_TOKEN`,
    /// `Authorization`, ...) are blanked out without being listed here: see
    /// [`UpstreamConfig::redacted_values`].
    pub secrets: Vec<String>,
    /// Where the upstream's log messages are published, if anywhere.
    pub notices: Option<toolshed_core::notices::Notices>,
    /// OAuth for a streamable HTTP upstream that asks for a token ([`crate::oauth`]).
    pub oauth: Option<OAuthConfig>,
    /// Also accept an upstream that negotiates MCP 2025-03-26, the first streamable HTTP
    /// revision (no elicitation, structured tool output, resource links or tool titles),
    /// below [`crate::MIN_PROTOCOL_VERSION`] (default false: refused).
    pub accept_2025_03_26: bool,
}

impl std::fmt::Debug for UpstreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamConfig")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .field("connect_timeout", &self.connect_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("allow_private", &self.allow_private)
            .field("secrets", &self.secrets.len())
            .field("oauth", &self.oauth)
            .field("accept_2025_03_26", &self.accept_2025_03_26)
            .finish()
    }
}

/// Default [`UpstreamConfig::connect_timeout`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Default [`UpstreamConfig::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

impl UpstreamConfig {
    /// A configuration with default timeouts and `allow_private = false`.
    pub fn new(name: impl Into<String>, transport: Transport) -> Self {
        Self {
            name: name.into(),
            transport,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            allow_private: false,
            secrets: Vec::new(),
            notices: None,
            oauth: None,
            accept_2025_03_26: false,
        }
    }

    /// A stdio child `command args...` with no extra environment.
    pub fn stdio<I, S>(name: impl Into<String>, command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::new(
            name,
            Transport::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: Vec::new(),
                cwd: None,
            },
        )
    }

    /// A streamable HTTP endpoint with no extra headers.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self::new(
            name,
            Transport::Http {
                url: url.into(),
                headers: Vec::new(),
            },
        )
    }

    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    pub fn with_allow_private(mut self, allow: bool) -> Self {
        self.allow_private = allow;
        self
    }

    /// Adds values to blank out of results and errors (see [`Self::secrets`]).
    pub fn with_secrets<I, S>(mut self, secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.secrets.extend(secrets.into_iter().map(Into::into));
        self
    }

    /// See [`Self::accept_2025_03_26`].
    pub fn with_accept_2025_03_26(mut self, accept: bool) -> Self {
        self.accept_2025_03_26 = accept;
        self
    }

    /// Gets tokens with OAuth when the (streamable HTTP) upstream asks for one.
    pub fn with_oauth(mut self, oauth: OAuthConfig) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Every value blanked out of this upstream's results and errors: [`Self::secrets`] plus
    /// the values of environment variables and headers with credential-like names
    /// ([`toolshed_outbound::secret::is_credential_name`]). Values shorter than 3 characters
    /// are left out (blanking them would garble ordinary text).
    pub fn redacted_values(&self) -> Vec<String> {
        let pairs: &[(String, String)] = match &self.transport {
            Transport::Stdio { env, .. } => env,
            Transport::Http { headers, .. } => headers,
        };
        let mut out: Vec<String> = pairs
            .iter()
            .filter(|(k, _)| is_credential_name(k))
            .map(|(_, v)| v.clone())
            .chain(self.secrets.iter().cloned())
            .chain(self.oauth.iter().flat_map(OAuthConfig::secret_values))
            .filter(|v| v.len() >= 3)
            .collect();
        // An `Authorization: Bearer x` header also leaks as `x` alone; other values with spaces
        // (`SESSION_MODE="device code"`) are not split into words.
        let tails: Vec<String> = out
            .iter()
            .filter_map(|v| scheme_credential(v).map(str::to_string))
            .filter(|t| t.len() >= 3)
            .collect();
        out.extend(tails);
        out.sort_by_key(|v| std::cmp::Reverse(v.len()));
        out.dedup();
        out
    }

    /// Checks what can be checked without connecting.
    pub fn validate(&self) -> Result<(), McpSourceError> {
        let invalid = |reason: String| McpSourceError::InvalidConfig {
            name: self.name.clone(),
            reason,
        };
        let valid_segment = !self.name.is_empty()
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid_segment {
            return Err(invalid(format!(
                "the namespace '{}' must be one path segment: lowercase letters, digits and '_'",
                self.name
            )));
        }
        if self.connect_timeout.is_zero() || self.call_timeout.is_zero() {
            return Err(invalid("timeouts must be greater than zero".into()));
        }
        if let Some(oauth) = &self.oauth {
            let Transport::Http { headers, url } = &self.transport else {
                return Err(invalid(
                    "oauth applies to streamable HTTP upstreams (url), not to stdio children"
                        .into(),
                ));
            };
            // The client's secret goes to whichever authorization server the upstream names:
            // over plain http anyone on the way could name their own.
            let plain = reqwest::Url::parse(url).is_ok_and(|u| {
                u.scheme() == "http"
                    && !matches!(u.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"))
            });
            if plain {
                return Err(invalid(format!(
                    "oauth needs an https url (or a loopback one), got '{url}'"
                )));
            }
            if headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            {
                return Err(invalid(
                    "give an Authorization header or oauth, not both".into(),
                ));
            }
            oauth.validate().map_err(invalid)?;
        }
        match &self.transport {
            Transport::Stdio { command, .. } if command.trim().is_empty() => {
                Err(invalid("the stdio command is empty".into()))
            }
            Transport::Stdio { .. } => Ok(()),
            Transport::Http { url, .. } => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|e| invalid(format!("'{url}' is not a valid URL: {e}")))?;
                match parsed.scheme() {
                    "http" | "https" => {}
                    other => {
                        return Err(invalid(format!(
                            "'{url}' uses scheme '{other}'; only http and https are supported"
                        )))
                    }
                }
                if parsed.host().is_none() {
                    return Err(invalid(format!("'{url}' has no host")));
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_builders() {
        let c = UpstreamConfig::stdio("memory", "npx", ["-y", "server"]);
        assert_eq!(c.connect_timeout, Duration::from_secs(15));
        assert!(!c.allow_private);
        assert!(c.validate().is_ok());
        match &c.transport {
            Transport::Stdio { args, .. } => assert_eq!(args, &["-y", "server"]),
            other => panic!("unexpected {other:?}"),
        }
        let c = UpstreamConfig::http("web", "https://example.com/mcp")
            .with_allow_private(true)
            .with_call_timeout(Duration::from_secs(3));
        assert!(c.allow_private);
        assert_eq!(c.call_timeout, Duration::from_secs(3));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn debug_hides_env_and_header_values() {
        let c = UpstreamConfig::new(
            "gh",
            Transport::Stdio {
                command: "server".into(),
                args: vec!["--stdio".into()],
                env: vec![
                    ("GITHUB_TOKEN".into(), "ghp-very-secret".into()),
                    ("LOG_LEVEL".into(), "debug-level".into()),
                ],
                cwd: None,
            },
        )
        .with_secrets(["extra-secret-value"]);
        let text = format!("{c:?}");
        assert!(
            text.contains("GITHUB_TOKEN") && text.contains("--stdio"),
            "{text}"
        );
        for v in ["ghp-very-secret", "debug-level", "extra-secret-value"] {
            assert!(!text.contains(v), "{v} in {text}");
        }
        // Only credential-named values and listed secrets are blanked out of results.
        assert_eq!(
            c.redacted_values(),
            vec!["extra-secret-value".to_string(), "ghp-very-secret".into()]
        );

        let h = UpstreamConfig::new(
            "web",
            Transport::Http {
                url: "https://example.com/mcp".into(),
                headers: vec![
                    ("Authorization".into(), "Bearer tok-123456".into()),
                    ("X-Tenant".into(), "acme".into()),
                ],
            },
        );
        let text = format!("{h:?}");
        assert!(
            text.contains("Authorization") && !text.contains("tok-123456"),
            "{text}"
        );
        assert!(!text.contains("acme"), "{text}");
        assert_eq!(
            h.redacted_values(),
            vec!["Bearer tok-123456".to_string(), "tok-123456".into()]
        );
    }

    /// Only `<scheme> <credential>` values add their credential alone: an ordinary value with a
    /// space (`device code`) must not blank every "code" out of results.
    #[test]
    fn only_auth_scheme_values_are_split() {
        let c = UpstreamConfig::new(
            "dev",
            Transport::Stdio {
                command: "server".into(),
                args: vec![],
                env: vec![
                    ("SESSION_MODE".into(), "device code".into()),
                    ("AUTH_HEADER".into(), "bot abcdef".into()),
                ],
                cwd: None,
            },
        );
        assert_eq!(
            c.redacted_values(),
            vec![
                "device code".to_string(),
                "bot abcdef".into(),
                "abcdef".into()
            ]
        );
    }

    #[test]
    fn oauth_is_checked_and_its_secrets_blanked_out() {
        use crate::oauth::OAuthConfig;
        use toolshed_outbound::secret::Secret;
        let oauth = OAuthConfig::client_credentials("toolshed", Secret::new("client-secret-9"));
        let c = UpstreamConfig::http("web", "https://example.com/mcp").with_oauth(oauth.clone());
        assert!(c.validate().is_ok());
        assert_eq!(c.redacted_values(), vec!["client-secret-9".to_string()]);
        let text = format!("{c:?}");
        assert!(
            text.contains("toolshed") && !text.contains("client-secret-9"),
            "{text}"
        );

        // The secret never travels over plain http, except on loopback.
        let e = UpstreamConfig::http("web", "http://example.com/mcp")
            .with_oauth(oauth.clone())
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("oauth needs an https url"), "{e}");
        assert!(UpstreamConfig::http("web", "http://127.0.0.1:9/mcp")
            .with_oauth(oauth.clone())
            .validate()
            .is_ok());

        let e = UpstreamConfig::stdio("kid", "server", Vec::<String>::new())
            .with_oauth(oauth.clone())
            .validate()
            .unwrap_err();
        assert!(
            e.to_string().contains("oauth applies to streamable HTTP"),
            "{e}"
        );
        let e = UpstreamConfig::new(
            "web",
            Transport::Http {
                url: "https://example.com/mcp".into(),
                headers: vec![("authorization".into(), "Bearer x".into())],
            },
        )
        .with_oauth(oauth)
        .validate()
        .unwrap_err();
        assert!(
            e.to_string().contains("Authorization header or oauth"),
            "{e}"
        );
        // The OAuth settings' own checks name the field.
        let e = UpstreamConfig::http("web", "https://example.com/mcp")
            .with_oauth(OAuthConfig::authorization_code().with_scopes([""]))
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("oauth.scopes"), "{e}");
    }

    #[test]
    fn invalid_configs_say_why() {
        let e = UpstreamConfig::stdio("Bad-Name", "x", Vec::<String>::new())
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("Bad-Name"));
        let e = UpstreamConfig::stdio("ok", " ", Vec::<String>::new())
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("empty"));
        let e = UpstreamConfig::http("ok", "ftp://example.com")
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("ftp"));
        assert!(UpstreamConfig::http("ok", "not a url").validate().is_err());
        let e = UpstreamConfig::http("ok", "https://e.com")
            .with_connect_timeout(Duration::ZERO)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("timeouts"));
    }
}
