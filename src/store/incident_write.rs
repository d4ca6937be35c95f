//! The one shape of every write to an incident (DESIGN.md §8, STYLE.md practice 16): a unit of
//! work that services open, decide in with `domain`, call a few methods on, and commit.
//!
//! [`IncidentWrite::open`] begins the write transaction ([`super::begin_write`]), reads the
//! incident and checks the version the request was based on, and loads the incident's
//! redaction map once; it holds the transaction, the incident, the map, the actor and one
//! instant. "Something happened to this incident" is then written in one place,
//! [`IncidentWrite::record_event`]: the timeline row, its audit entry, the chat outbox rows of
//! the channels that want it ([`super::chat::enqueue_in`]) and the change notice
//! ([`super::changes`]: `pg_notify` inside the transaction on PostgreSQL, the in-process hub
//! after commit). A rolled-back or failed write announces nothing.
//!
//! This file is the only caller of [`super::audit::append`], [`super::incidents::add_event`]
//! and [`super::redaction::load`].

use std::sync::Arc;

use super::changes::{CHANNEL, Change, ChangeHub};
use super::{Backend, Db, Tx, audit, incidents, memory, redaction};
use crate::domain::memory::NewRecord;
use crate::domain::{
    EpistemicType, Incident, IncidentId, IncidentState, NewIncident, Transition,
    memory::check_citations,
};
use crate::error::{AppError, AppResult};
use crate::evidence::redact::Redactor;

/// What [`IncidentWrite::record_event`] writes: a timeline entry (kind and one-line detail) and,
/// when [`Event::audited`], its audit-log entry with the incident as subject.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    kind: &'a str,
    detail: String,
    actor: Option<&'a str>,
    audit: Option<(String, String)>,
}

impl<'a> Event<'a> {
    /// A timeline entry of `kind` (`evidence_added`, `verdict`, …) saying `detail`, by the
    /// write's actor.
    pub fn new(kind: &'a str, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            actor: None,
            audit: None,
        }
    }

    /// Also appends `action` (`evidence.add`, `incident.resolve`, …) with `detail` (JSON or one
    /// line) to the audit log.
    pub fn audited(mut self, action: impl Into<String>, detail: impl ToString) -> Self {
        self.audit = Some((action.into(), detail.to_string()));
        self
    }

    /// Recorded as done by `actor` instead of the write's actor (a memory record's author).
    pub fn by(mut self, actor: &'a str) -> Self {
        self.actor = Some(actor);
        self
    }
}

/// One write to one incident, inside one write transaction. Dropped without
/// [`IncidentWrite::commit`], it rolls back and announces nothing.
pub struct IncidentWrite {
    tx: Tx,
    incident: Incident,
    /// The incident's redaction map as this write changes it.
    redactor: Redactor,
    /// The map as stored when the write opened (`None`: none yet), saved over at commit only
    /// when this write redacted with it and it changed.
    stored: Option<Redactor>,
    /// Whether this write redacted anything (a new incident's map is stored only then).
    redacted: bool,
    actor: String,
    at: jiff::Timestamp,
    notices: Notices,
}

impl std::fmt::Debug for IncidentWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncidentWrite")
            .field("incident", &self.incident.id)
            .field("actor", &self.actor)
            .field("at", &self.at)
            .field("changes", &self.notices.changes.len())
            .finish_non_exhaustive()
    }
}

impl IncidentWrite {
    /// Begins the write on incident `id` on behalf of `actor`: the write transaction, the
    /// incident read inside it and checked against `expected_version` (what the page or client
    /// saw; `None` skips the check, [`Incident::check_version`]), its redaction map loaded.
    ///
    /// # Errors
    /// [`AppError::NotFound`]; [`AppError::Conflict`] on a stale version; database errors.
    pub async fn open(
        db: &Db,
        id: &IncidentId,
        actor: &str,
        expected_version: Option<i64>,
    ) -> AppResult<Self> {
        let tx = super::begin_write(db).await?;
        Self::open_in(tx, db.changes(), id, actor, expected_version).await
    }

    /// [`IncidentWrite::open`] inside a write transaction already begun (an alert delivery
    /// claims its group first, then writes to the group's incident).
    ///
    /// # Errors
    /// As [`IncidentWrite::open`].
    pub async fn open_in(
        mut tx: Tx,
        hub: &ChangeHub,
        id: &IncidentId,
        actor: &str,
        expected_version: Option<i64>,
    ) -> AppResult<Self> {
        let incident = incidents::get_in(&mut tx, id).await?;
        incident.check_version(expected_version)?;
        let stored = redaction::stored_in(&mut tx, id.as_str()).await?;
        Ok(Self::with(tx, hub, incident, stored, actor))
    }

