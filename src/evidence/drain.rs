//! Online log-template mining: variable masking + Drain.
//!
//! Drain: P. He, J. Zhu, Z. Zheng, M. R. Lyu, "Drain: An Online Log Parsing Approach with Fixed
//! Depth Tree", ICWS 2017. A message is split into tokens; the tree routes it by token count, then
//! by its first `depth - 2` tokens (a node with `max_children` children sends new tokens to `<*>`);
//! the leaf holds log groups and the message joins the most similar group when `similar tokens /
//! token count >= sim_threshold`, turning the differing positions into `<*>`; otherwise it starts
//! a new group. Two steps of the Drain family are added (both can be turned off in
//! [`DrainConfig`] for ablation):
//! - *variable depth*: a token holding a variable makes no tree layer, so a message is routed by
//!   its first constant tokens and leaves sit at the depth the message allows (plain Drain sends
//!   such tokens to one `<*>` child, where unrelated messages that start with a number meet);
//! - *template merging*: when a template generalises, groups of the same length whose templates
//!   became compatible (equal, or `<*>` on one side, at every position) are merged, so an event
//!   split early by two dissimilar first messages is joined again (the merge step of the Drain
//!   journal version and of Drain3).
//!
//! The masks follow the preprocessing that Zhu et al. ("Tools and Benchmarks for Automated Log
//! Parsing", ICSE-SEIP 2019) and Jiang et al. (Loghub-2.0, "A Large-scale Evaluation for Log
//! Parsing Techniques", ISSTA 2024) give every parser, written as generic rules instead of
//! per-system regexes (hand-written, no regex, one table lookup per byte to find tokens):
//! - a token whose core (outer brackets/quotes/trailing punctuation removed) contains a digit and
//!   only the characters `[A-Za-z0-9._:/+#,%-]` becomes `<*>`: numbers with or without units
//!   (`12ms`, `95%`), IPv4/IPv6, host:port, times, dates, UUIDs, hex ids, versions, block ids,
//!   paths with digits (but letters followed by a single digit, like `ssh2` or `jk2`, are names
//!   and stay, also inside a longer token);
//! - `[v6 address]:port` becomes `<*>`, a bracketed address alone `[<*>]`;
//! - a URL (`scheme://…`) or an absolute path with two or more `/` becomes `<*>`, digits or not;
//! - a dotted host name (>= 2 dots, lower-case labels) becomes `<*>`;
//! - a quoted value becomes `"<*>"` (one token even when it spans words, so `request: "GET /a
//!   HTTP/1.1"` keeps one token count), but a quoted key (`{"method":`) stays;
//! - `key=value`: the value is masked by the same rules, the key is kept (`uid=<*>`);
//! - a timestamp inside the message, in any layout [`super::time::scan_stamp`] knows, is one
//!   `<*>` however many words it takes (`at Fri Jun 17 07:07:00 2005` → `at <*>`);
//! - other tokens with digits keep their punctuation skeleton and mask each alphanumeric run
//!   holding a digit (`SSH(uid=0)` → `SSH(uid=<*>)`).
//!
//! Our additions to plain Drain (generic, not tuned per data set):
//! - two *different* partially masked tokens (`SSH(uid=<*>)` vs `(uid=<*>)`) come from different
//!   format strings, so a group never absorbs a message that differs there;
//! - when two tokens differ, the template keeps what they share around the difference (`(<*>)`,
//!   `<*>:`, `key=<*>]`) instead of a bare `<*>`;
//! - similarity counts a `<*>` template position as a match only when the message also holds a
//!   masked variable there;
//! - [`Tokens::hash`] feeds an exact-match cache in the caller: a masked message seen before skips
//!   the tree.
//! - a quoted HTTP request line that is the message's own text keeps its method and route words,
//!   its path ids (by shape) and version masked (`"GET /v2/<*>/servers/detail HTTP/<*>"`), while
//!   one that is the value of a `key:`/`key=` field stays a parameter (`request: "<*>"`); see
//!   [`request`];
//! - a compound identifier glued from word and digit runs (`broadcast_5_piece0@host`) is one
//!   `<*>` inside a longer token, whatever its runs hold;
//! - two plain words at one position are two variants (two format strings: `stored as values` /
//!   `stored as bytes`) until [`WORD_CATEGORICAL_MAX`] distinct words make it a variable;
//! - each of these can be turned off ([`MaskOptions`], [`DrainConfig::categorical_words`]).
//!
//! Masking, request lines, sibling merging, token comparison and the tests are in `drain/`.

