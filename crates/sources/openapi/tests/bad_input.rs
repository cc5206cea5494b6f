//! Malformed and unusual documents: clear errors, skipped operations, references and names.

use crate::common;

use serde_json::{json, Value};
use toolshed_core::CompiledSchema;
use toolshed_openapi::{import, parse_document, ImportOptions, Imported, OpenApiError};

fn opts(ns: &str) -> ImportOptions {
    ImportOptions {
        namespace: ns.into(),
        ..Default::default()
    }
}

fn run(doc: Value) -> Imported {
    import(&doc, &opts("t")).unwrap()
}

fn doc31(paths: Value, components: Value) -> Value {
    json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": paths, "components": components})
}

#[test]
fn invalid_json_and_yaml_name_the_line() {
    let e = parse_document("{\n \"openapi\": \"3.0.0\",\n \"paths\": {,}\n}").unwrap_err();
    assert!(matches!(e, OpenApiError::Json { line: 3, .. }), "{e:?}");
    assert!(e.to_string().contains("line 3"));
    let e = parse_document("openapi: 3.0.0\ninfo:\n  title: [unclosed\npaths: {}\n").unwrap_err();
    assert!(matches!(e, OpenApiError::Yaml { .. }), "{e:?}");
    assert!(e.to_string().contains("line "), "{e}");
}

#[test]
fn unknown_versions_are_named() {
    for (doc, needle) in [
        (json!({"openapi": "4.0.0", "paths": {}}), "4.0.0"),
        (json!({"swagger": "1.2", "paths": {}}), "1.2"),
        (json!({"info": {}}), "neither"),
    ] {
        let e = import(&doc, &opts("t")).unwrap_err();
        assert!(matches!(e, OpenApiError::UnsupportedVersion(_)), "{e:?}");
        assert!(e.to_string().contains(needle), "{e}");
    }
}

#[test]
fn no_paths_is_an_error() {
    for doc in [
        json!({"openapi": "3.0.3", "info": {}}),
        json!({"openapi": "3.0.3", "paths": {}}),
    ] {
        assert!(matches!(
            import(&doc, &opts("t")).unwrap_err(),
            OpenApiError::NoPaths
        ));
    }
    let e = import(
        &json!({"openapi": "3.0.3", "paths": {"/a": {}}}),
        &opts("Bad NS"),
    )
    .unwrap_err();
    assert!(matches!(e, OpenApiError::Namespace(_)));
}

#[test]
fn unresolvable_refs_skip_the_operation_and_name_the_ref() {
    let imp = run(doc31(
        json!({
            "/a": {"get": {"operationId": "a", "parameters": [{"name": "x", "in": "query", "schema": {"$ref": "#/components/schemas/Missing"}}], "responses": {}}},
            "/b": {"get": {"operationId": "b", "responses": {}}}
        }),
        json!({}),
    ));
    assert_eq!(imp.tools.len(), 1);
    assert_eq!(imp.skipped.len(), 1);
    let (op, why) = &imp.skipped[0];
    assert_eq!(op, "GET /a");
    assert!(why.contains("#/components/schemas/Missing"), "{why}");
}

#[test]
fn remote_refs_are_refused_clearly() {
    let imp = run(doc31(
        json!({"/a": {"get": {"parameters": [{"name": "x", "in": "query", "schema": {"$ref": "https://example.com/s.json#/X"}}], "responses": {}}}}),
        json!({}),
    ));
    assert!(imp.skipped[0].1.contains("remote"), "{:?}", imp.skipped);
}

