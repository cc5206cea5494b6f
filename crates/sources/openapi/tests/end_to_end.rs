//! Imported Petstore tools called through their handlers against a local axum server.

use crate::common;

use common::{call, import_local, start_petstore, tool};
use serde_json::json;
use toolshed_core::ToolErrorKind;
use toolshed_outbound::AuthConfig;

#[tokio::test]
async fn create_get_list_delete_for_each_version() {
    for f in [
        "petstore.swagger2.0.json",
        "petstore.oas3.0.json",
        "petstore.oas3.1.json",
    ] {
        let (base, _) = start_petstore().await;
        let imp = import_local(f, &base, AuthConfig::None);
        let created = call(
            tool(&imp, "petstore.pet.add_pet"),
            json!({"name": "rex", "photoUrls": ["http://x/rex.png"], "status": "available", "tags": [{"id": 1, "name": "good"}]}),
        )
        .await
        .unwrap_or_else(|e| panic!("{f}: {e:?}"));
        let id = created["id"].as_i64().expect("server assigns an id");
        assert_eq!(created["name"], "rex");
        assert_eq!(created["tags"][0]["name"], "good");
        call(
            tool(&imp, "petstore.pet.add_pet"),
            json!({"name": "tom", "photoUrls": [], "status": "sold"}),
        )
        .await
        .unwrap();

        let got = call(
            tool(&imp, "petstore.pet.get_pet_by_id"),
            json!({"petId": id}),
        )
        .await
        .unwrap();
        assert_eq!(got["name"], "rex", "{f}");

        let listed = call(
            tool(&imp, "petstore.pet.find_pets_by_status"),
            json!({"status": ["available", "pending"]}),
        )
        .await
        .unwrap();
        let names: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["rex"], "{f}");

        let updated = call(
            tool(&imp, "petstore.pet.update_pet_with_form"),
            json!({"petId": id, "name": "rexy", "status": "pending"}),
        )
        .await
        .unwrap_or_else(|e| panic!("{f}: {e:?}"));
        assert_eq!(updated["name"], "rexy", "{f}");

        let deleted = call(tool(&imp, "petstore.pet.delete_pet"), json!({"petId": id}))
            .await
            .unwrap();
        assert_eq!(deleted["status"], 200);

        let e = call(
            tool(&imp, "petstore.pet.get_pet_by_id"),
            json!({"petId": id}),
        )
        .await
        .unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::Upstream, "{f}");
        assert!(
            e.message.contains("404") && e.message.contains("Pet not found"),
            "{e:?}"
        );
        let data = e.data.unwrap();
        assert_eq!(data["status"], 404);
        assert_eq!(data["body_excerpt"], "Pet not found");
    }
}

#[tokio::test]
async fn path_parameters_are_validated_and_encoded() {
    let (base, _) = start_petstore().await;
    let imp = import_local("petstore.oas3.0.json", &base, AuthConfig::None);
    let e = call(tool(&imp, "petstore.pet.get_pet_by_id"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    assert!(e.message.contains("petId"));
    // A slash in a path parameter stays inside the segment (the server rejects the id).
    let e = call(
        tool(&imp, "petstore.pet.get_pet_by_id"),
        json!({"petId": "1/../2"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Upstream);
    assert_eq!(e.data.unwrap()["status"], 400);
}

#[tokio::test]
async fn without_allow_private_local_calls_are_refused() {
    let (base, _) = start_petstore().await;
    let imp = toolshed_openapi::import(
        &common::fixture("petstore.oas3.0.json"),
        &toolshed_openapi::ImportOptions {
            namespace: "petstore".into(),
            base_url: Some(base),
            ..Default::default()
        },
    )
    .unwrap();
    let e = call(
        tool(&imp, "petstore.pet.get_pet_by_id"),
        json!({"petId": 1}),
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("loopback"), "{e:?}");
}

#[tokio::test]
async fn documents_without_servers_need_a_base_url() {
    let doc = json!({"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"get": {"operationId": "getA", "responses": {"200": {"description": "ok"}}}}}});
    let imp = toolshed_openapi::import(
        &doc,
        &toolshed_openapi::ImportOptions {
            namespace: "t".into(),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(imp.warnings.iter().any(|w| w.contains("base_url")));
    let e = call(&imp.tools[0], json!({})).await.unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    assert!(e.message.contains("base_url"));
}
