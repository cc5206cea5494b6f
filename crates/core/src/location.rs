//! Is this a URL or a file? The one answer for every document a source names (OpenAPI
//! documents, their `$ref`ed files, GraphQL SDL and introspection files).
//!
//! An `http://` or `https://` address (scheme in any case) is a URL, fetched over the network;
//! everything else is a file path, and a `file://` prefix only says so explicitly (it is read
//! from disk like the bare path it carries, and a relative one is relative like any path).

/// Where a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location<'a> {
    /// An `http(s)` URL, as given.
    Url(&'a str),
    /// A file path, without any `file://` prefix.
    File(&'a str),
}

/// Tells a URL from a file path.
pub fn locate(s: &str) -> Location<'_> {
    let t = s.trim();
    let has_scheme = |scheme: &str| {
        t.get(..scheme.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(scheme))
    };
    if has_scheme("http://") || has_scheme("https://") {
        Location::Url(t)
    } else if has_scheme("file://") {
        Location::File(&t["file://".len()..])
    } else {
        Location::File(t)
    }
}

/// Whether `s` is an `http(s)` URL (see [`locate`]).
pub fn is_url(s: &str) -> bool {
    matches!(locate(s), Location::Url(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_files_are_told_apart() {
        assert_eq!(
            locate("https://x.io/a.json"),
            Location::Url("https://x.io/a.json")
        );
        assert_eq!(locate("HTTP://x.io/a"), Location::Url("HTTP://x.io/a"));
        assert_eq!(
            locate("file:///etc/spec.yaml"),
            Location::File("/etc/spec.yaml")
        );
        assert_eq!(
            locate("FILE://specs/a.json"),
            Location::File("specs/a.json")
        );
        assert_eq!(locate("specs/a.json"), Location::File("specs/a.json"));
        assert_eq!(locate(" /abs/a.json "), Location::File("/abs/a.json"));
        assert_eq!(locate("ftp://x/a"), Location::File("ftp://x/a"));
        assert!(is_url("https://x") && !is_url("file:///x") && !is_url("//x/a.json"));
        assert!(!is_url("http:/x") && !is_url("httpsx://y"));
    }
}
