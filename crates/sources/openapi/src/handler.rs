//! [`OpenApiHandler`]: performs one imported operation over HTTP through `toolshed-outbound`.

use std::sync::Arc;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::Method;
use serde_json::{json, Map, Value};
use toolshed_core::{ToolContext, ToolError, ToolErrorKind, ToolHandler};
use toolshed_outbound::{
    secret::{redact, redact_value},
    AuthConfig, Outbound, OutboundError, Secret,
};

const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Path,
    Query,
    Header,
    Cookie,
}

/// How an array or object parameter is serialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Repeated `name=value` pairs (3.x `form` + explode, 2.0 `multi`).
    Exploded,
    /// One value joined by this delimiter (`,` for csv/form, `|`, ` `, `\t`).
    Joined(char),
    /// `name[key]=value` for objects.
    DeepObject,
    /// The value serialised as JSON (3.x `content` parameters).
    Json,
}

/// One argument property bound to a request parameter.
#[derive(Debug, Clone)]
pub struct ParamBinding {
    /// The property name in the tool's input.
    pub prop: String,
    /// The name on the wire.
    pub name: String,
    pub location: Location,
    pub style: Style,
}

/// How the request body is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyKind {
    Json,
    Form,
    Multipart,
    /// Sent as text with this content type.
    Raw(String),
}

/// How the request body is assembled from the arguments.
#[derive(Debug, Clone)]
pub enum BodyBinding {
    /// The whole body is the value of one property.
    Whole { prop: String, kind: BodyKind },
    /// The body is an object of these (property, wire name) pairs.
    Fields {
        fields: Vec<(String, String)>,
        kind: BodyKind,
    },
}

/// Everything the handler needs to perform one operation.
#[derive(Debug, Clone)]
pub struct OperationPlan {
    pub method: Method,
    /// The path template, e.g. `/pets/{petId}`.
    pub path: String,
    /// The base URL, when the document or the options gave one.
    pub base_url: Option<String>,
    pub params: Vec<ParamBinding>,
    pub body: Option<BodyBinding>,
    /// The credentials sent, all of them (an OpenAPI security alternative may need several).
    pub auth: Vec<AuthConfig>,
    /// Why no credentials are sent although the operation's security asks for some; added to
    /// the error when the upstream answers 401 or 403.
    pub auth_unmet: Option<String>,
}

/// Settings shared by all tools of one import.
pub struct Shared {
    pub outbound: Outbound,
    /// Every configured secret of the source, blanked out of results and errors.
    pub secrets: Vec<Secret>,
}

impl Shared {
    /// The configured secrets plus the OAuth2 access tokens fetched so far.
    fn secrets(&self) -> Vec<Secret> {
        let mut out = self.secrets.clone();
        out.extend(self.outbound.issued_tokens());
        out
    }
}

/// Calls one operation.
pub struct OpenApiHandler {
    pub plan: OperationPlan,
    pub shared: Arc<Shared>,
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Number(_) | Value::Bool(_) => v.to_string(),
        other => other.to_string(),
    }
}

fn pairs_for(b: &ParamBinding, v: &Value) -> Vec<(String, String)> {
    match (v, b.style) {
        (_, Style::Json) => vec![(b.name.clone(), v.to_string())],
        (Value::Array(items), Style::Exploded) => {
            items.iter().map(|x| (b.name.clone(), scalar(x))).collect()
        }
        (Value::Array(items), Style::Joined(_)) | (Value::Array(items), Style::DeepObject) => {
            let d = if let Style::Joined(d) = b.style {
                d
            } else {
                ','
            };
            vec![(
                b.name.clone(),
                items
                    .iter()
                    .map(scalar)
                    .collect::<Vec<_>>()
                    .join(&d.to_string()),
            )]
        }
        (Value::Object(m), Style::DeepObject) => m
            .iter()
            .map(|(k, x)| (format!("{}[{k}]", b.name), scalar(x)))
            .collect(),
        (Value::Object(m), Style::Exploded) => {
            m.iter().map(|(k, x)| (k.clone(), scalar(x))).collect()
        }
        (Value::Object(m), Style::Joined(d)) => vec![(
            b.name.clone(),
            m.iter()
                .flat_map(|(k, x)| [k.clone(), scalar(x)])
                .collect::<Vec<_>>()
                .join(&d.to_string()),
        )],
        _ => vec![(b.name.clone(), scalar(v))],
    }
}

/// A path-parameter value as one path segment: percent-encoded, with its dots encoded too when
/// it is made only of dots or holds a `/` (so that no server that decodes `%2F` sees `..`).
fn path_value(text: &str) -> String {
    let enc = utf8_percent_encode(text, PATH_SEGMENT).to_string();
    if text.contains('/') || text.chars().all(|c| c == '.') {
        enc.replace('.', "%2E")
    } else {
        enc
    }
}

