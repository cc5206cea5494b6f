//! Prints the sentences a catalog's descriptions repeat so often that the texts its tools are
//! embedded from leave them out (see `toolshed_search::boilerplate`): each with the number of
//! tools that carry it, then how long finding them and building every embedded text took.
//!
//! `cargo run --release -p toolshed-search --example boilerplate -- TOOLS.jsonl`, TOOLS.jsonl
//! in the retrieval benchmark's layout (read by `toolshed_testing::retrieval_set`).

use std::time::Instant;

use toolshed_search::boilerplate::{sentences, Shared};
use toolshed_search::hybrid::EmbedTexts;
use toolshed_search::SearchDoc;
use toolshed_testing::retrieval_set;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: boilerplate TOOLS.jsonl");
        std::process::exit(2);
    };
    let tools = retrieval_set::read_tools(path.as_ref()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1);
    });
    let docs: Vec<SearchDoc> = tools
        .into_iter()
        .map(|t| SearchDoc {
            path: t.id.replace("::", "."),
            name: t.name,
            description: t.description,
            params: Vec::new(),
        })
        .collect();
    let start = Instant::now();
    let split: Vec<Vec<&str>> = docs.iter().map(|d| sentences(&d.description)).collect();
    let shared = Shared::of(&split);
    let found = start.elapsed();
    let start = Instant::now();
    let texts = EmbedTexts::of(&docs);
    let built = start.elapsed();
    let mut counts: Vec<(&str, usize)> = shared.counts().collect();
    counts.sort_by_key(|&(s, n)| (std::cmp::Reverse(n), s));
    for (s, n) in &counts {
        println!("{n:>7}  {s}");
    }
    eprintln!(
        "{} tools, {} shared sentences found in {:.1} ms; {} embedded texts built in {:.1} ms",
        docs.len(),
        shared.len(),
        found.as_secs_f64() * 1e3,
        texts.texts.len(),
        built.as_secs_f64() * 1e3
    );
}
