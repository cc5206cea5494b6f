//! [`Secret`]: a credential string that never shows itself.
//!
//! Created from configuration strings: `"env:NAME"` or `"${NAME}"` read the environment
//! variable `NAME`; anything else is the value itself. Debug, Display and Serialize print
//! `[REDACTED]`; only [`Secret::expose`] gives the value.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::OutboundError;

/// What Debug, Display and Serialize show instead of the value.
pub const REDACTED: &str = "[REDACTED]";

/// A credential. Cheap to clone.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps a literal value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(Arc::from(value.into()))
    }

    /// Reads a configuration string: `env:NAME` / `${NAME}` from the environment, else literal.
    /// This is the one resolver of configured secrets (files, stored sources, the CLI).
    pub fn from_config(s: &str) -> Result<Self, OutboundError> {
        match env_ref(s) {
            Some(name) => {
                std::env::var(name)
                    .map(Self::new)
                    .map_err(|e| OutboundError::MissingSecret {
                        name: name.to_string(),
                        reason: format!("environment variable: {e}"),
                    })
            }
            None => Ok(Self::new(s)),
        }
    }

    /// The value. Use only where it is sent.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The environment variable a configuration string refers to (`env:NAME` or `${NAME}`), or
/// `None` for a literal value.
pub fn env_ref(s: &str) -> Option<&str> {
    s.strip_prefix("env:")
        .or_else(|| s.strip_prefix("${").and_then(|r| r.strip_suffix('}')))
        .map(str::trim)
}

/// A configured secret as it may be shown (Debug, listings): an environment reference as it
/// is, a literal value as [`REDACTED`].
pub fn shown(s: &str) -> &str {
    if env_ref(s).is_some() {
        s
    } else {
        REDACTED
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({REDACTED})")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::from_config(&s).map_err(serde::de::Error::custom)
    }
}

/// Secrets shorter than this are not blanked out (they would match ordinary text).
pub const MIN_SECRET_LEN: usize = 3;

