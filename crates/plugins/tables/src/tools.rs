//! The `tables.*` tools: definitions (names, descriptions, strict JSON schemas, annotations)
//! and handlers that decode arguments and call [`Tables`].
//!
//! Handlers decode arguments strictly (unknown keys are refused) even though the engine checks
//! the input schema first, and report every mistake as an `InvalidInput` tool error that names
//! what is wrong.

use std::future::Future;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Plugin, Tool, ToolDef, ToolError, ToolPath};

use crate::columns::{ColumnDef, ColumnType, CREATED_AT, ID, UPDATED_AT};
use crate::error::{Result, TablesError};
use crate::query::Op;
use crate::repo::{QueryOptions, Selection, TableInfo, Tables, DEFAULT_LIMIT, MAX_LIMIT};
use crate::PLUGIN_ID;

/// Every tool path the plugin offers.
pub const PATHS: [&str; 12] = [
    "tables.list",
    "tables.create",
    "tables.delete",
    "tables.get_schema",
    "tables.columns.add",
    "tables.columns.delete",
    "tables.columns.rename",
    "tables.rows.query",
    "tables.rows.insert",
    "tables.rows.update",
    "tables.rows.upsert",
    "tables.rows.delete",
];

const NAME_PATTERN: &str = "^[A-Za-z][A-Za-z0-9_]{0,62}$";

fn table_prop() -> Value {
    json!({"type": "string", "minLength": 1, "description": "Name of the table."})
}

fn column_def_schema() -> Value {
    json!({
        "type": "object",
        "description": "A column: a name (letters, digits, '_'; not id/createdAt/updatedAt) and a type.",
        "properties": {
            "name": {"type": "string", "pattern": NAME_PATTERN, "description": "Column name."},
            "type": {
                "type": "string",
                "enum": ["string", "number", "boolean", "date", "json"],
                "description": "string, number, boolean, date (ISO-8601, stored as UTC) or json (any JSON)."
            }
        },
        "required": ["name", "type"],
        "additionalProperties": false
    })
}

fn filter_defs() -> Value {
    let group = |key: &str, what: &str| {
        json!({
            "type": "object",
            "properties": {key: {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/filter"}, "description": what}},
            "required": [key],
            "additionalProperties": false
        })
    };
    json!({
        "filter": {
            "description": "{} (all rows), {\"and\": [...]}, {\"or\": [...]}, {\"not\": filter} or a condition {column, op, value}.",
            "anyOf": [
                {"type": "object", "maxProperties": 0},
                group("and", "Every filter must match."),
                group("or", "At least one filter must match."),
                {
                    "type": "object",
                    "properties": {"not": {"$ref": "#/$defs/filter", "description": "The filter must not match."}},
                    "required": ["not"],
                    "additionalProperties": false
                },
                {
                    "type": "object",
                    "properties": {
                        "column": {"type": "string", "description": "Column to test (id, createdAt and updatedAt included)."},
                        "op": {"type": "string", "enum": Op::NAMES, "description": "Comparison; isNull and isNotNull take no value, in takes an array."},
                        "value": {"description": "Value of the column's type to compare with (never null)."}
                    },
                    "required": ["column", "op"],
                    "additionalProperties": false
                }
            ]
        }
    })
}

fn sort_schema() -> Value {
    json!({
        "type": "array",
        "description": "Sort keys, most significant first; nulls sort last; ties by id.",
        "items": {
            "type": "object",
            "properties": {
                "column": {"type": "string", "description": "Column to sort by (not a json column)."},
                "direction": {"type": "string", "enum": ["asc", "desc"], "description": "asc (default) or desc."}
            },
            "required": ["column"],
            "additionalProperties": false
        }
    })
}

fn rows_input() -> Value {
    json!({
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_LIMIT,
        "description": "Rows as objects of column values; omitted columns are null.",
        "items": {"type": "object"}
    })
}

fn row_output() -> Value {
    json!({
        "type": "object",
        "description": "A row: id, every column, createdAt and updatedAt.",
        "properties": {
            "id": {"type": "integer"},
            "createdAt": {"type": "string"},
            "updatedAt": {"type": "string"}
        },
        "required": ["id", "createdAt", "updatedAt"]
    })
}

fn rows_output() -> Value {
    json!({"type": "array", "items": row_output()})
}

fn schema_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "columns": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "type": {"type": "string", "enum": ["integer", "string", "number", "boolean", "date", "json"]},
                        "managed": {"type": "boolean"}
                    },
                    "required": ["name", "type", "managed"]
                }
            },
            "rowCount": {"type": "integer"},
            "createdAt": {"type": "string"},
            "updatedAt": {"type": "string"}
        },
        "required": ["name", "columns", "rowCount", "createdAt", "updatedAt"]
    })
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

