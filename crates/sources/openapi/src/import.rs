//! Operations to tools: paths, names, descriptions, input/output schemas, annotations, plans.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Map, Value};
use toolshed_core::path::to_segment;
use toolshed_core::tool::title_case;
use toolshed_core::{Annotations, Tool, ToolDef, ToolPath};
use toolshed_outbound::{AuthConfig, Outbound};

use crate::error::OpenApiError;
use crate::handler::{
    BodyBinding, BodyKind, Location, OpenApiHandler, OperationPlan, ParamBinding, Shared, Style,
};
use crate::refs::{DocId, Docs};
use crate::schema::{Converter, DefLimits, Deps, Mode, Version};
use crate::security::{OperationAuth, SchemeCredentials, Security};

/// Progress callback: (operations done, operations total).
pub type ImportProgress = std::sync::Arc<dyn Fn(usize, usize) + Send + Sync>;

/// How to import a document.
#[derive(Default)]
pub struct ImportOptions {
    /// The first path segment of every tool.
    pub namespace: String,
    /// Overrides the document's servers.
    pub base_url: Option<String>,
    /// Where the document was fetched from, when it came from an `http(s)` URL. Without a
    /// `base_url`, a document's OAuth2 `tokenUrl` on another host than this URL's gets no
    /// client secret unless the credentials name the token URL (see [`crate::security`]).
    pub spec_url: Option<String>,
    /// One auth sent by every operation, whatever the document's `security` says.
    pub auth: AuthConfig,
    /// Credentials per security scheme name of the document. When given, each operation sends
    /// the credentials its own `security` requirement asks for (see [`crate::security`]);
    /// `auth` must then be [`AuthConfig::None`].
    pub scheme_credentials: BTreeMap<String, SchemeCredentials>,
    /// The client for calls; a default (public addresses only) one is made when absent.
    pub outbound: Option<Outbound>,
    /// The directory relative-file `$ref`s of the root document are resolved against.
    pub base_dir: Option<PathBuf>,
    pub progress: Option<ImportProgress>,
    /// Dot-globs over the tool paths whose GET operations are also resources
    /// ([`crate::resources`]).
    pub resources: Vec<String>,
}

impl std::fmt::Debug for ImportOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImportOptions")
            .field("namespace", &self.namespace)
            .field("base_url", &self.base_url)
            .field("spec_url", &self.spec_url)
            .field("auth", &self.auth)
            .field("scheme_credentials", &self.scheme_credentials)
            .field("base_dir", &self.base_dir)
            .finish_non_exhaustive()
    }
}

/// The result of an import.
#[derive(Debug, Default)]
pub struct Imported {
    pub tools: Vec<Tool>,
    pub warnings: Vec<String>,
    /// Operations not imported: (`METHOD /path`, reason).
    pub skipped: Vec<(String, String)>,
}

/// Definitions kept per tool schema; larger closures are pruned (input) or dropped (output).
pub const MAX_DEFS: usize = 200;
/// Bytes of definitions (compact JSON) kept per tool schema, as [`MAX_DEFS`]. Without it, one
/// description (Microsoft Graph beta) gave 2,276 tools input schemas of 0.5–0.8 MB each,
/// 1.3 GB in all; an agent reading one would pay some 150,000 tokens.
pub const MAX_DEFS_BYTES: usize = 64 * 1024;
/// [`MAX_DEFS`] and [`MAX_DEFS_BYTES`].
const DEF_LIMITS: DefLimits = DefLimits {
    count: MAX_DEFS,
    bytes: MAX_DEFS_BYTES,
};

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Detects the dialect from `swagger` / `openapi`.
pub fn detect_version(doc: &Value) -> Result<Version, OpenApiError> {
    if let Some(v) = doc.get("swagger") {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        return if text == "2.0" || text == "2" {
            Ok(Version::Swagger2)
        } else {
            Err(OpenApiError::UnsupportedVersion(format!(
                "swagger \"{text}\""
            )))
        };
    }
    match doc.get("openapi") {
        Some(Value::String(s)) if s.starts_with("3.0") => Ok(Version::OpenApi30),
        Some(Value::String(s)) if s.starts_with("3.1") => Ok(Version::OpenApi31),
        Some(v) => Err(OpenApiError::UnsupportedVersion(format!(
            "openapi \"{}\"",
            v.as_str()
                .map(String::from)
                .unwrap_or_else(|| v.to_string())
        ))),
        None => Err(OpenApiError::UnsupportedVersion(
            "(none: the document has neither an 'openapi' nor a 'swagger' field)".into(),
        )),
    }
}

fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn readable(name: &str) -> String {
    let simple = !name.is_empty()
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if simple {
        name.to_string()
    } else {
        to_segment(name)
    }
}

