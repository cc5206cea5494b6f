//! Published schemas nobody on the project wrote. The Shopify Storefront introspection (790 KB)
//! is copied into `tests/fixtures` and always checked; the GitHub SDL (1.2 MB) and
//! introspection (5 MB) are read from `../shared/fixtures/graphql` beside the workspace, and
//! those tests print a note and return when it is absent.

use std::path::Path;

use serde_json::Value;
use toolshed_core::CompiledSchema;
use toolshed_graphql::{import_schema, GraphqlOptions, Imported, SchemaInput};

fn read(name: &str) -> Option<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../../shared/fixtures/graphql")
        .join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(_) => {
            println!("note: {} is absent; skipping", path.display());
            None
        }
    }
}

fn repo_copy(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is part of the repository: {e}", path.display()))
}

fn counts(imported: &Imported) -> (usize, usize) {
    let queries = imported
        .tools
        .iter()
        .filter(|t| t.def.path.as_str().split('.').nth(1) == Some("query"))
        .count();
    (queries, imported.tools.len() - queries)
}

fn check_tools(imported: &Imported) {
    let mut seen = std::collections::HashSet::new();
    for tool in &imported.tools {
        assert!(
            seen.insert(tool.def.path.clone()),
            "duplicate {}",
            tool.def.path
        );
        CompiledSchema::compile(&tool.def.input_schema)
            .unwrap_or_else(|e| panic!("{}: {e}", tool.def.path));
        let read_only = tool.def.path.as_str().split('.').nth(1) == Some("query");
        assert_eq!(
            tool.def.annotations.read_only, read_only,
            "{}",
            tool.def.path
        );
        assert_eq!(
            tool.def.annotations.destructive, !read_only,
            "{}",
            tool.def.path
        );
    }
}

#[test]
fn github_sdl_with_its_duplicate_field() {
    let Some(sdl) = read("github.schema.graphql") else {
        return;
    };
    let opts = GraphqlOptions::new("github", "https://api.github.com/graphql");
    let imported = import_schema(&SchemaInput::Sdl(sdl), &opts).unwrap();
    assert_eq!(counts(&imported), (31, 247));
    assert!(
        imported
            .warnings
            .iter()
            .any(|w| w.contains("duplicate") && w.contains("EnterpriseOwnerInfo")),
        "{:?}",
        imported.warnings
    );
    check_tools(&imported);
    let create = imported
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == "github.mutation.create_issue")
        .unwrap();
    assert_eq!(create.def.input_schema["required"][0], "input");
    assert!(create.def.input_schema["$defs"]["CreateIssueInput"].is_object());
}

#[test]
fn github_introspection_json() {
    let Some(text) = read("github.introspection.json") else {
        return;
    };
    let json: Value = serde_json::from_str(&text).unwrap();
    let opts = GraphqlOptions::new("github", "https://api.github.com/graphql");
    let imported = import_schema(&SchemaInput::IntrospectionJson(json), &opts).unwrap();
    assert_eq!(counts(&imported), (30, 242));
    check_tools(&imported);
}

#[test]
fn shopify_storefront_introspection_json() {
    let text = repo_copy("shopify-storefront.introspection.json");
    let json: Value = serde_json::from_str(&text).unwrap();
    let opts = GraphqlOptions::new("shopify", "https://shop.example.com/api/graphql");
    let imported = import_schema(&SchemaInput::IntrospectionJson(json), &opts).unwrap();
    let (queries, mutations) = counts(&imported);
    println!(
        "shopify: {queries} query tools, {mutations} mutation tools, warnings {:?}",
        imported.warnings
    );
    assert!(imported
        .tools
        .iter()
        .any(|t| t.def.path.as_str() == "shopify.query.products"));
    check_tools(&imported);
    assert_eq!((queries, mutations), (SHOPIFY_QUERIES, SHOPIFY_MUTATIONS));
    let find = |path: &str| {
        imported
            .tools
            .iter()
            .find(|t| t.def.path.as_str() == path)
            .unwrap_or_else(|| panic!("no tool {path}"))
    };
    let products = find("shopify.query.products");
    assert!(products.def.annotations.read_only && !products.def.annotations.destructive);
    let props = &products.def.input_schema["properties"];
    assert_eq!(props["first"]["type"], "integer");
    assert_eq!(props["after"]["type"], "string");
    assert!(props["query"]["description"]
        .as_str()
        .unwrap()
        .contains("available_for_sale"));
    let cart = find("shopify.mutation.cart_create");
    assert!(cart.def.annotations.destructive && !cart.def.annotations.read_only);
    let schema = &cart.def.input_schema;
    assert_eq!(schema["properties"]["input"]["$ref"], "#/$defs/CartInput");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(
        schema["$defs"]["AttributeInput"]["required"],
        serde_json::json!(["key", "value"])
    );
}

/// Root field counts of the stored Storefront introspection (`QueryRoot`, `Mutation`).
const SHOPIFY_QUERIES: usize = 34;
const SHOPIFY_MUTATIONS: usize = 41;
