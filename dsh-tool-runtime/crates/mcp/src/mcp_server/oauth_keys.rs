//! The authorization server's signing keys for [`oauth`](super::oauth): fetched once at a time
//! and never under a lock a request waits on. A request whose key is cached is answered from
//! the cache while a fetch runs; only a request whose key is not cached waits for the fetch.
//! After a failed fetch no other is started until a back-off has passed (5 s, doubled after
//! each failure in a row, at most 5 minutes), and each failure is logged once.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::time::Instant;
use url::Url;

use super::McpServeError;

/// The most bytes read of a metadata or key-set document: far past any real one.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// The most keys kept from one key set.
const MAX_KEYS: usize = 64;
/// How long one fetch from the authorization server may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Keys older than this are fetched again (in the background), so a withdrawn key stops
/// verifying.
pub(crate) const KEYS_MAX_AGE: Duration = Duration::from_secs(600);
/// A token naming a key the cache does not hold fetches the key set again (a rotation) at most
/// this often: tokens with made-up key ids cannot turn the server into a fetch loop.
pub(crate) const UNKNOWN_KEY_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// The pause after a failed fetch before the next one, doubled after each failure in a row.
pub(crate) const BACKOFF_MIN: Duration = Duration::from_secs(5);
/// The longest pause between fetches of a failing authorization server.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// Why an `https` URL of the authorization server cannot be read: the HTTP client is built
/// without TLS.
pub(crate) const NO_TLS: &str = "https needs TLS, which this build does not include: put the \
                                 issuer behind plain http on loopback or a TLS-terminating proxy";

/// What [`IssuerKeys::key`] found for a token.
#[derive(Debug)]
pub(crate) enum Found {
    /// The key the token names.
    Key(Box<Jwk>),
    /// The keys are at hand but none is the token's.
    Unknown,
    /// No key set was ever fetched, and none can be now.
    Unavailable,
}

/// One issuer's key set, shared by every request. Cheap to clone.
#[derive(Clone)]
pub(crate) struct IssuerKeys {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    issuer: String,
    jwks_uri: Option<String>,
    cache: Mutex<KeyCache>,
}

/// The keys as last fetched, and the fetch under way.
#[derive(Default)]
pub(crate) struct KeyCache {
    pub(crate) keys: Vec<Jwk>,
    jwks_uri: Option<String>,
    pub(crate) fetched_at: Option<Instant>,
    pub(crate) refetched_for_unknown_at: Option<Instant>,
    /// The one fetch running; every request that needs its outcome awaits this.
    in_flight: Option<Shared<BoxFuture<'static, ()>>>,
    /// Failed fetches in a row.
    pub(crate) failures: u32,
    /// No fetch starts before this, after a failure.
    pub(crate) retry_at: Option<Instant>,
}

impl KeyCache {
    /// Whether a fetch must start for a token naming `kid` at `now`: none runs, no back-off
    /// holds, and the keys were never fetched, are too old, or lack `kid` (at most once per
    /// [`UNKNOWN_KEY_REFETCH_INTERVAL`]).
    pub(crate) fn needs_fetch(&self, kid: Option<&str>, now: Instant) -> bool {
        if self.in_flight.is_some() || self.retry_at.is_some_and(|at| now < at) {
            return false;
        }
        let Some(fetched_at) = self.fetched_at else {
            return true;
        };
        if now.saturating_duration_since(fetched_at) >= KEYS_MAX_AGE {
            return true;
        }
        self.find(kid).is_none()
            && self
                .refetched_for_unknown_at
                .is_none_or(|at| now.saturating_duration_since(at) >= UNKNOWN_KEY_REFETCH_INTERVAL)
    }

