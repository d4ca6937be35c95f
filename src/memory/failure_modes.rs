//! Failure modes recognised by meaning (issue #52): the fallback beside the catalogue's regexes.
//!
//! An observation no pattern tagged is compared with each failure mode's meaning (its
//! description, its positive examples and its `meaning` sentences in `signatures.json`), and with
//! what benign lines say (the catalogue's `benign` list and every signature's negative examples),
//! all embedded once with the built-in model when the fallback is built. The text compared is
//! what the line says, read apart from its framing ([`crate::evidence::message::meaning_text`]).
//!
//! A failure mode is given when its closest meaning is at least [`MeaningTuning::threshold`]
//! similar (cosine), beats the runner-up failure mode by [`MeaningTuning::margin`] and the
//! closest benign line by [`MeaningTuning::benign_margin`]. The observation then says so: "failure
//! mode X recognised by meaning, similarity 0.71", so a person can judge. Regex tags are never
//! changed and an observation with one is not compared.
//!
//! Cost: observations, not lines, are compared (an extraction has at most
//! [`crate::evidence::MAX_OBSERVATIONS`]), and vectors are cached by text; all of it is blocking
//! CPU work for a `spawn_blocking` caller. Evidence stays pure: the model runs here.

use std::sync::Arc;

use crate::evidence::message::meaning_text;
use crate::evidence::{
    EvidenceKind, Extraction, Observation, SUMMARY_SALIENCE, benign_examples, catalogue,
};
use crate::memory::minilm::{MiniLm, ModelError};

/// The decision rule's numbers (cosine similarities of unit vectors).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeaningTuning {
    /// Least similarity of the closest failure-mode meaning.
    pub threshold: f32,
    /// Least lead of the best failure mode over the runner-up failure mode.
    pub margin: f32,
    /// Least lead of the best failure mode over the closest benign line.
    pub benign_margin: f32,
}

impl Default for MeaningTuning {
    fn default() -> Self {
        Self {
            threshold: 0.50,
            margin: 0.05,
            benign_margin: 0.15,
        }
    }
}

impl MeaningTuning {
    /// The tuning with `name=value` pairs (comma-separated: `threshold`, `margin`,
    /// `benign_margin`) set, for stability checks.
    ///
    /// # Errors
    /// An unknown name or a value that is not a number, in words.
    pub fn parse_set(mut self, list: &str) -> Result<Self, String> {
        for pair in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("'{pair}' is not name=value"))?;
            let v: f32 = value
                .trim()
                .parse()
                .map_err(|_| format!("'{value}' is not a number"))?;
            match name.trim() {
                "threshold" => self.threshold = v,
                "margin" => self.margin = v,
                "benign_margin" => self.benign_margin = v,
                other => {
                    return Err(format!(
                        "unknown setting {other}; use threshold, margin or benign_margin"
                    ));
                }
            }
        }
        Ok(self)
    }
}

/// A failure mode recognised by meaning, with the cosine similarity that decided it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recognised {
    /// The catalogue tag.
    pub tag: &'static str,
    /// Cosine similarity of the text to the tag's closest meaning.
    pub similarity: f32,
}

/// Closest similarities of one text: per catalogue tag (catalogue order) and to benign lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Scores {
    /// Per tag, its closest meaning's similarity.
    pub tags: Vec<f32>,
    /// The closest benign line's similarity.
    pub benign: f32,
}

/// Texts whose vectors are kept (a paste's templates recur across pastes of one system).
const CACHE: usize = 4096;

/// The catalogue's meanings embedded with the built-in model, and the rule deciding with them.
pub struct FailureModeMeanings {
    model: Arc<MiniLm>,
    tags: Vec<&'static str>,
    /// (owning tag index, `None` for a benign line; unit vector).
    prototypes: Vec<(Option<usize>, Vec<f32>)>,
    tuning: MeaningTuning,
    cache: moka::sync::Cache<String, Arc<Vec<f32>>>,
}

impl std::fmt::Debug for FailureModeMeanings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailureModeMeanings")
            .field("tags", &self.tags.len())
            .field("prototypes", &self.prototypes.len())
            .field("tuning", &self.tuning)
            .finish_non_exhaustive()
    }
}

