//! Sentences a catalog repeats across many of its tools, left out of the texts tools are
//! embedded from.
//!
//! Tool descriptions often end in the same notes: a file server's "Only works within allowed
//! directories." on each of its tools, a "Note that the provided function is in Python 3
//! syntax." appended to every definition of a function-calling catalog. Such a sentence says
//! nothing that tells its tools apart, yet it is part of each one's embedded text and pulls all
//! their vectors the same way, away from what each tool does: ComplexFuncBench with one such note
//! on every tool ranked 2.6 points lower at hybrid R@5 than without it, and 0.5 lower once the
//! note was left out of the embedded texts (docs/benchmarks.md, stop 58). The lexical index
//! needs no such care (a word on every tool raises them all alike there), and keeps every
//! sentence.
//!
//! A sentence counts as shared when it has at least [`MIN_WORDS`] words and is found, word for
//! word, in the descriptions of at least [`MIN_TOOLS`] tools and of at least one in
//! [`PER_TOOLS`] of the catalog's. A description's first sentence always stays: near-twin tools
//! (one model fine-tuned on several datasets, one endpoint in several versions) often begin
//! alike, and that sentence is what they do.

use std::collections::{HashMap, HashSet};

/// The fewest words a shared sentence has: shorter pieces ("Returns a list.") are too common
/// in honest descriptions to be taken for notes.
pub const MIN_WORDS: usize = 4;
/// The fewest tools that must share a sentence.
pub const MIN_TOOLS: usize = 5;
/// A shared sentence is in at least one tool of this many (1 %), so that in a large catalog a
/// sentence of a few tools' (one server's way of saying something) stays theirs.
pub const PER_TOOLS: usize = 100;

/// A description's sentences, trimmed, in order: each ends at a line break, or at `.`, `!` or
/// `?` followed by white space, except after an abbreviation (a one-letter word or one with a
/// dot inside: "e.g.", "i.e.", "U.S.").
pub fn sentences(description: &str) -> Vec<&str> {
    let d = description.trim();
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in d.char_indices() {
        let end = if c == '\n' {
            Some(i)
        } else if matches!(c, '.' | '!' | '?')
            && d[i + 1..].starts_with(char::is_whitespace)
            && !(c == '.' && after_abbreviation(&d[start..i]))
        {
            Some(i + 1)
        } else {
            None
        };
        if let Some(end) = end {
            let piece = d[start..end].trim();
            if !piece.is_empty() {
                out.push(piece);
            }
            start = end;
        }
    }
    let rest = d[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// Whether `before`, the text up to a dot, ends in an abbreviation: a word of one character or
/// one with a dot of its own.
fn after_abbreviation(before: &str) -> bool {
    let word = before.rsplit(char::is_whitespace).next().unwrap_or("");
    word.chars().count() <= 1 || word.contains('.')
}

/// The sentences a catalog's descriptions share (see the module docs), with how many tools
/// carry each.
#[derive(Debug, Default)]
pub struct Shared<'a> {
    counts: HashMap<&'a str, usize>,
}

impl<'a> Shared<'a> {
    /// The shared sentences of a catalog whose descriptions are cut into `split` (each one's
    /// [`sentences`], one entry per tool).
    pub fn of(split: &[Vec<&'a str>]) -> Self {
        let floor = MIN_TOOLS.max(split.len().div_ceil(PER_TOOLS));
        if split.len() < floor {
            return Self::default();
        }
        let mut counts: HashMap<&str, usize> = HashMap::new();
        let mut seen = HashSet::new();
        for own in split {
            seen.clear();
            for &s in own.iter().skip(1) {
                if s.split_whitespace().nth(MIN_WORDS - 1).is_some() && seen.insert(s) {
                    *counts.entry(s).or_default() += 1;
                }
            }
        }
        counts.retain(|_, n| *n >= floor);
        Self { counts }
    }

    /// How many sentences are shared.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether no sentence is shared.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Each shared sentence with the number of tools that carry it.
    pub fn counts(&self) -> impl Iterator<Item = (&'a str, usize)> + '_ {
        self.counts.iter().map(|(&s, &n)| (s, n))
    }

    /// A description's `sentences` without the shared ones after the first; `None` when it has
    /// none to leave out.
    pub fn strip<'d>(&self, sentences: &[&'d str]) -> Option<Vec<&'d str>> {
        let shared = |s: &str| self.counts.contains_key(s);
        if self.counts.is_empty() || !sentences.iter().skip(1).any(|s| shared(s)) {
            return None;
        }
        let first = sentences.iter().take(1);
        Some(
            first
                .chain(sentences.iter().skip(1).filter(|s| !shared(s)))
                .copied()
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sentences of `n` descriptions, the `i`th `describe(i)`.
    fn catalog(n: usize, describe: impl Fn(usize) -> String) -> Vec<String> {
        (0..n).map(describe).collect()
    }

    fn shared(descriptions: &[String]) -> usize {
        let split: Vec<Vec<&str>> = descriptions.iter().map(|d| sentences(d)).collect();
        Shared::of(&split).len()
    }

    #[test]
    fn sentences_end_at_stops_and_line_breaks_but_not_after_an_abbreviation() {
        assert_eq!(
            sentences("  Lists files, e.g. logs in the U.S. office. Search files. Done!\nPaths are absolute "),
            vec![
                "Lists files, e.g. logs in the U.S. office.",
                "Search files.",
                "Done!",
                "Paths are absolute"
            ]
        );
        assert_eq!(sentences(""), Vec::<&str>::new());
        assert_eq!(sentences("One sentence only."), vec!["One sentence only."]);
    }

    #[test]
    fn a_note_on_many_tools_is_left_out_and_the_rest_of_each_description_kept() {
        let note = "Note that the provided function is in Python 3 syntax.";
        let mut docs = catalog(6, |i| {
            format!("Computes the value number {i} of a series. {note}")
        });
        docs.push("Sends an email message to one address.".into());
        let split: Vec<Vec<&str>> = docs.iter().map(|d| sentences(d)).collect();
        let shared = Shared::of(&split);
        assert_eq!(shared.counts().collect::<Vec<_>>(), [(note, 6)]);
        assert_eq!(
            shared.strip(&split[2]),
            Some(vec!["Computes the value number 2 of a series."])
        );
        assert_eq!(shared.strip(&split[6]), None);
    }

    #[test]
    fn a_first_sentence_a_few_tools_or_few_words_are_never_taken_for_a_note() {
        // Twins that begin alike keep what they do.
        let twins = catalog(8, |i| {
            format!("A model fine-tuned on depth estimation data. Variant {i} of it.")
        });
        assert_eq!(shared(&twins), 0);
        // Four tools are too few, and so is a three-word sentence on eight.
        let four = catalog(4, |i| {
            format!("Tool {i} does its own thing well. Requires an account token.")
        });
        assert_eq!(shared(&four), 0);
        let short = catalog(8, |i| {
            format!("Tool {i} does its own thing well. Returns a list.")
        });
        assert_eq!(shared(&short), 0);
    }

    #[test]
    fn in_a_large_catalog_a_sentence_needs_one_tool_in_a_hundred() {
        let mut docs = catalog(1000, |i| format!("Operation {i} of a large interface."));
        for d in docs.iter_mut().take(9) {
            d.push_str(" Requires an account token to call.");
        }
        assert_eq!(shared(&docs), 0, "9 of 1,000 is under 1 %");
        docs[9].push_str(" Requires an account token to call.");
        assert_eq!(shared(&docs), 1);
    }
}