/// A `.` or `..` segment, literal or percent-encoded: URL parsers remove it, or the segment
/// before it, so a parameter value that becomes one would change the path, whatever the
/// encoding.
fn is_dot_segment(segment: &str) -> bool {
    let s = segment.to_ascii_lowercase().replace("%2e", ".");
    s == "." || s == ".."
}

fn joined(v: &Value) -> String {
    match v {
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(","),
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, x)| [k.clone(), scalar(x)])
            .collect::<Vec<_>>()
            .join(","),
        other => scalar(other),
    }
}

impl OpenApiHandler {
    /// The credentials of this call: the source's, with a per-user connection's grant (the
    /// caller's own token, from the call context) in place. A caller without a grant gets the
    /// `grant_required` error the engine pauses on.
    async fn auth_for(
        &self,
        ctx: &ToolContext,
    ) -> Result<(std::borrow::Cow<'_, [AuthConfig]>, Option<String>), ToolError> {
        let auth = &self.plan.auth;
        let Some(user) = auth.iter().find_map(AuthConfig::user_connection) else {
            return Ok((std::borrow::Cow::Borrowed(auth.as_slice()), None));
        };
        let token = ctx.user_token(user).await?;
        let with_grant = auth.iter().map(|a| a.for_user(&token)).collect();
        Ok((std::borrow::Cow::Owned(with_grant), Some(token)))
    }

    /// A result with the source's own secrets blanked out, in case the API reflects them.
    fn redacted_value(&self, mut v: Value) -> Value {
        let owned = self.shared.secrets();
        let secrets: Vec<&str> = owned.iter().map(Secret::expose).collect();
        if !secrets.is_empty() {
            redact_value(&mut v, &secrets);
        }
        v
    }

    fn redacted(&self, mut e: ToolError) -> ToolError {
        let owned = self.shared.secrets();
        let secrets: Vec<&str> = owned.iter().map(Secret::expose).collect();
        if secrets.is_empty() {
            return e;
        }
        e.message = redact(&e.message, &secrets);
        if let Some(d) = e.data.take() {
            let text = redact(&d.to_string(), &secrets);
            e.data = Some(serde_json::from_str(&text).unwrap_or(Value::String(text)));
        }
        e
    }

    async fn perform(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        let plan = &self.plan;
        let empty = Map::new();
        let args = match &args {
            Value::Object(m) => m,
            Value::Null => &empty,
            _ => return Err(ToolError::invalid("arguments must be a JSON object")),
        };
        let base = plan.base_url.as_deref().ok_or_else(|| {
            ToolError::invalid(
                "this API has no server URL: the document names none (or only a relative one); set base_url when importing",
            )
        })?;
        let Parts {
            path,
            query,
            headers,
            cookies,
        } = bind_params(plan, args)?;
        let url = format!("{}{}", base.trim_end_matches('/'), path);
        let ob = &self.shared.outbound;
        let mut req = ob.request(plan.method.clone(), &url)?;
        if !query.is_empty() {
            req = req.query(&query);
        }
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let (auth, user_token) = self.auth_for(&ctx).await?;
        req = AuthConfig::apply_all(&auth, req, ob, cookies).await?;
        if let Some(body) = &plan.body {
            req = with_body(req, body, args);
        }
        let resp = ob.send(req.timeout(ctx.timeout)).await?;
        let resp = match &user_token {
            // The caller's own token is a secret like the source's: never echoed back.
            Some(token) => toolshed_outbound::Response {
                body: redact(&resp.text(), &[token.as_str()]).into_bytes(),
                ..resp
            },
            None => resp,
        };
        let status = resp.status.as_u16();
        if let (Some(unmet), 401 | 403) = (&plan.auth_unmet, status) {
            let body_excerpt = resp.body_excerpt();
            return Err(ToolError::new(
                ToolErrorKind::Unauthorized,
                format!("upstream answered {status}: {body_excerpt} ({unmet})"),
            )
            .with_data(json!({"status": status, "body_excerpt": body_excerpt})));
        }
        let resp = resp
            .error_for_status()
            .map_err(OutboundError::into_tool_error)?;
        Ok(match resp.value() {
            Value::Null => json!({"status": status}),
            v => v,
        })
    }
}

/// Where the arguments go in the request: the path with its parameters filled in, the query
/// pairs, headers and cookies.
struct Parts {
    path: String,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    cookies: Vec<(String, String)>,
}

