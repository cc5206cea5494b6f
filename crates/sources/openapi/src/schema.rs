//! OpenAPI schema objects to self-contained JSON Schema (2020-12).
//!
//! Referenced schemas become entries of the tool schema's `$defs` with refs rewritten to
//! `#/$defs/Name`, which also covers circular references. Conversions are cached per import, so
//! a component used by many operations is converted once. Dialect differences are normalised:
//! 3.0 `nullable` and 2.0 `x-nullable` become a `null` in the type array, boolean
//! `exclusiveMinimum`/`exclusiveMaximum` become numeric, 2.0 `type: file` becomes a binary
//! string, and malformed keywords that would stop a validator from compiling are dropped.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{json, Map, Value};

use crate::refs::{DocId, Docs};

/// The OpenAPI dialect of the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Swagger2,
    OpenApi30,
    OpenApi31,
}

/// Which side of the call a schema describes; it decides how `readOnly`/`writeOnly` apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Mode {
    Request,
    Response,
}

struct Def {
    name: String,
    schema: Value,
    /// The schema's length as compact JSON (what it adds to a tool's schema).
    bytes: usize,
    deps: Vec<String>,
    error: Option<String>,
}

/// How much of a definition closure a tool's schema may carry; the nearest definitions are
/// kept first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefLimits {
    /// Definitions.
    pub count: usize,
    /// Bytes of the definitions as compact JSON.
    pub bytes: usize,
}

const MAX_DEPTH: usize = 64;
const TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "array", "object", "null",
];

pub(crate) struct Converter<'d, 'a> {
    docs: &'d Docs<'a>,
    version: Version,
    defs: HashMap<(Mode, String), Def>,
    names: HashMap<(Mode, String), String>,
    patterns: HashMap<String, bool>,
}

/// The definitions one schema needs, by key.
pub(crate) type Deps = Vec<String>;

fn sanitize_name(label: &str) -> String {
    let mut s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        s.push_str("schema");
    }
    s
}

fn as_count(v: &Value) -> Option<Value> {
    if let Some(u) = v.as_u64() {
        return Some(json!(u));
    }
    match v.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 1e15 => Some(json!(f as u64)),
        _ => None,
    }
}

impl<'d, 'a> Converter<'d, 'a> {
    pub fn new(docs: &'d Docs<'a>, version: Version) -> Self {
        Self {
            docs,
            version,
            defs: HashMap::new(),
            names: HashMap::new(),
            patterns: HashMap::new(),
        }
    }

    pub fn docs(&self) -> &'d Docs<'a> {
        self.docs
    }

    fn pattern_ok(&mut self, p: &str) -> bool {
        if let Some(ok) = self.patterns.get(p) {
            return *ok;
        }
        let ok = toolshed_core::CompiledSchema::compile(&json!({"type": "string", "pattern": p}))
            .is_ok();
        self.patterns.insert(p.to_string(), ok);
        ok
    }

    /// Converts the schema `s` found in document `doc`, adding the definitions it uses to `deps`.
    pub fn convert(
        &mut self,
        doc: DocId,
        s: &Value,
        mode: Mode,
        deps: &mut Deps,
    ) -> Result<Value, String> {
        self.conv(doc, s, mode, deps, 0)
    }

