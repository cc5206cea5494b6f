//! Toolshed's persistence layer.
//!
//! One [`Store`] over sqlx's `Any` driver: SQLite is the embedded default (a file in the data
//! directory, created on first run), PostgreSQL runs replicas. Both use the same migration set in
//! `migrations/`, so SQL here sticks to the portable subset (TEXT ids, BIGINT epoch milliseconds,
//! JSON as TEXT, `$n` placeholders).
//!
//! - [`executions`]: durable script/call executions (journal, pending approval, decisions).
//! - [`events`]: stored execution events, and the retention purge of finished executions.
//! - [`audit`]: the audit log.
//! - [`sources`]: runtime-declared tool sources.
//! - [`settings`]: server-wide values shared by replicas (the sealing key's check value).
//! - [`plugin_state`]: small versioned state documents of plugins (compare-and-set writes).
//!
//! The data-tables plugin keeps its own tables (`dt_tables`, `dt_rows`) through [`Store::pool`].

pub mod audit;
pub mod background;
pub mod events;
pub mod executions;
pub mod grants;
pub mod models;
#[cfg(test)]
mod pg_test;
pub mod plugin_state;
pub mod servers;
pub mod settings;
pub mod signed_in;
pub mod sources;
pub mod threads;
pub mod upstream_tokens;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, ConnectOptions, Connection, Executor};

pub use audit::AuditEntry;
pub use events::StoredEvent;
pub use executions::{ExecutionRecord, ExecutionStatus, Expired};
pub use sources::SourceRecord;
pub use threads::{NewThreadMessage, ThreadKey, ThreadMessage};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Which database is behind the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Store failures, with enough context to act on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL '{0}': use sqlite://PATH or postgres://...")]
    UnsupportedUrl(String),
    #[error("cannot open the database at {location}: {reason}")]
    Open { location: String, reason: String },
    #[error("the database at {location} is locked by another process (it stayed busy for {waited_ms} ms)")]
    Locked { location: String, waited_ms: u64 },
    #[error("the database at {location} is not a valid Toolshed database (corrupt or not SQLite): {reason}")]
    Corrupt { location: String, reason: String },
    #[error("database migration failed: {0}")]
    Migrate(String),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("stored data is malformed in {what}: {reason}")]
    Malformed { what: String, reason: String },
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The handle to the database. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    location: String,
    /// An in-memory database: one connection held open beside the pool, so that the database
    /// outlives a pool connection that is closed (a query cancelled mid-way closes its
    /// connection, and the pool then opens another onto the same database).
    _memory: Option<Arc<tokio::sync::Mutex<sqlx::AnyConnection>>>,
}

const BUSY_TIMEOUT_MS: u64 = 5_000;

