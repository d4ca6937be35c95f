//! An access-log request line embedded in an application message (`"GET /v2/<id>/servers/detail
//! HTTP/1.1"`): the method and the route's words are the event, the ids in the path and the
//! protocol version are its parameters. Masking the whole quoted value (as for any other quoted
//! string) would fold every route into one template; keeping it as it is would split one route
//! per id. Used by [`super::mask`] when the quote is the message's own text, not the value of a
//! `key:` or `key=` field (`request: "GET /x HTTP/1.1"` in a proxy's error line is a parameter).
//!
//! A path segment is an id by its *shape* only (so the shape cache stays sound, see
//! [`super::super::shape`]): it holds a digit (a UUID, a number, a date, a word-digit mix such as
//! `compute-07`), except a name made of letters and one digit (`v2`, `ec2`); or it is at least 16
//! hex letters. A query string is one parameter.

/// Masks the request line `inner` (the text between the quotes) into `out` and returns true, or
/// returns false without writing when `inner` is not `METHOD /path PROTOCOL/version`. With
/// `path_ids` off the whole path is one `<*>`.
pub(super) fn mask_request_line(inner: &str, path_ids: bool, out: &mut String) -> bool {
    let mut parts = inner.split(' ');
    let (Some(method), Some(path), Some(proto), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    if !(3..=7).contains(&method.len()) || !method.bytes().all(|c| c.is_ascii_uppercase()) {
        return false;
    }
    let Some((pname, version)) = proto.split_once('/') else {
        return false;
    };
    if pname.is_empty()
        || !pname.bytes().all(|c| c.is_ascii_uppercase())
        || version.is_empty()
        || !version.bytes().all(|c| c.is_ascii_digit() || c == b'.')
        || !path.starts_with('/')
    {
        return false;
    }
    out.push_str(method);
    out.push(' ');
    if path_ids {
        mask_route(path, out);
    } else {
        out.push_str("<*>");
    }
    out.push(' ');
    out.push_str(pname);
    out.push_str("/<*>");
    true
}

/// Writes `path` with every id segment as `<*>` and a query string as `?<*>`.
fn mask_route(path: &str, out: &mut String) {
    let (route, query) = match path.split_once('?') {
        Some((r, _)) => (r, true),
        None => (path, false),
    };
    for (i, seg) in route.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if id_segment(seg.as_bytes()) {
            out.push_str("<*>");
        } else {
            out.push_str(seg);
        }
    }
    if query {
        out.push_str("?<*>");
    }
}

/// Whether one path segment is an id by its shape (see the module doc).
fn id_segment(s: &[u8]) -> bool {
    if s.is_empty() {
        return false;
    }
    if s.len() >= 16 && s.iter().all(u8::is_ascii_hexdigit) {
        return true;
    }
    if !s.iter().any(u8::is_ascii_digit) {
        return false;
    }
    // a name: letters then a single digit (`v2`), as elsewhere in the masks
    let name = s.len() >= 2
        && s[s.len() - 1].is_ascii_digit()
        && s[..s.len() - 1].iter().all(u8::is_ascii_alphabetic);
    !name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Option<String> {
        let mut out = String::new();
        mask_request_line(s, true, &mut out).then_some(out)
    }

    #[test]
    fn a_route_keeps_its_words_and_loses_its_ids() {
        assert_eq!(
            line("GET /v2/4be1a0c2e8f94a7db2c0a1f3b5d6e7f8/servers/detail HTTP/1.1").as_deref(),
            Some("GET /v2/<*>/servers/detail HTTP/<*>")
        );
        assert_eq!(
            line("DELETE /api/boxes/6f1c2b7e-9d0a-4c3e-8b5f-2a1d0e9c8b7a/lid HTTP/2").as_deref(),
            Some("DELETE /api/boxes/<*>/lid HTTP/<*>")
        );
        assert_eq!(
            line("PUT /shelves/rack-12/slot/7?force=true HTTP/1.0").as_deref(),
            Some("PUT /shelves/<*>/slot/<*>?<*> HTTP/<*>")
        );
        assert_eq!(
            line("GET /feeds/2019-04-01/summary.json HTTP/1.1").as_deref(),
            Some("GET /feeds/<*>/summary.json HTTP/<*>")
        );
        assert_eq!(
            line("GET /blobs/deadbeefcafebabedeadbeef HTTP/1.1").as_deref(),
            Some("GET /blobs/<*> HTTP/<*>")
        );
    }

    #[test]
    fn without_path_ids_the_whole_path_is_one_variable() {
        let mut out = String::new();
        assert!(mask_request_line(
            "GET /v2/abc1/items HTTP/1.1",
            false,
            &mut out
        ));
        assert_eq!(out, "GET <*> HTTP/<*>");
    }

    #[test]
    fn text_that_is_not_a_request_line_is_left_alone() {
        assert_eq!(line("slow query"), None);
        assert_eq!(line("get /a HTTP/1.1"), None);
        assert_eq!(line("GET /a HTTP/one"), None);
        assert_eq!(line("GET a/b HTTP/1.1"), None);
        assert_eq!(line("GET /a HTTP/1.1 extra"), None);
    }
}
