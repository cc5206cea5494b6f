//! Resources and prompts of a real upstream (the reference `server-everything`, installed by
//! `scripts/peers.sh`) through Toolshed: listed, read and fetched through a virtual server
//! exactly as the upstream answers them, hidden by policy like tools, found by search with
//! `kind`, and read from scripts with `tools.resources.read` / `tools.prompts.get`.

use std::path::{Path, PathBuf};

use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::support::{cli, Client, Server};

fn everything() -> Option<PathBuf> {
    let root = std::env::var_os("MCP_TOOLS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/mcp-tools"));
    let bin = root.join("node_modules/.bin/mcp-server-everything");
    bin.exists().then_some(bin)
}

fn config(dir: &Path, bin: &Path) -> PathBuf {
    let f = dir.join("toolshed.toml");
    std::fs::write(
        &f,
        format!(
            r#"
principal = "admin"

[[sources]]
kind = "mcp"
name = "everything"
command = "{}"
args = ["stdio"]

# The reader sees two documents, the text template and two prompts; not startup.md.
[[roles]]
id = "reader"
patterns = ["everything.architecture_md", "everything.features_md", "everything.dynamic_text_resource", "everything.simple_prompt", "everything.args_prompt", "resources.read", "prompts.get"]
[[roles]]
id = "admin"
patterns = ["*"]
[[principals]]
id = "reader"
roles = ["reader"]
api_keys = ["k-reader"]
[[principals]]
id = "admin"
roles = ["admin"]
api_keys = ["k-admin"]

[[servers]]
name = "everything"
names = "original"
tools = ["everything.**"]
resources = ["everything.**"]
prompts = ["everything.**"]
"#,
            bin.display()
        ),
    )
    .unwrap();
    f
}

async fn connect(server: &Server, key: &str) -> Client {
    let config =
        StreamableHttpClientTransportConfig::with_uri(server.url("/mcp/servers/everything"))
            .auth_header(key.to_string());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize the virtual server")
}

fn sorted(items: Vec<Value>, key: &str) -> Vec<Value> {
    let mut items = items;
    items.sort_by(|a, b| a[key].as_str().cmp(&b[key].as_str()));
    items
}