fn with_filter_defs(mut schema: Value) -> Value {
    schema["$defs"] = filter_defs();
    schema
}

/// The schema view of a table: managed columns included and marked.
pub fn schema_json(info: &TableInfo) -> Value {
    let mut cols = vec![json!({"name": ID, "type": "integer", "managed": true})];
    cols.extend(
        info.columns
            .iter()
            .map(|c| json!({"name": c.name, "type": c.ty.as_str(), "managed": false})),
    );
    for m in [CREATED_AT, UPDATED_AT] {
        cols.push(json!({"name": m, "type": ColumnType::Date.as_str(), "managed": true}));
    }
    json!({
        "name": info.name,
        "columns": cols,
        "rowCount": info.row_count,
        "createdAt": crate::columns::format_ms(info.created_at),
        "updatedAt": crate::columns::format_ms(info.updated_at),
    })
}

fn decode<A: DeserializeOwned>(args: Value) -> Result<A, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::invalid(format!("invalid arguments: {e}")))
}

fn def(path: &str, name: &str, description: &str, annotations: Annotations) -> ToolDef {
    let path = ToolPath::parse(path).unwrap_or_else(|e| panic!("built-in tool path: {e}"));
    let mut d = ToolDef::new(path, name, description).with_annotations(annotations);
    d.origin = format!("plugin:{PLUGIN_ID}");
    d
}

