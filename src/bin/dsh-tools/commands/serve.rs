//! `serve`: code mode and the tools over MCP, on stdio or streamable HTTP, with the checks of
//! its HTTP access, limits and Restate settings that run before anything starts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use dsh_tools::durable::SqliteJournal;
use dsh_tools::mcp::{
    McpHttpAuth, McpHttpLimits, McpOAuthResource, McpServeOptions, McpTaskLimits, McpTransport,
};
use dsh_tools::{Mode, Registry};

#[cfg(feature = "restate")]
use super::RESTATE_SECRET_REPLACED;
use super::{finish_log, start_log, stop_signal, warn_exposed};
use crate::args::{HttpAccess, HttpLimits, ServeArgs};
use crate::secret_file::read_private_file;
#[cfg(feature = "restate")]
use crate::secret_file::read_restate_secret;
use crate::sources::mount_runtime;
use dsh_tools::prelude::*;

/// `serve`: until the client disconnects (stdio) or the process is told to stop (HTTP).
pub(crate) async fn serve(registry: &Registry, args: &ServeArgs) -> Result<(), String> {
    // Refused before anything starts: a token that cannot be used, or no authentication on an
    // address others can reach.
    let http = match args.http {
        Some(addr) => Some((addr, http_auth(&args.http_access, addr)?)),
        None => None,
    };
    if args.journal.is_some() && args.mode == Mode::Native {
        return Err(
            "--journal needs --mode code or both: durable runs are run_code calls, which native \
             mode does not serve"
                .to_owned(),
        );
    }
    #[cfg(feature = "restate")]
    if (args.restate.is_some() || args.restate_deployment.is_some()) && args.mode == Mode::Native {
        return Err(
            "--restate and --restate-deployment need --mode code or both: runs on Restate are \
             run_code calls, which native mode does not serve"
                .to_owned(),
        );
    }
    #[cfg(feature = "restate")]
    let restate = restate_settings(args)?;
    let stop = stop_signal();
    registry.set_mode(args.mode);
    let runtime = if args.mode == Mode::Native {
        None
    } else {
        Some(mount_runtime(registry, args.lang, args.runtime, args.budgets, true).await?)
    };
    let log = start_log(registry, args.events.as_deref())?;
    let limits = http_limits(&args.http_limits, &args.http_access);
    let mut options = McpServeOptions::default()
        .page_size(args.page_size)
        .http_limits(limits.clone());
    if let Some(tasks) = args.max_tasks_per_client {
        options = options.task_limits(
            McpTaskLimits::default().max_per_session(usize::try_from(tasks).unwrap_or(usize::MAX)),
        );
    }
    if let Some(journal) = &args.journal {
        let store = SqliteJournal::open(journal)
            .map_err(|error| format!("--journal {}: {error}", journal.display()))?;
        warn_exposed(&store);
        options = options.journal(Arc::new(store));
        if let Some(name) = &args.journal_name {
            options = options.journal_peers(name.clone(), args.journal_peer.iter().cloned());
        }
    }
    #[cfg(feature = "restate")]
    let deployment = {
        let (replica, deployment, approvals) = restate;
        if let Some(replica) = replica {
            options = options.restate(replica);
        }
        if let Some(secret) = approvals {
            registry.set_continuation_secret(secret);
        }
        serve_deployment(registry, deployment)
    };
    #[cfg(not(feature = "restate"))]
    let deployment = std::future::pending::<String>();
    // On SIGTERM or Ctrl-C the runtime is still disposed below: a running program's process
    // must not outlive the server.
    let served = match http {
        None => tokio::select! {
            served = registry.serve_mcp_with(None, McpTransport::Stdio, options) => served.map_err(|error| error.to_string()),
            failed = deployment => Err(failed),
            () = stop => Ok(()),
        },
        Some((addr, (auth, notice))) => {
            let transport = McpTransport::http(addr)
                .await
                .map_err(|error| format!("--http {addr}: {error}"))?
                .with_auth(auth);
            if let Some(bound) = transport.local_addr() {
                let hosts = transport.allowed_hosts(&limits);
                eprintln!("dsh-tools: {}", serving_line(bound, hosts.as_deref()));
            }
            // Straight to stderr, never through tracing: a generated token is shown once, to
            // whoever started the server.
            eprintln!("dsh-tools: {notice}");
            tokio::select! {
                served = registry.serve_mcp_with(None, transport, options) => served.map_err(|error| error.to_string()),
                failed = deployment => Err(failed),
                () = stop => Ok(()),
            }
        }
    };
    if let Some(runtime) = runtime {
        runtime.dispose().await;
    }
    finish_log(log).await?;
    served
}

