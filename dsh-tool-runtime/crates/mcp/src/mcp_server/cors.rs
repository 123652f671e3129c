//! Browser access to streamable HTTP (the Fetch standard's CORS protocol) for the allowed
//! origins only: their preflights are answered before authentication (a preflight never carries
//! credentials), and every answer to them names the origin, so a browser lets its page read
//! it (a `401`'s `WWW-Authenticate` included). A request from any other origin is refused
//! with `403` and no CORS headers, so a browser reveals nothing of it to the page.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS,
    ACCESS_CONTROL_REQUEST_METHOD, CONTENT_TYPE, HeaderMap, HeaderValue, ORIGIN, VARY,
};
use hyper::{Method, Response, StatusCode};

use super::response::Body;

/// The methods of the streamable HTTP transport.
const METHODS: &str = "POST, GET, DELETE, OPTIONS";
/// The request headers a client of the transport sends that are not CORS-safelisted: the
/// credentials, the media types, the session, the protocol version, SSE resumption, and the
/// 2026-07-28 standard headers (`Mcp-Method`, `Mcp-Name`); a tool's `x-mcp-header`
/// parameters (`Mcp-Param-*`) are allowed as the preflight names them.
const HEADERS: &str = "authorization, content-type, accept, mcp-session-id, \
                       mcp-protocol-version, mcp-method, mcp-name, last-event-id";
/// The response headers a page may read besides the safelisted ones: the session a client must
/// send back, and the challenge that leads an OAuth client to the authorization server.
const EXPOSED: &str = "mcp-session-id, www-authenticate";
/// How long a browser may reuse a preflight's answer, in seconds.
const MAX_AGE: &str = "600";

/// What a request's `Origin` header means here.
pub(crate) enum Verdict {
    /// No `Origin`: not a cross-origin browser request; no CORS headers.
    Absent,
    /// An allowed origin: its answers carry CORS headers naming it.
    Allowed(HeaderValue),
    /// Any other origin, or one that is not valid text: refused with `403`.
    Refused,
}

/// The allowed origins, parsed once.
#[derive(Clone, Debug)]
pub(crate) struct Cors {
    allowed: Vec<Allowed>,
}

/// One allowed origin: `null`, or a scheme, host and port (`None` = any port).
#[derive(Clone, Debug, PartialEq)]
enum Allowed {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

impl Cors {
    /// The rule for `origins` (entries as [`McpHttpLimits::allowed_origins`](super::McpHttpLimits)
    /// describes; one that is not an origin matches nothing).
    pub(crate) fn new(origins: &[String]) -> Cors {
        Cors {
            allowed: origins.iter().filter_map(|raw| allowed(raw)).collect(),
        }
    }

    /// What `headers`' `Origin` means.
    pub(crate) fn verdict(&self, headers: &HeaderMap) -> Verdict {
        let Some(value) = headers.get(ORIGIN) else {
            return Verdict::Absent;
        };
        let Some(origin) = value.to_str().ok().and_then(origin) else {
            return Verdict::Refused;
        };
        let matches = |allowed: &Allowed| match (allowed, &origin) {
            (Allowed::Null, Allowed::Null) => true,
            (
                Allowed::Tuple { scheme, host, port },
                Allowed::Tuple {
                    scheme: s,
                    host: h,
                    port: p,
                },
            ) => scheme == s && host == h && (port.is_none() || port == p),
            _ => false,
        };
        if self.allowed.iter().any(matches) {
            Verdict::Allowed(value.clone())
        } else {
            Verdict::Refused
        }
    }
}

/// Whether `method` and `headers` make a CORS preflight (Fetch §4.8: `OPTIONS` with
/// `Access-Control-Request-Method`).
pub(crate) fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::OPTIONS && headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD)
}

/// The answer to a preflight from the allowed `origin`: `204` with the methods and headers a
/// client of the transport uses.
pub(crate) fn preflight(origin: HeaderValue, request: &HeaderMap) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let mut allowed = HEADERS.to_owned();
    // `Mcp-Param-*` names come from tools' schemas: any the preflight asks for is allowed.
    for name in request
        .get_all(ACCESS_CONTROL_REQUEST_HEADERS)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| name.starts_with("mcp-param-"))
    {
        allowed.push_str(", ");
        allowed.push_str(&name);
    }
    let headers = response.headers_mut();
    headers.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(METHODS),
    );
    if let Ok(value) = HeaderValue::from_str(&allowed) {
        headers.insert(ACCESS_CONTROL_ALLOW_HEADERS, value);
    }
    headers.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE));
    allow(&mut response, origin);
    response
}

