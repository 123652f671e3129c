//! The arguments of `serve`: mode and runtime, journal and Restate, the HTTP listener's access
//! rules (authentication, OAuth, origins, hosts) and limits, and their value parsers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use clap::Args;
use dsh_tools::Mode;
use dsh_tools::sdk::Language;

use super::{Budgets, RuntimeKind, parse_language, parse_mode, parse_runtime};

/// `serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// How the tools are presented: native, code (only `run_code`) or both.
    #[arg(long, default_value = "native", value_parser = parse_mode)]
    pub mode: Mode,
    /// The language of code-mode programs: ts or py.
    #[arg(long, default_value = "ts", value_parser = parse_language)]
    pub lang: Language,
    /// The code runtime: subprocess (full Node.js or CPython) or embedded (QuickJS / Monty).
    #[arg(long, default_value = "subprocess", value_parser = parse_runtime)]
    pub runtime: RuntimeKind,
    /// Serve streamable HTTP on ADDR (`PORT`, `:PORT` or `HOST:PORT`; host default 127.0.0.1)
    /// instead of stdio. Clients must send a bearer token: printed on stderr at start unless
    /// given (`--auth-token-file`, `DSH_TOOLS_AUTH_TOKEN`), or an OAuth access token
    /// (`--oauth-issuer`).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub http: Option<SocketAddr>,
    /// Tools per `tools/list` page.
    #[arg(long, default_value_t = 100)]
    pub page_size: usize,
    /// Write every pipeline event to PATH as JSON lines (zstd when PATH ends in `.zst`).
    #[arg(long, value_name = "PATH")]
    pub events: Option<PathBuf>,
    /// Make every served `run_code` call a durable run journaled in FILE (SQLite; servers on
    /// one machine may share it). A run an approval parks asks the person at the MCP host and
    /// resumes on whichever server gets the answer; `dsh-tools runs --journal FILE` lists the
    /// runs.
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// The name this server signs its parked runs' continuations with (default: a random one,
    /// so a restarted server no longer resumes its old runs over MCP; `runs` still can).
    #[arg(long, value_name = "NAME", requires = "journal")]
    pub journal_name: Option<String>,
    /// Also take the continuations of the server named NAME (repeatable): servers sharing one
    /// journal name each other so that any of them takes a client's retry.
    #[arg(long, value_name = "NAME", requires = "journal_name")]
    pub journal_peer: Vec<String>,
    /// Run every served `run_code` call on Restate, started through its ingress at URL
    /// (`http://HOST:PORT`, Restate's default port 8080) as an invocation of `DurableRuns/run`.
    /// A task's id is the invocation id and its HMAC under `--restate-secret-file`, so
    /// `tasks/get` and `tasks/cancel` are answered by any server on the same Restate with the
    /// same secret, and never for an invocation started on the ingress directly. Needs
    /// `--restate-admin`; the runs are served by the
    /// deployment registered with Restate (`--restate-deployment`).
    #[cfg(feature = "restate")]
    #[arg(
        long,
        value_name = "URL",
        requires = "restate_admin",
        conflicts_with = "journal"
    )]
    pub restate: Option<String>,
    /// The Restate admin API (`http://HOST:PORT`, Restate's default port 9070): task status and
    /// cancellation.
    #[cfg(feature = "restate")]
    #[arg(long, value_name = "URL", requires = "restate")]
    pub restate_admin: Option<String>,
    /// The one secret of a Restate deployment, read from FILE (at least 32 bytes, e.g.
    /// `head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE`; refused when group or others
    /// may read it, another user owns it or it is a symbolic link). A replica (`--restate`)
    /// tags its task ids with an HMAC of the invocation id under it, and `tasks/get` and
    /// `tasks/cancel` answer only ids whose HMAC checks; the deployment
    /// (`--restate-deployment`) checks approvals with a key derived from it, as `runs
    /// --restate ... --restate-secret-file FILE` signs them. Every replica and deployment of
    /// the service holds the same file. Without it a replica makes its own secret, answering
    /// only the tasks it started, and no run of the deployment can be approved or denied.
    #[cfg(feature = "restate")]
    #[arg(long, value_name = "FILE")]
    pub restate_secret_file: Option<PathBuf>,
    /// Also serve the Restate deployment of these tools (the `DurableRuns` service, HTTP/2
    /// without TLS) on ADDR (`PORT`, `:PORT` or `HOST:PORT`; host default 127.0.0.1). Register
    /// it, or a load balancer in front of several servers, with Restate's admin API. Off
    /// loopback it needs `--restate-identity-key`.
    #[cfg(feature = "restate")]
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub restate_deployment: Option<SocketAddr>,
    /// The public key (`publickeyv1_…`) of the Restate server allowed to call the deployment:
    /// the server signs every request with the private key of its
    /// `request-identity-private-key-pem-file` and logs this key at start (`Loaded request
    /// identity key`); any other request is answered 401. Repeat it while rotating keys.
    /// Required when `--restate-deployment` is not on loopback.
    #[cfg(feature = "restate")]
    #[arg(long, value_name = "KEY", requires = "restate_deployment")]
    pub restate_identity_key: Vec<String>,
    /// Replaced by --restate-secret-file: refused, naming it.
    #[cfg(feature = "restate")]
    #[arg(long, value_name = "FILE", hide = true)]
    pub restate_secret: Option<PathBuf>,
    /// Tasks one client may have live at once, working or keeping a result (default 16; at
    /// least 1; the server keeps 64 in all). A client is an OAuth subject under
    /// `--oauth-issuer`, else an MCP session; requests without a session (stateless
    /// 2026-07-28 requests, stdio) share one share. A call past it is answered with an
    /// `isError` result saying so, and does not run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tasks_per_client: Option<u64>,
    #[command(flatten)]
    pub budgets: Budgets,
    #[command(flatten)]
    pub http_limits: HttpLimits,
    #[command(flatten)]
    pub http_access: HttpAccess,
}

