//! The web plugin through the binary: `[web]` configuration, `web.fetch` on the one call path
//! (audited), refusals under the default address rule, and configuration errors that name
//! the key.

use axum::routing::get;
use axum::Router;

use crate::support::cli;

async fn page_server() -> String {
    let app = Router::new().route(
        "/page",
        get(|| async {
            axum::response::Html(
                "<html><head><title>Local Page</title></head><body><p>Hello from <b>loopback</b>.</p></body></html>",
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/page")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_fetch_runs_through_the_engine_under_the_configured_address_rule() {
    let url = page_server().await;
    let dir = tempfile::tempdir().unwrap();
    let args = format!(r#"{{"url": "{url}"}}"#);
    // Default rule: loopback is refused, with the reason.
    let d = dir.path().to_path_buf();
    let a = args.clone();
    let (code, v) = tokio::task::spawn_blocking(move || cli(&d, None, &["call", "web.fetch", &a]))
        .await
        .unwrap();
    assert_ne!(code, 0, "{v}");
    assert!(v.to_string().contains("loopback"), "{v}");
    // allow_private = true: the page comes back as Markdown.
    let cfg = dir.path().join("web.toml");
    std::fs::write(&cfg, "[web]\nallow_private = true\n").unwrap();
    let d = dir.path().to_path_buf();
    let c = cfg.clone();
    let (code, v) =
        tokio::task::spawn_blocking(move || cli(&d, Some(&c), &["call", "web.fetch", &args]))
            .await
            .unwrap();
    assert_eq!(code, 0, "{v}");
    let text = v.to_string();
    assert!(text.contains("Hello from **loopback**"), "{text}");
    assert!(text.contains("Local Page"), "{text}");
    // The call is in the audit log like any other.
    let d = dir.path().to_path_buf();
    let (_, audit) = tokio::task::spawn_blocking(move || cli(&d, Some(&cfg), &["audit"]))
        .await
        .unwrap();
    assert!(audit.to_string().contains("web.fetch"), "{audit}");
}

#[test]
fn web_configuration_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, expected) in [
        (
            "[web]\nsearch_provider = \"bing\"\n",
            "search_provider 'bing' is not known",
        ),
        ("[web]\nsearch_provider = \"searxng\"\n", "needs search_url"),
        (
            "[web]\nsearch_provider = \"brave\"\n",
            "needs search_api_key",
        ),
        (
            "[web]\ndenied_networks = [\"10.0.0.0/40\"]\n",
            "prefix must be a number",
        ),
    ] {
        let cfg = dir.path().join("bad.toml");
        std::fs::write(&cfg, toml).unwrap();
        let (code, v) = cli(dir.path(), Some(&cfg), &["call", "tables.list", "{}"]);
        assert_ne!(code, 0, "{toml}: {v}");
        assert!(v.to_string().contains(expected), "{toml}: {v}");
    }
    // enabled = false: no web tools.
    let cfg = dir.path().join("off.toml");
    std::fs::write(&cfg, "[web]\nenabled = false\n").unwrap();
    let (code, v) = cli(
        dir.path(),
        Some(&cfg),
        &["call", "web.fetch", r#"{"url":"https://example.com"}"#],
    );
    assert_ne!(code, 0);
    assert!(
        v.to_string().contains("not_found") || v.to_string().contains("no tool"),
        "{v}"
    );
}