    fn def_ref(
        &mut self,
        doc: DocId,
        reference: &str,
        mode: Mode,
        deps: &mut Deps,
    ) -> Result<String, String> {
        let docs = self.docs;
        let t = docs
            .resolve(doc, reference)
            .map_err(|why| format!("cannot resolve $ref '{reference}': {why}"))?;
        let k = (mode, t.key.clone());
        if let Some(d) = self.defs.get(&k) {
            if let Some(e) = &d.error {
                return Err(e.clone());
            }
            deps.push(t.key);
            return Ok(d.name.clone());
        }
        let base = sanitize_name(&t.label);
        let mut name = base.clone();
        let mut n = 1;
        while self
            .names
            .get(&(mode, name.clone()))
            .is_some_and(|owner| *owner != t.key)
        {
            n += 1;
            name = format!("{base}_{n}");
        }
        self.names.insert((mode, name.clone()), t.key.clone());
        self.defs.insert(
            k.clone(),
            Def {
                name: name.clone(),
                schema: json!({}),
                bytes: 2,
                deps: Vec::new(),
                error: None,
            },
        );
        let mut own = Vec::new();
        let result = self.conv(t.doc, t.value, mode, &mut own, 0);
        let def = self.defs.get_mut(&k).expect("inserted above");
        match result {
            Ok(schema) => {
                def.bytes = serde_json::to_string(&schema).map_or(usize::MAX, |j| j.len());
                def.schema = schema;
                def.deps = own;
                deps.push(t.key);
                Ok(name)
            }
            Err(e) => {
                def.error = Some(e.clone());
                Err(e)
            }
        }
    }

    fn sub(
        &mut self,
        doc: DocId,
        v: &Value,
        mode: Mode,
        deps: &mut Deps,
        depth: usize,
    ) -> Result<Option<Value>, String> {
        match v {
            Value::Bool(_) => Ok(Some(v.clone())),
            Value::Object(_) => self.conv(doc, v, mode, deps, depth + 1).map(Some),
            _ => Ok(None),
        }
    }