/// Who `serve --http` lets in; each needs `--http`.
#[derive(Debug, Args, Default)]
pub(crate) struct HttpAccess {
    /// Serve browser requests from ORIGIN (`SCHEME://HOST:PORT`, `SCHEME://HOST:*` for any
    /// port, or `null`; repeatable). A request whose `Origin` header names another is answered
    /// 403; requests without one are not affected (default: no origin allowed).
    #[arg(long, value_name = "ORIGIN", requires = "http", value_parser = parse_origin)]
    pub allow_origin: Vec<String>,
    /// Serve requests whose `Host` header names HOST (a name or address, `HOST:PORT` for one
    /// port; repeatable), e.g. the name remote clients use. Other hosts are answered 403 (against
    /// DNS rebinding). On a loopback `--http` only `localhost`, `127.0.0.1` and `::1` are served
    /// without it; elsewhere any host is, unless this names some. The host of
    /// `--oauth-resource` is always allowed.
    #[arg(long, value_name = "HOST", requires = "http", value_parser = parse_host)]
    pub allow_host: Vec<String>,
    /// Clients must send the token in FILE (surrounding whitespace trimmed) as `Authorization:
    /// Bearer TOKEN`. Without it, the token is `DSH_TOOLS_AUTH_TOKEN`'s, else one generated at
    /// start and printed on stderr.
    #[arg(
        long,
        value_name = "FILE",
        requires = "http",
        conflicts_with = "no_auth"
    )]
    pub auth_token_file: Option<PathBuf>,
    /// Serve without authentication: any process that can reach the port can call the tools.
    /// Refused unless the `--http` address is loopback (127.0.0.1, ::1).
    #[arg(long, requires = "http")]
    pub no_auth: bool,
    /// OAuth 2.1: clients must send a JWT access token issued by the authorization server
    /// ISSUER (its `iss`) for `--oauth-resource`, checked against the issuer's published keys
    /// (found from its metadata, or `--oauth-jwks-uri`). The RFC 9728 metadata is served at
    /// `/.well-known/oauth-protected-resource`. Needs `--oauth-resource`.
    #[arg(
        long,
        value_name = "ISSUER",
        requires_all = ["http", "oauth_resource"],
        conflicts_with_all = ["no_auth", "auth_token_file"]
    )]
    pub oauth_issuer: Option<String>,
    /// This server's public URL as clients reach it (e.g. `https://tools.example.com/mcp`):
    /// the audience (`aud`) every token must name.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub oauth_resource: Option<String>,
    /// A scope every token must hold (repeatable); a token without it is answered 403
    /// `insufficient_scope`.
    #[arg(long, value_name = "SCOPE", requires = "oauth_issuer")]
    pub oauth_scope: Vec<String>,
    /// Read the issuer's JSON Web Key Set here instead of discovering it.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub oauth_jwks_uri: Option<String>,
    /// Also accept access tokens whose JWT `typ` is `JWT` or absent, for an authorization
    /// server that does not type its access tokens `at+jwt` (RFC 9068 §2.1). Without it such a
    /// token is answered 401: an ID token the issuer made for this server would pass otherwise.
    #[arg(long, requires = "oauth_issuer")]
    pub oauth_accept_plain_jwt: bool,
}

