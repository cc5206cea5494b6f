//! Failures of table operations, and how they become [`ToolError`]s for agents.
//!
//! Every variant names the table, column, row or value at fault so the caller can fix the call
//! without guessing.

use serde_json::{json, Value};
use toolshed_core::{ToolError, ToolErrorKind};
use toolshed_store::StoreError;

/// Why a table operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    /// A table or column name does not follow the naming rule.
    #[error("invalid {what} name '{name}': names start with a letter and continue with letters, digits or '_' (at most 63 characters)")]
    InvalidName { what: &'static str, name: String },
    /// `id`, `createdAt` and `updatedAt` are maintained by the table itself.
    #[error("column name '{0}' is reserved: 'id', 'createdAt' and 'updatedAt' are managed automatically")]
    ReservedColumn(String),
    /// A column name appears twice in one definition.
    #[error("column '{0}' is defined more than once")]
    DuplicateColumn(String),
    /// A table with this name exists already.
    #[error("a table named '{0}' already exists")]
    TableExists(String),
    /// The table already has a column with this name.
    #[error("table '{table}' already has a column named '{column}'")]
    ColumnExists { table: String, column: String },
    /// No table with this name.
    #[error("table '{0}' does not exist")]
    TableNotFound(String),
    /// The table has no such column (for column operations).
    #[error("table '{table}' has no column '{column}' (columns: {available})")]
    ColumnNotFound {
        table: String,
        column: String,
        available: String,
    },
    /// Columns named in rows, filters, sorts or `match` that the table does not have.
    #[error("{context}: unknown column(s) {} in table '{table}' (columns: {available})", quoted(.columns))]
    UnknownColumns {
        context: String,
        table: String,
        columns: Vec<String>,
        available: String,
    },
    /// A managed column was given a value.
    #[error("{context}: column '{column}' is managed automatically and cannot be set")]
    ManagedColumn { context: String, column: String },
    /// A value does not have the column's type.
    #[error("{context}, column '{column}': expected {expected}, got {got}")]
    TypeMismatch {
        context: String,
        row: Option<usize>,
        column: String,
        expected: &'static str,
        got: &'static str,
    },
    /// A date column was given a string that is not an ISO-8601 date or timestamp.
    #[error("{context}, column '{column}': '{value}' is not an ISO-8601 date (use e.g. 2024-05-01 or 2024-05-01T12:30:00Z)")]
    InvalidDate {
        context: String,
        row: Option<usize>,
        column: String,
        value: String,
    },
    /// A filter or sort that cannot be understood.
    #[error("invalid {0}")]
    InvalidQuery(String),
    /// Arguments that are wrong in another way.
    #[error("{0}")]
    InvalidArgs(String),
    /// A destructive bulk operation without a filter.
    #[error(
        "{0} needs a non-empty filter; to affect every row pass \"all\": true instead of a filter"
    )]
    FilterRequired(&'static str),
    /// Stored data that cannot be read back.
    #[error("stored data of table '{table}' is malformed: {reason}")]
    Corrupt { table: String, reason: String },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl TablesError {
    /// The broad class of the failure.
    pub fn kind(&self) -> ToolErrorKind {
        match self {
            Self::TableExists(_) | Self::ColumnExists { .. } => ToolErrorKind::Conflict,
            Self::TableNotFound(_) | Self::ColumnNotFound { .. } => ToolErrorKind::NotFound,
            Self::Corrupt { .. } | Self::Store(_) => ToolErrorKind::Internal,
            _ => ToolErrorKind::InvalidInput,
        }
    }

    /// Structured details for agents, when there are any.
    pub fn data(&self) -> Option<Value> {
        match self {
            Self::TypeMismatch {
                row,
                column,
                expected,
                got,
                ..
            } => Some(json!({"row": row, "column": column, "expected": expected, "got": got})),
            Self::InvalidDate {
                row, column, value, ..
            } => Some(json!({"row": row, "column": column, "value": value, "expected": "date"})),
            Self::UnknownColumns { columns, .. } => Some(json!({"unknownColumns": columns})),
            _ => None,
        }
    }
}

impl From<TablesError> for ToolError {
    fn from(e: TablesError) -> Self {
        let mut out = ToolError::new(e.kind(), e.to_string());
        out.data = e.data();
        out
    }
}

/// The plugin's result type.
pub type Result<T, E = TablesError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_messages() {
        let e = TablesError::TableExists("people".into());
        assert_eq!(e.kind(), ToolErrorKind::Conflict);
        assert!(e.to_string().contains("people"));
        let e = TablesError::UnknownColumns {
            context: "row 2".into(),
            table: "t".into(),
            columns: vec!["a".into(), "b".into()],
            available: "x".into(),
        };
        assert_eq!(
            e.to_string(),
            "row 2: unknown column(s) 'a', 'b' in table 't' (columns: x)"
        );
        let t: ToolError = e.into();
        assert_eq!(t.kind, ToolErrorKind::InvalidInput);
        assert_eq!(t.data.unwrap()["unknownColumns"][1], "b");
    }

    #[test]
    fn type_mismatch_carries_details() {
        let e = TablesError::TypeMismatch {
            context: "row 3".into(),
            row: Some(3),
            column: "age".into(),
            expected: "number",
            got: "string",
        };
        assert_eq!(
            e.to_string(),
            "row 3, column 'age': expected number, got string"
        );
        let t: ToolError = e.into();
        assert_eq!(t.data.unwrap()["row"], 3);
    }
}
