//! Identifier-aware tokenizer and text analysis.
//!
//! [`split_words`] breaks text and identifiers into lowercase words: it splits on
//! any non-alphanumeric character (spaces, dots, underscores, dashes, slashes) and
//! inside identifiers at camelCase humps (`getHTTPResponse` → `get`, `http`,
//! `response`) and at letter/digit boundaries (`oauth2Token` → `oauth`, `2`,
//! `token`). Ideographic characters (CJK) become one word each.
//!
//! [`analyze`] turns words into index terms: stop words and single letters are
//! dropped and the rest stemmed with [`crate::stem::stem`].

use std::collections::HashSet;
use std::sync::OnceLock;

use crate::stem::stem;

/// Words that carry no meaning for finding a tool.
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as",
    "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by",
    "can", "could", "did", "do", "does", "doing", "done", "during", "each", "either", "etc",
    "ever", "every", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
    "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
    "just", "let", "lets", "may", "me", "might", "mine", "more", "most", "must", "my", "myself",
    "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours",
    "out", "over", "own", "please", "same", "shall", "she", "should", "so", "some", "such", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through",
    "to", "too", "under", "until", "up", "upon", "us", "very", "via", "was", "we", "were", "what",
    "when", "where", "whether", "which", "while", "who", "whom", "whose", "why", "will", "with",
    "within", "would", "yet", "you", "your", "yours", "yourself", "i'm", "im", "ll", "ve", "re",
    "don", "t", "s", "d",
];

/// The words (runs of non-space) of a request that say what it needs: those that hold a
/// letter. A word without one is a value (an amount, a date, a time, a phone number, an id in
/// digits) or a lone mark, and says nothing of which tool to use; both the lexical query
/// ([`crate::expand::query_terms`]) and the query embedding leave such words out. A request
/// made only of such words keeps them all.
pub fn naming_words(text: &str) -> impl Iterator<Item = &str> {
    let names = |w: &str| w.chars().any(char::is_alphabetic);
    let keep_all = !text.split_whitespace().any(names);
    text.split_whitespace()
        .filter(move |w| keep_all || names(w))
}

/// Whether `word` (lowercase) is a stop word.
pub fn is_stop_word(word: &str) -> bool {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| STOP_WORDS.iter().copied().collect())
        .contains(word)
}

fn is_ideograph(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Lower,
    Upper,
    Digit,
}

fn class(c: char) -> Class {
    if c.is_numeric() {
        Class::Digit
    } else if c.is_uppercase() {
        Class::Upper
    } else {
        Class::Lower
    }
}

/// Splits text into lowercase words, breaking identifiers at case and digit boundaries.
pub fn split_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut run: Vec<char> = Vec::new();
    for c in text.chars() {
        if is_ideograph(c) {
            flush_run(&mut run, &mut out);
            out.push(c.to_string());
        } else if c.is_alphanumeric() {
            run.push(c);
        } else if c == '\'' && !run.is_empty() {
            // "don't" stays one word so the stop list can drop it whole.
            run.push(c);
        } else {
            flush_run(&mut run, &mut out);
        }
    }
    flush_run(&mut run, &mut out);
    out
}

/// Whether a new word starts at `cur`, inside a run of letters and digits, after `prev` and
/// before `next`: at a camelCase hump, at a letter/digit boundary, and at the last capital of
/// a run of capitals followed by a lowercase letter ("HTTPServer": "http", "server").
pub(crate) fn starts_word(prev: char, cur: char, next: Option<char>) -> bool {
    match (class(prev), class(cur)) {
        (Class::Lower, Class::Upper) => true,
        (Class::Digit, Class::Upper | Class::Lower) => true,
        (Class::Upper | Class::Lower, Class::Digit) => true,
        (Class::Upper, Class::Upper) => next.is_some_and(|n| class(n) == Class::Lower && n != '\''),
        _ => false,
    }
}

