//! Filters and sorts: a small structured language evaluated in Rust over loaded rows, so it
//! behaves the same on SQLite and PostgreSQL.
//!
//! # Filters
//! A filter is `{}` (every row), `{"and": [f, ...]}`, `{"or": [f, ...]}`, `{"not": f}` or a
//! condition `{"column": "age", "op": "gte", "value": 18}`. Operators:
//!
//! | op | value | matches |
//! |----|-------|---------|
//! | `eq`, `ne` | one value of the column's type | equal / not equal (`ne` also matches `null`) |
//! | `gt`, `gte`, `lt`, `lte` | one value | ordered comparison; never matches `null` |
//! | `contains` | string (string column) or any JSON (json column) | substring; for json, an array element or substring |
//! | `startsWith` | string | prefix (string columns) |
//! | `in` | array of values | equal to one of them |
//! | `isNull`, `isNotNull` | none | the cell is / is not `null` |
//!
//! Comparisons follow the column's type: numbers numerically, dates chronologically, strings
//! by code point, booleans `false < true`. Values in conditions are checked against the type
//! (dates are normalised first); `null` is not a value — use `isNull`. Ordered comparisons and
//! sorting are not defined on json columns. The managed `id` compares as a number and
//! `createdAt`/`updatedAt` as dates.
//!
//! # Sorts
//! `[{"column": "age", "direction": "desc"}, ...]`; `null`s come last in either direction and
//! ties fall back to `id` ascending.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::columns::{
    json_type, normalize_value, parse_date, ColumnDef, ColumnType, Site, CREATED_AT, ID, UPDATED_AT,
};
use crate::error::{Result, TablesError};

/// The deepest nesting of `and`/`or`/`not` accepted.
pub const MAX_DEPTH: usize = 32;

/// The type a column compares as, including the managed ones.
pub fn column_type(columns: &[ColumnDef], name: &str) -> Option<ColumnType> {
    match name {
        ID => Some(ColumnType::Number),
        CREATED_AT | UPDATED_AT => Some(ColumnType::Date),
        _ => columns.iter().find(|c| c.name == name).map(|c| c.ty),
    }
}

/// Lists the columns of a table for messages, managed ones included.
pub fn describe_columns(columns: &[ColumnDef]) -> String {
    let mut names = vec![ID.to_string()];
    names.extend(columns.iter().map(|c| c.name.clone()));
    names.push(CREATED_AT.into());
    names.push(UPDATED_AT.into());
    names.join(", ")
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    Contains,
    StartsWith,
    In,
    IsNull,
    IsNotNull,
}

impl Op {
    /// Every operator name, as used in filters.
    pub const NAMES: [&'static str; 11] = [
        "eq",
        "ne",
        "gt",
        "gte",
        "lt",
        "lte",
        "contains",
        "startsWith",
        "in",
        "isNull",
        "isNotNull",
    ];

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "eq" => Self::Eq,
            "ne" => Self::Ne,
            "gt" => Self::Gt,
            "gte" => Self::Gte,
            "lt" => Self::Lt,
            "lte" => Self::Lte,
            "contains" => Self::Contains,
            "startsWith" => Self::StartsWith,
            "in" => Self::In,
            "isNull" => Self::IsNull,
            "isNotNull" => Self::IsNotNull,
            _ => return None,
        })
    }
}

/// One checked condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub column: String,
    pub ty: ColumnType,
    pub op: Op,
    /// The normalised operand(s): one for most operators, several for `in`, none for the
    /// null checks.
    pub values: Vec<Value>,
}

/// A parsed filter, checked against a table's columns.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Matches every row (`{}`).
    All,
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Not(Box<Filter>),
    Cond(Condition),
}

impl Filter {
    /// Parses a filter against the table's user columns (managed ones are always known).
    pub fn parse(v: &Value, table: &str, columns: &[ColumnDef]) -> Result<Self> {
        parse_filter(v, table, columns, 0)
    }

    /// Whether this filter selects every row whatever the rows hold, decided on its structure:
    /// `{}`, an `and` whose parts all select every row, an `or` with at least one part that
    /// does, and `not` of a filter that selects no row. Changing every row needs `all: true`, so
    /// a filter like `{"and": [{}]}` is refused like `{}`.
    pub fn is_all(&self) -> bool {
        match self {
            Filter::All => true,
            Filter::And(fs) => fs.iter().all(Filter::is_all),
            Filter::Or(fs) => fs.iter().any(Filter::is_all),
            Filter::Not(f) => f.is_none(),
            Filter::Cond(_) => false,
        }
    }

