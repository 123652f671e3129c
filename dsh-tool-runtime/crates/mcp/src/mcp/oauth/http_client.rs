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

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture,
    OAuthHttpRedirectPolicy, OAuthHttpRequest,
};
use url::{Host, Url};

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

/// The OAuth requests the address filter refused, each with why: rmcp's discovery treats a
/// refused request like an answer without metadata ("none published usable metadata"), so
/// the refusals are kept to be told with the error.
#[derive(Clone, Default)]
pub(crate) struct Refusals(Arc<parking_lot::Mutex<Vec<String>>>);

impl Refusals {
    fn record(&self, refusal: String) {
        let mut refusals = self.0.lock();
        if !refusals.contains(&refusal) {
            refusals.push(refusal);
        }
    }

    /// `error`, with the requests the filter refused when there were any.
    pub(crate) fn explain(&self, error: AuthError) -> AuthError {
        let refusals = self.0.lock();
        if refusals.is_empty() {
            return error;
        }
        AuthError::MetadataError(format!(
            "{error}; OAuth requests refused by the address filter: {}",
            refusals.join("; ")
        ))
    }
}

/// Where an address lies, for the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AddressClass {
    Public,
    Loopback,
    Private,
    /// Link-local, unspecified, broadcast, multicast, reserved: never reached.
    Blocked,
}

impl AddressClass {
    fn of(address: IpAddr) -> AddressClass {
        match address {
            IpAddr::V4(v4) => AddressClass::of_v4(v4),
            IpAddr::V6(v6) => match embedded_v4(v6) {
                Some(v4) => AddressClass::of_v4(v4),
                None => AddressClass::of_v6(v6),
            },
        }
    }

    fn of_v4(address: Ipv4Addr) -> AddressClass {
        let [a, b, ..] = address.octets();
        if address.is_loopback() {
            AddressClass::Loopback
        } else if address.is_private() || (a == 100 && (64..=127).contains(&b)) {
            // RFC 1918 and the shared address space of carrier-grade NAT (RFC 6598).
            AddressClass::Private
        } else if address.is_link_local()
            || address.is_broadcast()
            || address.is_unspecified()
            || address.is_multicast()
            || a == 0
            // Benchmarking (RFC 2544).
            || (a == 198 && matches!(b, 18 | 19))
        {
            AddressClass::Blocked
        } else {
            AddressClass::Public
        }
    }

    fn of_v6(address: Ipv6Addr) -> AddressClass {
        let segments = address.segments();
        if address.is_loopback() {
            AddressClass::Loopback
        } else if (segments[0] & 0xfe00) == 0xfc00 {
            // Unique local addresses.
            AddressClass::Private
        } else if address.is_unspecified()
            || address.is_multicast()
            // Link-local.
            || (segments[0] & 0xffc0) == 0xfe80
            // Teredo, and local-use NAT64 (RFC 8215).
            || segments[..2] == [0x2001, 0]
            || segments[..3] == [0x64, 0xff9b, 1]
        {
            AddressClass::Blocked
        } else {
            AddressClass::Public
        }
    }
}

/// The IPv4 address inside an IPv4-mapped, IPv4-compatible, NAT64 (`64:ff9b::/96`) or 6to4
/// (`2002::/16`) address, which reaches that IPv4 address and is classed as it.
fn embedded_v4(address: Ipv6Addr) -> Option<Ipv4Addr> {
    let [a, b, c, d, e, f, g, h] = address.segments();
    let low = Ipv4Addr::from((u32::from(g) << 16) | u32::from(h));
    match [a, b, c, d, e, f] {
        [0, 0, 0, 0, 0, 0xffff] | [0x64, 0xff9b, 0, 0, 0, 0] => Some(low),
        [0, 0, 0, 0, 0, 0] if !address.is_loopback() && !address.is_unspecified() => Some(low),
        [0x2002, ..] => Some(Ipv4Addr::from((u32::from(b) << 16) | u32::from(c))),
        _ => None,
    }
}

fn literal(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        Host::Domain(_) => None,
    }
}

fn normal_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// The address policy of one MCP server's OAuth requests, and the resolver that applies it.
#[derive(Clone)]
struct AddressFilter {
    /// The server URL's own IP literal, always reachable.
    base: Option<IpAddr>,
    /// The classes besides public ones reachable: the class the server URL names.
    reachable: Arc<[AddressClass]>,
    /// Proxy hosts, resolved without the filter.
    proxies: Arc<[String]>,
    /// What it refused.
    refusals: Refusals,
}

impl AddressFilter {
    fn new(base: &Url, proxies: impl IntoIterator<Item = String>) -> AddressFilter {
        let reachable = match base.host() {
            Some(Host::Ipv4(v4)) => vec![AddressClass::of(IpAddr::V4(v4))],
            Some(Host::Ipv6(v6)) => vec![AddressClass::of(IpAddr::V6(v6))],
            Some(Host::Domain(domain)) => {
                let domain = normal_host(domain);
                if domain == "localhost" || domain.ends_with(".localhost") {
                    vec![AddressClass::Loopback]
                } else {
                    Vec::new()
                }
            }
            None => Vec::new(),
        };
        let proxies = proxies
            .into_iter()
            .filter_map(|proxy| {
                let proxy = if proxy.contains("://") {
                    proxy
                } else {
                    format!("http://{proxy}")
                };
                Url::parse(&proxy).ok()?.host_str().map(normal_host)
            })
            .collect();
        AddressFilter {
            base: literal(base),
            reachable: reachable.into(),
            proxies,
            refusals: Refusals::default(),
        }
    }

