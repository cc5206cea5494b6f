//! A file of tool embeddings kept between runs, so that a restart (or a one-shot CLI search)
//! does not embed every tool again.
//!
//! The file holds one model's vectors keyed by a 64-bit FNV-1a hash of the embedded text:
//! `TSVEC1\n`, the model id and the dimension on one line each, then records of an 8-byte
//! little-endian key followed by `dim` little-endian `f32`s. A file written for another model
//! or dimension, or a damaged one, is ignored (and replaced on the next save): the cache can
//! only cost time, never change a ranking.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

const MAGIC: &str = "TSVEC1";

/// The key of a text in the vector file.
pub fn text_key(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Reads the vectors of `model` (each `dim` long) from `path`; empty when the file is absent,
/// belongs to another model or dimension, or is damaged.
pub fn load(path: &Path, model: &str, dim: usize) -> HashMap<u64, Arc<[f32]>> {
    let Ok(bytes) = std::fs::read(path) else {
        return HashMap::new();
    };
    parse(&bytes, model, dim).unwrap_or_default()
}

fn parse(bytes: &[u8], model: &str, dim: usize) -> Option<HashMap<u64, Arc<[f32]>>> {
    let mut lines = bytes.splitn(4, |b| *b == b'\n');
    if lines.next()? != MAGIC.as_bytes() || lines.next()? != model.as_bytes() {
        return None;
    }
    let file_dim: usize = std::str::from_utf8(lines.next()?).ok()?.parse().ok()?;
    if file_dim != dim || dim == 0 {
        return None;
    }
    let body = lines.next().unwrap_or_default();
    let record = 8 + 4 * dim;
    if body.len() % record != 0 {
        return None;
    }
    let mut out = HashMap::with_capacity(body.len() / record);
    for r in body.chunks_exact(record) {
        let key = u64::from_le_bytes(r[..8].try_into().ok()?);
        let v: Vec<f32> = r[8..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        out.insert(key, Arc::from(v));
    }
    Some(out)
}

/// Writes `vectors` for `model` to `path` (through a temporary file and a rename, so a reader
/// never sees half a file).
pub fn save(
    path: &Path,
    model: &str,
    dim: usize,
    vectors: &HashMap<u64, Arc<[f32]>>,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(32 + model.len() + vectors.len() * (8 + 4 * dim));
    write!(buf, "{MAGIC}\n{model}\n{dim}\n")?;
    for (key, v) in vectors.iter().filter(|(_, v)| v.len() == dim) {
        buf.extend_from_slice(&key.to_le_bytes());
        for x in v.iter() {
            buf.extend_from_slice(&x.to_le_bytes());
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // A name of this write's own: two processes (a server and a one-shot search) or two
    // writes of one process never interleave in one temporary file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("{}.{n}.tmp", std::process::id()));
    std::fs::write(&tmp, &buf)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_other_models_and_damage() {
        let dir = std::env::temp_dir().join(format!("toolshed-vectors-{}", std::process::id()));
        let path = dir.join("vectors.bin");
        let mut v = HashMap::new();
        v.insert(text_key("a"), Arc::from(vec![1.0f32, 0.0]));
        v.insert(text_key("b"), Arc::from(vec![0.6f32, 0.8]));
        save(&path, "m1", 2, &v).unwrap();
        assert_eq!(load(&path, "m1", 2), v);
        assert!(load(&path, "m2", 2).is_empty());
        assert!(load(&path, "m1", 3).is_empty());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.pop();
        std::fs::write(&path, bytes).unwrap();
        assert!(load(&path, "m1", 2).is_empty());
        assert!(load(&dir.join("absent.bin"), "m1", 2).is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn keys_are_stable() {
        assert_eq!(text_key(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(text_key("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(text_key("ab"), text_key("ba"));
    }
}
