//! `n8n.nodes.suggested`: curated starting points by use case: which node types a workflow of
//! that kind usually starts from and is made of, with a line on each. A static table (the same
//! on every instance); `n8n.nodes.search` and `n8n.nodes.get_type` go from there.

use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolError};

use super::{def, object, opt_str};

/// One use case: an id, what it covers, words that find it, and its node types.
struct UseCase {
    id: &'static str,
    title: &'static str,
    words: &'static [&'static str],
    nodes: &'static [(&'static str, &'static str)],
}

const USE_CASES: &[UseCase] = &[
    UseCase {
        id: "webhook_api",
        title: "An HTTP endpoint that receives data and answers",
        words: &["webhook", "api", "endpoint", "http", "receive", "callback"],
        nodes: &[
            (
                "n8n-nodes-base.webhook",
                "the trigger: a URL that starts the workflow (responseMode decides who answers)",
            ),
            (
                "n8n-nodes-base.respondToWebhook",
                "answers the caller with chosen data, status and headers",
            ),
            ("n8n-nodes-base.set", "shapes the fields to keep or answer"),
            (
                "n8n-nodes-base.if",
                "rejects or routes requests by a condition",
            ),
        ],
    },
    UseCase {
        id: "scheduled_job",
        title: "A job that runs on a schedule",
        words: &[
            "schedule", "cron", "every", "daily", "hourly", "periodic", "timer", "nightly",
        ],
        nodes: &[
            (
                "n8n-nodes-base.scheduleTrigger",
                "the trigger: intervals or a cron expression",
            ),
            ("n8n-nodes-base.httpRequest", "fetches the data to process"),
            ("n8n-nodes-base.filter", "keeps only the items that matter"),
            (
                "n8n-nodes-base.removeDuplicates",
                "skips items already handled in earlier runs",
            ),
        ],
    },
    UseCase {
        id: "ai_agent",
        title: "An AI agent or chatbot that uses tools",
        words: &[
            "ai",
            "agent",
            "chat",
            "chatbot",
            "llm",
            "gpt",
            "openai",
            "assistant",
            "rag",
        ],
        nodes: &[
            (
                "@n8n/n8n-nodes-langchain.chatTrigger",
                "the trigger: a chat window or chat API",
            ),
            (
                "@n8n/n8n-nodes-langchain.agent",
                "the agent: connect a chat model, memory and tools to it",
            ),
            (
                "@n8n/n8n-nodes-langchain.lmChatOpenAi",
                "a chat model (connection type ai_languageModel)",
            ),
            (
                "@n8n/n8n-nodes-langchain.memoryBufferWindow",
                "conversation memory (ai_memory)",
            ),
            (
                "@n8n/n8n-nodes-langchain.toolHttpRequest",
                "a tool the agent can call (ai_tool)",
            ),
        ],
    },
    UseCase {
        id: "form",
        title: "A form people fill in",
        words: &["form", "survey", "submission", "signup", "intake"],
        nodes: &[
            (
                "n8n-nodes-base.formTrigger",
                "the trigger: a hosted form with the fields you define",
            ),
            (
                "n8n-nodes-base.form",
                "further form pages or a completion page",
            ),
            (
                "n8n-nodes-base.googleSheets",
                "stores the submissions in a sheet",
            ),
        ],
    },
    UseCase {
        id: "spreadsheet_sync",
        title: "Read, append or update rows of a spreadsheet or table",
        words: &[
            "sheet",
            "sheets",
            "spreadsheet",
            "excel",
            "rows",
            "table",
            "airtable",
            "sync",
            "data table",
        ],
        nodes: &[
            (
                "n8n-nodes-base.googleSheets",
                "reads, appends and updates rows (needs a Google credential)",
            ),
            ("n8n-nodes-base.airtable", "the same for Airtable bases"),
            (
                "n8n-nodes-base.dataTable",
                "n8n's own data tables, no credential needed",
            ),
            (
                "n8n-nodes-base.compareDatasets",
                "finds what changed between two lists",
            ),
        ],
    },
    UseCase {
        id: "notifications",
        title: "Send messages or emails",
        words: &[
            "notify",
            "notification",
            "message",
            "slack",
            "email",
            "mail",
            "alert",
            "telegram",
            "teams",
            "send",
        ],
        nodes: &[
            ("n8n-nodes-base.slack", "posts to a channel or user"),
            ("n8n-nodes-base.gmail", "sends or reads Gmail"),
            ("n8n-nodes-base.emailSend", "sends email over SMTP"),
            ("n8n-nodes-base.telegram", "sends Telegram messages"),
        ],
    },
    UseCase {
        id: "transform",
        title: "Transform, filter, merge and aggregate data",
        words: &[
            "transform",
            "map",
            "filter",
            "merge",
            "join",
            "aggregate",
            "split",
            "sort",
            "rename",
            "fields",
            "data",
        ],
        nodes: &[
            (
                "n8n-nodes-base.set",
                "sets, renames and drops fields (Edit Fields)",
            ),
            (
                "n8n-nodes-base.code",
                "JavaScript or Python when no node fits",
            ),
            ("n8n-nodes-base.filter", "keeps items that meet conditions"),
            (
                "n8n-nodes-base.merge",
                "combines two streams (append, by key, by position)",
            ),
            ("n8n-nodes-base.aggregate", "many items into one"),
            ("n8n-nodes-base.splitOut", "one item's list into many items"),
        ],
    },
    UseCase {
        id: "branching",
        title: "Route items by conditions",
        words: &[
            "if",
            "branch",
            "route",
            "condition",
            "switch",
            "decide",
            "when",
        ],
        nodes: &[
            ("n8n-nodes-base.if", "two outputs: true and false"),
            ("n8n-nodes-base.switch", "one output per rule or value"),
        ],
    },
    UseCase {
        id: "loops",
        title: "Process items in batches or one by one",
        words: &[
            "loop",
            "batch",
            "batches",
            "each",
            "paginate",
            "pagination",
            "rate",
            "limit",
        ],
        nodes: &[
            (
                "n8n-nodes-base.splitInBatches",
                "Loop Over Items: output 1 each batch, output 0 when done",
            ),
            (
                "n8n-nodes-base.wait",
                "pauses between batches (rate limits)",
            ),
            (
                "n8n-nodes-base.httpRequest",
                "has built-in pagination options",
            ),
        ],
    },
    UseCase {
        id: "error_handling",
        title: "Handle and report errors",
        words: &[
            "error", "errors", "fail", "failure", "retry", "alert", "monitor",
        ],
        nodes: &[
            (
                "n8n-nodes-base.errorTrigger",
                "starts an error workflow when another workflow fails",
            ),
            (
                "n8n-nodes-base.stopAndError",
                "fails the execution on purpose with a message",
            ),
            ("n8n-nodes-base.noOp", "a placeholder end for a branch"),
        ],
    },
    UseCase {
        id: "http_integration",
        title: "Call any REST API",
        words: &[
            "rest",
            "http",
            "request",
            "api",
            "integration",
            "fetch",
            "call",
            "graphql",
        ],
        nodes: &[
            (
                "n8n-nodes-base.httpRequest",
                "any method, auth from a credential, pagination, binary files",
            ),
            ("n8n-nodes-base.graphql", "GraphQL queries"),
        ],
    },
    UseCase {
        id: "database",
        title: "Read and write a database",
        words: &[
            "database", "sql", "postgres", "mysql", "mongodb", "query", "db", "redis",
        ],
        nodes: &[
            (
                "n8n-nodes-base.postgres",
                "PostgreSQL queries, inserts, upserts",
            ),
            ("n8n-nodes-base.mySql", "MySQL"),
            ("n8n-nodes-base.mongoDb", "MongoDB"),
            ("n8n-nodes-base.redis", "Redis"),
        ],
    },
    UseCase {
        id: "sub_workflows",
        title: "Split a workflow into reusable parts",
        words: &[
            "sub",
            "subworkflow",
            "reuse",
            "call",
            "module",
            "execute",
            "workflow",
        ],
        nodes: &[
            (
                "n8n-nodes-base.executeWorkflowTrigger",
                "the trigger of a workflow called by others, with declared inputs",
            ),
            (
                "n8n-nodes-base.executeWorkflow",
                "calls another workflow and gets its output",
            ),
        ],
    },
    UseCase {
        id: "human_in_the_loop",
        title: "Wait for a person's approval or input",
        words: &[
            "approval", "approve", "human", "wait", "review", "confirm", "manual",
        ],
        nodes: &[
            (
                "n8n-nodes-base.wait",
                "resumes on a webhook call, a form submission or after a time",
            ),
            (
                "n8n-nodes-base.slack",
                "sendAndWait: a message with approve / decline buttons",
            ),
            ("n8n-nodes-base.gmail", "sendAndWait by email"),
        ],
    },
];

