//! Applying a delivery: one incident per alert group (opened, updated, resolved), one evidence
//! record and observation per alert, idempotent under retries and concurrency, in one
//! `BEGIN IMMEDIATE` transaction per group.

use super::parse::{AlertStatus, Delivery, IncomingGroup};
use super::{FALLBACK_SERVICE, Source};
use crate::domain::{IncidentId, IncidentState, NewIncident};
use crate::error::{AppError, AppResult};
use crate::evidence::EvidenceKind;
use crate::store::integrations::Integration;
use crate::store::{self, alerts as astore, incidents};
use crate::store::{Event, IncidentWrite};

use super::clean::{clean_line, clean_service, clean_text, map_severity, short, skew_flags};

/// What a delivery did to one group.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct GroupOutcome {
    /// Sender's group key.
    pub group_key: String,
    /// Incident the group maps to.
    pub incident: String,
    /// Whether this delivery opened that incident.
    pub opened: bool,
    /// The learned incident this one follows, when the group fired again after learning.
    pub follows: Option<String>,
    /// Alerts of the incident now firing.
    pub firing: i64,
    /// Alerts of the incident now resolved.
    pub resolved: i64,
    /// Alerts of the group the sender left out of this delivery (Alertmanager
    /// `truncatedAlerts`).
    pub not_sent: i64,
    /// For people: `2 of 3 firing`; with alerts left out by the sender, `2 shown, 3 more not
    /// sent by Alertmanager`.
    pub summary: String,
    /// Evidence records created by this delivery (0 on a repeat).
    pub evidence_created: usize,
}

/// What a delivery did, for the webhook's 202 response.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct IngestOutcome {
    /// Incidents the delivery's groups map to (opened or updated), without repeats.
    pub incidents: Vec<String>,
    /// Of those, the ones this delivery opened.
    pub opened: Vec<String>,
    /// Alerts firing / resolved across those incidents after the delivery.
    pub firing: i64,
    /// See `firing`.
    pub resolved: i64,
    /// Per group.
    pub groups: Vec<GroupOutcome>,
    /// Why nothing was applied, when so.
    pub ignored: Option<String>,
}

/// Applies a parsed delivery from `integ`: per group, one write transaction that finds or opens
/// the incident (recording the group in `alert_groups` with `ON CONFLICT DO NOTHING`), upserts
/// the alerts and writes the timeline (`alerts`: "2 of 3 firing"; `alert_flagged` for skewed
/// instants; `follows` for a group that fired again after its incident was learned) and the
/// audit log; then one evidence record per alert through [`crate::services::evidence::add`]
/// with a dedup key, so repeats add nothing.
///
/// With a Prometheus source, each alert that is new on its incident and carries an expression
/// (`generatorURL`'s `g0.expr`) has its series pulled in a task of its own once the group's
/// transaction committed ([`crate::services::prometheus::spawn_alert_pulls`]): the delivery's
/// answer never waits for Prometheus. With a source, each group's writes also take their turn
/// in the source's write line ([`crate::prometheus::Prometheus::write_line`]), so a delivery
/// waits for at most one pulled document's write instead of sleeping in SQLite's busy handler
/// behind several.
///
/// A group that is unknown and has nothing firing opens no incident. Resolving alerts never
/// resolves the incident: a person does that with a summary and a root cause.
///
/// # Errors
/// Database errors only; sender input was validated by [`parse_delivery`].
pub async fn ingest(
    pool: &crate::store::Db,
    integ: &Integration,
    delivery: &Delivery,
    prometheus: Option<&std::sync::Arc<crate::prometheus::Prometheus>>,
) -> AppResult<IngestOutcome> {
    let mut out = IngestOutcome {
        ignored: delivery.ignored.clone(),
        ..IngestOutcome::default()
    };
    for group in &delivery.groups {
        let Some(g) = ingest_group(pool, integ, group, prometheus).await? else {
            continue;
        };
        if !out.incidents.contains(&g.incident) {
            out.incidents.push(g.incident.clone());
            out.firing += g.firing;
            out.resolved += g.resolved;
        }
        if g.opened {
            out.opened.push(g.incident.clone());
        }
        out.groups.push(g);
    }
    if delivery.ignored.is_none() && out.groups.is_empty() {
        out.ignored = Some("no alert is firing and the group is not known: nothing to open".into());
    }
    Ok(out)
}

fn source_of(integ: &Integration) -> AppResult<Source> {
    Source::parse(&integ.source).map_err(|e| AppError::Internal(e.into()))
}

