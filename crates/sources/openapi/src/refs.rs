//! `$ref` resolution over the root document and the local files it refers to.
//!
//! Files named by relative `$ref`s are loaded up front (transitively), relative to the file that
//! names them; the root's directory is `ImportOptions::base_dir`. Remote (`http(s)://`) refs are
//! refused. A target is identified by a canonical key `"<doc index>#<pointer>"`.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

/// Index of a loaded document; the root is 0.
pub(crate) type DocId = usize;

/// A resolved reference.
pub(crate) struct Resolved<'a> {
    pub doc: DocId,
    pub value: &'a Value,
    pub key: String,
    /// The last pointer segment (or the file stem), used to name definitions.
    pub label: String,
}

pub(crate) struct Docs<'a> {
    root: &'a Value,
    files: Vec<Value>,
    dirs: Vec<Option<PathBuf>>,
    by_path: HashMap<PathBuf, DocId>,
    stems: Vec<String>,
    failed: HashMap<PathBuf, String>,
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn is_remote(file: &str) -> bool {
    toolshed_core::is_url(file) || file.starts_with("//")
}

fn collect_refs<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "$ref" {
                    if let Value::String(s) = x {
                        if !s.starts_with('#') {
                            out.push(s);
                        }
                    }
                } else {
                    collect_refs(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

fn percent_decode(s: &str) -> String {
    if s.contains('%') {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    } else {
        s.to_string()
    }
}

impl<'a> Docs<'a> {
    /// Loads every local file reachable through `$ref`s from `root`.
    pub fn new(root: &'a Value, base_dir: Option<&Path>) -> Self {
        let mut docs = Docs {
            root,
            files: Vec::new(),
            dirs: vec![base_dir.map(normalize)],
            by_path: HashMap::new(),
            stems: vec!["root".into()],
            failed: HashMap::new(),
        };
        let mut pending: Vec<DocId> = vec![0];
        while let Some(id) = pending.pop() {
            let mut refs = Vec::new();
            collect_refs(docs.doc(id), &mut refs);
            let refs: Vec<String> = refs.into_iter().map(str::to_string).collect();
            for r in refs {
                let file = r.split('#').next().unwrap_or("");
                if file.is_empty() || is_remote(file) {
                    continue;
                }
                let Some(dir) = docs.dirs[id].clone() else {
                    continue;
                };
                let path = normalize(&dir.join(percent_decode(file)));
                if docs.by_path.contains_key(&path) || docs.failed.contains_key(&path) {
                    continue;
                }
                match crate::parse::read_document(&path) {
                    Ok(v) => {
                        docs.files.push(v);
                        let new_id = docs.files.len();
                        docs.dirs.push(path.parent().map(Path::to_path_buf));
                        docs.stems.push(
                            path.file_stem()
                                .map(|s| s.to_string_lossy().into_owned())
                                .unwrap_or_else(|| "doc".into()),
                        );
                        docs.by_path.insert(path, new_id);
                        pending.push(new_id);
                    }
                    Err(e) => {
                        docs.failed.insert(path, e.to_string());
                    }
                }
            }
        }
        docs
    }

    pub fn doc(&self, id: DocId) -> &Value {
        if id == 0 {
            self.root
        } else {
            &self.files[id - 1]
        }
    }

    /// Resolves `reference` as written in document `from`.
    pub fn resolve(&self, from: DocId, reference: &str) -> Result<Resolved<'_>, String> {
        let (file, fragment) = match reference.split_once('#') {
            Some((f, frag)) => (f, frag),
            None => (reference, ""),
        };
        let doc = if file.is_empty() {
            from
        } else if is_remote(file) {
            return Err(format!(
                "remote reference '{reference}' refused: remote $refs are not fetched; bundle the document into one file"
            ));
        } else {
            let Some(dir) = self.dirs[from].as_ref() else {
                return Err(format!(
                    "relative file reference '{reference}' needs a base directory (ImportOptions::base_dir)"
                ));
            };
            let path = normalize(&dir.join(percent_decode(file)));
            match self.by_path.get(&path) {
                Some(id) => *id,
                None => {
                    let why = self
                        .failed
                        .get(&path)
                        .cloned()
                        .unwrap_or_else(|| "file not loaded".into());
                    return Err(format!("file {}: {why}", path.display()));
                }
            }
        };
        let pointer = percent_decode(fragment);
        let mut cur = self.doc(doc);
        let mut label = self.stems[doc].clone();
        if !pointer.is_empty() {
            if !pointer.starts_with('/') {
                return Err(format!(
                    "only JSON pointer fragments are supported, found '#{fragment}'"
                ));
            }
            for raw in pointer[1..].split('/') {
                let seg = raw.replace("~1", "/").replace("~0", "~");
                cur = match cur {
                    Value::Object(m) => m.get(&seg),
                    Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
                    _ => None,
                }
                .ok_or_else(|| format!("'{seg}' not found in the document"))?;
                label = seg;
            }
        }
        Ok(Resolved {
            doc,
            value: cur,
            key: format!("{doc}#{pointer}"),
            label,
        })
    }

    /// Follows `$ref` chains from `value` (in `doc`) to a non-reference value.
    pub fn deref<'s>(&'s self, doc: DocId, value: &'s Value) -> Result<(DocId, &'s Value), String>
    where
        'a: 's,
    {
        let (mut doc, mut value) = (doc, value);
        for _ in 0..32 {
            match value.get("$ref").and_then(Value::as_str) {
                Some(r) => {
                    let t = self.resolve(doc, r)?;
                    doc = t.doc;
                    value = t.value;
                }
                None => return Ok((doc, value)),
            }
        }
        Err("reference chain is circular or longer than 32 hops".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn internal_pointers_with_escapes() {
        let doc = json!({"paths": {"/a/{b}": {"x": 1}}, "c": {"d%e": [10, 20]}});
        let docs = Docs::new(&doc, None);
        assert_eq!(
            docs.resolve(0, "#/paths/~1a~1%7Bb%7D/x").unwrap().value,
            &json!(1)
        );
        assert_eq!(docs.resolve(0, "#/c/d%25e/1").unwrap().value, &json!(20));
        let e = docs.resolve(0, "#/nope").err().unwrap();
        assert!(e.contains("nope"));
    }

    #[test]
    fn remote_and_relative_without_base_are_refused() {
        let doc = json!({"a": {"$ref": "other.json#/x"}});
        let docs = Docs::new(&doc, None);
        let e = docs
            .resolve(0, "https://example.com/s.json#/x")
            .err()
            .unwrap();
        assert!(e.contains("remote"));
        let e = docs.resolve(0, "other.json#/x").err().unwrap();
        assert!(e.contains("base directory"));
    }

    #[test]
    fn chains_and_cycles() {
        let doc = json!({"a": {"$ref": "#/b"}, "b": {"$ref": "#/c"}, "c": 3, "x": {"$ref": "#/y"}, "y": {"$ref": "#/x"}});
        let docs = Docs::new(&doc, None);
        assert_eq!(docs.deref(0, &doc["a"]).unwrap().1, &json!(3));
        assert!(docs.deref(0, &doc["x"]).is_err());
    }
}