    /// Whether this filter selects no row whatever the rows hold (the dual of [`Self::is_all`]).
    fn is_none(&self) -> bool {
        match self {
            Filter::All | Filter::Cond(_) => false,
            Filter::And(fs) => fs.iter().any(Filter::is_none),
            Filter::Or(fs) => fs.iter().all(Filter::is_none),
            Filter::Not(f) => f.is_all(),
        }
    }

    /// Whether a row (with managed columns) passes the filter.
    pub fn matches(&self, row: &Map<String, Value>) -> bool {
        match self {
            Filter::All => true,
            Filter::And(fs) => fs.iter().all(|f| f.matches(row)),
            Filter::Or(fs) => fs.iter().any(|f| f.matches(row)),
            Filter::Not(f) => !f.matches(row),
            Filter::Cond(c) => c.matches(row.get(&c.column).unwrap_or(&Value::Null)),
        }
    }
}

fn bad(msg: impl Into<String>) -> TablesError {
    TablesError::InvalidQuery(format!("filter: {}", msg.into()))
}

fn parse_filter(v: &Value, table: &str, columns: &[ColumnDef], depth: usize) -> Result<Filter> {
    if depth > MAX_DEPTH {
        return Err(bad(format!("nested deeper than {MAX_DEPTH} levels")));
    }
    let Value::Object(obj) = v else {
        return Err(bad(format!("expected an object, got {}", json_type(v))));
    };
    if obj.is_empty() {
        return Ok(Filter::All);
    }
    for key in ["and", "or", "not"] {
        if let Some(inner) = obj.get(key) {
            if obj.len() != 1 {
                return Err(bad(format!(
                    "an '{key}' object must have no other keys (found {})",
                    keys(obj)
                )));
            }
            return parse_group(key, inner, table, columns, depth);
        }
    }
    parse_condition(obj, table, columns)
}

/// `{"and": [...]}`, `{"or": [...]}` or `{"not": {...}}`.
fn parse_group(
    key: &str,
    inner: &Value,
    table: &str,
    columns: &[ColumnDef],
    depth: usize,
) -> Result<Filter> {
    if key == "not" {
        let negated = parse_filter(inner, table, columns, depth + 1)?;
        return Ok(Filter::Not(Box::new(negated)));
    }
    let Value::Array(items) = inner else {
        return Err(bad(format!(
            "'{key}' takes an array of filters, got {}",
            json_type(inner)
        )));
    };
    if items.is_empty() {
        return Err(bad(format!("'{key}' needs at least one filter")));
    }
    let parts = items
        .iter()
        .map(|i| parse_filter(i, table, columns, depth + 1))
        .collect::<Result<Vec<_>>>()?;
    Ok(if key == "and" {
        Filter::And(parts)
    } else {
        Filter::Or(parts)
    })
}

/// `{"column", "op", "value"}`: the column must exist and the value fit its type and the op.
fn parse_condition(obj: &Map<String, Value>, table: &str, columns: &[ColumnDef]) -> Result<Filter> {
    if let Some(k) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "column" | "op" | "value"))
    {
        return Err(bad(format!(
            "unexpected key '{k}': a condition has 'column', 'op' and 'value'; groups use 'and', 'or' or 'not'"
        )));
    }
    let column = match obj.get("column") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(bad("a condition needs 'column' (a string)")),
    };
    let op_name = match obj.get("op") {
        Some(Value::String(s)) => s.as_str(),
        _ => {
            return Err(bad(format!(
                "condition on '{column}' needs 'op' (a string)"
            )))
        }
    };
    let op = Op::parse(op_name).ok_or_else(|| {
        bad(format!(
            "unknown op '{op_name}' on '{column}' (ops: {})",
            Op::NAMES.join(", ")
        ))
    })?;
    let ty = column_type(columns, &column).ok_or_else(|| TablesError::UnknownColumns {
        context: "filter".into(),
        table: table.to_string(),
        columns: vec![column.clone()],
        available: describe_columns(columns),
    })?;
    let values = condition_values(op, op_name, ty, &column, obj.get("value"))?;
    Ok(Filter::Cond(Condition {
        column,
        ty,
        op,
        values,
    }))
}

