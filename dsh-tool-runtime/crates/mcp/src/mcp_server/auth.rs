//! Bearer-token authentication of streamable HTTP (RFC 6750): what a client must send, and the
//! check [`http`](super::http) runs on every request before rmcp sees it, so an unauthenticated
//! request never reaches a session. A fixed token is compared here; OAuth access tokens are
//! checked by [`oauth`](super::oauth).

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use hyper::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use subtle::ConstantTimeEq;

use super::McpServeError;
#[cfg(feature = "oauth")]
use super::oauth::{McpOAuthResource, Verifier};
use super::response::{Body, refusal_response};
use crate::durable::Principal;

/// Random bytes in a generated token: 256 bits, far past guessing.
const GENERATED_TOKEN_BYTES: usize = 32;
/// The fewest characters a bearer token may have: 22 base64 characters carry 128 bits when
/// each is random (a hex token of 128 bits has 32).
pub(crate) const MIN_TOKEN_CHARS: usize = 22;
/// The wait before the second `401` on one connection, doubled for each one after it.
const REFUSAL_DELAY_MIN: Duration = Duration::from_millis(100);
/// The longest wait before a `401` on one connection.
const REFUSAL_DELAY_MAX: Duration = Duration::from_secs(5);

/// Who may send requests to streamable HTTP serving
/// ([`McpTransport::Http`](super::McpTransport::Http)).
///
/// [`McpTransport::http`](super::McpTransport::http) starts with [`McpHttpAuth::generate`]: read
/// the token from [`McpTransport::bearer_token`](super::McpTransport::bearer_token) and hand it to
/// the clients, or replace it with
/// [`McpTransport::with_auth`](super::McpTransport::with_auth). `Debug` never shows the token.
#[derive(Clone)]
#[non_exhaustive]
pub enum McpHttpAuth {
    /// Every request must carry `Authorization: Bearer <token>` (RFC 6750 §2.1) with this
    /// token, compared in constant time. One without it is answered `401 Unauthorized` with
    /// `WWW-Authenticate: Bearer`, one with another token `401` with `WWW-Authenticate: Bearer
    /// error="invalid_token"` (RFC 6750 §3), whatever its `Origin`. The token is RFC 6750
    /// `b64token` text (ASCII letters, digits and `-._~+/`, then any `=`) of at least 22
    /// characters before its `=` padding: 128 bits if each character is random base64 (a hex
    /// token needs 32 for as many). A shorter token is refused before serving, as it could be
    /// guessed. On one connection, each `401` after the first is sent after a wait that starts
    /// at 100 ms and doubles up to 5 s (a request that passes resets it), so a client guessing
    /// tokens on a kept-alive connection is slowed.
    Bearer(String),
    /// OAuth 2.1 (feature `oauth`): every request carries a JWT access token its authorization
    /// server issued for this server, checked as [`McpOAuthResource`] describes; the RFC 9728
    /// protected-resource metadata is served so that clients find the authorization server.
    #[cfg(feature = "oauth")]
    #[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
    OAuth(McpOAuthResource),
    /// No authentication: any process that can reach the port can call the tools. Served only
    /// on a loopback address (127.0.0.0/8, `::1`); elsewhere serving fails with
    /// [`McpServeError::NoAuthOffLoopback`].
    None,
}

impl fmt::Debug for McpHttpAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpHttpAuth::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            #[cfg(feature = "oauth")]
            McpHttpAuth::OAuth(resource) => f.debug_tuple("OAuth").field(resource).finish(),
            McpHttpAuth::None => f.write_str("None"),
        }
    }
}

impl McpHttpAuth {
    /// A bearer token of 256 bits from the operating system's CSPRNG (`getrandom`), written as
    /// 64 lower-case hex digits.
    ///
    /// # Errors
    /// The operating system's random source failed.
    pub fn generate() -> std::io::Result<McpHttpAuth> {
        let mut bytes = [0u8; GENERATED_TOKEN_BYTES];
        getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
        let token = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        Ok(McpHttpAuth::Bearer(token))
    }