/// Puts each parameter argument where the operation declares it. A missing path parameter, or
/// one that would make a `.` or `..` segment, is refused.
fn bind_params(plan: &OperationPlan, args: &Map<String, Value>) -> Result<Parts, ToolError> {
    let mut parts = Parts {
        path: plan.path.clone(),
        query: Vec::new(),
        headers: Vec::new(),
        cookies: Vec::new(),
    };
    for b in &plan.params {
        let v = args.get(&b.prop).filter(|v| !v.is_null());
        match (b.location, v) {
            (Location::Path, v) => {
                let v = v.ok_or_else(|| {
                    ToolError::invalid(format!("missing path parameter '{}'", b.prop))
                })?;
                let text = if b.style == Style::Json {
                    v.to_string()
                } else {
                    joined(v)
                };
                parts.path = parts
                    .path
                    .replace(&format!("{{{}}}", b.name), &path_value(&text));
                if parts.path.split('/').any(is_dot_segment) {
                    return Err(ToolError::invalid(format!(
                        "path parameter '{}' may not be '.' or '..': it would change the path",
                        b.prop
                    )));
                }
            }
            (_, None) => {}
            (Location::Query, Some(v)) => parts.query.extend(pairs_for(b, v)),
            (Location::Header, Some(v)) => parts.headers.push((b.name.clone(), joined(v))),
            (Location::Cookie, Some(v)) => parts.cookies.push((b.name.clone(), joined(v))),
        }
    }
    Ok(parts)
}

/// The request body from the arguments, encoded as the operation declares (nothing when the
/// arguments carry none).
fn with_body(
    req: reqwest::RequestBuilder,
    body: &BodyBinding,
    args: &Map<String, Value>,
) -> reqwest::RequestBuilder {
    let (value, kind) = match body {
        BodyBinding::Whole { prop, kind } => (args.get(prop).cloned(), kind),
        BodyBinding::Fields { fields, kind } => {
            let mut m = Map::new();
            for (prop, name) in fields {
                if let Some(v) = args.get(prop) {
                    m.insert(name.clone(), v.clone());
                }
            }
            ((!m.is_empty()).then_some(Value::Object(m)), kind)
        }
    };
    let Some(value) = value else {
        return req;
    };
    match kind {
        BodyKind::Json => req.json(&value),
        BodyKind::Form => {
            let pairs: Vec<(String, String)> = match &value {
                Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), scalar(v))).collect(),
                other => vec![("body".into(), scalar(other))],
            };
            req.form(&pairs)
        }
        BodyKind::Multipart => {
            let mut form = reqwest::multipart::Form::new();
            if let Value::Object(m) = &value {
                for (k, v) in m {
                    form = form.text(k.clone(), scalar(v));
                }
            }
            req.multipart(form)
        }
        BodyKind::Raw(ct) => req
            .header(reqwest::header::CONTENT_TYPE, ct.as_str())
            .body(scalar(&value)),
    }
}

#[async_trait::async_trait]
impl ToolHandler for OpenApiHandler {
    async fn call(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        self.perform(ctx, args)
            .await
            .map(|v| self.redacted_value(v))
            .map_err(|e| self.redacted(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(style: Style) -> ParamBinding {
        ParamBinding {
            prop: "p".into(),
            name: "tags".into(),
            location: Location::Query,
            style,
        }
    }

    #[test]
    fn query_serialisation() {
        let v = json!(["a", "b"]);
        assert_eq!(
            pairs_for(&b(Style::Exploded), &v),
            vec![("tags".into(), "a".into()), ("tags".into(), "b".into())]
        );
        assert_eq!(
            pairs_for(&b(Style::Joined('|')), &v),
            vec![("tags".into(), "a|b".into())]
        );
        assert_eq!(
            pairs_for(&b(Style::DeepObject), &json!({"x": 1})),
            vec![("tags[x]".into(), "1".into())]
        );
        assert_eq!(
            pairs_for(&b(Style::Json), &json!({"x": 1})),
            vec![("tags".into(), "{\"x\":1}".into())]
        );
        assert_eq!(
            pairs_for(&b(Style::Exploded), &json!(true)),
            vec![("tags".into(), "true".into())]
        );
    }

    #[test]
    fn dot_values_never_make_dot_segments() {
        assert_eq!(path_value("v1.2"), "v1.2");
        assert_eq!(path_value("../admin"), "%2E%2E%2Fadmin");
        assert_eq!(path_value("%2e%2e"), "%252e%252e");
        assert_eq!(path_value(".."), "%2E%2E");
        for s in [".", "..", "%2E%2e", ".%2E", "%2e"] {
            assert!(is_dot_segment(s), "{s}");
        }
        for s in ["...", "%252e%252e", "%2E%2E%2Fadmin", "a.b", ""] {
            assert!(!is_dot_segment(s), "{s}");
        }
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(
            utf8_percent_encode("a b/c?", PATH_SEGMENT).to_string(),
            "a%20b%2Fc%3F"
        );
    }
}
