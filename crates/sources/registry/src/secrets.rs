//! Secrets of stored sources: sealed at rest, opened on load, resolved from the environment.
//!
//! A secret string in a [`SourceSpec`] is one of:
//! - `env:NAME` (or `${NAME}`): read from the environment when the source loads; stored as is;
//! - `sealed:<base64>`: AES-256-GCM sealed with the store's key (only ever in the store);
//! - anything else: a literal, sealed before it is written to the store.
//!
//! The key is `TOOLSHED_SECRET_KEY` (base64 of 32 bytes) when set, else the file `secret.key`
//! in the data directory, created with mode 0600 on first use.

use std::path::Path;

use toolshed_outbound::Secret;
use toolshed_sealed::SecretBox;

use crate::error::SourcesError;
use crate::spec::{is_env_ref, SourceSpec};

/// The environment variable holding the sealing key.
pub const KEY_ENV: &str = "TOOLSHED_SECRET_KEY";
/// The key file's name in the data directory.
pub const KEY_FILE: &str = "secret.key";
/// What the key check value seals.
const CHECK_TEXT: &str = "toolshed sealing key check v1";

/// The prefix of a sealed value.
pub const SEALED_PREFIX: &str = "sealed:";

/// Seals and opens the secrets of source specs.
#[derive(Clone, Debug)]
pub struct Sealer {
    secret_box: SecretBox,
}

impl Sealer {
    /// The key from `TOOLSHED_SECRET_KEY`, else `<data_dir>/secret.key` (created 0600).
    pub fn from_data_dir(data_dir: &Path) -> Result<Self, SourcesError> {
        let secret_box = SecretBox::from_env_or_file(KEY_ENV, &data_dir.join(KEY_FILE))
            .map_err(|e| SourcesError::SecretBox(e.to_string()))?;
        Ok(Self { secret_box })
    }

    pub fn new(secret_box: SecretBox) -> Self {
        Self { secret_box }
    }

    /// A value kept in the database that proves which key sealed its secrets: a constant
    /// sealed with the key. Replicas sharing a database must share the key.
    pub fn check_value(&self) -> String {
        self.secret_box.seal(CHECK_TEXT)
    }

    /// Whether `check` (from [`Sealer::check_value`]) was sealed with this key.
    pub fn matches_check(&self, check: &str) -> bool {
        self.secret_box.open(check).is_ok_and(|t| t == CHECK_TEXT)
    }

    /// `text` sealed (for secrets that are not part of a spec, like an upstream's kept token).
    pub fn seal_text(&self, text: &str) -> String {
        self.secret_box.seal(text)
    }

    /// Opens what [`Sealer::seal_text`] sealed.
    pub fn open_text(&self, sealed: &str) -> Result<String, SourcesError> {
        self.secret_box.open(sealed).map_err(|e| {
            SourcesError::SecretBox(format!("{e} (was {KEY_ENV} or {KEY_FILE} changed?)"))
        })
    }

    /// Seals every literal secret; `env:` references and already sealed values are kept.
    pub fn seal(&self, spec: &SourceSpec) -> SourceSpec {
        let mut copy = spec.clone();
        for s in copy.secrets_mut() {
            if !is_env_ref(s) && !s.starts_with(SEALED_PREFIX) {
                *s = format!("{SEALED_PREFIX}{}", self.secret_box.seal(s));
            }
        }
        copy
    }

    /// Opens every sealed secret back into its literal.
    pub fn open(&self, spec: &SourceSpec) -> Result<SourceSpec, SourcesError> {
        let mut copy = spec.clone();
        let name = copy.name().to_string();
        for s in copy.secrets_mut() {
            if let Some(sealed) = s.strip_prefix(SEALED_PREFIX) {
                *s = self.secret_box.open(sealed).map_err(|e| {
                    SourcesError::SecretBox(format!(
                        "source '{name}': {e} (was {KEY_ENV} or {KEY_FILE} changed?)"
                    ))
                })?;
            }
        }
        Ok(copy)
    }
}

/// Resolves one secret string: `env:NAME` from the environment, else the literal.
pub(crate) fn resolve(source: &str, value: &str) -> Result<String, SourcesError> {
    if value.starts_with(SEALED_PREFIX) {
        return Err(SourcesError::Secret {
            name: source.to_string(),
            reason: "a secret is still sealed (load the spec through the source store)".into(),
        });
    }
    Secret::from_config(value)
        .map(|s| s.expose().to_string())
        .map_err(|e| SourcesError::Secret {
            name: source.to_string(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{AuthSpec, OpenApiSpec};

    fn spec(token: &str) -> SourceSpec {
        SourceSpec::Openapi(OpenApiSpec {
            name: "p".into(),
            location: "a.json".into(),
            auth: Some(AuthSpec::Bearer {
                token: token.into(),
            }),
            ..Default::default()
        })
    }

    #[test]
    fn seal_and_open_round_trip() {
        let sealer = Sealer::new(SecretBox::from_base64(&SecretBox::generate_key()).unwrap());
        let other = Sealer::new(SecretBox::from_base64(&SecretBox::generate_key()).unwrap());
        let check = sealer.check_value();
        assert!(sealer.matches_check(&check));
        assert!(
            !other.matches_check(&check),
            "another key does not match the check value"
        );
        assert!(!sealer.matches_check("garbage"));
        let sealed = sealer.seal(&spec("hunter2"));
        let text = serde_json::to_string(&sealed).unwrap();
        assert!(
            !text.contains("hunter2") && text.contains(SEALED_PREFIX),
            "{text}"
        );
        assert_eq!(
            sealer.seal(&sealed),
            sealed,
            "sealing twice changes nothing"
        );
        assert_eq!(sealer.open(&sealed).unwrap(), spec("hunter2"));
        let env = sealer.seal(&spec("env:SOME_TOKEN"));
        assert_eq!(env, spec("env:SOME_TOKEN"), "env references are not sealed");
        let other = Sealer::new(SecretBox::from_base64(&SecretBox::generate_key()).unwrap());
        assert!(other.open(&sealed).unwrap_err().to_string().contains("'p'"));
    }

    #[test]
    fn key_file_is_created_private() {
        let dir = tempfile::tempdir().unwrap();
        let a = Sealer::from_data_dir(dir.path()).unwrap();
        let sealed = a.seal(&spec("s3cret"));
        let b = Sealer::from_data_dir(dir.path()).unwrap();
        assert_eq!(b.open(&sealed).unwrap(), spec("s3cret"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn env_references_resolve_or_name_the_variable() {
        assert_eq!(resolve("p", "literal").unwrap(), "literal");
        let e = resolve("p", "env:TOOLSHED_SOURCES_TEST_UNSET_VAR").unwrap_err();
        assert!(
            e.to_string().contains("TOOLSHED_SOURCES_TEST_UNSET_VAR"),
            "{e}"
        );
    }
}