/// The base64 `user:password` an HTTP Basic `Authorization` header carries: a secret of its
/// own, since a server may echo the header.
pub fn basic_credential(user: &str, password: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// Every form in which a request may carry `secret`: the value itself and its URL-encoded
/// forms (`%20` and `+` for spaces), as a query string or a form body sends it.
pub fn carried_forms(secret: &str) -> Vec<String> {
    let plus: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let pct = plus.replace('+', "%20");
    let mut out = vec![secret.to_string()];
    for form in [plus, pct] {
        if !out.contains(&form) {
            out.push(form);
        }
    }
    out
}

/// The forms of `secrets` to blank out, longest first (so that no secret's tail survives the
/// replacement of a shorter one it contains).
fn forms(secrets: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = secrets
        .iter()
        .filter(|s| s.len() >= MIN_SECRET_LEN)
        .flat_map(|s| carried_forms(s))
        .collect();
    all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    all.dedup();
    all
}

/// Replaces every occurrence of the given secrets in `text`, in every form a request carries
/// them ([`carried_forms`]), with [`REDACTED`].
pub fn redact(text: &str, secrets: &[&str]) -> String {
    replace_forms(text, &forms(secrets))
}

fn replace_forms(text: &str, forms: &[String]) -> String {
    let mut out = text.to_string();
    for f in forms {
        if out.contains(f.as_str()) {
            out = out.replace(f.as_str(), REDACTED);
        }
    }
    out
}

/// Replaces every occurrence of the given secrets (in every carried form) inside the strings
/// of `v` (keys are kept).
pub fn redact_value(v: &mut serde_json::Value, secrets: &[&str]) {
    redact_value_forms(v, &forms(secrets));
}

fn redact_value_forms(v: &mut serde_json::Value, forms: &[String]) {
    use serde_json::Value;
    match v {
        Value::String(s) if forms.iter().any(|f| s.contains(f.as_str())) => {
            *s = replace_forms(s, forms);
        }
        Value::Array(a) => a.iter_mut().for_each(|x| redact_value_forms(x, forms)),
        Value::Object(m) => m.values_mut().for_each(|x| redact_value_forms(x, forms)),
        _ => {}
    }
}

/// A tool call's outcome with the given secrets blanked out of the result, or of the error's
/// message and data: what a source hands back when the remote side may echo a credential.
pub fn redact_outcome(
    outcome: Result<serde_json::Value, toolshed_core::ToolError>,
    secrets: &[&str],
) -> Result<serde_json::Value, toolshed_core::ToolError> {
    if secrets.is_empty() {
        return outcome;
    }
    match outcome {
        Ok(mut v) => {
            redact_value(&mut v, secrets);
            Ok(v)
        }
        Err(mut e) => {
            e.message = redact(&e.message, secrets);
            if let Some(d) = e.data.as_mut() {
                redact_value(d, secrets);
            }
            Err(e)
        }
    }
}

/// The credential of an `Authorization`-style value `<scheme> <credential>` whose first word is
/// an auth scheme (`Bearer`, `Basic`, `Token`, `Bot`, `Digest`, `ApiKey`, any case): a server
/// may echo the credential alone, so it is a secret of its own. Other values with spaces
/// (`device code`) give `None`: their words are ordinary text.
pub fn scheme_credential(value: &str) -> Option<&str> {
    const SCHEMES: [&str; 6] = ["bearer", "basic", "token", "bot", "digest", "apikey"];
    let (scheme, rest) = value.trim().split_once(char::is_whitespace)?;
    let rest = rest.trim();
    (SCHEMES.iter().any(|s| scheme.eq_ignore_ascii_case(s)) && !rest.is_empty()).then_some(rest)
}

/// Whether a header, environment variable or argument name looks like it carries a credential
/// (`Authorization`, `Cookie`, `X-Api-Key`, `GITHUB_TOKEN`, `DB_PASSWORD`, `apiKey`, ...): its
/// value is then a secret to keep out of logs, results, errors and the audit log. This is the
/// one list of credential-like names. Other names (`Accept-Language`, `LOG_LEVEL`, `author`)
/// carry ordinary values that are not blanked out.
pub fn is_credential_name(name: &str) -> bool {
    const MARKERS: [&str; 13] = [
        "authorization",
        "authentication",
        "token",
        "secret",
        "password",
        "passwd",
        "cookie",
        "session",
        "credential",
        "signature",
        "privatekey",
        "apikey",
        "bearer",
    ];
    const WORDS: [&str; 3] = ["key", "pat", "auth"];
    let lower = name.to_ascii_lowercase();
    let compact: String = lower
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    MARKERS.iter().any(|m| compact.contains(m))
        || lower
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| WORDS.contains(&word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_lose_secrets_in_values_messages_and_data_but_keep_keys() {
        use serde_json::json;
        let secrets = ["s3cr3t", "ab"];
        let ok = redact_outcome(
            Ok(json!({"s3cr3t": ["token s3cr3t", 1, {"x": "ab s3cr3t"}]})),
            &secrets,
        )
        .unwrap();
        assert_eq!(
            ok,
            json!({"s3cr3t": [format!("token {REDACTED}"), 1, {"x": format!("ab {REDACTED}")}]})
        );
        let mut e = toolshed_core::ToolError::invalid("denied for s3cr3t");
        e.data = Some(json!({"echo": "s3cr3t"}));
        let e = redact_outcome(Err(e), &secrets).unwrap_err();
        assert!(!e.message.contains("s3cr3t") && !e.data.unwrap().to_string().contains("s3cr3t"));
        // No secrets: the outcome is handed back as it is.
        assert_eq!(redact_outcome(Ok(json!("ab")), &[]).unwrap(), json!("ab"));
    }

    #[test]
    fn scheme_credentials_only_after_an_auth_scheme() {
        assert_eq!(scheme_credential("Bearer abc123"), Some("abc123"));
        assert_eq!(scheme_credential("bot  xyz "), Some("xyz"));
        assert_eq!(scheme_credential("APIKEY k-1"), Some("k-1"));
        assert_eq!(
            scheme_credential("Digest username=\"a\", response=\"b\""),
            Some("username=\"a\", response=\"b\"")
        );
        assert_eq!(scheme_credential("device code"), None);
        assert_eq!(scheme_credential("Bearer"), None);
        assert_eq!(scheme_credential("Bearer "), None);
        assert_eq!(scheme_credential("plain"), None);
    }

    #[test]
    fn credential_names() {
        for n in [
            "Authorization",
            "Proxy-Authorization",
            "Cookie",
            "X-Api-Key",
            "x-api_key",
            "apikey",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "X-Shop-Secret",
            "OPENAI_API_KEY",
            "X-Session-Id",
            "GH_PAT",
            "X-Auth",
            "private_key",
            "client_secret",
        ] {
            assert!(is_credential_name(n), "{n}");
        }
        for n in [
            "Accept-Language",
            "X-Request-Source",
            "LOG_LEVEL",
            "HOME",
            "X-Tenant",
            "MONKEY",
            "PATH",
            "author",
            "authority",
            "is_private",
        ] {
            assert!(!is_credential_name(n), "{n}");
        }
    }

    #[test]
    fn never_shown() {
        let s = Secret::new("hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
        assert!(!format!("{s}").contains("hunter2"));
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"[REDACTED]\"");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn references_are_shown_and_literals_masked() {
        assert_eq!(env_ref("env:A_B"), Some("A_B"));
        assert_eq!(env_ref("${ A_B }"), Some("A_B"));
        assert_eq!(env_ref("plain"), None);
        assert_eq!(shown("env:A_B"), "env:A_B");
        assert_eq!(shown("${A_B}"), "${A_B}");
        assert_eq!(shown("hunter2"), REDACTED);
    }

    #[test]
    fn reads_the_environment() {
        std::env::set_var("TOOLSHED_OUTBOUND_TEST_SECRET", "from-env");
        assert_eq!(
            Secret::from_config("env:TOOLSHED_OUTBOUND_TEST_SECRET")
                .unwrap()
                .expose(),
            "from-env"
        );
        assert_eq!(
            Secret::from_config("${TOOLSHED_OUTBOUND_TEST_SECRET}")
                .unwrap()
                .expose(),
            "from-env"
        );
        let e = Secret::from_config("env:TOOLSHED_OUTBOUND_TEST_MISSING").unwrap_err();
        assert!(e.to_string().contains("TOOLSHED_OUTBOUND_TEST_MISSING"));
        assert_eq!(Secret::from_config("plain").unwrap().expose(), "plain");
        let s: Secret = serde_json::from_str("\"env:TOOLSHED_OUTBOUND_TEST_SECRET\"").unwrap();
        assert_eq!(s.expose(), "from-env");
    }

    #[test]
    fn carried_forms_are_redacted_too() {
        let secrets = ["p@ss word/1", "abc", "abcdef"];
        let text = "q=p%40ss+word%2F1 h=p%40ss%20word%2F1 raw=p@ss word/1 long=abcdef";
        let out = redact(text, &secrets);
        assert_eq!(
            out,
            format!("q={REDACTED} h={REDACTED} raw={REDACTED} long={REDACTED}")
        );
        let b64 = basic_credential("user", "pw-1");
        assert_eq!(b64, "dXNlcjpwdy0x");
        let mut v = serde_json::json!({"h": format!("Basic {b64}"), "q": "k%2Bv"});
        redact_value(&mut v, &[&b64, "k+v"]);
        assert_eq!(
            v,
            serde_json::json!({"h": format!("Basic {REDACTED}"), "q": REDACTED})
        );
    }

    #[test]
    fn redacts_text() {
        assert_eq!(
            redact("key=abc123&x", &["abc123"]),
            format!("key={REDACTED}&x")
        );
    }
}
