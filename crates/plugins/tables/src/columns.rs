//! Column definitions, naming rules and typed values.
//!
//! A table has user columns of five types (`string`, `number`, `boolean`, `date`, `json`) and
//! three managed columns: `id` (a per-table increasing integer), `createdAt` and `updatedAt`
//! (ISO-8601 timestamps). Every user column is nullable; a missing value reads as `null`.
//!
//! Dates are accepted as ISO-8601 dates (`2024-05-01`), timestamps with an offset
//! (`2024-05-01T12:30:00+02:00`) or without one (read as UTC), and are stored normalised to UTC
//! with millisecond precision: `2024-05-01T10:30:00.000Z`.

use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Result, TablesError};

/// The managed integer row id.
pub const ID: &str = "id";
/// The managed creation timestamp.
pub const CREATED_AT: &str = "createdAt";
/// The managed last-update timestamp.
pub const UPDATED_AT: &str = "updatedAt";
/// All managed column names.
pub const MANAGED: [&str; 3] = [ID, CREATED_AT, UPDATED_AT];

/// The type of a user column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    String,
    Number,
    Boolean,
    /// An ISO-8601 date or timestamp, stored normalised to UTC.
    Date,
    /// Any JSON value.
    Json,
}

impl ColumnType {
    /// The name used in schemas and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Date => "date",
            Self::Json => "json",
        }
    }
}

/// A user column: its name and type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnDef {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: ColumnType,
}

impl ColumnDef {
    pub fn new(name: impl Into<String>, ty: ColumnType) -> Self {
        Self {
            name: name.into(),
            ty,
        }
    }
}

/// Checks the naming rule `[A-Za-z][A-Za-z0-9_]{0,62}` shared by tables and columns.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Validates a table name.
pub fn check_table_name(name: &str) -> Result<()> {
    if is_valid_name(name) {
        Ok(())
    } else {
        Err(TablesError::InvalidName {
            what: "table",
            name: name.to_string(),
        })
    }
}

/// Validates a new user column name: the naming rule, and not a managed name (in any case).
pub fn check_column_name(name: &str) -> Result<()> {
    if MANAGED.iter().any(|m| m.eq_ignore_ascii_case(name)) {
        return Err(TablesError::ReservedColumn(name.to_string()));
    }
    if !is_valid_name(name) {
        return Err(TablesError::InvalidName {
            what: "column",
            name: name.to_string(),
        });
    }
    Ok(())
}

/// Validates a full set of column definitions for a new table.
pub fn check_columns(columns: &[ColumnDef]) -> Result<()> {
    for (i, c) in columns.iter().enumerate() {
        check_column_name(&c.name)?;
        if columns[..i].iter().any(|p| p.name == c.name) {
            return Err(TablesError::DuplicateColumn(c.name.clone()));
        }
    }
    Ok(())
}

/// The JSON type name of a value, for messages.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Parses an ISO-8601 date or timestamp; values without an offset are UTC.
pub fn parse_date(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(s) {
        return Some(d.with_timezone(&Utc));
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(d.and_utc());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc())
}

/// Formats a timestamp the way dates are stored.
pub fn format_date(d: DateTime<Utc>) -> String {
    d.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Formats epoch milliseconds as a stored date.
pub fn format_ms(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .map(format_date)
        .unwrap_or_default()
}

/// Where a value comes from, for messages: `row 2` or `set`.
#[derive(Debug, Clone, Copy)]
pub enum Site<'a> {
    /// The n-th (0-based) row of a write.
    Row(usize),
    /// Anything else, described in words (`set`, `filter`).
    Other(&'a str),
}

impl Site<'_> {
    fn describe(self) -> String {
        match self {
            Site::Row(i) => format!("row {i}"),
            Site::Other(s) => s.to_string(),
        }
    }
    fn row(self) -> Option<usize> {
        match self {
            Site::Row(i) => Some(i),
            Site::Other(_) => None,
        }
    }
}

