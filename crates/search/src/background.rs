//! How common each word is in tool descriptions at large, from a catalog of thousands of APIs
//! (`assets/background-df.tsv`, written by `examples/background_df.rs` from APIs.guru).
//!
//! A small catalog's own word counts say little about how telling a word is: in a catalog of
//! forty tools, `list` may be in one tool's name, and its idf is then that of a rare word,
//! though almost every API lists something. [`crate::Bm25fConfig::background_docs`] counts
//! the background as that many documents more in each word's document frequency (a word in a
//! quarter of an average publisher's tools is then in a quarter of those documents), so a small
//! catalog's idf leans on the background, and a large catalog's common words keep their own.
//! A word in one tool of any catalog still counts for less when most APIs have it: one
//! occurrence is little evidence that the word is rare.
//!
//! The table holds the words as the index analyses them (stems), those in at least 0.2 % of an
//! average publisher's tools; written again when the analyser changes
//! (`cargo run --release -p toolshed-search --example background_df -- TOOLS.jsonl`, the tools
//! from the APIs.guru benchmark's `--tools-out`).

use std::collections::HashMap;
use std::sync::OnceLock;

const TABLE: &str = include_str!("../assets/background-df.tsv");

fn table() -> &'static HashMap<&'static str, f32> {
    static PARSED: OnceLock<HashMap<&'static str, f32>> = OnceLock::new();
    PARSED.get_or_init(|| {
        TABLE
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (word, share) = l.split_once('\t')?;
                Some((word, share.trim().parse().ok()?))
            })
            .collect()
    })
}

/// The share of an average publisher's tools whose text has `word` (an analysed word, as the index
/// holds it); 0 for a word the table does not have (rarer than its floor).
pub fn share(word: &str) -> f32 {
    table().get(word).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_as_the_index_analyses_them_are_found() {
        // The table is written in the analyser's words (stems). Were the stemmer changed and
        // the table not written again, these common words would no longer be found.
        for raw in [
            "Returns",
            "identifier",
            "users",
            "database",
            "purchases",
            "response",
        ] {
            let words = crate::tokenize::analyze(raw);
            assert_eq!(words.len(), 1, "{raw}: {words:?}");
            assert!(
                share(&words[0]) > 0.0,
                "{raw} as {:?} is not in the table",
                words[0]
            );
        }
    }

    #[test]
    fn generic_api_words_are_common_and_a_word_the_table_lacks_is_rare() {
        assert!(table().len() > 1000);
        assert!(share("get") > 0.3, "get: {}", share("get"));
        assert!(share("list") > 0.1, "list: {}", share("list"));
        assert!(share(&crate::tokenize::analyze("Tuesday")[0]) < 0.01);
        assert_eq!(share("no-such-word"), 0.0);
        assert!(table().values().all(|s| (0.0..=1.0).contains(s)));
    }
}
