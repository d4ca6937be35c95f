//! Operational conditions of an incident: the facts that tell two incidents with the same symptom
//! apart (pool waits under a traffic surge against pool waits under flat traffic; one node
//! against every node; after a release against after a configuration change).
//!
//! Each [`Dimension`] takes one or more values read from plain text, clause by clause, by cue
//! phrases of general operations vocabulary (a subject such as "traffic" near a movement such as
//! "doubled"). A cue preceded by a negator in its clause ("no release today", "traffic did not
//! rise") reads as the opposite value where the dimension has one, and is skipped otherwise.
//! Demand and its movement are read within one phrase (no comma between them); a cue inside a
//! longer one that reads another value of its dimension is part of it ("five times the usual"
//! is a surge); a clause about what the service sends (outbound or egress traffic) reads no load.
//! Pure functions: no I/O; [`super::siblings`] compares the conditions of a query with those of
//! its first candidates.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

/// What a condition is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// The demand on the service: `flat` or `rising`.
    Load,
    /// How much of the fleet is hit: `one` (a host, zone, tenant, client…) or `all`.
    Scope,
    /// Whether a release (deploy, new build or image, upgrade) came before onset: `changed` or
    /// `unchanged`.
    Release,
    /// Whether a configuration change (a setting, limit, flag, route) came before onset.
    Config,
    /// Whether a certificate, credential, key or identity provider changed before onset.
    Credential,
    /// How a resource grows or falls: `steady` (linear, gradual) or `step` (bursts, jumps).
    Growth,
    /// Where the time goes: `own` (the service's own CPU saturated) or `waiting` (its workers idle,
    /// waiting on something else).
    Bottleneck,
    /// When it happens: `scheduled` (a nightly or periodic window) or `continuous`.
    Timing,
}

impl Dimension {
    /// Lower-case name, as shown in "why".
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Load => "load",
            Self::Scope => "scope",
            Self::Release => "release",
            Self::Config => "config",
            Self::Credential => "credential",
            Self::Growth => "growth",
            Self::Bottleneck => "bottleneck",
            Self::Timing => "timing",
        }
    }
}

/// The conditions a text reports: per dimension, how many clauses report each value (a text
/// may report two, e.g. "the batch input doubled" next to "web traffic is flat").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conditions(BTreeMap<Dimension, BTreeMap<&'static str, u32>>);

impl Conditions {
    /// Values of `d`, most reported first (empty when the text says nothing about it).
    pub fn get(&self, d: Dimension) -> Vec<&'static str> {
        let mut values: Vec<(&'static str, u32)> = self
            .0
            .get(&d)
            .map(|v| v.iter().map(|(k, n)| (*k, *n)).collect())
            .unwrap_or_default();
        values.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        values.into_iter().map(|(v, _)| v).collect()
    }

    /// Whether no dimension was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn add(&mut self, d: Dimension, value: &'static str) {
        *self.0.entry(d).or_default().entry(value).or_default() += 1;
    }

    /// Agreement with `other` over the dimensions both report. Per dimension, with `p` and `q`
    /// the two sides' shares of clauses per value, `2 · Σ p·q − 1`: +1 when both report only the
    /// same value, −1 when they report only different ones, in between for mixed reports.
    /// Dimensions only one side reports count 0. A dimension counts as agreeing above 0 and
    /// disagreeing below.
    pub fn agreement(&self, other: &Conditions) -> Agreement {
        let mut a = Agreement::default();
        for (d, mine) in &self.0 {
            let Some(theirs) = other.0.get(d) else {
                continue;
            };
            let total = |m: &BTreeMap<&'static str, u32>| f64::from(m.values().sum::<u32>());
            let (tm, tt) = (total(mine), total(theirs));
            let dot: f64 = mine
                .iter()
                .filter_map(|(v, n)| {
                    theirs
                        .get(v)
                        .map(|t| f64::from(*n) / tm * f64::from(*t) / tt)
                })
                .sum();
            let s = 2.0 * dot - 1.0;
            a.score += s;
            if s > 0.0 {
                a.agree.push(*d);
            } else if s < 0.0 {
                a.disagree.push(*d);
            }
        }
        a
    }
}

