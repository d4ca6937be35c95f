//! Cross-branch template merging: groups that Drain's tree kept apart because they differ in a
//! routing token.
//!
//! Drain (He et al., ICWS 2017) routes a message by its first tokens and only compares it with the
//! groups of its leaf, on the assumption that leading tokens are constants. When a variable sits
//! there without looking like one (a unit or service name, a user name: `nginx.service: Failed
//! …`, `cron.service: Failed …`), every value opens its own leaf and its own group, and the
//! similarity test never runs. Drain3 and the journal version of Drain merge groups whose
//! templates became compatible; this step goes one further and compares *sibling* templates:
//! same length, equal at every position but one. When [`super::CATEGORICAL_MAX`] or more groups
//! are siblings at one position (as many distinct values as the categorical rule of `key=value`
//! fields allows before it calls a field variable), and one differing position out of `n` still
//! passes Drain's similarity threshold (`(n - 1) / n >= st`), the position is a variable and the
//! groups are folded into one. Later groups that are siblings of a folded one join it at once.
//!
//! Lookup is by hash: for a template of `n` tokens, the key of position `i` is a hash of the
//! length, `i`, and every token but the `i`-th (computed for all `i` in one pass from per-token
//! hashes), so a new group finds its siblings in `O(n)` map probes. Work happens only when a group
//! is created, never per line. Hash collisions are caught by an exact check before folding.

use std::collections::HashMap;

use super::{Drain, TTok};

/// Groups that are equal except at one position, by the key of that position.
#[derive(Debug, Default)]
pub(super) struct Siblings {
    sets: HashMap<u64, SiblingSet>,
}

#[derive(Debug, Default)]
struct SiblingSet {
    /// Groups of the set (possibly folded since; resolve with `into`).
    groups: Vec<u32>,
    /// The position was found variable: a new sibling is folded at once.
    folded: bool,
}

const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// Most sibling sets kept (about 50 bytes each); past it, new groups only join existing sets.
const MAX_SETS: usize = 1 << 17;

fn token_hash(t: &TTok) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    match t {
        // a categorical position is a variable in the making: it hashes as `<*>`
        TTok::Wild | TTok::Cat(_) => h = h.wrapping_mul(K) ^ 0x2a,
        TTok::Lit(l) => {
            for &b in l.as_bytes() {
                h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    h.wrapping_mul(K).rotate_left(31) | 1
}

/// The key of every position of `tokens`: hash of (length, position, the other tokens). Uses an
/// order-aware sum (token hash times a per-position odd multiplier), so leaving one token out is
/// one subtraction.
fn position_keys(tokens: &[TTok], out: &mut Vec<u64>) {
    out.clear();
    let n = tokens.len() as u64;
    let weight = |i: usize| {
        (i as u64)
            .wrapping_mul(0xD6E8_FEB8_6659_FD93)
            .wrapping_add(K)
            | 1
    };
    let hashes: Vec<u64> = tokens.iter().map(token_hash).collect();
    let total = hashes.iter().enumerate().fold(0u64, |acc, (i, h)| {
        acc.wrapping_add(h.wrapping_mul(weight(i)))
    });
    for (i, h) in hashes.iter().enumerate() {
        let rest = total.wrapping_sub(h.wrapping_mul(weight(i)));
        out.push(
            (rest ^ (n << 48) ^ (i as u64) << 32)
                .wrapping_mul(K)
                .rotate_left(27),
        );
    }
}

/// Exactly equal at every position but `pos` (the collision check), where they must not be two
/// different partially masked tokens (`"GET /a/<*> HTTP/<*>"` / `"POST /b HTTP/<*>"`): those come
/// from different format strings, as in Drain's similarity test.
fn siblings_at(a: &[TTok], b: &[TTok], pos: usize) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).enumerate().all(|(i, (x, y))| {
            (i == pos && !two_formats(x, y))
                || x == y
                || matches!(
                    (x, y),
                    (TTok::Wild | TTok::Cat(_), TTok::Wild | TTok::Cat(_))
                )
        })
}

/// Two different partially masked constants that are not the same masked rest behind different
/// glued words (see [`super::similar::glued_word_differs`]).
fn two_formats(x: &TTok, y: &TTok) -> bool {
    match (x, y) {
        (TTok::Lit(a), TTok::Lit(b)) => {
            a != b
                && a.contains("<*>")
                && b.contains("<*>")
                && !super::similar::glued_word_differs(a, b)
        }
        _ => false,
    }
}

impl Drain {
    fn resolve(&self, mut id: u32) -> u32 {
        while self.clusters[id as usize].into != id {
            id = self.clusters[id as usize].into;
        }
        id
    }

