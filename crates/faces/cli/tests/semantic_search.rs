//! Hybrid search through the binary (built with `--features semantic`): `[search] model` loads
//! the sentence-embedding model, `toolshed search` ranks with it, and the tool vectors are kept
//! in the data directory for the next run; the precision and AVX-512 settings are honoured and
//! a wrong one is refused by name. Needs the model directory in
//! `TOOLSHED_SEARCH_MODEL` (`scripts/search-model.sh` fetches it); without it the test prints a
//! skip line.

use crate::support;

use support::{cli, cli_with_env, Server};

/// The model's folder, or `None` with a skip line.
fn model_dir(test: &str) -> Option<std::ffi::OsString> {
    let model = std::env::var_os("TOOLSHED_SEARCH_MODEL").filter(|m| !m.is_empty());
    if model.is_none() {
        eprintln!("note: TOOLSHED_SEARCH_MODEL is unset: skipping {test}");
    }
    model
}

/// A configuration with the model and the Petstore's tools, in `dir`.
fn petstore_config(dir: &std::path::Path, model: &std::ffi::OsStr) -> std::path::PathBuf {
    let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/petstore.oas3.0.json");
    let config = dir.join("toolshed.toml");
    std::fs::write(
        &config,
        format!(
            "[search]\nmodel = {:?}\n\n[[sources]]\nkind = \"openapi\"\nname = \"pets\"\nspec = {:?}\nbase_url = \"http://127.0.0.1:9\"\nallow_private = true\n",
            model.to_string_lossy(),
            spec.to_string_lossy()
        ),
    )
    .unwrap();
    config
}

#[test]
fn search_finds_tools_by_meaning_and_keeps_their_vectors() {
    let Some(model) = model_dir("the hybrid search test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = petstore_config(dir.path(), &model);

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
    let kept = std::fs::read(&vectors).unwrap();

    // A setting the binary cannot honour is refused by name, and the stored vectors are kept.
    for (var, value) in [
        ("TOOLSHED_SEARCH_PRECISION", "int4"),
        ("TOOLSHED_SEARCH_AVX512", "maybe"),
        ("TOOLSHED_SEARCH_AVX_VNNI", "sometimes"),
        ("TOOLSHED_SEARCH_PRECISION", "int4 "),
    ] {
        let (code, out) = cli_with_env(
            dir.path(),
            Some(&config),
            &["search", query, "--limit", "3"],
            &[(var, value)],
        );
        assert_ne!(code, 0, "{var}={value}: {out}");
        let text = out.to_string();
        assert!(
            text.contains(var) && text.contains(value),
            "the error names {var}={value}: {text}"
        );
        assert_eq!(std::fs::read(&vectors).unwrap(), kept);
    }

    if !cfg!(target_arch = "x86_64") {
        return; // The 8-bit kernels are x86-64's; elsewhere every setting runs in f32.
    }
    // The model's own arithmetic, the AVX2 kernels alone, and AVX-512 turned off (AVX-VNNI
    // where the CPU has it: the same vectors as AVX-512 VNNI, so the same tag) each rank a pet
    // tool first. The vector file is written for the kernels that ran (its second line names
    // them), so each setting's vectors are embedded anew.
    let kernels = || {
        let bytes = std::fs::read(&vectors).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        text.lines().nth(1).unwrap_or_default().to_string()
    };
    assert!(
        kernels().ends_with("precision=Q8/64") || kernels().ends_with("/7x7"),
        "{}",
        kernels()
    );
    #[cfg(target_arch = "x86_64")]
    let avx_vnni = std::arch::is_x86_feature_detected!("avxvnni");
    #[cfg(not(target_arch = "x86_64"))]
    let avx_vnni = false;
    let vnni_without_avx512 = if avx_vnni {
        "precision=Q8/64"
    } else {
        "precision=Q8/64/7x7"
    };
    for (env, tag) in [
        (
            [
                ("TOOLSHED_SEARCH_PRECISION", "f32"),
                ("TOOLSHED_SEARCH_AVX512", "auto"),
                ("TOOLSHED_SEARCH_AVX_VNNI", "auto"),
            ],
            "precision=F32",
        ),
        (
            [
                ("TOOLSHED_SEARCH_PRECISION", "q8"),
                ("TOOLSHED_SEARCH_AVX512", "off"),
                ("TOOLSHED_SEARCH_AVX_VNNI", "off"),
            ],
            "precision=Q8/64/7x7",
        ),
        (
            [
                ("TOOLSHED_SEARCH_PRECISION", "q8"),
                ("TOOLSHED_SEARCH_AVX512", "off"),
                ("TOOLSHED_SEARCH_AVX_VNNI", "on"),
            ],
            vnni_without_avx512,
        ),
    ] {
        let (code, other) = cli_with_env(
            dir.path(),
            Some(&config),
            &["search", query, "--limit", "3"],
            &env,
        );
        assert_eq!(code, 0, "{env:?}: {other}");
        let first = other["hits"][0]["path"].as_str().unwrap_or_default();
        assert!(first.starts_with("pets.pet."), "{env:?}: {other}");
        assert!(kernels().ends_with(tag), "{env:?}: {}", kernels());
    }
}

/// The server's `search` in `/healthz`.
async fn health_search(server: &Server) -> String {
    let health: serde_json::Value = reqwest::get(server.url("/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    health["search"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_server_says_how_its_searches_rank() {
    let Some(model) = model_dir("the served hybrid search test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = petstore_config(dir.path(), &model);
    let server = Server::start(dir.path(), Some(&config), &[]);
    // The tools embed in the background: by words until then, and /healthz says which.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let search = health_search(&server).await;
        if search == "hybrid" {
            break;
        }
        assert_eq!(search, "embedding");
        assert!(std::time::Instant::now() < deadline, "still embedding");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let url = server.url("/v1/tools?query=which%20animals%20can%20I%20adopt&limit=3");
    let answer: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert!(answer.get("note").is_none(), "{answer}");
    let first = answer["hits"][0]["path"].as_str().unwrap_or_default();
    assert!(first.starts_with("pets.pet."), "{answer}");
    server.kill();

    // The vectors were stored: the next start ranks by meaning from its first request.
    let server = Server::start(dir.path(), Some(&config), &[]);
    assert_eq!(health_search(&server).await, "hybrid");
}
