//! Tools that supply another tool's inputs: a tool's prerequisites.
//!
//! Many APIs take an identifier that only another of their operations returns, and their
//! documentation says so where the parameter is described: "Geo ID of the location retrieved
//! from the Search Location API", "`hotel_id` can be retrieved from `api/v1/hotels/searchHotels`
//! (Search Hotels)", "The departmentId should come from the 'list-departments' tool". A request
//! never names that step ("find hotels in London" does not say "look up London's geo id
//! first"), so a search that finds the hotel search misses the tool the agent must call before
//! it. [`Prerequisites::of`] reads those references once, when an index is built, and
//! [`Prerequisites::follow`] places each ranked tool's prerequisites right after it.
//!
//! A parameter's description refers to another tool in one of three ways:
//! - by its exact name written as one identifier (`Playwright_assert_response`,
//!   `'list-departments'`), wherever it stands;
//! - by all the words of its name as a phrase after one of [`TRIGGERS`] in the same sentence
//!   ("retrieved from … (Search Hotels)" names `Search_Hotels`);
//! - by the last words of its name after a trigger, where the phrase is followed by a word
//!   such as "API" or "endpoint" ([`REFERENCE_NOUNS`]: "extracted from the Search Airport API"
//!   names `SkyScrapperSearchAirport`), or where the parameter holds an identifier (its name
//!   ends in `id`, `code`, `key`, `slug` or `token`: "payment_method_id … looked up from the
//!   order details" names `get_order_details`).
//!
//! A parameter that holds an identifier and whose description names no tool (or that has no
//! description) may still be named by the tool that looks it up: a tool whose name says it
//! finds that identifier ("get" or "find" and the like, then the parameter's words, then the
//! name's end or "by", "for", "from": `artistId` is looked up by `Get_Artist_ID_By_Name`,
//! `user_id` by `find_user_id_by_email`, AWS WAF's `ChangeToken` by `GetChangeToken`) and
//! that does not take it, or anything it names, itself (`get_ssh_key`, which takes an
//! `ssh_key_id`, does not look up an `ssh_key`).
//!
//! Names of one word never count (a description that says "use search" names no tool). In a
//! sentence, the first phrase that is a whole name counts, else the longest ending. Of several
//! tools a reference fits, the one in the consumer's own namespace is taken (a tool in a
//! namespace never takes one from another namespace), then the one whose name shares the
//! longest start with the consumer's (`TripadvisorSearchHotels` takes
//! `TripadvisorSearchLocation`), then one the phrase names whole, then the first in the
//! catalog. Each parameter gives at most one prerequisite, and a tool at most [`PER_TOOL`]. A
//! ranked tool brings its prerequisites and then theirs, [`BROUGHT_PER_HIT`] in all.
//! Nothing is read from requests. The descriptions are scanned once per catalog without
//! allocating per word (all of APIs.guru, 125,000 tools, in a fraction of its index's build).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::index::{split_namespace, Hit, ParamDoc, SearchDoc};
use crate::tokenize::starts_word;

/// Words after which a phrase in a parameter's description may name the tool its value comes
/// from ("retrieved from", "returned by", "obtained using", "see", "call … first").
pub const TRIGGERS: &[&str] = &[
    "from", "by", "using", "via", "use", "call", "calling", "see", "after", "through",
];

/// Words that, right after a phrase, say the phrase names an operation ("the Search Airport
/// API", "the list users endpoint").
pub const REFERENCE_NOUNS: &[&str] = &[
    "api",
    "apis",
    "endpoint",
    "endpoints",
    "tool",
    "tools",
    "operation",
    "operations",
    "method",
    "methods",
    "function",
    "functions",
    "call",
    "calls",
    "service",
    "request",
    "response",
    "result",
    "results",
    "output",
    "query",
    "resource",
];

/// Last words of a parameter's name that say it holds an identifier another call returns.
const IDENTIFIER_WORDS: &[&str] = &["id", "ids", "code", "codes", "key", "keys", "slug", "token"];

/// How many words after a trigger a phrase may start ("retrieved from the Tripadvisor Search
/// Location API" starts one word after it).
const WINDOW: usize = 12;

/// Words that begin a name which looks an identifier up ("Get Artist ID By Name",
/// "find_user_id_by_email", "GetChangeToken").
pub const LOOK_UP_VERBS: &[&str] = &[
    "get", "find", "lookup", "search", "resolve", "fetch", "retrieve",
];

/// Words that may follow the identifier in such a name: what it is looked up by.
const LOOK_UP_BY: &[&str] = &["by", "for", "from"];

/// The longest identifier such a name looks up, in words ("asset family code").
const MAX_LOOKED_UP: usize = 4;

