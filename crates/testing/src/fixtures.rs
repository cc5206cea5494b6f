//! Fixture files: `<crate>/tests/fixtures/<name>`, `.gz` files gunzipped.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

/// The fixture `name` of the crate at `crate_dir` as text; panics naming the file when it
/// cannot be read.
pub fn text(crate_dir: &str, name: &str) -> String {
    let path = Path::new(crate_dir).join("tests/fixtures").join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if name.ends_with(".gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .unwrap_or_else(|e| panic!("{}: not gzip: {e}", path.display()));
        s
    } else {
        String::from_utf8(bytes).unwrap_or_else(|e| panic!("{}: not UTF-8: {e}", path.display()))
    }
}

/// The fixture `name` of the crate at `crate_dir` as bytes, unchanged.
pub fn bytes(crate_dir: &str, name: &str) -> Vec<u8> {
    let path = Path::new(crate_dir).join("tests/fixtures").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fixture `name` of the crate at `crate_dir` parsed as JSON.
pub fn json(crate_dir: &str, name: &str) -> Value {
    serde_json::from_str(&text(crate_dir, name))
        .unwrap_or_else(|e| panic!("fixture {name}: not JSON: {e}"))
}

/// `fixture!("name")`: the calling crate's fixture as JSON.
#[macro_export]
macro_rules! fixture {
    ($name:expr $(,)?) => {
        $crate::fixtures::json(env!("CARGO_MANIFEST_DIR"), $name)
    };
}

/// `fixture_bytes!("name")`: the calling crate's fixture as bytes.
#[macro_export]
macro_rules! fixture_bytes {
    ($name:expr $(,)?) => {
        $crate::fixtures::bytes(env!("CARGO_MANIFEST_DIR"), $name)
    };
}

/// `fixture_text!("name")`: the calling crate's fixture as text.
#[macro_export]
macro_rules! fixture_text {
    ($name:expr $(,)?) => {
        $crate::fixtures::text(env!("CARGO_MANIFEST_DIR"), $name)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_gzipped_fixtures_read_alike() {
        let dir = std::env::temp_dir().join(format!("toolshed-testing-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("tests/fixtures")).unwrap();
        std::fs::write(dir.join("tests/fixtures/a.json"), br#"{"a":1}"#).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, br#"{"a":1}"#).unwrap();
        std::fs::write(dir.join("tests/fixtures/a.json.gz"), gz.finish().unwrap()).unwrap();
        let d = dir.to_str().unwrap();
        assert_eq!(json(d, "a.json"), json(d, "a.json.gz"));
        assert_eq!(json(d, "a.json")["a"], 1);
        let missing = std::panic::catch_unwind(|| text(d, "missing.json")).unwrap_err();
        let message = missing.downcast_ref::<String>().unwrap();
        assert!(message.contains("missing.json"), "{message}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
