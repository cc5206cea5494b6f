//! The schema renderer: JSON Schema → indented field lines.
//!
//! Each field becomes `name: type = default, constraints — description`, with
//! `name?:` for an optional field (TypeScript style), `T[]` for an array of a
//! simple type, `string|null` for a nullable type, `lo..hi` for a two-sided
//! numeric range, `asc | desc` for an enum of plain words (other enums and
//! consts as JSON literals: `1|"two"|null`) and `closed object` for an object
//! without extra keys (a closed root says `(closed)`, or `(no keys)` when it
//! has no fields). Root fields start at column 0.
//! Objects list their properties on indented lines below; arrays of objects list
//! their items' properties the same way; unions with object branches list each
//! branch. Everything nested elsewhere (items of scalars, `not`, `if`/`then`,
//! `contains`, …) is written inline as `type (constraints) {key: type, opt?: type}`.
//!
//! Local `$ref`s are resolved against the root schema. A ref that is already being
//! expanded is written `→ Name (recursive)`; an object ref expanded once before is
//! written `→ Name (see above)`. Every validation keyword is rendered; only
//! descriptions are shortened (and, for output schemas, nesting beyond a depth
//! limit is reduced to key lists).

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::text::{compact, field_description, FIELD_DESCRIPTION_CHARS};

/// One nested entry under a field: label, schema, required flag.
type Child = (String, Value, bool);

/// What a schema says, split into the parts of a field line.
#[derive(Default)]
struct Desc {
    ty: String,
    cons: Vec<String>,
    description: Option<String>,
    /// The `default` value, written `= value` right after the type.
    default: Option<String>,
    children: Vec<Child>,
}

pub(crate) struct Renderer<'a> {
    root: &'a Value,
    /// Refs being expanded right now (for recursion).
    active: Vec<String>,
    /// Object refs expanded somewhere above.
    expanded: HashSet<String>,
    /// Block nesting beyond which objects are shown as key lists; `None` = unlimited.
    max_depth: Option<usize>,
    out: String,
}

enum Resolved {
    Schema(Value, Option<String>),
    Recursive(String),
    SeeAbove(String),
    Unresolved(String),
}

impl Resolved {
    /// The text that stands for a reference which is not expanded at this place.
    fn marker(&self) -> String {
        match self {
            Self::Schema(..) => String::new(),
            Self::Recursive(name) => format!("→ {name} (recursive)"),
            Self::SeeAbove(name) => format!("→ {name} (see above)"),
            Self::Unresolved(r) => format!("$ref {r} (unresolved)"),
        }
    }
}

fn ref_name(reference: &str) -> String {
    reference
        .rsplit('/')
        .next()
        .unwrap_or(reference)
        .replace("~1", "/")
        .replace("~0", "~")
}

fn has_children(schema: &Value) -> bool {
    let Some(obj) = schema.as_object() else {
        return false;
    };
    obj.get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty())
        || obj.contains_key("allOf")
        || obj.contains_key("patternProperties")
}

fn num(v: &Value) -> String {
    compact(v)
}

impl<'a> Renderer<'a> {
    pub(crate) fn new(root: &'a Value, max_depth: Option<usize>) -> Self {
        Self {
            root,
            active: Vec::new(),
            expanded: HashSet::new(),
            max_depth,
            out: String::new(),
        }
    }

    pub(crate) fn finish(self) -> String {
        self.out
    }

    fn lookup(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(pointer)
    }