fn substitute_vars(url: &str, server: &Value) -> String {
    let mut out = url.to_string();
    if let Some(vars) = server.get("variables").and_then(Value::as_object) {
        for (k, v) in vars {
            let d = match v.get("default") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            out = out.replace(&format!("{{{k}}}"), &d);
        }
    }
    out
}

fn server_url(servers: Option<&Value>) -> Option<Option<String>> {
    let first = servers?.as_array()?.first()?;
    let url = first.get("url")?.as_str()?;
    let url = substitute_vars(url, first);
    Some(if toolshed_core::is_url(&url) {
        Some(url)
    } else {
        None
    })
}

fn content_pick(content: &Map<String, Value>) -> Option<(&str, &Value)> {
    let keys: Vec<&String> = content.keys().collect();
    let is_json = |k: &str| {
        let k = k
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        k == "application/json" || k.ends_with("+json") || k.ends_with("/json") || k == "*/*"
    };
    let pick = keys
        .iter()
        .find(|k| is_json(k))
        .or_else(|| {
            keys.iter()
                .find(|k| k.starts_with("application/x-www-form-urlencoded"))
        })
        .or_else(|| keys.iter().find(|k| k.starts_with("multipart/form-data")))
        .or_else(|| keys.first())?;
    Some((pick.as_str(), &content[pick.as_str()]))
}

fn kind_for(media: &str) -> BodyKind {
    let m = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if m == "application/json" || m.ends_with("+json") || m.ends_with("/json") || m == "*/*" {
        BodyKind::Json
    } else if m == "application/x-www-form-urlencoded" {
        BodyKind::Form
    } else if m.starts_with("multipart/") {
        BodyKind::Multipart
    } else {
        BodyKind::Raw(media.to_string())
    }
}

struct Builder<'c, 'd, 'a> {
    conv: &'c mut Converter<'d, 'a>,
    version: Version,
    warnings: Vec<String>,
    outputs_dropped: usize,
    /// Input schemas whose definitions went past [`DEF_LIMITS`] (the rest left open).
    inputs_shortened: usize,
}

/// One property of the input schema under construction.
struct Prop {
    name: String,
    schema: Value,
    required: bool,
}

struct Input {
    props: Vec<Prop>,
    names: HashSet<String>,
    deps: Deps,
}

impl Input {
    fn unique(&mut self, want: &str, alt: &str) -> (String, bool) {
        if self.names.insert(want.to_string()) {
            return (want.to_string(), false);
        }
        let mut name = alt.to_string();
        let mut n = 2;
        while !self.names.insert(name.clone()) {
            name = format!("{alt}_{n}");
            n += 1;
        }
        (name, true)
    }
}

/// The object-shaped view of a body schema that can be flattened.
struct FlatBody<'v> {
    props: Vec<(String, DocId, &'v Value)>,
    required: HashSet<String>,
}

impl<'c, 'd, 'a> Builder<'c, 'd, 'a> {
    fn flatten<'s>(&self, doc: DocId, s: &'s Value, out: &mut FlatBody<'s>, depth: usize) -> bool
    where
        'd: 's,
        'a: 's,
    {
        if depth > 8 {
            return false;
        }
        let docs: &'s Docs<'a> = self.conv.docs();
        let Ok((doc, s)) = docs.deref(doc, s) else {
            return false;
        };
        let Some(o) = s.as_object() else { return false };
        if o.contains_key("oneOf") || o.contains_key("anyOf") || o.contains_key("not") {
            return false;
        }
        match o.get("type") {
            None => {}
            Some(Value::String(t)) if t == "object" => {}
            _ => return false,
        }
        if o.get("additionalProperties")
            .is_some_and(|a| a.is_object() && a.as_object().is_some_and(|m| !m.is_empty()))
        {
            return false;
        }
        if let Some(all) = o.get("allOf") {
            let Some(all) = all.as_array() else {
                return false;
            };
            for part in all {
                if !self.flatten(doc, part, out, depth + 1) {
                    return false;
                }
            }
        }
        if let Some(req) = o.get("required").and_then(Value::as_array) {
            out.required
                .extend(req.iter().filter_map(|r| r.as_str().map(String::from)));
        }
        match o.get("properties") {
            Some(Value::Object(props)) => {
                for (k, v) in props {
                    if !out.props.iter().any(|(n, _, _)| n == k) {
                        out.props.push((k.clone(), doc, v));
                    }
                }
                true
            }
            Some(_) => false,
            None => o.contains_key("allOf"),
        }
    }

