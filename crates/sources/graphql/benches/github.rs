//! Times importing the GitHub schema from SDL and from introspection JSON.
//!
//! `cargo bench -p toolshed-graphql --bench github -- [SDL_PATH] [INTROSPECTION_PATH]`; the
//! paths default to the shared fixtures. Reading and JSON-decoding the files is not timed;
//! each import is run a few times and the best and median times are printed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use toolshed_graphql::{import_schema, GraphqlOptions, SchemaInput};

const DEFAULT_DIR: &str = "/work/shared/fixtures/graphql";
const RUNS: usize = 5;
const TARGET: Duration = Duration::from_secs(1);

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let sdl_path = args
        .first()
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(DEFAULT_DIR).join("github.schema.graphql"));
    let json_path = args
        .get(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(DEFAULT_DIR).join("github.introspection.json"));
    let opts = GraphqlOptions::new("github", "https://api.github.com/graphql");

    match std::fs::read_to_string(&sdl_path) {
        Ok(sdl) => {
            let input = SchemaInput::Sdl(sdl);
            run("GitHub SDL", &sdl_path, || {
                import_schema(&input, &opts).expect("import SDL")
            });
        }
        Err(e) => println!("skipping SDL: cannot read {}: {e}", sdl_path.display()),
    }
    match std::fs::read_to_string(&json_path) {
        Ok(text) => {
            let start = Instant::now();
            let json: serde_json::Value = serde_json::from_str(&text).expect("introspection JSON");
            println!(
                "decoding {} bytes of introspection JSON (not timed below): {:.1} ms",
                text.len(),
                start.elapsed().as_secs_f64() * 1e3
            );
            let input = SchemaInput::IntrospectionJson(json);
            run("GitHub introspection JSON", &json_path, || {
                import_schema(&input, &opts).expect("import introspection")
            });
        }
        Err(e) => println!(
            "skipping introspection: cannot read {}: {e}",
            json_path.display()
        ),
    }
}

fn run(label: &str, path: &Path, f: impl Fn() -> toolshed_graphql::Imported) {
    let mut times = Vec::with_capacity(RUNS);
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        let imported = f();
        times.push(start.elapsed());
        last = Some(imported);
    }
    times.sort();
    let imported = last.expect("at least one run");
    let queries = imported
        .tools
        .iter()
        .filter(|t| t.def.annotations.read_only)
        .count();
    let mutations = imported.tools.len() - queries;
    let best = times[0];
    let median = times[RUNS / 2];
    println!(
        "{label} ({}): {} tools ({queries} query, {mutations} mutation), {} warning(s); best {:.1} ms, median {:.1} ms over {RUNS} runs; target <= {} ms: {}",
        path.display(),
        imported.tools.len(),
        imported.warnings.len(),
        best.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3,
        TARGET.as_millis(),
        if median <= TARGET { "met" } else { "MISSED" }
    );
}
