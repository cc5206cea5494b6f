//! Real descriptions nobody on the project wrote. Vercel (OpenAPI 3.1, 475 KB) and Adyen
//! Management (3.1, 662 KB) are copied into `tests/fixtures` and always checked: tool counts,
//! a few input schemas, read-only and destructive flags. The large ones (GitHub REST 13 MB,
//! Stripe 2.5 MB, Kubernetes 1.13 Swagger 2.0 4.2 MB) are read from `../shared/fixtures/openapi`
//! beside the workspace and skipped with a printed note when it is absent.

use std::path::{Path, PathBuf};

use toolshed_core::{CompiledSchema, Tool};
use toolshed_openapi::{import, parse_document, ImportOptions, Imported};

/// `../shared/fixtures/openapi` from the workspace root.
fn shared_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../shared/fixtures/openapi")
}

fn import_text(file: &str, text: &str, ns: &str) -> Imported {
    let doc = parse_document(text).unwrap();
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
    for t in &imp.tools {
        CompiledSchema::compile(&t.def.input_schema)
            .unwrap_or_else(|e| panic!("{file} {}: {e}", t.def.path));
        assert!(t.def.path.as_str().starts_with(&format!("{ns}.")));
    }
    imp
}

/// A fixture copied into the repository.
fn repo_copy(file: &str, ns: &str) -> Imported {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is part of the repository: {e}", path.display()));
    import_text(file, &text, ns)
}

/// A large fixture from ../shared, or `None` (with a printed note) when it is absent.
fn shared(file: &str, ns: &str) -> Option<Imported> {
    let path = shared_dir().join(file);
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!("note: {} is absent; skipping", path.display());
        return None;
    };
    Some(import_text(file, &text, ns))
}

fn tool<'a>(imp: &'a Imported, path: &str) -> &'a Tool {
    imp.tools
        .iter()
        .find(|t| t.def.path.as_str() == path)
        .unwrap_or_else(|| panic!("no tool {path}"))
}

/// (read-only, destructive) counts.
fn flags(imp: &Imported) -> (usize, usize) {
    (
        imp.tools
            .iter()
            .filter(|t| t.def.annotations.read_only)
            .count(),
        imp.tools
            .iter()
            .filter(|t| t.def.annotations.destructive)
            .count(),
    )
}

#[test]
fn vercel_31() {
    let imp = repo_copy("vercel.oas3.1.json", "vercel");
    assert_eq!(imp.tools.len(), 113, "skipped {:?}", imp.skipped);
    assert!(imp.skipped.is_empty(), "{:?}", imp.skipped);
    assert_eq!(flags(&imp), (53, 60));
    // Body properties that collide with path parameters are renamed, with a warning each.
    assert_eq!(imp.warnings.len(), 3, "{:?}", imp.warnings);
    assert!(imp
        .warnings
        .iter()
        .any(|w| w.contains("POST /v2/secrets/{name}") && w.contains("body_name")));

    let list = tool(&imp, "vercel.deployments.get_deployments");
    assert_eq!(list.def.name, "List Deployments");
    assert!(list.def.annotations.read_only && !list.def.annotations.destructive);
    let props = &list.def.input_schema["properties"];
    assert_eq!(
        props["target"]["enum"],
        serde_json::json!(["production", "preview"])
    );
    assert_eq!(props["limit"]["type"], "number");
    assert!(list.def.input_schema.get("required").is_none());

    let get = tool(&imp, "vercel.projects.get_project");
    assert!(get.def.annotations.read_only);
    assert_eq!(
        get.def.input_schema["required"],
        serde_json::json!(["idOrName"])
    );

    let delete = tool(&imp, "vercel.projects.delete_project");
    assert!(delete.def.annotations.destructive && delete.def.annotations.idempotent);
    assert!(!delete.def.annotations.read_only);

    let create = tool(&imp, "vercel.projects.create_project");
    assert!(create.def.annotations.destructive && !create.def.annotations.idempotent);
    let props = &create.def.input_schema["properties"];
    assert_eq!(props["buildCommand"]["maxLength"], 256);
    assert_eq!(
        props["buildCommand"]["type"],
        serde_json::json!(["string", "null"])
    );
    assert_eq!(
        props["environmentVariables"]["items"]["properties"]["key"]["type"],
        "string"
    );
}

#[test]
fn adyen_31() {
    let imp = repo_copy("adyen-management-v3.oas3.1.json", "adyen");
    assert_eq!(imp.tools.len(), 132, "skipped {:?}", imp.skipped);
    assert!(
        imp.skipped.is_empty() && imp.warnings.is_empty(),
        "{:?}",
        imp.warnings
    );
    assert_eq!(flags(&imp), (63, 69));

    let list = tool(
        &imp,
        "adyen.api_credentials_company_level.get_companies_company_id_api_credentials",
    );
    assert_eq!(list.def.name, "Get A List Of Api Credentials");
    assert!(list.def.annotations.read_only);
    assert_eq!(
        list.def.input_schema["required"],
        serde_json::json!(["companyId"])
    );
    assert_eq!(
        list.def.input_schema["properties"]["pageSize"]["type"],
        "integer"
    );

    let hook = tool(
        &imp,
        "adyen.webhooks_company_level.post_companies_company_id_webhooks",
    );
    assert_eq!(hook.def.name, "Set Up A Webhook");
    assert!(hook.def.annotations.destructive);
    let props = &hook.def.input_schema["properties"];
    assert_eq!(
        props["communicationFormat"]["enum"],
        serde_json::json!(["http", "json", "soap"])
    );
    assert_eq!(props["active"]["type"], "boolean");
    // Component schemas travel along as $defs.
    assert_eq!(
        props["additionalSettings"]["$ref"],
        "#/$defs/AdditionalSettings"
    );
    assert!(hook.def.input_schema["$defs"]["AdditionalSettings"].is_object());

    let remove = tool(
        &imp,
        "adyen.webhooks_company_level.delete_companies_company_id_webhooks_webhook_id",
    );
    assert!(remove.def.annotations.destructive && remove.def.annotations.idempotent);
    assert_eq!(
        remove.def.input_schema["required"],
        serde_json::json!(["companyId", "webhookId"])
    );
}

#[test]
fn github_rest() {
    if let Some(imp) = shared("github-rest-api.github.com.oas3.0.3.json", "github") {
        assert_eq!(imp.tools.len(), 1223, "skipped {:?}", imp.skipped);
    }
}

#[test]
fn stripe() {
    if let Some(imp) = shared("stripe-2025-10.apisguru-bundled.oas3.0.json", "stripe") {
        assert_eq!(imp.tools.len(), 452, "skipped {:?}", imp.skipped);
    }
}

#[test]
fn kubernetes_swagger2() {
    if let Some(imp) = shared("kubernetes-v1.13.4.swagger2.0.json", "k8s") {
        assert_eq!(imp.tools.len(), 1014, "skipped {:?}", imp.skipped);
    }
}
