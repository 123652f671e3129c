//! The address policy of one MCP server's OAuth requests: which addresses its metadata may send
//! the client to (public ones, and loopback or private ones only when the server's own URL names
//! that class), the resolver that applies it, and what it refused, to be told with the error.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use rmcp::transport::auth::AuthError;
use url::{Host, Url};

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
pub(super) struct AddressFilter {
    /// The server URL's own IP literal, always reachable.
    base: Option<IpAddr>,
    /// The classes besides public ones reachable: the class the server URL names.
    reachable: Arc<[AddressClass]>,
    /// Proxy hosts, resolved without the filter.
    proxies: Arc<[String]>,
    /// What it refused.
    pub(super) refusals: Refusals,
}

impl AddressFilter {
    pub(super) fn new(base: &Url, proxies: impl IntoIterator<Item = String>) -> AddressFilter {
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
    pub(super) fn allows_url(&self, url: &Url) -> bool {
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
}
