//! Calling one of the plugin's tools, and serving a router on a loopback address.

use axum::Router;
use serde_json::Value;
use toolshed_core::{Plugin, ToolContext, ToolError, ToolPath};

/// Calls one tool's handler.
pub async fn call(p: &Plugin, path: &str, args: Value) -> Result<Value, ToolError> {
    let tool = p
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == path)
        .unwrap_or_else(|| panic!("no tool {path}"));
    let ctx = ToolContext::new("tester".into(), ToolPath::parse(path).unwrap());
    tool.handler.call(ctx, args).await
}

/// Serves `app` on `ip` (any loopback address, e.g. 127.0.0.2) and returns `http://ip:port`.
pub async fn serve_on(ip: &str, app: Router) -> String {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}
