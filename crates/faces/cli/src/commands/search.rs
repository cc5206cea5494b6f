//! `toolshed search QUERY`: ranked search in the caller's view, through the engine's
//! `search_tools` operation (limits clamped where every face clamps them).

use std::process::ExitCode;

use serde_json::json;
use toolshed_engine::{Caller, DecisionChannel, Face, Op, OpAnswer};

use super::report::report_error;
use crate::app::App;

pub async fn run(
    app: &App,
    caller: &Caller,
    query: String,
    limit: usize,
    namespace: Option<String>,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    if app.config.search.model.is_some() {
        // One-shot: rank with embeddings too (stored vectors make later runs quick).
        let engine = app.engine.clone();
        let waited = tokio::task::spawn_blocking(move || {
            engine.wait_semantic_search(std::time::Duration::from_secs(600))
        })
        .await?;
        if let Err(e) = waited {
            eprintln!("semantic search unavailable ({e}): ranking by words only");
        }
    }
    let args = json!({"query": query, "limit": limit, "namespace": namespace});
    let human = DecisionChannel::Human(Face::Cli);
    let answer = match app
        .engine
        .dispatch(caller, Op::SearchTools, args, human)
        .await
    {
        Ok(OpAnswer::Search(a)) => a,
        Ok(_) => unreachable!("search_tools answers a search"),
        Err(e) => return Ok(report_error(&e, json_out)),
    };
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&answer)?);
    } else {
        outln!("{} matching tools", answer.total);
        for h in answer.hits {
            let flag = if h.destructive { " [destructive]" } else { "" };
            outln!("  {}{flag}\n      {} — {}", h.path, h.name, h.summary);
        }
    }
    Ok(ExitCode::SUCCESS)
}