/// The texts that say what each failure mode means: (tag index or `None` for benign, text).
fn meaning_texts() -> Vec<(Option<usize>, String)> {
    let mut out = Vec::new();
    for (i, s) in catalogue().iter().enumerate() {
        out.push((Some(i), s.description.clone()));
        for p in s.positive.iter().chain(&s.meaning) {
            out.push((Some(i), meaning_text(p)));
        }
        for n in &s.negative {
            out.push((None, meaning_text(n)));
        }
    }
    for b in benign_examples() {
        out.push((None, meaning_text(b)));
    }
    out.retain(|(_, t)| !t.is_empty());
    out
}

impl FailureModeMeanings {
    /// Embeds the catalogue's meanings with `model` (blocking: ≈ 300 short texts, a few seconds
    /// on two cores).
    ///
    /// # Errors
    /// [`ModelError`] when the model fails on a text.
    pub fn build(model: Arc<MiniLm>, tuning: MeaningTuning) -> Result<Self, ModelError> {
        let texts = meaning_texts();
        let refs: Vec<&str> = texts.iter().map(|(_, t)| t.as_str()).collect();
        let vectors = model.embed(&refs)?;
        let prototypes = texts.into_iter().map(|(o, _)| o).zip(vectors).collect();
        Ok(Self {
            model,
            tags: catalogue().iter().map(|s| s.tag.as_str()).collect(),
            prototypes,
            tuning,
            cache: moka::sync::Cache::new(CACHE as u64),
        })
    }