/// The operands of `op` on a column of type `ty`, each normalized to the column's type.
fn condition_values(
    op: Op,
    op_name: &str,
    ty: ColumnType,
    column: &str,
    value: Option<&Value>,
) -> Result<Vec<Value>> {
    let here = format!("filter '{op_name}'");
    let one = |v: Option<&Value>| -> Result<Value> {
        match v {
            None => Err(bad(format!("'{op_name}' on '{column}' needs a 'value'"))),
            Some(Value::Null) => Err(bad(format!(
                "'{op_name}' on '{column}' compares with null; use 'isNull' or 'isNotNull'"
            ))),
            Some(v) => normalize_value(ty, column, v, Site::Other(&here)),
        }
    };
    match op {
        Op::IsNull | Op::IsNotNull => {
            if value.is_some_and(|v| !v.is_null()) {
                return Err(bad(format!("'{op_name}' on '{column}' takes no 'value'")));
            }
            Ok(vec![])
        }
        Op::In => match value {
            Some(Value::Array(items)) if !items.is_empty() => {
                items.iter().map(|i| one(Some(i))).collect()
            }
            _ => Err(bad(format!(
                "'in' on '{column}' needs 'value' to be a non-empty array"
            ))),
        },
        Op::Gt | Op::Gte | Op::Lt | Op::Lte if ty == ColumnType::Json => Err(bad(format!(
            "'{op_name}' is not defined on json column '{column}'"
        ))),
        Op::Contains | Op::StartsWith
            if ty != ColumnType::String && !(op == Op::Contains && ty == ColumnType::Json) =>
        {
            Err(bad(format!(
                "'{op_name}' needs a string column, but '{column}' is {}",
                ty.as_str()
            )))
        }
        _ => Ok(vec![one(value)?]),
    }
}

