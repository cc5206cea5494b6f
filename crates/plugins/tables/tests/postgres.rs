//! The main scenario against PostgreSQL, when one is reachable at
//! `postgres://postgres@127.0.0.1:5432/test` (or `TOOLSHED_TEST_POSTGRES_URL`). Each run works
//! in a fresh schema that is dropped afterwards; without a server the test prints a note and
//! passes.

use crate::common;

use common::Harness;
use sqlx::{AssertSqlSafe, Connection};
use toolshed_store::{Backend, Store};

fn base_url() -> String {
    std::env::var("TOOLSHED_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Connects for administration, or explains why not.
async fn admin() -> Option<sqlx::AnyConnection> {
    sqlx::any::install_default_drivers();
    let url = base_url();
    let connect = sqlx::AnyConnection::connect(&url);
    match tokio::time::timeout(std::time::Duration::from_secs(5), connect).await {
        Ok(Ok(c)) => Some(c),
        Ok(Err(e)) => {
            eprintln!("skipping the PostgreSQL test: cannot connect to {url}: {e}");
            None
        }
        Err(_) => {
            eprintln!("skipping the PostgreSQL test: connecting to {url} timed out");
            None
        }
    }
}

/// A store confined to a fresh schema; returns it with the schema name.
async fn isolated(admin: &mut sqlx::AnyConnection) -> (Store, String) {
    let schema = format!("tables_test_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut *admin)
        .await
        .unwrap();
    let sep = if base_url().contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}options=-c%20search_path%3D{schema}", base_url());
    let store = Store::open(&url).await.unwrap();
    assert_eq!(store.backend(), Backend::Postgres);
    (store, schema)
}

async fn drop_schema(admin: &mut sqlx::AnyConnection, schema: &str) {
    sqlx::query(AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&mut *admin)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn main_scenario_and_concurrency_on_postgres() {
    let Some(mut admin) = admin().await else {
        return;
    };
    let (store, schema) = isolated(&mut admin).await;
    // The store's tables live in the fresh schema, not in public.
    let found: (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'dt_rows'",
    )
    .bind(&schema)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(found.0, 1);

    // Drop the schema even when the scenario fails.
    let outcome = tokio::spawn(run_owned(store.clone())).await;
    store.close().await;
    drop_schema(&mut admin, &schema).await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn run_owned(store: Store) {
    let h = Harness::new(store);
    common::main_scenario(&h).await;
    common::concurrent_inserts(&h, 16).await;
}