    /// Follows a `$ref` (merging sibling keywords into the target) and tells how to show it.
    fn resolve(&self, schema: &Value, block: bool) -> Resolved {
        let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
            return Resolved::Schema(schema.clone(), None);
        };
        let name = ref_name(reference);
        if self.active.iter().any(|r| r == reference) {
            return Resolved::Recursive(name);
        }
        let Some(target) = self.lookup(reference) else {
            return Resolved::Unresolved(reference.to_string());
        };
        if block && self.expanded.contains(reference) && has_children(target) {
            return Resolved::SeeAbove(name);
        }
        let mut merged = match target {
            Value::Object(t) => t.clone(),
            other => return Resolved::Schema(other.clone(), Some(reference.to_string())),
        };
        if let Some(obj) = schema.as_object() {
            for (k, v) in obj {
                if k != "$ref" {
                    merged.insert(k.clone(), v.clone());
                }
            }
        }
        Resolved::Schema(Value::Object(merged), Some(reference.to_string()))
    }

    /// Writes the field lines of a root schema at `indent`.
    pub(crate) fn root_fields(&mut self, schema: &Value, indent: usize) {
        let resolved = match self.resolve(schema, true) {
            Resolved::Schema(s, r) => (s, r),
            _ => (schema.clone(), None),
        };
        if let Some(r) = &resolved.1 {
            self.active.push(r.clone());
        }
        let mut desc = self.describe(&resolved.0, 0);
        if desc.ty == "closed object" && desc.default.is_none() {
            desc.ty = "object".into();
            if desc.children.is_empty() && desc.cons.is_empty() {
                self.line(format!("{}(no keys)", " ".repeat(indent)));
                desc.ty.clear();
            } else {
                desc.cons.insert(0, "closed".into());
            }
        }
        let only_object = desc.ty == "object" && desc.default.is_none();
        if desc.ty.is_empty() {
            // already written
        } else if only_object && !desc.children.is_empty() {
            if !desc.cons.is_empty() {
                self.line(format!("{}({})", " ".repeat(indent), desc.cons.join(", ")));
            }
            for (label, child, required) in &desc.children {
                self.field(indent, label, child, *required, 1);
            }
        } else if only_object && desc.children.is_empty() && desc.cons.is_empty() {
            // an object without fields: nothing to list
        } else {
            let mut line = format!("{}(value): {}", " ".repeat(indent), desc.ty);
            if let Some(v) = &desc.default {
                line.push_str(" = ");
                line.push_str(v);
            }
            if !desc.cons.is_empty() {
                line.push_str(", ");
                line.push_str(&desc.cons.join(", "));
            }
            self.out.push_str(&line);
            self.out.push('\n');
            for (label, child, required) in &desc.children {
                self.field(indent + 2, label, child, *required, 1);
            }
        }
        if resolved.1.is_some() {
            self.active.pop();
        }
    }

    /// Writes one field line and its nested lines.
    fn field(&mut self, indent: usize, label: &str, schema: &Value, required: bool, depth: usize) {
        let pad = " ".repeat(indent);
        let label = if required {
            label.to_string()
        } else {
            format!("{label}?")
        };
        let (schema, reference) = match self.resolve(schema, true) {
            Resolved::Schema(s, r) => (s, r),
            other => {
                self.line(format!("{pad}{label}: {}", other.marker()));
                return;
            }
        };
        if let Some(r) = &reference {
            self.active.push(r.clone());
        }
        let mut desc = self.describe(&schema, depth);
        let too_deep = self.max_depth.is_some_and(|m| depth >= m) && !desc.children.is_empty();
        if too_deep {
            let keys: Vec<&str> = desc.children.iter().map(|c| c.0.as_str()).collect();
            desc.ty = format!("{} {{{}}}", desc.ty, keys.join(", "));
            desc.children.clear();
        }
        let mut ty = desc.ty;
        if let Some(r) = &reference {
            if !desc.children.is_empty() {
                ty = format!("{} {}", ref_name(r), ty);
                self.expanded.insert(r.clone());
            }
        }
        // A tagged union branch (`type = catalog`) is an object by construction.
        let mut line = if label.contains(" = ") && ty == "object" {
            format!("{pad}{label}:")
        } else {
            format!("{pad}{label}: {ty}")
        };
        if let Some(v) = &desc.default {
            line.push_str(" = ");
            line.push_str(v);
        }
        if !desc.cons.is_empty() {
            line.push_str(", ");
            line.push_str(&desc.cons.join(", "));
        }
        let label_words = label.trim_end_matches('?');
        if let Some(d) = desc
            .description
            .filter(|d| !d.is_empty() && !same_words(d, label_words))
        {
            line.push_str(" — ");
            line.push_str(&d);
        }
        self.line(line);
        for (child_label, child, child_required) in &desc.children {
            self.field(indent + 2, child_label, child, *child_required, depth + 1);
        }
        if reference.is_some() {
            self.active.pop();
        }
    }

    fn line(&mut self, line: String) {
        self.out.push_str(&line);
        self.out.push('\n');
    }

    /// A whole schema on one line.
    pub(crate) fn inline(&mut self, schema: &Value) -> String {
        let (schema, reference) = match self.resolve(schema, false) {
            Resolved::Schema(s, r) => (s, r),
            other => return other.marker(),
        };
        if let Some(r) = &reference {
            self.active.push(r.clone());
        }
        let desc = self.describe(&schema, 0);
        let mut s = desc.ty;
        if let Some(v) = &desc.default {
            s.push_str(" = ");
            s.push_str(v);
        }
        if !desc.cons.is_empty() {
            s.push_str(" (");
            s.push_str(&desc.cons.join(", "));
            s.push(')');
        }
        if !desc.children.is_empty() {
            let parts: Vec<String> = desc
                .children
                .iter()
                .map(|(label, child, required)| {
                    let opt = if *required { "" } else { "?" };
                    format!("{label}{opt}: {}", self.inline(child))
                })
                .collect();
            s.push_str(" {");
            s.push_str(&parts.join(", "));
            s.push('}');
        }
        if reference.is_some() {
            self.active.pop();
        }
        s
    }

    /// Merges `allOf` branches into one object map; branches that cannot merge stay as inline `&` parts.
    fn merge_all_of(&mut self, obj: &Map<String, Value>) -> (Map<String, Value>, Vec<String>) {
        let mut merged = obj.clone();
        merged.remove("allOf");
        let mut leftovers = Vec::new();
        let Some(branches) = obj.get("allOf").and_then(Value::as_array) else {
            return (merged, leftovers);
        };
        for branch in branches {
            let (branch, reference) = match self.resolve(branch, false) {
                Resolved::Schema(s, r) => (s, r),
                other => {
                    leftovers.push(other.marker());
                    continue;
                }
            };
            if let Some(r) = &reference {
                self.active.push(r.clone());
            }
            let (branch, inner) = match branch.as_object() {
                Some(b) => self.merge_all_of(b),
                None => {
                    leftovers.push(self.inline(&branch));
                    if reference.is_some() {
                        self.active.pop();
                    }
                    continue;
                }
            };
            leftovers.extend(inner);
            for (k, v) in branch {
                match (k.as_str(), merged.get_mut(&k)) {
                    (_, None) => {
                        merged.insert(k, v);
                    }
                    ("properties", Some(Value::Object(existing))) => {
                        if let Value::Object(add) = v {
                            for (pk, pv) in add {
                                existing.entry(pk).or_insert(pv);
                            }
                        }
                    }
                    ("required", Some(Value::Array(existing))) => {
                        if let Value::Array(add) = v {
                            for r in add {
                                if !existing.contains(&r) {
                                    existing.push(r);
                                }
                            }
                        }
                    }
                    ("description" | "title" | "examples" | "example", Some(_)) => {}
                    (_, Some(existing)) if *existing == v => {}
                    (_, Some(_)) => {
                        let mut one = Map::new();
                        one.insert(k, v);
                        leftovers.push(self.inline(&Value::Object(one)));
                    }
                }
            }
            if reference.is_some() {
                self.active.pop();
            }
        }
        (merged, leftovers)
    }

    /// Breaks a (ref-free at top) schema into type, constraints, description and children.
    fn describe(&mut self, schema: &Value, depth: usize) -> Desc {
        let mut d = Desc::default();
        let obj = match schema {
            Value::Bool(true) => {
                d.ty = "any".into();
                return d;
            }
            Value::Bool(false) => {
                d.ty = "never (false)".into();
                return d;
            }
            Value::Object(o) => o,
            other => {
                d.ty = format!("invalid schema {}", compact(other));
                return d;
            }
        };
        let (obj, all_of_rest) = if obj.contains_key("allOf") {
            self.merge_all_of(obj)
        } else {
            (obj.clone(), Vec::new())
        };
        d.description = obj
            .get("description")
            .and_then(Value::as_str)
            .map(|t| field_description(t, FIELD_DESCRIPTION_CHARS));
        let bare_values = self.describe_type(&obj, depth, &mut d);
        for rest in all_of_rest {
            d.cons.push(format!("& {rest}"));
        }
        push_number_constraints(&obj, &mut d.cons);
        self.push_string_and_array_constraints(&obj, &mut d.cons);
        self.describe_properties(&obj, &mut d);
        self.push_key_constraints(&obj, &mut d.cons);
        self.push_logic(&obj, &mut d.cons);
        self.push_annotations(&obj, bare_values.as_deref(), &mut d);
        d
    }

    /// The type (`d.ty`): declared types, enum and const values, array items, format,
    /// nullability and unions; item and union blocks go to `d.children`, extra-item rules and
    /// unions beside a type to `d.cons`. Returns the enum values when they are written bare.
    fn describe_type(
        &mut self,
        obj: &Map<String, Value>,
        depth: usize,
        d: &mut Desc,
    ) -> Option<Vec<Value>> {
        let get = |k: &str| obj.get(k);
        let mut types = declared_types(obj);
        let is_object = types.iter().any(|t| t == "object")
            || (types.is_empty()
                && (obj.contains_key("properties")
                    || obj.contains_key("additionalProperties")
                    || obj.contains_key("patternProperties")));
        let is_array = types.iter().any(|t| t == "array")
            || (types.is_empty() && (obj.contains_key("items") || obj.contains_key("prefixItems")));

        // Enum / const replace the type when it is implied by the values.
        let mut parts: Vec<String> = Vec::new();
        let mut bare_values: Option<Vec<Value>> = None;
        let const_union = if get("enum").is_none() && get("const").is_none() {
            ["oneOf", "anyOf"].into_iter().find_map(|k| {
                get(k)
                    .and_then(Value::as_array)
                    .and_then(|b| const_values(b))
                    .map(|v| (k, v))
            })
        } else {
            None
        };
        if let Some(values) = get("enum")
            .and_then(Value::as_array)
            .or(const_union.as_ref().map(|c| &c.1))
        {
            let non_null: Vec<&String> = types.iter().filter(|t| *t != "null").collect();
            let implied = non_null.len() == 1
                && values
                    .iter()
                    .all(|v| v.is_null() || fits_type(v, non_null[0]));
            if implied || (types.is_empty() && const_union.is_some()) {
                types.retain(|t| t == "null" && !values.iter().any(Value::is_null));
            }
            let text = enum_values(values);
            if !text.contains('"') {
                bare_values = Some(values.clone());
            }
            parts.push(text);
        }

        if is_array {
            self.describe_array(obj, depth, &mut types, d);
        }
        apply_format_and_nullable(obj, &mut types);
        let skip = const_union.as_ref().map(|c| c.0);
        let union_parts = self.union_parts(obj, depth, skip, &mut d.children);
        d.ty = compose_type(obj, types, parts, union_parts, is_object, &mut d.cons);
        bare_values
    }

    /// Array items: a tuple, an item type (`T[]`, `array of T`) or an `items` block.
    fn describe_array(
        &mut self,
        obj: &Map<String, Value>,
        depth: usize,
        types: &mut Vec<String>,
        d: &mut Desc,
    ) {
        let get = |k: &str| obj.get(k);
        let tuple = get("prefixItems")
            .and_then(Value::as_array)
            .or_else(|| get("items").and_then(Value::as_array));
        if let Some(tuple) = tuple {
            let items: Vec<String> = tuple.iter().map(|i| self.inline(i)).collect();
            let t = format!("[{}]", items.join(", "));
            replace_type(types, "array", t);
            let rest = if get("prefixItems").is_some() {
                get("items")
            } else {
                get("additionalItems")
            };
            match rest {
                Some(Value::Bool(false)) => d.cons.push("no extra items".into()),
                Some(Value::Bool(true)) | None => {}
                Some(s) => {
                    let extra = self.inline(s);
                    d.cons.push(format!("extra items: {extra}"));
                }
            }
        } else if let Some(items) = get("items") {
            let item_block = matches!(self.resolve(items, true), Resolved::Schema(ref s, _) if has_children(s) || is_union_with_children(s));
            if item_block && self.max_depth.is_none_or(|m| depth < m) {
                // Every item has this shape: not an optional field.
                let label = "items".to_string();
                d.children.push((label, items.clone(), true));
                replace_type(types, "array", "array".into());
            } else {
                let item = self.inline(items);
                let t = if is_simple_type(&item) {
                    format!("{item}[]")
                } else {
                    format!("array of {item}")
                };
                replace_type(types, "array", t);
            }
        }
        if let Some(extra) = get("additionalItems")
            .filter(|_| get("prefixItems").is_some() || !get("items").is_some_and(Value::is_array))
        {
            let extra = self.inline(extra);
            d.cons.push(format!("additionalItems: {extra}"));
        }
    }

    /// The `oneOf` / `anyOf` unions (except `skip`, already written as enum values): inline,
    /// or as labelled branch blocks in `children` when a branch has children of its own.
    fn union_parts(
        &mut self,
        obj: &Map<String, Value>,
        depth: usize,
        skip: Option<&str>,
        children: &mut Vec<Child>,
    ) -> Vec<String> {
        let get = |k: &str| obj.get(k);
        let mut union_parts = Vec::new();
        for key in ["oneOf", "anyOf"] {
            if skip == Some(key) {
                continue;
            }
            if let Some(branches) = get(key).and_then(Value::as_array) {
                let block = branches.iter().any(|b| matches!(self.resolve(b, true), Resolved::Schema(ref s, _) if has_children(s)))
                    && self.max_depth.is_none_or(|m| depth < m);
                // Object branches told apart by one constant property (`type: "catalog"`):
                // each block is labelled with it, and the constant is not repeated inside.
                if let Some(tag) = block.then(|| shared_tag(branches)).flatten() {
                    for b in branches {
                        let value = b["properties"][&tag]["const"].as_str().unwrap_or_default();
                        children.push((format!("{tag} = {value}"), without_tag(b, &tag), true));
                    }
                    union_parts.push(format!("one of (by {tag})"));
                    continue;
                }
                let labels: Vec<String> = branches
                    .iter()
                    .enumerate()
                    .map(|(i, b)| {
                        if block {
                            let label = branch_label(b, i);
                            children.push((label.clone(), b.clone(), false));
                            label
                        } else {
                            self.inline(b)
                        }
                    })
                    .collect();
                let joined = join_union(&labels);
                union_parts.push(
                    if key == "oneOf" && branches.len() > 1 && !disjoint_types(branches) {
                        format!("one of {joined}")
                    } else {
                        joined
                    },
                );
            }
        }

        union_parts
    }

    /// `minLength` through `unevaluatedItems`: string and array constraints.
    fn push_string_and_array_constraints(
        &mut self,
        obj: &Map<String, Value>,
        cons: &mut Vec<String>,
    ) {
        let get = |k: &str| obj.get(k);
        push_range(cons, "len", get("minLength"), get("maxLength"));
        if let Some(p) = get("pattern") {
            let p = p.as_str().map(str::to_string).unwrap_or_else(|| compact(p));
            cons.push(format!("pattern /{p}/"));
        }
        push_range(cons, "items", get("minItems"), get("maxItems"));
        if get("uniqueItems") == Some(&Value::Bool(true)) {
            cons.push("unique".into());
        }
        if let Some(c) = get("contains") {
            let c = self.inline(c);
            cons.push(format!("contains {c}"));
        }
        push_range(
            cons,
            "contains count",
            get("minContains"),
            get("maxContains"),
        );
        match get("unevaluatedItems") {
            Some(Value::Bool(false)) => cons.push("no unevaluated items".into()),
            Some(Value::Bool(true)) | None => {}
            Some(s) => {
                let s = self.inline(s);
                cons.push(format!("unevaluated items: {s}"));
            }
        }
    }

    /// Properties (children, required), `patternProperties` and `additionalProperties`.
    fn describe_properties(&mut self, obj: &Map<String, Value>, d: &mut Desc) {
        let get = |k: &str| obj.get(k);
        let required: Vec<String> = get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let props = get("properties").and_then(Value::as_object);
        if let Some(props) = props {
            for (name, prop) in props {
                d.children
                    .push((name.clone(), prop.clone(), required.contains(name)));
            }
        }
        let missing: Vec<&str> = required
            .iter()
            .filter(|r| !props.is_some_and(|p| p.contains_key(r.as_str())))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            d.cons.push(format!("requires {}", missing.join(", ")));
        }
        if let Some(Value::Object(pp)) = get("patternProperties") {
            for (pattern, s) in pp {
                d.children.push((format!("/{pattern}/"), s.clone(), false));
            }
        }
        match get("additionalProperties") {
            Some(Value::Bool(false)) if d.ty == "object" || d.ty.starts_with("object|") => {
                d.ty = format!("closed {}", d.ty);
            }
            Some(Value::Bool(false)) => d.cons.push("no extra keys".into()),
            Some(Value::Bool(true)) | None => {}
            Some(s) => {
                let s = self.inline(s);
                d.cons.push(format!("extra keys: {s}"));
            }
        }
    }

    /// Key counts, key names, dependencies and `unevaluatedProperties`.
    fn push_key_constraints(&mut self, obj: &Map<String, Value>, cons: &mut Vec<String>) {
        let get = |k: &str| obj.get(k);
        push_range(cons, "keys", get("minProperties"), get("maxProperties"));
        if let Some(names) = get("propertyNames") {
            let n = self.inline(names);
            cons.push(format!("key names: {n}"));
        }
        if let Some(Value::Object(dr)) = get("dependentRequired") {
            for (k, v) in dr {
                let list: Vec<String> = v
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|x| x.as_str().map(str::to_string).unwrap_or_else(|| compact(x)))
                            .collect()
                    })
                    .unwrap_or_default();
                cons.push(format!("{k} requires {}", list.join(", ")));
            }
        }
        for key in ["dependentSchemas", "dependencies"] {
            if let Some(Value::Object(ds)) = get(key) {
                for (k, v) in ds {
                    if let Value::Array(list) = v {
                        let list: Vec<String> = list
                            .iter()
                            .map(|x| x.as_str().map(str::to_string).unwrap_or_else(|| compact(x)))
                            .collect();
                        cons.push(format!("{k} requires {}", list.join(", ")));
                    } else {
                        let s = self.inline(v);
                        cons.push(format!("if {k} present: {s}"));
                    }
                }
            }
        }
        match get("unevaluatedProperties") {
            Some(Value::Bool(false)) => cons.push("no unevaluated keys".into()),
            Some(Value::Bool(true)) | None => {}
            Some(s) => {
                let s = self.inline(s);
                cons.push(format!("unevaluated keys: {s}"));
            }
        }
    }

    /// `not`, `if` / `then` / `else` and the discriminator.
    fn push_logic(&mut self, obj: &Map<String, Value>, cons: &mut Vec<String>) {
        let get = |k: &str| obj.get(k);
        if let Some(n) = get("not") {
            let n = self.inline(n);
            cons.push(format!("not {n}"));
        }
        if let Some(i) = get("if") {
            let mut s = format!("if {}", self.inline(i));
            if let Some(t) = get("then") {
                s.push_str(&format!(" then {}", self.inline(t)));
            }
            if let Some(e) = get("else") {
                s.push_str(&format!(" else {}", self.inline(e)));
            }
            cons.push(s);
        }
        if let Some(disc) = get("discriminator") {
            cons.push(discriminator(disc));
        }
    }

    /// Annotations that constrain or matter to a caller: default (bare when it is one of the
    /// `bare_values` of the enum), read/write-only, deprecated, content encoding and schema.
    fn push_annotations(
        &mut self,
        obj: &Map<String, Value>,
        bare_values: Option<&[Value]>,
        d: &mut Desc,
    ) {
        let get = |k: &str| obj.get(k);
        if let Some(v) = get("default").filter(|v| !v.is_null()) {
            // A default among bare enum values is written bare too.
            d.default = Some(match v.as_str() {
                Some(s) if bare_values.is_some_and(|vs| vs.contains(v)) => s.to_string(),
                _ => compact(v),
            });
        }
        if get("readOnly") == Some(&Value::Bool(true)) {
            d.cons.push("read-only".into());
        }
        if get("writeOnly") == Some(&Value::Bool(true)) {
            d.cons.push("write-only".into());
        }
        if get("deprecated") == Some(&Value::Bool(true)) {
            d.cons.push("deprecated".into());
        }
        if let Some(v) = get("contentEncoding").and_then(Value::as_str) {
            d.cons.push(format!("encoding {v}"));
        }
        if let Some(v) = get("contentMediaType").and_then(Value::as_str) {
            d.cons.push(format!("media {v}"));
        }
        if let Some(v) = get("contentSchema") {
            let s = self.inline(v);
            d.cons.push(format!("content {s}"));
        }
    }
}