    fn add_body(
        &mut self,
        input: &mut Input,
        doc: DocId,
        schema: &Value,
        kind: BodyKind,
        required: bool,
        where_: &str,
    ) -> Result<BodyBinding, String> {
        let mut flat = FlatBody {
            props: Vec::new(),
            required: HashSet::new(),
        };
        let can_flatten = !matches!(kind, BodyKind::Raw(_))
            && self.flatten(doc, schema, &mut flat, 0)
            && !flat.props.is_empty();
        if can_flatten {
            let docs = self.conv.docs();
            let mut fields = Vec::new();
            for (name, pdoc, ps) in flat.props {
                let read_only = docs
                    .deref(pdoc, ps)
                    .map(|(_, v)| v.get("readOnly") == Some(&Value::Bool(true)))
                    .unwrap_or(false);
                if read_only {
                    continue;
                }
                let converted = self
                    .conv
                    .convert(pdoc, ps, Mode::Request, &mut input.deps)?;
                let (prop, renamed) = input.unique(&name, &format!("body_{name}"));
                if renamed {
                    self.warnings.push(format!(
                        "{where_}: body property '{name}' collides with a parameter; it is '{prop}' in the tool input"
                    ));
                }
                input.props.push(Prop {
                    name: prop.clone(),
                    schema: converted,
                    required: required && flat.required.contains(&name),
                });
                fields.push((prop, name));
            }
            return Ok(BodyBinding::Fields { fields, kind });
        }
        let converted = self
            .conv
            .convert(doc, schema, Mode::Request, &mut input.deps)?;
        let (prop, renamed) = input.unique("body", "request_body");
        if renamed {
            self.warnings.push(format!(
                "{where_}: a parameter is named 'body'; the request body is '{prop}'"
            ));
        }
        let mut schema = converted;
        if let Value::Object(m) = &mut schema {
            m.entry("description")
                .or_insert_with(|| json!("The request body."));
        }
        input.props.push(Prop {
            name: prop.clone(),
            schema,
            required,
        });
        Ok(BodyBinding::Whole { prop, kind })
    }

    /// A 2.0 non-body parameter's schema, built from its own fields.
    fn v2_param_schema(p: &Value) -> Value {
        let mut s = Map::new();
        for k in [
            "type",
            "format",
            "items",
            "enum",
            "default",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "minLength",
            "maxLength",
            "pattern",
            "minItems",
            "maxItems",
            "uniqueItems",
            "multipleOf",
            "x-nullable",
        ] {
            if let Some(v) = p.get(k) {
                s.insert(k.to_string(), v.clone());
            }
        }
        Value::Object(s)
    }

    #[allow(clippy::too_many_arguments)]
    fn operation(
        &mut self,
        root: &Value,
        path: &str,
        item_doc: DocId,
        item: &Value,
        method: &str,
        op: &Value,
        base_url: Option<&str>,
    ) -> Result<(Value, Option<Value>, OperationPlan), String> {
        let where_ = format!("{} {path}", method.to_uppercase());
        let params = merged_parameters(self.conv.docs(), item_doc, item, op)?;
        let mut input = Input {
            props: Vec::new(),
            names: HashSet::new(),
            deps: Vec::new(),
        };
        let bound = self.bind_parameters(&mut input, &params, &where_)?;
        let body_binding = if self.version == Version::Swagger2 {
            self.swagger2_body(&mut input, root, op, &bound, &where_)?
        } else {
            self.request_body(&mut input, item_doc, op, &where_)?
        };
        let schema = self.input_schema(input);
        let output = self.output_schema(item_doc, op, &where_);
        let plan = OperationPlan {
            method: Method::from_bytes(method.to_uppercase().as_bytes())
                .map_err(|e| e.to_string())?,
            path: path.to_string(),
            base_url: base_url.map(String::from),
            params: bound.params,
            body: body_binding,
            auth: Vec::new(),
            auth_unmet: None,
        };
        Ok((schema, output, plan))
    }

    /// Binds each path, query, header and cookie parameter as an input property; Swagger 2.0
    /// `body` and `formData` parameters are set apart for the body.
    fn bind_parameters<'p>(
        &mut self,
        input: &mut Input,
        params: &[(DocId, &'p Value)],
        where_: &str,
    ) -> Result<BoundParams<'p>, String> {
        let mut bound = BoundParams {
            params: Vec::new(),
            form_fields: Vec::new(),
            v2_body: None,
        };
        for (pdoc, p) in params {
            let Some(name) = p.get("name").and_then(Value::as_str) else {
                continue;
            };
            let location = match p.get("in").and_then(Value::as_str).unwrap_or("") {
                "path" => Location::Path,
                "query" => Location::Query,
                "header" => Location::Header,
                "cookie" => Location::Cookie,
                "body" => {
                    bound.v2_body = Some((*pdoc, *p));
                    continue;
                }
                "formData" => {
                    bound.form_fields.push((*pdoc, *p));
                    continue;
                }
                _ => continue,
            };
            if location == Location::Header
                && ["accept", "content-type", "authorization"]
                    .contains(&name.to_ascii_lowercase().as_str())
            {
                continue;
            }
            let (raw_schema, style) = self.param_schema_and_style(p, location);
            bound
                .params
                .push(self.add_param(input, *pdoc, p, name, location, raw_schema, style, where_)?);
        }
        Ok(bound)
    }

