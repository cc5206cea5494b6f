//! `toolshed-test-upstream`, the small MCP server of `toolshed-mcp-source` that tests of other
//! crates put behind Toolshed.

use std::path::PathBuf;
use std::sync::OnceLock;

/// `target/<profile>/toolshed-test-upstream`, built (once per test process) so that a narrower
/// `cargo test` that did not build it, or built an older one, still gets the current server.
pub fn test_upstream() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the test binary's path");
            let profile_dir = exe
                .parent()
                .and_then(|deps| deps.parent())
                .expect("target/<profile>/deps")
                .to_path_buf();
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut build = std::process::Command::new(cargo);
            build.args([
                "build",
                "-p",
                "toolshed-mcp-source",
                "--features",
                "test-upstream",
                "--bins",
            ]);
            if profile_dir.ends_with("release") {
                build.arg("--release");
            }
            let status = build
                .status()
                .expect("run cargo build for the test upstream");
            assert!(status.success(), "building toolshed-test-upstream failed");
            let bin = profile_dir.join("toolshed-test-upstream");
            assert!(bin.exists(), "{} is missing", bin.display());
            bin
        })
        .clone()
}

/// `target/<profile>/toolshed-conformance-upstream`, the server of the conformance suite's
/// fixture tools, resources and prompts (built with [`test_upstream`]).
pub fn conformance_upstream() -> PathBuf {
    let bin = test_upstream().with_file_name("toolshed-conformance-upstream");
    assert!(bin.exists(), "{} is missing", bin.display());
    bin
}