/// What `serve --http` allows its clients; each needs `--http`.
#[derive(Debug, Args, Clone, Copy, Default)]
pub(crate) struct HttpLimits {
    /// Connections open at once; one more is answered 503 and closed (default 512).
    #[arg(long, value_name = "N", requires = "http")]
    pub max_connections: Option<usize>,
    /// MCP sessions alive at once; one more `initialize` is answered 503 (default 256).
    #[arg(long, value_name = "N", requires = "http")]
    pub max_sessions: Option<usize>,
    /// Time a client may take to send a request's headers, or a kept-alive connection may wait
    /// for its next request, in ms (default 30000).
    #[arg(long, value_name = "MS", requires = "http")]
    pub header_timeout_ms: Option<u64>,
    /// Longest pause within a request body, in ms (default 30000).
    #[arg(long, value_name = "MS", requires = "http")]
    pub body_timeout_ms: Option<u64>,
    /// Time after which a session without requests ends, in ms (default 300000).
    #[arg(long, value_name = "MS", requires = "http")]
    pub session_idle_ms: Option<u64>,
}

/// `null` or `SCHEME://AUTHORITY` without a path: the shape of an `Origin` header (RFC 6454
/// §7), so a mistyped entry is refused here instead of silently matching nothing.
fn parse_origin(value: &str) -> Result<String, String> {
    let origin = value == "null"
        || value.split_once("://").is_some_and(|(scheme, authority)| {
            scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !authority.is_empty()
                && !authority.contains(['/', '?', '#', '@'])
        });
    if origin {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "\"{value}\" is not an origin (SCHEME://HOST:PORT, SCHEME://HOST:* or null)"
        ))
    }
}

/// A `Host` header value: a name or address (IPv6 alone, or in brackets), optionally `:PORT`.
fn parse_host(value: &str) -> Result<String, String> {
    let name = |host: &str| {
        !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
    };
    let port = |port: &str| port.parse::<u16>().is_ok();
    let host = value.parse::<Ipv6Addr>().is_ok()
        || match value.strip_prefix('[') {
            Some(rest) => rest.split_once(']').is_some_and(|(address, after)| {
                address.parse::<Ipv6Addr>().is_ok()
                    && (after.is_empty() || after.strip_prefix(':').is_some_and(port))
            }),
            None => match value.split_once(':') {
                Some((host, rest)) => name(host) && port(rest),
                None => name(value),
            },
        };
    if host {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "\"{value}\" is not a host (a name or address, optionally :PORT)"
        ))
    }
}

/// `PORT`, `:PORT` or `HOST:PORT`; a missing host is loopback, never every interface.
fn parse_addr(value: &str) -> Result<SocketAddr, String> {
    let port_only = value.strip_prefix(':').unwrap_or(value);
    if let Ok(port) = port_only.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Some(Ok(port)) = value.strip_prefix("localhost:").map(str::parse::<u16>) {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    value
        .parse::<SocketAddr>()
        .map_err(|_| format!("\"{value}\" is not PORT, :PORT or HOST:PORT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_loopback() {
        let loopback = |port| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        assert_eq!(parse_addr("8080"), Ok(loopback(8080)));
        assert_eq!(parse_addr(":0"), Ok(loopback(0)));
        assert_eq!(parse_addr("localhost:7"), Ok(loopback(7)));
        assert_eq!(parse_addr("0.0.0.0:9").unwrap().ip().to_string(), "0.0.0.0");
        assert!(parse_addr("nowhere").is_err());
    }

    #[test]
    fn origins_have_a_scheme_and_no_path() {
        for origin in ["http://localhost:5173", "https://app.example:*", "null"] {
            assert_eq!(parse_origin(origin), Ok(origin.to_owned()));
        }
        for wrong in [
            "localhost:5173",
            "http://",
            "http://a.example/app",
            "://a",
            "*",
        ] {
            assert!(parse_origin(wrong).is_err(), "{wrong}");
        }
    }
}