/// Opens the incident of a new alert group (or of one that fired again after its incident was
/// learned) on the unit of work, inside the group's transaction `tx`.
async fn open_for_group(
    tx: store::Tx,
    hub: &store::changes::ChangeHub,
    integ: &Integration,
    group: &IncomingGroup,
    actor: &str,
) -> AppResult<IncidentWrite> {
    let source = source_of(integ)?;
    let severities = group
        .alerts
        .iter()
        .filter(|a| a.status == AlertStatus::Firing)
        .map(|a| map_severity(integ, a.severity.as_deref()));
    let severity = severities.min().unwrap_or(integ.default_severity);
    let service = group
        .service
        .as_deref()
        .and_then(clean_service)
        .unwrap_or_else(|| integ.default_service.clone());
    let title = clean_line(&group.title, 200);
    let title = if title.is_empty() {
        "Alert".to_string()
    } else {
        title
    };
    let mut description = format!(
        "Opened by the {} integration '{}' for alert group {}.",
        source.as_str(),
        integ.name,
        short(&group.key)
    );
    if !group.description.trim().is_empty() {
        description.push_str("\n\n");
        description.push_str(&group.description);
    }
    let description = clean_text(&description, crate::domain::incident::TEXT_MAX);
    let new = NewIncident::parse(&title, &service, severity.as_str(), &description)
        .or_else(|_| NewIncident::parse("Alert", FALLBACK_SERVICE, severity.as_str(), ""))?;
    let mut opened_by = serde_json::Map::new();
    opened_by.insert("integration".into(), integ.name.clone().into());
    opened_by.insert("group_key".into(), group.key.clone().into());
    IncidentWrite::create_in(tx, hub, &new, actor, opened_by).await
}

fn parse_incident_id(s: &str) -> AppResult<IncidentId> {
    IncidentId::parse(s).map_err(|e| AppError::Internal(anyhow::anyhow!("stored group: {e}")))
}

/// A group's write: the unit of work on the incident its alerts go to, and the group.
struct Claimed {
    write: IncidentWrite,
    group_id: i64,
    opened: bool,
    follows: Option<String>,
}

/// Finds the delivery's group or opens an incident for it (a new one when its incident is
/// learned), retrying a raced insert or move. `Err` is the answer when there is nothing to write:
/// no incident for resolutions alone, or late resolutions for a learned incident.
///
/// Long on purpose: the retry loop around the write transaction that decides which incident an
/// alert group belongs to (new group, open incident, resolved one to follow); its branches return
/// the same open transaction.
async fn claim_group(
    pool: &crate::store::Db,
    integ: &Integration,
    group: &IncomingGroup,
    actor: &str,
    received: jiff::Timestamp,
) -> AppResult<Result<Claimed, Option<GroupOutcome>>> {
    let source = source_of(integ)?;
    let any_firing = group.alerts.iter().any(|a| a.status == AlertStatus::Firing);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut tx = store::begin_write(pool).await?;
        match astore::find_group(&mut tx, integ.id, &group.key).await? {
            None => {
                if !any_firing {
                    tx.rollback().await?;
                    return Ok(Err(None));
                }
                let mut write = open_for_group(tx, pool.changes(), integ, group, actor).await?;
                let incident = write.incident().id.clone();
                // A write dropped uncommitted rolls back and announces nothing.
                match astore::insert_group(write.tx(), integ.id, &group.key, &incident, received)
                    .await?
                {
                    Some(gid) => {
                        return Ok(Ok(Claimed {
                            write,
                            group_id: gid,
                            opened: true,
                            follows: None,
                        }));
                    }
                    None if attempt < 3 => continue,
                    None => {
                        return Err(AppError::Conflict(
                            "the alert group changed while this delivery ran; retry".into(),
                        ));
                    }
                }
            }
            Some(g) => {
                let current_id = parse_incident_id(&g.incident_id)?;
                let current = incidents::get_in(&mut tx, &current_id).await?;
                if current.state != IncidentState::Learned {
                    let write =
                        IncidentWrite::open_in(tx, pool.changes(), &current_id, actor, None)
                            .await?;
                    return Ok(Ok(Claimed {
                        write,
                        group_id: g.id,
                        opened: false,
                        follows: None,
                    }));
                }
                if !any_firing {
                    // Late resolutions for a learned incident: nothing to record.
                    let (firing, resolved) = astore::counts_in(&mut tx, &current_id).await?;
                    tx.rollback().await?;
                    return Ok(Err(Some(GroupOutcome {
                        group_key: group.key.clone(),
                        incident: current_id.to_string(),
                        opened: false,
                        follows: g.previous_incident_id.clone(),
                        firing,
                        resolved,
                        not_sent: group.not_sent,
                        summary: group_summary(firing, resolved, group.not_sent),
                        evidence_created: 0,
                    })));
                }
                let mut write = open_for_group(tx, pool.changes(), integ, group, actor).await?;
                let incident = write.incident().id.clone();
                write
                    .record_event(Event::new(
                        "follows",
                        format!(
                            "follows {current_id} (learned): the same {} alert group fired again",
                            source.as_str()
                        ),
                    ))
                    .await?;
                if astore::move_group(write.tx(), g.id, &current_id, &incident, received).await? {
                    return Ok(Ok(Claimed {
                        write,
                        group_id: g.id,
                        opened: true,
                        follows: Some(current_id.to_string()),
                    }));
                }
                drop(write);
                if attempt >= 3 {
                    return Err(AppError::Conflict(
                        "the alert group changed while this delivery ran; retry".into(),
                    ));
                }
            }
        }
    }
}

