//! Hybrid search through the binary (built with `--features semantic`): `[search] model` loads
//! the sentence-embedding model, `toolshed search` ranks with it, and the tool vectors are kept
//! in the data directory for the next run. Needs the model directory in
//! `TOOLSHED_SEARCH_MODEL` (`scripts/search-model.sh` fetches it); without it the test prints a
//! skip line.

use crate::support;

use support::cli;

#[test]
fn search_finds_tools_by_meaning_and_keeps_their_vectors() {
    let Some(model) = std::env::var_os("TOOLSHED_SEARCH_MODEL").filter(|m| !m.is_empty()) else {
        eprintln!("note: TOOLSHED_SEARCH_MODEL is unset: skipping the hybrid search test");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/petstore.oas3.0.json");
    let config = dir.path().join("toolshed.toml");
    std::fs::write(
        &config,
        format!(
            "[search]\nmodel = {:?}\n\n[[sources]]\nkind = \"openapi\"\nname = \"pets\"\nspec = {:?}\nbase_url = \"http://127.0.0.1:9\"\nallow_private = true\n",
            model.to_string_lossy(),
            spec.to_string_lossy()
        ),
    )
    .unwrap();

    // No word of the question is in the Petstore's tools; their meaning is.
    let query = "which animals can I adopt";
    let (code, v) = cli(
        dir.path(),
        Some(&config),
        &["search", query, "--limit", "3"],
    );
    assert_eq!(code, 0, "{v}");
    let hits = v["hits"].as_array().expect("hits");
    assert!(
        hits.first()
            .and_then(|h| h["path"].as_str())
            .is_some_and(|p| p.starts_with("pets.pet.")),
        "{v}"
    );
    let vectors = dir.path().join("tool-vectors.bin");
    let stored = std::fs::metadata(&vectors)
        .expect("tool vectors stored")
        .len();
    assert!(stored > 1_000, "{stored} bytes");

    // The next run reuses them: same answer, file unchanged.
    let (code, again) = cli(
        dir.path(),
        Some(&config),
        &["search", query, "--limit", "3"],
    );
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["hits"], v["hits"]);
    assert_eq!(std::fs::metadata(&vectors).unwrap().len(), stored);
}
