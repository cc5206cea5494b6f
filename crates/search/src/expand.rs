//! Query analysis for long, natural-language task descriptions.
//!
//! Agents often describe a whole task rather than a tool: "summarise the news and
//! save it as Markdown to /root/notes/today.md". Three general, catalog-independent
//! steps turn such text into weighted index terms:
//!
//! * **File references.** A path (`/root/notes/today.md`) or a bare file name with a
//!   known extension (`report.pdf`) denotes a *file*: it contributes the term `file`,
//!   the format words its extension stands for (a small table of common file types,
//!   [`FILE_FORMATS`]: `md` → markdown, `pptx` → powerpoint presentation slide, …),
//!   and its own words (directories, base name) at a reduced weight, since folder
//!   names such as `root` rarely describe the wanted tool. A URL contributes `url`
//!   plus its host and path words at the same reduced weight. A standalone word that
//!   is itself a known extension ("a PPT") also brings its format words.
//! * **Synonyms.** A small table of general English verbs and nouns that tool
//!   descriptions use interchangeably ([`SYNONYM_GROUPS`]: fetch/get/retrieve,
//!   write/save/store, …). A query word brings the other members of its group at a
//!   lower weight than the word itself. Matching is symmetric: a query word reaches a
//!   document word exactly when both belong to one group, whichever was used where.
//! * **Values.** A word without a letter (an amount, a date, a phone number, an id in
//!   digits) is a value the request carries, not what it needs, and is left out
//!   ([`crate::tokenize::naming_words`]); a request made only of such words keeps them.
//! * Everything else is analysed like document text ([`crate::tokenize::term_of`]).
//!
//! The tables are general vocabulary, not derived from any query set.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::tokenize::{naming_words, split_words, term_of};

/// Common file extensions and the words that name their format.
pub const FILE_FORMATS: &[(&str, &[&str])] = &[
    ("pdf", &["pdf", "document"]),
    ("md", &["markdown"]),
    ("markdown", &["markdown"]),
    ("txt", &["text"]),
    ("ppt", &["powerpoint", "presentation", "slide"]),
    ("pptx", &["powerpoint", "presentation", "slide"]),
    ("xls", &["excel", "spreadsheet", "sheet"]),
    ("xlsx", &["excel", "spreadsheet", "sheet"]),
    ("csv", &["csv", "spreadsheet", "table"]),
    ("doc", &["word", "document"]),
    ("docx", &["word", "document"]),
    ("png", &["image"]),
    ("jpg", &["image"]),
    ("jpeg", &["image"]),
    ("gif", &["image"]),
    ("webp", &["image"]),
    ("svg", &["image", "svg"]),
    ("wav", &["audio"]),
    ("mp3", &["audio"]),
    ("flac", &["audio"]),
    ("ogg", &["audio"]),
    ("mp4", &["video"]),
    ("mov", &["video"]),
    ("mkv", &["video"]),
    ("avi", &["video"]),
    ("json", &["json"]),
    ("html", &["html", "web", "page"]),
    ("htm", &["html", "web", "page"]),
];

/// Groups of general words that tool descriptions use for the same thing.
pub const SYNONYM_GROUPS: &[&[&str]] = &[
    &["fetch", "get", "retrieve", "download"],
    &["create", "make", "generate", "new"],
    &["delete", "remove"],
    &["search", "find", "lookup", "query"],
    &["write", "save", "store"],
    &["read", "open", "load"],
    &["list", "enumerate"],
    &["send", "post", "email"],
    &["image", "picture", "photo"],
    &["presentation", "slide", "powerpoint", "ppt"],
    &["spreadsheet", "excel", "sheet"],
    &["url", "link", "webpage"],
];

/// Words of a URL that say nothing about it.
const URL_NOISE: &[&str] = &["http", "https", "www", "com", "org", "net", "html"];

/// How much each kind of derived term counts relative to a plain query word.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpansionWeights {
    /// A synonym of a query word.
    pub synonym: f32,
    /// A word inside a path or URL.
    pub path_word: f32,
    /// The `file`/`url` term and the format words of a file reference.
    pub format: f32,
}

fn format_words(ext: &str) -> Option<&'static [&'static str]> {
    FILE_FORMATS
        .iter()
        .find(|(e, _)| e.eq_ignore_ascii_case(ext))
        .map(|(_, words)| *words)
}

/// Term → indexes of the synonym groups it belongs to.
fn synonym_index() -> &'static HashMap<String, Vec<usize>> {
    static INDEX: OnceLock<HashMap<String, Vec<usize>>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut m: HashMap<String, Vec<usize>> = HashMap::new();
        for (g, group) in SYNONYM_GROUPS.iter().enumerate() {
            for w in *group {
                if let Some(t) = term_of(w) {
                    let e = m.entry(t).or_default();
                    if !e.contains(&g) {
                        e.push(g);
                    }
                }
            }
        }
        m
    })
}