    /// A Swagger 2.0 body: the `body` parameter, else the `formData` fields (multipart when a
    /// field is a file or the operation consumes multipart).
    fn swagger2_body(
        &mut self,
        input: &mut Input,
        root: &Value,
        op: &Value,
        bound: &BoundParams<'_>,
        where_: &str,
    ) -> Result<Option<BodyBinding>, String> {
        let consumes: Vec<String> = op
            .get("consumes")
            .or_else(|| root.get("consumes"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if let Some((bdoc, bp)) = bound.v2_body {
            let kind =
                if consumes.is_empty() || consumes.iter().any(|c| kind_for(c) == BodyKind::Json) {
                    BodyKind::Json
                } else {
                    kind_for(&consumes[0])
                };
            let schema = bp.get("schema").cloned().unwrap_or(json!({}));
            let required = bp.get("required") == Some(&Value::Bool(true));
            return Ok(Some(
                self.add_body(input, bdoc, &schema, kind, required, where_)?,
            ));
        }
        if bound.form_fields.is_empty() {
            return Ok(None);
        }
        let has_file = bound
            .form_fields
            .iter()
            .any(|(_, p)| p.get("type").and_then(Value::as_str) == Some("file"));
        let kind = if has_file || consumes.iter().any(|c| c.starts_with("multipart/")) {
            BodyKind::Multipart
        } else {
            BodyKind::Form
        };
        let fields = self.v2_form_fields(input, &bound.form_fields, where_)?;
        Ok(Some(BodyBinding::Fields { fields, kind }))
    }

    /// An OpenAPI 3 `requestBody`: the first usable media type of its content.
    fn request_body(
        &mut self,
        input: &mut Input,
        item_doc: DocId,
        op: &Value,
        where_: &str,
    ) -> Result<Option<BodyBinding>, String> {
        let Some(rb) = op.get("requestBody") else {
            return Ok(None);
        };
        let (rdoc, rb) = self
            .conv
            .docs()
            .deref(item_doc, rb)
            .map_err(|e| format!("requestBody: {e}"))?;
        let Some((media, mt)) = rb
            .get("content")
            .and_then(Value::as_object)
            .and_then(content_pick)
        else {
            return Ok(None);
        };
        let schema = mt.get("schema").cloned().unwrap_or(json!({}));
        let required = rb.get("required") == Some(&Value::Bool(true));
        let kind = kind_for(media);
        Ok(Some(
            self.add_body(input, rdoc, &schema, kind, required, where_)?,
        ))
    }

    /// A parameter's schema before conversion and how its value is serialised: Swagger 2.0
    /// `collectionFormat`, OpenAPI 3 `style` / `explode`, or a `content` media type (JSON).
    fn param_schema_and_style(&self, p: &Value, location: Location) -> (Value, Style) {
        if self.version == Version::Swagger2 {
            let style = match p
                .get("collectionFormat")
                .and_then(Value::as_str)
                .unwrap_or("csv")
            {
                "multi" => Style::Exploded,
                "pipes" => Style::Joined('|'),
                "ssv" => Style::Joined(' '),
                "tsv" => Style::Joined('\t'),
                _ => Style::Joined(','),
            };
            (Self::v2_param_schema(p), style)
        } else if let Some(s) = p.get("schema") {
            let explode_default = matches!(location, Location::Query | Location::Cookie);
            let explode = p.get("explode").and_then(Value::as_bool).unwrap_or(
                match p.get("style").and_then(Value::as_str) {
                    Some("form") | None => explode_default,
                    _ => false,
                },
            );
            let style = match p.get("style").and_then(Value::as_str) {
                Some("deepObject") => Style::DeepObject,
                Some("pipeDelimited") => Style::Joined('|'),
                Some("spaceDelimited") => Style::Joined(' '),
                _ if explode => Style::Exploded,
                _ => Style::Joined(','),
            };
            (s.clone(), style)
        } else if let Some((_, media)) = p
            .get("content")
            .and_then(Value::as_object)
            .and_then(content_pick)
        {
            (
                media.get("schema").cloned().unwrap_or(json!({})),
                Style::Json,
            )
        } else {
            (json!({"type": "string"}), Style::Joined(','))
        }
    }

    /// Converts one parameter's schema into a property of the tool input (renamed with its
    /// location when the name is taken) and returns how the call sends it.
    #[allow(clippy::too_many_arguments)]
    fn add_param(
        &mut self,
        input: &mut Input,
        pdoc: DocId,
        p: &Value,
        name: &str,
        location: Location,
        raw_schema: Value,
        style: Style,
        where_: &str,
    ) -> Result<ParamBinding, String> {
        let mut schema = self
            .conv
            .convert(pdoc, &raw_schema, Mode::Request, &mut input.deps)?;
        if let (Value::Object(m), Some(d)) = (&mut schema, str_of(p, "description")) {
            if !m.contains_key("$ref") {
                m.entry("description").or_insert_with(|| json!(d));
            }
        }
        if p.get("deprecated") == Some(&Value::Bool(true)) {
            if let Value::Object(m) = &mut schema {
                m.insert("deprecated".into(), json!(true));
            }
        }
        let want = readable(name);
        let loc_name = match location {
            Location::Path => "path",
            Location::Query => "query",
            Location::Header => "header",
            Location::Cookie => "cookie",
        };
        let (prop, renamed) = input.unique(&want, &format!("{loc_name}_{want}"));
        if renamed {
            self.warnings.push(format!(
                "{where_}: {loc_name} parameter '{name}' collides with another input; it is '{prop}' in the tool input"
            ));
        }
        let required = location == Location::Path || p.get("required") == Some(&Value::Bool(true));
        input.props.push(Prop {
            name: prop.clone(),
            schema,
            required,
        });
        Ok(ParamBinding {
            prop,
            name: name.to_string(),
            location,
            style,
        })
    }

    /// Swagger 2.0 `formData` parameters as input properties; returns (property, field name).
    fn v2_form_fields(
        &mut self,
        input: &mut Input,
        form_fields: &[(DocId, &Value)],
        where_: &str,
    ) -> Result<Vec<(String, String)>, String> {
        let mut fields = Vec::new();
        for (fdoc, p) in form_fields {
            let Some(name) = p.get("name").and_then(Value::as_str) else {
                continue;
            };
            let mut schema = self.conv.convert(
                *fdoc,
                &Self::v2_param_schema(p),
                Mode::Request,
                &mut input.deps,
            )?;
            if let (Value::Object(m), Some(d)) = (&mut schema, str_of(p, "description")) {
                m.entry("description").or_insert_with(|| json!(d));
            }
            let want = readable(name);
            let (prop, renamed) = input.unique(&want, &format!("form_{want}"));
            if renamed {
                self.warnings.push(format!(
                    "{where_}: form field '{name}' collides with a parameter; it is '{prop}' in the tool input"
                ));
            }
            input.props.push(Prop {
                name: prop.clone(),
                schema,
                required: p.get("required") == Some(&Value::Bool(true)),
            });
            fields.push((prop, name.to_string()));
        }
        Ok(fields)
    }

    /// The tool's input schema: every property, the required ones, and the definitions they use.
    fn input_schema(&mut self, input: Input) -> Value {
        let mut properties = Map::new();
        let mut required = Vec::new();
        let Input { props, deps, .. } = input;
        for p in props {
            if p.required {
                required.push(json!(p.name.clone()));
            }
            properties.insert(p.name, p.schema);
        }
        let mut schema = json!({"type": "object", "properties": properties});
        if !required.is_empty() {
            schema["required"] = Value::Array(required);
        }
        if !self
            .conv
            .attach_defs(&mut schema, &deps, Mode::Request, DEF_LIMITS)
        {
            self.inputs_shortened += 1;
        }
        schema
    }

    fn output_schema(&mut self, doc: DocId, op: &Value, where_: &str) -> Option<Value> {
        let responses = op.get("responses")?.as_object()?;
        let mut codes: Vec<&String> = responses.keys().filter(|k| k.starts_with('2')).collect();
        codes.sort();
        let docs = self.conv.docs();
        for code in codes {
            let Ok((rdoc, r)) = docs.deref(doc, &responses[code.as_str()]) else {
                continue;
            };
            let raw = if self.version == Version::Swagger2 {
                r.get("schema")
            } else {
                r.get("content").and_then(Value::as_object).and_then(|c| {
                    let (media, mt) = content_pick(c)?;
                    (kind_for(media) == BodyKind::Json)
                        .then(|| mt.get("schema"))
                        .flatten()
                })
            };
            let raw = raw?;
            let mut deps = Vec::new();
            return match self.conv.convert(rdoc, raw, Mode::Response, &mut deps) {
                Ok(mut s) => {
                    if !s.is_object() {
                        return None;
                    }
                    if !self
                        .conv
                        .attach_defs(&mut s, &deps, Mode::Response, DEF_LIMITS)
                    {
                        // A partial output schema helps no one; leave it out.
                        self.outputs_dropped += 1;
                        return None;
                    }
                    Some(s)
                }
                Err(e) => {
                    self.warnings
                        .push(format!("{where_}: no output schema: {e}"));
                    None
                }
            };
        }
        None
    }
}

fn default_annotations(method: &str) -> Annotations {
    match method {
        "get" | "head" | "options" | "trace" => Annotations::READ_ONLY,
        "put" | "delete" => Annotations {
            idempotent: true,
            ..Annotations::DESTRUCTIVE
        },
        _ => Annotations::DESTRUCTIVE,
    }
}

/// The URL a document's OAuth2 token URL must share its host with: the pinned base URL, else
/// the URL the document came from; `None` (a local document, no pinned base URL) trusts the
/// document.
fn token_url_trust(opts: &ImportOptions) -> Option<(&'static str, &str)> {
    if let Some(b) = opts.base_url.as_deref() {
        return Some(("the pinned base_url", b));
    }
    opts.spec_url
        .as_deref()
        .filter(|u| toolshed_core::is_url(u))
        .map(|u| ("the URL the document was fetched from", u))
}

/// Imports every operation of `doc` as a tool.
/// An operation's parameters after binding: the plan's parameters, and Swagger 2.0 body
/// parameters kept for the body.
struct BoundParams<'p> {
    params: Vec<ParamBinding>,
    form_fields: Vec<(DocId, &'p Value)>,
    v2_body: Option<(DocId, &'p Value)>,
}

/// Path-level parameters, overridden by operation-level ones of the same name and location.
fn merged_parameters<'d>(
    docs: &'d Docs<'_>,
    item_doc: DocId,
    item: &'d Value,
    op: &'d Value,
) -> Result<Vec<(DocId, &'d Value)>, String> {
    let mut params: Vec<(DocId, &Value)> = Vec::new();
    for list in [item.get("parameters"), op.get("parameters")] {
        let Some(list) = list.and_then(Value::as_array) else {
            continue;
        };
        for p in list {
            let (pdoc, p) = docs
                .deref(item_doc, p)
                .map_err(|e| format!("parameter: {e}"))?;
            let key = (
                str_of(p, "name").unwrap_or(""),
                str_of(p, "in").unwrap_or(""),
            );
            params.retain(|(_, q)| {
                (
                    str_of(q, "name").unwrap_or(""),
                    str_of(q, "in").unwrap_or(""),
                ) != key
            });
            params.push((pdoc, p));
        }
    }
    Ok(params)
}

pub fn import(doc: &Value, opts: &ImportOptions) -> Result<Imported, OpenApiError> {
    let (version, paths) = check_document(doc, opts)?;
    let ns = opts.namespace.trim();
    let mut result = Imported::default();
    let shared = shared_transport(opts)?;
    let docs = Docs::new(doc, opts.base_dir.as_deref());
    let mut conv = Converter::new(&docs, version);
    let mut b = Builder {
        conv: &mut conv,
        version,
        warnings: Vec::new(),
        outputs_dropped: 0,
        inputs_shortened: 0,
    };
    let doc_base = document_base(doc, version);
    let mut security = scheme_security(doc, version, &docs, opts, doc_base.as_deref())?;
    let source_auth: Vec<AuthConfig> = match &opts.auth {
        AuthConfig::None => Vec::new(),
        a => vec![a.clone()],
    };
    let resource_patterns = resource_patterns(&opts.resources, &mut result.warnings);
    let total = count_operations(doc);
    let mut done = 0;
    let mut used: HashSet<String> = HashSet::new();
    let mut no_base_warned = false;
    for (path, item) in paths {
        let (item_doc, item) = match docs.deref(0, item) {
            Ok(x) => x,
            Err(e) => {
                result
                    .skipped
                    .push((path.clone(), format!("path item: {e}")));
                continue;
            }
        };
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            done += 1;
            if let Some(p) = &opts.progress {
                p(done, total);
            }
            let where_ = format!("{} {path}", method.to_uppercase());
            if !op.is_object() {
                result
                    .skipped
                    .push((where_, "the operation is not an object".into()));
                continue;
            }
            let base_url = operation_base_url(opts, item, op, doc_base.as_deref());
            if base_url.is_none() && !no_base_warned {
                no_base_warned = true;
                result.warnings.push(
                    "the document names no absolute server URL; set base_url or calls will fail"
                        .into(),
                );
            }
            let (input, output, mut plan) =
                match b.operation(doc, path, item_doc, item, method, op, base_url.as_deref()) {
                    Ok(x) => x,
                    Err(e) => {
                        result.skipped.push((where_, e));
                        continue;
                    }
                };
            let (op_seg, tool_path) = tool_path_for(
                ns,
                path,
                method,
                op,
                &mut used,
                &where_,
                &mut result.warnings,
            );
            let tp = match ToolPath::parse(&tool_path) {
                Ok(p) => p,
                Err(e) => {
                    result.skipped.push((where_, e.to_string()));
                    continue;
                }
            };
            let mut def = tool_def(tp, ns, method, op, &op_seg, &where_).with_input(input);
            if let Some(o) = output {
                def = def.with_output(o);
            }
            let op_auth = match &mut security {
                Some(s) => s.for_operation(&where_, op),
                None => OperationAuth {
                    auths: source_auth.clone(),
                    unmet: None,
                },
            };
            plan.auth = op_auth.auths;
            plan.auth_unmet = op_auth.unmet;
            if crate::resources::wanted(&resource_patterns, def.path.as_str()) {
                match crate::resources::resource_entry(ns, &def, &plan, &shared) {
                    Ok(entry) => result.tools.push(entry),
                    Err(why) => result.warnings.push(format!("not a resource: {why}")),
                }
            }
            let handler = OpenApiHandler {
                plan,
                shared: shared.clone(),
            };
            result.tools.push(Tool::new(def, Arc::new(handler)));
        }
    }
    let left_out = LeftOut {
        outputs: b.outputs_dropped,
        inputs: b.inputs_shortened,
    };
    finish_warnings(&mut result, left_out, b.warnings, security.as_ref());
    Ok(result)
}

/// Schemas cut down to [`DEF_LIMITS`] in one import.
struct LeftOut {
    /// Output schemas left out.
    outputs: usize,
    /// Input schemas with some definitions left open.
    inputs: usize,
}

/// The warnings gathered while building and binding security, after the operations'.
fn finish_warnings(
    result: &mut Imported,
    left_out: LeftOut,
    mut warnings: Vec<String>,
    security: Option<&Security>,
) {
    if left_out.outputs > 0 {
        warnings.push(format!(
            "{} output schemas left out: they need more than {MAX_DEFS} definitions or \
             {MAX_DEFS_BYTES} bytes of them",
            left_out.outputs
        ));
    }
    if left_out.inputs > 0 {
        warnings.push(format!(
            "{} input schemas shortened: past {MAX_DEFS} definitions or {MAX_DEFS_BYTES} bytes \
             of them, the nested objects they refer to are left open (any value passes)",
            left_out.inputs
        ));
    }
    result.warnings.extend(warnings);
    if let Some(s) = security {
        result
            .warnings
            .extend(s.warnings().iter().map(ToString::to_string));
    }
}

/// The `resources` patterns; one that does not parse is a warning.
fn resource_patterns(
    patterns: &[String],
    warnings: &mut Vec<String>,
) -> Vec<toolshed_core::Pattern> {
    let mut out = Vec::new();
    for p in patterns {
        match toolshed_core::Pattern::parse(p) {
            Ok(p) => out.push(p),
            Err(e) => warnings.push(format!("resources: pattern '{p}': {e}")),
        }
    }
    out
}

/// Per-scheme credentials resolved against the document's security schemes, when any are given.
fn scheme_security<'d>(
    doc: &'d Value,
    version: Version,
    docs: &Docs<'d>,
    opts: &ImportOptions,
    doc_base: Option<&str>,
) -> Result<Option<Security>, OpenApiError> {
    if opts.scheme_credentials.is_empty() {
        return Ok(None);
    }
    Ok(Some(Security::new(
        doc,
        version,
        docs,
        &opts.scheme_credentials,
        opts.base_url.as_deref().or(doc_base),
        token_url_trust(opts),
    )?))
}