/// The declared `type`s, as written.
fn declared_types(obj: &Map<String, Value>) -> Vec<String> {
    match obj.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .map(|t| t.as_str().map(str::to_string).unwrap_or_else(|| compact(t)))
            .collect(),
        _ => Vec::new(),
    }
}

/// `format` appended to the first non-null type (`string<date-time>`); OpenAPI's `nullable`.
fn apply_format_and_nullable(obj: &Map<String, Value>, types: &mut Vec<String>) {
    let get = |k: &str| obj.get(k);
    if let Some(format) = get("format").and_then(Value::as_str) {
        let base = types.iter().position(|t| t != "null").unwrap_or(0);
        if types.is_empty() {
            types.push(format!("<{format}>"));
        } else {
            types[base] = format!("{}<{format}>", types[base]);
        }
    }

    if get("nullable") == Some(&Value::Bool(true)) && !types.iter().any(|t| t == "null") {
        types.push("null".into());
    }
}

/// The type text from the declared `types`, the enum `parts`, the unions and `const`;
/// unions beside a declared type become constraints.
fn compose_type(
    obj: &Map<String, Value>,
    types: Vec<String>,
    mut parts: Vec<String>,
    mut union_parts: Vec<String>,
    is_object: bool,
    cons: &mut Vec<String>,
) -> String {
    let get = |k: &str| obj.get(k);
    let mut ty_parts: Vec<String> = Vec::new();
    if !union_parts.is_empty()
        && types.iter().all(|t| t == "object" || t == "null")
        && parts.is_empty()
    {
        if types.iter().any(|t| t == "null") {
            union_parts.push("null".into());
        }
        ty_parts.push(join_union(&union_parts));
    } else if !parts.is_empty() && types.iter().all(|t| t == "null") {
        parts.extend(types.iter().cloned());
        ty_parts.push(join_union(&parts));
    } else {
        if !types.is_empty() {
            ty_parts.push(join_union(&types));
        }
        ty_parts.append(&mut parts);
        for u in &union_parts {
            cons.push(u.clone());
        }
    }
    if let Some(c) = get("const") {
        // A literal type: the value alone when it implies the type.
        if ty_parts.len() == 1 && fits_type(c, &ty_parts[0]) {
            ty_parts.clear();
        }
        ty_parts.push(compact(c));
    }
    if ty_parts.is_empty() {
        ty_parts.push(if is_object {
            "object".into()
        } else {
            "any".into()
        });
    }
    ty_parts.join(" ")
}

