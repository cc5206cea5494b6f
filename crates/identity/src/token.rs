//! Bearer tokens: a JWT is checked against its issuer's published keys (signature, `iss`,
//! `aud`, `exp`/`nbf` with leeway, `sub`); an opaque token is asked about at the issuer's
//! introspection endpoint when one is configured. Either way the answer is the claims, from
//! which [`signed_in`] derives the principal, its roles and its scopes.

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use crate::config::{trim_slash, OAuthConfig};
use crate::issuer::Issuer;
use crate::{bounded, AuthError, SignedIn};

fn invalid(message: impl Into<String>) -> AuthError {
    AuthError::InvalidToken(message.into())
}

/// Whether `token` has the shape of a JWS compact serialization (three base64url parts).
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|p| !p.is_empty())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Verifies a JWT from one of `issuers` and returns its claims.
pub(crate) async fn verify_jwt(
    config: &OAuthConfig,
    issuers: &[Issuer],
    token: &str,
) -> Result<(usize, Map<String, Value>), AuthError> {
    let header = jsonwebtoken::decode_header(token)
        .map_err(|_| invalid("the token is not a well-formed JWT"))?;
    if matches!(
        header.alg,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    ) {
        return Err(invalid(
            "the token is signed with a shared secret (HS*); only keys an issuer publishes are accepted",
        ));
    }
    // The issuer is read before the signature is checked only to pick the keys to check it with.
    let unverified: Map<String, Value> = jsonwebtoken::dangerous::insecure_decode_claims(token)
        .map_err(|_| invalid("the token's claims are not a JSON object"))?;
    let iss = unverified
        .get("iss")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("the token has no 'iss' claim"))?;
    let index = issuers.iter().position(|i| i.is(iss)).ok_or_else(|| {
        invalid(format!(
            "the token's issuer '{}' is not trusted",
            bounded(iss)
        ))
    })?;
    let issuer = &issuers[index];
    let jwk = issuer.key(header.kid.as_deref()).await?;
    if let Some(declared) = jwk.common.key_algorithm {
        if declared.to_string() != format!("{:?}", header.alg) {
            return Err(invalid(format!(
                "the token says alg {:?} but its key is for {declared}",
                header.alg
            )));
        }
    }
    let key = DecodingKey::from_jwk(&jwk)
        .map_err(|e| invalid(format!("the issuer's key cannot be used: {e}")))?;
    let mut validation = Validation::new(header.alg);
    validation.leeway = config.leeway();
    validation.validate_nbf = true;
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.set_issuer(&[iss]);
    let resource = trim_slash(&config.resource);
    validation.set_audience(&[resource.to_string(), format!("{resource}/")]);
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|e| refusal(&e, config))?;
    Ok((index, data.claims))
}

/// What a failed check means, for the caller.
fn refusal(e: &jsonwebtoken::errors::Error, config: &OAuthConfig) -> AuthError {
    use jsonwebtoken::errors::ErrorKind as K;
    invalid(match e.kind() {
        K::ExpiredSignature => "the token has expired".to_string(),
        K::ImmatureSignature => "the token is not valid yet (nbf)".to_string(),
        K::InvalidAudience => format!(
            "the token is not meant for this server: its audience is not '{}'",
            config.resource
        ),
        K::InvalidIssuer => "the token's issuer does not match".to_string(),
        K::InvalidSignature => "the token's signature does not verify".to_string(),
        K::InvalidAlgorithm => "the token's algorithm does not fit its key".to_string(),
        K::MissingRequiredClaim(c) => format!("the token has no '{}' claim", bounded(c)),
        K::InvalidClaimFormat(c) => format!("the token's '{}' claim is malformed", bounded(c)),
        _ => "the token is malformed".to_string(),
    })
}

