//! `toolshed serve`: MCP over stdio, or streamable HTTP with the HTTP API behind one listener
//! guard; background tasks (audit retention, stored sources, custom tools); graceful shutdown
//! on SIGTERM or Ctrl-C.

use anyhow::Context;

use crate::app::App;

/// Ctrl-C, or SIGTERM (what service managers and containers send) on Unix. The Unix listeners
/// are registered when this is called, not when the future is first polled: a signal that
/// arrives while the app is still being built (upstream children already running) ends `serve`
/// as soon as it starts, through the normal shutdown, instead of killing the process outright.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let listeners = {
        use tokio::signal::unix::{signal, SignalKind};
        signal(SignalKind::terminate())
            .ok()
            .zip(signal(SignalKind::interrupt()).ok())
    };
    async move {
        #[cfg(unix)]
        if let Some((mut term, mut int)) = listeners {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// How `toolshed serve` was asked to serve.
pub struct Mode {
    pub stdio: bool,
    /// The HTTP address (default: `[http] addr`).
    pub http: Option<String>,
    pub direct: bool,
    /// Over stdio, the virtual server to serve.
    pub server: Option<String>,
}

pub async fn serve(
    app: &App,
    mode: Mode,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let Mode {
        stdio,
        http,
        direct,
        server,
    } = mode;
    let servers = app.virtual_servers().await?;
    let server = match server {
        None => None,
        Some(name) => Some(
            servers
                .iter()
                .find(|s| s.name() == name)
                .cloned()
                .with_context(|| {
                    let known: Vec<&str> = servers.iter().map(|s| s.name()).collect();
                    format!("no virtual server '{name}' is configured ([[servers]] or servers.put: {known:?})")
                })?,
        ),
    };
    let options = toolshed_mcp::McpOptions {
        direct,
        resume_tool: app.config.mcp.resume_tool,
        server,
        notices: Some(app.registry.notices()),
    };
    app.engine.warm_search();
    let _warm = app.engine.spawn_search_warmer();
    let _purge = app.engine.spawn_retention();
    let _poll = app.watch_stored_sources();
    let _custom = app.watch_custom_tools();
    if stdio {
        // SIGTERM or Ctrl-C end the session like a closed stdin, so the caller's shutdown
        // (audit flush, upstream children killed) still runs.
        tokio::select! {
            r = toolshed_mcp::serve_stdio(app.engine.clone(), app.config.principal.clone(), options) => r?,
            _ = stop => tracing::info!("signal received; stopping"),
        }
        return Ok(());
    }
    let addr = http.unwrap_or_else(|| app.config.http.addr.clone());
    let auth = app
        .auth
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .clone();
    let http_config = &app.config.http;
    let server_set = toolshed_mcp::ServerSet::new(servers.clone());
    let _servers_poll = app.watch_virtual_servers(server_set.clone());
    let mcp = toolshed_mcp::http_router(
        app.engine.clone(),
        toolshed_mcp::Identity::Network(auth.clone()),
        options,
        toolshed_mcp::HttpOptions {
            allowed_hosts: http_config.allowed_hosts.clone(),
            sessions: toolshed_mcp::SessionTable::new(app.config.mcp.session_limits()),
            servers: server_set,
        },
    );
    // One guard in front of every route: Host, Origin and content type.
    let router = toolshed_http::guard(
        toolshed_http::router(app.engine.clone(), auth).merge(mcp),
        toolshed_http::GuardConfig {
            allowed_hosts: http_config.allowed_hosts.clone(),
            allowed_origins: http_config.allowed_origins.clone(),
        },
    );
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    tracing::info!(%local, "toolshed listening: MCP at /mcp, API at /v1");
    for s in &servers {
        tracing::info!(
            server = s.name(),
            "virtual server at /mcp/servers/{}",
            s.name()
        );
    }
    eprintln!("toolshed listening on http://{local} (MCP: /mcp, API: /v1)");
    // Small SSE frames (the end of a streamed MCP reply) must not wait for delayed ACKs, or
    // clients give up on the connection and reconnect for every call.
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(stop)
        .await?;
    Ok(())
}