/// The tool.
pub(crate) fn tools() -> Vec<Tool> {
    vec![Tool::from_fn(
        def(
            "nodes.suggested",
            "Suggested Nodes",
            "Curated starting points for building a workflow: for a use case (e.g. 'webhook api', 'schedule', 'ai agent', 'form', 'sheets sync', 'notify slack', 'loop', 'error handling') the node types such workflows start from and are made of. Without a use case, lists the use cases.",
            object(
                json!({"useCase": {"type": "string", "maxLength": 200, "description": "What the workflow should do, or a use-case id."}}),
                &[],
            ),
            Annotations::READ_ONLY,
        ),
        |_ctx, args| async move { suggested(&args) },
    )]
}

fn suggested(args: &Value) -> Result<Value, ToolError> {
    let Some(query) = opt_str(args, "useCase").map(|q| q.to_lowercase()) else {
        let cases: Vec<Value> = USE_CASES
            .iter()
            .map(|u| json!({"useCase": u.id, "title": u.title}))
            .collect();
        return Ok(json!({"useCases": cases}));
    };
    let words: Vec<&str> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut ranked: Vec<(usize, &UseCase)> = USE_CASES
        .iter()
        .map(|u| {
            let exact = usize::from(u.id == query.replace(' ', "_")) * 10;
            let hits = words.iter().filter(|w| u.words.contains(w)).count();
            (exact + hits, u)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    ranked.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
    let cases: Vec<Value> = ranked
        .iter()
        .take(3)
        .map(|(_, u)| {
            let nodes: Vec<Value> = u
                .nodes
                .iter()
                .map(|(ty, why)| json!({"type": ty, "use": why}))
                .collect();
            json!({"useCase": u.id, "title": u.title, "nodes": nodes})
        })
        .collect();
    if cases.is_empty() {
        let ids: Vec<&str> = USE_CASES.iter().map(|u| u.id).collect();
        return Ok(json!({
            "useCases": [],
            "note": format!("no curated use case matches; the use cases are {}; or search node types with n8n.nodes.search", ids.join(", "))
        }));
    }
    Ok(
        json!({"useCases": cases, "next": "n8n.nodes.get_type {nodeType} gives a type's parameters"}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_use_case_is_found_by_its_words_and_lists_its_nodes() {
        let r = suggested(&json!({"useCase": "send a slack alert when an order fails"})).unwrap();
        let ids: Vec<&str> = r["useCases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["useCase"].as_str().unwrap())
            .collect();
        assert_eq!(ids[0], "notifications", "{r}");
        assert!(ids.contains(&"error_handling"), "{r}");
        assert_eq!(r["useCases"][0]["nodes"][0]["type"], "n8n-nodes-base.slack");
        let all = suggested(&json!({})).unwrap();
        assert_eq!(all["useCases"].as_array().unwrap().len(), USE_CASES.len());
        assert!(all["useCases"][0].get("nodes").is_none());
        let none = suggested(&json!({"useCase": "quantum teleportation"})).unwrap();
        assert!(
            none["note"].as_str().unwrap().contains("webhook_api"),
            "{none}"
        );
        let exact = suggested(&json!({"useCase": "human_in_the_loop"})).unwrap();
        assert_eq!(exact["useCases"][0]["useCase"], "human_in_the_loop");
    }

    #[test]
    fn every_suggested_type_is_a_full_type_name() {
        for u in USE_CASES {
            for (ty, _) in u.nodes {
                assert!(
                    ty.starts_with("n8n-nodes-base.")
                        || ty.starts_with("@n8n/n8n-nodes-langchain."),
                    "{ty}"
                );
            }
        }
    }
}
