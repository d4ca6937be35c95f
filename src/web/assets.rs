//! Static assets (CSS, the one small script) embedded with rust-embed, served with their MIME
//! type, an ETag, and long-lived caching when requested with the current `?v=` version.

use axum::extract::{Path, Query};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "static/"]
struct Static;

/// Short content version of an asset (first 12 hex digits of its SHA-256), for cache busting:
/// templates link `/static/app.css?v={version}`. Empty when the asset does not exist.
pub fn version(path: &str) -> String {
    Static::get(path)
        .map(|f| hex::encode(&f.metadata.sha256_hash()[..6]))
        .unwrap_or_default()
}

#[derive(serde::Deserialize)]
pub(super) struct V {
    v: Option<String>,
}

pub(super) async fn serve(
    Path(path): Path<String>,
    Query(q): Query<V>,
    headers: HeaderMap,
) -> Response {
    let Some(file) = Static::get(&path) else {
        return (StatusCode::NOT_FOUND, "no such asset").into_response();
    };
    let hash = hex::encode(&file.metadata.sha256_hash()[..6]);
    let etag = format!("\"{hash}\"");
    let cache = if q.v.as_deref() == Some(hash.as_str()) {
        "public, max-age=31536000, immutable"
    } else {
        "public, max-age=300"
    };
    let mut h = HeaderMap::new();
    if let Ok(ct) = HeaderValue::from_str(file.metadata.mimetype()) {
        h.insert(header::CONTENT_TYPE, ct);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(e) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, e);
    }
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        == Some(etag.as_str())
    {
        return (StatusCode::NOT_MODIFIED, h).into_response();
    }
    (h, file.data.into_owned()).into_response()
}