/// The Restate settings of `serve`, checked before anything starts: the replica's (with
/// `--restate`), the deployment's address and options (with `--restate-deployment`) and the
/// secret the deployment checks approvals with (from `--restate-secret-file`).
#[cfg(feature = "restate")]
type RestateSettings = (
    Option<dsh_tools::mcp::McpRestate>,
    Option<(SocketAddr, dsh_tools::durable::restate::DeploymentOptions)>,
    Option<dsh_tools::durable::ContinuationSecret>,
);

/// Reads `serve`'s Restate flags. Errors: the old `--restate-secret`; the secret file
/// unreadable, short, a link, another user's or readable by others, or given with neither
/// `--restate` nor `--restate-deployment`; the deployment off loopback without an identity
/// key, or a key that is not one.
#[cfg(feature = "restate")]
fn restate_settings(args: &ServeArgs) -> Result<RestateSettings, String> {
    if args.restate_secret.is_some() {
        return Err(RESTATE_SECRET_REPLACED.to_owned());
    }
    let secret = match &args.restate_secret_file {
        Some(_) if args.restate.is_none() && args.restate_deployment.is_none() => {
            return Err(
                "--restate-secret-file needs --restate or --restate-deployment: it is the \
                 secret of runs on Restate"
                    .to_owned(),
            );
        }
        Some(path) => Some(read_restate_secret(path)?),
        None => None,
    };
    let mut replica = None;
    if let (Some(ingress), Some(admin)) = (&args.restate, &args.restate_admin) {
        let mut settings = dsh_tools::mcp::McpRestate::new(ingress, admin);
        if let Some(secret) = &secret {
            settings = settings.secret(secret.clone());
        }
        replica = Some(settings);
    }
    let deployment = match args.restate_deployment {
        None => None,
        Some(addr) => {
            let options = args.restate_identity_key.iter().fold(
                dsh_tools::durable::restate::DeploymentOptions::default(),
                |options, key| options.identity_key(key.trim()),
            );
            options
                .check(addr)
                .map_err(|error| format!("--restate-deployment {addr}: {error}"))?;
            Some((addr, options))
        }
    };
    let approvals = deployment
        .as_ref()
        .and(secret.as_deref())
        .map(dsh_tools::durable::ContinuationSecret::derive);
    Ok((replica, deployment, approvals))
}

/// Serves the Restate deployment of `registry` when `--restate-deployment` names an address;
/// ends only with the error that stopped it (never, without the flag).
#[cfg(feature = "restate")]
async fn serve_deployment(
    registry: &Registry,
    deployment: Option<(SocketAddr, dsh_tools::durable::restate::DeploymentOptions)>,
) -> String {
    let Some((addr, options)) = deployment else {
        return std::future::pending().await;
    };
    eprintln!("dsh-tools: serving the Restate deployment on http://{addr} (HTTP/2)");
    match dsh_tools::durable::restate::serve_deployment(registry.clone(), addr, options).await {
        Ok(()) => format!("--restate-deployment {addr}: the deployment stopped"),
        Err(error) => format!("--restate-deployment {addr}: {error}"),
    }
}

/// The start-up line of `serve --http` bound to `bound`, accepting `hosts` (`None`: any): a URL
/// a client can use, the bind, and whom the `Host` check lets in.
fn serving_line(bound: SocketAddr, hosts: Option<&[String]>) -> String {
    let port = bound.port();
    let ip = bound.ip().to_canonical();
    let url_host = if !ip.is_unspecified() {
        SocketAddr::new(ip, port).to_string()
    } else if let Some(named) = hosts.and_then(|hosts| hosts.get(3)) {
        // Past the three loopback names: the first host named, with the port unless it has one.
        if named.parse::<std::net::Ipv6Addr>().is_ok() {
            format!("[{named}]:{port}")
        } else if named.contains("]:") || (!named.starts_with('[') && named.contains(':')) {
            named.clone()
        } else {
            format!("{named}:{port}")
        }
    } else {
        format!("127.0.0.1:{port}")
    };
    let bind = if ip.is_unspecified() {
        format!("{bound}, every interface")
    } else {
        bound.to_string()
    };
    let rule = match hosts {
        Some(hosts) => format!("Host allowed: {} (--allow-host adds one)", hosts.join(", ")),
        None if ip.is_unspecified() => {
            "any Host allowed: remote clients use this machine's name or address".to_owned()
        }
        None => "any Host allowed".to_owned(),
    };
    format!("serving MCP on http://{url_host}/mcp (bound to {bind}; {rule})")
}

