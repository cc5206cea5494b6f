//! Token cost of `read_tool` text versus raw JSON Schemas (tiktoken o200k_base).
//!
//! `cargo bench -p toolshed-schema --bench tokens -- /work/shared [--dump N]`
//! reads `bench/retrieval/livemcpbench/tools.jsonl` and
//! `fixtures/openapi/github-rest-api.github.com.oas3.0.3.json` under the given
//! folder. GitHub tools come from the real importer (`toolshed_openapi::import`),
//! so the schemas are the ones agents see (with their bundled `$defs`).
//!
//! The schema ratio is Σ tokens(`render_schema(input)`) ÷ Σ tokens(minified
//! `input` JSON): input schemas only on both sides. The tool ratio is Σ
//! tokens(`render_tool(...)`, header + description + fields + example) ÷ Σ
//! tokens of the minified `{"name", "description", "inputSchema"}` JSON. For
//! GitHub tools that carry an output schema, a third line compares
//! `render_tool` with output against the JSON with `outputSchema` added.
//! `--dump N` prints the first N raw schemas and renderings of each corpus.
//! The size of real `search_tools` answers is measured by the `answer_tokens` bench of
//! `toolshed-mcp`, over every LiveMCPBench query.

use std::path::{Path, PathBuf};

use serde_json::json;
use tiktoken_rs::o200k_base;
use toolshed_schema::{render_schema, render_tool};

#[derive(Default)]
struct Tally {
    raw: usize,
    schema_text: usize,
    tool_raw: usize,
    tool_text: usize,
    n: usize,
}

impl Tally {
    fn add(&mut self, raw: usize, schema_text: usize, tool_raw: usize, tool_text: usize) {
        self.raw += raw;
        self.schema_text += schema_text;
        self.tool_raw += tool_raw;
        self.tool_text += tool_text;
        self.n += 1;
    }
}

fn report(label: &str, t: &Tally) {
    println!(
        "{label}: {} tools; input schema minified {} tokens → render_schema {} ({:.1}%); \
         tool JSON (name+description+schema) {} → render_tool {} ({:.1}%); render_tool vs schema alone {:.1}%",
        t.n,
        t.raw,
        t.schema_text,
        100.0 * t.schema_text as f64 / t.raw.max(1) as f64,
        t.tool_raw,
        t.tool_text,
        100.0 * t.tool_text as f64 / t.tool_raw.max(1) as f64,
        100.0 * t.tool_text as f64 / t.raw.max(1) as f64,
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let dump = args
        .iter()
        .position(|a| a == "--dump")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let Some(shared) = args.first().map(PathBuf::from) else {
        eprintln!("usage: cargo bench -p toolshed-schema --bench tokens -- <shared-dir>");
        eprintln!("no directory given: nothing measured");
        return;
    };
    let bpe = o200k_base().expect("o200k_base is embedded");
    let count = |s: &str| bpe.encode_ordinary(s).len();

    let live = shared.join("bench/retrieval/livemcpbench/tools.jsonl");
    if live.exists() {
        livemcp(&live, &count, dump);
    } else {
        eprintln!("{} is absent: LiveMCPBench part skipped", live.display());
    }
    let gh = shared.join("fixtures/openapi/github-rest-api.github.com.oas3.0.3.json");
    if gh.exists() {
        github(&gh, &count, dump);
    } else {
        eprintln!("{} is absent: GitHub part skipped", gh.display());
    }
}

fn livemcp(path: &Path, count: &dyn Fn(&str) -> usize, dump: usize) {
    let rows = toolshed_testing::retrieval_set::read_tools(path).unwrap_or_else(|e| panic!("{e}"));
    let mut t = Tally::default();
    for row in &rows {
        let schema = row
            .schema
            .clone()
            .unwrap_or_else(|| json!({"type": "object"}));
        let (id, name, description) =
            (row.id.as_str(), row.name.as_str(), row.description.as_str());
        let path = slug_path(id);
        let text = render_schema(&schema);
        if t.n < dump {
            println!("--- {path}\n{schema}\n{text}");
        }
        t.add(
            count(&schema.to_string()),
            count(&text),
            count(
                &json!({"name": name, "description": description, "inputSchema": schema})
                    .to_string(),
            ),
            count(&render_tool(&path, name, description, &schema, None, false)),
        );
    }
    report("LiveMCPBench", &t);
}

/// `Server Name::tool-name` → `server_name.tool_name`, as a gateway would mount it.
fn slug_path(id: &str) -> String {
    let slug = |s: &str| {
        let mut out = String::new();
        for c in s.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
            } else if !out.ends_with('_') {
                out.push('_');
            }
        }
        out.trim_matches('_').to_string()
    };
    match id.split_once("::") {
        Some((server, tool)) => format!("{}.{}", slug(server), slug(tool)),
        None => slug(id),
    }
}

fn github(path: &Path, count: &dyn Fn(&str) -> usize, dump: usize) {
    let text = std::fs::read_to_string(path).expect("readable spec");
    let doc = toolshed_openapi::parse_document(&text).expect("valid OpenAPI document");
    let imported = toolshed_openapi::import(
        &doc,
        &toolshed_openapi::ImportOptions {
            namespace: "github".into(),
            ..Default::default()
        },
    )
    .expect("the GitHub description imports");
    let mut t = Tally::default();
    let mut with_output = Tally::default();
    for tool in &imported.tools {
        let d = &tool.def;
        let path = d.path.to_string();
        let schema = &d.input_schema;
        let text = render_schema(schema);
        if t.n < dump {
            println!("--- {path}\n{schema}\n{text}");
        }
        t.add(
            count(&schema.to_string()),
            count(&text),
            count(
                &json!({"name": path, "description": d.description, "inputSchema": schema})
                    .to_string(),
            ),
            count(&render_tool(
                &path,
                &d.name,
                &d.description,
                schema,
                None,
                d.annotations.destructive,
            )),
        );
        if let Some(output) = &d.output_schema {
            with_output.add(
                count(&schema.to_string()) + count(&output.to_string()),
                count(&render_tool(&path, &d.name, &d.description, schema, Some(output), d.annotations.destructive)),
                count(&json!({"name": path, "description": d.description, "inputSchema": schema, "outputSchema": output}).to_string()),
                count(&render_tool(&path, &d.name, &d.description, schema, Some(output), d.annotations.destructive)),
            );
        }
    }
    report("GitHub REST (toolshed-openapi import)", &t);
    println!(
        "GitHub REST with output schemas: {} tools; minified input+output schemas {} tokens; \
         tool JSON (name+description+input+output) {} → render_tool with output {} ({:.1}%)",
        with_output.n,
        with_output.raw,
        with_output.tool_raw,
        with_output.tool_text,
        100.0 * with_output.tool_text as f64 / with_output.tool_raw.max(1) as f64,
    );
}
