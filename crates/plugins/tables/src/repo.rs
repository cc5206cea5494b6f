//! Table storage over Toolshed's store: table definitions in `dt_tables`, rows as JSON in
//! `dt_rows`.
//!
//! Every write runs in one transaction that starts by updating the table's `dt_tables` row.
//! That first write takes the lock (SQLite's write lock, PostgreSQL's row lock), so concurrent
//! writes to one table run one after the other: ids handed out from `next_row_id` never repeat,
//! and schema and row changes never interleave. A write that fails part-way leaves nothing.
//!
//! Stored row data holds only non-null user-column values; rows are read back with every
//! column (missing ones as `null`) plus `id`, `createdAt` and `updatedAt`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sqlx::{AssertSqlSafe, Row};
use toolshed_store::{now_ms, Store};

use crate::columns::{
    check_column_name, check_columns, check_table_name, format_ms, normalize_value, ColumnDef,
    Site, CREATED_AT, ID, MANAGED, UPDATED_AT,
};
use crate::error::{Result, TablesError};
use crate::query::{describe_columns, equal, parse_sort, sort_rows, Filter};

/// The default number of rows a query returns.
pub const DEFAULT_LIMIT: usize = 100;
/// The most rows one query returns.
pub const MAX_LIMIT: usize = 1000;

type Tx = sqlx::Transaction<'static, sqlx::Any>;

/// A row as returned: `id`, every user column, `createdAt`, `updatedAt`.
pub type RowObject = Map<String, Value>;

/// A table's definition and size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableInfo {
    pub name: String,
    /// The user columns, in order.
    pub columns: Vec<ColumnDef>,
    pub row_count: i64,
    /// Epoch milliseconds.
    pub created_at: i64,
    /// Epoch milliseconds of the last change to the table or its rows.
    pub updated_at: i64,
}

/// What to read from a table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryOptions {
    /// A filter (see [`crate::query`]); `None` or `{}` selects every row.
    pub filter: Option<Value>,
    /// Sort keys (see [`crate::query`]); rows are in `id` order otherwise.
    pub sort: Option<Value>,
    /// At most this many rows (default [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`]).
    pub limit: Option<usize>,
    /// Rows to skip after filtering and sorting.
    pub offset: Option<usize>,
}

/// One page of a query and the number of rows matching the filter.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    pub rows: Vec<RowObject>,
    pub total: usize,
}

/// What an upsert did.
#[derive(Debug, Clone, PartialEq)]
pub struct UpsertResult {
    pub inserted: usize,
    pub updated: usize,
    /// For each given row, in order, the stored row(s) it became.
    pub rows: Vec<RowObject>,
}

/// The rows a bulk write should touch: the ones a filter selects, or explicitly all of them.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// Rows matching a filter; an empty filter is refused.
    Filter(Value),
    /// Every row.
    All,
}

struct Meta {
    columns: Vec<ColumnDef>,
    next_row_id: i64,
    created_at: i64,
    updated_at: i64,
}

struct StoredRow {
    id: i64,
    data: Map<String, Value>,
    created_at: i64,
    updated_at: i64,
}

impl StoredRow {
    fn view(&self, columns: &[ColumnDef]) -> RowObject {
        let mut out = Map::new();
        out.insert(ID.into(), Value::from(self.id));
        for c in columns {
            out.insert(
                c.name.clone(),
                self.data.get(&c.name).cloned().unwrap_or(Value::Null),
            );
        }
        out.insert(CREATED_AT.into(), Value::String(format_ms(self.created_at)));
        out.insert(UPDATED_AT.into(), Value::String(format_ms(self.updated_at)));
        out
    }

    /// Applies checked values: `null` removes a value.
    fn merge(&mut self, values: &Map<String, Value>) {
        for (k, v) in values {
            if v.is_null() {
                self.data.remove(k);
            } else {
                self.data.insert(k.clone(), v.clone());
            }
        }
    }
}

fn json_text(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// Data tables on a [`Store`]. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Tables {
    store: Store,
}

impl Tables {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    fn db(&self, e: sqlx::Error) -> TablesError {
        TablesError::Store(self.store.classify(e))
    }