/// The configured base URL, else the operation's, path item's or document's first server.
fn operation_base_url(
    opts: &ImportOptions,
    item: &Value,
    op: &Value,
    doc_base: Option<&str>,
) -> Option<String> {
    match &opts.base_url {
        Some(u) => Some(u.clone()),
        None => server_url(op.get("servers"))
            .or_else(|| server_url(item.get("servers")))
            .flatten()
            .or_else(|| doc_base.map(str::to_string)),
    }
}

/// The tool's definition without schemas: name and description from the operation,
/// annotations by method (overrides are the registry's `OverrideSpec`).
fn tool_def(
    tp: ToolPath,
    ns: &str,
    method: &str,
    op: &Value,
    op_seg: &str,
    where_: &str,
) -> ToolDef {
    let (name, description) = name_and_description(op, op_seg, where_);
    let mut def =
        ToolDef::new(tp, name, description.trim()).with_annotations(default_annotations(method));
    def.origin = format!("source:{ns}");
    def
}

/// The document is an object of a known version with paths, and the namespace is usable.
fn check_document<'d>(
    doc: &'d Value,
    opts: &ImportOptions,
) -> Result<(Version, &'d Map<String, Value>), OpenApiError> {
    if !doc.is_object() {
        return Err(OpenApiError::NotAnObject(match doc {
            Value::Array(_) => "an array",
            Value::String(_) => "a string",
            _ => "a scalar",
        }));
    }
    let version = detect_version(doc)?;
    let ns = opts.namespace.trim();
    if ToolPath::parse(&format!("{ns}.x")).is_err() {
        return Err(OpenApiError::Namespace(opts.namespace.clone()));
    }
    match doc.get("paths").and_then(Value::as_object) {
        Some(p) if !p.is_empty() => Ok((version, p)),
        _ => Err(OpenApiError::NoPaths),
    }
}