    /// The token clients must send; `None` without authentication or with OAuth (each client
    /// gets its own from the authorization server).
    pub fn bearer_token(&self) -> Option<&str> {
        match self {
            McpHttpAuth::Bearer(token) => Some(token),
            _ => None,
        }
    }

    /// Whether HTTP serving on `addr` may use this authentication: the check
    /// [`crate::ServeExt::serve_mcp_with`](crate::registry::crate::ServeExt::serve_mcp_with) makes before it
    /// serves, for a caller that wants the answer before binding.
    ///
    /// # Errors
    /// [`McpServeError::NoAuthOffLoopback`] for [`McpHttpAuth::None`] on an address that is not
    /// loopback; [`McpServeError::InvalidBearerToken`] for a token that is empty or not
    /// `b64token` text, or shorter than 22 characters (see [`McpHttpAuth::Bearer`]);
    /// [`McpServeError::InvalidOAuth`] for OAuth settings
    /// [`McpOAuthResource::check`] refuses (feature `oauth`).
    pub fn check(&self, addr: SocketAddr) -> Result<(), McpServeError> {
        match self {
            McpHttpAuth::None if addr.ip().to_canonical().is_loopback() => Ok(()),
            McpHttpAuth::None => Err(McpServeError::NoAuthOffLoopback(addr)),
            McpHttpAuth::Bearer(token) if token.is_empty() => {
                Err(McpServeError::InvalidBearerToken("empty"))
            }
            McpHttpAuth::Bearer(token) if !is_b64token(token) => {
                Err(McpServeError::InvalidBearerToken(
                    "not RFC 6750 b64token text (ASCII letters, digits and -._~+/, then any =)",
                ))
            }
            McpHttpAuth::Bearer(token) if token.trim_end_matches('=').len() < MIN_TOKEN_CHARS => {
                Err(McpServeError::InvalidBearerToken(
                    "shorter than 22 characters, under 128 bits: it could be guessed; use a \
                     random one, e.g. `openssl rand -hex 32`, or let a token be generated",
                ))
            }
            McpHttpAuth::Bearer(_) => Ok(()),
            #[cfg(feature = "oauth")]
            McpHttpAuth::OAuth(resource) => resource.check(),
        }
    }
}

/// RFC 6750 §2.1: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-._~+/".contains(&byte))
}

/// What every request must carry, shared by the connections of one server.
#[derive(Clone)]
pub(crate) enum Gate {
    /// Every request passes.
    Open,
    /// The one token.
    Token(Arc<[u8]>),
    /// An OAuth access token.
    #[cfg(feature = "oauth")]
    OAuth(Arc<Verifier>),
}

impl Gate {
    /// # Errors
    /// As [`McpHttpAuth::check`] for OAuth settings.
    pub(crate) fn new(auth: &McpHttpAuth) -> Result<Gate, McpServeError> {
        Ok(match auth {
            McpHttpAuth::Bearer(token) => Gate::Token(Arc::from(token.as_bytes())),
            #[cfg(feature = "oauth")]
            McpHttpAuth::OAuth(resource) => Gate::OAuth(Arc::new(Verifier::new(resource)?)),
            McpHttpAuth::None => Gate::Open,
        })
    }

    /// The answer to a `GET` of `path` that needs no authentication: the protected-resource
    /// metadata under OAuth.
    pub(crate) fn public_answer(&self, path: &str) -> Option<Response<Body>> {
        match self {
            #[cfg(feature = "oauth")]
            Gate::OAuth(verifier) => verifier.metadata_response(path),
            _ => {
                let _ = path;
                None
            }
        }
    }