use std::collections::HashMap;

mod mask;
mod request;
mod siblings;
mod similar;

use mask::F_WILD;
pub use mask::{F_MASKED, MaskOptions, Tokens};
use similar::{compatible, key_wild, matches_key_wild, plain_words, same_key, similarity};

/// Hasher for keys that are already hashes (the exact-match cache): passes the `u64` through.
#[derive(Clone, Copy, Debug, Default)]
pub struct BuildIdHash;

/// See [`BuildIdHash`].
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

impl std::hash::BuildHasher for BuildIdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

/// Template token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TTok {
    /// Variable position `<*>`.
    Wild,
    /// Constant text (may contain `<*>` fragments from masking).
    Lit(Box<str>),
    /// Categorical position: fewer than [`CATEGORICAL_MAX`] distinct literal values seen so far;
    /// each value defines a separate variant (template).
    Cat(Vec<Box<str>>),
}

/// Distinct values a `key=value` position may take before it becomes a variable: a field seen
/// with fewer values is an enumeration (e.g. `user=root` / `user=guest`, `state=open`) and splits
/// the group into variants; other differing tokens become `<*>` at once, as in Drain.
pub const CATEGORICAL_MAX: usize = 4;
/// Distinct plain words a position may take before it becomes a variable (see
/// [`DrainConfig::categorical_words`]): two words are a choice between two format strings
/// (`stored as values` / `stored as bytes`), a third makes the word data (a user name).
pub const WORD_CATEGORICAL_MAX: usize = 3;
const NO_VALUE: u8 = u8::MAX;

/// A log group (Drain's "log group"); its lines are split into variants by categorical positions.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// Template tokens.
    pub tokens: Vec<TTok>,
    variants: HashMap<Box<[u8]>, u32>,
    /// The group this one was merged into (itself while alive).
    into: u32,
}

impl Cluster {
    /// Template text of the whole group (categorical positions shown as `<*>`).
    pub fn template(&self) -> String {
        render(&self.tokens, None)
    }
}

fn render(tokens: &[TTok], key: Option<&[u8]>) -> String {
    let mut s = String::new();
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        match t {
            TTok::Wild => s.push_str("<*>"),
            TTok::Lit(l) => s.push_str(l),
            TTok::Cat(vals) => match key.map(|k| k[i]) {
                Some(v) if (v as usize) < vals.len() => s.push_str(&vals[v as usize]),
                _ => s.push_str("<*>"),
            },
        }
    }
    s
}

#[derive(Default, Debug)]
struct Node {
    children: HashMap<Box<str>, Node>,
    clusters: Vec<u32>,
}

/// Drain parameters.
#[derive(Clone, Copy, Debug)]
pub struct DrainConfig {
    /// Tree depth (paper: 4 → two prefix-token layers).
    pub depth: usize,
    /// Similarity threshold `st` in [0, 1].
    pub sim_threshold: f64,
    /// Maximum children per internal node.
    pub max_children: usize,
    /// Maximum number of templates (variants) ever created; unmatched messages beyond it are
    /// counted as overflow.
    pub max_clusters: usize,
    /// Variable depth: a token holding a variable does not make a tree layer (the message is
    /// routed by its first `depth - 2` *constant* tokens, so the depth of a leaf varies with the
    /// message) instead of going to a `<*>` child as in Drain's fixed-depth tree.
    pub variable_depth: bool,
    /// Template merging: when a group's template generalises, groups of the same length whose
    /// templates now agree everywhere except where one has `<*>` (and agree on at least
    /// `sim_threshold` of the positions where either has a constant) become one group.
    pub merge: bool,
    /// Cross-branch merging: groups whose templates are equal at every position but one, with
    /// at least [`CATEGORICAL_MAX`] distinct values there, are one group (a variable in a
    /// routing token; see [`siblings`]).
    pub siblings: bool,
    /// The optional masks applied before the tree (read by the caller that fills [`Tokens`];
    /// see [`MaskOptions`]).
    pub masks: MaskOptions,
    /// Categorical words: a position where two messages hold different plain words (letters
    /// only: `values` / `bytes`, `spawn` / `destroy`) splits the group into variants, like a
    /// `key=value` field, until [`WORD_CATEGORICAL_MAX`] distinct words make it a variable (`VM
    /// Started` / `Paused` / `Resumed`; `user news` / `test` / `cyrus`). Off, the words become
    /// `<*>` at once, as in Drain.
    pub categorical_words: bool,
}