    async fn begin(&self) -> Result<Tx> {
        self.store.pool().begin().await.map_err(|e| self.db(e))
    }

    async fn commit(&self, tx: Tx) -> Result<()> {
        tx.commit().await.map_err(|e| self.db(e))
    }

    /// Locks the table for this transaction (by writing its row first) and reads it.
    async fn lock(&self, tx: &mut Tx, table: &str, now: i64) -> Result<Meta> {
        let done = sqlx::query("UPDATE dt_tables SET updated_at = $1 WHERE name = $2")
            .bind(now)
            .bind(table)
            .execute(&mut **tx)
            .await
            .map_err(|e| self.db(e))?;
        if done.rows_affected() == 0 {
            return Err(TablesError::TableNotFound(table.to_string()));
        }
        self.read_meta(tx, table).await
    }

    async fn read_meta(&self, tx: &mut Tx, table: &str) -> Result<Meta> {
        let row = sqlx::query(
            "SELECT columns, next_row_id, created_at, updated_at FROM dt_tables WHERE name = $1",
        )
        .bind(table)
        .fetch_optional(&mut **tx)
        .await
        .map_err(|e| self.db(e))?
        .ok_or_else(|| TablesError::TableNotFound(table.to_string()))?;
        let columns: String = row.try_get("columns").map_err(|e| self.db(e))?;
        Ok(Meta {
            columns: serde_json::from_str(&columns).map_err(|e| TablesError::Corrupt {
                table: table.to_string(),
                reason: format!("column list: {e}"),
            })?,
            next_row_id: row.try_get("next_row_id").map_err(|e| self.db(e))?,
            created_at: row.try_get("created_at").map_err(|e| self.db(e))?,
            updated_at: row.try_get("updated_at").map_err(|e| self.db(e))?,
        })
    }

    async fn load_rows(&self, tx: &mut Tx, table: &str) -> Result<Vec<StoredRow>> {
        let rows = sqlx::query(
            "SELECT id, data, created_at, updated_at FROM dt_rows WHERE table_name = $1 ORDER BY id",
        )
        .bind(table)
        .fetch_all(&mut **tx)
        .await
        .map_err(|e| self.db(e))?;
        rows.iter()
            .map(|r| {
                let id: i64 = r.try_get("id").map_err(|e| self.db(e))?;
                let data: String = r.try_get("data").map_err(|e| self.db(e))?;
                let data = match serde_json::from_str(&data) {
                    Ok(Value::Object(m)) => m,
                    Ok(_) => Map::new(),
                    Err(e) => {
                        return Err(TablesError::Corrupt {
                            table: table.to_string(),
                            reason: format!("row {id}: {e}"),
                        })
                    }
                };
                Ok(StoredRow {
                    id,
                    data,
                    created_at: r.try_get("created_at").map_err(|e| self.db(e))?,
                    updated_at: r.try_get("updated_at").map_err(|e| self.db(e))?,
                })
            })
            .collect()
    }

    async fn write_columns(&self, tx: &mut Tx, table: &str, columns: &[ColumnDef]) -> Result<()> {
        sqlx::query("UPDATE dt_tables SET columns = $1 WHERE name = $2")
            .bind(json_text(&columns))
            .bind(table)
            .execute(&mut **tx)
            .await
            .map_err(|e| self.db(e))?;
        Ok(())
    }