    /// The key a token names; without a `kid`, the only key there is.
    pub(crate) fn find(&self, kid: Option<&str>) -> Option<&Jwk> {
        match kid {
            Some(kid) => self
                .keys
                .iter()
                .find(|key| key.common.key_id.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
    }

    /// Records a failed fetch at `now`: the back-off before the next one.
    pub(crate) fn failed(&mut self, now: Instant) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let doublings = self.failures.saturating_sub(1).min(16);
        let backoff = BACKOFF_MIN.saturating_mul(1 << doublings).min(BACKOFF_MAX);
        self.retry_at = Some(now + backoff);
        backoff
    }

    fn found(&self, kid: Option<&str>) -> Found {
        match self.find(kid) {
            Some(key) => Found::Key(Box::new(key.clone())),
            None if self.fetched_at.is_none() => Found::Unavailable,
            None => Found::Unknown,
        }
    }
}

impl IssuerKeys {
    /// # Errors
    /// [`McpServeError::InvalidOAuth`] when the HTTP client cannot be built.
    pub(crate) fn new(issuer: &str, jwks_uri: Option<&str>) -> Result<IssuerKeys, McpServeError> {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|error| McpServeError::InvalidOAuth(format!("HTTP client: {error}")))?;
        Ok(IssuerKeys {
            inner: Arc::new(Inner {
                http,
                issuer: issuer.to_owned(),
                jwks_uri: jwks_uri.map(str::to_owned),
                cache: Mutex::new(KeyCache::default()),
            }),
        })
    }

    /// The key a token naming `kid` is checked with. A cached key answers at once (a fetch it
    /// needs runs in the background); a request whose key is not cached waits for the fetch
    /// under way, if any.
    pub(crate) async fn key(&self, kid: Option<&str>) -> Found {
        let wait = {
            let mut cache = self.inner.cache.lock();
            let now = Instant::now();
            if cache.needs_fetch(kid, now) {
                if cache.fetched_at.is_some() && cache.find(kid).is_none() {
                    cache.refetched_for_unknown_at = Some(now);
                }
                let fetch = self.clone().fetch_and_store(cache.jwks_uri.clone());
                // Run apart from this request: its client may go away mid-fetch.
                let handle = tokio::spawn(fetch);
                cache.in_flight = Some(handle.map(|_| ()).boxed().shared());
            }
            match (cache.find(kid), &cache.in_flight) {
                (None, Some(in_flight)) => in_flight.clone(),
                _ => return cache.found(kid),
            }
        };
        wait.await;
        self.inner.cache.lock().found(kid)
    }

    /// One fetch, its outcome stored: new keys, or (keys fetched before staying in use) a
    /// failure logged once and a back-off.
    async fn fetch_and_store(self, known_uri: Option<String>) {
        let fetched = self.fetch_keys(known_uri).await;
        let mut cache = self.inner.cache.lock();
        cache.in_flight = None;
        let now = Instant::now();
        match fetched {
            Ok((uri, keys)) => {
                cache.keys = keys;
                cache.jwks_uri = Some(uri);
                cache.fetched_at = Some(now);
                cache.failures = 0;
                cache.retry_at = None;
            }
            Err(error) => {
                let backoff = cache.failed(now);
                tracing::warn!(
                    issuer = %self.inner.issuer,
                    %error,
                    retry_in_s = backoff.as_secs(),
                    "MCP over HTTP: cannot fetch the OAuth issuer's keys"
                );
            }
        }
    }

    /// The key set and where it was read; its URL is discovered once and reused.
    async fn fetch_keys(&self, known_uri: Option<String>) -> Result<(String, Vec<Jwk>), String> {
        let uri = match known_uri.or_else(|| self.inner.jwks_uri.clone()) {
            Some(uri) => uri,
            None => self.discover_jwks_uri().await?,
        };
        #[derive(Deserialize)]
        struct KeySet {
            keys: Vec<serde_json::Value>,
        }
        let set: KeySet = serde_json::from_slice(&self.fetch(&uri).await?)
            .map_err(|error| format!("{uri}: not a JSON Web Key Set: {error}"))?;
        // One key of an unknown type or for encryption must not hide the others.
        let keys = set
            .keys
            .into_iter()
            .filter_map(|key| serde_json::from_value::<Jwk>(key).ok())
            .filter(|key| !matches!(key.algorithm, AlgorithmParameters::OctetKey(_)))
            .filter(|key| !matches!(key.common.public_key_use, Some(PublicKeyUse::Encryption)))
            .take(MAX_KEYS)
            .collect();
        Ok((uri, keys))
    }

