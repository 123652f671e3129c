//! The HTTP answers the served face builds before rmcp sees a request: the body type of every
//! answer, and a plain-text refusal with its `WWW-Authenticate` challenge (RFC 9110 §11.6.1).

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};

/// The body of every answer of the HTTP face.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// A plain-text refusal with its `WWW-Authenticate` challenge (none when `challenge` is empty
/// or not a valid header value).
pub(crate) fn refusal_response(status: StatusCode, challenge: &str, text: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_owned())).boxed());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(challenge)
        && !challenge.is_empty()
    {
        headers.insert(WWW_AUTHENTICATE, value);
    }
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
