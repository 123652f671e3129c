//! The HTTP client of every OAuth request (metadata discovery, client registration, token
//! requests), built here instead of taken from rmcp's `AuthorizationManager::new`, whose client
//! cuts each request at a fixed 30 s: on a loaded machine a token request or a metadata fetch
//! takes longer, and the connect failed although its own timeout was far from spent. Each
//! request here is bounded by the longest of the server's timeouts (connect, `tools/list`,
//! call), since a token may be needed within any of them; the operation's own timeout still
//! ends it sooner.
//!
//! rmcp's client also filters the addresses it connects to, which its custom-client
//! constructor leaves to the client; this one keeps the same policy, so a server's metadata
//! cannot send the client to an internal address (server-side request forgery):
//!
//! - a host resolving to a loopback or private address is reached only when the MCP server's
//!   own URL names one of that class (a loopback or private IP literal, or `localhost`): the
//!   server's DNS answers never widen the policy, since the server may control them;
//! - link-local (cloud instance metadata among them), unspecified, broadcast, multicast and
//!   reserved addresses are never reached, the server's own literal excepted;
//! - IP-literal URLs, which are connected to without a lookup, are checked before the request
//!   and on every redirect; hosts of proxies set in the environment are not filtered (the proxy
//!   resolves the target).
//!
//! No connection is used twice. rmcp's client kept an idle one 90 s, and a server closes an idle
//! one much sooner (Node's HTTP server after 5 s; one whose event loop wakes from a stall may
//! close it with a request already waiting on it): the request then fails, reset by the peer
//! or closed before its answer. An OAuth request is rare (a few per login) and its connection
//! cheap beside that failure.
//!
//! Answers are read up to 1 MiB, redirects followed at most 10 deep where rmcp asks to follow
//! them, as rmcp's own client does.
//!
//! The address policy itself, and the resolver that applies it, are [`address_filter`]'s.

mod address_filter;

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture,
    OAuthHttpRedirectPolicy, OAuthHttpRequest,
};
use url::Url;

use address_filter::AddressFilter;
pub(crate) use address_filter::Refusals;

/// The largest OAuth answer read, in bytes (rmcp's bound).
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// The most redirects followed (rmcp's bound).
const MAX_REDIRECTS: usize = 10;

/// The environment variables naming proxies, whose hosts are not filtered.
const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// rmcp's OAuth client for the MCP server at `url`, its requests through [`OAuthClient`]
/// bounded by `bound` each.
///
/// # Errors
/// `url` is not a URL, or the HTTP client could not be built.
pub(crate) async fn manager(
    url: &str,
    bound: Duration,
) -> Result<(AuthorizationManager, Refusals), AuthError> {
    let base = Url::parse(url).map_err(|error| AuthError::InternalError(error.to_string()))?;
    let client = OAuthClient::new(&base, bound)?;
    let refusals = client.filter.refusals.clone();
    let manager = AuthorizationManager::new_with_oauth_http_client(base, Arc::new(client)).await?;
    Ok((manager, refusals))
}

/// A request to an address the filter refuses.
#[derive(Debug, thiserror::Error)]
#[error("OAuth request to `{0}` refused: the address may not be reached for this server")]
struct Refused(Url);

/// An answer longer than [`MAX_ANSWER_BYTES`].
#[derive(Debug, thiserror::Error)]
#[error("OAuth answer longer than {MAX_ANSWER_BYTES} bytes")]
struct TooLong;

/// The OAuth requests' HTTP client: one reqwest client that follows redirects (checked
/// against the filter) and one that does not, both resolving through the filter and bounding
/// each request.
pub(crate) struct OAuthClient {
    follow: reqwest::Client,
    stop: reqwest::Client,
    filter: AddressFilter,
}

impl OAuthClient {
    /// A client for the server at `base`, each request bounded by `bound`.
    fn new(base: &Url, bound: Duration) -> Result<OAuthClient, AuthError> {
        let proxies = PROXY_VARS.iter().filter_map(|var| std::env::var(var).ok());
        let filter = AddressFilter::new(base, proxies);
        let build = |redirect: reqwest::redirect::Policy| {
            reqwest::Client::builder()
                .timeout(bound)
                .pool_max_idle_per_host(0)
                .redirect(redirect)
                .dns_resolver(Arc::new(filter.clone()))
                .build()
                .map_err(|error| AuthError::InternalError(error.to_string()))
        };
        let policy = filter.clone();
        let follow = reqwest::redirect::Policy::custom(move |attempt| {
            if !policy.allows_url(attempt.url()) {
                let refused = Refused(attempt.url().clone());
                attempt.error(refused)
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!(
                    "OAuth request redirected more than {MAX_REDIRECTS} times"
                ))
            } else {
                attempt.follow()
            }
        });
        Ok(OAuthClient {
            follow: build(follow)?,
            stop: build(reqwest::redirect::Policy::none())?,
            filter,
        })
    }
}

impl OAuthClient {
    /// Sends `request` within the client's bound, following redirects when `follow`; the whole
    /// answer, read up to [`MAX_ANSWER_BYTES`].
    async fn send(
        &self,
        request: http::Request<Vec<u8>>,
        follow: bool,
    ) -> Result<http::Response<Vec<u8>>, OAuthHttpClientError> {
        let client = if follow { &self.follow } else { &self.stop };
        let request = reqwest::Request::try_from(request)?;
        if !self.filter.allows_url(request.url()) {
            return Err(Box::new(Refused(request.url().clone())));
        }
        let mut response = client.execute(request).await?;
        let mut answer = http::Response::builder()
            .status(response.status())
            .version(response.version());
        for (name, value) in response.headers() {
            answer = answer.header(name, value);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if chunk.len() > MAX_ANSWER_BYTES - body.len() {
                return Err(Box::new(TooLong));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(answer.body(body)?)
    }
}

impl OAuthHttpClient for OAuthClient {
    /// [`OAuthClient::send`]; rmcp's suggested `timeout` gives way to the client's bound.
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        let follow = !matches!(request.redirect_policy, OAuthHttpRedirectPolicy::Stop);
        Box::pin(self.send(request.request, follow))
    }
}

#[cfg(test)]
mod tests {
    use reqwest::dns::Resolve;