    fn sub_list(
        &mut self,
        doc: DocId,
        v: &Value,
        mode: Mode,
        deps: &mut Deps,
        depth: usize,
    ) -> Result<Option<Value>, String> {
        let Some(items) = v.as_array() else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            if let Some(x) = self.sub(doc, it, mode, deps, depth)? {
                out.push(x);
            }
        }
        Ok(if out.is_empty() {
            None
        } else {
            Some(Value::Array(out))
        })
    }

    fn conv(
        &mut self,
        doc: DocId,
        s: &Value,
        mode: Mode,
        deps: &mut Deps,
        depth: usize,
    ) -> Result<Value, String> {
        let obj = match s {
            Value::Object(o) => o,
            Value::Bool(_) => return Ok(s.clone()),
            _ => return Ok(json!({})),
        };
        if depth > MAX_DEPTH {
            return Ok(json!({"description": "(nested too deeply to describe)"}));
        }
        if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
            let name = self.def_ref(doc, r, mode, deps)?;
            let mut out = Map::new();
            out.insert("$ref".into(), Value::String(format!("#/$defs/{name}")));
            if let Some(d) = obj.get("description").and_then(Value::as_str) {
                out.insert("description".into(), Value::String(d.to_string()));
            }
            return Ok(Value::Object(out));
        }
        let mut out = Map::new();
        let mut nullable = false;
        let mut types: Vec<String> = Vec::new();
        for (k, v) in obj {
            match k.as_str() {
                "type" => match v {
                    Value::String(t) => types.push(t.clone()),
                    Value::Array(a) => {
                        types.extend(a.iter().filter_map(|t| t.as_str().map(String::from)))
                    }
                    _ => {}
                },
                "nullable" | "x-nullable" => nullable = v.as_bool() == Some(true),
                _ => {
                    let kept = match self.subschema_keyword(doc, k, v, mode, deps, depth)? {
                        Some(kept) => Some(kept),
                        None => self.value_keyword(doc, obj, k, v, mode, deps),
                    };
                    if let Some((key, value)) = kept {
                        out.insert(key, value);
                    }
                }
            }
        }
        self.finish_bounds_and_types(obj, &mut out, types, nullable);
        self.filter_required(doc, obj, &mut out, mode);
        Ok(Value::Object(out))
    }

    /// A keyword holding schemas (`properties`, `items`, `allOf`, ...), its schemas converted;
    /// `None` when `k` is no such keyword or holds nothing usable.
    fn subschema_keyword(
        &mut self,
        doc: DocId,
        k: &str,
        v: &Value,
        mode: Mode,
        deps: &mut Deps,
        depth: usize,
    ) -> Result<Option<(String, Value)>, String> {
        let converted = match k {
            "properties" | "dependentSchemas" | "patternProperties" => match v.as_object() {
                Some(props) => {
                    let patterns = k == "patternProperties";
                    let p = self.sub_map(doc, props, mode, deps, depth, patterns)?;
                    Some(Value::Object(p))
                }
                None => None,
            },
            "additionalProperties"
            | "unevaluatedProperties"
            | "not"
            | "contains"
            | "propertyNames"
            | "if"
            | "then"
            | "else"
            | "unevaluatedItems" => self.sub(doc, v, mode, deps, depth)?,
            // Draft-4 tuple `items` are 2020-12 `prefixItems`.
            "items" if v.is_array() => {
                let tuple = self.sub_list(doc, v, mode, deps, depth)?;
                return Ok(tuple.map(|x| ("prefixItems".to_string(), x)));
            }
            "items" => self.sub(doc, v, mode, deps, depth)?,
            "prefixItems" | "allOf" | "anyOf" | "oneOf" => {
                self.sub_list(doc, v, mode, deps, depth)?
            }
            _ => None,
        };
        Ok(converted.map(|x| (k.to_string(), x)))
    }

    /// An assertion or annotation keyword kept when its value is well formed (`required`,
    /// `enum`, bounds, `pattern`, `format`, `examples`, `discriminator`, ...).
    fn value_keyword(
        &mut self,
        doc: DocId,
        obj: &Map<String, Value>,
        k: &str,
        v: &Value,
        mode: Mode,
        deps: &mut Deps,
    ) -> Option<(String, Value)> {
        let kept = match k {
            "required" => v.as_array().and_then(|a| unique_names(a)),
            "enum" => v.as_array().and_then(|a| unique_values(a)),
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" if v.is_number() => {
                Some(v.clone())
            }
            "multipleOf" if v.as_f64().is_some_and(|f| f > 0.0) => Some(v.clone()),
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
            | "maxProperties" | "minContains" | "maxContains" => as_count(v),
            "uniqueItems" | "readOnly" | "writeOnly" | "deprecated" if v.is_boolean() => {
                Some(v.clone())
            }
            "pattern" => v.as_str().filter(|p| self.pattern_ok(p)).map(|_| v.clone()),
            "format" | "title" | "description" | "contentMediaType" | "contentEncoding"
                if v.is_string() =>
            {
                Some(v.clone())
            }
            "default" | "const" => Some(v.clone()),
            "examples" if v.is_array() => Some(v.clone()),
            // OpenAPI 3.0's single `example` becomes `examples` unless both are given.
            "example" if !obj.contains_key("examples") => {
                return Some(("examples".into(), Value::Array(vec![v.clone()])));
            }
            "discriminator" => self.discriminator(doc, v, mode, deps),
            _ => None,
        };
        kept.map(|x| (k.to_string(), x))
    }

    /// Each schema of a map (`properties`, `dependentSchemas`, or with `patterns` the
    /// `patternProperties`, whose unusable patterns are dropped) converted.
    fn sub_map(
        &mut self,
        doc: DocId,
        props: &Map<String, Value>,
        mode: Mode,
        deps: &mut Deps,
        depth: usize,
        patterns: bool,
    ) -> Result<Map<String, Value>, String> {
        let mut p = Map::new();
        for (name, ps) in props {
            if patterns && !self.pattern_ok(name) {
                continue;
            }
            if let Some(x) = self.sub(doc, ps, mode, deps, depth)? {
                p.insert(name.clone(), x);
            }
        }
        Ok(p)
    }

    /// Draft-4 boolean exclusive bounds become numeric ones; types are cleaned (2.0 `file` is a
    /// binary string, unknown names dropped) and `nullable` adds `null`.
    fn finish_bounds_and_types(
        &self,
        obj: &Map<String, Value>,
        out: &mut Map<String, Value>,
        types: Vec<String>,
        nullable: bool,
    ) {
        for (flag, bound) in [
            ("exclusiveMinimum", "minimum"),
            ("exclusiveMaximum", "maximum"),
        ] {
            if obj.get(flag) == Some(&Value::Bool(true)) {
                if let Some(b) = out.remove(bound) {
                    out.insert(flag.into(), b);
                }
            }
        }
        // Types: map 2.0 `file`, drop unknown names, add `null` for nullable.
        let mut clean: Vec<String> = Vec::new();
        for t in types {
            let t = if t == "file" {
                out.entry("format").or_insert_with(|| json!("binary"));
                "string".to_string()
            } else {
                t
            };
            if TYPES.contains(&t.as_str()) && !clean.contains(&t) {
                clean.push(t);
            }
        }
        if nullable && self.version != Version::OpenApi31 {
            if !clean.is_empty() && !clean.iter().any(|t| t == "null") {
                clean.push("null".into());
            }
            if let Some(Value::Array(e)) = out.get_mut("enum") {
                if !e.contains(&Value::Null) {
                    e.push(Value::Null);
                }
            }
        }
        match clean.len() {
            0 => {}
            1 => {
                out.insert("type".into(), Value::String(clean.remove(0)));
            }
            _ => {
                out.insert(
                    "type".into(),
                    Value::Array(clean.into_iter().map(Value::String).collect()),
                );
            }
        }
    }

    /// Drops `readOnly` properties from `required` in requests (`writeOnly` in responses).
    fn filter_required(
        &self,
        doc: DocId,
        raw: &Map<String, Value>,
        out: &mut Map<String, Value>,
        mode: Mode,
    ) {
        let Some(Value::Array(req)) = out.get("required") else {
            return;
        };
        let Some(props) = raw.get("properties").and_then(Value::as_object) else {
            return;
        };
        let flag = match mode {
            Mode::Request => "readOnly",
            Mode::Response => "writeOnly",
        };
        let keep: Vec<Value> = req
            .iter()
            .filter(|n| {
                let Some(p) = n.as_str().and_then(|n| props.get(n)) else {
                    return true;
                };
                let resolved = self.docs.deref(doc, p).map(|(_, v)| v).unwrap_or(p);
                resolved.get(flag) != Some(&Value::Bool(true))
            })
            .cloned()
            .collect();
        if keep.is_empty() {
            out.remove("required");
        } else {
            out.insert("required".into(), Value::Array(keep));
        }
    }

    fn discriminator(
        &mut self,
        doc: DocId,
        v: &Value,
        mode: Mode,
        deps: &mut Deps,
    ) -> Option<Value> {
        let d = v.as_object()?;
        let prop = d.get("propertyName")?.as_str()?;
        let mut out = Map::new();
        out.insert("propertyName".into(), json!(prop));
        if let Some(m) = d.get("mapping").and_then(Value::as_object) {
            let mut mapping = Map::new();
            for (k, target) in m {
                let Some(t) = target.as_str() else { continue };
                let reference = if t.contains('#') || t.contains('/') || t.contains('.') {
                    t.to_string()
                } else {
                    match self.version {
                        Version::Swagger2 => format!("#/definitions/{t}"),
                        _ => format!("#/components/schemas/{t}"),
                    }
                };
                if let Ok(name) = self.def_ref(doc, &reference, mode, deps) {
                    mapping.insert(k.clone(), json!(format!("#/$defs/{name}")));
                }
            }
            out.insert("mapping".into(), Value::Object(mapping));
        }
        Some(Value::Object(out))
    }

    /// Adds the `$defs` that `deps` (transitively) need to `schema`, which must be an object.
    ///
    /// Definitions are kept nearest first within `limits` (so many, so many bytes); references
    /// to the others are replaced by an open schema with a note, so the result stays
    /// self-contained. Returns `false` when something was left out.
    pub fn attach_defs(
        &self,
        schema: &mut Value,
        deps: &Deps,
        mode: Mode,
        limits: DefLimits,
    ) -> bool {
        if deps.is_empty() {
            return true;
        }
        let mut seen: HashSet<&str> = HashSet::new();
        let mut queue: VecDeque<&str> = deps.iter().map(String::as_str).collect();
        let mut kept: Vec<&Def> = Vec::new();
        let mut bytes = 0usize;
        let mut complete = true;
        while let Some(key) = queue.pop_front() {
            if !seen.insert(key) {
                continue;
            }
            let Some(d) = self.defs.get(&(mode, key.to_string())) else {
                continue;
            };
            if kept.len() >= limits.count || bytes.saturating_add(d.bytes) > limits.bytes {
                complete = false;
                break;
            }
            bytes = bytes.saturating_add(d.bytes);
            kept.push(d);
            queue.extend(d.deps.iter().map(String::as_str));
        }
        if !complete && mode == Mode::Response {
            // Callers drop partial output schemas: do not copy anything.
            return false;
        }
        let mut defs = Map::new();
        if complete {
            for d in kept {
                defs.insert(d.name.clone(), d.schema.clone());
            }
        } else {
            let names: HashSet<&str> = kept.iter().map(|d| d.name.as_str()).collect();
            for d in &kept {
                let mut s = d.schema.clone();
                prune_refs(&mut s, &names);
                defs.insert(d.name.clone(), s);
            }
            prune_refs(schema, &names);
        }
        if let Value::Object(m) = schema {
            m.insert("$defs".into(), Value::Object(defs));
        }
        complete
    }
}