/// The variable `serve --http` reads its bearer token from when no `--auth-token-file` is given.
const AUTH_TOKEN_VAR: &str = "DSH_TOOLS_AUTH_TOKEN";

/// The authentication of `serve --http` on `addr`, from the first of `--oauth-issuer`, `--no-auth`,
/// `--auth-token-file`, [`AUTH_TOKEN_VAR`] and a generated token, checked as the library will;
/// with the line that tells the person who started the server what clients must send.
fn http_auth(flags: &HttpAccess, addr: SocketAddr) -> Result<(McpHttpAuth, String), String> {
    // As `--auth-token-file` is refused with these, so is the variable: a token silently unused
    // would leave the person believing it protects the server.
    if std::env::var_os(AUTH_TOKEN_VAR).is_some() {
        let other = if flags.oauth_issuer.is_some() {
            Some("--oauth-issuer (clients send OAuth access tokens)")
        } else if flags.no_auth {
            Some("--no-auth")
        } else {
            None
        };
        if let Some(other) = other {
            return Err(format!(
                "{AUTH_TOKEN_VAR} is set, but {other} takes no bearer token: unset {AUTH_TOKEN_VAR}"
            ));
        }
    }
    let header =
        |token: &str| format!("clients must send the header \"Authorization: Bearer {token}\"");
    // (authentication, where it came from for an error, the notice)
    let (auth, source, notice) = if let Some(issuer) = &flags.oauth_issuer {
        let mut resource =
            McpOAuthResource::new(issuer, flags.oauth_resource.clone().unwrap_or_default());
        for scope in &flags.oauth_scope {
            resource = resource.scope(scope);
        }
        if let Some(jwks) = &flags.oauth_jwks_uri {
            resource = resource.jwks_uri(jwks);
        }
        resource = resource.accept_plain_jwt(flags.oauth_accept_plain_jwt);
        let notice = format!(
            "clients must send an OAuth access token from {issuer} for {} (metadata: {})",
            resource.resource,
            resource.metadata_url().unwrap_or_default()
        );
        (
            McpHttpAuth::OAuth(resource),
            "--oauth-issuer".to_owned(),
            notice,
        )
    } else if flags.no_auth {
        let notice = "no authentication (--no-auth): any process that can reach the port can \
                      call the tools";
        (McpHttpAuth::None, "--no-auth".to_owned(), notice.to_owned())
    } else if let Some(path) = &flags.auth_token_file {
        let text = read_private_file(path)
            .map_err(|error| format!("--auth-token-file {}: {error}", path.display()))?;
        (
            McpHttpAuth::Bearer(text.trim().to_owned()),
            format!("--auth-token-file {}", path.display()),
            header(&format!("<the token in {}>", path.display())),
        )
    } else if let Some(token) = std::env::var_os(AUTH_TOKEN_VAR) {
        let token = token
            .into_string()
            .map_err(|_| format!("{AUTH_TOKEN_VAR} is not UTF-8"))?;
        (
            McpHttpAuth::Bearer(token.trim().to_owned()),
            AUTH_TOKEN_VAR.to_owned(),
            header(&format!("<the token in {AUTH_TOKEN_VAR}>")),
        )
    } else {
        let auth = McpHttpAuth::generate()
            .map_err(|error| format!("cannot generate a bearer token: {error}"))?;
        let notice = format!(
            "{} (generated at start; --auth-token-file or {AUTH_TOKEN_VAR} sets one)",
            header(auth.bearer_token().unwrap_or_default())
        );
        (auth, "the generated token".to_owned(), notice)
    };
    auth.check(addr)
        .map_err(|error| format!("{source}: {error}"))?;
    Ok((auth, notice))
}

/// The library's defaults, overridden by the flags given.
fn http_limits(flags: &HttpLimits, access: &HttpAccess) -> McpHttpLimits {
    let mut limits = McpHttpLimits::default();
    for origin in &access.allow_origin {
        limits = limits.allow_origin(origin.clone());
    }
    for host in &access.allow_host {
        limits = limits.allow_host(host.clone());
    }
    if let Some(connections) = flags.max_connections {
        limits = limits.max_connections(connections);
    }
    if let Some(sessions) = flags.max_sessions {
        limits = limits.max_sessions(sessions);
    }
    if let Some(ms) = flags.header_timeout_ms {
        limits = limits.header_read_timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = flags.body_timeout_ms {
        limits = limits.body_read_timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = flags.session_idle_ms {
        limits = limits.session_idle_timeout(Duration::from_millis(ms));
    }
    limits
}