    /// Why `address` may not be reached, in words.
    fn why(address: IpAddr) -> String {
        let rule = match AddressClass::of(address) {
            AddressClass::Loopback => {
                "a loopback address, reached only when the MCP server's own URL is a loopback \
                 IP or localhost"
            }
            AddressClass::Private => {
                "a private address, reached only when the MCP server's own URL is a private IP \
                 (a host name's DNS answer never widens what may be reached)"
            }
            AddressClass::Blocked | AddressClass::Public => {
                "link-local (cloud instance metadata among them), unspecified, broadcast, \
                 multicast or reserved, never reached"
            }
        };
        format!("{address} is {rule}")
    }

    fn allows(&self, address: IpAddr) -> bool {
        match AddressClass::of(address) {
            AddressClass::Public => true,
            class @ (AddressClass::Loopback | AddressClass::Private) => {
                self.reachable.contains(&class)
            }
            AddressClass::Blocked => false,
        }
    }

    /// Whether `url` may be requested: an IP literal must be allowed (the server's own always
    /// is); a name is checked when it resolves. A refusal is recorded with why.
    fn allows_url(&self, url: &Url) -> bool {
        let allowed =
            literal(url).is_none_or(|address| self.base == Some(address) || self.allows(address));
        if let (false, Some(address)) = (allowed, literal(url)) {
            self.refusals
                .record(format!("`{url}`: {}", AddressFilter::why(address)));
        }
        allowed
    }
}

impl Resolve for AddressFilter {
    fn resolve(&self, name: Name) -> Resolving {
        let filter = self.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let lookup = host.clone();
            let resolved: Vec<SocketAddr> =
                tokio::task::spawn_blocking(move || (lookup.as_str(), 0).to_socket_addrs())
                    .await??
                    .collect();
            let host = normal_host(&host);
            if filter.proxies.contains(&host) {
                return Ok(Box::new(resolved.into_iter()) as Addrs);
            }
            let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = resolved
                .into_iter()
                .partition(|address| filter.allows(address.ip()));
            if allowed.is_empty() {
                let why = refused
                    .iter()
                    .map(|address| AddressFilter::why(address.ip()))
                    .collect::<Vec<_>>()
                    .join(", ");
                let refusal = format!("`{host}` resolves to no address that may be reached: {why}");
                filter.refusals.record(refusal.clone());
                return Err(refusal.into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
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
    use super::*;

    fn filter(base: &str) -> AddressFilter {
        AddressFilter::new(
            &Url::parse(base).unwrap(),
            ["proxy.internal:3128".to_owned()],
        )
    }

    fn reaches(filter: &AddressFilter, url: &str) -> bool {
        filter.allows_url(&Url::parse(url).unwrap())
    }

    /// A public server's metadata reaches public addresses only; a loopback or private server's
    /// also its own class; link-local (cloud metadata) and other reserved addresses never, nor
    /// a loopback or private address hidden in an IPv6 form.
    #[test]
    fn metadata_reaches_only_addresses_of_the_servers_class() {
        let public = filter("http://203.0.113.7/mcp");
        assert!(reaches(&public, "http://8.8.8.8/token"));
        assert!(
            reaches(&public, "http://as.example/token"),
            "names are checked on lookup"
        );
        for internal in [
            "http://127.0.0.1/",
            "http://10.0.0.1/",
            "http://192.168.1.1/",
            "http://100.64.0.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[fe80::1]/",
            "http://[fd00::1]/",
            "http://[2002:7f00:1::]/",
        ] {
            assert!(
                !reaches(&public, internal),
                "{internal} reached from a public server"
            );
        }
        let loopback = filter("http://127.0.0.1:3000/mcp");
        assert!(reaches(&loopback, "http://127.0.0.1:4000/token"));
        assert!(reaches(&loopback, "http://[::1]:4000/token"));
        assert!(!reaches(&loopback, "http://10.0.0.1/"));
        assert!(!reaches(&loopback, "http://169.254.169.254/"));
        let named = filter("http://localhost:3000/mcp");
        assert!(reaches(&named, "http://127.0.0.1:4000/token"));
        assert!(!reaches(&named, "http://192.168.1.1/"));
        let private = filter("http://10.0.0.5/mcp");
        assert!(reaches(&private, "http://10.1.2.3/token"));
        assert!(!reaches(&private, "http://127.0.0.1/"));
        // The server's own literal is reached whatever its class.
        assert!(reaches(
            &filter("http://169.254.1.1/mcp"),
            "http://169.254.1.1/token"
        ));
    }

    /// A name resolving to an address the server's class does not allow is not connected to;
    /// a proxy's name is resolved unfiltered.
    #[tokio::test]
    async fn a_name_resolving_to_an_internal_address_is_refused() {
        let public = filter("http://203.0.113.7/mcp");
        let refused = public.resolve("localhost".parse().unwrap()).await;
        assert!(refused.is_err(), "localhost resolved for a public server");
        let loopback = filter("http://localhost:3000/mcp");
        let resolved: Vec<_> = loopback
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(resolved.iter().all(|address| address.ip().is_loopback()));
        assert!(!resolved.is_empty());
        let proxied = AddressFilter::new(
            &Url::parse("http://203.0.113.7/mcp").unwrap(),
            ["http://localhost:3128".to_owned()],
        );
        assert!(proxied.resolve("localhost".parse().unwrap()).await.is_ok());
    }

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