/// Replaces `$ref`s to definitions outside `keep` with an open schema.
fn prune_refs(v: &mut Value, keep: &HashSet<&str>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                if let Some(name) = r.strip_prefix("#/$defs/") {
                    if !keep.contains(name) {
                        let note = format!("(definition {name} omitted: the schema is too large)");
                        m.remove("$ref");
                        m.entry("description").or_insert(Value::String(note));
                    }
                }
            }
            for (k, x) in m.iter_mut() {
                if k != "$defs" && k != "default" && k != "examples" && k != "const" && k != "enum"
                {
                    prune_refs(x, keep);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| prune_refs(x, keep)),
        _ => {}
    }
}

/// The string names of a `required` list, once each; `None` when there are none.
fn unique_names(a: &[Value]) -> Option<Value> {
    let mut seen = HashSet::new();
    let names: Vec<Value> = a
        .iter()
        .filter(|x| x.is_string())
        .filter(|n| seen.insert(n.as_str().unwrap_or("").to_string()))
        .cloned()
        .collect();
    (!names.is_empty()).then_some(Value::Array(names))
}

/// The values of an `enum`, once each; `None` for an empty list.
fn unique_values(a: &[Value]) -> Option<Value> {
    if a.is_empty() {
        return None;
    }
    let mut uniq: Vec<Value> = Vec::with_capacity(a.len());
    for x in a {
        if !uniq.contains(x) {
            uniq.push(x.clone());
        }
    }
    Some(Value::Array(uniq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolshed_core::CompiledSchema;

    /// At most `count` definitions, of any size.
    fn limits(count: usize) -> DefLimits {
        DefLimits {
            count,
            bytes: usize::MAX,
        }
    }

    fn convert(doc: &Value, s: &Value, version: Version) -> Value {
        let docs = Docs::new(doc, None);
        let mut c = Converter::new(&docs, version);
        let mut deps = Vec::new();
        let mut out = c.convert(0, s, Mode::Request, &mut deps).unwrap();
        assert!(c.attach_defs(&mut out, &deps, Mode::Request, limits(100)));
        CompiledSchema::compile(&out).unwrap();
        out
    }

    #[test]
    fn nullable_and_exclusive_bounds() {
        let doc = json!({});
        let out = convert(
            &doc,
            &json!({"type": "integer", "nullable": true, "minimum": 1, "exclusiveMinimum": true, "x-foo": 1}),
            Version::OpenApi30,
        );
        assert_eq!(
            out,
            json!({"type": ["integer", "null"], "exclusiveMinimum": 1})
        );
    }

    #[test]
    fn circular_refs_become_defs() {
        let doc = json!({"components": {"schemas": {
            "Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}
        }}});
        let out = convert(
            &doc,
            &json!({"$ref": "#/components/schemas/Node"}),
            Version::OpenApi31,
        );
        assert_eq!(out["$ref"], "#/$defs/Node");
        assert_eq!(
            out["$defs"]["Node"]["properties"]["children"]["items"]["$ref"],
            "#/$defs/Node"
        );
        let v = CompiledSchema::compile(&out).unwrap();
        assert!(v.is_valid(&json!({"children": [{"children": []}]})));
        assert!(!v.is_valid(&json!({"children": [{"children": 3}]})));
    }

    #[test]
    fn malformed_keywords_are_dropped() {
        let doc = json!({});
        let out = convert(
            &doc,
            &json!({"type": "object", "required": true, "enum": [], "pattern": "([", "minLength": -1, "items": [{"type": "string"}], "properties": {"a": {"type": "file"}}}),
            Version::Swagger2,
        );
        assert_eq!(
            out,
            json!({"type": "object", "prefixItems": [{"type": "string"}], "properties": {"a": {"type": "string", "format": "binary"}}})
        );
    }

    #[test]
    fn read_only_properties_are_not_required_in_requests() {
        let doc = json!({});
        let out = convert(
            &doc,
            &json!({"type": "object", "required": ["id", "name"], "properties": {"id": {"type": "integer", "readOnly": true}, "name": {"type": "string"}}}),
            Version::OpenApi30,
        );
        assert_eq!(out["required"], json!(["name"]));
    }

    #[test]
    fn discriminator_mapping_is_rewritten() {
        let doc = json!({"components": {"schemas": {"Cat": {"type": "object"}, "Dog": {"type": "object"}}}});
        let out = convert(
            &doc,
            &json!({"oneOf": [{"$ref": "#/components/schemas/Cat"}, {"$ref": "#/components/schemas/Dog"}], "discriminator": {"propertyName": "kind", "mapping": {"cat": "#/components/schemas/Cat", "dog": "Dog"}}}),
            Version::OpenApi30,
        );
        assert_eq!(out["discriminator"]["mapping"]["cat"], "#/$defs/Cat");
        assert_eq!(out["discriminator"]["mapping"]["dog"], "#/$defs/Dog");
        assert!(out["$defs"]["Dog"].is_object());
    }

    #[test]
    fn large_closures_are_pruned_but_self_contained() {
        let doc = json!({"components": {"schemas": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
            "B": {"type": "object", "properties": {"c": {"$ref": "#/components/schemas/C"}}},
            "C": {"type": "string"}
        }}});
        let docs = Docs::new(&doc, None);
        let mut c = Converter::new(&docs, Version::OpenApi30);
        let mut deps = Vec::new();
        let mut out = c
            .convert(
                0,
                &json!({"$ref": "#/components/schemas/A"}),
                Mode::Request,
                &mut deps,
            )
            .unwrap();
        assert!(!c.attach_defs(&mut out, &deps, Mode::Request, limits(2)));
        assert_eq!(out["$defs"].as_object().unwrap().len(), 2);
        assert!(out["$defs"]["B"]["properties"]["c"].get("$ref").is_none());
        CompiledSchema::compile(&out).unwrap();
    }

    #[test]
    fn unresolvable_refs_name_the_ref() {
        let doc = json!({});
        let docs = Docs::new(&doc, None);
        let mut c = Converter::new(&docs, Version::OpenApi30);
        let e = c
            .convert(
                0,
                &json!({"$ref": "#/components/schemas/Missing"}),
                Mode::Request,
                &mut Vec::new(),
            )
            .unwrap_err();
        assert!(e.contains("#/components/schemas/Missing"), "{e}");
    }
}