    /// The `jwks_uri` of the issuer's metadata: RFC 8414 first, then OpenID Connect Discovery;
    /// the document must name the same issuer (RFC 8414 §3.3). Only a document that is not
    /// there (`404`, `410`) moves on to the next place: an issuer that fails otherwise is asked
    /// once per fetch.
    async fn discover_jwks_uri(&self) -> Result<String, String> {
        #[derive(Deserialize)]
        struct Metadata {
            issuer: Option<String>,
            jwks_uri: Option<String>,
        }
        let issuer = &self.inner.issuer;
        let mut failures = Vec::new();
        for candidate in metadata_candidates(issuer) {
            let document = match self.fetch(&candidate).await {
                Ok(document) => document,
                Err(Fetch::Absent(error)) => {
                    failures.push(error);
                    continue;
                }
                Err(Fetch::Failed(error)) => {
                    failures.push(error);
                    break;
                }
            };
            match serde_json::from_slice::<Metadata>(&document) {
                Ok(Metadata {
                    issuer: Some(named),
                    jwks_uri: Some(jwks_uri),
                }) if &named == issuer => return Ok(jwks_uri),
                Ok(_) => failures.push(format!("{candidate}: no jwks_uri for the issuer {issuer}")),
                Err(error) => failures.push(format!("{candidate}: {error}")),
            }
        }
        Err(failures.join("; "))
    }

    /// One GET, its body bounded by [`MAX_DOCUMENT_BYTES`].
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, Fetch> {
        // A metadata document may point at an https key set although the issuer is http.
        if url.starts_with("https:") {
            return Err(Fetch::Failed(format!("{url}: {NO_TLS}")));
        }
        let mut response = self
            .inner
            .http
            .get(url)
            .header(hyper::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| Fetch::Failed(format!("{url}: {}", with_causes(&error))))?;
        let status = response.status();
        if !status.is_success() {
            let error = format!("{url}: HTTP {status}");
            return Err(match status.as_u16() {
                404 | 410 => Fetch::Absent(error),
                _ => Fetch::Failed(error),
            });
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| Fetch::Failed(format!("{url}: {error}")))?
        {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(Fetch::Failed(format!(
                    "{url}: larger than {MAX_DOCUMENT_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// Why one GET gave no document.
enum Fetch {
    /// Not there (`404`, `410`): another place may hold it.
    Absent(String),
    /// The server failed or could not be reached.
    Failed(String),
}

impl From<Fetch> for String {
    fn from(fetch: Fetch) -> String {
        match fetch {
            Fetch::Absent(error) | Fetch::Failed(error) => error,
        }
    }
}

/// Where an issuer's metadata may be (RFC 8414 §3.1, OpenID Connect Discovery 1.0 §4): the
/// well-known suffix inserted before the issuer's path, then (OpenID Connect) appended to it.
pub(crate) fn metadata_candidates(issuer: &str) -> Vec<String> {
    let Ok(url) = Url::parse(issuer) else {
        return Vec::new();
    };
    let path = url.path().trim_end_matches('/');
    let inserted = |suffix: &str| {
        let mut candidate = url.clone();
        candidate.set_path(&format!("/.well-known/{suffix}{path}"));
        candidate.set_query(None);
        candidate.to_string()
    };
    let mut candidates = vec![
        inserted("oauth-authorization-server"),
        inserted("openid-configuration"),
    ];
    if !path.is_empty() {
        candidates.push(format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ));
    }
    candidates
}

/// `error` and its sources, `: `-separated: reqwest's own text alone says only "error sending
/// request", where the cause (connection refused, a timeout) is what helps.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let _ = write!(text, ": {cause}");
        source = cause.source();
    }
    text
}