    /// Whether a request with `headers` may pass: `Ok` with the OAuth subject of its token
    /// (`None` without OAuth: a fixed token names no one), else the whole answer to it.
    pub(crate) async fn admit(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<Principal>, Response<Body>> {
        match self {
            Gate::Open => Ok(None),
            Gate::Token(expected) => match bearer(headers) {
                // Unequal lengths answer at once: only the length of the token can leak.
                Some(token) if bool::from(token.ct_eq(expected)) => Ok(None),
                Some(_) => Err(unauthorized(
                    "Bearer error=\"invalid_token\"",
                    "Unauthorized: the bearer token is not valid\n",
                )),
                // RFC 6750 §3.1: a request without credentials gets no error code.
                None => Err(unauthorized(
                    "Bearer",
                    "Unauthorized: send the header \"Authorization: Bearer <token>\"\n",
                )),
            },
            #[cfg(feature = "oauth")]
            Gate::OAuth(verifier) => verifier.admit(bearer(headers)).await.map(Some),
        }
    }
}

/// The `401` answers of one connection so far: each after the first waits longer before it is
/// sent (100 ms, doubled each time, at most 5 s); a request that passes resets the count.
#[derive(Debug, Default)]
pub(crate) struct Refusals(AtomicU32);

impl Refusals {
    /// Counts a `401`: the wait before it is sent.
    fn refused(&self) -> Duration {
        let count = self.0.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        match count.checked_sub(2) {
            None => Duration::ZERO,
            Some(doublings) => REFUSAL_DELAY_MIN
                .saturating_mul(1 << doublings.min(16))
                .min(REFUSAL_DELAY_MAX),
        }
    }