/// What every handler of the import shares: the HTTP client and the secrets to redact.
fn shared_transport(opts: &ImportOptions) -> Result<Arc<Shared>, OpenApiError> {
    let outbound = match &opts.outbound {
        Some(o) => o.clone(),
        None => Outbound::with_defaults().map_err(|e| OpenApiError::Fetch {
            url: String::new(),
            message: e.to_string(),
        })?,
    };
    if !opts.scheme_credentials.is_empty() && opts.auth != AuthConfig::None {
        return Err(OpenApiError::AuthConflict);
    }
    let mut secrets: Vec<toolshed_outbound::Secret> = opts
        .scheme_credentials
        .values()
        .flat_map(SchemeCredentials::secrets)
        .collect();
    secrets.extend(
        opts.auth
            .secrets()
            .into_iter()
            .map(toolshed_outbound::Secret::new),
    );
    Ok(Arc::new(Shared { outbound, secrets }))
}

/// The document's own base URL: Swagger 2.0 `schemes` + `host` + `basePath` (https preferred),
/// else the first absolute `servers` URL.
fn document_base(doc: &Value, version: Version) -> Option<String> {
    if version == Version::Swagger2 {
        doc.get("host").and_then(Value::as_str).map(|host| {
            let scheme = doc
                .get("schemes")
                .and_then(Value::as_array)
                .and_then(|s| {
                    s.iter()
                        .filter_map(Value::as_str)
                        .find(|s| *s == "https")
                        .or_else(|| s.first().and_then(Value::as_str))
                })
                .unwrap_or("https");
            let base_path = doc.get("basePath").and_then(Value::as_str).unwrap_or("");
            format!("{scheme}://{host}{}", base_path.trim_end_matches('/'))
        })
    } else {
        server_url(doc.get("servers")).flatten()
    }
}