    /// Opens a new incident in `investigating` on behalf of `actor`: its id allocated, its
    /// title and description redacted with its new placeholder map, the incident inserted and
    /// `opened` recorded with the `incident.open` audit entry. Every way of opening an incident
    /// goes through here.
    ///
    /// # Errors
    /// Database errors.
    pub async fn create(db: &Db, new: &NewIncident, actor: &str) -> AppResult<Self> {
        let tx = super::begin_write(db).await?;
        Self::create_in(tx, db.changes(), new, actor, serde_json::Map::new()).await
    }

    /// [`IncidentWrite::create`] inside a write transaction already begun (an alert delivery
    /// claims its group first), with `opened_by` (e.g. the integration and the alert group)
    /// added to the `incident.open` audit entry.
    ///
    /// # Errors
    /// Database errors.
    pub async fn create_in(
        mut tx: Tx,
        hub: &ChangeHub,
        new: &NewIncident,
        actor: &str,
        opened_by: serde_json::Map<String, serde_json::Value>,
    ) -> AppResult<Self> {
        let at = super::now();
        let id = incidents::next_id(&mut tx, at).await?;
        let placeholder = incident_placeholder(&id);
        let mut write = Self::with(tx, hub, placeholder, None, actor);
        write.at = at;
        let mut redacted = new.clone();
        write.redact(&mut [&mut redacted.title, &mut redacted.description]);
        write.incident = incidents::insert(&mut write.tx, id, &redacted, actor, at).await?;
        let mut detail = serde_json::json!({
            "title": write.incident.title, "service": write.incident.service,
            "severity": write.incident.severity,
        });
        if let Some(fields) = detail.as_object_mut() {
            fields.extend(opened_by);
        }
        let opened = format!(
            "{} on {}: {}",
            redacted.severity, redacted.service, redacted.title
        );
        write
            .record_event(Event::new("opened", opened).audited("incident.open", detail))
            .await?;
        Ok(write)
    }

    fn with(
        tx: Tx,
        hub: &ChangeHub,
        incident: Incident,
        stored: Option<Redactor>,
        actor: &str,
    ) -> Self {
        Self {
            redactor: stored.clone().unwrap_or_else(redaction::fresh),
            stored,
            redacted: false,
            notices: Notices::new(&tx, Some(hub)),
            tx,
            incident,
            actor: actor.to_string(),
            at: super::now(),
        }
    }

    /// The incident as read when the write opened (and after each [`IncidentWrite::transition`]).
    pub fn incident(&self) -> &Incident {
        &self.incident
    }

    /// Who writes (a user name, an integration, `prometheus`).
    pub fn actor(&self) -> &str {
        &self.actor
    }

    /// The instant of this write (one for every row it stamps).
    pub fn at(&self) -> jiff::Timestamp {
        self.at
    }

    /// Refuses new work on a learned incident ([`Incident::check_open`]).
    ///
    /// # Errors
    /// [`AppError::Conflict`].
    pub fn check_open(&self) -> AppResult<()> {
        Ok(self.incident.check_open()?)
    }

    /// Redacts `texts` with the incident's placeholder map; the dotted quads that are versions
    /// are decided over all of them first (`Redactor::decide_versions`): the texts of one call
    /// read as one text.
    pub fn redact(&mut self, texts: &mut [&mut String]) {
        self.redacted = true;
        self.redactor
            .decide_versions(texts.iter().map(|t| t.as_str()));
        for t in texts.iter_mut() {
            **t = self.redactor.redact(t);
        }
    }

    /// Every string of `value` (a whole document, e.g. a post-mortem) redacted with the
    /// incident's placeholder map.
    ///
    /// # Errors
    /// [`AppError::Internal`] for a value that does not round-trip through JSON.
    pub fn redact_value<T: serde::Serialize + serde::de::DeserializeOwned>(
        &mut self,
        value: &T,
    ) -> AppResult<T> {
        self.redacted = true;
        self.redactor
            .redact_value(value)
            .map_err(|e| AppError::Internal(e.into()))
    }