async fn ingest_group(
    pool: &crate::store::Db,
    integ: &Integration,
    group: &IncomingGroup,
    prometheus: Option<&std::sync::Arc<crate::prometheus::Prometheus>>,
) -> AppResult<Option<GroupOutcome>> {
    let actor = format!("integration:{}", integ.name);
    let received = store::now();
    // In line with the pulled documents' writes: see `Prometheus::write_line`.
    let line = prometheus.map(|p| p.write_line());
    let turn = crate::services::evidence::wait_in_line(line).await;
    let Claimed {
        mut write,
        group_id,
        opened,
        follows,
    } = match claim_group(pool, integ, group, &actor, received).await? {
        Ok(claimed) => claimed,
        Err(answer) => return Ok(answer),
    };
    let incident_id = write.incident().id.clone();
    let (changes, changed) = upsert_alerts(&mut write, integ, group, group_id, received).await?;
    let (firing, resolved) = record_alerts(&mut write, integ, group, changed).await?;
    write.commit().await?;
    drop(turn);
    if opened {
        tracing::info!(incident.id = %incident_id, integration = %integ.name, "incident opened by an alert");
    }
    let evidence_created =
        add_alert_evidence(pool, line, integ, group, &changes, &incident_id).await?;
    if let Some(prom) = prometheus {
        let pulls: Vec<_> = group
            .alerts
            .iter()
            .zip(&changes)
            .filter(|(a, c)| **c == astore::AlertChange::New && a.status == AlertStatus::Firing)
            .filter_map(|(a, _)| {
                let expr = a
                    .generator_url
                    .as_deref()
                    .and_then(crate::prometheus::expr_from_generator_url)?;
                Some(crate::services::prometheus::AlertSeries {
                    fingerprint: a.fingerprint.clone(),
                    name: a.name.clone(),
                    expr,
                    service: a.service.clone().or_else(|| group.service.clone()),
                    starts_at: a.starts_at,
                    ends_at: a.ends_at,
                })
            })
            .collect();
        crate::services::prometheus::spawn_alert_pulls(
            pool.clone(),
            prom.clone(),
            incident_id.clone(),
            pulls,
        );
    }
    Ok(Some(GroupOutcome {
        group_key: group.key.clone(),
        incident: incident_id.to_string(),
        opened,
        follows,
        firing,
        resolved,
        not_sent: group.not_sent,
        summary: group_summary(firing, resolved, group.not_sent),
        evidence_created,
    }))
}

/// Upserts the group's alerts (names redacted) and flags their clock skew on the timeline.
/// Returns each alert's change and how many are new or changed status.
async fn upsert_alerts(
    write: &mut IncidentWrite,
    integ: &Integration,
    group: &IncomingGroup,
    group_id: i64,
    received: jiff::Timestamp,
) -> AppResult<(Vec<astore::AlertChange>, usize)> {
    let incident_id = &write.incident().id.clone();
    let mut changes = Vec::with_capacity(group.alerts.len());
    let mut changed = 0usize;
    for a in &group.alerts {
        let flags = skew_flags(a, received);
        let names: Vec<String> = flags.iter().map(|(n, _)| n.clone()).collect();
        let severity = map_severity(integ, a.severity.as_deref());
        let service = a
            .service
            .as_deref()
            .and_then(clean_service)
            .unwrap_or_else(|| integ.default_service.clone());
        let mut name = a.name.clone();
        write.redact(&mut [&mut name]);
        let name = clean_line(&name, 200);
        let change = astore::upsert_alert(
            write.tx(),
            &astore::AlertUpsert {
                group_id,
                incident_id,
                fingerprint: &a.fingerprint,
                name: &name,
                status: a.status.as_str(),
                severity,
                service: &service,
                starts_at: a.starts_at,
                ends_at: a.ends_at,
                flags: &names,
            },
            received,
        )
        .await?;
        let fresh = matches!(
            change,
            astore::AlertChange::New | astore::AlertChange::StatusChanged
        );
        if fresh {
            changed += 1;
            for (_, why) in &flags {
                write
                    .record_event(Event::new(
                        "alert_flagged",
                        format!(
                            "alert {} ({}): {why}; kept as sent, ordering and durations use the received time",
                            short(&name),
                            short(&a.fingerprint)
                        ),
                    ))
                    .await?;
            }
        }
        changes.push(change);
    }
    Ok((changes, changed))
}

