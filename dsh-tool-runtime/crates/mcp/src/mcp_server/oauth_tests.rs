//! The check of access tokens against an issuer of the test's own on loopback: one that serves
//! its key set, one that holds every fetch after the first until released, one that fails.
//! Every wait is for an event (a request reaching the issuer); the bound only fails a test.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

use super::{McpOAuthResource, Verdict, Verifier};
use crate::mcp_server::oauth_keys::{
    BACKOFF_MAX, BACKOFF_MIN, KEYS_MAX_AGE, KeyCache, UNKNOWN_KEY_REFETCH_INTERVAL,
};

/// Only to fail a test that would otherwise hang.
const FAILURE_BOUND: Duration = Duration::from_secs(60);
const RESOURCE: &str = "https://tools.example/mcp";

/// A P-256 key made for these tests alone (PKCS #8 DER in hex), and its public half as a JWK.
const PRIVATE_KEY_HEX: &str = "308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420d99c31266ff9e566\
    8c3a7b19ff1a0f771cbe4eba90c2cfaf024fa28015de688ba1440342000405f4fae4e38a6ed082b44ee7ea8d\
    679fea971bf73aec9ada6490a3bd58ee668d05f9d6ff0adab1f00cbbe760270490b448d93dcd27f3782812be\
    87225e18bcaf";
const PUBLIC_X: &str = "BfT65OOKbtCCtE7n6o1nn-qXG_c67JraZJCjvVjuZo0";
const PUBLIC_Y: &str = "BfnW_wrasfAMu-dgJwSQtEjZPc0n83goEr6HIl4YvK8";

fn public_key(kid: &str) -> serde_json::Value {
    serde_json::json!({
        "kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
        "x": PUBLIC_X, "y": PUBLIC_Y,
    })
}

/// How the test issuer answers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Its key set (key `k1`), every time.
    Keys,
    /// Its key set the first time; every later request waits for [`Issuer::release`].
    HeldAfterFirst,
    /// `500` to everything.
    Failing,
}

struct Issuer {
    url: String,
    requests: Arc<AtomicUsize>,
    /// The number of each request as it arrives.
    arrived: mpsc::UnboundedReceiver<usize>,
    release: Arc<Semaphore>,
}

impl Issuer {
    async fn start(mode: Mode) -> Issuer {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Semaphore::new(0));
        let (arrive, arrived) = mpsc::unbounded_channel();
        let (count, held) = (requests.clone(), release.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (count, held, arrive) = (count.clone(), held.clone(), arrive.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(read) => head.extend_from_slice(&chunk[..read]),
                        }
                    }
                    let number = count.fetch_add(1, Ordering::SeqCst) + 1;
                    let _ = arrive.send(number);
                    if mode == Mode::HeldAfterFirst && number > 1 {
                        let _ = held.acquire().await.map(|permit| permit.forget());
                    }
                    let (status, body) = match mode {
                        Mode::Failing => ("500 Internal Server Error", "{}".to_owned()),
                        _ => (
                            "200 OK",
                            serde_json::json!({"keys": [public_key("k1")]}).to_string(),
                        ),
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Issuer {
            url,
            requests,
            arrived,
            release,
        }
    }

    /// The resource settings for this issuer, its keys read at `/keys` (discovered when
    /// `discover`).
    fn resource(&self, discover: bool) -> McpOAuthResource {
        let resource = McpOAuthResource::new(&self.url, RESOURCE);
        if discover {
            resource
        } else {
            resource.jwks_uri(format!("{}/keys", self.url))
        }
    }

    async fn next_request(&mut self) -> usize {
        tokio::time::timeout(FAILURE_BOUND, self.arrived.recv())
            .await
            .expect("a request reaches the issuer")
            .unwrap()
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Lets every held request be answered.
    fn release(&self) {
        self.release.add_permits(Semaphore::MAX_PERMITS / 2);
    }
}

/// An access token of `issuer` for [`RESOURCE`], signed with key `kid`, its header's `typ`
/// being `typ`.
fn token(issuer: &str, kid: &str, typ: Option<&str>) -> Vec<u8> {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    header.typ = typ.map(str::to_owned);
    let now = jsonwebtoken::get_current_timestamp();
    let claims = serde_json::json!({
        "iss": issuer, "aud": RESOURCE, "sub": "someone", "iat": now, "exp": now + 600,
    });
    let der: Vec<u8> = (0..PRIVATE_KEY_HEX.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&PRIVATE_KEY_HEX[at..at + 2], 16).unwrap())
        .collect();
    let key = EncodingKey::from_ec_der(&der);
    jsonwebtoken::encode(&header, &claims, &key)
        .unwrap()
        .into_bytes()
}

/// RFC 9068 §4: `typ` must say `at+jwt` (or `application/at+jwt`); a plain `JWT` (an ID token,
/// say) or none is refused, and passes only with `accept_plain_jwt`.
#[tokio::test]
async fn only_tokens_typed_at_jwt_pass_unless_plain_jwts_are_accepted() {
    let issuer = Issuer::start(Mode::Keys).await;
    let strict = Verifier::new(&issuer.resource(false)).unwrap();
    let lenient = Verifier::new(&issuer.resource(false).accept_plain_jwt(true)).unwrap();
    let refused = Verdict::Invalid("the token is not typed as an access token (typ at+jwt)");
    for typ in [
        "at+jwt",
        "application/at+jwt",
        "AT+JWT",
        "Application/At+Jwt",
    ] {
        let token = token(&issuer.url, "k1", Some(typ));
        assert!(
            matches!(strict.verify(&token).await, Verdict::Pass(_)),
            "{typ}"
        );
        assert!(
            matches!(lenient.verify(&token).await, Verdict::Pass(_)),
            "{typ}"
        );
    }
    for typ in [Some("JWT"), None] {
        let token = token(&issuer.url, "k1", typ);
        assert_eq!(strict.verify(&token).await, refused, "{typ:?}");
        assert!(
            matches!(lenient.verify(&token).await, Verdict::Pass(_)),
            "{typ:?}"
        );
    }
    for typ in ["id+jwt", "application/jwt+at", "secevent+jwt"] {
        let token = token(&issuer.url, "k1", Some(typ));
        assert_eq!(lenient.verify(&token).await, refused, "{typ}");
    }
}

