//! Evidence over HTTP: `POST /api/v1/incidents/{id}/evidence` (JSON `{kind, content, source?}`,
//! raw `text/plain` with `?kind=&source=`, or multipart with a file), the paste/upload form on the
//! incident page, and the page that shows the lines an observation points at. The Prometheus query
//! is in [`super::prometheus`].

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::auth::CurrentUser;
use super::errors::{ApiError, PageError, rejection};
use super::examples;
use super::forms::KeptInput;
use super::incident::incident_error;
use super::layout::Layout;
use super::schema::IncidentPath;
use super::{AppState, incident_id};
use crate::domain::{IncidentId, ValidationError};
use crate::error::AppError;
use crate::evidence::EvidenceKind;
use crate::services::evidence as esvc;
use crate::store::evidence as estore;

/// Evidence as submitted (a JSON body, a form, multipart fields or the query of a raw body).
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
#[schema(as = EvidenceSubmission)]
struct Submission {
    /// `logs`, `metrics`, `alert` or `note`.
    #[serde(default)]
    #[schema(value_type = EvidenceKind)]
    kind: String,
    /// The text (up to the evidence limit; secrets are redacted before it is stored).
    #[serde(default)]
    content: String,
    /// Where it came from: a file name, a host, a tool.
    #[serde(default)]
    source: String,
    /// The incident version the page or client based it on (empty: no check); a number in
    /// JSON, text in a form.
    #[serde(default, deserialize_with = "number_or_text")]
    #[schema(value_type = Option<i64>)]
    version: String,
}

/// Reads a version sent as a JSON number (`"version": 3`, as every other JSON body takes it), as
/// text (forms, multipart, the query of a raw body) or as `null`.
pub(super) fn number_or_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Version {
        Number(i64),
        Text(String),
        Null(()),
    }
    Ok(match Version::deserialize(d)? {
        Version::Number(n) => n.to_string(),
        Version::Text(s) => s,
        Version::Null(()) => String::new(),
    })
}

/// A submission as read from any encoding.
struct Read {
    kind: EvidenceKind,
    content: String,
    source: String,
    /// Incident version the form or client based it on.
    version: Option<i64>,
}

pub(super) fn parse_version(v: &str) -> Result<Option<i64>, AppError> {
    let v = v.trim();
    if v.is_empty() {
        return Ok(None);
    }
    v.parse()
        .map(Some)
        .map_err(|_| AppError::BadRequest(format!("version: '{v}' is not an incident version")))
}

impl Submission {
    fn into_read(self) -> Result<Read, AppError> {
        Ok(Read {
            kind: parse_kind(&self.kind)?,
            version: parse_version(&self.version)?,
            content: self.content,
            source: self.source,
        })
    }
}

/// Adds a submission as evidence of `id`, once: under its [`esvc::paste_key`], so the same
/// paste again adds nothing.
async fn add_once(
    s: &AppState,
    actor: &str,
    id: &IncidentId,
    r: Read,
    expected_version: Option<i64>,
) -> Result<esvc::EvidenceAdded, AppError> {
    let key = esvc::paste_key(id, r.kind, &r.content);
    let submission = esvc::Submission {
        kind: r.kind,
        content: r.content,
        source: &r.source,
        dedup_key: Some(&key),
        expected_version,
        link: None,
        write_line: None,
        meaning: s.memory.failure_mode_meanings_ready(),
    };
    esvc::submit(&s.pool, actor, id, submission).await
}

/// What the page and the API say about a paste that was already there.
fn duplicate_notice(e: &estore::EvidenceMeta) -> String {
    format!(
        "the same content is already evidence #{} (added by {}); nothing was added",
        e.id, e.author
    )
}

fn parse_kind(s: &str) -> Result<EvidenceKind, AppError> {
    EvidenceKind::parse(s).ok_or_else(|| {
        ValidationError::new(
            "kind",
            format!("'{s}' is not an evidence kind; use logs, metrics, alert or note"),
        )
        .into()
    })
}

fn too_large(limit: usize) -> AppError {
    AppError::PayloadTooLarge { limit_bytes: limit }
}