impl Default for DrainConfig {
    fn default() -> Self {
        DrainConfig {
            depth: 4,
            sim_threshold: 0.7,
            max_children: 100,
            max_clusters: 5_000,
            variable_depth: true,
            merge: true,
            siblings: true,
            masks: MaskOptions::default(),
            categorical_words: true,
        }
    }
}

/// Result of adding a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddResult {
    /// The message belongs to template (variant) `id`; `new` when the variant was just created.
    Template {
        /// Variant id (stable; see [`Drain::take_merges`]).
        id: u32,
        /// Whether this message created it.
        new: bool,
    },
    /// Template cap reached and nothing matched.
    Overflow,
}

#[derive(Clone, Debug)]
struct Variant {
    cluster: u32,
    key: Box<[u8]>,
}

/// The Drain parse tree.
#[derive(Debug)]
pub struct Drain {
    cfg: DrainConfig,
    roots: HashMap<usize, Node>,
    /// Groups, indexed by id.
    pub clusters: Vec<Cluster>,
    variants: Vec<Variant>,
    merges: Vec<(u32, u32)>,
    key: Vec<u8>,
    /// Live groups by token count, for template merging.
    by_len: HashMap<usize, Vec<u32>>,
    /// Groups equal but at one position, for cross-branch merging (see [`siblings`]).
    siblings: siblings::Siblings,
}

/// Groups of one length compared when a template generalises (the most recent ones).
const MERGE_SCAN: usize = 256;

const WILD_KEY: &str = "<*>";

impl Drain {
    /// New empty tree.
    pub fn new(cfg: DrainConfig) -> Self {
        Drain {
            cfg,
            roots: HashMap::new(),
            clusters: Vec::new(),
            variants: Vec::new(),
            merges: Vec::new(),
            key: Vec::new(),
            by_len: HashMap::new(),
            siblings: Default::default(),
        }
    }

    /// Number of variants ever created (ids are `0..variant_count()`).
    pub fn variant_count(&self) -> usize {
        self.variants.len()
    }

    /// Template text of a variant.
    pub fn variant_template(&self, id: u32) -> String {
        let v = &self.variants[id as usize];
        render(&self.clusters[v.cluster as usize].tokens, Some(&v.key))
    }

    /// Variant merges that happened since the last call, as (kept, absorbed): when a categorical
    /// position saturates, variants that differed only there become one.
    pub fn take_merges(&mut self) -> Vec<(u32, u32)> {
        std::mem::take(&mut self.merges)
    }