/// Marks `response` readable by a page of `origin`.
pub(crate) fn allow(response: &mut Response<Body>, origin: HeaderValue) {
    let headers = response.headers_mut();
    headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED),
    );
    headers.append(VARY, HeaderValue::from_static("origin"));
}

/// `403` for a request from an origin that is not allowed, saying how to allow one. The
/// origin itself is not repeated: it is the client's text.
pub(crate) fn refused() -> Response<Body> {
    let text = "Forbidden: this request's Origin is not allowed to use this server; allow a \
                browser origin with `--allow-origin ORIGIN` (dsh-tools serve --http) or \
                McpHttpLimits::allow_origin, e.g. http://localhost:5173\n";
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = StatusCode::FORBIDDEN;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(VARY, HeaderValue::from_static("origin"));
    response
}

/// An allowed-origin entry: an origin, or `scheme://host:*` for any port; without a port any
/// port (rmcp's reading of such an entry, kept so both checks agree).
fn allowed(raw: &str) -> Option<Allowed> {
    if let Some(base) = raw.strip_suffix(":*") {
        if has_port(base) {
            return None;
        }
        return match origin(base)? {
            Allowed::Tuple { scheme, host, .. } => Some(Allowed::Tuple {
                scheme,
                host,
                port: None,
            }),
            Allowed::Null => None,
        };
    }
    let parsed = origin(raw)?;
    if let Allowed::Tuple { scheme, host, .. } = &parsed
        && !has_port(raw)
    {
        return Some(Allowed::Tuple {
            scheme: scheme.clone(),
            host: host.clone(),
            port: None,
        });
    }
    Some(parsed)
}

/// Whether an origin serialization names its port.
fn has_port(raw: &str) -> bool {
    let authority = raw.split_once("://").map_or(raw, |(_, rest)| rest);
    let after_host = authority
        .rsplit_once(']')
        .map_or(authority, |(_, rest)| rest);
    after_host.contains(':')
}

/// An `Origin` header value (RFC 6454 §7): `null`, or `scheme://host[:port]`, the port implied
/// by the scheme when absent.
fn origin(value: &str) -> Option<Allowed> {
    let value = value.trim();
    if value == "null" {
        return Some(Allowed::Null);
    }
    let uri: hyper::Uri = value.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    if authority.as_str().contains('@') || uri.path_and_query().is_some_and(|p| p.as_str() != "/") {
        return None;
    }
    let port = authority.port_u16().or(match scheme.as_str() {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    });
    Some(Allowed::Tuple {
        host: authority
            .host()
            .trim_matches(['[', ']'])
            .to_ascii_lowercase(),
        scheme,
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(cors: &Cors, value: &str) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert(ORIGIN, HeaderValue::from_str(value).unwrap());
        matches!(cors.verdict(&headers), Verdict::Allowed(_))
    }

    #[test]
    fn origins_match_by_scheme_host_and_port() {
        let cors = Cors::new(&[
            "http://app.example:8080".to_owned(),
            "https://ui.example:*".to_owned(),
            "http://any.example".to_owned(),
            "http://[::1]:3000".to_owned(),
            "null".to_owned(),
            "not an origin".to_owned(),
        ]);
        for allowed in [
            "http://app.example:8080",
            "HTTP://App.Example:8080",
            "https://ui.example",
            "https://ui.example:4443",
            "http://any.example:1",
            "http://[::1]:3000",
            "null",
        ] {
            assert!(verdict(&cors, allowed), "{allowed}");
        }
        for refused in [
            "http://app.example:9090",
            "https://app.example:8080",
            "http://ui.example:4443",
            "http://evil.example",
            "http://[::1]:3001",
            "not an origin",
            "http://app.example:8080/path",
        ] {
            assert!(!verdict(&cors, refused), "{refused}");
        }
        assert!(matches!(cors.verdict(&HeaderMap::new()), Verdict::Absent));
    }

    #[test]
    fn a_preflight_allows_the_transports_headers_and_asked_for_parameters() {
        let mut request = HeaderMap::new();
        request.insert(
            ACCESS_CONTROL_REQUEST_HEADERS,
            HeaderValue::from_static("content-type, Mcp-Param-Region, x-other"),
        );
        let origin = HeaderValue::from_static("http://localhost:5173");
        let response = preflight(origin, &request);
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
        let allowed = response.headers()[ACCESS_CONTROL_ALLOW_HEADERS]
            .to_str()
            .unwrap();
        assert!(allowed.contains("mcp-param-region"), "{allowed}");
        assert!(!allowed.contains("x-other"), "{allowed}");
        assert_eq!(
            response.headers()[ACCESS_CONTROL_ALLOW_ORIGIN],
            "http://localhost:5173"
        );
    }
}