/// Splits one alphanumeric run at camelCase humps and letter/digit boundaries.
fn flush_run(run: &mut Vec<char>, out: &mut Vec<String>) {
    while run.last() == Some(&'\'') {
        run.pop();
    }
    if run.is_empty() {
        return;
    }
    let mut start = 0;
    for i in 1..run.len() {
        let boundary = starts_word(run[i - 1], run[i], run.get(i + 1).copied());
        if boundary {
            out.push(run[start..i].iter().collect::<String>().to_lowercase());
            start = i;
        }
    }
    out.push(run[start..].iter().collect::<String>().to_lowercase());
    run.clear();
}

/// Index terms of a text: words, minus stop words and lone letters, stemmed.
pub fn analyze(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    analyze_into(text, &mut out);
    out
}

/// Like [`analyze`], appending to `out`.
pub fn analyze_into(text: &str, out: &mut Vec<String>) {
    for word in split_words(text) {
        if let Some(term) = term_of(&word) {
            out.push(term);
        }
    }
}

/// The index term for one word, or `None` when the word is not worth indexing.
pub fn term_of(word: &str) -> Option<String> {
    let word = word.trim_end_matches("'s");
    if word.is_empty() || word.contains('\'') || is_stop_word(word) {
        return None;
    }
    let mut chars = word.chars();
    let first = chars.next()?;
    if chars.next().is_none() && first.is_ascii_alphabetic() {
        return None;
    }
    Some(stem(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_recognised() {
        assert!(is_stop_word("the"));
        assert!(is_stop_word("i'm"));
        assert!(!is_stop_word("issue"));
    }

    #[test]
    fn splits_camel_case() {
        assert_eq!(split_words("getUserProfile"), ["get", "user", "profile"]);
        assert_eq!(split_words("HTTPServerError"), ["http", "server", "error"]);
        assert_eq!(split_words("XMLHttpRequest"), ["xml", "http", "request"]);
    }

    #[test]
    fn splits_snake_kebab_and_dots() {
        assert_eq!(
            split_words("github.issues.create_comment"),
            ["github", "issues", "create", "comment"]
        );
        assert_eq!(split_words("get-weread-rank"), ["get", "weread", "rank"]);
        assert_eq!(split_words("a/b::c"), ["a", "b", "c"]);
    }

    #[test]
    fn a_request_names_what_it_needs_with_words_that_hold_a_letter() {
        let words: Vec<&str> =
            naming_words("book 2 rooms from 2024-05-01 to 2024-05-03, $450 max (5th floor)")
                .collect();
        assert_eq!(
            words,
            ["book", "rooms", "from", "to", "max", "(5th", "floor)"]
        );
        // Words with a letter and a digit are names ("24-hour", "iPhone15", "v2").
        let kept = "a 24-hour trip on an iPhone15 with api v2";
        assert_eq!(naming_words(kept).collect::<Vec<_>>().join(" "), kept);
        // A request of values only keeps them.
        assert_eq!(naming_words("404 500").collect::<Vec<_>>(), ["404", "500"]);
        assert_eq!(naming_words("  ").count(), 0);
    }

    #[test]
    fn splits_digits() {
        assert_eq!(split_words("oauth2Token"), ["oauth", "2", "token"]);
        assert_eq!(split_words("v1.2"), ["v", "1", "2"]);
        assert_eq!(split_words("ec2"), ["ec", "2"]);
    }

    #[test]
    fn ideographs_are_single_words() {
        assert_eq!(split_words("必应search"), ["必", "应", "search"]);
    }

    #[test]
    fn analyze_drops_stop_words_and_stems() {
        assert_eq!(
            analyze("Please create the issues for my Repositories"),
            ["creat", "issu", "repositori"]
        );
        assert_eq!(analyze("I'm searching, don't stop"), ["search", "stop"]);
    }

    #[test]
    fn analyze_of_garbage_is_empty() {
        assert!(analyze("").is_empty());
        assert!(analyze("  ,.;!? --- ").is_empty());
        assert!(analyze("the of and a").is_empty());
    }
}