    /// Add one tokenized message.
    pub fn add(&mut self, toks: &Tokens) -> AddResult {
        let n = toks.len();
        let prefix = self.cfg.depth.saturating_sub(2).min(n);
        let max_children = self.cfg.max_children;
        let mut node = self.roots.entry(n).or_default();
        let mut next = 0;
        for _ in 0..prefix {
            if self.cfg.variable_depth {
                while next < n && toks.flags(next) & F_MASKED != 0 {
                    next += 1;
                }
                if next >= n {
                    break;
                }
            }
            let i = next;
            next += 1;
            let t = toks.tok(i);
            let key = if toks.flags(i) & F_MASKED != 0 {
                WILD_KEY
            } else {
                t
            };
            let key = if node.children.contains_key(key) {
                key
            } else if node.children.len() < max_children {
                node.children.insert(key.into(), Node::default());
                key
            } else {
                node.children.entry(WILD_KEY.into()).or_default();
                WILD_KEY
            };
            node = node.children.get_mut(key).expect("child exists");
        }
        let mut best: Option<(u32, f64, usize)> = None;
        for cid in node.clusters.iter_mut() {
            while self.clusters[*cid as usize].into != *cid {
                *cid = self.clusters[*cid as usize].into;
            }
            let cid = &*cid;
            let c = &self.clusters[*cid as usize];
            if let Some((sim, wild)) = similarity(c, toks)
                && best.is_none_or(|(_, bs, bw)| sim > bs || (sim == bs && wild > bw))
            {
                best = Some((*cid, sim, wild));
            }
        }
        let cid = match best {
            Some((cid, sim, _)) if sim >= self.cfg.sim_threshold => cid,
            _ => {
                if self.variants.len() >= self.cfg.max_clusters {
                    return AddResult::Overflow;
                }
                let id = self.clusters.len() as u32;
                let mut tokens = Vec::with_capacity(n);
                for i in 0..n {
                    let f = toks.flags(i);
                    tokens.push(if f & F_WILD != 0 {
                        TTok::Wild
                    } else {
                        TTok::Lit(toks.tok(i).into())
                    });
                }
                self.clusters.push(Cluster {
                    tokens,
                    variants: HashMap::new(),
                    into: id,
                });
                node.clusters.push(id);
                self.by_len.entry(n).or_default().push(id);
                if self.cfg.siblings {
                    self.link_siblings(id)
                } else {
                    id
                }
            }
        };
        self.join(cid, toks)
    }

    fn join(&mut self, cid: u32, toks: &Tokens) -> AddResult {
        let words = self.cfg.categorical_words;
        let c = &mut self.clusters[cid as usize];
        let mut saturated: Vec<usize> = Vec::new();
        self.key.clear();
        for i in 0..toks.len() {
            let t = toks.tok(i);
            let masked = toks.flags(i) & F_MASKED != 0;
            let k = match &mut c.tokens[i] {
                TTok::Wild => NO_VALUE,
                TTok::Lit(l) => {
                    if l.contains("<*>") && (**l == *t || matches_key_wild(l, t)) {
                        NO_VALUE
                    } else if **l == *t {
                        0
                    } else if masked || !(same_key(l, t) || words && plain_words(l, t)) {
                        saturated.push(i);
                        NO_VALUE
                    } else {
                        let old = std::mem::replace(l, Box::from(""));
                        c.tokens[i] = TTok::Cat(vec![old, t.into()]);
                        1
                    }
                }
                TTok::Cat(vals) => match vals.iter().position(|v| **v == *t) {
                    Some(p) => p as u8,
                    None if masked
                        || vals.len() + 1
                            >= if vals[0].contains('=') {
                                CATEGORICAL_MAX
                            } else {
                                WORD_CATEGORICAL_MAX
                            } =>
                    {
                        saturated.push(i);
                        NO_VALUE
                    }
                    None => {
                        vals.push(t.into());
                        (vals.len() - 1) as u8
                    }
                },
            };
            self.key.push(k);
        }
        if !saturated.is_empty() {
            for &i in &saturated {
                c.tokens[i] = match &c.tokens[i] {
                    TTok::Lit(l) => key_wild(l, toks.tok(i)),
                    TTok::Cat(vals) => key_wild(&vals[0], toks.tok(i)),
                    TTok::Wild => TTok::Wild,
                };
            }
            // re-key existing variants; collisions merge
            let old = std::mem::take(&mut c.variants);
            let mut entries: Vec<(Box<[u8]>, u32)> = old.into_iter().collect();
            entries.sort_by_key(|e| e.1);
            for (mut k, vid) in entries {
                for &i in &saturated {
                    k[i] = NO_VALUE;
                }
                match c.variants.get(&k) {
                    Some(&keep) => self.merges.push((keep, vid)),
                    None => {
                        self.variants[vid as usize].key = k.clone();
                        c.variants.insert(k, vid);
                    }
                }
            }
        }
        let mut cid = cid;
        if !saturated.is_empty() && self.cfg.merge {
            cid = self.merge_similar(cid);
            for (k, t) in self.key.iter_mut().zip(&self.clusters[cid as usize].tokens) {
                if *t == TTok::Wild {
                    *k = NO_VALUE;
                }
            }
        }
        let c = &mut self.clusters[cid as usize];
        if let Some(&id) = c.variants.get(self.key.as_slice()) {
            return AddResult::Template { id, new: false };
        }
        if self.variants.len() >= self.cfg.max_clusters {
            return AddResult::Overflow;
        }
        let id = self.variants.len() as u32;
        let key: Box<[u8]> = self.key.as_slice().into();
        c.variants.insert(key.clone(), id);
        self.variants.push(Variant { cluster: cid, key });
        AddResult::Template { id, new: true }
    }
}