/// The longest phrase looked up, in words.
const MAX_PHRASE: usize = 8;

/// Catalogs of this many tools or more are read on two threads.
pub const SPLIT_FROM: usize = 20_000;

/// Prerequisites kept per tool: a tool whose parameters name more than two other tools is
/// rare, and each one placed in a ranking pushes another result down.
pub const PER_TOOL: usize = 2;

/// Tools a ranked tool brings after it: its prerequisites, then theirs (a hotel's details
/// need a hotel id from the hotel search, whose destination id comes from the destination
/// look-up).
pub const BROUGHT_PER_HIT: usize = 2;

/// For each tool of a catalog, the tools whose results its parameters say they take.
#[derive(Debug, Clone, Default)]
pub struct Prerequisites {
    /// (consumer, provider), ordered by consumer, then by the order the consumer's parameters
    /// name them.
    pairs: Vec<(u32, u32)>,
}

impl Prerequisites {
    /// Reads every parameter description of `docs` for references to other tools of `docs`.
    /// A catalog of [`SPLIT_FROM`] tools or more is read on two threads.
    pub fn of(docs: &[SearchDoc]) -> Self {
        let vocabulary = Vocabulary::new();
        let names = Names::of(docs, &vocabulary);
        let read = |range: std::ops::Range<usize>| {
            let mut words = Vec::new();
            let mut pairs = Vec::new();
            for consumer in range {
                let mut found: Vec<u32> = Vec::new();
                for param in &docs[consumer].params {
                    if found.len() >= PER_TOOL {
                        break;
                    }
                    let provider = names.referred(consumer, param, &vocabulary, &mut words);
                    if let Some(provider) = provider.filter(|p| !found.contains(p)) {
                        found.push(provider);
                    }
                }
                pairs.extend(found.into_iter().map(|p| (consumer as u32, p)));
            }
            pairs
        };
        if docs.len() < SPLIT_FROM {
            return Self {
                pairs: read(0..docs.len()),
            };
        }
        let half = docs.len() / 2;
        let pairs = std::thread::scope(|scope| {
            let second = std::thread::Builder::new()
                .name("prerequisites".into())
                .spawn_scoped(scope, || read(half..docs.len()));
            let mut pairs = read(0..half);
            match second.map(|handle| handle.join()) {
                Ok(Ok(rest)) => pairs.extend(rest),
                // No thread to be had (the process at its limit): the caller reads the rest.
                Err(_) => pairs.extend(read(half..docs.len())),
                Ok(Err(panic)) => std::panic::resume_unwind(panic),
            }
            pairs
        });
        Self { pairs }
    }

    /// Whether no tool of the catalog names another.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// How many (tool, prerequisite) pairs the catalog has.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// The prerequisites of `doc`, in the order its parameters name them.
    pub fn of_tool(&self, doc: usize) -> impl Iterator<Item = usize> + '_ {
        let start = self.pairs.partition_point(|&(c, _)| (c as usize) < doc);
        self.pairs[start..]
            .iter()
            .take_while(move |&&(c, _)| c as usize == doc)
            .map(|&(_, p)| p as usize)
    }

    /// The first `limit` of `ranked` (best first) with each tool's visible prerequisites right
    /// after it, then theirs, [`BROUGHT_PER_HIT`] at most, at its score, unless they rank
    /// above it already. A prerequisite the caller may not see (`visible`) is never added.
    pub fn follow(
        &self,
        ranked: Vec<Hit>,
        limit: usize,
        visible: impl Fn(usize) -> bool,
    ) -> Vec<Hit> {
        if self.pairs.is_empty() {
            let mut ranked = ranked;
            ranked.truncate(limit);
            return ranked;
        }
        let mut out = Vec::with_capacity(limit.min(ranked.len() + PER_TOOL));
        let mut placed = HashSet::with_capacity(out.capacity());
        for hit in ranked {
            if out.len() >= limit {
                break;
            }
            if !placed.insert(hit.doc) {
                continue;
            }
            out.push(hit);
            let from = out.len();
            let mut at = out.len() - 1;
            // Its prerequisites, then theirs, up to BROUGHT_PER_HIT in all.
            while at < out.len() && out.len() < limit && out.len() - from < BROUGHT_PER_HIT {
                let doc = out[at].doc;
                for provider in self.of_tool(doc) {
                    if out.len() >= limit || out.len() - from >= BROUGHT_PER_HIT {
                        break;
                    }
                    if visible(provider) && placed.insert(provider) {
                        out.push(Hit {
                            doc: provider,
                            score: hit.score,
                        });
                    }
                }
                at += 1;
            }
        }
        out
    }
}