/// Counts the incident's alerts and, when some changed, writes the "alerts" timeline event and
/// the audit line. Returns (firing, resolved).
async fn record_alerts(
    write: &mut IncidentWrite,
    integ: &Integration,
    group: &IncomingGroup,
    changed: usize,
) -> AppResult<(i64, i64)> {
    let incident_id = write.incident().id.clone();
    let (firing, resolved) = astore::counts_in(write.tx(), &incident_id).await?;
    if changed > 0 {
        let mut title = group.title.clone();
        write.redact(&mut [&mut title]);
        let mut detail = format!(
            "{}: {}",
            clean_line(&title, 120),
            group_summary(firing, resolved, group.not_sent)
        );
        if firing == 0 {
            detail.push_str(
                " — every alert resolved; the incident stays open until a person resolves it",
            );
        }
        let audit_detail = serde_json::json!({
            "integration": integ.name, "group_key": group.key, "changed": changed,
            "firing": firing, "resolved": resolved,
        });
        write
            .record_event(Event::new("alerts", detail).audited("alerts.ingest", audit_detail))
            .await?;
    }
    Ok((firing, resolved))
}

/// Adds one evidence record per alert that is not stale, with a dedup key (repeats add
/// nothing), each write in `line` when there is one. Returns how many were created.
async fn add_alert_evidence(
    pool: &crate::store::Db,
    line: Option<&tokio::sync::Semaphore>,
    integ: &Integration,
    group: &IncomingGroup,
    changes: &[astore::AlertChange],
    incident_id: &IncidentId,
) -> AppResult<usize> {
    let source = source_of(integ)?;
    let actor = format!("integration:{}", integ.name);
    let source_label = format!("{} ({})", integ.name, source.as_str());
    let mut evidence_created = 0;
    for (a, change) in group.alerts.iter().zip(changes) {
        if *change == astore::AlertChange::Stale {
            continue;
        }
        let key = format!(
            "{}:{}:{}:{}:{}",
            source.key_prefix(),
            incident_id,
            a.fingerprint,
            a.status.as_str(),
            a.starts_at
                .map(store::db_time)
                .unwrap_or_else(|| "-".into())
        );
        let submission = crate::services::evidence::Submission {
            kind: EvidenceKind::Alert,
            content: a.content.clone(),
            source: &source_label,
            dedup_key: Some(&key),
            expected_version: None,
            link: None,
            write_line: line,
            meaning: None,
        };
        match crate::services::evidence::submit(pool, &actor, incident_id, submission).await {
            Ok(added) if added.created => evidence_created += 1,
            Ok(_) => {}
            Err(AppError::Conflict(m)) => {
                tracing::warn!(incident.id = %incident_id, reason = %m, "alert evidence not added");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(evidence_created)
}

/// "n of m firing": how an incident's alerts are summed up on its timeline, the ingest response
/// and `GET /api/v1/incidents/{id}/alerts`.
pub fn summary(firing: i64, resolved: i64) -> String {
    format!("{firing} of {} firing", firing + resolved)
}

/// [`summary`] of a delivery whose sender left `not_sent` alerts of the group out (Alertmanager's
/// `max_alerts`, said in `truncatedAlerts`): "2 shown, 3 more not sent by Alertmanager" (with
/// "(1 firing)" when some shown are resolved), so nobody reads the shown ones as the whole group.
pub fn group_summary(firing: i64, resolved: i64, not_sent: i64) -> String {
    if not_sent <= 0 {
        return summary(firing, resolved);
    }
    let shown = firing + resolved;
    let firing_part = if resolved > 0 {
        format!(" ({firing} firing)")
    } else {
        String::new()
    };
    format!("{shown} shown{firing_part}, {not_sent} more not sent by Alertmanager")
}