    async fn insert_row(&self, tx: &mut Tx, table: &str, row: &StoredRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO dt_rows (table_name, id, data, created_at, updated_at) VALUES ($1,$2,$3,$4,$5)",
        )
        .bind(table)
        .bind(row.id)
        .bind(json_text(&row.data))
        .bind(row.created_at)
        .bind(row.updated_at)
        .execute(&mut **tx)
        .await
        .map_err(|e| self.db(e))?;
        Ok(())
    }

    async fn update_row(&self, tx: &mut Tx, table: &str, row: &StoredRow) -> Result<()> {
        sqlx::query(
            "UPDATE dt_rows SET data = $1, updated_at = $2 WHERE table_name = $3 AND id = $4",
        )
        .bind(json_text(&row.data))
        .bind(row.updated_at)
        .bind(table)
        .bind(row.id)
        .execute(&mut **tx)
        .await
        .map_err(|e| self.db(e))?;
        Ok(())
    }

    async fn set_next_id(&self, tx: &mut Tx, table: &str, next: i64) -> Result<()> {
        sqlx::query("UPDATE dt_tables SET next_row_id = $1 WHERE name = $2")
            .bind(next)
            .bind(table)
            .execute(&mut **tx)
            .await
            .map_err(|e| self.db(e))?;
        Ok(())
    }

    async fn count_rows(&self, tx: &mut Tx, table: &str) -> Result<i64> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM dt_rows WHERE table_name = $1")
            .bind(table)
            .fetch_one(&mut **tx)
            .await
            .map_err(|e| self.db(e))?;
        row.try_get("n").map_err(|e| self.db(e))
    }

    /// Every table with its user columns and row count, by name.
    pub async fn list(&self) -> Result<Vec<TableInfo>> {
        let mut tx = self.begin().await?;
        let counts =
            sqlx::query("SELECT table_name, COUNT(*) AS n FROM dt_rows GROUP BY table_name")
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| self.db(e))?;
        let counts = counts
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<String, _>("table_name")?,
                    r.try_get::<i64, _>("n")?,
                ))
            })
            .collect::<std::result::Result<std::collections::HashMap<_, _>, sqlx::Error>>()
            .map_err(|e| self.db(e))?;
        let rows = sqlx::query(
            "SELECT name, columns, created_at, updated_at FROM dt_tables ORDER BY name",
        )
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| self.db(e))?;
        self.commit(tx).await?;
        rows.iter()
            .map(|r| {
                let name: String = r.try_get("name").map_err(|e| self.db(e))?;
                let columns: String = r.try_get("columns").map_err(|e| self.db(e))?;
                Ok(TableInfo {
                    columns: serde_json::from_str(&columns).map_err(|e| TablesError::Corrupt {
                        table: name.clone(),
                        reason: format!("column list: {e}"),
                    })?,
                    row_count: counts.get(&name).copied().unwrap_or(0),
                    created_at: r.try_get("created_at").map_err(|e| self.db(e))?,
                    updated_at: r.try_get("updated_at").map_err(|e| self.db(e))?,
                    name,
                })
            })
            .collect()
    }

    /// One table's definition and row count.
    pub async fn info(&self, table: &str) -> Result<TableInfo> {
        let mut tx = self.begin().await?;
        let meta = self.read_meta(&mut tx, table).await?;
        let row_count = self.count_rows(&mut tx, table).await?;
        self.commit(tx).await?;
        Ok(TableInfo {
            name: table.to_string(),
            columns: meta.columns,
            row_count,
            created_at: meta.created_at,
            updated_at: meta.updated_at,
        })
    }

    /// Creates an empty table. A taken name is a conflict.
    pub async fn create(&self, table: &str, columns: Vec<ColumnDef>) -> Result<TableInfo> {
        check_table_name(table)?;
        check_columns(&columns)?;
        let now = now_ms();
        let done = sqlx::query(
            "INSERT INTO dt_tables (name, columns, next_row_id, created_at, updated_at) VALUES ($1,$2,1,$3,$3)",
        )
        .bind(table)
        .bind(json_text(&columns))
        .bind(now)
        .execute(self.store.pool())
        .await;
        if let Err(e) = done {
            let unique = e
                .as_database_error()
                .is_some_and(|d| d.is_unique_violation());
            if unique || self.info(table).await.is_ok() {
                return Err(TablesError::TableExists(table.to_string()));
            }
            return Err(self.db(e));
        }
        Ok(TableInfo {
            name: table.to_string(),
            columns,
            row_count: 0,
            created_at: now,
            updated_at: now,
        })
    }

    /// Deletes a table and all its rows; returns how many rows went with it.
    pub async fn drop_table(&self, table: &str) -> Result<u64> {
        let mut tx = self.begin().await?;
        self.lock(&mut tx, table, now_ms()).await?;
        let rows = sqlx::query("DELETE FROM dt_rows WHERE table_name = $1")
            .bind(table)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?
            .rows_affected();
        sqlx::query("DELETE FROM dt_tables WHERE name = $1")
            .bind(table)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        self.commit(tx).await?;
        Ok(rows)
    }

    /// Adds a user column; existing rows read `null` in it.
    pub async fn add_column(&self, table: &str, column: ColumnDef) -> Result<TableInfo> {
        check_column_name(&column.name)?;
        let mut tx = self.begin().await?;
        let mut meta = self.lock(&mut tx, table, now_ms()).await?;
        if meta.columns.iter().any(|c| c.name == column.name) {
            return Err(TablesError::ColumnExists {
                table: table.to_string(),
                column: column.name,
            });
        }
        meta.columns.push(column);
        self.write_columns(&mut tx, table, &meta.columns).await?;
        self.commit(tx).await?;
        self.info(table).await
    }

    fn find_column(table: &str, meta: &Meta, column: &str) -> Result<usize> {
        meta.columns
            .iter()
            .position(|c| c.name == column)
            .ok_or_else(|| {
                if MANAGED.contains(&column) {
                    TablesError::ReservedColumn(column.to_string())
                } else {
                    TablesError::ColumnNotFound {
                        table: table.to_string(),
                        column: column.to_string(),
                        available: describe_columns(&meta.columns),
                    }
                }
            })
    }

    /// Removes a user column and its value from every row; returns the table and how many rows
    /// held a value.
    pub async fn delete_column(&self, table: &str, column: &str) -> Result<(TableInfo, u64)> {
        let mut tx = self.begin().await?;
        let mut meta = self.lock(&mut tx, table, now_ms()).await?;
        let at = Self::find_column(table, &meta, column)?;
        meta.columns.remove(at);
        self.write_columns(&mut tx, table, &meta.columns).await?;
        let mut changed = 0;
        for mut row in self.load_rows(&mut tx, table).await? {
            if row.data.remove(column).is_some() {
                self.update_row(&mut tx, table, &row).await?;
                changed += 1;
            }
        }
        self.commit(tx).await?;
        Ok((self.info(table).await?, changed))
    }

    /// Renames a user column, keeping its position, type and every row's value.
    pub async fn rename_column(&self, table: &str, from: &str, to: &str) -> Result<TableInfo> {
        check_column_name(to)?;
        let mut tx = self.begin().await?;
        let mut meta = self.lock(&mut tx, table, now_ms()).await?;
        let at = Self::find_column(table, &meta, from)?;
        if meta.columns.iter().any(|c| c.name == to) {
            return Err(TablesError::ColumnExists {
                table: table.to_string(),
                column: to.to_string(),
            });
        }
        meta.columns[at].name = to.to_string();
        self.write_columns(&mut tx, table, &meta.columns).await?;
        for mut row in self.load_rows(&mut tx, table).await? {
            if let Some(v) = row.data.remove(from) {
                row.data.insert(to.to_string(), v);
                self.update_row(&mut tx, table, &row).await?;
            }
        }
        self.commit(tx).await?;
        self.info(table).await
    }

    /// Filters, sorts and pages a table's rows.
    pub async fn query(&self, table: &str, q: &QueryOptions) -> Result<QueryResult> {
        let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(TablesError::InvalidArgs(format!(
                "limit must be between 1 and {MAX_LIMIT}, got {limit}"
            )));
        }
        let mut tx = self.begin().await?;
        let meta = self.read_meta(&mut tx, table).await?;
        let filter = match &q.filter {
            Some(f) => Filter::parse(f, table, &meta.columns)?,
            None => Filter::All,
        };
        let sort = match &q.sort {
            Some(s) => parse_sort(s, table, &meta.columns)?,
            None => Vec::new(),
        };
        let stored = self.load_rows(&mut tx, table).await?;
        self.commit(tx).await?;
        let mut rows: Vec<RowObject> = stored
            .iter()
            .map(|r| r.view(&meta.columns))
            .filter(|r| filter.matches(r))
            .collect();
        let total = rows.len();
        sort_rows(&mut rows, &sort);
        let rows = rows
            .into_iter()
            .skip(q.offset.unwrap_or(0))
            .take(limit)
            .collect();
        Ok(QueryResult { rows, total })
    }

    /// Checks one row of a write: an object of known user columns with values of their types.
    /// `null`s are kept (they clear values on update).
    fn check_row(
        table: &str,
        columns: &[ColumnDef],
        v: &Value,
        site: Site<'_>,
        context: &str,
    ) -> Result<Map<String, Value>> {
        let Value::Object(obj) = v else {
            return Err(TablesError::InvalidArgs(format!(
                "{context}: expected an object of column values, got {}",
                crate::columns::json_type(v)
            )));
        };
        if let Some(m) = obj.keys().find(|k| MANAGED.contains(&k.as_str())) {
            return Err(TablesError::ManagedColumn {
                context: context.to_string(),
                column: m.clone(),
            });
        }
        let unknown: Vec<String> = obj
            .keys()
            .filter(|k| !columns.iter().any(|c| &c.name == *k))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(TablesError::UnknownColumns {
                context: context.to_string(),
                table: table.to_string(),
                columns: unknown,
                available: describe_columns(columns),
            });
        }
        let mut out = Map::new();
        for c in columns {
            if let Some(v) = obj.get(&c.name) {
                out.insert(c.name.clone(), normalize_value(c.ty, &c.name, v, site)?);
            }
        }
        Ok(out)
    }

    /// Inserts rows in one transaction; any bad row stores none. Returns the stored rows.
    pub async fn insert(&self, table: &str, rows: &[Value]) -> Result<Vec<RowObject>> {
        if rows.is_empty() {
            return Err(TablesError::InvalidArgs(
                "rows: give at least one row".into(),
            ));
        }
        let now = now_ms();
        let mut tx = self.begin().await?;
        let meta = self.lock(&mut tx, table, now).await?;
        let mut out = Vec::with_capacity(rows.len());
        let mut next = meta.next_row_id;
        let mut stored = Vec::with_capacity(rows.len());
        for (i, v) in rows.iter().enumerate() {
            let mut data =
                Self::check_row(table, &meta.columns, v, Site::Row(i), &format!("row {i}"))?;
            data.retain(|_, v| !v.is_null());
            stored.push(StoredRow {
                id: next,
                data,
                created_at: now,
                updated_at: now,
            });
            next += 1;
        }
        self.set_next_id(&mut tx, table, next).await?;
        for row in &stored {
            self.insert_row(&mut tx, table, row).await?;
            out.push(row.view(&meta.columns));
        }
        self.commit(tx).await?;
        Ok(out)
    }

    fn selection_filter(
        table: &str,
        columns: &[ColumnDef],
        selection: &Selection,
        action: &'static str,
    ) -> Result<Filter> {
        match selection {
            Selection::All => Ok(Filter::All),
            Selection::Filter(f) => {
                let f = Filter::parse(f, table, columns)?;
                if f.is_all() {
                    return Err(TablesError::FilterRequired(action));
                }
                Ok(f)
            }
        }
    }

    /// Sets values on the selected rows; returns the updated rows. Values are checked before
    /// anything is written.
    pub async fn update(
        &self,
        table: &str,
        selection: &Selection,
        set: &Value,
    ) -> Result<Vec<RowObject>> {
        let now = now_ms();
        let mut tx = self.begin().await?;
        let meta = self.lock(&mut tx, table, now).await?;
        let filter = Self::selection_filter(table, &meta.columns, selection, "updating rows")?;
        let values = Self::check_row(table, &meta.columns, set, Site::Other("set"), "set")?;
        if values.is_empty() {
            return Err(TablesError::InvalidArgs(
                "set: give at least one column value".into(),
            ));
        }
        let mut out = Vec::new();
        for mut row in self.load_rows(&mut tx, table).await? {
            if !filter.matches(&row.view(&meta.columns)) {
                continue;
            }
            row.merge(&values);
            row.updated_at = now;
            self.update_row(&mut tx, table, &row).await?;
            out.push(row.view(&meta.columns));
        }
        self.commit(tx).await?;
        Ok(out)
    }

    /// For each row, updates the stored rows whose `match` columns equal its values, or inserts
    /// it when there are none. Rows of one call see each other: two rows with the same key
    /// insert once and then update.
    pub async fn upsert(
        &self,
        table: &str,
        match_columns: &[String],
        rows: &[Value],
    ) -> Result<UpsertResult> {
        if rows.is_empty() {
            return Err(TablesError::InvalidArgs(
                "rows: give at least one row".into(),
            ));
        }
        if match_columns.is_empty() {
            return Err(TablesError::InvalidArgs(
                "match: name at least one column that identifies a row".into(),
            ));
        }
        let now = now_ms();
        let mut tx = self.begin().await?;
        let meta = self.lock(&mut tx, table, now).await?;
        let mut keys = Vec::new();
        for (i, m) in match_columns.iter().enumerate() {
            if match_columns[..i].contains(m) {
                return Err(TablesError::InvalidArgs(format!(
                    "match: column '{m}' is named twice"
                )));
            }
            let Some(c) = meta.columns.iter().find(|c| &c.name == m) else {
                return Err(TablesError::UnknownColumns {
                    context: "match".into(),
                    table: table.to_string(),
                    columns: vec![m.clone()],
                    available: describe_columns(&meta.columns),
                });
            };
            keys.push(c.clone());
        }
        let mut working = self.load_rows(&mut tx, table).await?;
        let existing = working.len();
        let mut touched = BTreeSet::new();
        let mut next = meta.next_row_id;
        let mut result_ids = Vec::new();
        for (i, v) in rows.iter().enumerate() {
            let ctx = format!("row {i}");
            let values = Self::check_row(table, &meta.columns, v, Site::Row(i), &ctx)?;
            let mut key = Vec::with_capacity(keys.len());
            for c in &keys {
                match values.get(&c.name) {
                    Some(v) if !v.is_null() => key.push((c, v)),
                    _ => {
                        return Err(TablesError::InvalidArgs(format!(
                            "{ctx}: match column '{}' needs a non-null value",
                            c.name
                        )))
                    }
                }
            }
            let hits: Vec<usize> = working
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    key.iter()
                        .all(|(c, v)| r.data.get(&c.name).is_some_and(|have| equal(c.ty, have, v)))
                })
                .map(|(i, _)| i)
                .collect();
            if hits.is_empty() {
                let mut row = StoredRow {
                    id: next,
                    data: Map::new(),
                    created_at: now,
                    updated_at: now,
                };
                next += 1;
                row.merge(&values);
                result_ids.push(working.len());
                touched.insert(working.len());
                working.push(row);
            } else {
                for at in hits {
                    working[at].merge(&values);
                    working[at].updated_at = now;
                    touched.insert(at);
                    result_ids.push(at);
                }
            }
        }
        let (mut inserted, mut updated) = (0, 0);
        for &at in &touched {
            if at < existing {
                self.update_row(&mut tx, table, &working[at]).await?;
                updated += 1;
            } else {
                self.insert_row(&mut tx, table, &working[at]).await?;
                inserted += 1;
            }
        }
        self.set_next_id(&mut tx, table, next).await?;
        self.commit(tx).await?;
        Ok(UpsertResult {
            inserted,
            updated,
            rows: result_ids
                .into_iter()
                .map(|at| working[at].view(&meta.columns))
                .collect(),
        })
    }

    /// Deletes the selected rows; returns their ids.
    pub async fn delete_rows(&self, table: &str, selection: &Selection) -> Result<Vec<i64>> {
        let mut tx = self.begin().await?;
        let meta = self.lock(&mut tx, table, now_ms()).await?;
        let filter = Self::selection_filter(table, &meta.columns, selection, "deleting rows")?;
        let ids: Vec<i64> = self
            .load_rows(&mut tx, table)
            .await?
            .iter()
            .filter(|r| filter.matches(&r.view(&meta.columns)))
            .map(|r| r.id)
            .collect();
        if matches!(selection, Selection::All) {
            sqlx::query("DELETE FROM dt_rows WHERE table_name = $1")
                .bind(table)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.db(e))?;
        } else {
            for chunk in ids.chunks(500) {
                let list = chunk
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(",");
                // The list holds only integers produced above.
                sqlx::query(AssertSqlSafe(format!(
                    "DELETE FROM dt_rows WHERE table_name = $1 AND id IN ({list})"
                )))
                .bind(table)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.db(e))?;
            }
        }
        self.commit(tx).await?;
        Ok(ids)
    }
}