/// What a reference can be matched against: each tool's name words and namespace.
struct Names<'a> {
    /// Each tool's name as word keys ([`word_key`]), for the start two names share:
    /// `words[word_start[d]..word_start[d + 1]]`.
    words: Vec<u64>,
    word_start: Vec<u32>,
    namespace: Vec<Option<&'a str>>,
    /// (a whole name written as one identifier ([`identifier_key`]), a tool named so), by key.
    exact: Vec<(u64, u32)>,
    /// Each identifier's key → where its entries lie in `exact`.
    exact_at: HashMap<u64, (u32, u32), BuildHasherDefault<KeyHasher>>,
    /// (the last two or more words of a name ([`phrase_key`]), a tool whose name ends so,
    /// whether the ending is the whole name), by key.
    endings: Vec<(u64, u32, bool)>,
    /// Each ending's key → where its entries lie in `endings`.
    ending_at: HashMap<u64, (u32, u32), BuildHasherDefault<KeyHasher>>,
    /// The first word of every ending, to skip a phrase start at once.
    starts: HashSet<u64, BuildHasherDefault<KeyHasher>>,
    /// Every two words that follow each other in a name ([`phrase_key`] of the two): a
    /// phrase that holds two others stops growing there.
    pairs: HashSet<u64, BuildHasherDefault<KeyHasher>>,
    /// (an identifier's words ([`phrase_key`]), a tool whose name says it looks that
    /// identifier up and which does not take it), by key; see [`looked_up`].
    looked_up: Vec<(u64, u32)>,
    /// Each identifier's key → where its entries lie in `looked_up`.
    looked_up_at: HashMap<u64, (u32, u32), BuildHasherDefault<KeyHasher>>,
}

/// The word keys of the words this module looks for.
struct Vocabulary {
    triggers: Vec<u64>,
    nouns: Vec<u64>,
    identifiers: Vec<u64>,
    look_up_verbs: Vec<u64>,
    look_up_by: Vec<u64>,
}

impl Vocabulary {
    fn new() -> Self {
        let keys = |words: &[&str]| words.iter().map(|w| word_key(w.as_bytes())).collect();
        Self {
            triggers: keys(TRIGGERS),
            nouns: keys(REFERENCE_NOUNS),
            identifiers: keys(IDENTIFIER_WORDS),
            look_up_verbs: keys(LOOK_UP_VERBS),
            look_up_by: keys(LOOK_UP_BY),
        }
    }
}

/// One word of a scanned text.
#[derive(Clone, Copy)]
struct Word {
    key: u64,
    /// The first word of a sentence.
    opens: bool,
}

impl<'a> Names<'a> {
    fn of(docs: &'a [SearchDoc], vocabulary: &Vocabulary) -> Self {
        let mut names = Names {
            words: Vec::new(),
            word_start: Vec::with_capacity(docs.len() + 1),
            namespace: Vec::with_capacity(docs.len()),
            exact: Vec::new(),
            exact_at: HashMap::default(),
            endings: Vec::new(),
            ending_at: HashMap::default(),
            starts: HashSet::default(),
            pairs: HashSet::default(),
            looked_up: Vec::new(),
            looked_up_at: HashMap::default(),
        };
        let mut words = Vec::new();
        let mut keys = Vec::new();
        for (d, doc) in docs.iter().enumerate() {
            let (namespace, rest) = match split_namespace(&doc.path) {
                Some((ns, rest)) => (Some(ns), rest),
                None => (None, doc.path.as_str()),
            };
            names.namespace.push(namespace);
            names.word_start.push(names.words.len() as u32);
            let rest = (!rest.eq_ignore_ascii_case(&doc.name)).then_some(rest.trim());
            let spellings = [Some(doc.name.trim()), rest];
            let mut first = true;
            for spelling in spellings.into_iter().flatten().filter(|s| !s.is_empty()) {
                scan_words(spelling, &mut words);
                keys.clear();
                keys.extend(words.iter().map(|w| w.key));
                if keys.len() >= 2 {
                    names.exact.push((identifier_key(spelling), d as u32));
                }
                for pair in keys.windows(2) {
                    names.pairs.insert(phrase_key(pair));
                }
                for k in 2..=keys.len().min(MAX_PHRASE) {
                    let ending = &keys[keys.len() - k..];
                    names
                        .endings
                        .push((phrase_key(ending), d as u32, k == keys.len()));
                    names.starts.insert(ending[0]);
                }
                if std::mem::take(&mut first) {
                    names.words.extend_from_slice(&keys);
                    for ids in looked_up(&keys, doc, vocabulary, &mut words) {
                        names.looked_up.push((ids, d as u32));
                    }
                }
            }
        }
        names.word_start.push(names.words.len() as u32);
        names.exact.sort_unstable();
        names.exact.dedup();
        // A tool whose two spellings end alike is listed once, as named whole if either is.
        names
            .endings
            .sort_unstable_by_key(|&(key, d, whole)| (key, d, !whole));
        names.endings.dedup_by_key(|&mut (key, d, _)| (key, d));
        names.ending_at = ranges(&names.endings, |e| e.0);
        names.exact_at = ranges(&names.exact, |e| e.0);
        names.looked_up.sort_unstable();
        names.looked_up.dedup();
        names.looked_up_at = ranges(&names.looked_up, |e| e.0);
        names
    }

