//! Secrets at rest: [`SecretBox`] seals them with AES-256-GCM.
//!
//! Nothing here leaves the machine: stored sources keep their literal secrets sealed with this
//! box (see `toolshed-registry`). The key comes from an environment variable (base64 of 32 bytes) or from a key file that is
//! created with mode 0600 on first use. Sealed text is base64 of a 12-byte random nonce followed
//! by the ciphertext and tag.

use std::io::Write;
use std::path::Path;

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::RngCore;

const NONCE_LEN: usize = 12;

/// Why a key could not be had, or a sealed value could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SealedError {
    #[error("secret box: {0}")]
    Key(String),
    #[error("secret box: {0}")]
    Open(String),
    #[error("secret box key file: {0}")]
    Io(#[from] std::io::Error),
}

/// Encrypts and decrypts secrets with one AES-256-GCM key.
#[derive(Clone)]
pub struct SecretBox {
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox([REDACTED])")
    }
}

fn err(msg: impl Into<String>) -> SealedError {
    SealedError::Key(msg.into())
}

fn open_err(msg: impl Into<String>) -> SealedError {
    SealedError::Open(msg.into())
}

impl SecretBox {
    /// A box for a raw 32-byte key.
    pub fn from_key(key: &[u8; 32]) -> Self {
        Self {
            cipher: Aes256Gcm::new(&Key::<Aes256Gcm>::from(*key)),
        }
    }

    /// A box for a base64-encoded 32-byte key.
    pub fn from_base64(key: &str) -> Result<Self, SealedError> {
        let bytes = STANDARD
            .decode(key.trim())
            .map_err(|e| err(format!("key is not base64: {e}")))?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| err(format!("key must be 32 bytes, got {}", b.len())))?;
        Ok(Self::from_key(&key))
    }

    /// A fresh random key, base64-encoded.
    pub fn generate_key() -> String {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        STANDARD.encode(key)
    }

    /// Uses the key in `key_env` when set; else reads `key_file`, creating it (mode 0600) with a
    /// new random key when it does not exist.
    pub fn from_env_or_file(key_env: &str, key_file: &Path) -> Result<Self, SealedError> {
        if let Ok(k) = std::env::var(key_env) {
            if !k.trim().is_empty() {
                return Self::from_base64(&k)
                    .map_err(|e| err(format!("environment variable {key_env}: {e}")));
            }
        }
        match std::fs::read_to_string(key_file) {
            Ok(text) => Self::from_base64(&text)
                .map_err(|e| err(format!("key file {}: {e}", key_file.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Self::generate_key();
                if let Some(dir) = key_file.parent() {
                    if !dir.as_os_str().is_empty() {
                        std::fs::create_dir_all(dir)?;
                    }
                }
                let mut opts = std::fs::OpenOptions::new();
                opts.write(true).create_new(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt;
                    opts.mode(0o600);
                }
                let mut f = opts.open(key_file)?;
                f.write_all(key.as_bytes())?;
                f.sync_all()?;
                Self::from_base64(&key)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Encrypts `plain`: base64 of nonce + ciphertext.
    pub fn seal(&self, plain: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let ct = self
            .cipher
            .encrypt(&Nonce::from(nonce), plain.as_bytes())
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut out = Vec::with_capacity(NONCE_LEN + ct.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        STANDARD.encode(out)
    }

    /// Decrypts what [`SecretBox::seal`] produced; fails on a wrong key or tampering.
    pub fn open(&self, sealed: &str) -> Result<String, SealedError> {
        let bytes = STANDARD
            .decode(sealed.trim())
            .map_err(|e| open_err(format!("sealed value is not base64: {e}")))?;
        if bytes.len() < NONCE_LEN + 16 {
            return Err(open_err("sealed value is too short"));
        }
        let (nonce, ct) = bytes.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| open_err("bad nonce"))?;
        let plain = self
            .cipher
            .decrypt(&Nonce::from(nonce), ct)
            .map_err(|_| open_err("cannot open sealed value: wrong key or tampered data"))?;
        String::from_utf8(plain).map_err(|_| open_err("sealed value is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let b = SecretBox::from_base64(&SecretBox::generate_key()).unwrap();
        let sealed = b.seal("p@ss wörd");
        assert!(!sealed.contains("p@ss"));
        assert_eq!(b.open(&sealed).unwrap(), "p@ss wörd");
        assert_ne!(b.seal("x"), b.seal("x"), "nonces are random");
    }

    #[test]
    fn wrong_key_fails() {
        let a = SecretBox::from_base64(&SecretBox::generate_key()).unwrap();
        let b = SecretBox::from_base64(&SecretBox::generate_key()).unwrap();
        let e = b.open(&a.seal("secret")).unwrap_err();
        assert!(e.to_string().contains("wrong key"));
    }

    #[test]
    fn tampered_ciphertext_fails() {
        let a = SecretBox::from_base64(&SecretBox::generate_key()).unwrap();
        let mut raw = STANDARD.decode(a.seal("secret")).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        assert!(a.open(&STANDARD.encode(&raw)).is_err());
        assert!(a.open("not base64!").is_err());
        assert!(a.open("").is_err());
    }

    #[test]
    fn bad_keys_are_rejected() {
        assert!(SecretBox::from_base64("c2hvcnQ=").is_err());
        assert!(SecretBox::from_base64("***").is_err());
    }

    #[test]
    fn key_file_is_created_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/secret.key");
        let env = "TOOLSHED_SECRETBOX_TEST_UNSET_KEY";
        let a = SecretBox::from_env_or_file(env, &path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let b = SecretBox::from_env_or_file(env, &path).unwrap();
        assert_eq!(b.open(&a.seal("v")).unwrap(), "v");
    }

    #[test]
    fn env_key_wins() {
        let key = SecretBox::generate_key();
        std::env::set_var("TOOLSHED_SECRETBOX_TEST_KEY", &key);
        let dir = tempfile::tempdir().unwrap();
        let a = SecretBox::from_env_or_file("TOOLSHED_SECRETBOX_TEST_KEY", &dir.path().join("k"))
            .unwrap();
        assert!(!dir.path().join("k").exists());
        let b = SecretBox::from_base64(&key).unwrap();
        assert_eq!(b.open(&a.seal("v")).unwrap(), "v");
    }
}