    /// The same meanings under another rule (evaluation).
    pub fn with_tuning(mut self, tuning: MeaningTuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// The rule in use.
    pub fn tuning(&self) -> MeaningTuning {
        self.tuning
    }

    /// Unit vectors of `texts`, from the cache or the model.
    fn vectors(&self, texts: &[String]) -> Result<Vec<Arc<Vec<f32>>>, ModelError> {
        let mut out: Vec<Option<Arc<Vec<f32>>>> = texts.iter().map(|t| self.cache.get(t)).collect();
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
        if !missing.is_empty() {
            let refs: Vec<&str> = missing.iter().map(|&i| texts[i].as_str()).collect();
            let computed = self.model.embed(&refs)?;
            for (&i, v) in missing.iter().zip(computed) {
                let v = Arc::new(v);
                self.cache.insert(texts[i].clone(), Arc::clone(&v));
                out[i] = Some(v);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Per-prototype similarities of one unit vector, folded to [`Scores`].
    fn score_vector(&self, v: &[f32]) -> Scores {
        let mut tags = vec![f32::MIN; self.tags.len()];
        let mut benign = f32::MIN;
        for (owner, p) in &self.prototypes {
            let s: f32 = v.iter().zip(p).map(|(a, b)| a * b).sum();
            match owner {
                Some(i) => tags[*i] = tags[*i].max(s),
                None => benign = benign.max(s),
            }
        }
        Scores { tags, benign }
    }

    /// The similarities of `texts` (already [`meaning_text`]s), in order.
    ///
    /// # Errors
    /// [`ModelError`] when the model fails on a text.
    pub fn scores(&self, texts: &[String]) -> Result<Vec<Scores>, ModelError> {
        Ok(self
            .vectors(texts)?
            .iter()
            .map(|v| self.score_vector(v))
            .collect())
    }

    /// The failure mode `scores` decide under the rule, if any.
    pub fn decide(&self, scores: &Scores) -> Option<Recognised> {
        let mut best = (usize::MAX, f32::MIN);
        let mut second = f32::MIN;
        for (i, &s) in scores.tags.iter().enumerate() {
            if s > best.1 {
                second = best.1;
                best = (i, s);
            } else if s > second {
                second = s;
            }
        }
        let t = self.tuning;
        let tag = *self.tags.get(best.0)?;
        (best.1 >= t.threshold
            && best.1 - second >= t.margin
            && best.1 - scores.benign >= t.benign_margin)
            .then_some(Recognised {
                tag,
                similarity: best.1,
            })
    }

    /// The failure mode `text` (a line, a template or a note) is recognised as, if any.
    ///
    /// # Errors
    /// [`ModelError`] when the model fails on the text.
    pub fn recognise(&self, text: &str) -> Result<Option<Recognised>, ModelError> {
        let t = meaning_text(text);
        if t.is_empty() {
            return Ok(None);
        }
        let scores = self.scores(std::slice::from_ref(&t))?;
        Ok(scores.first().and_then(|s| self.decide(s)))
    }

    /// Tags, by meaning, the observations of `x` that no pattern tagged: [`Self::recognise_all`]
    /// then [`ByMeaning::apply`]. Returns how many were tagged.
    ///
    /// # Errors
    /// [`ModelError`] when the model fails; `x` is then unchanged.
    pub fn tag_extraction(
        &self,
        kind: EvidenceKind,
        x: &mut Extraction,
    ) -> Result<usize, ModelError> {
        let found = self.recognise_all(&candidates(kind, x))?;
        Ok(found.apply(x))
    }

    /// The failure modes `texts` (from [`candidates`]) are recognised as, by text (blocking:
    /// the model runs on the texts not in the vector cache).
    ///
    /// # Errors
    /// [`ModelError`] when the model fails on a text.
    pub fn recognise_all(&self, texts: &[String]) -> Result<ByMeaning, ModelError> {
        if texts.is_empty() {
            return Ok(ByMeaning::default());
        }
        let scores = self.scores(texts)?;
        let found = texts
            .iter()
            .zip(&scores)
            .filter_map(|(t, s)| self.decide(s).map(|r| (t.clone(), r)))
            .collect();
        Ok(ByMeaning { found })
    }

    /// What `meanings` recognise in `x`, computed on the blocking pool so the async runtime
    /// (and any write transaction: call it before one opens) never waits on the model; `None`
    /// without `meanings`, or when the model failed (logged: patterns only).
    pub async fn recognise_off_runtime(
        meanings: Option<Arc<Self>>,
        kind: EvidenceKind,
        x: &Extraction,
    ) -> Option<ByMeaning> {
        let m = meanings?;
        let texts = candidates(kind, x);
        if texts.is_empty() {
            return None;
        }
        match tokio::task::spawn_blocking(move || m.recognise_all(&texts)).await {
            Ok(Ok(found)) => Some(found),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "failure-mode fallback failed: patterns only");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "failure-mode fallback panicked: patterns only");
                None
            }
        }
    }
}

/// The texts the fallback compares in `x`: what the example (or the statement) of each
/// observation no pattern tagged says ([`meaning_text`]), the summary excepted. None for metric
/// extractions (their series are named, not described).
pub fn candidates(kind: EvidenceKind, x: &Extraction) -> Vec<String> {
    if kind == EvidenceKind::Metrics {
        return Vec::new();
    }
    let mut texts: Vec<String> = x
        .observations
        .iter()
        .filter(|o| o.salience != SUMMARY_SALIENCE && o.failure_modes.is_empty())
        .map(|o| meaning_text(o.example.as_deref().unwrap_or(&o.statement)))
        .filter(|t| !t.is_empty())
        .collect();
    texts.sort();
    texts.dedup();
    texts
}

/// Failure modes recognised by meaning, by the text compared ([`candidates`]): computed
/// before the evidence is written (the model's work), applied to the extraction written
/// ([`ByMeaning::apply`], pure). An observation whose text was not compared (the extraction was
/// redone with a changed redaction map meanwhile) is left as the patterns left it.
#[derive(Clone, Debug, Default)]
pub struct ByMeaning {
    found: std::collections::HashMap<String, Recognised>,
}

impl ByMeaning {
    /// How many texts were recognised.
    pub fn len(&self) -> usize {
        self.found.len()
    }