impl Drain {
    /// Template merging (see [`DrainConfig::merge`]): fold every compatible group of the same
    /// length into `cid`'s group (or `cid` into an older one). Returns the surviving group.
    fn merge_similar(&mut self, cid: u32) -> u32 {
        let n = self.clusters[cid as usize].tokens.len();
        let Some(list) = self.by_len.get(&n) else {
            return cid;
        };
        let others: Vec<u32> = list
            .iter()
            .rev()
            .take(MERGE_SCAN)
            .copied()
            .filter(|&o| o != cid)
            .collect();
        let mut keep = cid;
        for o in others {
            if self.clusters[o as usize].into != o
                || !compatible(
                    &self.clusters[keep as usize].tokens,
                    &self.clusters[o as usize].tokens,
                    self.cfg.sim_threshold,
                )
            {
                continue;
            }
            let (a, b) = if o < keep { (o, keep) } else { (keep, o) };
            self.fold(a, b);
            keep = a;
        }
        if let Some(list) = self.by_len.get_mut(&n) {
            let clusters = &self.clusters;
            list.retain(|&x| clusters[x as usize].into == x);
        }
        keep
    }

    /// Fold group `b` into group `a` (compatible templates, or siblings): positions where either
    /// has `<*>`, or where their categorical values differ, become `<*>`; where two constants
    /// differ (siblings), `<*>` keeps the punctuation they share (`<*>:`); `b`'s variants are
    /// re-keyed into
    /// `a`, and variants that collide are recorded in `merges`.
    fn fold(&mut self, a: u32, b: u32) {
        let bt = std::mem::take(&mut self.clusters[b as usize].tokens);
        let bv = std::mem::take(&mut self.clusters[b as usize].variants);
        self.clusters[b as usize].into = a;
        let n = bt.len();
        let mut wild = vec![false; n];
        {
            let at = &mut self.clusters[a as usize].tokens;
            for i in 0..n {
                // two constants (only siblings differ there): keep their shared punctuation
                if let (TTok::Lit(x), TTok::Lit(y)) = (&at[i], &bt[i])
                    && x != y
                {
                    at[i] = key_wild(x, y);
                    wild[i] = true;
                    continue;
                }
                let w = match (&at[i], &bt[i]) {
                    (TTok::Wild, _) | (_, TTok::Wild) => true,
                    (TTok::Lit(x), TTok::Lit(y)) => x != y,
                    (TTok::Cat(x), TTok::Cat(y)) => x != y,
                    _ => true,
                };
                if w && at[i] != TTok::Wild {
                    at[i] = TTok::Wild;
                    wild[i] = true;
                } else if w {
                    wild[i] = true;
                }
            }
        }
        let old = std::mem::take(&mut self.clusters[a as usize].variants);
        let mut entries: Vec<(Box<[u8]>, u32)> = old.into_iter().chain(bv).collect();
        entries.sort_by_key(|e| e.1);
        let mut fresh: HashMap<Box<[u8]>, u32> = HashMap::new();
        for (mut k, vid) in entries {
            for (i, w) in wild.iter().enumerate() {
                if *w {
                    k[i] = NO_VALUE;
                }
            }
            match fresh.get(&k) {
                Some(&keep) => self.merges.push((keep, vid)),
                None => {
                    self.variants[vid as usize] = Variant {
                        cluster: a,
                        key: k.clone(),
                    };
                    fresh.insert(k, vid);
                }
            }
        }
        self.clusters[a as usize].variants = fresh;
    }
}

#[cfg(test)]
mod tests;