    use super::*;

    /// A request to an address the filter refuses is not sent; the error says why.
    #[tokio::test]
    async fn a_request_to_a_refused_address_is_not_sent() {
        let base = Url::parse("http://203.0.113.7/mcp").unwrap();
        let client = OAuthClient::new(&base, Duration::from_secs(5)).unwrap();
        for follow in [false, true] {
            let request = http::Request::get("http://169.254.169.254/latest/meta-data")
                .body(Vec::new())
                .unwrap();
            let error = client
                .send(request, follow)
                .await
                .expect_err("cloud metadata reached");
            assert!(error.downcast_ref::<Refused>().is_some(), "{error}");
        }
    }

    /// A refused request is told with the error discovery ends with, and why it was refused,
    /// instead of reading as metadata nobody published.
    #[tokio::test]
    async fn a_refused_metadata_request_is_told_with_why() {
        let base = Url::parse("http://203.0.113.7/mcp").unwrap();
        let client = OAuthClient::new(&base, Duration::from_secs(5)).unwrap();
        let refusals = client.filter.refusals.clone();
        let unchanged = refusals.explain(AuthError::NoAuthorizationSupport);
        assert_eq!(unchanged.to_string(), "No authorization support detected");
        let request = http::Request::get("http://10.0.0.6/.well-known/oauth-authorization-server")
            .body(Vec::new())
            .unwrap();
        client.send(request, false).await.expect_err("sent");
        let refused = client.filter.resolve("localhost".parse().unwrap()).await;
        assert!(refused.is_err());
        let error = refusals
            .explain(AuthError::NoAuthorizationSupport)
            .to_string();
        assert!(error.contains("refused by the address filter"), "{error}");
        assert!(
            error.contains("`http://10.0.0.6/.well-known/oauth-authorization-server`: 10.0.0.6 is a private address"),
            "{error}"
        );
        assert!(
            error.contains("`localhost` resolves to no address that may be reached"),
            "{error}"
        );
        assert!(error.contains("is a loopback address"), "{error}");
    }

    /// Each OAuth request goes on a connection of its own, even one right after another: a
    /// kept-alive one may be closed by the server as the request arrives.
    #[tokio::test]
    async fn no_connection_carries_two_oauth_requests() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buffer = [0u8; 4096];
                    while let Ok(read) = stream.read(&mut buffer).await {
                        let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
                        if read == 0 || stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let client = OAuthClient::new(&Url::parse(&url).unwrap(), Duration::from_secs(60)).unwrap();
        for _ in 0..2 {
            let request = http::Request::get(url.as_str()).body(Vec::new()).unwrap();
            let answer = client.send(request, false).await.unwrap();
            assert_eq!(answer.body(), b"{}");
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "a connection was used twice"
        );
    }

    /// A metadata answer that breaks off midway (the connection reset after the headers) got
    /// no answer either: discovery runs once more.
    #[tokio::test]
    async fn a_metadata_answer_reset_midway_is_fetched_once_more() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let number = counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !request.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(read) => request.extend_from_slice(&buffer[..read]),
                        }
                    }
                    if number == 0 {
                        // Headers and part of the body, then a reset.
                        let partial = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                                       content-length: 100\r\n\r\n{\"resource\"";
                        let _ = stream.write_all(partial.as_bytes()).await;
                        let _ = stream.flush().await;
                        stream.set_zero_linger().unwrap();
                        return;
                    }
                    let answer = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\
                                  connection: close\r\n\r\n";
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        let (manager, _) = manager(&url, Duration::from_secs(60)).await.unwrap();
        let resolved =
            crate::mcp::oauth::unanswered::discovered(|| manager.resolve_metadata()).await;
        assert!(resolved.is_ok(), "{:?}", resolved.err());
        assert!(accepted.load(Ordering::SeqCst) > 1);
    }

    /// A loopback server that answers every request `404` after `delay` (on the test's clock):
    /// its URL.
    async fn slow_server(delay: Duration) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !request.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(read) => request.extend_from_slice(&buffer[..read]),
                        }
                    }
                    tokio::time::sleep(delay).await;
                    let answer = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\
                                  connection: close\r\n\r\n";
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        url
    }

    /// Discovery whose answers take 40 s (on a paused clock, a loaded machine's pace) is waited
    /// for when the server's bound is longer (rmcp's own client cut each request at 30 s), and
    /// still ends at the bound when it is shorter.
    #[tokio::test(start_paused = true)]
    async fn an_oauth_request_is_bounded_by_the_servers_bound_not_30_s() {
        let url = slow_server(Duration::from_secs(40)).await;
        let (patient, _) = manager(&url, Duration::from_secs(120)).await.unwrap();
        let resolved = patient.resolve_metadata().await;
        assert!(resolved.is_ok(), "{:?}", resolved.err());
        let (hasty, _) = manager(&url, Duration::from_secs(10)).await.unwrap();
        let error = hasty
            .resolve_metadata()
            .await
            .expect_err("waited past the bound");
        let timed_out = match &error {
            AuthError::DiscoveryRequestFailed { source, .. } => source
                .downcast_ref::<reqwest::Error>()
                .is_some_and(reqwest::Error::is_timeout),
            _ => false,
        };
        assert!(timed_out, "{error}");
    }
}