#[test]
fn relative_file_refs_resolve_against_base_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("schemas")).unwrap();
    std::fs::write(
        dir.path().join("schemas/pet.yaml"),
        "Pet:\n  type: object\n  required: [name]\n  properties:\n    name: {type: string}\n    owner:\n      $ref: 'person.json#/Person'\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("schemas/person.json"),
        r#"{"Person": {"type": "object", "properties": {"email": {"type": "string"}}}}"#,
    )
    .unwrap();
    let doc = doc31(
        json!({"/pets": {"post": {"operationId": "addPet", "requestBody": {"content": {"application/json": {"schema": {"$ref": "schemas/pet.yaml#/Pet"}}}}, "responses": {}}}}),
        json!({}),
    );
    let imp = import(
        &doc,
        &ImportOptions {
            namespace: "t".into(),
            base_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(imp.skipped.is_empty(), "{:?}", imp.skipped);
    let s = &imp.tools[0].def.input_schema;
    assert_eq!(s["properties"]["name"]["type"], "string");
    assert_eq!(s["properties"]["owner"]["$ref"], "#/$defs/Person");
    assert_eq!(
        s["$defs"]["Person"]["properties"]["email"]["type"],
        "string"
    );
    CompiledSchema::compile(s).unwrap();

    // Without base_dir the operation is skipped with a clear reason.
    let imp = run(doc);
    assert!(imp.skipped[0].1.contains("base_dir"), "{:?}", imp.skipped);
}

#[test]
fn circular_schemas_compile_and_validate() {
    let imp = run(doc31(
        json!({"/nodes": {"post": {"operationId": "createNode", "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}, "responses": {"201": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}}}}}),
        json!({"schemas": {"Node": {"type": "object", "required": ["label"], "properties": {
            "label": {"type": "string"},
            "parent": {"oneOf": [{"$ref": "#/components/schemas/Node"}, {"type": "null"}]},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}),
    ));
    let t = &imp.tools[0];
    let v = CompiledSchema::compile(&t.def.input_schema).unwrap();
    assert!(v.is_valid(&json!({"label": "a", "children": [{"label": "b", "parent": null}]})));
    assert!(!v.is_valid(&json!({"label": "a", "children": [{"parent": null}]})));
    let out = t.def.output_schema.as_ref().unwrap();
    assert_eq!(out["$ref"], "#/$defs/Node");
    CompiledSchema::compile(out).unwrap();
}

#[test]
fn a_huge_definition_closure_is_cut_to_the_byte_budget_and_said_so() {
    // A chain of 40 definitions of some 4 KB each, as the entity types of a large API are: the
    // request body needs all 160 KB, more than a tool's schema may carry.
    let mut schemas = serde_json::Map::new();
    for i in 0..40 {
        let mut props = serde_json::Map::new();
        for p in 0..60 {
            props.insert(
                format!("property_{p}"),
                json!({"type": "string", "description": "a field of this entity"}),
            );
        }
        if i < 39 {
            props.insert(
                "next".into(),
                json!({"$ref": format!("#/components/schemas/E{}", i + 1)}),
            );
        }
        schemas.insert(
            format!("E{i}"),
            json!({"type": "object", "properties": props}),
        );
    }
    let body = json!({"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/E0"}}}});
    let ok = json!({"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/E0"}}}});
    let imp = run(doc31(
        json!({"/entities": {"post": {"operationId": "createEntity", "requestBody": body, "responses": {"200": ok}}}}),
        json!({"schemas": Value::Object(schemas)}),
    ));
    let t = &imp.tools[0];
    let input = &t.def.input_schema;
    let size = serde_json::to_string(input).unwrap().len();
    assert!(size <= 70 * 1024, "input schema of {size} bytes");
    // The nearest definitions are kept (the body inlines E0), the rest left open with a note;
    // the schema compiles and still checks what it kept.
    let defs = input["$defs"].as_object().unwrap();
    assert!(
        defs.contains_key("E1") && defs.contains_key("E2"),
        "{:?}",
        defs.keys()
    );
    assert!(defs.len() < 39, "{} definitions", defs.len());
    let cut = (1..40)
        .find(|i| !defs.contains_key(&format!("E{i}")))
        .unwrap();
    let last = &defs[&format!("E{}", cut - 1)]["properties"]["next"];
    assert!(last.get("$ref").is_none(), "{last}");
    assert!(
        last["description"].as_str().unwrap().contains("too large"),
        "{last}"
    );
    let v = CompiledSchema::compile(input).unwrap();
    // (An object body's properties are the tool's own.)
    assert!(v.is_valid(&json!({"property_0": "a", "next": {"property_1": "b"}})));
    assert!(!v.is_valid(&json!({"property_0": 7})));
    assert!(!v.is_valid(&json!({"next": {"property_1": 7}})));
    // An output schema that would need all of them is left out; both are reported.
    assert!(t.def.output_schema.is_none());
    let said = imp.warnings.join("\n");
    assert!(said.contains("1 input schemas shortened"), "{said}");
    assert!(said.contains("1 output schemas left out"), "{said}");
}

#[test]
fn composition_and_null_types_are_kept() {
    let imp = run(
        json!({"openapi": "3.0.3", "paths": {"/x": {"post": {"operationId": "make",
        "parameters": [{"name": "mode", "in": "query", "schema": {"type": "string", "nullable": true, "enum": ["a", "b"]}}],
        "requestBody": {"content": {"application/json": {"schema": {"oneOf": [{"$ref": "#/components/schemas/Cat"}, {"$ref": "#/components/schemas/Dog"}], "discriminator": {"propertyName": "kind"}}}}},
        "responses": {}}}},
        "components": {"schemas": {"Cat": {"type": "object", "properties": {"kind": {"type": "string"}}}, "Dog": {"allOf": [{"$ref": "#/components/schemas/Cat"}, {"type": "object", "properties": {"bark": {"type": "boolean"}}}]}}}}),
    );
    let s = &imp.tools[0].def.input_schema;
    assert_eq!(s["properties"]["mode"]["type"], json!(["string", "null"]));
    assert_eq!(s["properties"]["mode"]["enum"], json!(["a", "b", null]));
    // A oneOf body is not flattened.
    assert_eq!(s["properties"]["body"]["oneOf"][1]["$ref"], "#/$defs/Dog");
    assert_eq!(
        s["properties"]["body"]["discriminator"]["propertyName"],
        "kind"
    );
    assert!(s["$defs"]["Dog"]["allOf"].is_array());
    CompiledSchema::compile(s).unwrap();

    let imp = run(doc31(
        json!({"/y": {"get": {"parameters": [{"name": "n", "in": "query", "schema": {"type": ["integer", "null"]}}], "responses": {}}}}),
        json!({}),
    ));
    assert_eq!(
        imp.tools[0].def.input_schema["properties"]["n"]["type"],
        json!(["integer", "null"])
    );
}

#[test]
fn collisions_and_duplicate_ids_are_renamed_with_warnings() {
    let imp = run(doc31(
        json!({
            "/items/{name}": {"put": {"operationId": "saveItem", "tags": ["items"],
                "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                               {"name": "name", "in": "header", "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/json": {"schema": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "size": {"type": "integer"}}}}}},
                "responses": {}}},
            "/items": {"post": {"operationId": "saveItem", "tags": ["items"], "responses": {}}}
        }),
        json!({}),
    ));
    let paths: Vec<&str> = imp.tools.iter().map(|t| t.def.path.as_str()).collect();
    assert_eq!(paths, vec!["t.items.save_item", "t.items.save_item_2"]);
    let props = &imp.tools[0].def.input_schema["properties"];
    assert!(
        props["name"].is_object()
            && props["header_name"].is_object()
            && props["body_name"].is_object()
            && props["size"].is_object(),
        "{props}"
    );
    assert_eq!(imp.tools[0].def.input_schema["required"], json!(["name"]));
    assert!(imp.warnings.iter().any(|w| w.contains("header_name")));
    assert!(imp.warnings.iter().any(|w| w.contains("body_name")));
    assert!(imp.warnings.iter().any(|w| w.contains("save_item_2")));
}

#[test]
fn missing_operation_ids_and_deprecation() {
    let imp = run(doc31(
        json!({"/users/{userId}/repos": {"get": {"deprecated": true, "summary": "List repos", "description": "  All of them.  ", "parameters": [{"name": "userId", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {}}}}),
        json!({}),
    ));
    let t = &imp.tools[0];
    assert_eq!(t.def.path.as_str(), "t.users.get_users_user_id_repos");
    assert_eq!(t.def.name, "List Repos");
    assert!(t
        .def
        .description
        .starts_with("[deprecated] List repos\n\nAll of them."));
    assert!(t.def.description.contains("deprecated"));
}

#[test]
fn swagger_form_and_file_parameters() {
    let imp = common::import_fixture("petstore.swagger2.0.json", "p");
    let up = common::tool(&imp, "p.pet.upload_file");
    let props = &up.def.input_schema["properties"];
    assert_eq!(props["file"]["type"], "string");
    assert_eq!(props["file"]["format"], "binary");
    assert_eq!(props["additionalMetadata"]["type"], "string");
}