/// `minimum` through `multipleOf` (draft-4 boolean exclusive bounds too).
fn push_number_constraints(obj: &Map<String, Value>, cons: &mut Vec<String>) {
    let get = |k: &str| obj.get(k);
    let draft4_excl = |k: &str| get(k) == Some(&Value::Bool(true));
    let inclusive_range = match (get("minimum"), get("maximum")) {
        (Some(lo), Some(hi))
            if lo.is_number()
                && hi.is_number()
                && !draft4_excl("exclusiveMinimum")
                && !draft4_excl("exclusiveMaximum") =>
        {
            cons.push(format!("{}..{}", num(lo), num(hi)));
            true
        }
        _ => false,
    };
    if let Some(v) = get("minimum").filter(|_| !inclusive_range) {
        let op = if draft4_excl("exclusiveMinimum") {
            ">"
        } else {
            ">="
        };
        cons.push(format!("{op} {}", num(v)));
    }
    if let Some(v) = get("exclusiveMinimum").filter(|v| v.is_number()) {
        cons.push(format!("> {}", num(v)));
    }
    if let Some(v) = get("maximum").filter(|_| !inclusive_range) {
        let op = if draft4_excl("exclusiveMaximum") {
            "<"
        } else {
            "<="
        };
        cons.push(format!("{op} {}", num(v)));
    }
    if let Some(v) = get("exclusiveMaximum").filter(|v| v.is_number()) {
        cons.push(format!("< {}", num(v)));
    }
    if let Some(v) = get("multipleOf") {
        cons.push(format!("multiple of {}", num(v)));
    }
}