fn tool<A, F, Fut>(tables: &Tables, def: ToolDef, f: F) -> Tool
where
    A: DeserializeOwned + Send + 'static,
    F: Fn(Tables, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value>> + Send + 'static,
{
    let tables = tables.clone();
    let f = Arc::new(f);
    Tool::from_fn(def, move |_ctx, args| {
        let tables = tables.clone();
        let f = f.clone();
        async move {
            let a: A = decode(args)?;
            f(tables, a).await.map_err(ToolError::from)
        }
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    name: String,
    columns: Vec<ColumnDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddColumnArgs {
    table: String,
    column: ColumnDef,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteColumnArgs {
    table: String,
    column: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RenameColumnArgs {
    table: String,
    from: String,
    to: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryArgs {
    table: String,
    filter: Option<Value>,
    sort: Option<Value>,
    limit: Option<usize>,
    offset: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InsertArgs {
    table: String,
    rows: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    table: String,
    filter: Option<Value>,
    #[serde(default)]
    all: bool,
    set: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpsertArgs {
    table: String,
    #[serde(rename = "match")]
    match_columns: Vec<String>,
    rows: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteRowsArgs {
    table: String,
    filter: Option<Value>,
    #[serde(default)]
    all: bool,
}

/// Turns `filter` / `all` into a selection; both at once is refused as ambiguous.
fn selection(filter: Option<Value>, all: bool, action: &'static str) -> Result<Selection> {
    let empty = |f: &Value| f.as_object().is_some_and(|o| o.is_empty());
    match (filter, all) {
        (Some(f), true) if !empty(&f) => Err(TablesError::InvalidArgs(format!(
            "{action}: give either a filter or \"all\": true, not both"
        ))),
        (_, true) => Ok(Selection::All),
        (Some(f), false) => Ok(Selection::Filter(f)),
        (None, false) => Err(TablesError::FilterRequired(action)),
    }
}

/// Builds the plugin around a [`Tables`] handle.
pub fn plugin(tables: Tables) -> Plugin {
    let t = &tables;
    let tools = [
        table_tools(t),
        column_tools(t),
        row_read_tools(t),
        row_change_tools(t),
    ];
    let mut p = Plugin::new(
        PLUGIN_ID,
        "Data Tables",
        "Typed data tables stored in Toolshed's own database: create tables, query rows with filters, and write rows transactionally.",
    );
    for tool in tools.into_iter().flatten() {
        p = p.with_tool(tool);
    }
    p
}

/// `tables.list`, `tables.create`, `tables.delete`, `tables.get_schema`.
fn table_tools(t: &Tables) -> Vec<Tool> {
    vec![
        tool(
            t,
            def(
                "tables.list",
                "List Tables",
                "List every data table with its columns and row count.",
                Annotations::READ_ONLY,
            )
            .with_input(object(json!({}), &[]))
            .with_output(json!({
                "type": "object",
                "properties": {"tables": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "columns": {"type": "array", "items": column_def_schema()},
                        "rowCount": {"type": "integer"}
                    },
                    "required": ["name", "columns", "rowCount"]
                }}},
                "required": ["tables"]
            })),
            |t, _: Empty| async move {
                let tables = t.list().await?;
                Ok(json!({"tables": tables.iter().map(|i| json!({
                    "name": i.name, "columns": i.columns, "rowCount": i.row_count
                })).collect::<Vec<_>>()}))
            },
        ),
        tool(
            t,
            def(
                "tables.create",
                "Create Table",
                "Create an empty data table with typed columns; id, createdAt and updatedAt are added automatically.",
                Annotations::WRITE,
            )
            .with_input(object(
                json!({
                    "name": {"type": "string", "pattern": NAME_PATTERN, "description": "Table name: a letter, then letters, digits or '_' (at most 63)."},
                    "columns": {"type": "array", "items": column_def_schema(), "description": "The user columns, in order; names must be unique."}
                }),
                &["name", "columns"],
            ))
            .with_output(schema_output()),
            |t, a: CreateArgs| async move { Ok(schema_json(&t.create(&a.name, a.columns).await?)) },
        ),
        tool(
            t,
            def(
                "tables.delete",
                "Delete Table",
                "Delete a data table and all of its rows, permanently.",
                Annotations::DESTRUCTIVE,
            )
            .with_input(object(json!({"name": table_prop()}), &["name"]))
            .with_output(json!({
                "type": "object",
                "properties": {"deleted": {"type": "string"}, "rowsDeleted": {"type": "integer"}},
                "required": ["deleted", "rowsDeleted"]
            })),
            |t, a: NameArgs| async move {
                let rows = t.drop_table(&a.name).await?;
                Ok(json!({"deleted": a.name, "rowsDeleted": rows}))
            },
        ),
        tool(
            t,
            def(
                "tables.get_schema",
                "Get Table Schema",
                "Show a table's columns and types (managed id, createdAt, updatedAt included) and its row count.",
                Annotations::READ_ONLY,
            )
            .with_input(object(json!({"name": table_prop()}), &["name"]))
            .with_output(schema_output()),
            |t, a: NameArgs| async move { Ok(schema_json(&t.info(&a.name).await?)) },
        ),
    ]
}

/// `tables.columns.add`, `tables.columns.delete`, `tables.columns.rename`.
fn column_tools(t: &Tables) -> Vec<Tool> {
    vec![
        tool(
            t,
            def(
                "tables.columns.add",
                "Add Column",
                "Add a typed column to a table; existing rows read null in it.",
                Annotations::WRITE,
            )
            .with_input(object(
                json!({"table": table_prop(), "column": column_def_schema()}),
                &["table", "column"],
            ))
            .with_output(schema_output()),
            |t, a: AddColumnArgs| async move { Ok(schema_json(&t.add_column(&a.table, a.column).await?)) },
        ),
        tool(
            t,
            def(
                "tables.columns.delete",
                "Delete Column",
                "Delete a column from a table, removing its value from every row.",
                Annotations::DESTRUCTIVE,
            )
            .with_input(object(
                json!({"table": table_prop(), "column": {"type": "string", "minLength": 1, "description": "The column to delete."}}),
                &["table", "column"],
            ))
            .with_output({
                let mut s = schema_output();
                s["properties"]["valuesRemoved"] = json!({"type": "integer", "description": "Rows that held a value in the column."});
                s
            }),
            |t, a: DeleteColumnArgs| async move {
                let (info, removed) = t.delete_column(&a.table, &a.column).await?;
                let mut out = schema_json(&info);
                out["valuesRemoved"] = json!(removed);
                Ok(out)
            },
        ),
        tool(
            t,
            def(
                "tables.columns.rename",
                "Rename Column",
                "Rename a column, keeping its type, position and every row's value.",
                Annotations::WRITE,
            )
            .with_input(object(
                json!({
                    "table": table_prop(),
                    "from": {"type": "string", "minLength": 1, "description": "The current column name."},
                    "to": {"type": "string", "pattern": NAME_PATTERN, "description": "The new column name (not used in the table yet)."}
                }),
                &["table", "from", "to"],
            ))
            .with_output(schema_output()),
            |t, a: RenameColumnArgs| async move {
                Ok(schema_json(&t.rename_column(&a.table, &a.from, &a.to).await?))
            },
        ),
    ]
}

/// `tables.rows.query` and `tables.rows.insert`.
fn row_read_tools(t: &Tables) -> Vec<Tool> {
    let filter_prop = json!({"$ref": "#/$defs/filter"});
    vec![
        tool(
            t,
            def(
                "tables.rows.query",
                "Query Rows",
                "Find rows of a table with a structured filter, sort and paging; returns one page and the total match count.\n\
                 Filter: {\"and\"|\"or\": [...]}, {\"not\": f} or {column, op, value} with op one of eq, ne, gt, gte, lt, lte, contains, startsWith, in, isNull, isNotNull. \
                 Numbers compare numerically and dates chronologically; ne matches nulls, other comparisons never do.",
                Annotations::READ_ONLY,
            )
            .with_input(with_filter_defs(object(
                json!({
                    "table": table_prop(),
                    "filter": filter_prop.clone(),
                    "sort": sort_schema(),
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT, "description": "Rows per page (default 100, at most 1000)."},
                    "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Matching rows to skip."}
                }),
                &["table"],
            )))
            .with_output(json!({
                "type": "object",
                "properties": {"rows": rows_output(), "total": {"type": "integer", "description": "Rows matching the filter, before paging."}},
                "required": ["rows", "total"]
            })),
            |t, a: QueryArgs| async move {
                let r = t
                    .query(
                        &a.table,
                        &QueryOptions {
                            filter: a.filter,
                            sort: a.sort,
                            limit: a.limit,
                            offset: a.offset,
                        },
                    )
                    .await?;
                Ok(json!({"rows": r.rows, "total": r.total}))
            },
        ),
        tool(
            t,
            def(
                "tables.rows.insert",
                "Insert Rows",
                "Insert rows into a table in one transaction: if any row is invalid, none is stored.",
                Annotations::WRITE,
            )
            .with_input(object(
                json!({"table": table_prop(), "rows": rows_input()}),
                &["table", "rows"],
            ))
            .with_output(json!({
                "type": "object",
                "properties": {"inserted": {"type": "integer"}, "rows": rows_output()},
                "required": ["inserted", "rows"]
            })),
            |t, a: InsertArgs| async move {
                let rows = t.insert(&a.table, &a.rows).await?;
                Ok(json!({"inserted": rows.len(), "rows": rows}))
            },
        ),
    ]
}

/// `tables.rows.update`, `tables.rows.upsert` and `tables.rows.delete`.
fn row_change_tools(t: &Tables) -> Vec<Tool> {
    let filter_prop = json!({"$ref": "#/$defs/filter"});
    vec![
        tool(
            t,
            def(
                "tables.rows.update",
                "Update Rows",
                "Set column values on the rows matching a filter (or every row with all: true); null clears a value.",
                Annotations::WRITE,
            )
            .with_input(with_filter_defs(object(
                json!({
                    "table": table_prop(),
                    "filter": filter_prop.clone(),
                    "all": {"type": "boolean", "default": false, "description": "Update every row; use instead of a filter."},
                    "set": {"type": "object", "minProperties": 1, "description": "Column values to set."}
                }),
                &["table", "set"],
            )))
            .with_output(json!({
                "type": "object",
                "properties": {"updated": {"type": "integer"}, "rows": rows_output()},
                "required": ["updated", "rows"]
            })),
            |t, a: UpdateArgs| async move {
                let sel = selection(a.filter, a.all, "updating rows")?;
                let rows = t.update(&a.table, &sel, &a.set).await?;
                Ok(json!({"updated": rows.len(), "rows": rows}))
            },
        ),
        tool(
            t,
            def(
                "tables.rows.upsert",
                "Upsert Rows",
                "Update the rows whose match columns equal each given row's values, or insert the row when none does; one transaction.",
                Annotations::WRITE,
            )
            .with_input(object(
                json!({
                    "table": table_prop(),
                    "match": {"type": "array", "minItems": 1, "uniqueItems": true, "items": {"type": "string"}, "description": "Columns that identify a row; each given row needs non-null values for them."},
                    "rows": rows_input()
                }),
                &["table", "match", "rows"],
            ))
            .with_output(json!({
                "type": "object",
                "properties": {"inserted": {"type": "integer"}, "updated": {"type": "integer"}, "rows": rows_output()},
                "required": ["inserted", "updated", "rows"]
            })),
            |t, a: UpsertArgs| async move {
                let r = t.upsert(&a.table, &a.match_columns, &a.rows).await?;
                Ok(json!({"inserted": r.inserted, "updated": r.updated, "rows": r.rows}))
            },
        ),
        tool(
            t,
            def(
                "tables.rows.delete",
                "Delete Rows",
                "Delete the rows matching a filter; deleting every row needs all: true instead of a filter.",
                Annotations::DESTRUCTIVE,
            )
            .with_input(with_filter_defs(object(
                json!({
                    "table": table_prop(),
                    "filter": filter_prop,
                    "all": {"type": "boolean", "default": false, "description": "Delete every row; required when no filter is given."}
                }),
                &["table"],
            )))
            .with_output(json!({
                "type": "object",
                "properties": {"deleted": {"type": "integer"}, "ids": {"type": "array", "items": {"type": "integer"}}},
                "required": ["deleted", "ids"]
            })),
            |t, a: DeleteRowsArgs| async move {
                let sel = selection(a.filter, a.all, "deleting rows")?;
                let ids = t.delete_rows(&a.table, &sel).await?;
                Ok(json!({"deleted": ids.len(), "ids": ids}))
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolshed_core::CompiledSchema;

    #[test]
    fn selection_rules() {
        assert!(matches!(
            selection(None, false, "deleting rows"),
            Err(TablesError::FilterRequired(_))
        ));
        assert_eq!(selection(None, true, "x").unwrap(), Selection::All);
        assert_eq!(
            selection(Some(json!({})), true, "x").unwrap(),
            Selection::All
        );
        let both = selection(
            Some(json!({"column": "a", "op": "isNull"})),
            true,
            "deleting rows",
        )
        .unwrap_err();
        assert!(both.to_string().contains("not both"));
    }

    #[test]
    fn schemas_compile_and_are_strict() {
        let defs = all_defs();
        assert_eq!(defs.len(), PATHS.len());
        for d in &defs {
            assert!(PATHS.contains(&d.path.as_str()), "{}", d.path);
            assert_eq!(d.input_schema["additionalProperties"], false, "{}", d.path);
            CompiledSchema::compile(&d.input_schema).unwrap();
            CompiledSchema::compile(d.output_schema.as_ref().unwrap()).unwrap();
            assert!(!d.description.is_empty());
            assert!(
                toolshed_core::tool::is_title_case(&d.name),
                "{}: name {:?} is not Title Case",
                d.path,
                d.name
            );
        }
        let query = defs
            .iter()
            .find(|d| d.path.as_str() == "tables.rows.query")
            .unwrap();
        let s = CompiledSchema::compile(&query.input_schema).unwrap();
        assert!(s.is_valid(&json!({"table": "t", "filter": {"and": [
            {"column": "a", "op": "eq", "value": 1},
            {"not": {"column": "b", "op": "isNull"}}
        ]}, "sort": [{"column": "a", "direction": "desc"}], "limit": 5})));
        assert!(!s.is_valid(&json!({"table": "t", "filter": {"column": "a", "op": "like"}})));
        assert!(!s.is_valid(&json!({"table": "t", "limit": 1001})));
        assert!(!s.is_valid(&json!({"table": "t", "extra": 1})));
    }

    fn all_defs() -> Vec<ToolDef> {
        // Building the plugin needs a store; an in-memory one on a small runtime will do.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let store = rt
            .block_on(toolshed_store::Store::open("sqlite::memory:"))
            .unwrap();
        plugin(Tables::new(store))
            .tools
            .into_iter()
            .map(|t| t.def)
            .collect()
    }
}