/// Reads a submission in any of the three encodings. Invalid UTF-8 in raw and uploaded text is
/// replaced (U+FFFD), not rejected.
async fn read_submission(req: Request, state: &AppState) -> Result<Read, AppError> {
    let limit = state.settings.max_evidence_bytes;
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ct.starts_with("multipart/form-data") {
        let mut mp = Multipart::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large(limit)
            } else {
                AppError::BadRequest(e.body_text())
            }
        })?;
        let mut s = Submission::default();
        let mut file: Option<(String, Bytes)> = None;
        while let Some(field) = mp.next_field().await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large(limit)
            } else {
                AppError::BadRequest(e.body_text())
            }
        })? {
            let name = field.name().unwrap_or("").to_string();
            let file_name = field.file_name().map(str::to_string);
            let data = field.bytes().await.map_err(|e| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    too_large(limit)
                } else {
                    AppError::BadRequest(e.body_text())
                }
            })?;
            match name.as_str() {
                "kind" => s.kind = String::from_utf8_lossy(&data).into_owned(),
                "source" => s.source = String::from_utf8_lossy(&data).into_owned(),
                "content" => s.content = String::from_utf8_lossy(&data).into_owned(),
                "version" => s.version = String::from_utf8_lossy(&data).into_owned(),
                "file" if !data.is_empty() => file = Some((file_name.unwrap_or_default(), data)),
                _ => {}
            }
        }
        if let Some((name, data)) = file {
            if s.content.trim().is_empty() {
                s.content = String::from_utf8_lossy(&data).into_owned();
            } else {
                s.content.push('\n');
                s.content.push_str(&String::from_utf8_lossy(&data));
            }
            if s.source.trim().is_empty() {
                s.source = name;
            }
        }
        return s.into_read();
    }
    if ct.starts_with("application/json") {
        let axum::Json(s) = axum::Json::<Submission>::from_request(req, state)
            .await
            .map_err(|e| rejection(e.status(), e.body_text(), limit))?;
        return s.into_read();
    }
    if ct.starts_with("application/x-www-form-urlencoded") {
        let axum::Form(s) = axum::Form::<Submission>::from_request(req, state)
            .await
            .map_err(|e| rejection(e.status(), e.body_text(), limit))?;
        return s.into_read();
    }
    // Raw text: kind and source in the query string.
    let q: Submission =
        serde_urlencoded::from_str(req.uri().query().unwrap_or("")).unwrap_or_default();
    let content = read_text_body(req, limit).await?;
    Ok(Read {
        kind: parse_kind(if q.kind.is_empty() { "logs" } else { &q.kind })?,
        content,
        source: q.source,
        version: parse_version(&q.version)?,
    })
}

