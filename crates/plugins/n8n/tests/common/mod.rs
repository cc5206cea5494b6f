//! Fixture loading shared by the integration tests: real replies of n8n 2.41.1.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolshed_core::{Plugin, ToolContext, ToolError, ToolPath};
use toolshed_n8n::{N8nConfig, N8nLogin};

/// The execution fixtures with full data, by file name.
pub const EXECUTIONS: &[&str] = &[
    "execution-success-id1.includeData.raw.json",
    "execution-error-id2.includeData.raw.json",
    "execution-error-id2.includeData.redactExecutionData-true.raw.json",
    "execution-loop-success-id3.includeData.raw.json",
    "execution-nodeapierror-id4.includeData.raw.json",
    "execution-erroroutput-nodeoperationerror-id5.includeData.raw.json",
    "execution-big-id6.includeData.raw.json.gz",
    "execution-big-id6.includeData.dataTooLargeToDisplay.raw.json",
    "execution-error-id2.metadata-only.json",
    "execution-success-id1.metadata-only.json",
    "execution-error-id2.with-sticky-note.raw.json",
    "execution-error-id2.input-override.raw.json",
];

/// A fixture as text; `.gz` files are gunzipped.
pub fn fixture_text(name: &str) -> String {
    toolshed_testing::fixture_text!(name)
}

/// A fixture as JSON.
pub fn fixture(name: &str) -> Value {
    toolshed_testing::fixture!(name)
}

/// o200k token count of a value serialized as compact JSON.
pub fn o200k(v: &Value) -> usize {
    let bpe = tiktoken_rs::o200k_base_singleton();
    bpe.encode_with_special_tokens(&serde_json::to_string(v).unwrap())
        .len()
}

/// Strings that must never reach an agent.
pub const FORBIDDEN: &[&str] = &[
    "resumeToken",
    "contextData",
    "\"stack\"",
    "    at ",
    "rejectUnauthorized",
    "fdda05e890d77f68df2b5bd8bc889bbceb93cdc35d5d95ad835622b32df2d912",
];

pub fn assert_clean(v: &Value, what: &str) {
    let s = v.to_string();
    for bad in FORBIDDEN {
        assert!(!s.contains(bad), "{what}: found {bad:?}");
    }
}

/// Calls one of the plugin's tools as the engine would (principal `tester`, 120 s), inside the
/// execution `execution` when given.
pub async fn call_in(
    p: &Plugin,
    path: &str,
    args: Value,
    execution: Option<&str>,
) -> Result<Value, ToolError> {
    let tool = p
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == path)
        .unwrap_or_else(|| panic!("no tool {path}"));
    let ctx = ToolContext::new("tester".into(), ToolPath::parse(path).unwrap())
        .with_timeout(Duration::from_secs(120))
        .with_execution(execution.map(Arc::from));
    tool.handler.call(ctx, args).await
}

/// [`call_in`] outside any execution.
pub async fn call(p: &Plugin, path: &str, args: Value) -> Result<Value, ToolError> {
    call_in(p, path, args, None).await
}

/// The live n8n's configuration (with its login) from `N8N_URL`, `N8N_API_KEY`, `N8N_EMAIL`
/// and `N8N_PASSWORD`; without them a skip line naming `what`, and `None`.
pub fn live_config(what: &str) -> Option<N8nConfig> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (
        var("N8N_URL"),
        var("N8N_API_KEY"),
        var("N8N_EMAIL"),
        var("N8N_PASSWORD"),
    ) {
        (Some(url), Some(key), Some(email), Some(password)) => Some(N8nConfig {
            timeout: Duration::from_secs(60),
            allow_private: true,
            login: Some(N8nLogin { email, password }),
            ..N8nConfig::new(url, key)
        }),
        _ => {
            eprintln!(
                "skipping live n8n {what}: set N8N_URL, N8N_API_KEY, N8N_EMAIL and N8N_PASSWORD to run it"
            );
            None
        }
    }
}
