//! Data tables kept in Toolshed's own store, offered to agents as the plugin `tables`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = toolshed_store::Store::open("sqlite::memory:").await?;
//! let plugin = toolshed_tables::plugin(store);
//! assert_eq!(plugin.id, "tables");
//! # Ok(()) }
//! ```
//!
//! - [`columns`]: column types, naming rules, value checking and date normalisation.
//! - [`query`]: the filter and sort language, evaluated in Rust so both backends agree.
//! - [`repo`]: [`Tables`], the storage operations, each write in one transaction.
//! - [`tools`]: the tool definitions (schemas, annotations) and handlers.
//! - [`error`]: [`TablesError`] and its mapping to tool errors.

pub mod columns;
pub mod error;
pub mod query;
pub mod repo;
pub mod tools;

pub use columns::{ColumnDef, ColumnType};
pub use error::TablesError;
pub use repo::{QueryOptions, QueryResult, Selection, TableInfo, Tables, UpsertResult};

/// The plugin id, also the namespace of its tools.
pub const PLUGIN_ID: &str = "tables";

/// The `tables` plugin over a store.
pub fn plugin(store: toolshed_store::Store) -> toolshed_core::Plugin {
    tools::plugin(Tables::new(store))
}
