//! `toolshed-conformance-client`: Toolshed's upstream MCP client (`Upstream`) as the client under
//! test of the official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16,
//! `client` scenarios).
//!
//! ```text
//! MCP_CONFORMANCE_SCENARIO=<scenario> [MCP_CONFORMANCE_CONTEXT=<json>] toolshed-conformance-client <server-url>
//! node conformance/dist/index.js client --command toolshed-conformance-client --scenario <scenario>
//! ```
//!
//! Everything goes through the `Upstream` API, as the gateway uses it: `Upstream::connect` over
//! streamable HTTP, `tools()` to list, and the tools' handlers with a `ToolContext` to call.
//! Calls carry a `ClientChannel` that accepts every form elicitation with the defaults of its
//! schema. Per scenario:
//!
//! - `initialize`: connect and list the tools.
//! - `tools_call`: call `add_numbers` with `{a: 5, b: 3}`.
//! - `elicitation-sep1034-client-defaults`: call `test_client_elicitation_defaults` (the
//!   upstream's elicitation reaches the channel, which answers the schema's defaults).
//! - `sse-retry`: call `test_reconnection` (the server closes the call's SSE stream; rmcp
//!   resumes it with `Last-Event-ID` after the `retry` delay).
//! - `auth/*`: OAuth ([`toolshed_mcp_source::oauth`]): `client_credentials` with the context's
//!   client for `auth/client-credentials-*` (`private_key_jwt` for `-jwt`), the
//!   authorization-code flow with the context's pre-registered client for
//!   `auth/pre-registration`, and otherwise the authorization-code flow with a Client ID Metadata
//!   Document URL or dynamic registration; the suite's authorization servers approve at once,
//!   so the built-in `FollowRedirects` agent completes the redirect. Then list the tools and
//!   call `test-tool`.
//! - anything else: list the tools and call each one without arguments.
//!
//! Exits 0 when the scenario's steps succeeded, 1 otherwise (the suite reads its own checks).
//! Logs go to stderr (`RUST_LOG`, default `warn`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use toolshed_core::{ClientChannel, Tool, ToolContext, ToolError};
use toolshed_mcp_source::oauth::{FollowRedirects, OAuthConfig, OAuthGrant};
use toolshed_mcp_source::{Upstream, UpstreamConfig};
use toolshed_outbound::secret::Secret;

/// The Client ID Metadata Document URL the suite's `auth/basic-cimd` expects.
const CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Answers the upstream's requests during a call: form elicitations are accepted with the
/// defaults of the requested schema (SEP-1034); anything else is declined.
struct AcceptDefaults;

#[async_trait::async_trait]
impl ClientChannel for AcceptDefaults {
    fn client_id(&self) -> u64 {
        1
    }

    fn supports(&self, capability: &str) -> bool {
        capability == "elicitation"
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, ToolError> {
        match method {
            "elicitation/create" => Ok(json!({
                "action": "accept",
                "content": defaults(&params["requestedSchema"]),
            })),
            other => Err(ToolError::invalid(format!("{other} is not answered here"))),
        }
    }
}

/// The `default` of every property of an elicitation schema that has one.
fn defaults(schema: &Value) -> Value {
    let content: Map<String, Value> = schema["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .filter_map(|(k, p)| p.get("default").map(|d| (k.clone(), d.clone())))
                .collect()
        })
        .unwrap_or_default();
    Value::Object(content)
}

/// The scenario's context (`MCP_CONFORMANCE_CONTEXT`), or an empty object.
fn context() -> Value {
    std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_else(|| json!({}))
}

fn ctx_str(ctx: &Value, key: &str) -> Result<String, String> {
    ctx[key]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("MCP_CONFORMANCE_CONTEXT has no '{key}'"))
}