/// The values of a union whose branches are all `const`s (annotations aside),
/// so it reads as an enum.
fn const_values(branches: &[Value]) -> Option<Vec<Value>> {
    if branches.len() < 2 {
        return None;
    }
    branches
        .iter()
        .map(|b| {
            let obj = b.as_object()?;
            let c = obj.get("const")?;
            let fits = |t: &str| fits_type(c, t);
            let only_annotations = obj.iter().all(|(k, v)| match k.as_str() {
                "const" | "description" | "title" | "$comment" | "examples" => true,
                "type" => v.as_str().is_some_and(fits),
                _ => false,
            });
            only_annotations.then(|| c.clone())
        })
        .collect()
}

fn fits_type(v: &Value, t: &str) -> bool {
    match t {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

/// Union members joined tightly (`string|null`) when each is one word, else spaced.
fn join_union(parts: &[String]) -> String {
    if parts.iter().any(|p| p.contains(' ')) {
        parts.join(" | ")
    } else {
        parts.join("|")
    }
}

/// Words that would read as a type name if written bare.
const TYPE_WORDS: [&str; 9] = [
    "string", "number", "integer", "boolean", "object", "array", "null", "any", "never",
];

/// A string written bare in an enum: no separators, quotes or spaces, not a
/// number, `true`/`false` or a type name.
fn bare_word(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| {
            c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':' | '+' | '#' | '@')
        })
        && s.parse::<f64>().is_err()
        && !["true", "false"].contains(&s)
        && !TYPE_WORDS.contains(&s)
        && !s.starts_with(['-', '.', '/', ':', '#', '@', '+'])
}

