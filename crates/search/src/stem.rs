//! A light English suffix stemmer in the style of Porter's algorithm.
//!
//! Words are reduced to a shared stem so that `creating`, `created` and `creates`
//! all index as `creat`. Only ASCII lowercase words are touched; anything else
//! (digits, non-Latin scripts) is returned unchanged. Stems are not meant to be
//! shown to people: they only have to agree between documents and queries.

/// Returns the stem of a lowercase word.
pub fn stem(word: &str) -> String {
    if word.len() <= 2 || !word.bytes().all(|c| c.is_ascii_lowercase()) {
        return word.to_string();
    }
    let mut w = Word {
        b: word.as_bytes().to_vec(),
    };
    w.step1a();
    w.step1b();
    w.step1c();
    w.step2();
    w.step3();
    w.step4();
    w.step5();
    // Only ASCII lowercase letters were ever written into the buffer.
    String::from_utf8(w.b).unwrap_or_else(|_| word.to_string())
}

struct Word {
    b: Vec<u8>,
}

impl Word {
    fn is_cons(&self, i: usize) -> bool {
        match self.b[i] {
            b'a' | b'e' | b'i' | b'o' | b'u' => false,
            b'y' => i == 0 || !self.is_cons(i - 1),
            _ => true,
        }
    }

    /// Number of vowel-consonant sequences in `b[..len]`.
    fn measure(&self, len: usize) -> usize {
        let mut m = 0;
        let mut i = 0;
        while i < len && self.is_cons(i) {
            i += 1;
        }
        loop {
            while i < len && !self.is_cons(i) {
                i += 1;
            }
            if i >= len {
                return m;
            }
            while i < len && self.is_cons(i) {
                i += 1;
            }
            m += 1;
            if i >= len {
                return m;
            }
        }
    }

    fn has_vowel(&self, len: usize) -> bool {
        (0..len).any(|i| !self.is_cons(i))
    }

    /// `b[..len]` ends in a doubled consonant.
    fn double_cons(&self, len: usize) -> bool {
        len >= 2 && self.b[len - 1] == self.b[len - 2] && self.is_cons(len - 1)
    }

    /// `b[..len]` ends consonant-vowel-consonant, the last not `w`, `x` or `y`.
    fn cvc(&self, len: usize) -> bool {
        len >= 3
            && self.is_cons(len - 1)
            && !self.is_cons(len - 2)
            && self.is_cons(len - 3)
            && !matches!(self.b[len - 1], b'w' | b'x' | b'y')
    }

    fn ends(&self, suffix: &str) -> bool {
        self.b.ends_with(suffix.as_bytes())
    }

    fn replace(&mut self, suffix_len: usize, with: &str) {
        let keep = self.b.len() - suffix_len;
        self.b.truncate(keep);
        self.b.extend_from_slice(with.as_bytes());
    }

    /// Applies the first rule whose suffix matches, if the stem before it has measure > `min_m`.
    fn rules(&mut self, rules: &[(&str, &str)], min_m: usize) {
        for (suffix, with) in rules {
            if self.ends(suffix) && self.b.len() > suffix.len() {
                let stem_len = self.b.len() - suffix.len();
                if self.measure(stem_len) > min_m {
                    self.replace(suffix.len(), with);
                }
                return;
            }
        }
    }

    fn step1a(&mut self) {
        if self.ends("sses") || self.ends("ies") {
            self.replace(2, "");
        } else if self.ends("ss") || self.ends("us") || self.ends("is") {
            // kept: "class", "status", "analysis"
        } else if self.ends("s") {
            self.replace(1, "");
        }
    }

