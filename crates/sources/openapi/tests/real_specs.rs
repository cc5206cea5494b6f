//! Large real descriptions from the shared fixtures folder; skipped with a note when absent.

use std::path::Path;

use toolshed_core::CompiledSchema;
use toolshed_openapi::{import, parse_document, ImportOptions};

const DIR: &str = "/work/shared/fixtures/openapi";

fn check(file: &str, ns: &str, expect_tools: Option<usize>) {
    let path = Path::new(DIR).join(file);
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!("note: {} is absent; skipping", path.display());
        return;
    };
    let doc = parse_document(&text).unwrap();
    let imp = import(
        &doc,
        &ImportOptions {
            namespace: ns.into(),
            ..Default::default()
        },
    )
    .unwrap();
    println!(
        "{file}: {} tools, {} skipped, {} warnings",
        imp.tools.len(),
        imp.skipped.len(),
        imp.warnings.len()
    );
    assert!(!imp.tools.is_empty());
    if let Some(n) = expect_tools {
        assert_eq!(imp.tools.len(), n, "{file}: skipped {:?}", imp.skipped);
    }
    for t in &imp.tools {
        CompiledSchema::compile(&t.def.input_schema)
            .unwrap_or_else(|e| panic!("{file} {}: {e}", t.def.path));
        assert!(t.def.path.as_str().starts_with(&format!("{ns}.")));
    }
}

#[test]
fn github_rest() {
    check(
        "github-rest-api.github.com.oas3.0.3.json",
        "github",
        Some(1223),
    );
}

#[test]
fn stripe() {
    check(
        "stripe-2025-10.apisguru-bundled.oas3.0.json",
        "stripe",
        None,
    );
}

#[test]
fn kubernetes_swagger2() {
    check("kubernetes-v1.13.4.swagger2.0.json", "k8s", None);
}

#[test]
fn vercel_31() {
    check("vercel.oas3.1.json", "vercel", None);
}

#[test]
fn adyen_31() {
    check("adyen-management-v3.oas3.1.json", "adyen", None);
}