    /// Tool `d`'s name words.
    fn name_words(&self, d: usize) -> &[u64] {
        &self.words[self.word_start[d] as usize..self.word_start[d + 1] as usize]
    }

    /// The tool `consumer`'s parameter names in its description, if any ([`Prerequisites`]'
    /// module docs say how).
    fn referred(
        &self,
        consumer: usize,
        param: &ParamDoc,
        vocabulary: &Vocabulary,
        words: &mut Vec<Word>,
    ) -> Option<u32> {
        let description = param.description.as_str();
        if description.is_empty() && self.looked_up.is_empty() {
            return None;
        }
        for token in compound_identifiers(description) {
            let Some(&(at, len)) = self.exact_at.get(&identifier_key(token)) else {
                continue;
            };
            let tools = &self.exact[at as usize..(at + len) as usize];
            if let Some((p, _)) = self.pick(consumer, tools.iter().map(|&(_, t)| (t, true))) {
                return Some(p);
            }
        }
        scan_words(&param.name, words);
        let holds_identifier = words
            .last()
            .is_some_and(|w| vocabulary.identifiers.contains(&w.key));
        // The identifier a parameter's name of two words or more holds, as a phrase's key.
        let identifier = (holds_identifier && words.len() >= 2 && !self.looked_up.is_empty())
            .then(|| words_key(words));
        scan_words(description, words);
        self.phrase_in(consumer, words, vocabulary, holds_identifier)
            .or_else(|| identifier.and_then(|key| self.looked_up_by(consumer, key)))
    }

    /// The tool whose name says it looks up the identifier whose words' [`phrase_key`] is
    /// `identifier` (a parameter's name of two words or more ending in an identifier word), as
    /// [`Names::pick`] chooses. Outside namespaces, where tools of many APIs may stand side by
    /// side, only a tool whose name begins as the consumer's does (`Spotify_Get_Artist_ID_By_Name`
    /// for `Spotify_Get_Artist_Overview`): nothing else says the two belong together.
    fn looked_up_by(&self, consumer: usize, identifier: u64) -> Option<u32> {
        let &(at, len) = self.looked_up_at.get(&identifier)?;
        let tools = &self.looked_up[at as usize..(at + len) as usize];
        let first = self.name_words(consumer).first();
        let related = |t: u32| {
            self.namespace[consumer].is_some()
                || first.is_some_and(|w| self.name_words(t as usize).first() == Some(w))
        };
        let tools = tools.iter().filter(|&&(_, t)| related(t));
        self.pick(consumer, tools.map(|&(_, t)| (t, true)))
            .map(|(p, _)| p)
    }

    /// The tool a phrase after a trigger word names: the first one named whole, else the one
    /// whose ending matches the most words (where an ending may count). "`hotel_id` can be
    /// retrieved from `api/v1/hotels/searchHotels` (Search Hotels) or (Search Hotels By
    /// Coordinates)" names `Search_Hotels`; "from `api/v1/attraction/searchLocation` (Search
    /// Attraction Location)" names `Search_Attraction_Location`, not a tool whose name merely
    /// ends in "Search Location".
    fn phrase_in(
        &self,
        consumer: usize,
        words: &[Word],
        vocabulary: &Vocabulary,
        holds_identifier: bool,
    ) -> Option<u32> {
        // The word after which a trigger's window closes, or `None` outside any.
        let mut open_until: Option<usize> = None;
        let mut longest: Option<(usize, u32)> = None;
        for start in 0..words.len() {
            if words[start].opens {
                open_until = None;
            }
            let in_window = open_until.is_some_and(|end| start <= end);
            if vocabulary.triggers.contains(&words[start].key) {
                open_until = Some(start + WINDOW);
            }
            if !in_window || !self.starts.contains(&words[start].key) {
                continue;
            }
            // The best phrase from this start: one naming a tool whole, else the longest.
            let mut key = phrase_key(&[words[start].key]);
            let mut best: Option<(usize, u32, bool)> = None;
            let following = &words[start + 1..words.len().min(start + MAX_PHRASE)];
            let mut previous = words[start].key;
            for (i, word) in following.iter().enumerate() {
                if word.opens || !self.pairs.contains(&phrase_key(&[previous, word.key])) {
                    break;
                }
                previous = word.key;
                key = extend_key(key, word.key);
                let Some(&(at, len)) = self.ending_at.get(&key) else {
                    continue;
                };
                let tools = &self.endings[at as usize..(at + len) as usize];
                let tools = tools.iter().map(|&(_, t, whole)| (t, whole));
                if let Some((p, whole)) = self.pick(consumer, tools) {
                    if best.is_none_or(|b| (whole, i + 2) > (b.2, b.0)) {
                        best = Some((i + 2, p, whole));
                    }
                }
            }
            let Some((len, p, whole)) = best else {
                continue;
            };
            if whole {
                return Some(p);
            }
            let named = words
                .get(start + len)
                .is_some_and(|w| !w.opens && vocabulary.nouns.contains(&w.key));
            if (named || holds_identifier) && longest.is_none_or(|(n, _)| len > n) {
                longest = Some((len, p));
            }
        }
        longest.map(|(_, p)| p)
    }