/// Enum values: two or more plain strings are written bare (`asc | desc`),
/// anything else as JSON literals (`1|"two"|null`).
fn enum_values(values: &[Value]) -> String {
    let strings = values.iter().filter(|v| !v.is_null()).count();
    let bare = strings > 1
        && values
            .iter()
            .all(|v| v.is_null() || v.as_str().is_some_and(bare_word));
    if bare {
        values
            .iter()
            .map(|v| v.as_str().unwrap_or("null"))
            .collect::<Vec<_>>()
            .join(" | ")
    } else {
        values.iter().map(compact).collect::<Vec<_>>().join("|")
    }
}

/// A type written as one word (`string`, `string<uri>`, `→ Name`-free), so `T[]` reads unambiguously.
fn is_simple_type(t: &str) -> bool {
    !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '<' | '>' | '-' | '_' | '[' | ']'))
}

/// Branches that each allow exactly one JSON type and no two the same type:
/// at most one can match, so `oneOf` means the same as `anyOf`.
fn disjoint_types(branches: &[Value]) -> bool {
    let mut seen: Vec<&str> = Vec::new();
    for b in branches {
        let Some(t) = b.get("type").and_then(Value::as_str) else {
            return false;
        };
        let overlaps =
            |a: &str| a == t || matches!((a, t), ("integer", "number") | ("number", "integer"));
        if seen.iter().any(|a| overlaps(a)) {
            return false;
        }
        seen.push(t);
    }
    true
}