/// Checks a value against a column type and returns it normalised (dates to UTC). `null` is
/// accepted for every type.
pub fn normalize_value(ty: ColumnType, column: &str, v: &Value, site: Site<'_>) -> Result<Value> {
    let mismatch = || TablesError::TypeMismatch {
        context: site.describe(),
        row: site.row(),
        column: column.to_string(),
        expected: ty.as_str(),
        got: json_type(v),
    };
    match (ty, v) {
        (_, Value::Null) | (ColumnType::Json, _) => Ok(v.clone()),
        (ColumnType::String, Value::String(_))
        | (ColumnType::Number, Value::Number(_))
        | (ColumnType::Boolean, Value::Bool(_)) => Ok(v.clone()),
        (ColumnType::Date, Value::String(s)) => match parse_date(s) {
            Some(d) => Ok(Value::String(format_date(d))),
            None => Err(TablesError::InvalidDate {
                context: site.describe(),
                row: site.row(),
                column: column.to_string(),
                value: s.clone(),
            }),
        },
        _ => Err(mismatch()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names() {
        assert!(is_valid_name("a"));
        assert!(is_valid_name("Orders_2024"));
        assert!(is_valid_name(&format!("a{}", "b".repeat(62))));
        assert!(!is_valid_name(&format!("a{}", "b".repeat(63))));
        assert!(!is_valid_name("1abc"));
        assert!(!is_valid_name("_abc"));
        assert!(!is_valid_name("a-b"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("naïve"));
    }

    #[test]
    fn reserved_and_duplicate_columns() {
        for n in ["id", "createdAt", "updatedAt", "ID", "createdat"] {
            assert!(matches!(
                check_column_name(n),
                Err(TablesError::ReservedColumn(_))
            ));
        }
        let cols = vec![
            ColumnDef::new("a", ColumnType::String),
            ColumnDef::new("a", ColumnType::Number),
        ];
        assert!(matches!(check_columns(&cols), Err(TablesError::DuplicateColumn(n)) if n == "a"));
    }

    #[test]
    fn dates_are_normalised() {
        let n = |s: &str| parse_date(s).map(format_date);
        assert_eq!(n("2024-05-01").unwrap(), "2024-05-01T00:00:00.000Z");
        assert_eq!(
            n("2024-05-01T12:30:00+02:00").unwrap(),
            "2024-05-01T10:30:00.000Z"
        );
        assert_eq!(
            n("2024-05-01T12:30:00").unwrap(),
            "2024-05-01T12:30:00.000Z"
        );
        assert_eq!(n("2024-05-01 12:30").unwrap(), "2024-05-01T12:30:00.000Z");
        assert_eq!(
            n("2024-05-01T12:30:00.123456Z").unwrap(),
            "2024-05-01T12:30:00.123Z"
        );
        assert!(n("2024-13-01").is_none());
        assert!(n("yesterday").is_none());
        assert!(n("2024-02-30").is_none());
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn values_are_checked_by_type() {
        let s = Site::Row(1);
        assert_eq!(
            normalize_value(ColumnType::Number, "n", &json!(2.5), s).unwrap(),
            json!(2.5)
        );
        assert_eq!(
            normalize_value(ColumnType::Number, "n", &Value::Null, s).unwrap(),
            Value::Null
        );
        assert_eq!(
            normalize_value(ColumnType::Json, "j", &json!({"a": [1]}), s).unwrap(),
            json!({"a": [1]})
        );
        let e = normalize_value(ColumnType::Number, "n", &json!("7"), s).unwrap_err();
        assert_eq!(
            e.to_string(),
            "row 1, column 'n': expected number, got string"
        );
        let e =
            normalize_value(ColumnType::Boolean, "b", &json!(1), Site::Other("set")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "set, column 'b': expected boolean, got number"
        );
        let e = normalize_value(ColumnType::Date, "d", &json!("soon"), s).unwrap_err();
        assert!(matches!(e, TablesError::InvalidDate { .. }), "{e}");
        assert!(e.to_string().contains("'soon'"));
        let e = normalize_value(ColumnType::String, "s", &json!([1]), s).unwrap_err();
        assert!(e.to_string().contains("got array"));
    }
}
