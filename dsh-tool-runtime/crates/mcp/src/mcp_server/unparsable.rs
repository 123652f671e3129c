//! A streamable HTTP request body that is not a JSON-RPC message: rmcp answers it
//! `415 Unsupported Media Type` though its media type is right. [`Copied`] keeps a copy of the
//! body as rmcp reads it, so that [`answer`] can replace that answer with JSON-RPC 2.0's:
//! `400` with `-32700 Parse error` for a body that is not JSON, `-32600 Invalid Request` for
//! JSON that is no message (with its `id` when it has one), as the transport specification
//! has an invalid body answered `400` with a JSON-RPC error.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::response::Body;

/// The most of a body kept: rmcp's own limit on a request body (4 MiB); a longer one is
/// answered `413` by rmcp.
const KEPT_BYTES: usize = 4 * 1024 * 1024;

/// The bytes of a body read so far (up to [`KEPT_BYTES`]).
pub(crate) type Kept = Arc<Mutex<BytesMut>>;

/// `inner` with a copy of what is read of it in `kept`.
pub(crate) struct Copied<B> {
    /// Boxed: hyper's timed body cannot move once polled.
    inner: Pin<Box<B>>,
    kept: Kept,
}

impl<B> Copied<B> {
    /// `inner`, copied into the returned [`Kept`].
    pub(crate) fn new(inner: B) -> (Copied<B>, Kept) {
        let kept = Kept::default();
        (
            Copied {
                inner: Box::pin(inner),
                kept: kept.clone(),
            },
            kept,
        )
    }
}

impl<B: HttpBody<Data = Bytes>> HttpBody for Copied<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let frame = std::task::ready!(self.inner.as_mut().poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            if kept.len() + data.remaining() <= KEPT_BYTES {
                kept.extend_from_slice(data);
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether `headers` declare a JSON body (rmcp answers `415` for any other media type, rightly).
pub(crate) fn declares_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
}

/// The JSON-RPC answer that replaces rmcp's `415` to a JSON body it could not read as a
/// message (`kept`); `None` for any other answer.
pub(crate) fn answer(status: StatusCode, json_body: bool, kept: &Kept) -> Option<Response<Body>> {
    if status != StatusCode::UNSUPPORTED_MEDIA_TYPE || !json_body {
        return None;
    }
    let kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
    let error = match serde_json::from_slice::<Value>(&kept) {
        Err(error) => json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": -32700, "message": format!("Parse error: the body is not JSON ({error})")}}),
        Ok(value) => {
            let id = match &value["id"] {
                id @ (Value::String(_) | Value::Number(_)) => id.clone(),
                _ => Value::Null,
            };
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600,
                "message": "Invalid Request: the body is not a JSON-RPC 2.0 message of MCP"}})
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(error.to_string())).boxed());
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Some(response)
}
