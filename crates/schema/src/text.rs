//! Short text helpers: one-line descriptions and compact JSON values.

use serde_json::Value;

/// Longest description kept for a field, in characters.
pub const FIELD_DESCRIPTION_CHARS: usize = 48;
/// Longest description kept for a tool header, in characters.
pub const TOOL_DESCRIPTION_CHARS: usize = 200;

/// The first sentence of `text` on one line, cut at `max` characters (with `…`).
pub fn first_sentence(text: &str, max: usize) -> String {
    let text = text.trim();
    let mut end = text.len();
    for (i, c) in text.char_indices() {
        if c == '\n' && i > 0 {
            end = i;
            break;
        }
        if matches!(c, '.' | '!' | '?' | '。') {
            let next = text[i + c.len_utf8()..].chars().next();
            let abbreviation = ["e.g", "i.e", "etc", "vs"]
                .iter()
                .any(|a| text[..i].ends_with(a));
            if next.is_none_or(char::is_whitespace) && !abbreviation {
                end = i + if c == '.' { 0 } else { c.len_utf8() };
                break;
            }
        }
    }
    let line: String = text[..end].split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max).collect();
    if let Some(space) = cut.rfind(' ') {
        if space > max / 2 {
            cut.truncate(space);
        }
    }
    cut.push('…');
    cut
}

/// Field descriptions longer than this are cut at their first clause boundary.
const CLAUSE_CHARS: usize = 32;

/// A field description for the schema text: the first sentence without markdown
/// link targets, parenthesised asides or a leading article, cut at its first
/// clause when long, then at `max` characters. Descriptions carry no
/// constraint (those are rendered from the schema), so only wording is lost.
pub fn field_description(text: &str, max: usize) -> String {
    let text = strip_asides(&strip_link_targets(text));
    let text = text.trim_start();
    let text = ["The ", "A ", "An "]
        .iter()
        .find_map(|a| text.strip_prefix(a))
        .map(capitalise)
        .unwrap_or_else(|| text.to_string());
    let sentence = first_sentence(&text, max);
    let sentence = sentence.strip_suffix('…').unwrap_or(&sentence).to_string();
    if sentence.chars().count() <= CLAUSE_CHARS {
        return sentence;
    }
    let min = CLAUSE_CHARS / 2;
    let cut = [", ", "; ", " - ", ": ", " — "]
        .iter()
        .filter_map(|sep| {
            sentence
                .char_indices()
                .filter(|(i, _)| sentence[*i..].starts_with(sep))
                .map(|(i, _)| i)
                .find(|i| sentence[..*i].chars().count() >= min)
        })
        .min();
    match cut {
        Some(i) => sentence[..i].to_string(),
        None => sentence,
    }
}

/// Removes `(…)` asides (not nested, not at the start) from a description.
fn strip_asides(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let Some(len) = rest[open..].find(')') else {
            break;
        };
        let inner = &rest[open + 1..open + len];
        if open == 0 || inner.contains('(') {
            out.push_str(&rest[..open + 1]);
            rest = &rest[open + 1..];
            continue;
        }
        out.push_str(rest[..open].trim_end_matches(' '));
        rest = &rest[open + len + 1..];
    }
    out.push_str(rest);
    out
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `[label](target)` → `label`.
fn strip_link_targets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find("](") else {
            break;
        };
        let label = &after[..close];
        let target = &after[close + 2..];
        match target.find(')') {
            Some(end)
                if !label.contains(['[', ']']) && !target[..end].contains(char::is_whitespace) =>
            {
                out.push_str(&rest[..open]);
                out.push_str(label);
                rest = &target[end + 1..];
            }
            _ => {
                out.push_str(&rest[..open + 1]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A JSON value in its compact form.
pub fn compact(value: &Value) -> String {
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_the_first_sentence() {
        assert_eq!(
            first_sentence("Lists issues. Paginated by default.", 100),
            "Lists issues"
        );
        assert_eq!(
            first_sentence("Version 1.2 of the API", 100),
            "Version 1.2 of the API"
        );
        assert_eq!(first_sentence("  one\n two", 100), "one");
        assert_eq!(first_sentence("Really? Yes.", 100), "Really?");
    }

    #[test]
    fn caps_length_at_a_word() {
        let long = "alpha beta gamma delta epsilon zeta eta theta";
        let cut = first_sentence(long, 20);
        assert!(cut.ends_with('…'));
        assert!(cut.chars().count() <= 21);
        assert!(long.starts_with(cut.trim_end_matches('…')));
    }

    #[test]
    fn field_descriptions_drop_link_targets_and_articles() {
        assert_eq!(
            field_description("The [Link header](https://x.y/z) cursor. More.", 60),
            "Link header cursor"
        );
        assert_eq!(field_description("An owner", 60), "Owner");
        assert_eq!(field_description("a[0](b c) d", 60), "a[0] d");
        assert_eq!(field_description("Theory", 60), "Theory");
        assert_eq!(
            field_description("Number of results (1-20, default 10).", 60),
            "Number of results"
        );
        assert_eq!(
            field_description(
                "Search query to match against entity names, types, and more",
                60
            ),
            "Search query to match against entity names"
        );
        assert_eq!(
            field_description("Key to press, e.g. Enter or Tab", 60),
            "Key to press, e.g. Enter or Tab"
        );
    }

    #[test]
    fn compact_json() {
        assert_eq!(compact(&json!({"a": [1, "b"]})), r#"{"a":[1,"b"]}"#);
    }
}
