//! `toolshed audit` shows what the engine recorded for calls from any face.

use crate::support;

use support::*;

#[test]
fn audit_lists_calls_with_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _) = cli(dir.path(), None, &["call", "tables.list", "{}"]);
    assert_eq!(code, 0);
    let (code, _) = cli(dir.path(), None, &["call", "tables.nope", "{}"]);
    assert_eq!(code, 1);
    let (code, v) = cli(dir.path(), None, &["audit", "--limit", "10"]);
    assert_eq!(code, 0, "{v}");
    let entries = v["entries"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e["path"] == "tables.list" && e["outcome"] == "ok" && e["face"] == "cli"),
        "{v}"
    );
    assert!(
        entries
            .iter()
            .any(|e| e["path"] == "tables.nope" && e["outcome"] == "not_found"),
        "{v}"
    );
    assert!(entries.iter().all(|e| e["principal"] == "local"), "{v}");
}