    /// Of the tools a reference fits (each with whether the reference names it whole), the
    /// one `consumer` means (see the module's docs), and whether it was named whole.
    fn pick(
        &self,
        consumer: usize,
        tools: impl Iterator<Item = (u32, bool)>,
    ) -> Option<(u32, bool)> {
        let own = self.namespace[consumer];
        let shared_start = |t: u32| {
            let (a, b) = (self.name_words(consumer), self.name_words(t as usize));
            a.iter().zip(b).take_while(|(x, y)| x == y).count()
        };
        tools
            .filter(|&(t, _)| {
                let t = t as usize;
                t != consumer
                    && match own {
                        Some(ns) => self.namespace[t] == Some(ns),
                        None => self.namespace[t].is_none(),
                    }
            })
            .max_by_key(|&(t, whole)| (shared_start(t), whole, std::cmp::Reverse(t)))
    }
}

/// The identifiers (each as its words' [`phrase_key`]) that the tool `doc`, whose name's words
/// are `keys`, looks up: after a word of [`LOOK_UP_VERBS`], two to [`MAX_LOOKED_UP`] words
/// ending in an identifier word ([`IDENTIFIER_WORDS`]) that end the name or come before a word
/// of [`LOOK_UP_BY`] (`Get Artist ID By Name` looks up an "artist id";
/// `get_workspace_by_connection_id`, whose identifier follows "by", looks up none), unless one
/// of the tool's parameters begins with those words: a tool that needs the identifier, or
/// anything it names, first does not look it up (`get_ssh_key` takes an `ssh_key_id`).
/// `words` is scratch space.
fn looked_up(
    keys: &[u64],
    doc: &SearchDoc,
    vocabulary: &Vocabulary,
    words: &mut Vec<Word>,
) -> Vec<u64> {
    let mut found = Vec::new();
    for start in 1..keys.len() {
        if !vocabulary.look_up_verbs.contains(&keys[start - 1]) {
            continue;
        }
        for end in start + 1..keys.len().min(start + MAX_LOOKED_UP) {
            let closes = keys
                .get(end + 1)
                .is_none_or(|k| vocabulary.look_up_by.contains(k));
            if vocabulary.identifiers.contains(&keys[end]) && closes {
                found.push(&keys[start..=end]);
            }
        }
    }
    if found.is_empty() {
        return Vec::new();
    }
    let mut taken: Vec<Vec<u64>> = Vec::with_capacity(doc.params.len());
    for param in &doc.params {
        scan_words(&param.name, words);
        taken.push(words.iter().map(|w| w.key).collect());
    }
    found
        .into_iter()
        .filter(|ids| !taken.iter().any(|t| t.starts_with(ids)))
        .map(phrase_key)
        .collect()
}

/// For a list sorted by key, each key's range in it.
fn ranges<T>(
    list: &[T],
    key: impl Fn(&T) -> u64,
) -> HashMap<u64, (u32, u32), BuildHasherDefault<KeyHasher>> {
    let mut at = 0;
    let mut out = HashMap::default();
    for run in list.chunk_by(|a, b| key(a) == key(b)) {
        out.insert(key(&run[0]), (at as u32, run.len() as u32));
        at += run.len();
    }
    out
}