    fn passed(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

impl Gate {
    /// [`Gate::admit`] on a connection whose `401`s so far are `refusals`: a `401` waits as
    /// [`Refusals`] says before it is answered.
    pub(crate) async fn admit_on(
        &self,
        headers: &HeaderMap,
        refusals: &Refusals,
    ) -> Result<Option<Principal>, Response<Body>> {
        let admitted = self.admit(headers).await;
        match &admitted {
            Err(response) if response.status() == StatusCode::UNAUTHORIZED => {
                tokio::time::sleep(refusals.refused()).await;
            }
            Err(_) => {}
            Ok(_) => refusals.passed(),
        }
        admitted
    }
}

/// The credentials of `Authorization: Bearer <token>`. The scheme is case-insensitive (RFC 9110
/// §11.1); one or more spaces follow it.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    headers
        .get(AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        .and_then(|value| {
            let (scheme, token) = value.split_at_checked(6)?;
            let token = token.strip_prefix(b" ")?;
            scheme
                .eq_ignore_ascii_case(b"Bearer")
                .then(|| token.trim_ascii_start())
        })
}

fn unauthorized(challenge: &'static str, text: &'static str) -> Response<Body> {
    refusal_response(StatusCode::UNAUTHORIZED, challenge, text)
}

#[cfg(test)]
mod tests {
    use hyper::header::WWW_AUTHENTICATE;

    use super::*;

    fn answer(gate: &Gate, authorization: Option<&str>) -> Option<(StatusCode, String)> {
        let mut headers = HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        }
        let refusal = futures::executor::block_on(gate.admit(&headers)).err();
        refusal.map(|response| {
            let challenge = response.headers()[WWW_AUTHENTICATE].to_str().unwrap();
            (response.status(), challenge.to_owned())
        })
    }

    #[test]
    fn only_the_exact_bearer_token_passes() {
        let gate = Gate::new(&McpHttpAuth::Bearer("s3cr3t".to_owned())).unwrap();
        assert_eq!(answer(&gate, Some("Bearer s3cr3t")), None);
        assert_eq!(answer(&gate, Some("bearer  s3cr3t")), None);
        let missing = Some((StatusCode::UNAUTHORIZED, "Bearer".to_owned()));
        assert_eq!(answer(&gate, None), missing);
        assert_eq!(answer(&gate, Some("Basic czNjcjN0")), missing);
        assert_eq!(answer(&gate, Some("Bearers3cr3t")), missing);
        let invalid = Some((
            StatusCode::UNAUTHORIZED,
            "Bearer error=\"invalid_token\"".to_owned(),
        ));
        for wrong in ["Bearer s3cr3", "Bearer s3cr3tt", "Bearer S3CR3T", "Bearer "] {
            assert_eq!(answer(&gate, Some(wrong)), invalid, "{wrong}");
        }
        assert_eq!(answer(&Gate::new(&McpHttpAuth::None).unwrap(), None), None);
    }

    #[test]
    fn generated_tokens_are_256_bit_hex_and_differ() {
        let first = McpHttpAuth::generate().unwrap();
        let second = McpHttpAuth::generate().unwrap();
        let token = first.bearer_token().unwrap();
        assert_eq!(token.len(), 64);
        assert!(token.bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert_ne!(first.bearer_token(), second.bearer_token());
        assert_eq!(format!("{first:?}"), "Bearer(<redacted>)");
    }

    #[test]
    fn no_auth_only_on_loopback_and_tokens_are_b64token_text() {
        let addr = |text: &str| text.parse::<SocketAddr>().unwrap();
        for loopback in [
            "127.0.0.1:0",
            "127.3.2.1:80",
            "[::1]:0",
            "[::ffff:127.0.0.1]:0",
        ] {
            assert!(
                McpHttpAuth::None.check(addr(loopback)).is_ok(),
                "{loopback}"
            );
        }
        for open in ["0.0.0.0:8080", "[::]:0", "192.0.2.1:80"] {
            assert!(
                matches!(
                    McpHttpAuth::None.check(addr(open)),
                    Err(McpServeError::NoAuthOffLoopback(refused)) if refused == addr(open)
                ),
                "{open}"
            );
        }
        let bearer = |token: &str| McpHttpAuth::Bearer(token.to_owned()).check(addr("0.0.0.0:1"));
        assert!(bearer("aZ09-._~+/aZ09-._~+/ab==").is_ok());
        for bad in ["", "==", "two words", "tab\t", "é", "a=b"] {
            assert!(
                matches!(bearer(bad), Err(McpServeError::InvalidBearerToken(_))),
                "{bad:?}"
            );
        }
    }

    /// Under 22 characters (the `=` padding not counted) a token is refused before serving:
    /// a 1-character token, 21 base64 characters, 16 bytes in hex less one digit.
    #[test]
    fn tokens_under_128_bits_are_refused() {
        let addr = "127.0.0.1:0".parse::<SocketAddr>().unwrap();
        let bearer = |token: &str| McpHttpAuth::Bearer(token.to_owned()).check(addr);
        for short in [
            "x",
            "s3cr3t",
            "abcdefghijklmnopqrstu",
            "abcdefghijklmnopqrstu===",
        ] {
            let refused = bearer(short).unwrap_err();
            assert!(
                refused.to_string().starts_with(
                    "the MCP bearer token is shorter than 22 characters, under 128 bits"
                ),
                "{short:?}: {refused}"
            );
        }
        assert!(bearer("abcdefghijklmnopqrstuv").is_ok());
        assert!(bearer(McpHttpAuth::generate().unwrap().bearer_token().unwrap()).is_ok());
    }

    /// On one connection the first `401` is at once, each after it waits 100 ms, 200 ms, …
    /// up to 5 s (on tokio's paused clock); a passing request resets the wait, and another
    /// connection has its own.
    #[tokio::test(start_paused = true)]
    async fn repeated_refusals_on_a_connection_are_slowed() {
        let gate = Gate::new(&McpHttpAuth::Bearer("s3cr3t".to_owned())).unwrap();
        let headers = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            headers
        };
        let connection = Refusals::default();
        let mut waits = Vec::new();
        for _ in 0..9 {
            let start = tokio::time::Instant::now();
            let refusal = gate.admit_on(&headers("Bearer guess"), &connection).await;
            assert_eq!(refusal.unwrap_err().status(), StatusCode::UNAUTHORIZED);
            waits.push(start.elapsed().as_millis());
        }
        assert_eq!(waits, [0, 100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000]);

        let other = Refusals::default();
        let start = tokio::time::Instant::now();
        assert!(
            gate.admit_on(&headers("Bearer guess"), &other)
                .await
                .is_err()
        );
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "another connection starts afresh"
        );

        assert!(
            gate.admit_on(&headers("Bearer s3cr3t"), &connection)
                .await
                .is_ok()
        );
        let start = tokio::time::Instant::now();
        assert!(
            gate.admit_on(&headers("Bearer guess"), &connection)
                .await
                .is_err()
        );
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "reset by a request that passed"
        );
    }
}