/// How two [`Conditions`] compare (see [`Conditions::agreement`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Agreement {
    /// Sum over the shared dimensions of each one's agreement, in −1 … +1.
    pub score: f64,
    /// Dimensions with a shared value.
    pub agree: Vec<Dimension>,
    /// Dimensions both report with no shared value.
    pub disagree: Vec<Dimension>,
}

/// One cue: the dimensions it reads (one, or every change dimension for "nothing changed"), the
/// value it reads, the value a negated cue reads (if any) and the pattern (matched on a
/// lower-cased clause).
struct Cue {
    dimensions: &'static [Dimension],
    value: &'static str,
    negated: Option<&'static str>,
    pattern: Regex,
}

/// What carries demand: requests, messages, users, input.
const DEMAND: &str = r"(?:traffic|requests?|request rate|writes?|write volume|rps|qps|req/s|volume|demand|throughput|inbound|incoming|ingest(?:ion)?|arrivals?|messages?|events?|orders?|sign-?ups?|logins?|users?|sessions?|calls?|input|workload|load(?:\s+on)?|viewers?|visitors?|visits|audiences?|listeners?|readers?|shoppers?|buyers?|subscribers?|page ?views)";
/// Things of which one may be hit while the rest are fine.
const UNITS: &str = r"(?:systems?|boxes|box|hosts?|nodes?|servers?|pods?|instances?|zones?|availability zones?|azs?|regions?|tenants?|customers?|clients?|accounts?|shards?|brokers?|replicas?|proxies|proxy|workers?|machines?|racks?|clusters?|partitions?|data ?cent(?:er|re)s?|sites?|venues?|stores?|locations?|vms?|containers?|balancers?|gateways?|edges?|pops?|cells?)";
/// A count in words or digits ("across all 4 regions", "the other two racks").
const COUNT: &str = r"(?:\d+|two|three|four|five|six|seven|eight|nine|ten|twelve)";
/// Resources that fill or drain.
const RESOURCE: &str = r"(?:disk|volume|storage|usage|memory|heap|rss|size|inodes?|space|backlog|lag|hit (?:rate|ratio)|utili[sz]ation|table|index|log(?:s| files?)?|bytes|footprint|consumption)";
/// Verbs of growth or decline.
const MOVES: &str = r"(?:(?:climb|grow|grew|rise|rose|rising|creep|fill|increas|declin|drop|fall|fell|leak|shrink|slid|slide|slip|drift)\w*|(?:gone|went|goes|go|going|gets|got) (?:up|down))";

fn cue(
    dimensions: &'static [Dimension],
    value: &'static str,
    negated: Option<&'static str>,
    re: &str,
) -> Cue {
    Cue {
        dimensions,
        value,
        negated,
        pattern: Regex::new(re).expect("static regex"),
    }
}