/// Scans `text` into `out` (cleared first): its words as [`crate::tokenize::split_words`]
/// cuts them (at anything not a letter or digit, and where [`starts_word`] says), keyed by their lowercase spelling, a
/// possessive "'s" left out, each marked when it opens a sentence (after `.`, `;`, `!` or `?`
/// followed by white space, or after a line break). Letters outside ASCII cut words here: the
/// names this module matches are identifiers.
fn scan_words(text: &str, out: &mut Vec<Word>) {
    out.clear();
    let bytes = text.as_bytes();
    let mut opens = true;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !b.is_ascii_alphanumeric() {
            let stop = matches!(b, b'.' | b';' | b'!' | b'?')
                && bytes.get(i + 1).is_some_and(u8::is_ascii_whitespace);
            opens |= stop || b == b'\n';
            // "Tripadvisor's": the "s" after an apostrophe is no word.
            if b == b'\''
                && bytes.get(i + 1).is_some_and(|&c| c == b's')
                && !bytes.get(i + 2).is_some_and(u8::is_ascii_alphanumeric)
            {
                i += 2;
                continue;
            }
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        while end < bytes.len()
            && bytes[end].is_ascii_alphanumeric()
            && !starts_word(
                char::from(bytes[end - 1]),
                char::from(bytes[end]),
                // The run's next character, as the index's tokenizer sees it.
                bytes
                    .get(end + 1)
                    .filter(|b| b.is_ascii_alphanumeric())
                    .map(|&b| char::from(b)),
            )
        {
            end += 1;
        }
        out.push(Word {
            key: word_key(&bytes[start..end]),
            opens,
        });
        opens = false;
        i = end;
    }
}