/// The other terms of the synonym groups of `term`.
pub fn synonyms_of(term: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(groups) = synonym_index().get(term) {
        for &g in groups {
            for w in SYNONYM_GROUPS[g] {
                if let Some(t) = term_of(w) {
                    if t != term && !out.contains(&t) {
                        out.push(t);
                    }
                }
            }
        }
    }
    out
}

/// One whitespace-separated chunk of a query, classified.
enum Chunk<'a> {
    Text(&'a str),
    Url(&'a str),
    File { text: &'a str, ext: Option<&'a str> },
}

fn classify(chunk: &str) -> Chunk<'_> {
    let chunk = chunk
        .trim_start_matches(|c: char| "\"'([{<".contains(c))
        .trim_end_matches(|c: char| "\"')]}>.,;:!?".contains(c));
    let lower_starts = |p: &str| {
        chunk
            .get(..p.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(p))
    };
    if chunk.contains("://") || lower_starts("www.") {
        return Chunk::Url(chunk);
    }
    let ext = chunk
        .rsplit_once('.')
        .filter(|(stem, ext)| !stem.is_empty() && format_words(ext).is_some())
        .map(|(_, ext)| ext);
    let pathlike = (chunk.starts_with('/') || chunk.starts_with("~/") || chunk.starts_with("./"))
        && chunk.chars().filter(|c| c.is_alphanumeric()).count() > 1;
    if ext.is_some() || pathlike {
        Chunk::File { text: chunk, ext }
    } else {
        Chunk::Text(chunk)
    }
}

/// Weighted index terms of a query text, before they are looked up in an index.
/// Adjacent plain words also yield their joined compound (`word cloud` →
/// `wordcloud`), which only counts if some document has it.
pub fn query_terms(text: &str, w: ExpansionWeights) -> Vec<(String, f32)> {
    let mut direct = Terms::default();
    let mut plain: Vec<String> = Vec::new();
    let flush_plain = |plain: &mut Vec<String>, out: &mut Terms| {
        for pair in plain.windows(2) {
            if let Some(t) = term_of(&format!("{}{}", pair[0], pair[1])) {
                out.add(t, 1.0);
            }
        }
        plain.clear();
    };
    for raw in naming_words(text) {
        match classify(raw) {
            Chunk::Text(t) => {
                for word in split_words(t) {
                    if let Some(term) = term_of(&word) {
                        direct.add(term, 1.0);
                        if let Some(fmt) = format_words(&word) {
                            for f in fmt {
                                if let Some(ft) = term_of(f) {
                                    direct.add(ft, w.synonym);
                                }
                            }
                        }
                        plain.push(word);
                    }
                }
            }
            Chunk::Url(u) => {
                flush_plain(&mut plain, &mut direct);
                direct.add("url".into(), w.format);
                for word in split_words(u) {
                    if URL_NOISE.contains(&word.as_str()) {
                        continue;
                    }
                    if let Some(term) = term_of(&word) {
                        direct.add(term, w.path_word);
                    }
                }
            }
            Chunk::File { text, ext } => {
                flush_plain(&mut plain, &mut direct);
                direct.add("file".into(), w.format);
                if let Some(fmt) = ext.and_then(format_words) {
                    for f in fmt {
                        if let Some(ft) = term_of(f) {
                            direct.add(ft, w.format);
                        }
                    }
                }
                let body = match ext {
                    Some(e) => &text[..text.len() - e.len() - 1],
                    None => text,
                };
                for word in split_words(body) {
                    if let Some(term) = term_of(&word) {
                        direct.add(term, w.path_word);
                    }
                }
            }
        }
    }
    flush_plain(&mut plain, &mut direct);

    if w.synonym > 0.0 {
        let mut derived = Terms::default();
        for (term, weight) in &direct.list {
            for syn in synonyms_of(term) {
                if !direct.index.contains_key(&syn) {
                    derived.raise(syn, w.synonym * weight.min(1.0));
                }
            }
        }
        direct.list.extend(derived.list);
    }
    direct.list
}

/// Terms in the order first seen, each once: an index beside the list keeps a query of
/// thousands of distinct words (a pasted blob) linear rather than quadratic.
#[derive(Default)]
struct Terms {
    list: Vec<(String, f32)>,
    index: HashMap<String, usize>,
}

impl Terms {
    /// Adds `weight` to the term's (a weight of zero or less adds nothing).
    fn add(&mut self, term: String, weight: f32) {
        if weight > 0.0 {
            let i = self.slot(term);
            self.list[i].1 += weight;
        }
    }

    /// Raises the term's weight to at least `weight`.
    fn raise(&mut self, term: String, weight: f32) {
        let i = self.slot(term);
        self.list[i].1 = self.list[i].1.max(weight);
    }