impl Store {
    /// Opens (creating if needed) the SQLite database `toolshed.db` in `data_dir`.
    pub async fn open_dir(data_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(data_dir).map_err(|e| StoreError::Open {
            location: data_dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let file = data_dir.join("toolshed.db");
        Self::open(&format!("sqlite://{}?mode=rwc", file.display())).await
    }

    /// Opens a database by URL (`sqlite://PATH[?mode=rwc]`, `sqlite::memory:`, `postgres://...`)
    /// and applies pending migrations.
    pub async fn open(url: &str) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_string()));
        };
        let location = redact_url(url);
        let memory = url.contains(":memory:");
        // `sqlite::memory:` gives every connection a database of its own; a named shared one is
        // the same database for every connection of this store.
        let shared;
        let url = if backend == Backend::Sqlite && memory {
            shared = format!(
                "sqlite:file:toolshed-memory-{}?mode=memory&cache=shared",
                uuid::Uuid::new_v4().simple()
            );
            shared.as_str()
        } else {
            url
        };
        let opts = AnyConnectOptions::from_str(url)
            .map_err(|e| StoreError::Open {
                location: location.clone(),
                reason: e.to_string(),
            })?
            .log_statements(tracing::log::LevelFilter::Trace);
        if backend == Backend::Sqlite && !memory {
            check_sqlite_header(url, &location)?;
        }
        let mut pool_opts = AnyPoolOptions::new()
            // One for memory: shared-cache locks fail at once instead of waiting (no busy
            // timeout applies to them), so connections of one memory database must not overlap.
            .max_connections(if backend == Backend::Sqlite && memory {
                1
            } else {
                8
            })
            .acquire_timeout(Duration::from_secs(10));
        let mut keeper = None;
        if backend == Backend::Sqlite {
            // One probe connection first, so a locked or unreadable file fails at once with
            // its real cause instead of a pool time-out.
            let mut probe = sqlx::AnyConnection::connect_with(&opts)
                .await
                .map_err(|e| classify_open_error(&location, e))?;
            sqlite_pragmas(&mut probe)
                .await
                .map_err(|e| classify_open_error(&location, e))?;
            if memory {
                keeper = Some(Arc::new(tokio::sync::Mutex::new(probe)));
            } else {
                let _ = probe.close().await;
            }
            pool_opts = pool_opts
                .after_connect(|conn, _meta| Box::pin(async move { sqlite_pragmas(conn).await }));
        }
        let pool = pool_opts
            .connect_with(opts)
            .await
            .map_err(|e| classify_open_error(&location, e))?;
        let store = Self {
            pool,
            backend,
            location,
            _memory: keeper,
        };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> Result<()> {
        MIGRATOR.run(&self.pool).await.map_err(|e| {
            let text = e.to_string();
            if text.contains("file is not a database") || text.contains("malformed") {
                StoreError::Corrupt {
                    location: self.location.clone(),
                    reason: text,
                }
            } else if text.contains("database is locked") {
                StoreError::Locked {
                    location: self.location.clone(),
                    waited_ms: BUSY_TIMEOUT_MS,
                }
            } else {
                StoreError::Migrate(text)
            }
        })
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Where the database is (passwords redacted), for messages.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Maps a sqlx error to a store error with this store's location.
    pub fn classify(&self, e: sqlx::Error) -> StoreError {
        classify_open_error(&self.location, e)
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

async fn sqlite_pragmas(conn: &mut sqlx::AnyConnection) -> Result<(), sqlx::Error> {
    conn.execute(sqlx::AssertSqlSafe(format!(
        "PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}"
    )))
    .await?;
    conn.execute("PRAGMA journal_mode = WAL").await?;
    conn.execute("PRAGMA synchronous = NORMAL").await?;
    conn.execute("PRAGMA foreign_keys = ON").await?;
    Ok(())
}

/// Refuses a file that exists but is not SQLite, before sqlx touches it.
fn check_sqlite_header(url: &str, location: &str) -> Result<()> {
    let path = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:")
        .split('?')
        .next()
        .unwrap_or_default();
    let Ok(mut f) = std::fs::File::open(path) else {
        return Ok(()); // created on first run
    };
    let mut head = [0u8; 16];
    use std::io::Read;
    let n = f.read(&mut head).unwrap_or(0);
    if n == 0 {
        return Ok(());
    }
    if n < 16 || &head != b"SQLite format 3\0" {
        return Err(StoreError::Corrupt {
            location: location.to_string(),
            reason: "the file does not start with the SQLite header".into(),
        });
    }
    Ok(())
}

fn classify_open_error(location: &str, e: sqlx::Error) -> StoreError {
    let text = e.to_string();
    if text.contains("file is not a database") || text.contains("database disk image is malformed")
    {
        StoreError::Corrupt {
            location: location.to_string(),
            reason: text,
        }
    } else if text.contains("database is locked") {
        StoreError::Locked {
            location: location.to_string(),
            waited_ms: BUSY_TIMEOUT_MS,
        }
    } else if matches!(
        e,
        sqlx::Error::Io(_) | sqlx::Error::Configuration(_) | sqlx::Error::PoolTimedOut
    ) {
        StoreError::Open {
            location: location.to_string(),
            reason: text,
        }
    } else {
        StoreError::Db(e)
    }
}

fn redact_url(url: &str) -> String {
    // postgres://user:secret@host/db → postgres://user:***@host/db
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        if let Some(at) = rest.find('@') {
            let creds = &rest[..at];
            if let Some(colon) = creds.find(':') {
                return format!(
                    "{}://{}:***{}",
                    &url[..scheme_end],
                    &creds[..colon],
                    &rest[at..]
                );
            }
        }
    }
    url.to_string()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted() {
        assert_eq!(redact_url("postgres://u:pw@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact_url("sqlite:///x.db"), "sqlite:///x.db");
    }

    #[tokio::test]
    async fn an_in_memory_database_outlives_a_closed_connection_and_is_its_stores_own() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        s.put_setting_for_test("k", "v").await;
        // A query cancelled mid-way closes its connection; the pool opens another.
        s.pool.acquire().await.unwrap().close().await.unwrap();
        assert_eq!(s.setting("k").await.unwrap().as_deref(), Some("v"));
        let other = Store::open("sqlite::memory:").await.unwrap();
        assert_eq!(
            other.setting("k").await.unwrap(),
            None,
            "each store its own"
        );
    }

    impl Store {
        async fn put_setting_for_test(&self, k: &str, v: &str) {
            self.setting_or_insert(k, v).await.unwrap();
        }
    }

    #[tokio::test]
    async fn unsupported_url_is_clear() {
        let e = Store::open("mysql://x").await.unwrap_err();
        assert!(e.to_string().contains("mysql://x"));
    }

    #[tokio::test]
    async fn corrupt_file_is_reported_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("toolshed.db");
        let garbage =
            b"this is definitely not a sqlite database file, just text padding it out...."
                .repeat(100);
        std::fs::write(&file, &garbage).unwrap();
        let e = Store::open_dir(dir.path()).await.unwrap_err();
        assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("toolshed.db"), "{e}");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            garbage,
            "the file is not modified"
        );
    }

    #[tokio::test]
    async fn creates_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open_dir(dir.path()).await.unwrap();
        assert_eq!(s.backend(), Backend::Sqlite);
        s.close().await;
        let s = Store::open_dir(dir.path()).await.unwrap();
        s.close().await;
        assert!(dir.path().join("toolshed.db").exists());
    }
}