    /// The incident's redaction map as it stands in this write.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Replaces the map with `redactor`, one derived from [`IncidentWrite::redactor`] off the
    /// async runtime (a large paste redacted on a blocking thread).
    pub fn set_redactor(&mut self, redactor: Redactor) {
        self.redacted = true;
        self.redactor = redactor;
    }

    /// Records that something happened to the incident: the timeline row, the audit entry when
    /// the event is [`Event::audited`], the chat outbox rows of the channels that post it, and
    /// the change notice (sent with `pg_notify` on PostgreSQL now, delivered at commit; handed
    /// to the in-process hub after [`IncidentWrite::commit`]). Returns the timeline event's id.
    ///
    /// # Errors
    /// Database errors.
    pub async fn record_event(&mut self, event: Event<'_>) -> AppResult<i64> {
        let actor = event.actor.unwrap_or(&self.actor).to_string();
        let id = self.incident.id.clone();
        record(
            &mut self.tx,
            &mut self.notices,
            &id,
            self.at,
            &actor,
            &event,
        )
        .await
    }

    /// Appends an audit entry about something the write did that is not an incident event
    /// (`subject`: a record `MEM-12`, a proposal), by the write's actor.
    ///
    /// # Errors
    /// Database errors.
    pub async fn audit(&mut self, action: &str, subject: &str, detail: &str) -> AppResult<()> {
        audit::append(&mut self.tx, &self.actor, action, subject, detail).await
    }

    /// [`IncidentWrite::audit`] by `actor` (a reviewer's decision written by another name).
    ///
    /// # Errors
    /// Database errors.
    pub async fn audit_by(
        &mut self,
        actor: &str,
        action: &str,
        subject: &str,
        detail: &str,
    ) -> AppResult<()> {
        audit::append(&mut self.tx, actor, action, subject, detail).await
    }

    /// Applies `transition` to `to` as compare-and-set on the state the incident was read in
    /// ([`incidents::apply_transition`]), with `patch`, and records it with `event` (its kind
    /// is the transition's name). Returns `false` and writes nothing when a concurrent write
    /// moved the incident first; on success the held incident is read again.
    ///
    /// # Errors
    /// Database errors.
    pub async fn transition(
        &mut self,
        transition: Transition,
        to: IncidentState,
        patch: &incidents::TransitionPatch,
        detail: &str,
        audit: Option<(String, String)>,
    ) -> AppResult<bool> {
        let id = self.incident.id.clone();
        let from = self.incident.state;
        let applied =
            incidents::apply_transition(&mut self.tx, &id, from, to, patch, self.at).await?;
        if !applied {
            return Ok(false);
        }
        let mut event = Event::new(transition.as_str(), detail);
        event.audit = audit;
        self.record_event(event).await?;
        self.incident = incidents::get_in(&mut self.tx, &id).await?;
        Ok(true)
    }

    /// Writes one memory record of this incident (the store half of
    /// `services::memory::write_in`): its text redacted with the incident's map, its citations
    /// checked to exist and obey DESIGN.md §2, a durable one's failure modes completed with the
    /// `tags` of its redacted text, inserted (idempotent on `origin`); a durable one
    /// newly written is audited (`memory.write`) and recorded on the timeline
    /// (`memory_written`, by its author). Returns the id and whether it was newly written.
    ///
    /// # Errors
    /// [`AppError::Validation`] when a citation is missing or breaks a rule; database errors.
    pub async fn write_memory(&mut self, mut r: NewRecord, tags: Tags) -> AppResult<(i64, bool)> {
        let own = r.incident_id.as_deref() == Some(self.incident.id.as_str());
        if own {
            self.redacted = true;
            redact_record(&mut self.redactor, &mut r);
        } else {
            redact_record_elsewhere(&mut self.tx, &mut r).await?;
        }
        insert_announced(&mut self.tx, &mut self.notices, r, tags).await
    }

    /// The transaction, for what only this aggregate writes (evidence rows, recommendations,
    /// the post-mortem): never for timeline, audit or redaction-map rows.
    pub fn tx(&mut self) -> &mut Tx {
        &mut self.tx
    }

    /// Saves the redaction map when this write changed it, commits, then hands the recorded
    /// changes to the in-process hub. Returns the incident as last read.
    ///
    /// # Errors
    /// Database errors (nothing is announced then).
    pub async fn commit(mut self) -> AppResult<Incident> {
        if self.redacted && self.stored.as_ref() != Some(&self.redactor) {
            redaction::save(&mut self.tx, self.incident.id.as_str(), &self.redactor).await?;
        }
        self.tx.commit().await?;
        self.notices.publish();
        Ok(self.incident)
    }
}

