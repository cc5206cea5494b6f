//! Prints the prerequisites the search index finds in a catalog: for each tool whose
//! parameters say their values come from other tools, those tools (see
//! `toolshed_search::prerequisites`), and how long reading the catalog took.
//!
//! `cargo run --release -p toolshed-search --example prerequisites -- TOOLS.jsonl`, TOOLS.jsonl
//! in the retrieval benchmark's layout (`{"id", "name", "description", "input_schema"}`; an id
//! `server::tool` is read as the path `server.tool`, as the benchmark reads it).

use toolshed_search::{param_docs_from_schema, Prerequisites, SearchDoc};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: prerequisites TOOLS.jsonl");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1);
    });
    let mut ids = Vec::new();
    let mut docs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| {
            eprintln!("{path}:{}: {e}", n + 1);
            std::process::exit(1);
        });
        let field = |key: &str| row[key].as_str().unwrap_or_default().to_string();
        let id = field("id");
        docs.push(SearchDoc {
            path: id.replace("::", "."),
            name: field("name"),
            description: field("description"),
            params: row
                .get("input_schema")
                .map(param_docs_from_schema)
                .unwrap_or_default(),
        });
        ids.push(id);
    }
    let start = std::time::Instant::now();
    let prerequisites = Prerequisites::of(&docs);
    let took = start.elapsed();
    for (d, id) in ids.iter().enumerate() {
        let of: Vec<&str> = prerequisites.of_tool(d).map(|p| ids[p].as_str()).collect();
        if !of.is_empty() {
            println!("{id} <- {}", of.join(", "));
        }
    }
    eprintln!(
        "{} tools, {} prerequisites, read in {:.1} ms",
        docs.len(),
        prerequisites.len(),
        took.as_secs_f64() * 1e3
    );
}