/// The OAuth settings for an `auth/*` scenario.
fn oauth_for(scenario: &str) -> Result<OAuthConfig, String> {
    let ctx = context();
    let headless = Arc::new(FollowRedirects::new(true));
    Ok(match scenario {
        "auth/client-credentials-basic" => OAuthConfig::client_credentials(
            ctx_str(&ctx, "client_id")?,
            Secret::new(ctx_str(&ctx, "client_secret")?),
        ),
        "auth/client-credentials-jwt" => OAuthConfig {
            private_key: Some(Secret::new(ctx_str(&ctx, "private_key_pem")?)),
            client_secret: None,
            signing_algorithm: Some(
                ctx["signing_algorithm"]
                    .as_str()
                    .unwrap_or("ES256")
                    .to_string(),
            ),
            ..OAuthConfig::authorization_code().with_client(ctx_str(&ctx, "client_id")?, None)
        }
        .with_grant(OAuthGrant::ClientCredentials),
        "auth/pre-registration" => OAuthConfig::authorization_code()
            .with_client(
                ctx_str(&ctx, "client_id")?,
                Some(Secret::new(ctx_str(&ctx, "client_secret")?)),
            )
            .with_agent(headless),
        _ => OAuthConfig {
            client_metadata_url: Some(CIMD_URL.into()),
            ..OAuthConfig::authorization_code()
        }
        .with_agent(headless),
    })
}

fn find<'a>(tools: &'a [Tool], name: &str) -> Result<&'a Tool, String> {
    tools
        .iter()
        .find(|t| t.def.native.as_ref().and_then(|n| n["name"].as_str()) == Some(name))
        .ok_or_else(|| {
            let names: Vec<&str> = tools
                .iter()
                .filter_map(|t| t.def.native.as_ref().and_then(|n| n["name"].as_str()))
                .collect();
            format!("the server has no tool '{name}' (it has {names:?})")
        })
}

/// Calls `tool` as the engine would, with the elicitation-answering channel.
async fn call(tool: &Tool, args: Value) -> Result<Value, String> {
    let ctx = ToolContext::new(Arc::from("conformance"), tool.def.path.clone())
        .with_timeout(Duration::from_secs(20))
        .with_client(Some(Arc::new(AcceptDefaults)));
    let out = tool
        .handler
        .call(ctx, args)
        .await
        .map_err(|e| format!("{} failed: {}", tool.def.path, e.message))?;
    eprintln!("{} answered {out}", tool.def.path);
    Ok(out)
}

async fn run(scenario: &str, url: &str) -> Result<(), String> {
    let mut cfg = UpstreamConfig::http("conformance", url)
        .with_allow_private(true)
        // The `sse-retry` scenario's server negotiates 2025-03-26.
        .with_accept_2025_03_26(true)
        .with_connect_timeout(Duration::from_secs(20))
        .with_call_timeout(Duration::from_secs(20));
    if scenario.starts_with("auth/") {
        cfg = cfg.with_oauth(oauth_for(scenario)?);
    }
    let upstream = Upstream::connect(cfg).await.map_err(|e| e.to_string())?;
    eprintln!(
        "connected: protocol {}",
        upstream.protocol_version().unwrap_or_default()
    );
    let outcome = steps(scenario, &upstream).await;
    upstream.shutdown().await;
    outcome
}

async fn steps(scenario: &str, upstream: &Upstream) -> Result<(), String> {
    let tools = upstream.tools().await.map_err(|e| e.to_string())?;
    eprintln!("{} tools", tools.len());
    match scenario {
        "initialize" => {}
        "tools_call" => {
            call(find(&tools, "add_numbers")?, json!({"a": 5, "b": 3})).await?;
        }
        "elicitation-sep1034-client-defaults" => {
            call(find(&tools, "test_client_elicitation_defaults")?, json!({})).await?;
        }
        "sse-retry" => {
            call(find(&tools, "test_reconnection")?, json!({})).await?;
        }
        s if s.starts_with("auth/") => {
            call(find(&tools, "test-tool")?, json!({})).await?;
        }
        _ => {
            for tool in &tools {
                call(tool, json!({})).await?;
            }
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let (Ok(scenario), Some(url)) = (
        std::env::var("MCP_CONFORMANCE_SCENARIO"),
        std::env::args().nth(1),
    ) else {
        eprintln!(
            "usage: MCP_CONFORMANCE_SCENARIO=<scenario> toolshed-conformance-client <server-url>"
        );
        return ExitCode::from(2);
    };
    match run(&scenario, &url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{scenario}: {e}");
            ExitCode::FAILURE
        }
    }
}