/// What both units of work ([`IncidentWrite`], [`Write`]) offer a step that can run in either
/// (a supersession written by a reviewer's decision or by a note's new version, a proposal put
/// in the review queue): the transaction, who writes and when, an audit entry and an event on
/// an incident.
pub trait UnitOfWork: Send {
    /// The transaction, for rows only this step writes.
    fn tx(&mut self) -> &mut Tx;

    /// Who writes (empty for [`Write::begin`]).
    fn actor(&self) -> &str;

    /// The instant the step stamps its rows with (an incident write's one instant; now for a
    /// [`Write`]).
    fn at(&self) -> jiff::Timestamp;

    /// Appends `action` on `subject` with `detail` to the audit log, by `actor`.
    fn audit_by(
        &mut self,
        actor: &str,
        action: &str,
        subject: &str,
        detail: &str,
    ) -> impl Future<Output = AppResult<()>> + Send;

    /// Records `event` on `incident` (timeline row, audit entry when audited, change notice),
    /// by the event's actor or the write's. Returns the timeline event's id.
    fn record_event_on(
        &mut self,
        incident: &IncidentId,
        event: Event<'_>,
    ) -> impl Future<Output = AppResult<i64>> + Send;
}

impl UnitOfWork for IncidentWrite {
    fn tx(&mut self) -> &mut Tx {
        &mut self.tx
    }

    fn actor(&self) -> &str {
        &self.actor
    }

    fn at(&self) -> jiff::Timestamp {
        self.at
    }

    fn audit_by(
        &mut self,
        actor: &str,
        action: &str,
        subject: &str,
        detail: &str,
    ) -> impl Future<Output = AppResult<()>> + Send {
        IncidentWrite::audit_by(self, actor, action, subject, detail)
    }

    async fn record_event_on(&mut self, incident: &IncidentId, event: Event<'_>) -> AppResult<i64> {
        let actor = event.actor.unwrap_or(&self.actor).to_string();
        record(
            &mut self.tx,
            &mut self.notices,
            incident,
            self.at,
            &actor,
            &event,
        )
        .await
    }
}

impl UnitOfWork for Write {
    fn tx(&mut self) -> &mut Tx {
        &mut self.tx
    }

    fn actor(&self) -> &str {
        &self.actor
    }

    fn at(&self) -> jiff::Timestamp {
        super::now()
    }

    fn audit_by(
        &mut self,
        actor: &str,
        action: &str,
        subject: &str,
        detail: &str,
    ) -> impl Future<Output = AppResult<()>> + Send {
        Write::audit_by(self, actor, action, subject, detail)
    }

    fn record_event_on(
        &mut self,
        incident: &IncidentId,
        event: Event<'_>,
    ) -> impl Future<Output = AppResult<i64>> + Send {
        self.record_event(incident, event)
    }
}

/// A stand-in for the incident being created, until its row exists.
fn incident_placeholder(id: &IncidentId) -> Incident {
    let at = super::now();
    Incident {
        id: id.clone(),
        title: String::new(),
        service: String::new(),
        severity: crate::domain::Severity::Sev4,
        description: String::new(),
        state: IncidentState::Investigating,
        opened_by: String::new(),
        opened_at: at,
        updated_at: at,
        resolved_at: None,
        summary: None,
        root_cause: None,
        version: 0,
    }
}

/// The texts of record `r` (its statement, its rule, its target) redacted with `redactor`, as
/// one text.
fn redact_record(redactor: &mut Redactor, r: &mut NewRecord) {
    let mut texts: Vec<&mut String> = vec![&mut r.text];
    if let Some(rule) = r.rule.as_mut() {
        texts.push(&mut rule.always);
        texts.push(&mut rule.because);
    }
    if let Some(t) = r.target.as_mut() {
        texts.push(t);
    }
    redactor.decide_versions(texts.iter().map(|t| t.as_str()));
    for t in texts {
        *t = redactor.redact(t);
    }
}

/// [`redact_record`] for a record of another incident (its map loaded and saved here) or of
/// none (a fresh map, not stored).
async fn redact_record_elsewhere(tx: &mut Tx, r: &mut NewRecord) -> AppResult<()> {
    match r.incident_id.clone() {
        Some(other) => {
            let mut redactor = redaction::load(tx, &other).await?;
            redact_record(&mut redactor, r);
            redaction::save(tx, &other, &redactor).await
        }
        None => {
            redact_record(&mut Redactor::default(), r);
            Ok(())
        }
    }
}

