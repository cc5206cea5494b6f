//! `toolshed agents ...` through the binary: write, a patch refused at its stage (exit 1, the
//! stored draft unchanged), get, versions, the schema text; `[models.<id>]` credentials.

use crate::support;

use serde_json::json;
use support::*;

#[test]
fn agents_verbs_write_patch_and_read() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolshed.toml");
    std::fs::write(
        &config,
        "[models.main]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nallow_private = true\napi_key = \"env:NOT_SET_FOR_THIS_TEST\"\n",
    )
    .unwrap();
    let def = dir.path().join("helper.json");
    std::fs::write(
        &def,
        json!({"name": "helper", "model": "openai/gpt-4.1-mini", "credential": "main", "instructions": "Be brief."}).to_string(),
    )
    .unwrap();
    let (code, v) = cli(
        dir.path(),
        Some(&config),
        &["agents", "write", "helper", def.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["version"], 1);

    let patch = dir.path().join("patch.json");
    std::fs::write(
        &patch,
        r#"[{"op": "add", "path": "/config", "value": {"maxSteps": 0}}]"#,
    )
    .unwrap();
    let (code, v) = cli(
        dir.path(),
        Some(&config),
        &["agents", "patch", "helper", patch.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["stage"], "schema", "{v}");
    assert_eq!(v["errors"][0]["path"], "/config/maxSteps");

    let (_, v) = cli(dir.path(), Some(&config), &["agents", "get", "helper"]);
    assert_eq!(v["draft"]["version"], 1, "{v}");
    let (_, v) = cli(dir.path(), Some(&config), &["agents", "versions", "helper"]);
    assert_eq!(v["versions"].as_array().unwrap().len(), 1, "{v}");
    let (_, v) = cli(dir.path(), Some(&config), &["agents", "list"]);
    assert_eq!(v["agents"][0]["name"], "helper", "{v}");

    // A configuration naming an unknown wire format is refused with the section named.
    std::fs::write(&config, "[models.main]\nkind = \"grpc\"\n").unwrap();
    let (code, v) = cli(dir.path(), Some(&config), &["agents", "list"]);
    assert_ne!(code, 0);
    assert!(
        v.as_str().unwrap_or_default().contains("[models.main]"),
        "{v}"
    );
}