fn values<T: serde::Serialize>(items: Vec<T>) -> Vec<Value> {
    items
        .iter()
        .map(|i| serde_json::to_value(i).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_prompts_of_a_real_upstream_pass_through_under_policy() {
    let Some(bin) = everything() else {
        println!("skip: mcp-server-everything is not installed (bash scripts/peers.sh)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &bin);
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let mut child = tokio::process::Command::new(&bin);
    child.arg("stdio").stderr(std::process::Stdio::null());
    let direct = ().serve(TokioChildProcess::new(child).unwrap()).await.unwrap();

    // Everything visible: the lists are the upstream's own.
    let admin = connect(&server, "k-admin").await;
    let caps = admin.peer_info().unwrap().capabilities.clone();
    assert!(caps.resources.is_some() && caps.prompts.is_some());
    assert_eq!(
        sorted(values(admin.list_all_resources().await.unwrap()), "uri"),
        sorted(values(direct.list_all_resources().await.unwrap()), "uri")
    );
    assert_eq!(
        sorted(
            values(admin.list_all_resource_templates().await.unwrap()),
            "uriTemplate"
        ),
        sorted(
            values(direct.list_all_resource_templates().await.unwrap()),
            "uriTemplate"
        )
    );
    assert_eq!(
        sorted(values(admin.list_all_prompts().await.unwrap()), "name"),
        sorted(values(direct.list_all_prompts().await.unwrap()), "name")
    );

    // Reads and prompts answer as the upstream does.
    for uri in [
        "demo://resource/static/document/architecture.md",
        "demo://resource/dynamic/text/3",
    ] {
        let through = admin
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .unwrap();
        let own = direct
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .unwrap();
        // The dynamic resource names the time it was made, to the second: two reads may
        // straddle a second.
        let clock = |v: serde_json::Value| {
            let text = v.to_string();
            match text.find(" created at ") {
                Some(at) => {
                    let end = text[at..].find('"').map_or(text.len(), |e| at + e);
                    format!("{}{}", &text[..at], &text[end..])
                }
                None => text,
            }
        };
        assert_eq!(
            clock(serde_json::to_value(&through).unwrap()),
            clock(serde_json::to_value(&own).unwrap()),
            "{uri}"
        );
    }
    let args = json!({"city": "Paris"}).as_object().cloned().unwrap();
    let mut ask = GetPromptRequestParams::new("args-prompt");
    ask.arguments = Some(args);
    let through = admin.get_prompt(ask.clone()).await.unwrap();
    let own = direct.get_prompt(ask).await.unwrap();
    assert_eq!(
        serde_json::to_value(&through).unwrap(),
        serde_json::to_value(&own).unwrap()
    );
    let missing = admin
        .read_resource(ReadResourceRequestParams::new("demo://nowhere/at/all"))
        .await
        .unwrap_err()
        .to_string();
    assert!(missing.contains("resource not found"), "{missing}");

    // The reader's role hides startup.md from the list and from reads.
    let reader = connect(&server, "k-reader").await;
    let uris: Vec<String> = reader
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .collect();
    assert_eq!(uris.len(), 2, "{uris:?}");
    assert!(!uris.iter().any(|u| u.ends_with("startup.md")), "{uris:?}");
    let hidden = reader
        .read_resource(ReadResourceRequestParams::new(
            "demo://resource/static/document/startup.md",
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(hidden.contains("resource not found"), "{hidden}");
    let prompts: Vec<String> = reader
        .list_all_prompts()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    let _ = reader.cancel().await;
    let _ = admin.cancel().await;
    let _ = direct.cancel().await;
    drop(server);

    // Scripts read entries through the engine; search finds them by kind.
    let script = dir.path().join("read.js");
    std::fs::write(
        &script,
        r#"
const doc = await tools.resources.read({path: "everything.architecture_md"});
const dynamic = await tools.resources.read({path: "everything.dynamic_text_resource", uri: "demo://resource/dynamic/text/7"});
const prompt = await tools.prompts.get({path: "everything.args_prompt", args: {city: "Oslo"}});
const found = await tools.search({query: "architecture document", kind: "resource"});
const tools_only = await tools.search({query: "architecture document"});
let refused = null;
try { await tools.resources.read({path: "everything.echo"}); } catch (e) { refused = String(e.message || e); }
return {
  doc: doc.contents[0].uri,
  dynamic: dynamic.contents[0].uri,
  prompt: JSON.stringify(prompt.messages),
  hit: found.hits[0],
  toolHits: tools_only.hits.map(h => h.kind || "tool"),
  refused,
};
"#,
    )
    .unwrap();
    let (code, v) = cli(dir.path(), Some(&cfg), &["run", script.to_str().unwrap()]);
    assert_eq!(code, 0, "{v}");
    let r = &v["result"];
    assert_eq!(
        r["doc"], "demo://resource/static/document/architecture.md",
        "{v}"
    );
    assert_eq!(r["dynamic"], "demo://resource/dynamic/text/7", "{v}");
    assert!(r["prompt"].as_str().unwrap().contains("Oslo"), "{v}");
    assert_eq!(r["hit"]["path"], "everything.architecture_md", "{v}");
    assert_eq!(r["hit"]["kind"], "resource", "{v}");
    assert!(
        r["toolHits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k == "tool"),
        "{v}"
    );
    assert!(
        r["refused"]
            .as_str()
            .is_some_and(|e| e.contains("no resource at 'everything.echo'")),
        "{v}"
    );

    // The reads were audited under the entries' own paths.
    let (_, audit) = cli(dir.path(), Some(&cfg), &["audit", "--limit", "50"]);
    let text = audit.to_string();
    assert!(text.contains("everything.architecture_md"), "{text}");
    assert!(text.contains("everything.args_prompt"), "{text}");
}