/// A token naming a made-up key while the issuer is slow waits for the fetch it started; a
/// valid token is answered from the cached keys meanwhile, and one fetch serves every
/// request that needs it.
#[tokio::test]
async fn a_slow_issuer_holds_only_the_tokens_with_an_unknown_key() {
    let mut issuer = Issuer::start(Mode::HeldAfterFirst).await;
    let verifier = Arc::new(Verifier::new(&issuer.resource(false)).unwrap());
    let valid = token(&issuer.url, "k1", Some("at+jwt"));
    // A token passes for its subject, as its issuer's.
    assert_eq!(
        verifier.verify(&valid).await,
        Verdict::Pass(crate::durable::Principal::oauth_subject(
            &issuer.url,
            "someone"
        ))
    );
    assert_eq!(issuer.next_request().await, 1);

    let made_up = token(&issuer.url, "made-up", Some("at+jwt"));
    let unknown = |verifier: Arc<Verifier>, token: Vec<u8>| {
        tokio::spawn(async move { verifier.verify(&token).await })
    };
    let first = unknown(verifier.clone(), made_up.clone());
    assert_eq!(
        issuer.next_request().await,
        2,
        "the refetch reaches the issuer"
    );
    let second = unknown(verifier.clone(), made_up);

    let answered = tokio::time::timeout(FAILURE_BOUND, verifier.verify(&valid))
        .await
        .expect("a valid token is answered while the issuer is held");
    assert!(matches!(answered, Verdict::Pass(_)));
    assert!(!first.is_finished());

    issuer.release();
    let unknown_key = Verdict::Invalid("the token's signing key is unknown");
    assert_eq!(first.await.unwrap(), unknown_key);
    assert_eq!(second.await.unwrap(), unknown_key);
    assert_eq!(issuer.requests(), 2, "one fetch for both");
}

/// Counts the warnings logged on this thread.
struct Warnings(Arc<AtomicUsize>);

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A failing issuer is asked once, not once per request nor once per well-known place: later
/// requests are answered `503` at once during the back-off, and the failure is logged once.
#[tokio::test]
async fn a_failing_issuer_is_fetched_once_then_backed_off() {
    let warnings = Arc::new(AtomicUsize::new(0));
    let _logged = tracing::subscriber::set_default(Warnings(warnings.clone()));
    let mut issuer = Issuer::start(Mode::Failing).await;
    let verifier = Verifier::new(&issuer.resource(true)).unwrap();
    let token = token(&issuer.url, "k1", Some("at+jwt"));
    for _ in 0..5 {
        assert_eq!(verifier.verify(&token).await, Verdict::KeysUnavailable);
    }
    assert_eq!(issuer.next_request().await, 1);
    assert_eq!(issuer.requests(), 1);
    assert_eq!(
        warnings.load(Ordering::SeqCst),
        1,
        "one warning per back-off"
    );
}

fn key(kid: &str) -> Jwk {
    serde_json::from_value(public_key(kid)).unwrap()
}

/// The first request fetches; a known key is used from the cache until it is 10 minutes old;
/// an unknown key refetches once, then not again for 30 s; after failures no fetch starts
/// until a back-off doubling from 5 s to 5 minutes has passed.
#[test]
fn keys_are_refetched_for_age_and_unknown_keys_at_a_bounded_rate_with_back_off() {
    let start = Instant::now();
    let mut cache = KeyCache::default();
    assert!(cache.needs_fetch(Some("a"), start));
    cache.keys = vec![key("a")];
    cache.fetched_at = Some(start);
    assert!(!cache.needs_fetch(Some("a"), start + Duration::from_secs(599)));
    assert!(cache.needs_fetch(Some("a"), start + KEYS_MAX_AGE));
    assert!(cache.needs_fetch(Some("b"), start));
    cache.refetched_for_unknown_at = Some(start);
    assert!(!cache.needs_fetch(Some("b"), start + Duration::from_secs(29)));
    assert!(cache.needs_fetch(Some("b"), start + UNKNOWN_KEY_REFETCH_INTERVAL));
    // Without a kid, the only key is used; with two, none is guessed.
    assert!(cache.find(None).is_some());
    cache.keys.push(key("b"));
    assert!(cache.find(None).is_none());
    assert!(cache.find(Some("b")).is_some());

    let mut failing = KeyCache::default();
    let mut now = start;
    let mut backoffs = Vec::new();
    for _ in 0..9 {
        let backoff = failing.failed(now);
        assert!(!failing.needs_fetch(None, now + backoff - Duration::from_millis(1)));
        assert!(failing.needs_fetch(None, now + backoff));
        backoffs.push(backoff.as_secs());
        now += backoff;
    }
    assert_eq!(backoffs, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
    assert_eq!((BACKOFF_MIN.as_secs(), BACKOFF_MAX.as_secs()), (5, 300));
}