static CUES: LazyLock<Vec<Cue>> = LazyLock::new(|| {
    use Dimension::{Bottleneck, Config, Credential, Growth, Load, Release, Scope, Timing};
    // `a` then `b` within seven words, or `b` then `a` within `back` words.
    let near_back = |a: &str, b: &str, back: usize| {
        format!(r"\b{a}\b(?:\W+\w+){{0,7}}?\W+{b}|\b{b}(?:\W+\w+){{0,{back}}}?\W+{a}\b")
    };
    // `a` then `b` within seven words of one phrase, or `b` right before `a` ("flat traffic"):
    // no comma between them (a number such as `1,400` is one word), so "viewers up everywhere,
    // each page as before" reads one movement.
    let in_phrase = |a: &str, b: &str| {
        format!(r"\b{a}\b(?:[^\w,]+\w+(?:,\d+)*){{0,7}}?[^\w,]+{b}|\b{b}[^\w,]+{a}\b")
    };
    vec![
        // Load.
        cue(
            &[Load],
            "rising",
            Some("flat"),
            &in_phrase(
                DEMAND,
                r"(?:doubl\w*|tripl\w*|quadrupl\w*|spik\w*|surg\w*|jump\w*|soar\w*|rose|rising|grew|growing|increas\w*|climb\w*|peak\w*|up\s+\d+\s*%|\+\s*\d+\s*%|\d+(?:\.\d+)?\s*x\b|(?:\d+|two|three|four|five|six|seven|eight|nine|ten|twenty|a hundred) times (?:the )?(?:normal|usual|more|higher|baseline|as (?:many|much))|(?:higher|more) than (?:normal|usual|ever|before)|above (?:normal|usual|baseline|forecast)|record high|(?:two|three|four|five|six|seven|eight|nine|ten|twenty|hundred|many)fold)",
            ),
        ),
        // "viewers up", "requests were up": the demand word right before "up".
        cue(
            &[Load],
            "rising",
            Some("flat"),
            &format!(r"\b{DEMAND}\s+(?:(?:is|are|was|were|has been|have been)\s+)?up\b"),
        ),
        // "requests haven't moved": a movement denied reads flat (the cue holds its negator).
        cue(
            &[Load],
            "flat",
            Some("flat"),
            &in_phrase(
                DEMAND,
                r"(?:has|have|had|did|does|do)(?:n't| not| never) (?:moved|budged|changed|grown|risen|increased|gone up)",
            ),
        ),
        cue(
            &[Load],
            "rising",
            None,
            r"\b(?:flash sale|launch|campaign|promotion|marketing push|ticket (?:sale|drop)|presale|viral|thundering herd|retry storm)\b",
        ),
        cue(
            &[Load],
            "flat",
            None,
            &in_phrase(
                DEMAND,
                r"(?:flat|steady|stable|unchanged|normal|usual|ordinary|typical|baseline|nominal|as expected|in line with|same as|similar to|consistent with|no (?:higher|different) than|week over week|what it was|as before|within (?:the )?normal|level with|on par with|unmoved)",
            ),
        ),
        // Scope.
        cue(
            &[Scope],
            "one",
            None,
            &format!(
                r"\b(?:only|just|single|solely|one|isolated to|confined to|limited to|specific to|restricted to)\b(?:\W+\w+){{0,2}}?\W+{UNITS}\b"
            ),
        ),
        cue(
            &[Scope],
            "one",
            None,
            &format!(
                r"\b(?:the )?(?:other|remaining|rest of the|all other)\s+(?:{COUNT}\s+)?{UNITS}\b(?:\W+\w+){{0,3}}?\W+(?:fine|healthy|normal|ok|unaffected|clean\w*|green|serving)"
            ),
        ),
        cue(
            &[Scope],
            "one",
            None,
            r"\b1 of (?:[2-9]|\d{2,})\b|\bone out of\b",
        ),
        cue(
            &[Scope],
            "one",
            None,
            &format!(
                r"\b(?:every|all|each|any) other (?:{COUNT} )?{UNITS}\b|\b(?:all|the) others\b|\beverywhere else\b|\belsewhere\b|\bthe remaining (?:{COUNT} )?{UNITS}\b|\bthe same {UNITS}\b"
            ),
        ),
        cue(
            &[Scope],
            "all",
            None,
            &format!(
                r"\b(?:all|every|each|across(?: all| every| the)?|both)\s+(?:of\s+)?(?:the\s+|our\s+|its\s+|their\s+)?(?:{COUNT}\s+)?{UNITS}\b"
            ),
        ),
        cue(
            &[Scope],
            "all",
            None,
            r"\b(?:fleet-?wide|cluster-?wide|region-?wide|global(?:ly)?|everywhere|evenly|uniform(?:ly)?|across the board|across the fleet|whole fleet)\b",
        ),
        // What changed before onset.
        cue(
            &[Release],
            "changed",
            Some("unchanged"),
            r"\b(?:deploy(?:s|ed|ing)?|release[ds]?|rollouts?|rolled out|new (?:build|version|image|binary|code)|builds?|ship(?:ped)?|upgrade[ds]?|upgrading|bump(?:ed)?|canary|hotfix|patch(?:ed)?|code change)\b",
        ),
        cue(
            &[Config],
            "changed",
            Some("unchanged"),
            &near_back(
                r"(?:config(?:uration)?s?|settings?|parameters?|(?:feature )?flags?|limits?|timeouts?|quotas?|allowances?|ttls?|thresholds?|policy|policies|rules?|forwarders?|upstreams?|routes?|routing|acls?|firewall|dns|sysctls?|keep-?alive|idle timeout|retention)",
                r"(?:changed|changes?|raised|lowered|cut|reduced|increased|decreased|set|switched|flipped|enabled|disabled|turned (?:on|off)|updated|edited|pushed|modified|re-?pointed|repointed|pointed|moved|tuned|tweaked|adjusted|\d[\w.]*\s*(?:->|→|=>)\s*\d\w*)",
                4,
            ),
        ),
        cue(
            &[Credential],
            "changed",
            Some("unchanged"),
            &near_back(
                r"(?:certificates?|certs?|credentials?|secrets?|passwords?|api keys?|signing keys?|keys?|tokens?|issuers?|ca bundle|certificate authority|trust (?:store|chain|bundle)s?|identity provider|idp|saml|oidc|sso)",
                r"(?:renew\w*|rotat\w*|expir\w*|replac\w*|changed|switch\w*|migrat\w*|revok\w*|reissu\w*|new|moved)",
                4,
            ),
        ),
        cue(
            &[Release, Config, Credential],
            "unchanged",
            None,
            r"\b(?:no (?:recent )?changes?|nothing (?:has |had |was )?(?:been )?changed|change freeze|without any change)\b",
        ),
        cue(
            &[Release],
            "unchanged",
            None,
            r"\b(?:no (?:recent )?(?:deploy\w*|releases?|rollouts?)|(?:deploy\w*|releases?|rollouts?|builds?|versions?|ship\w*)\b(?:\W+\w+){0,4}?\W+(?:(?:[7-9]|\d{2,}) days|(?:\d+|two|three|four|five|six|several|many|a few) (?:weeks|months)) (?:ago|back)|(?:deploy\w*|releases?|rollouts?)\b(?:\W+\w+){0,3}?\W+(?:last|previous) (?:month|quarter)|since (?:early |late )?last month)\b",
        ),
        // Growth shape.
        cue(
            &[Growth],
            "steady",
            None,
            &format!(
                r"\b{MOVES}(?:\W+\w+){{0,4}}?\W+(?:steadily|linearly|gradually|slowly|constantly|evenly|at (?:a )?(?:constant|steady) (?:rate|pace)|by (?:about |roughly |around |nearly )?(?:a |the )?(?:constant|fixed|similar|same) (?:amount|rate|size))\b|\b(?:steady|linear|gradual|slow|constant|monotonic)\s+(?:\w+\s+)?(?:climb|growth|increase|rise|decline|drop|creep|fill|leak)\b|\d[\d.,]*\s*(?:[a-z%]+\s+)?(?:per|a|an|each|every) (?:day|hour|week)\b|\b{MOVES}(?:\W+\w+){{0,6}}?\W+(?:daily|hourly|every day|each day|day after day|week after week)\b"
            ),
        ),
        cue(
            &[Growth],
            "step",
            None,
            &format!(
                r"\b(?:steps|step (?:change|increase|jump|up)|stair-?steps?|bursts?|bursty|jumps?|jumped|sudden(?:ly)?|abrupt(?:ly)?|in chunks|all at once|sawtooth|cliff)\b(?:\W+\w+){{0,4}}?\W+{RESOURCE}\b|\b{RESOURCE}\b(?:\W+\w+){{0,4}}?\W+(?:steps|step (?:change|increase|jump|up)|stair-?steps?|bursts?|bursty|jump\w*|sudden(?:ly)?|abrupt(?:ly)?|in chunks|all at once|sawtooth)\b"
            ),
        ),
        // Where the time goes.
        cue(
            &[Bottleneck],
            "own",
            None,
            r"\b(?:cpu[- ]bound|compute[- ]bound|cpu[- ]starv\w*|cpu[- ]throttl\w*|(?:cpu|processor|cores?)\w*(?:\W+\w+){0,3}?\W+(?:saturat\w*|pegged|maxed|9\d\s*%|100\s*%|full|busy|starv\w*)|(?:saturat\w*|pegged|maxed|full|busy)(?:\W+\w+){0,2}?\W+(?:cpu|processor|cores?))\b",
        ),
        cue(
            &[Bottleneck],
            "waiting",
            None,
            r"\b(?:(?:workers?|threads?|hosts?|cpus?|cores?|processors?|instances?|pods?|consumers?|executors?|machines?|nodes?|servers?|containers?)\b(?:\W+\w+){0,3}?\W+idle|idle (?:workers?|threads?|cpus?|cores?|hosts?)|mostly idle|waiting (?:on|for)|blocked (?:on|by)|stuck (?:on|in|behind)|held by|queued (?:for|behind)|parked|starved of (?:connections|slots|permits)|slow (?:queries|query|downstream|dependency|upstream|database|backend|statements?))\b",
        ),
        // When.
        cue(
            &[Timing],
            "scheduled",
            None,
            r"\b(?:nightly|every night|each night|at night|cron\w*|scheduled|batch window|maintenance window|backup window|midnight|end[- ]of[- ](?:day|month)|daily (?:job|run|batch|report|export|import)|weekly (?:job|run|batch|report)|only during)\b",
        ),
        cue(
            &[Timing],
            "continuous",
            None,
            r"\b(?:continuous(?:ly)?|all day|around the clock|round the clock|24/7|at all hours|day and night|any time of day|throughout the day|constantly|not tied to)\b",
        ),
    ]
});