    /// The term's place in the list, appended with weight 0 when new.
    fn slot(&mut self, term: String) -> usize {
        if let Some(&i) = self.index.get(&term) {
            return i;
        }
        self.list.push((term.clone(), 0.0));
        self.index.insert(term, self.list.len() - 1);
        self.list.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: ExpansionWeights = ExpansionWeights {
        synonym: 0.5,
        path_word: 0.25,
        format: 1.0,
    };

    fn weight(terms: &[(String, f32)], t: &str) -> Option<f32> {
        terms.iter().find(|(x, _)| x == t).map(|(_, w)| *w)
    }

    #[test]
    fn every_term_comes_once_in_the_order_first_seen_with_its_weights_summed() {
        let t = query_terms("alpha beta alpha gamma beta alpha", W);
        let plain: Vec<(&str, f32)> = t
            .iter()
            .filter(|(x, _)| ["alpha", "beta", "gamma"].contains(&x.as_str()))
            .map(|(x, w)| (x.as_str(), *w))
            .collect();
        assert_eq!(plain, [("alpha", 3.0), ("beta", 2.0), ("gamma", 1.0)]);
        // A pasted blob of thousands of distinct words: each once.
        let letters = |i: usize| -> String {
            (0..3)
                .map(|d| (b'a' + (i / 26usize.pow(d) % 26) as u8) as char)
                .collect()
        };
        let blob: Vec<String> = (0..5000).map(|i| format!("zq{}", letters(i))).collect();
        let t = query_terms(&blob.join(" "), W);
        let mut seen = std::collections::HashSet::new();
        assert!(t.iter().all(|(x, _)| seen.insert(x.clone())));
        assert!(t.len() >= 5000, "{} terms", t.len());
    }

    #[test]
    fn values_a_request_carries_are_not_looked_up() {
        let t = query_terms("book 2 rooms in hotel 4821 from 2024-05-01, $450 max", W);
        let terms: Vec<&str> = t.iter().map(|(x, _)| x.as_str()).collect();
        assert!(
            terms.contains(&"book") && terms.contains(&"hotel"),
            "{terms:?}"
        );
        for value in ["2", "4821", "2024", "05", "01", "450"] {
            assert_eq!(weight(&t, value), None, "{value} in {terms:?}");
        }
        // A word with a letter keeps its digits; a request of values only is looked up.
        assert_eq!(weight(&query_terms("convert to utf8", W), "8"), Some(1.0));
        assert_eq!(weight(&query_terms("404", W), "404"), Some(1.0));
    }

    #[test]
    fn file_paths_become_file_and_format_words() {
        let t = query_terms("save it to /root/notes/today.md", W);
        assert_eq!(weight(&t, "file"), Some(1.0));
        assert_eq!(weight(&t, "markdown"), Some(1.0));
        // Folder and base-name words count, but less than a plain word.
        assert_eq!(weight(&t, "root"), Some(0.25));
        assert_eq!(weight(&t, "todai"), Some(0.25));
        assert_eq!(weight(&t, "md"), None);
    }

    #[test]
    fn bare_file_names_and_extension_words_denote_formats() {
        let t = query_terms("summarise it in deck.pptx", W);
        assert_eq!(weight(&t, "present"), Some(1.0));
        assert_eq!(weight(&t, "file"), Some(1.0));
        let t = query_terms("make a PPT", W);
        assert_eq!(weight(&t, "ppt"), Some(1.0));
        assert!(weight(&t, "present").unwrap() < 1.0);
    }

    #[test]
    fn urls_keep_their_host_words() {
        let t = query_terms("summarise https://www.youtube.com/watch?v=abc", W);
        assert_eq!(weight(&t, "url"), Some(1.0));
        assert_eq!(weight(&t, "youtub"), Some(0.25));
        assert_eq!(weight(&t, "www"), None);
        assert_eq!(weight(&t, "http"), None);
    }

    #[test]
    fn synonyms_are_weaker_and_symmetric() {
        let t = query_terms("save the notes", W);
        assert_eq!(weight(&t, "save"), Some(1.0));
        assert_eq!(weight(&t, "write"), Some(0.5));
        let t = query_terms("write the notes", W);
        assert_eq!(weight(&t, "save"), Some(0.5));
        // A word of the query is never demoted to a synonym.
        let t = query_terms("save and write", W);
        assert_eq!(weight(&t, "write"), Some(1.0));
        let off = ExpansionWeights { synonym: 0.0, ..W };
        assert_eq!(weight(&query_terms("save", off), "write"), None);
    }

    #[test]
    fn plain_sentences_are_unchanged() {
        let t = query_terms("Make a word cloud, then stop.", W);
        assert_eq!(weight(&t, "word"), Some(1.0));
        assert_eq!(weight(&t, "wordcloud"), Some(1.0));
        assert_eq!(weight(&t, "stop"), Some(1.0));
        assert_eq!(weight(&t, "file"), None);
        let t = query_terms("read and/or write TCP/IP", W);
        assert_eq!(weight(&t, "file"), None);
        assert_eq!(weight(&t, "tcp"), Some(1.0));
        assert_eq!(weight(&query_terms("wwé expérience", W), "wwé"), Some(1.0));
    }
}
