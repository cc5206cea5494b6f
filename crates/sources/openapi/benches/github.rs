//! Times parsing and importing the GitHub REST description.
//!
//! `cargo bench -p toolshed-openapi --bench github [-- PATH]`; the default path is the shared
//! fixture. Target: parse + import within 1 s.

use std::time::Instant;

use toolshed_core::CompiledSchema;
use toolshed_openapi::{import, parse_document, ImportOptions};

const DEFAULT: &str = "/work/shared/fixtures/openapi/github-rest-api.github.com.oas3.0.3.json";

fn main() {
    let path = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| DEFAULT.to_string());
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            println!("skipping: cannot read {path}: {e}");
            return;
        }
    };
    let t0 = Instant::now();
    let doc = parse_document(&text).expect("parse");
    let parse = t0.elapsed();
    let t1 = Instant::now();
    let imported = import(
        &doc,
        &ImportOptions {
            namespace: "github".into(),
            ..Default::default()
        },
    )
    .expect("import");
    let imp = t1.elapsed();
    let total = t0.elapsed();
    let t2 = Instant::now();
    let mut bad = 0;
    for t in &imported.tools {
        if CompiledSchema::compile(&t.def.input_schema).is_err() {
            bad += 1;
        }
    }
    let compile = t2.elapsed();
    let schema_bytes: usize = imported
        .tools
        .iter()
        .map(|t| t.def.input_schema.to_string().len())
        .sum();
    println!("file: {path} ({} bytes)", text.len());
    println!("parse: {:.1} ms", parse.as_secs_f64() * 1e3);
    println!("import: {:.1} ms", imp.as_secs_f64() * 1e3);
    println!(
        "parse+import: {:.1} ms (target <= 1000 ms) {}",
        total.as_secs_f64() * 1e3,
        if total.as_secs_f64() <= 1.0 {
            "OK"
        } else {
            "OVER"
        }
    );
    println!(
        "tools: {}, skipped: {}, warnings: {}",
        imported.tools.len(),
        imported.skipped.len(),
        imported.warnings.len()
    );
    println!(
        "input schemas: {} failed to compile, {:.1} MB total JSON, compile time {:.1} ms",
        bad,
        schema_bytes as f64 / 1e6,
        compile.as_secs_f64() * 1e3
    );
    for (w, why) in imported.skipped.iter().take(10) {
        println!("  skipped {w}: {why}");
    }
}