/// Words that negate a cue after them in the same clause.
static NEGATOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:no|not|never|nothing|nobody|without|nor|none|neither|n't|didn't|wasn't|isn't|hasn't|haven't|hadn't|weren't|aren't|don't|doesn't)$")
        .expect("static regex")
});

/// A clause that proposes or wonders rather than reports ("someone wants to roll back the
/// release", "maybe restart it just in case"): its conditions are not the incident's.
static PROPOSAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:suggest\w*|propos\w*|wants? to|would like to|asks? to|pushing to|let's|should we|could we|we could|maybe|perhaps|just in case|in case it helps|idea is|plan is to|recommend\w*)\b")
        .expect("static regex")
});

/// A clause about what the service sends ("outbound traffic doubled", "egress bandwidth is up"):
/// the bytes a service sends grow with its responses, not with its demand, so such a clause
/// reads no load.
static OUTBOUND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:outbound|outgoing|egress|upload)\s+(?:\w+\s+)?(?:traffic|bandwidth|bytes|throughput|volume)\b")
        .expect("static regex")
});

/// A clause that dumps state from a tool ("kubectl get deploy …", "helm status …"): it names
/// objects, it does not report a change.
static TOOL_OUTPUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:kubectl|helm|oc|docker|aws|gcloud|az)\s+(?:get|describe|status|inspect|list|show)\b",
    )
    .expect("static regex")
});