fn keys(obj: &Map<String, Value>) -> String {
    obj.keys()
        .map(|k| format!("'{k}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Compares two non-null values of one column type; `None` when they cannot be ordered.
pub fn compare(ty: ColumnType, a: &Value, b: &Value) -> Option<Ordering> {
    match ty {
        ColumnType::Number => a.as_f64()?.partial_cmp(&b.as_f64()?),
        ColumnType::String => Some(a.as_str()?.cmp(b.as_str()?)),
        ColumnType::Boolean => Some(a.as_bool()?.cmp(&b.as_bool()?)),
        ColumnType::Date => Some(parse_date(a.as_str()?)?.cmp(&parse_date(b.as_str()?)?)),
        ColumnType::Json => None,
    }
}

/// Typed equality of two non-null values.
pub fn equal(ty: ColumnType, a: &Value, b: &Value) -> bool {
    match ty {
        ColumnType::Json => a == b,
        _ => compare(ty, a, b) == Some(Ordering::Equal),
    }
}

impl Condition {
    fn matches(&self, cell: &Value) -> bool {
        let v = self.values.first();
        match (self.op, cell, v) {
            (Op::IsNull, c, _) => c.is_null(),
            (Op::IsNotNull, c, _) => !c.is_null(),
            (Op::Ne, Value::Null, _) => true,
            (_, Value::Null, _) => false,
            (Op::Eq, c, Some(v)) => equal(self.ty, c, v),
            (Op::Ne, c, Some(v)) => !equal(self.ty, c, v),
            (Op::In, c, _) => self.values.iter().any(|v| equal(self.ty, c, v)),
            (Op::Gt, c, Some(v)) => compare(self.ty, c, v) == Some(Ordering::Greater),
            (Op::Gte, c, Some(v)) => matches!(
                compare(self.ty, c, v),
                Some(Ordering::Greater | Ordering::Equal)
            ),
            (Op::Lt, c, Some(v)) => compare(self.ty, c, v) == Some(Ordering::Less),
            (Op::Lte, c, Some(v)) => matches!(
                compare(self.ty, c, v),
                Some(Ordering::Less | Ordering::Equal)
            ),
            (Op::StartsWith, Value::String(c), Some(Value::String(v))) => c.starts_with(v),
            (Op::Contains, Value::String(c), Some(Value::String(v))) => c.contains(v.as_str()),
            (Op::Contains, Value::Array(items), Some(v)) => items.contains(v),
            _ => false,
        }
    }
}

/// One sort key, checked against a table's columns.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    pub column: String,
    pub ty: ColumnType,
    pub descending: bool,
}

/// Parses `[{"column": .., "direction": "asc"|"desc"}]`.
pub fn parse_sort(v: &Value, table: &str, columns: &[ColumnDef]) -> Result<Vec<SortKey>> {
    let bad = |m: String| TablesError::InvalidQuery(format!("sort: {m}"));
    let Value::Array(items) = v else {
        return Err(bad(format!("expected an array, got {}", json_type(v))));
    };
    items
        .iter()
        .map(|item| {
            let Value::Object(o) = item else {
                return Err(bad(format!(
                    "each entry is an object with 'column' and 'direction', got {}",
                    json_type(item)
                )));
            };
            if let Some(k) = o
                .keys()
                .find(|k| !matches!(k.as_str(), "column" | "direction"))
            {
                return Err(bad(format!("unexpected key '{k}'")));
            }
            let Some(Value::String(column)) = o.get("column") else {
                return Err(bad("each entry needs 'column' (a string)".into()));
            };
            let descending = match o.get("direction") {
                None => false,
                Some(Value::String(d)) if d == "asc" => false,
                Some(Value::String(d)) if d == "desc" => true,
                Some(d) => {
                    return Err(bad(format!(
                        "direction of '{column}' must be 'asc' or 'desc', got {d}"
                    )))
                }
            };
            let ty = column_type(columns, column).ok_or_else(|| TablesError::UnknownColumns {
                context: "sort".into(),
                table: table.to_string(),
                columns: vec![column.clone()],
                available: describe_columns(columns),
            })?;
            if ty == ColumnType::Json {
                return Err(bad(format!("json column '{column}' cannot be sorted")));
            }
            Ok(SortKey {
                column: column.clone(),
                ty,
                descending,
            })
        })
        .collect()
}

/// Sorts rows by the keys; nulls last, ties by `id` ascending.
pub fn sort_rows(rows: &mut [Map<String, Value>], keys: &[SortKey]) {
    rows.sort_by(|a, b| {
        for k in keys {
            let x = a.get(&k.column).unwrap_or(&Value::Null);
            let y = b.get(&k.column).unwrap_or(&Value::Null);
            let o = match (x.is_null(), y.is_null()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    let o = compare(k.ty, x, y).unwrap_or(Ordering::Equal);
                    if k.descending {
                        o.reverse()
                    } else {
                        o
                    }
                }
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        let id = |r: &Map<String, Value>| r.get(ID).and_then(Value::as_i64).unwrap_or(0);
        id(a).cmp(&id(b))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cols() -> Vec<ColumnDef> {
        vec![
            ColumnDef::new("name", ColumnType::String),
            ColumnDef::new("age", ColumnType::Number),
            ColumnDef::new("active", ColumnType::Boolean),
            ColumnDef::new("born", ColumnType::Date),
            ColumnDef::new("tags", ColumnType::Json),
        ]
    }

    fn row(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn f(v: Value) -> Filter {
        Filter::parse(&v, "people", &cols()).unwrap()
    }

    #[test]
    fn conditions_follow_types() {
        let r = row(json!({"id": 3, "name": "Ada", "age": 36, "active": true,
            "born": "1815-12-10T00:00:00.000Z", "tags": ["math", "poet"]}));
        assert!(f(json!({"column": "age", "op": "eq", "value": 36.0})).matches(&r));
        assert!(f(json!({"column": "age", "op": "gt", "value": 9})).matches(&r));
        assert!(f(json!({"column": "born", "op": "lt", "value": "1816-01-01"})).matches(&r));
        assert!(f(json!({"column": "born", "op": "eq", "value": "1815-12-10"})).matches(&r));
        assert!(f(json!({"column": "name", "op": "startsWith", "value": "Ad"})).matches(&r));
        assert!(!f(json!({"column": "name", "op": "contains", "value": "da!"})).matches(&r));
        assert!(f(json!({"column": "tags", "op": "contains", "value": "poet"})).matches(&r));
        assert!(f(json!({"column": "id", "op": "in", "value": [1, 3]})).matches(&r));
        assert!(f(json!({"not": {"column": "active", "op": "eq", "value": false}})).matches(&r));
        assert!(f(json!({"or": [{"column": "age", "op": "lt", "value": 1},
                                 {"column": "name", "op": "isNotNull"}]}))
        .matches(&r));
        assert!(f(json!({})).is_all());
    }

    /// Any filter that selects every row by its structure counts as "all", so it cannot stand
    /// in for `all: true`; filters with a real condition do not.
    #[test]
    fn match_all_is_decided_structurally() {
        let cond = json!({"column": "age", "op": "gt", "value": 3});
        for all in [
            json!({}),
            json!({"and": [{}]}),
            json!({"and": [{}, {"and": [{}]}]}),
            json!({"or": [{}]}),
            json!({"or": [cond.clone(), {}]}),
            json!({"or": [{"and": [{}]}, cond.clone()]}),
            json!({"not": {"not": {}}}),
            json!({"not": {"and": [cond.clone(), {"not": {}}]}}),
            json!({"not": {"or": [{"not": {}}, {"not": {"and": [{}]}}]}}),
        ] {
            assert!(f(all.clone()).is_all(), "{all} selects every row");
        }
        for real in [
            cond.clone(),
            json!({"and": [{}, cond.clone()]}),
            json!({"or": [cond.clone(), {"column": "name", "op": "isNull"}]}),
            json!({"not": cond.clone()}),
            json!({"not": {}}),
            json!({"and": [{"or": [{}, cond.clone()]}, cond.clone()]}),
        ] {
            assert!(!f(real.clone()).is_all(), "{real} has a condition");
        }
    }

    #[test]
    fn nulls() {
        let r = row(json!({"id": 1, "name": null}));
        assert!(f(json!({"column": "name", "op": "isNull"})).matches(&r));
        assert!(f(json!({"column": "age", "op": "isNull"})).matches(&r));
        assert!(f(json!({"column": "age", "op": "ne", "value": 1})).matches(&r));
        assert!(!f(json!({"column": "age", "op": "lt", "value": 1})).matches(&r));
        assert!(!f(json!({"column": "age", "op": "eq", "value": 1})).matches(&r));
    }

    #[test]
    fn bad_filters_are_named() {
        let e = |v: Value| {
            Filter::parse(&v, "people", &cols())
                .unwrap_err()
                .to_string()
        };
        assert!(e(json!({"column": "nope", "op": "eq", "value": 1})).contains("'nope'"));
        assert!(e(json!({"column": "age", "op": "like", "value": 1})).contains("unknown op 'like'"));
        assert!(e(json!({"column": "age", "op": "eq", "value": "x"})).contains("expected number"));
        assert!(e(json!({"column": "age", "op": "eq", "value": null})).contains("isNull"));
        assert!(e(json!({"column": "born", "op": "gt", "value": "later"})).contains("ISO-8601"));
        assert!(e(json!({"column": "tags", "op": "gt", "value": 1})).contains("json"));
        assert!(
            e(json!({"column": "age", "op": "startsWith", "value": 1})).contains("string column")
        );
        assert!(e(json!({"column": "age", "op": "in", "value": 1})).contains("non-empty array"));
        assert!(e(json!({"and": []})).contains("at least one"));
        assert!(e(json!({"and": [], "or": []})).contains("no other keys"));
        assert!(e(json!({"column": "age", "op": "eq", "value": 1, "x": 2})).contains("'x'"));
        assert!(e(json!([1])).contains("expected an object"));
    }

    #[test]
    fn sorting_with_nulls_last() {
        let mut rows = vec![
            row(json!({"id": 1, "age": 5})),
            row(json!({"id": 2})),
            row(json!({"id": 3, "age": 30})),
            row(json!({"id": 4, "age": 5})),
        ];
        let keys = parse_sort(
            &json!([{"column": "age", "direction": "desc"}]),
            "p",
            &cols(),
        )
        .unwrap();
        sort_rows(&mut rows, &keys);
        let ids: Vec<_> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        assert_eq!(ids, vec![3, 1, 4, 2]);
        let e = parse_sort(&json!([{"column": "zzz"}]), "p", &cols()).unwrap_err();
        assert!(e.to_string().contains("'zzz'"));
        assert!(parse_sort(&json!([{"column": "tags"}]), "p", &cols()).is_err());
        assert!(parse_sort(&json!([{"column": "age", "direction": "up"}]), "p", &cols()).is_err());
    }
}