/// The identifiers of `text` that could be a name of two words or more written as one
/// (`list-departments`, `Search_Hotels`, `getOrderDetails`): runs of ASCII letters, digits and
/// `_ - . : /`, without those marks at either end, holding one of them inside or a lowercase
/// letter followed by a capital.
fn compound_identifiers(text: &str) -> impl Iterator<Item = &str> {
    let is_mark = |b: u8| matches!(b, b'_' | b'-' | b'.' | b':' | b'/');
    text.as_bytes()
        .split(move |&b| !(b.is_ascii_alphanumeric() || is_mark(b)))
        .filter_map(move |token| {
            let start = token.iter().position(|&b| !is_mark(b))?;
            let end = token.iter().rposition(|&b| !is_mark(b))? + 1;
            let token = &token[start..end];
            let compound = token.iter().any(|&b| is_mark(b))
                || token
                    .windows(2)
                    .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
            // ASCII only, so the bytes are a str slice.
            compound.then(|| std::str::from_utf8(token).ok()).flatten()
        })
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// A word's key: FNV-1a over its lowercase bytes.
fn word_key(word: &[u8]) -> u64 {
    word.iter().fold(FNV_OFFSET, |h, &b| {
        (h ^ u64::from(b.to_ascii_lowercase())).wrapping_mul(FNV_PRIME)
    })
}

/// A name written as one identifier, case aside ("list-departments", "Search_Hotels").
fn identifier_key(text: &str) -> u64 {
    word_key(text.as_bytes())
}

/// A run of words' key, from their word keys.
fn phrase_key(words: &[u64]) -> u64 {
    words.iter().fold(FNV_OFFSET, |h, &w| extend_key(h, w))
}

/// [`phrase_key`] of scanned words.
fn words_key(words: &[Word]) -> u64 {
    words.iter().fold(FNV_OFFSET, |h, w| extend_key(h, w.key))
}

/// The key of a phrase one word longer.
fn extend_key(key: u64, word: u64) -> u64 {
    (key ^ word).wrapping_mul(FNV_PRIME).rotate_left(23)
}

/// Keys that are hashes already are their own hash.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::ParamDoc;

    fn tool(path: &str, description: &str, params: &[(&str, &str)]) -> SearchDoc {
        SearchDoc {
            path: path.into(),
            name: path.rsplit('.').next().unwrap().into(),
            description: description.into(),
            params: params
                .iter()
                .map(|(name, description)| ParamDoc {
                    name: (*name).into(),
                    description: (*description).into(),
                    ..ParamDoc::default()
                })
                .collect(),
        }
    }

    fn named(prerequisites: &Prerequisites, docs: &[SearchDoc], doc: usize) -> Vec<String> {
        prerequisites
            .of_tool(doc)
            .map(|p| docs[p].name.clone())
            .collect()
    }

    #[test]
    fn a_parameter_that_says_where_its_value_comes_from_names_that_tool() {
        let docs = [
            tool(
                "TripadvisorSearchHotels",
                "Retrieves available hotels in a given location.",
                &[
                    (
                        "geoId",
                        "Geo ID of the location retrieved from the Search Location API.",
                    ),
                    ("checkIn", "Check-in date. Format: YYYY-MM-DD"),
                ],
            ),
            tool("TripadvisorSearchLocation", "Search for locations.", &[]),
            tool(
                "OtherSearchLocation",
                "Search for locations elsewhere.",
                &[],
            ),
            tool(
                "search-museum-objects",
                "Search the collection.",
                &[(
                    "departmentId",
                    "Objects of one department. The departmentId should come from the \
                     'list-departments' tool.",
                )],
            ),
            tool("list-departments", "List the departments.", &[]),
            tool(
                "Get_Hotel_Policies",
                "Policies of a hotel.",
                &[(
                    "hotel_id",
                    "`hotel_id` can be retrieved from `api/v1/hotels/searchHotels`**(Search \
                     Hotels)** or `api/v1/hotels/searchHotelsByCoordinates`.",
                )],
            ),
            tool("Search_Hotels", "Search hotels.", &[]),
        ];
        let prerequisites = Prerequisites::of(&docs);
        // The phrase "Search Location" ends two names; the one sharing the consumer's first
        // word is meant.
        assert_eq!(
            named(&prerequisites, &docs, 0),
            ["TripadvisorSearchLocation"]
        );
        assert_eq!(named(&prerequisites, &docs, 3), ["list-departments"]);
        assert_eq!(named(&prerequisites, &docs, 5), ["Search_Hotels"]);
        for doc in [1, 2, 4, 6] {
            assert!(named(&prerequisites, &docs, doc).is_empty(), "{doc}");
        }
        assert_eq!(prerequisites.len(), 3);
    }

    #[test]
    fn an_identifier_no_description_places_is_looked_up_by_the_tool_named_for_it() {
        let docs = [
            tool(
                "Spotify_Get_Artist_Overview",
                "Overview of an artist.",
                &[("artistId", "Unique Spotify ID of the artist.")],
            ),
            tool(
                "Spotify_Get_Artist_ID_By_Name",
                "The artist's id.",
                &[("name", "")],
            ),
            tool("Other_Get_Artist_ID_By_Name", "Elsewhere.", &[]),
            // Takes the key's id: it does not look up an ssh key.
            tool("get_ssh_key", "One key.", &[("ssh_key_id", "")]),
            tool(
                "add_ssh_key",
                "Adds a key.",
                &[("ssh_key", "The public key.")],
            ),
            // The identifier follows "by": the tool takes it.
            tool("get_workspace_by_connection_id", "A workspace.", &[]),
            tool("list_connections", "Lists.", &[("connectionId", "")]),
            // One word is no identifier's name, and a description that names a tool wins.
            tool("get_id", "An id.", &[]),
            tool("remove", "Removes.", &[("id", "")]),
            tool(
                "find_user_id_by_email",
                "Finds a user id.",
                &[("email", "")],
            ),
            tool(
                "get_user_details",
                "A user.",
                &[("user_id", "Taken from Spotify_Get_Artist_Overview.")],
            ),
            tool("modify_user", "Changes a user.", &[("user_id", "")]),
            tool("shop.edit_user", "Changes a user.", &[("user_id", "")]),
            tool("shop.find_user_id_by_name", "Finds a user id.", &[]),
        ];
        let prerequisites = Prerequisites::of(&docs);
        // Of two tools that look it up outside namespaces, the one whose name begins as the
        // consumer's.
        assert_eq!(
            named(&prerequisites, &docs, 0),
            ["Spotify_Get_Artist_ID_By_Name"]
        );
        assert_eq!(
            named(&prerequisites, &docs, 10),
            ["Spotify_Get_Artist_Overview"]
        );
        // Outside namespaces a tool of another name's family is not taken; within one
        // namespace it is.
        assert!(named(&prerequisites, &docs, 11).is_empty());
        assert_eq!(named(&prerequisites, &docs, 12), ["find_user_id_by_name"]);
        for doc in [1, 2, 3, 4, 5, 6, 7, 8, 9] {
            assert!(named(&prerequisites, &docs, doc).is_empty(), "{doc}");
        }
    }

    #[test]
    fn a_phrase_counts_only_after_a_trigger_and_a_name_of_one_word_never() {
        let docs = [
            tool(
                "hotels.book",
                "Book a room.",
                &[
                    // "search location" without a word saying the value comes from it.
                    ("area", "The search location of the stay."),
                    // A one-word name written whole is too common a word to be a reference.
                    ("kind", "Use search to find it."),
                ],
            ),
            tool("hotels.search_location", "Find a location.", &[]),
            tool("hotels.search", "Search hotels.", &[]),
        ];
        let prerequisites = Prerequisites::of(&docs);
        assert!(prerequisites.is_empty(), "{:?}", prerequisites.pairs);
    }

    #[test]
    fn a_namespaced_tool_takes_its_prerequisites_from_its_own_namespace_only() {
        let docs = [
            tool(
                "shop.modify_order",
                "Modify an order.",
                &[("item_ids", "Item ids, looked up from the order details.")],
            ),
            tool("other.get_order_details", "Order details elsewhere.", &[]),
            tool(
                "crm.update_contact",
                "Update a contact.",
                &[(
                    "contact_id",
                    "Id returned by crm.find_contact or by get_order_details.",
                )],
            ),
            tool("crm.find_contact", "Find a contact.", &[]),
        ];
        let prerequisites = Prerequisites::of(&docs);
        assert!(named(&prerequisites, &docs, 0).is_empty());
        assert_eq!(named(&prerequisites, &docs, 2), ["find_contact"]);
    }

    #[test]
    fn a_tool_never_names_itself_and_keeps_at_most_two() {
        let docs = [
            tool(
                "api.get_report",
                "A report.",
                &[
                    (
                        "cursor",
                        "The cursor returned by the previous get_report call.",
                    ),
                    ("a", "From list_accounts."),
                    ("b", "From list_regions."),
                    ("c", "From list_teams."),
                ],
            ),
            tool("api.list_accounts", "", &[]),
            tool("api.list_regions", "", &[]),
            tool("api.list_teams", "", &[]),
        ];
        let prerequisites = Prerequisites::of(&docs);
        assert_eq!(
            named(&prerequisites, &docs, 0),
            ["list_accounts", "list_regions"]
        );
    }

    #[test]
    fn a_ranked_tool_is_followed_by_its_visible_prerequisites() {
        let docs = [
            tool(
                "t.search_hotels",
                "",
                &[
                    ("geo", "Taken from search_location."),
                    ("x", "From get_currency."),
                ],
            ),
            tool("t.search_location", "", &[]),
            tool("t.get_currency", "", &[]),
            tool("t.weather", "", &[]),
            tool("t.news", "", &[]),
        ];
        let prerequisites = Prerequisites::of(&docs);
        let hit = |doc, score| Hit { doc, score };
        let ranked = vec![hit(3, 3.0), hit(0, 2.0), hit(4, 1.5), hit(1, 1.0)];
        let docs_of = |hits: Vec<Hit>| hits.iter().map(|h| h.doc).collect::<Vec<_>>();

        let all = prerequisites.follow(ranked.clone(), 10, |_| true);
        assert_eq!(docs_of(all.clone()), [3, 0, 1, 2, 4]);
        assert_eq!(
            all[2].score, 2.0,
            "a prerequisite takes its consumer's score"
        );

        // Cut at the limit; a prerequisite the caller cannot see is not added.
        let cut = prerequisites.follow(ranked.clone(), 3, |d| d != 1);
        assert_eq!(docs_of(cut), [3, 0, 2]);

        // A prerequisite's own prerequisite comes next, within the two a hit brings.
        let chain = [
            tool("b.details", "", &[("hotel_id", "From search_hotels.")]),
            tool(
                "b.search_hotels",
                "",
                &[("dest_id", "From search_destination.")],
            ),
            tool("b.search_destination", "", &[]),
            tool("b.other", "", &[]),
        ];
        let chained = Prerequisites::of(&chain);
        let chain_ranked = vec![hit(0, 2.0), hit(3, 1.0)];
        let brought = chained.follow(chain_ranked.clone(), 10, |_| true);
        assert_eq!(docs_of(brought), [0, 1, 2, 3]);
        let hidden_middle = chained.follow(chain_ranked, 10, |d| d != 1);
        assert_eq!(
            docs_of(hidden_middle),
            [0, 3],
            "nothing is reached through a hidden tool"
        );

        // A catalog without references changes nothing but the length.
        let none = Prerequisites::default().follow(ranked, 2, |_| true);
        assert_eq!(docs_of(none), [3, 0]);
    }

    #[test]
    fn words_are_cut_as_the_index_cuts_them_and_sentences_are_marked() {
        let mut words = Vec::new();
        scan_words(
            "Tripadvisor's searchHotels v1.2 HTTPServer. Then; more\nend API.",
            &mut words,
        );
        let expected = [
            "tripadvisor",
            "search",
            "hotels",
            "v",
            "1",
            "2",
            "http",
            "server",
            "then",
            "more",
            "end",
            "api",
        ];
        let keys: Vec<u64> = expected.iter().map(|w| word_key(w.as_bytes())).collect();
        assert_eq!(words.iter().map(|w| w.key).collect::<Vec<_>>(), keys);
        let opens: Vec<bool> = words.iter().map(|w| w.opens).collect();
        assert_eq!(
            opens,
            [true, false, false, false, false, false, false, false, true, true, true, false]
        );
        // The same words split by the index's tokenizer.
        let split = crate::tokenize::split_words("searchHotels HTTPServer v1 API");
        assert_eq!(
            split,
            ["search", "hotels", "http", "server", "v", "1", "api"]
        );
    }
}