    fn step1b(&mut self) {
        if self.ends("eed") {
            if self.measure(self.b.len() - 3) > 0 {
                self.replace(1, "");
            }
            return;
        }
        let cut = if self.ends("ed") && self.has_vowel(self.b.len() - 2) {
            2
        } else if self.ends("ing") && self.has_vowel(self.b.len() - 3) {
            3
        } else {
            return;
        };
        self.replace(cut, "");
        if self.ends("at") || self.ends("bl") || self.ends("iz") {
            self.b.push(b'e');
        } else if self.double_cons(self.b.len())
            && !matches!(self.b[self.b.len() - 1], b'l' | b's' | b'z')
        {
            self.b.pop();
        } else if self.measure(self.b.len()) == 1 && self.cvc(self.b.len()) {
            self.b.push(b'e');
        }
    }

    fn step1c(&mut self) {
        if self.ends("y") && self.b.len() > 2 && self.has_vowel(self.b.len() - 1) {
            self.replace(1, "i");
        }
    }

    fn step2(&mut self) {
        const RULES: &[(&str, &str)] = &[
            ("ational", "ate"),
            ("tional", "tion"),
            ("enci", "ence"),
            ("anci", "ance"),
            ("izer", "ize"),
            ("bli", "ble"),
            ("alli", "al"),
            ("entli", "ent"),
            ("eli", "e"),
            ("ousli", "ous"),
            ("ization", "ize"),
            ("ation", "ate"),
            ("ator", "ate"),
            ("alism", "al"),
            ("iveness", "ive"),
            ("fulness", "ful"),
            ("ousness", "ous"),
            ("aliti", "al"),
            ("iviti", "ive"),
            ("biliti", "ble"),
            ("logi", "log"),
        ];
        self.rules(RULES, 0);
    }

    fn step3(&mut self) {
        const RULES: &[(&str, &str)] = &[
            ("icate", "ic"),
            ("ative", ""),
            ("alize", "al"),
            ("iciti", "ic"),
            ("ical", "ic"),
            ("ful", ""),
            ("ness", ""),
        ];
        self.rules(RULES, 0);
    }

    fn step4(&mut self) {
        const SUFFIXES: &[&str] = &[
            "ement", "ance", "ence", "able", "ible", "ment", "ant", "ent", "ion", "ism", "ate",
            "iti", "ous", "ive", "ize", "al", "er", "ic", "ou",
        ];
        for suffix in SUFFIXES {
            if self.ends(suffix) && self.b.len() > suffix.len() {
                let stem_len = self.b.len() - suffix.len();
                let ok = *suffix != "ion" || matches!(self.b[stem_len - 1], b's' | b't');
                if ok && self.measure(stem_len) > 1 {
                    self.replace(suffix.len(), "");
                }
                return;
            }
        }
    }

    fn step5(&mut self) {
        let len = self.b.len();
        if self.ends("e") {
            let m = self.measure(len - 1);
            if m > 1 || (m == 1 && !self.cvc(len - 1)) {
                self.b.pop();
            }
        }
        let len = self.b.len();
        if self.ends("ll") && self.measure(len) > 1 {
            self.b.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stem;

    #[test]
    fn inflections_share_a_stem() {
        for group in [
            &["create", "creates", "created", "creating"][..],
            &["search", "searches", "searched", "searching"],
            &["repository", "repositories"],
            &["connect", "connected", "connection", "connections"],
            &["analyze", "analyzer"],
            &["generalization", "generalize"],
        ] {
            let first = stem(group[0]);
            for w in group {
                assert_eq!(stem(w), first, "{w} vs {}", group[0]);
            }
        }
    }

    #[test]
    fn known_stems() {
        assert_eq!(stem("caresses"), "caress");
        assert_eq!(stem("ponies"), "poni");
        assert_eq!(stem("hopping"), "hop");
        assert_eq!(stem("filing"), "file");
        assert_eq!(stem("relational"), "relat");
        assert_eq!(stem("status"), "status");
        assert_eq!(stem("happy"), "happi");
    }

    #[test]
    fn leaves_short_and_non_ascii_words() {
        assert_eq!(stem("is"), "is");
        assert_eq!(stem("v2"), "v2");
        assert_eq!(stem("搜索"), "搜索");
        assert_eq!(stem("café"), "café");
    }
}