#[cfg(test)]
mod lock_tests {
    use super::*;
    use sqlx::Connection;

    #[tokio::test]
    async fn a_database_locked_by_another_process_is_a_clear_error() {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("toolshed.db");
        let url = format!("sqlite://{}?mode=rwc", file.display());
        // Another holder takes an exclusive lock on the file and keeps it.
        let mut holder = sqlx::AnyConnection::connect(&url).await.unwrap();
        sqlx::query("PRAGMA locking_mode = EXCLUSIVE")
            .execute(&mut holder)
            .await
            .unwrap();
        sqlx::query("CREATE TABLE held (x INTEGER)")
            .execute(&mut holder)
            .await
            .unwrap();
        sqlx::query("BEGIN EXCLUSIVE")
            .execute(&mut holder)
            .await
            .unwrap();
        sqlx::query("INSERT INTO held VALUES (1)")
            .execute(&mut holder)
            .await
            .unwrap();
        let e = Store::open_dir(dir.path()).await.unwrap_err();
        assert!(matches!(e, StoreError::Locked { .. }), "{e}");
        assert!(e.to_string().contains("locked"), "{e}");
        sqlx::query("COMMIT").execute(&mut holder).await.unwrap();
        holder.close().await.unwrap();
        // Once released, the same file opens and the holder's data is intact.
        let s = Store::open_dir(dir.path()).await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM held")
            .fetch_one(s.pool())
            .await
            .unwrap();
        assert_eq!(n, 1);
    }
}
