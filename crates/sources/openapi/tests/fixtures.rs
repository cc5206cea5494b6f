//! Imports of the small fixtures: counts, paths, schemas and annotations.

use crate::common;

use common::{import_fixture, tool};
use serde_json::json;
use toolshed_core::CompiledSchema;

const PETSTORES: [&str; 3] = [
    "petstore.swagger2.0.json",
    "petstore.oas3.0.json",
    "petstore.oas3.1.json",
];

#[test]
fn petstore_tool_counts_and_paths() {
    for f in PETSTORES {
        let imp = import_fixture(f, "petstore");
        assert_eq!(imp.tools.len(), 20, "{f}: {:?}", imp.skipped);
        assert!(imp.skipped.is_empty(), "{f}: {:?}", imp.skipped);
        for p in [
            "petstore.pet.add_pet",
            "petstore.pet.update_pet",
            "petstore.pet.find_pets_by_status",
            "petstore.pet.get_pet_by_id",
            "petstore.pet.delete_pet",
            "petstore.pet.upload_file",
            "petstore.store.get_inventory",
            "petstore.store.place_order",
            "petstore.user.login_user",
            "petstore.user.delete_user",
        ] {
            tool(&imp, p);
        }
        for t in &imp.tools {
            CompiledSchema::compile(&t.def.input_schema)
                .unwrap_or_else(|e| panic!("{f} {}: {e}", t.def.path));
            if let Some(o) = &t.def.output_schema {
                CompiledSchema::compile(o)
                    .unwrap_or_else(|e| panic!("{f} {} output: {e}", t.def.path));
            }
            assert_eq!(t.def.origin, "source:petstore");
        }
    }
}

#[test]
fn petstore_schemas_and_flags() {
    for f in PETSTORES {
        let imp = import_fixture(f, "petstore");
        let get = tool(&imp, "petstore.pet.get_pet_by_id");
        let s = &get.def.input_schema;
        assert_eq!(s["type"], "object");
        assert_eq!(s["properties"]["petId"]["type"], "integer", "{f}");
        assert_eq!(s["required"], json!(["petId"]), "{f}");
        assert!(get.def.annotations.read_only && !get.def.annotations.destructive);
        assert_eq!(get.def.name, "Find Pet By Id");
        assert!(get.def.description.starts_with("Find pet by ID"), "{f}");
        let out = get.def.output_schema.as_ref().expect("output schema");
        let pet = &out["$defs"]["Pet"];
        assert_eq!(pet["properties"]["name"]["type"], "string", "{f}");

        // The Pet body is flattened: name and photoUrls are required top-level properties.
        let add = tool(&imp, "petstore.pet.add_pet");
        let s = &add.def.input_schema;
        assert_eq!(s["properties"]["name"]["type"], "string", "{f}");
        assert_eq!(s["properties"]["photoUrls"]["type"], "array", "{f}");
        let req: Vec<&str> = s["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            req.contains(&"name") && req.contains(&"photoUrls"),
            "{f}: {req:?}"
        );
        assert!(s["properties"]["category"]["$ref"]
            .as_str()
            .unwrap()
            .starts_with("#/$defs/"));
        assert!(add.def.annotations.destructive && !add.def.annotations.read_only);
        let v = CompiledSchema::compile(s).unwrap();
        assert!(v.is_valid(&json!({"name": "rex", "photoUrls": []})));
        assert!(!v.is_valid(&json!({"name": "rex"})));

        let del = tool(&imp, "petstore.pet.delete_pet");
        assert!(del.def.annotations.destructive && del.def.annotations.idempotent);
        assert_eq!(
            del.def.input_schema["properties"]["api_key"]["type"],
            "string"
        );
        assert_eq!(del.def.input_schema["required"], json!(["petId"]));

        let by_status = tool(&imp, "petstore.pet.find_pets_by_status");
        assert_eq!(
            by_status.def.input_schema["properties"]["status"]["type"], "array",
            "{f}"
        );
        let login = tool(&imp, "petstore.user.login_user");
        assert_eq!(
            login.def.input_schema["required"],
            json!(["username", "password"])
        );
        let arr = tool(&imp, "petstore.user.create_users_with_array_input");
        assert_eq!(
            arr.def.input_schema["properties"]["body"]["type"], "array",
            "{f}"
        );

        let form = tool(&imp, "petstore.pet.update_pet_with_form");
        let props = &form.def.input_schema["properties"];
        assert!(
            props["petId"].is_object() && props["name"].is_object() && props["status"].is_object(),
            "{f}: {props}"
        );
    }
}

#[test]
fn read_only_properties_stay_out_of_requests() {
    let imp = import_fixture("petstore.oas3.0.json", "petstore");
    let add = tool(&imp, "petstore.pet.add_pet");
    // Pet.id is readOnly in the 3.0 fixture.
    assert!(add.def.input_schema["properties"].get("id").is_none());
}

#[test]
fn star_trek_without_operation_ids() {
    let imp = import_fixture("star-trek.oas3.0.json", "stapi");
    assert_eq!(imp.tools.len(), 120, "{:?}", imp.skipped);
    let t = tool(&imp, "stapi.animal.get_animal");
    assert_eq!(t.def.input_schema["required"], json!(["uid"]));
    assert!(t.def.annotations.read_only);
    let s = tool(&imp, "stapi.animal.post_animal_search");
    let props = &s.def.input_schema["properties"];
    assert_eq!(props["pageNumber"]["type"], "integer");
    assert_eq!(props["earthAnimal"]["type"], "boolean");
    // Search by POST is a write by default.
    assert!(s.def.annotations.destructive);
    for t in &imp.tools {
        CompiledSchema::compile(&t.def.input_schema).unwrap();
    }
}

#[test]
fn progress_is_reported() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    let imp = toolshed_openapi::import(
        &common::fixture("petstore.oas3.1.json"),
        &toolshed_openapi::ImportOptions {
            namespace: "p".into(),
            progress: Some(std::sync::Arc::new(move |done, total| {
                assert!(done <= total && total == 20);
                s2.store(done, Ordering::SeqCst);
            })),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(imp.tools.len(), 20);
    assert_eq!(seen.load(Ordering::SeqCst), 20);
}