/// Checks an introspection answer (RFC 7662) as a JWT's claims are checked: active, issued by
/// this issuer, for this resource when it names an audience, not expired.
pub(crate) fn check_introspected(
    config: &OAuthConfig,
    issuer: &Issuer,
    answer: Value,
) -> Result<Map<String, Value>, AuthError> {
    let Value::Object(mut claims) = answer else {
        return Err(invalid("the introspection answer is not an object"));
    };
    if claims.get("active") != Some(&Value::Bool(true)) {
        return Err(invalid("the token is not active"));
    }
    match claims.get("iss").and_then(Value::as_str) {
        Some(iss) if !issuer.is(iss) => return Err(invalid("the token's issuer does not match")),
        Some(_) => {}
        None => {
            claims.insert("iss".into(), Value::String(issuer.id().to_string()));
        }
    }
    if let Some(aud) = claims.get("aud") {
        if !audience_names(aud, &config.resource) {
            return Err(invalid(format!(
                "the token is not meant for this server: its audience is not '{}'",
                config.resource
            )));
        }
    }
    let now = crate::now_secs();
    if let Some(exp) = claims.get("exp").and_then(Value::as_u64) {
        if exp + config.leeway() < now {
            return Err(invalid("the token has expired"));
        }
    }
    if claims.get("sub").and_then(Value::as_str).is_none() {
        // A client's own token (client credentials) names the client: RFC 9068 makes it `sub`.
        match claims.get("client_id").cloned() {
            Some(Value::String(id)) => {
                claims.insert("sub".into(), Value::String(id));
            }
            _ => return Err(invalid("the token has no 'sub' claim")),
        }
    }
    Ok(claims)
}

fn audience_names(aud: &Value, resource: &str) -> bool {
    let is = |v: &Value| {
        v.as_str()
            .is_some_and(|a| trim_slash(a) == trim_slash(resource))
    };
    match aud {
        Value::Array(items) => items.iter().any(is),
        v => is(v),
    }
}

/// The principal, roles and scopes of verified claims.
pub(crate) fn signed_in(
    config: &OAuthConfig,
    issuer: &Issuer,
    claims: &Map<String, Value>,
) -> SignedIn {
    let iss = claims
        .get("iss")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let sub = claims
        .get("sub")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut roles: Vec<String> = Vec::new();
    if let Some(claim) = &issuer.config.roles_claim {
        for value in claim_values(claims, claim) {
            if let Some(mapped) = issuer.config.role_map.get(&value) {
                roles.extend(mapped.iter().cloned());
            }
        }
    }
    if roles.is_empty() {
        roles = config.default_roles.clone();
    }
    roles.sort();
    roles.dedup();
    SignedIn {
        principal: format!("{}#{}", trim_slash(iss), sub),
        roles,
        scopes: scopes_of(claims),
        expires_at: claims.get("exp").and_then(Value::as_u64),
        token: toolshed_outbound::Secret::new(""),
    }
}

/// The string values of a claim: a string, an array of strings, or a space-separated list;
/// a name that is not a top-level claim is tried as a dotted path (`realm_access.roles`).
fn claim_values(claims: &Map<String, Value>, name: &str) -> Vec<String> {
    let found = claims.get(name).or_else(|| {
        let mut parts = name.split('.');
        let first = claims.get(parts.next()?)?;
        parts.try_fold(first, |v, p| v.get(p))
    });
    match found {
        Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// `scope` (space-separated, RFC 8693 / 9068) or `scp` (an array, as some issuers send).
fn scopes_of(claims: &Map<String, Value>) -> Vec<String> {
    let mut scopes = claim_values(claims, "scope");
    scopes.extend(claim_values(claims, "scp"));
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jwt_shape() {
        assert!(looks_like_jwt("eyJhbGciOi.eyJpc3Mi.c2ln"));
        assert!(!looks_like_jwt("plain-api-key"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a.b.c d"));
        assert!(!looks_like_jwt("..sig"));
    }

    #[test]
    fn claim_values_take_strings_arrays_and_paths() {
        let claims = json!({
            "groups": ["admins", "devs", 3],
            "scope": "toolshed read",
            "realm_access": {"roles": ["ops"]},
            "https://example.com/roles": "x y",
        });
        let claims = claims.as_object().unwrap();
        assert_eq!(claim_values(claims, "groups"), ["admins", "devs"]);
        assert_eq!(claim_values(claims, "realm_access.roles"), ["ops"]);
        assert_eq!(
            claim_values(claims, "https://example.com/roles"),
            ["x", "y"]
        );
        assert!(claim_values(claims, "missing.path").is_empty());
        assert_eq!(scopes_of(claims), ["toolshed", "read"]);
    }

    #[test]
    fn audiences_match_with_or_without_a_trailing_slash() {
        assert!(audience_names(
            &json!("https://t.example/"),
            "https://t.example"
        ));
        assert!(audience_names(
            &json!(["x", "https://t.example"]),
            "https://t.example/"
        ));
        assert!(!audience_names(
            &json!("https://other.example"),
            "https://t.example"
        ));
    }
}