/// Derives failure-mode tags from a record's (redacted) text: `memory::recall::derive_tags`,
/// handed in by the service so the store does not call memory.
pub type Tags = fn(&str) -> Vec<String>;

/// Inserts record `r` (already redacted) after checking its citations; a durable record's
/// failure modes gain the `tags` of its text. Returns the record as inserted.
async fn insert_record(tx: &mut Tx, mut r: NewRecord, tags: Tags) -> AppResult<(i64, bool)> {
    let mut cited: Vec<EpistemicType> = Vec::with_capacity(r.cites.len());
    for id in &r.cites {
        match memory::get_in(tx, *id).await {
            Ok(rec) => cited.push(rec.epistemic_type),
            Err(AppError::NotFound(_)) => {
                return Err(crate::domain::ValidationError::new(
                    "cites",
                    format!("record {id} does not exist"),
                )
                .into());
            }
            Err(e) => return Err(e),
        }
    }
    check_citations(r.epistemic_type, &cited)?;
    if r.kind.is_durable() {
        let mut all: std::collections::BTreeSet<String> = r.failure_modes.drain(..).collect();
        all.extend(tags(&r.text));
        r.failure_modes = all.into_iter().collect();
    }
    memory::insert(tx, &r, super::now()).await
}

/// What both units write for one event on `incident` by `actor` at `at`: the timeline row (with
/// its chat outbox rows), its audit entry when the event is [`Event::audited`], and its change
/// notice. Returns the timeline event's id.
async fn record(
    tx: &mut Tx,
    notices: &mut Notices,
    incident: &IncidentId,
    at: jiff::Timestamp,
    actor: &str,
    event: &Event<'_>,
) -> AppResult<i64> {
    let event_id = notices
        .event(tx, incident, at, actor, event.kind, &event.detail)
        .await?;
    if let Some((action, detail)) = &event.audit {
        audit::append(tx, actor, action, incident.as_str(), detail).await?;
    }
    Ok(event_id)
}

/// Inserts record `r` (already redacted, see [`insert_record`]); a durable one newly written
/// is audited (`memory.write`) and, when it has an incident, recorded on that incident's
/// timeline (`memory_written`, by its author). Returns the id and whether it was newly written.
async fn insert_announced(
    tx: &mut Tx,
    notices: &mut Notices,
    r: NewRecord,
    tags: Tags,
) -> AppResult<(i64, bool)> {
    let (id, created) = insert_record(tx, r.clone(), tags).await?;
    if created && r.kind.is_durable() {
        audit::append(
            tx,
            &r.author,
            "memory.write",
            &format!("MEM-{id}"),
            &record_audit(id, &r),
        )
        .await?;
        if let Some(inc) = r.incident_id.as_deref()
            && let Ok(iid) = IncidentId::parse(inc)
        {
            let detail = format!("{} MEM-{id}", r.kind);
            notices
                .event(tx, &iid, super::now(), &r.author, "memory_written", &detail)
                .await?;
        }
    }
    Ok((id, created))
}

/// The `memory.write` audit detail of record `id`.
fn record_audit(id: i64, r: &NewRecord) -> String {
    serde_json::json!({
        "id": id, "kind": r.kind, "epistemic_type": r.epistemic_type,
        "incident": r.incident_id, "validation": r.validation,
    })
    .to_string()
}

/// The change notices of one write: sent with `pg_notify` inside its transaction on
/// PostgreSQL, collected, and published to the hub after its commit.
struct Notices {
    backend: Backend,
    /// `None` for a write that touches no incident ([`Write::begin`]).
    hub: Option<ChangeHub>,
    changes: Vec<Change>,
}

impl Notices {
    fn new(tx: &Tx, hub: Option<&ChangeHub>) -> Self {
        Self {
            backend: Backend::of_tx(tx),
            hub: hub.cloned(),
            changes: Vec::new(),
        }
    }