/// Whether a description only repeats the field name (`user_id` / "User ID").
fn same_words(description: &str, label: &str) -> bool {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let d = norm(description.strip_prefix("The ").unwrap_or(description));
    if !d.is_empty() && d == norm(label) {
        return true;
    }
    // "Name of the token" for `tokenName`: only the label's words and filler.
    if !description.is_ascii() {
        return false;
    }
    let mut label_words: Vec<String> = Vec::new();
    let mut word = String::new();
    for c in label.chars() {
        if (!c.is_ascii_alphanumeric() || c.is_ascii_uppercase()) && !word.is_empty() {
            label_words.push(std::mem::take(&mut word).to_ascii_lowercase());
        }
        if c.is_ascii_alphanumeric() {
            word.push(c);
        }
    }
    if !word.is_empty() {
        label_words.push(word.to_ascii_lowercase());
    }
    let filler = ["the", "a", "an", "of", "to", "for"];
    let words: Vec<String> = description
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    !words.is_empty()
        && words
            .iter()
            .all(|w| label_words.contains(w) || filler.contains(&w.as_str()))
}

fn is_union_with_children(schema: &Value) -> bool {
    ["oneOf", "anyOf"].iter().any(|k| {
        schema.get(*k).and_then(Value::as_array).is_some_and(|bs| {
            bs.iter()
                .any(|b| has_children(b) || b.get("$ref").is_some())
        })
    })
}