/// `ns.<tag>.<operation>` from the first tag (else the first literal path segment) and the
/// `operationId` (else method and path), the tag prefix dropped; a taken path gets `_2`, `_3`...
/// with a warning. Returns the operation segment and the tool path, now marked `used`.
fn tool_path_for(
    ns: &str,
    path: &str,
    method: &str,
    op: &Value,
    used: &mut HashSet<String>,
    where_: &str,
    warnings: &mut Vec<String>,
) -> (String, String) {
    let tag = op
        .get("tags")
        .and_then(Value::as_array)
        .and_then(|t| t.iter().find_map(Value::as_str))
        .map(String::from)
        .or_else(|| {
            path.split('/')
                .find(|s| !s.is_empty() && !s.starts_with('{'))
                .map(String::from)
        })
        .unwrap_or_else(|| "default".into());
    let tag_seg = to_segment(&tag);
    let mut op_seg = match str_of(op, "operationId") {
        Some(id) => to_segment(id),
        None => to_segment(&format!("{method}_{path}")),
    };
    if let Some(rest) = op_seg.strip_prefix(&format!("{tag_seg}_")) {
        if !rest.is_empty() {
            op_seg = rest.to_string();
        }
    }
    let mut tool_path = format!("{ns}.{tag_seg}.{op_seg}");
    if used.contains(&tool_path) {
        let mut n = 2;
        while used.contains(&format!("{tool_path}_{n}")) {
            n += 1;
        }
        let new = format!("{tool_path}_{n}");
        warnings.push(format!(
            "{where_}: tool path '{tool_path}' is taken; using '{new}'"
        ));
        tool_path = new;
    }
    used.insert(tool_path.clone());
    (op_seg, tool_path)
}