    /// The timeline row of `kind` on incident `id` (with its chat outbox rows) and its notice.
    async fn event(
        &mut self,
        tx: &mut Tx,
        id: &IncidentId,
        at: jiff::Timestamp,
        actor: &str,
        kind: &str,
        detail: &str,
    ) -> AppResult<i64> {
        let event_id = incidents::add_event(tx, id, at, actor, kind, detail).await?;
        let change = Change {
            incident: id.clone(),
            event_id,
            kind: kind.to_string(),
            actor: actor.to_string(),
            origin: self
                .hub
                .as_ref()
                .map(|h| h.origin().to_string())
                .unwrap_or_default(),
        };
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(change.payload())
                .execute(&mut **tx)
                .await?;
        }
        self.changes.push(change);
        Ok(event_id)
    }

    /// Hands the collected notices to the hub (after the commit).
    fn publish(self) {
        if let Some(hub) = self.hub {
            for change in self.changes {
                hub.publish(change);
            }
        }
    }
}

/// A write that opens no incident write (an import, a consolidation, user and integration
/// admin, chat channels, a memory note): the write transaction and its audit entries, committed
/// together.
pub struct Write {
    tx: Tx,
    actor: Arc<str>,
    notices: Notices,
}

impl std::fmt::Debug for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Write")
            .field("actor", &self.actor)
            .finish_non_exhaustive()
    }
}

impl Write {
    /// Begins a write transaction on behalf of `actor`.
    ///
    /// # Errors
    /// Database errors.
    pub async fn open(db: &Db, actor: &str) -> AppResult<Self> {
        let tx = super::begin_write(db).await?;
        Ok(Self {
            notices: Notices::new(&tx, Some(db.changes())),
            tx,
            actor: actor.into(),
        })
    }

    /// Begins a write that touches no incident (an account, a sign-in, an integration, a chat
    /// channel, an import): the transaction and its audit entries, each naming its actor
    /// ([`Write::audit_by`]); no change notices (a memory record of an incident written here
    /// would reach no live page: use [`Write::open`] for those).
    ///
    /// # Errors
    /// Database errors.
    pub async fn begin(pool: &sqlx::AnyPool) -> AppResult<Self> {
        let tx = super::begin_write(pool).await?;
        Ok(Self {
            notices: Notices::new(&tx, None),
            tx,
            actor: "".into(),
        })
    }

    /// Who writes (empty for [`Write::begin`]: its entries name their actor).
    pub fn actor(&self) -> &str {
        &self.actor
    }

    /// Appends `action` on `subject` with `detail` to the audit log, by the write's actor.
    ///
    /// # Errors
    /// Database errors.
    pub async fn audit(&mut self, action: &str, subject: &str, detail: &str) -> AppResult<()> {
        audit::append(&mut self.tx, &self.actor, action, subject, detail).await
    }

    /// [`Write::audit`] by `actor` (a sign-in audited under the name it claimed).
    ///
    /// # Errors
    /// Database errors.
    pub async fn audit_by(
        &mut self,
        actor: &str,
        action: &str,
        subject: &str,
        detail: &str,
    ) -> AppResult<()> {
        audit::append(&mut self.tx, actor, action, subject, detail).await
    }

    /// Records that something happened to incident `incident` (a consolidation's proposal hangs
    /// off one): as [`IncidentWrite::record_event`], by the event's actor or the write's.
    ///
    /// # Errors
    /// Database errors.
    pub async fn record_event(
        &mut self,
        incident: &IncidentId,
        event: Event<'_>,
    ) -> AppResult<i64> {
        let actor = event.actor.unwrap_or(&self.actor).to_string();
        let at = super::now();
        record(
            &mut self.tx,
            &mut self.notices,
            incident,
            at,
            &actor,
            &event,
        )
        .await
    }

    /// Writes one memory record outside an incident write (a note, an import): as
    /// [`IncidentWrite::write_memory`]; a durable record of an incident is still recorded on
    /// that incident's timeline.
    ///
    /// # Errors
    /// As [`IncidentWrite::write_memory`].
    pub async fn write_memory(&mut self, mut r: NewRecord, tags: Tags) -> AppResult<(i64, bool)> {
        redact_record_elsewhere(&mut self.tx, &mut r).await?;
        insert_announced(&mut self.tx, &mut self.notices, r, tags).await
    }

    /// The transaction.
    pub fn tx(&mut self) -> &mut Tx {
        &mut self.tx
    }

    /// Commits, then publishes the change notices of the records it wrote.
    ///
    /// # Errors
    /// Database errors.
    pub async fn commit(self) -> AppResult<()> {
        self.tx.commit().await?;
        self.notices.publish();
        Ok(())
    }
}