    /// Register the new group `cid` with its siblings and fold a set that reached
    /// [`super::CATEGORICAL_MAX`] groups (see the module doc). Returns the group that now holds
    /// `cid`'s messages.
    pub(super) fn link_siblings(&mut self, cid: u32) -> u32 {
        let n = self.clusters[cid as usize].tokens.len();
        // Drain's similarity over the constant positions (a `<*>` says nothing about sameness)
        let constants = self.clusters[cid as usize]
            .tokens
            .iter()
            .filter(|t| matches!(t, TTok::Lit(_)))
            .count();
        if constants < 2 || ((constants - 1) as f64) < self.cfg.sim_threshold * constants as f64 {
            return cid;
        }
        let mut keys = Vec::with_capacity(n);
        position_keys(&self.clusters[cid as usize].tokens, &mut keys);
        let mut keep = cid;
        for (pos, key) in keys.into_iter().enumerate() {
            if matches!(
                self.clusters[keep as usize].tokens[pos],
                TTok::Wild | TTok::Cat(_)
            ) {
                continue;
            }
            let mut set = match self.siblings.sets.remove(&key) {
                Some(s) => s,
                None if self.siblings.sets.len() >= MAX_SETS => continue,
                None => SiblingSet::default(),
            };
            // live, distinct, truly sibling groups of the set
            let mut live: Vec<u32> = Vec::with_capacity(set.groups.len() + 1);
            for &g in &set.groups {
                let g = self.resolve(g);
                if g != keep
                    && !live.contains(&g)
                    && siblings_at(
                        &self.clusters[g as usize].tokens,
                        &self.clusters[keep as usize].tokens,
                        pos,
                    )
                {
                    live.push(g);
                }
            }
            live.push(keep);
            if set.folded || live.len() >= super::CATEGORICAL_MAX {
                live.sort_unstable();
                let first = live[0];
                for &g in &live[1..] {
                    self.fold(first, g);
                }
                keep = first;
                set.folded = true;
                set.groups = vec![first];
            } else {
                set.groups = live;
            }
            self.siblings.sets.insert(key, set);
        }
        if keep != cid {
            let n = self.clusters[keep as usize].tokens.len();
            if let Some(list) = self.by_len.get_mut(&n) {
                let clusters = &self.clusters;
                list.retain(|&x| clusters[x as usize].into == x);
            }
        }
        keep
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AddResult, DrainConfig, Tokens};
    use super::*;

    /// Adds each line and returns the group of every line after all merges.
    fn groups(cfg: DrainConfig, lines: &[&str]) -> (Drain, Vec<u32>) {
        let mut d = Drain::new(cfg);
        let mut t = Tokens::default();
        let mut ids = Vec::new();
        let mut parent: HashMap<u32, u32> = HashMap::new();
        for l in lines {
            t.fill(l, 100);
            let AddResult::Template { id, .. } = d.add(&t) else {
                panic!("overflow")
            };
            for (keep, gone) in d.take_merges() {
                parent.insert(gone, keep);
            }
            ids.push(id);
        }
        let find = |mut i: u32| {
            while let Some(&p) = parent.get(&i) {
                i = p;
            }
            i
        };
        let ids = ids.into_iter().map(find).collect();
        (d, ids)
    }

    const UNITS: [&str; 5] = [
        "kiln.unit: heater tripped after overload on line 3",
        "dryer.unit: heater tripped after overload on line 4",
        "mixer.unit: heater tripped after overload on line 3",
        "press.unit: heater tripped after overload on line 9",
        "oven.unit: heater tripped after overload on line 2",
    ];

    #[test]
    fn a_variable_routing_token_folds_once_it_has_enough_values() {
        let (d, ids) = groups(DrainConfig::default(), &UNITS);
        assert!(ids.iter().all(|&i| i == ids[0]), "{ids:?}");
        assert_eq!(
            d.variant_template(ids[0]),
            "<*>: heater tripped after overload on line <*>"
        );
        // Three values are not enough: an enumeration of a few words is kept apart.
        let (_, ids) = groups(DrainConfig::default(), &UNITS[..3]);
        assert_eq!(ids.len(), 3);
        assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
        // Turned off, every value is a group of its own, as in Drain.
        let cfg = DrainConfig {
            siblings: false,
            ..DrainConfig::default()
        };
        let (_, ids) = groups(cfg, &UNITS);
        let mut distinct = ids.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 5);
    }

    #[test]
    fn two_words_that_differ_in_a_short_message_stay_apart() {
        let lines = [
            "door opened by guest",
            "door closed by guest",
            "door jammed by guest",
            "door locked by guest",
            "door forced by guest",
        ];
        // (c - 1) / c = 0.75 over the four constants passes the threshold: five values make `<*>`
        let (_, ids) = groups(DrainConfig::default(), &lines);
        assert!(ids.iter().all(|&i| i == ids[0]));
        // three constants do not: 2/3 < 0.7 (nor do three constants around a variable)
        let short = [
            "door opened at 10",
            "door closed at 11",
            "door jammed at 12",
            "door locked at 13",
        ];
        let (_, ids) = groups(DrainConfig::default(), &short);
        let mut distinct = ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 4);
    }

    #[test]
    fn position_keys_ignore_exactly_one_token() {
        let toks = |s: &str| -> Vec<TTok> {
            s.split(' ')
                .map(|w| {
                    if w == "<*>" {
                        TTok::Wild
                    } else {
                        TTok::Lit(w.into())
                    }
                })
                .collect()
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        position_keys(&toks("a b c d"), &mut a);
        position_keys(&toks("a x c d"), &mut b);
        assert_eq!(a[1], b[1]);
        assert_ne!(a[0], b[0]);
        assert_ne!(a[2], b[2]);
        // the same tokens in another order are other templates
        position_keys(&toks("b a c d"), &mut b);
        assert_ne!(a[2], b[2]);
    }
}
