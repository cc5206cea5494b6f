//! Tests on PostgreSQL, when one is reachable (`TOOLSHED_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`): each runs in a fresh schema dropped afterwards,
//! and prints a skip line where no server runs.

use std::future::Future;

use sqlx::Connection;

use crate::Store;

/// Runs `body` on a store in a fresh PostgreSQL schema; `false` (with a printed skip line)
/// when no PostgreSQL server can be reached.
pub(crate) async fn with_postgres<F, Fut>(what: &str, body: F) -> bool
where
    F: FnOnce(Store) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    sqlx::any::install_default_drivers();
    let base = std::env::var("TOOLSHED_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let connect = sqlx::AnyConnection::connect(&base);
    let mut admin = match tokio::time::timeout(std::time::Duration::from_secs(5), connect).await {
        Ok(Ok(c)) => c,
        other => {
            println!("skip: {what}: no PostgreSQL at {base}: {:?}", other.err());
            return false;
        }
    };
    let schema = format!("store_test_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    let outcome = tokio::spawn(async move {
        let store = Store::open(&url).await.unwrap();
        body(store).await;
    })
    .await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&mut admin)
        .await
        .unwrap();
    outcome.unwrap();
    true
}

mod tests {
    use super::with_postgres;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replicas_renew_an_upstream_token_one_at_a_time_on_postgres() {
        with_postgres("the upstream token lock", |store| async move {
            let source = format!("lock-{}", uuid::Uuid::new_v4().simple());
            store.put_upstream_token(&source, "sealed").await.unwrap();
            let held = store.lock_upstream_token(&source).await.unwrap();
            assert!(held.is_some(), "PostgreSQL locks");
            // Another replica (another connection) waits for it ...
            let other = store.clone();
            let name = source.clone();
            let waiting = tokio::spawn(async move { other.lock_upstream_token(&name).await });
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            assert!(!waiting.is_finished(), "the lock is held");
            // ... and gets it once it is released; another source was never held up.
            let elsewhere = store.lock_upstream_token("another-source").await.unwrap();
            assert!(elsewhere.is_some());
            drop(held);
            let got = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
                .await
                .expect("the lock is released")
                .unwrap()
                .unwrap();
            assert!(got.is_some());
            assert_eq!(
                store.upstream_token(&source).await.unwrap().as_deref(),
                Some("sealed")
            );
        })
        .await;
    }
    use crate::background::BackgroundTask;
    use crate::models::StoredModel;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn models_servers_and_background_tasks_on_postgres() {
        with_postgres("models, servers and background tasks", |store| async move {
            let m = StoredModel {
                id: "rt".into(),
                kind: "openai".into(),
                base_url: None,
                sealed: "s1".into(),
                timeout_ms: 1_000,
                allow_private: true,
                updated_at: 0,
            };
            store.put_model(&m).await.unwrap();
            let first = store.get_model("rt").await.unwrap().unwrap();
            store.put_model(&m).await.unwrap();
            let again = store.get_model("rt").await.unwrap().unwrap();
            assert!(again.allow_private && again.updated_at > first.updated_at);
            assert!(store.delete_model("rt").await.unwrap());

            store.put_server("a", r#"{"name":"a"}"#).await.unwrap();
            store
                .put_server("a", r#"{"name":"a","tools":["x.*"]}"#)
                .await
                .unwrap();
            assert!(store.list_servers().await.unwrap()[0]
                .definition
                .contains("x.*"));
            assert!(store.delete_server("a").await.unwrap());

            let task = |id: &str, deps: &[&str]| BackgroundTask {
                run_id: "ex_1".into(),
                task_id: id.into(),
                title: id.into(),
                principal: "alice".into(),
                spec: "{}".into(),
                deps: deps.iter().map(|d| d.to_string()).collect(),
                status: "pending".into(),
                execution_id: None,
                result: None,
                corrections: vec![],
            };
            store
                .add_background_tasks(&[task("a", &[]), task("b", &["a"])])
                .await
                .unwrap();
            store.add_background_tasks(&[task("a", &[])]).await.unwrap();
            let moved = |from: &'static [&'static str], to: &'static str| {
                let store = store.clone();
                async move {
                    store
                        .move_background_task("ex_1", "a", from, to, Some("ex_a"), None)
                        .await
                        .unwrap()
                }
            };
            assert!(moved(&["pending"], "running").await);
            assert!(!moved(&["pending"], "running").await);
            assert!(store.queue_correction("ex_1", "a", "fix").await.unwrap());
            assert!(moved(&["pending", "running"], "cancelled").await);
            let all = store.background_tasks("ex_1").await.unwrap();
            assert_eq!(all.len(), 2);
            assert_eq!(
                (all[0].status.as_str(), all[0].corrections.len()),
                ("cancelled", 1)
            );
        })
        .await;
    }
}