/// The property every branch fixes to a different string constant, if there is one.
fn shared_tag(branches: &[Value]) -> Option<String> {
    let first = branches.first()?.get("properties")?.as_object()?;
    let tag = first
        .iter()
        .find(|(_, p)| p.get("const").is_some_and(Value::is_string))?
        .0
        .clone();
    let mut seen = std::collections::BTreeSet::new();
    let all = branches.iter().all(|b| {
        b.pointer(&format!("/properties/{tag}/const"))
            .and_then(Value::as_str)
            .is_some_and(|v| seen.insert(v.to_string()))
    });
    (all && branches.len() > 1).then_some(tag)
}

/// A branch without its tag property (named by the block's label instead).
fn without_tag(branch: &Value, tag: &str) -> Value {
    let mut b = branch.clone();
    if let Some(props) = b.get_mut("properties").and_then(Value::as_object_mut) {
        props.shift_remove(tag);
    }
    if let Some(req) = b.get_mut("required").and_then(Value::as_array_mut) {
        req.retain(|r| r != tag);
    }
    b
}

fn branch_label(branch: &Value, i: usize) -> String {
    if let Some(r) = branch.get("$ref").and_then(Value::as_str) {
        return ref_name(r);
    }
    if let Some(t) = branch.get("title").and_then(Value::as_str) {
        return t.to_string();
    }
    format!("variant {}", i + 1)
}

fn replace_type(types: &mut Vec<String>, which: &str, with: String) {
    match types.iter().position(|t| t == which) {
        Some(i) => types[i] = with,
        None => types.insert(0, with),
    }
}

fn push_range(cons: &mut Vec<String>, what: &str, lo: Option<&Value>, hi: Option<&Value>) {
    match (lo, hi) {
        (Some(l), Some(h)) if l == h => cons.push(format!("{what} = {}", num(l))),
        (Some(l), Some(h)) => cons.push(format!("{what} {}..{}", num(l), num(h))),
        (Some(l), None) => cons.push(format!("{what} >= {}", num(l))),
        (None, Some(h)) => cons.push(format!("{what} <= {}", num(h))),
        (None, None) => {}
    }
}

fn discriminator(disc: &Value) -> String {
    let Some(obj) = disc.as_object() else {
        return format!("discriminator {}", compact(disc));
    };
    let prop = obj
        .get("propertyName")
        .and_then(Value::as_str)
        .unwrap_or("?");
    let mut s = format!("discriminator {prop}");
    if let Some(Value::Object(mapping)) = obj.get("mapping") {
        let pairs: Vec<String> = mapping
            .iter()
            .map(|(k, v)| {
                let target = v.as_str().map(ref_name).unwrap_or_else(|| compact(v));
                format!("{k}→{target}")
            })
            .collect();
        s.push_str(&format!(" ({})", pairs.join(", ")));
    }
    s
}