    /// True when no text was recognised.
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// Tags the observations of `x` no pattern tagged whose text was recognised: the tag, the
    /// reason in the statement ("recognised by meaning" and the similarity), salience +35 as a
    /// pattern's tag gives; the tags join the summary's and the observations are ranked again.
    /// Returns how many were tagged.
    pub fn apply(&self, x: &mut Extraction) -> usize {
        if self.found.is_empty() {
            return 0;
        }
        let mut tagged = 0;
        let mut tags = Vec::new();
        for o in x.observations.iter_mut() {
            if o.salience == SUMMARY_SALIENCE || !o.failure_modes.is_empty() {
                continue;
            }
            let t = meaning_text(o.example.as_deref().unwrap_or(&o.statement));
            if let Some(&r) = self.found.get(&t) {
                mark(o, r);
                tagged += 1;
                tags.push(r.tag);
            }
        }
        if tagged == 0 {
            return 0;
        }
        for o in x.observations.iter_mut() {
            if o.salience == SUMMARY_SALIENCE {
                for tag in &tags {
                    if !o.failure_modes.iter().any(|t| t == tag) {
                        o.failure_modes.push((*tag).to_string());
                    }
                }
            }
        }
        // The summary stays first; the others by salience, then count, as extraction ranks.
        x.observations.sort_by(|a, b| {
            (b.salience == SUMMARY_SALIENCE)
                .cmp(&(a.salience == SUMMARY_SALIENCE))
                .then(b.salience.cmp(&a.salience))
                .then(b.count.cmp(&a.count))
        });
        tagged
    }
}

/// The reason an observation gives for a tag recognised by meaning.
pub fn reason(r: Recognised) -> String {
    format!(
        "failure mode {} recognised by meaning, similarity {:.2}",
        r.tag, r.similarity
    )
}

/// `o` tagged with `r`: the tag, the reason in its statement (inside a template statement's
/// reasons, `… seen N times (reasons): template`, or after a note), salience +35.
fn mark(o: &mut Observation, r: Recognised) {
    o.failure_modes = vec![r.tag.to_string()];
    o.salience += 35;
    let why = reason(r);
    if o.example.is_some()
        && let Some(p) = o.statement.find(": ")
    {
        let (head, rest) = o.statement.split_at(p);
        o.statement = match head.strip_suffix(')') {
            Some(h) => format!("{h}; {why}){rest}"),
            None => format!("{head} ({why}){rest}"),
        };
    } else {
        o.statement = format!("{} ({why})", o.statement);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(statement: &str, example: Option<&str>) -> Observation {
        Observation {
            statement: statement.into(),
            line_ranges: Vec::new(),
            count: 1,
            first_seen: None,
            last_seen: None,
            failure_modes: Vec::new(),
            level: None,
            example: example.map(Into::into),
            salience: 40,
        }
    }

    #[test]
    fn the_reason_goes_inside_a_template_statement_or_after_a_note() {
        let r = Recognised {
            tag: "timeout",
            similarity: 0.714,
        };
        let mut a = obs(
            "ERROR template seen once: call <*> gave up",
            Some("call 7 gave up"),
        );
        mark(&mut a, r);
        assert_eq!(
            a.statement,
            "ERROR template seen once (failure mode timeout recognised by meaning, similarity 0.71): call <*> gave up"
        );
        assert_eq!(a.failure_modes, vec!["timeout"]);
        assert_eq!(a.salience, 75);
        let mut b = obs(
            "ERROR template seen 3 times (late): call <*> gave up",
            Some("x"),
        );
        mark(&mut b, r);
        assert!(b.statement.starts_with(
            "ERROR template seen 3 times (late; failure mode timeout recognised by meaning, similarity 0.71): "
        ));
        let mut c = obs("the calls gave up: all of them", None);
        mark(&mut c, r);
        assert_eq!(
            c.statement,
            "the calls gave up: all of them (failure mode timeout recognised by meaning, similarity 0.71)"
        );
    }

    #[test]
    fn settings_parse_by_name() {
        let t = MeaningTuning::default()
            .parse_set("threshold=0.6, margin=0.05")
            .expect("parses");
        assert_eq!(t.threshold, 0.6);
        assert_eq!(t.margin, 0.05);
        assert!(MeaningTuning::default().parse_set("nope=1").is_err());
        assert!(MeaningTuning::default().parse_set("margin=x").is_err());
    }
}
