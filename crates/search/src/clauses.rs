//! The clauses of a request that asks for several things.
//!
//! A task such as "find flights to Paris, book the cheapest one and email me the receipt" needs
//! three tools; its one sentence vector sits between them and may match none well. The semantic
//! stage therefore also compares tools with the request's clauses ([`clauses`]) and gives each
//! tool the mean of its similarity to the whole request and to its best clause.
//!
//! Clauses are cut at punctuation that ends a sentence or separates a list (`. ; , ? !` followed
//! by white space, and line breaks), a leading "and", "then" or "and then" left out; a piece of fewer than
//! [`MIN_WORDS`] words (a number's thousands, "please", an apposition) stays with the clause
//! before it. Nothing here depends on a tool set or its queries: it is plain punctuation.

use std::ops::Range;

/// Words a piece needs to stand as a clause of its own.
pub const MIN_WORDS: usize = 4;

/// Clauses taken at most (the rest of the request stays in the last one).
pub const MAX_CLAUSES: usize = 6;

/// Connectives left out at the start of a clause.
const LEADING: [&str; 3] = ["and then ", "and ", "then "];

/// The byte ranges of `text`'s clauses, in order; empty when the request has fewer than two.
pub fn clauses(text: &str) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    // A mark counts when white space or the end follows it: "10,000", "3.5", "e.g." and
    // "api.github.com" are not cut.
    let cuts = text
        .match_indices(['.', ';', ',', '?', '!', '\n'])
        .filter(|(i, m)| *m == "\n" || text[i + 1..].chars().next().is_none_or(char::is_whitespace))
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()));
    for cut in cuts {
        let piece = start..cut;
        start = cut + 1;
        let Some(piece) = trimmed(text, piece) else {
            continue;
        };
        let words = text[piece.clone()].split_whitespace().count();
        let full = out.len() == MAX_CLAUSES;
        match out.last_mut() {
            Some(last) if words < MIN_WORDS || full => last.end = piece.end,
            _ => out.push(piece),
        }
    }
    // A first piece too short to stand alone joins the next one.
    if out.len() >= 2 && text[out[0].clone()].split_whitespace().count() < MIN_WORDS {
        let first = out.remove(0);
        out[0].start = first.start;
    }
    if out.len() < 2 {
        out.clear();
    }
    out
}

/// `range` of `text` without surrounding white space and a leading connective; `None` when
/// nothing is left.
fn trimmed(text: &str, range: Range<usize>) -> Option<Range<usize>> {
    let piece = &text[range.clone()];
    let lead = piece.len() - piece.trim_start().len();
    let mut start = range.start + lead;
    let end = range.start + piece.trim_end().len();
    if start >= end {
        return None;
    }
    let lower = text[start..end].to_ascii_lowercase();
    if let Some(word) = LEADING.iter().find(|w| lower.starts_with(*w)) {
        start += word.len();
        start += text[start..end].len() - text[start..end].trim_start().len();
    }
    (start < end).then_some(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<&str> {
        clauses(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn a_request_for_several_things_is_cut_into_clauses() {
        assert_eq!(
            texts("Find flights from Boston to Paris, book the cheapest one and then email me the receipt."),
            ["Find flights from Boston to Paris", "book the cheapest one and then email me the receipt"]
        );
        assert_eq!(
            texts("What is the weather in Tokyo? Then convert 100 USD to yen; and then tell me a joke about cats"),
            ["What is the weather in Tokyo", "convert 100 USD to yen", "tell me a joke about cats"]
        );
    }

    #[test]
    fn short_pieces_stay_with_their_clause() {
        // A thousands separator, a one-word aside, a short first piece.
        assert_eq!(
            texts("Get a loan quote for $10,000 over 5 years, please, and list the three cheapest banks near me"),
            ["Get a loan quote for $10,000 over 5 years, please", "list the three cheapest banks near me"]
        );
        assert_eq!(
            texts("Hi, could you find me a flight to Rome tomorrow"),
            Vec::<&str>::new()
        );
        assert_eq!(
            texts("Well, okay: find me a flight to Rome, and book a hotel near the Colosseum"),
            [
                "Well, okay: find me a flight to Rome",
                "book a hotel near the Colosseum"
            ]
        );
    }

    #[test]
    fn one_clause_or_none_gives_nothing() {
        assert!(clauses("").is_empty());
        assert!(clauses("create an issue").is_empty());
        assert!(clauses("send the weekly report to the whole team.").is_empty());
        assert!(clauses(",,, ;; ..").is_empty());
    }

    #[test]
    fn clauses_are_bounded_and_cut_at_character_boundaries() {
        let many = (0..20)
            .map(|i| format!("do the task number {i} now"))
            .collect::<Vec<_>>()
            .join(", ");
        let got = texts(&many);
        assert_eq!(got.len(), MAX_CLAUSES);
        assert!(got[MAX_CLAUSES - 1].ends_with("task number 19 now"));
        let accents = "réserve un hôtel à Paris, réserve un vol pour Rome, é é é é";
        for r in clauses(accents) {
            assert!(accents.is_char_boundary(r.start) && accents.is_char_boundary(r.end));
        }
    }
}