/// The tool's Title Case name (summary up to 80 characters, else `operationId`, else the
/// operation segment) and its description (summary and description; deprecation noted).
fn name_and_description(op: &Value, op_seg: &str, where_: &str) -> (String, String) {
    let op_id = str_of(op, "operationId");
    let summary = str_of(op, "summary");
    let name = match (summary, op_id) {
        (Some(s), _) if s.chars().count() <= 80 => title_case(s),
        (_, Some(id)) => title_case(id),
        _ => title_case(op_seg),
    };
    let mut description = match (summary, str_of(op, "description")) {
        (Some(s), Some(d)) if d != s => format!("{s}\n\n{d}"),
        (Some(s), _) => s.to_string(),
        (None, Some(d)) => d.to_string(),
        (None, None) => where_.to_string(),
    };
    if op.get("deprecated") == Some(&Value::Bool(true)) {
        description =
            format!("[deprecated] {description}\n\nThis operation is deprecated upstream.");
    }
    (name, description)
}

/// Counts operations per method without importing (for reports).
pub fn count_operations(doc: &Value) -> usize {
    doc.get("paths")
        .and_then(Value::as_object)
        .map(|p| {
            p.values()
                .map(|item| METHODS.iter().filter(|m| item.get(**m).is_some()).count())
                .sum()
        })
        .unwrap_or(0)
}