/// Reads a raw body into one buffer sized from `Content-Length` (no regrowth, no second copy)
/// and turns it into text in place; invalid UTF-8 is replaced (one copy only then).
async fn read_text_body(req: Request, limit: usize) -> Result<String, AppError> {
    use axum::body::HttpBody;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large(limit));
    }
    let mut body = req.into_body();
    let mut buf: Vec<u8> = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        let frame = frame.map_err(|e| AppError::BadRequest(format!("reading the body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                return Err(too_large(limit));
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/evidence",
    operation_id = "addEvidence",
    summary = "Add evidence (logs, metrics, an alert, a note)",
    tag = "evidence",
    params(IncidentPath),
    request_body(
        description = "Logs, metrics, an alert body or a note: JSON `{kind, content, source?}`, raw text \
                       (`?kind=&source=`, default `logs`) or `multipart/form-data` with a `file`",
        content(
            (Submission = "application/json", example = json!(examples::evidence())),
            (String = "text/plain", example = json!(examples::evidence_text()))
        )
    ),
    responses(
        (status = 201, description = "The evidence and the observations extracted from it", body = EvidenceResponse,
         example = json!(examples::evidence_added())),
        (status = 200, description = "The same content was already evidence of this incident: nothing added, `notice` says which",
         body = EvidenceResponse, example = json!(examples::evidence_duplicate())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_add(
    State(s): State<AppState>,
    CurrentUser(user): CurrentUser,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let id = incident_id(&id)?;
    let if_match = req
        .headers()
        .get(header::IF_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            // The JSON's `ETag` (`W/"3.17"`) names version 3, as `"3"` does.
            super::api::if_match_version(v).map_or_else(
                || {
                    v.trim()
                        .trim_start_matches("W/")
                        .trim_matches('"')
                        .to_string()
                },
                |n| n.to_string(),
            )
        });
    let r = read_submission(req, &s).await?;
    let version = match if_match {
        Some(v) => parse_version(&v)?,
        None => r.version,
    };
    let added = add_once(&s, &user.name, &id, r, version).await?;
    if !added.created {
        let notice = Some(duplicate_notice(&added.evidence));
        return Ok((StatusCode::OK, Json(EvidenceResponse { added, notice })).into_response());
    }
    let body = EvidenceResponse {
        added,
        notice: None,
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// The answer of `POST …/evidence`: what was stored and, for a repeat, why nothing was.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct EvidenceResponse {
    #[serde(flatten)]
    added: esvc::EvidenceAdded,
    /// Set when the same content was already there (status 200).
    #[serde(skip_serializing_if = "Option::is_none")]
    notice: Option<String>,
}

/// `GET …/evidence`: the incident's evidence and observations.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct EvidenceList {
    /// Every piece of evidence, without its content.
    evidence: Vec<estore::EvidenceMeta>,
    /// The observations extracted from it.
    observations: Vec<crate::domain::memory::MemoryRecord>,
}

#[utoipa::path(
    get,
    path = "/api/v1/incidents/{id}/evidence",
    operation_id = "listEvidence",
    summary = "List an incident's evidence and observations",
    tag = "evidence",
    params(IncidentPath),
    responses(
        (status = 200, description = "The incident's evidence (without content) and its observations",
         body = EvidenceList, example = json!(examples::evidence_list())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_list(
    State(s): State<AppState>,
    _u: CurrentUser,
    Path(id): Path<String>,
) -> Result<Json<EvidenceList>, ApiError> {
    let id = incident_id(&id)?;
    let (evidence, observations) = crate::services::incidents::evidence(&s.pool, &id).await?;
    Ok(Json(EvidenceList {
        evidence,
        observations,
    }))
}

pub(super) async fn page_add(
    State(s): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, PageError> {
    let id = incident_id(&id)?;
    let r = read_submission(req, &s).await?;
    // Refused (a stale page, a learned incident): the paste comes back as typed.
    let kept = KeptInput {
        evidence: (
            r.kind.as_str().to_string(),
            r.source.clone(),
            r.content.clone(),
        ),
        based_on: r.version,
        ..Default::default()
    };
    let version = r.version;
    let result = add_once(&s, &user.name, &id, r, version).await;
    match result {
        Ok(added) if !added.created => Ok(Redirect::to(&format!(
            "/incidents/{id}?duplicate={}#observations",
            added.evidence.id
        ))
        .into_response()),
        Ok(_) => Ok(Redirect::to(&format!("/incidents/{id}#observations")).into_response()),
        Err(e) => incident_error(&s, &user, &headers, &id, e, kept).await,
    }
}

#[derive(Deserialize)]
pub(super) struct LinesQuery {
    #[serde(default)]
    from: Option<u64>,
    #[serde(default)]
    to: Option<u64>,
}

#[derive(Template, WebTemplate)]
#[template(path = "incidents/evidence.html")]
struct LinesPage {
    layout: Layout,
    incident_id: String,
    meta: estore::EvidenceMeta,
    lines: Vec<(u64, String)>,
    from: u64,
    to: u64,
    /// `(from, to)` of the previous and next pages of the same size, when there are lines there.
    prev: Option<LineRange>,
    next: Option<LineRange>,
}

/// At most this many lines are shown at once.
const MAX_LINES_SHOWN: u64 = 500;

pub(super) async fn lines_page(
    State(s): State<AppState>,
    CurrentUser(user): CurrentUser,
    Path((id, eid)): Path<(String, i64)>,
    Query(q): Query<LinesQuery>,
) -> Result<Response, PageError> {
    let id = incident_id(&id)?;
    let from = q.from.unwrap_or(1);
    let to = q.to.unwrap_or(from + 99);
    let (meta, lines) = esvc::lines(&s.pool, &id, eid, from, to, MAX_LINES_SHOWN).await?;
    let (from, to) = (
        from.max(1),
        to.max(from).min(from.max(1) + MAX_LINES_SHOWN - 1),
    );
    let (prev, next) = pages_around(from, to, meta.lines.max(0) as u64);
    Ok(LinesPage {
        layout: Layout::new(Some(&user), format!("{id} evidence {eid}")),
        incident_id: id.to_string(),
        meta,
        from,
        to,
        lines,
        prev,
        next,
    }
    .into_response())
}

/// A range of lines, `(from, to)`, both included.
type LineRange = (u64, u64);

/// The pages before and after lines `from..=to` of a text of `total` lines, of the same size.
fn pages_around(from: u64, to: u64, total: u64) -> (Option<LineRange>, Option<LineRange>) {
    let size = to - from + 1;
    let prev = (from > 1).then(|| (from.saturating_sub(size).max(1), from - 1));
    let next = (to < total).then(|| (to + 1, (to + size).min(total)));
    (prev, next)
}

#[cfg(test)]
mod tests {
    use super::pages_around;

    #[test]
    fn the_raw_viewer_pages_by_the_same_number_of_lines() {
        assert_eq!(pages_around(1, 100, 250), (None, Some((101, 200))));
        assert_eq!(
            pages_around(101, 200, 250),
            (Some((1, 100)), Some((201, 250)))
        );
        assert_eq!(pages_around(201, 300, 250), (Some((101, 200)), None));
        assert_eq!(pages_around(40, 49, 49), (Some((30, 39)), None));
        assert_eq!(pages_around(5, 14, 100), (Some((1, 4)), Some((15, 24))));
    }
}