/// Clauses of a text, lower-cased, with `_` read as a space (metric names): its sentences but
/// questions, split at semicolons, line breaks and contrast words ("but", "while", "whereas",
/// "although"), so a negation or a subject does not reach across.
fn clauses(text: &str) -> Vec<String> {
    static SPLIT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?:[;\n]|\s[-–—]\s|\b(?:but|while|whereas|although|though|however|yet)\b)")
            .expect("static regex")
    });
    let lower = text.to_lowercase().replace('_', " ");
    // Sentences end at `.`, `!` or `?` before white space (or at the end), or at a line break;
    // a dot inside a token (`4.2`, `db.internal`) does not end one.
    let mut sentences: Vec<&str> = Vec::new();
    let mut start = 0;
    let mut chars = lower.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|(_, n)| *n);
        let ends =
            c == '\n' || (matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace));
        if ends {
            sentences.push(&lower[start..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    sentences.push(&lower[start..]);
    sentences
        .into_iter()
        // A question asks; it does not report.
        .filter(|s| !s.trim_end().ends_with('?'))
        .flat_map(|s| SPLIT.split(s.trim().trim_end_matches(['.', '!'])))
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether a negator stands within the four words before `start` in `clause`, or inside the cue
/// `start..end` itself ("orders did not increase").
fn negated_at(clause: &str, start: usize, end: usize) -> bool {
    let is_negator = |w: &&str| {
        let w = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
        NEGATOR.is_match(w)
    };
    clause[..start]
        .split_whitespace()
        .rev()
        .take(4)
        .any(|w| is_negator(&w))
        || clause[start..end]
            .split_whitespace()
            .any(|w| is_negator(&w))
}

/// One condition read from a text: its dimension, its value and the clause it was read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// What it is about.
    pub dimension: Dimension,
    /// The value read.
    pub value: &'static str,
    /// The clause (lower-cased) it was read in.
    pub clause: String,
}

/// Every condition `text` reports, clause by clause (each value at most once per clause).
pub fn readings(text: &str) -> Vec<Reading> {
    let mut out: Vec<Reading> = Vec::new();
    for clause in clauses(text) {
        if PROPOSAL.is_match(&clause) || TOOL_OUTPUT.is_match(&clause) {
            continue;
        }
        // What the service sends is not the demand on it.
        let outbound = OUTBOUND.is_match(&clause);
        // Each cue's first match: its dimensions, the value read and where it stands.
        let mut matches: Vec<(&'static [Dimension], &'static str, usize, usize)> = Vec::new();
        for c in CUES.iter() {
            if outbound && c.dimensions == [Dimension::Load] {
                continue;
            }
            let Some(m) = c.pattern.find(&clause) else {
                continue;
            };
            let value = if c.value != "unchanged" && negated_at(&clause, m.start(), m.end()) {
                c.negated
            } else {
                Some(c.value)
            };
            if let Some(v) = value {
                matches.push((c.dimensions, v, m.start(), m.end()));
            }
        }
        // A cue inside a longer one that reads another value of its dimension is part of that
        // one ("demand five times the usual" is a surge, not usual demand): the longer reading stands, and
        // over the same words the cue listed first (the more specific).
        let inside = |i: usize| {
            let (dims, v, s, e) = matches[i];
            matches.iter().enumerate().any(|(j, &(d2, v2, s2, e2))| {
                v2 != v && d2 == dims && s2 <= s && e <= e2 && (e2 - s2 > e - s || j < i)
            })
        };
        let mut found: BTreeSet<(Dimension, &'static str)> = BTreeSet::new();
        for m in (0..matches.len())
            .filter(|i| !inside(*i))
            .map(|i| &matches[i])
        {
            for d in m.0 {
                found.insert((*d, m.1));
            }
        }
        // A clause that says a kind of change did not happen (or is long past) reports no change
        // of that kind.
        let unchanged: Vec<Dimension> = found
            .iter()
            .filter(|(_, v)| *v == "unchanged")
            .map(|(d, _)| *d)
            .collect();
        found.retain(|(d, v)| *v != "changed" || !unchanged.contains(d));
        if let Some(shape) = super::load_shape(&clause) {
            let v = if shape == "traffic_surge" {
                "rising"
            } else {
                "flat"
            };
            found.insert((Dimension::Load, v));
        }
        out.extend(found.into_iter().map(|(dimension, value)| Reading {
            dimension,
            value,
            clause: clause.clone(),
        }));
    }
    out
}

/// Characters of a text read for conditions: an incident's report and first evidence lines (a
/// paste of thousands of lines adds cost, not conditions).
pub const CONDITIONS_CHARS: usize = 16_000;

/// The conditions the first [`CONDITIONS_CHARS`] characters of `text` report (see the module doc
/// and [`readings`]).
pub fn conditions_of(text: &str) -> Conditions {
    let mut out = Conditions::default();
    for r in readings(crate::evidence::truncate_chars(text, CONDITIONS_CHARS)) {
        out.add(r.dimension, r.value);
    }
    out
}
