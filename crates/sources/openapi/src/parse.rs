//! Reading documents: JSON or YAML text into a [`serde_json::Value`], from a file or a URL.
//!
//! YAML is converted by hand so that non-string keys (`200:` response codes), merge keys and
//! tags survive as JSON.

use std::path::Path;

use serde_json::{Map, Number, Value};
use toolshed_outbound::Outbound;

use crate::error::OpenApiError;

/// Parses JSON or YAML. Text starting with `{` or `[` is read as JSON.
pub fn parse_document(text: &str) -> Result<Value, OpenApiError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return serde_json::from_str(text).map_err(|e| OpenApiError::Json {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        });
    }
    let mut y: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((0, 0));
        OpenApiError::Yaml {
            line,
            column,
            message: e.to_string(),
        }
    })?;
    // Merge keys are rare in OpenAPI documents; a failure here leaves them as plain keys.
    let _ = y.apply_merge();
    Ok(yaml_to_json(y))
}

fn yaml_key(k: serde_yaml::Value) -> String {
    match k {
        serde_yaml::Value::String(s) => s,
        serde_yaml::Value::Number(n) => n.to_string(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        serde_yaml::Value::Null => "null".into(),
        serde_yaml::Value::Tagged(t) => yaml_key(t.value),
        other => serde_yaml::to_string(&other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

fn yaml_to_json(v: serde_yaml::Value) -> Value {
    match v {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(b),
        serde_yaml::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Number(i.into())
            } else if let Some(u) = n.as_u64() {
                Value::Number(u.into())
            } else {
                n.as_f64()
                    .and_then(Number::from_f64)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
        }
        serde_yaml::Value::String(s) => Value::String(s),
        serde_yaml::Value::Sequence(seq) => {
            Value::Array(seq.into_iter().map(yaml_to_json).collect())
        }
        serde_yaml::Value::Mapping(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, v) in m {
                out.insert(yaml_key(k), yaml_to_json(v));
            }
            Value::Object(out)
        }
        serde_yaml::Value::Tagged(t) => yaml_to_json(t.value),
    }
}

/// Loads a document from a file path or an `http(s)` URL (fetched through `outbound`).
pub async fn load_document(location: &str, outbound: &Outbound) -> Result<Value, OpenApiError> {
    let path = match toolshed_core::locate(location) {
        toolshed_core::Location::File(path) => path,
        toolshed_core::Location::Url(url) => {
            let text = outbound
                .get_text(url)
                .await
                .map_err(|e| OpenApiError::Fetch {
                    url: url.to_string(),
                    message: e.to_string(),
                })?;
            return parse_document(&text);
        }
    };
    let text = tokio::fs::read_to_string(Path::new(path))
        .await
        .map_err(|e| OpenApiError::Read {
            path: path.to_string(),
            message: e.to_string(),
        })?;
    parse_document(&text)
}

/// Reads and parses a local file synchronously (used for relative-file `$ref`s).
pub(crate) fn read_document(path: &Path) -> Result<Value, OpenApiError> {
    let text = std::fs::read_to_string(path).map_err(|e| OpenApiError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    parse_document(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_yaml() {
        let j = parse_document(r#"{"openapi":"3.0.0","paths":{}}"#).unwrap();
        assert_eq!(j["openapi"], "3.0.0");
        let y = parse_document("openapi: 3.1.0\npaths:\n  /a:\n    get:\n      responses:\n        200:\n          description: ok\n").unwrap();
        assert_eq!(y["openapi"], "3.1.0");
        assert!(y["paths"]["/a"]["get"]["responses"]["200"].is_object());
    }

    #[test]
    fn yaml_merge_keys_and_tags() {
        let y = parse_document("base: &b\n  x: 1\nderived:\n  <<: *b\n  y: 2\ntagged: !foo 3\n")
            .unwrap();
        assert_eq!(y["derived"]["x"], 1);
        assert_eq!(y["tagged"], 3);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse_document("{\n  \"a\": 1,\n  \"b\": \n}").unwrap_err();
        assert!(matches!(e, OpenApiError::Json { line: 4, .. }), "{e:?}");
        assert!(e.to_string().contains("line 4"));
        let e = parse_document("openapi: 3.0.0\npaths:\n  - a\n  b: [\n").unwrap_err();
        assert!(matches!(e, OpenApiError::Yaml { .. }), "{e:?}");
        assert!(e.to_string().contains("line"), "{e}");
    }
}
