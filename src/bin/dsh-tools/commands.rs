//! One handler per subcommand. Each returns its output or a one-line error.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_tools::durable::{
    CallOutcome, DurableRun, EntryState, JournalStore, OpenMode, RunStatus, SqliteJournal,
};
use dsh_tools::events::{EventLog, ToolEvent};
use dsh_tools::mcp::{
    McpHttpAuth, McpHttpLimits, McpOAuthResource, McpServeOptions, McpTaskLimits, McpTransport,
};
use dsh_tools::sdk::Language;
use dsh_tools::{Mode, Registry, ToolCall, ToolResult};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::args::{
    CallArgs, HttpAccess, HttpLimits, ReplayArgs, RunArgs, RunsAction, RunsArgs, SdkArgs,
    ServeArgs, ToolsArgs, ViewArgs,
};
use crate::secret_file::read_private_file;
#[cfg(feature = "restate")]
use crate::secret_file::read_restate_secret;
use crate::sources::mount_runtime;
use crate::terminal::{escaped, pretty};
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

/// The refusal of the spelling `--restate-secret`, which the one secret file replaced.
pub(crate) const RESTATE_SECRET_REPLACED: &str = "--restate-secret was replaced by --restate-secret-file \
     FILE: one secret file (at least 32 bytes, mode 0600, e.g. `head -c 32 /dev/urandom | base64 \
     > FILE; chmod 600 FILE`) tags task ids and signs approvals, for every replica, deployment \
     and `runs --restate`";

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

/// Resolves on SIGINT (Ctrl-C), SIGTERM or SIGHUP (the terminal went away). The handlers are
/// installed when this is called, so call it before starting anything a signal must stop: until
/// then a signal ends the process at once and leaves its children behind.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let [interrupt, terminate, hangup] = [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ]
    .map(|kind| signal(kind).ok());
    let wait = |stream: Option<tokio::signal::unix::Signal>| async move {
        match stream {
            Some(mut stream) => {
                stream.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    async move {
        tokio::select! {
            () = wait(interrupt) => {}
            () = wait(terminate) => {}
            () = wait(hangup) => {}
        }
    }
}

/// `tools`.
pub(crate) async fn tools(
    registry: &Registry,
    args: &ToolsArgs,
    json_output: bool,
) -> Result<String, String> {
    let schemas = registry.schemas_for(None, args.dialect);
    if json_output {
        let list: Vec<Value> = schemas
            .iter()
            .map(|schema| match &schema.parameters {
                Ok(parameters) => json!({"name": schema.name, "description": schema.description, "parameters": parameters}),
                Err(error) => json!({"name": schema.name, "description": schema.description, "error": error.to_string()}),
            })
            .collect();
        return Ok(pretty(&Value::Array(list)));
    }
    let mut out = String::new();
    for schema in &schemas {
        // A server's names and descriptions never drive the terminal.
        out.push_str(&escaped(&schema.name));
        out.push('\n');
        out.push_str(&format!("  {}\n", escaped(first_line(&schema.description))));
        match &schema.parameters {
            Ok(parameters) => {
                out.push_str(&format!(
                    "  parameters: {}\n",
                    escaped(&parameters.to_string())
                ));
            }
            Err(error) => out.push_str(&format!(
                "  not expressible in {}: {error}\n",
                args.dialect.as_str()
            )),
        }
    }
    out.push_str(&format!(
        "{} tools ({})",
        schemas.len(),
        args.dialect.as_str()
    ));
    Ok(out)
}

/// `sdk`.
pub(crate) async fn sdk(
    registry: &Registry,
    args: &SdkArgs,
    json_output: bool,
) -> Result<String, String> {
    let text = registry.sdk(None, args.lang);
    if json_output {
        return Ok(pretty(
            &json!({"language": language_name(args.lang), "text": text}),
        ));
    }
    Ok(text.trim_end().to_owned())
}

/// `view`.
pub(crate) async fn view(
    registry: &Registry,
    args: &ViewArgs,
    json_output: bool,
) -> Result<String, String> {
    registry.set_mode(args.mode);
    let runtime = if args.mode == Mode::Native {
        None
    } else {
        Some(mount_runtime(registry, args.lang, args.runtime, Default::default(), false).await?)
    };
    let view = registry.model_view(None).map_err(|error| error.to_string());
    if let Some(runtime) = runtime {
        runtime.dispose().await;
    }
    let view = view?;
    if json_output {
        return Ok(pretty(
            &serde_json::to_value(&view).map_err(|error| error.to_string())?,
        ));
    }
    let mut out = format!("mode: {}\n\ntools:\n", view.mode);
    for tool in &view.tools {
        out.push_str(&format!(
            "- {}: {}\n  parameters: {}\n",
            tool.name,
            first_line(&tool.description),
            tool.parameters
        ));
    }
    for section in &view.sections {
        out.push_str(&format!(
            "\n--- prompt section {} (order {}) ---\n{}\n",
            section.id,
            section.order,
            section.text.trim_end()
        ));
    }
    Ok(out.trim_end().to_owned())
}

/// `call`.
pub(crate) async fn call(
    registry: &Registry,
    args: &CallArgs,
    json_output: bool,
) -> Result<String, String> {
    let arguments: Value = match &args.arguments {
        None => json!({}),
        Some(text) => serde_json::from_str(text)
            .map_err(|error| format!("invalid JSON arguments: {error}"))?,
    };
    if registry.get(&args.name, None).is_none() {
        return Err(unknown_tool(registry, &args.name));
    }
    let log = start_log(registry, args.events.as_deref())?;
    let result = registry
        .execute(ToolCall::new("cli-1", args.name.clone(), arguments))
        .await;
    finish_log(log).await?;
    settle(&result, json_output)
}

/// `run`: progress lines (tool, ms, ok/error) on stderr as the program's calls settle.
pub(crate) async fn run(
    registry: &Registry,
    args: &RunArgs,
    json_output: bool,
) -> Result<String, String> {
    let program = std::fs::read_to_string(&args.file)
        .map_err(|error| format!("cannot read {}: {error}", args.file.display()))?;
    let language = args.lang.unwrap_or_else(|| language_of_file(&args.file));
    let stop = stop_signal();
    registry.set_mode(Mode::Code);
    let runtime = mount_runtime(registry, language, args.runtime, args.budgets, false).await?;
    let log = start_log(registry, args.events.as_deref())?;
    let mut events = registry.subscribe();
    let mut call = ToolCall::new(
        "cli-run",
        "run_code",
        json!({"code": program, "description": format!("Run {}", args.file.display())}),
    );
    if let (Some(journal), Some(run_id)) = (&args.journal, &args.run_id) {
        call = call.durable(durable_run(journal, run_id, OpenMode::Create)?);
    }
    // Boxed, so it can be dropped (ending the run) before the runtime is disposed on a signal.
    let mut execution = Box::pin(registry.execute(call));
    tokio::pin!(stop);
    let mut started: HashMap<String, Instant> = HashMap::new();
    // `None`: a signal came first.
    let result = loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Ok(event) => progress_line(&event, &mut started),
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break Some((&mut execution).await),
            },
            result = &mut execution => break Some(result),
            () = &mut stop => break None,
        }
    };
    while let Ok(event) = events.try_recv() {
        progress_line(&event, &mut started);
    }
    // After a signal the program's process goes with the command: the run ends when its call is
    // dropped, and disposing waits for that.
    drop(execution);
    runtime.dispose().await;
    finish_log(log).await?;
    match result {
        Some(result) => settle(&result, json_output),
        None => Err("stopped by a signal before the program finished".to_owned()),
    }
}

fn durable_run(journal: &Path, run_id: &str, mode: OpenMode) -> Result<DurableRun, String> {
    Ok(DurableRun::new(
        Arc::new(open_journal(journal, mode)?),
        run_id,
    ))
}

fn open_journal(journal: &Path, mode: OpenMode) -> Result<SqliteJournal, String> {
    let store =
        SqliteJournal::open_with(journal, mode).map_err(|error| format!("--journal: {error}"))?;
    warn_exposed(&store);
    Ok(store)
}

/// Says on stderr, once per command, which of the journal's files other users can read.
fn warn_exposed(store: &SqliteJournal) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let exposed = store.readable_by_others();
    if exposed.is_empty() || WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let mut stderr = std::io::stderr().lock();
    for (file, mode) in exposed {
        let _ = writeln!(
            stderr,
            "warning: journal file {} is readable by other users (mode {mode:04o}); it holds \
             every program, argument and result verbatim (chmod 600 it)",
            escaped(&file.display().to_string())
        );
    }
}

/// `runs list` and `runs show`, which need no tool source and only read the journal; `None`
/// for the other actions.
pub(crate) async fn runs_offline(
    args: &RunsArgs,
    json_output: bool,
) -> Result<Option<String>, String> {
    if args.restate_secret.is_some() {
        return Err(RESTATE_SECRET_REPLACED.to_owned());
    }
    let journal = match (&args.journal, &args.restate) {
        (_, Some(ingress)) => {
            return crate::restate_runs::runs(
                ingress,
                args.restate_admin.as_deref(),
                args.restate_secret_file.as_deref(),
                &args.action,
                json_output,
            )
            .await
            .map(Some);
        }
        (Some(journal), None) => journal,
        (None, None) => return Err("runs: give --journal FILE or --restate INGRESS_URL".to_owned()),
    };
    if !matches!(args.action, RunsAction::List | RunsAction::Show { .. }) {
        // Checked before the tool source is loaded: a mistyped path is not a new journal.
        open_journal(journal, OpenMode::Existing)?;
        return Ok(None);
    }
    let store: Arc<dyn JournalStore> = Arc::new(open_journal(journal, OpenMode::ReadOnly)?);
    match &args.action {
        RunsAction::List => {
            let runs = store.runs().await.map_err(|error| error.to_string())?;
            if json_output {
                return Ok(Some(pretty(
                    &serde_json::to_value(&runs).map_err(|e| e.to_string())?,
                )));
            }
            let lines: Vec<String> = runs
                .iter()
                .map(|run| {
                    let mut line = format!("{} {}", escaped(&run.run_id), status_line(&run.status));
                    if run.status == RunStatus::Running {
                        line.push_str(&format!(
                            " (or cut off: resume it with `dsh-tools <tool source> runs --journal \
                             {} resume {}`)",
                            escaped(&journal.display().to_string()),
                            escaped(&run.run_id)
                        ));
                    }
                    line
                })
                .collect();
            Ok(Some(if lines.is_empty() {
                "no runs".to_owned()
            } else {
                lines.join("\n")
            }))
        }
        RunsAction::Show { id } => {
            let run = store
                .run(id)
                .await
                .map_err(|error| error.to_string())?
                .ok_or_else(|| format!("no run {id:?}"))?;
            let entries = store.entries(id).await.map_err(|error| error.to_string())?;
            if json_output {
                return Ok(Some(pretty(&json!({"run": run, "calls": entries}))));
            }
            let mut out = format!("{} {}\n", escaped(&run.run_id), status_line(&run.status));
            out.push_str(&format!("scope: {}\n", scope_line(&run.program)));
            if let RunStatus::Parked { .. } = &run.status {
                // Issued to the journal's owner (who alone can read its secret) for exactly the
                // waiting call: a later call of the run needs another.
                let parked = Registry::new()
                    .parked_run(&DurableRun::new(store.clone(), id.clone()))
                    .await
                    .map_err(|error| error.to_string())?;
                out.push_str(&format!("continuation: {}\n", parked.continuation));
            }
            if let RunStatus::Finished {
                outcome: CallOutcome::Err { message, code },
            } = &run.status
            {
                out.push_str(&format!(
                    "failure: {}\n",
                    failure_text(message, code.as_deref())
                ));
            }
            for entry in &entries {
                let state = match &entry.state {
                    EntryState::Started => "started (outcome unknown)".to_owned(),
                    EntryState::Finished {
                        outcome: CallOutcome::Err { message, code },
                    } => format!("failed: {}", failure_text(message, code.as_deref())),
                    EntryState::Finished { .. } => "ok".to_owned(),
                    EntryState::Parked { .. } => "parked".to_owned(),
                    EntryState::Approved => "approved".to_owned(),
                    EntryState::Reverted { .. } => "reverted".to_owned(),
                };
                out.push_str(&format!(
                    "#{} {}({}) {state}\n",
                    entry.seq,
                    escaped(&entry.tool),
                    escaped(&entry.args)
                ));
            }
            Ok(Some(out.trim_end().to_owned()))
        }
        _ => Ok(None),
    }
}

/// The agent scope and mode a run's journaled program records (`agent "support" (mode
/// code)`, `the registry (mode both)`): where its calls resolve and where it resumes.
fn scope_line(program: &Value) -> String {
    let Some(scope) = program.get("scope") else {
        return "not recorded (it resumes in any scope)".to_owned();
    };
    let mode = escaped(scope["mode"].as_str().unwrap_or("unknown"));
    match scope["agent"].as_str() {
        Some(agent) => format!("agent \"{}\" (mode {mode})", escaped(agent)),
        None => format!("the registry (mode {mode})"),
    }
}

fn status_line(status: &RunStatus) -> String {
    match status {
        RunStatus::Running => "running".to_owned(),
        RunStatus::Parked {
            seq, tool, reason, ..
        } => format!(
            "parked at call #{seq} {}: {}",
            escaped(tool),
            escaped(reason.as_deref().unwrap_or("approval required"))
        ),
        RunStatus::Finished { outcome } if outcome.is_error() => "failed".to_owned(),
        RunStatus::Finished { .. } => "finished".to_owned(),
        RunStatus::RolledBack => "rolled back".to_owned(),
    }
}

/// A refused approval or denial; a refused continuation says where a valid one comes from.
fn decision_error(error: &dsh_tools::durable::JournalError) -> String {
    match error {
        dsh_tools::durable::JournalError::Continuation(refusal) => format!(
            "{} ({}; `runs show ID` prints the continuation of a parked run)",
            error,
            refusal.code()
        ),
        other => other.to_string(),
    }
}

/// `runs approve|deny|rollback`: over the loaded tools; a resumed run prints as `run` does.
pub(crate) async fn runs(
    registry: &Registry,
    args: &RunsArgs,
    json_output: bool,
) -> Result<String, String> {
    let Some(journal) = &args.journal else {
        return Err("runs: give --journal FILE or --restate INGRESS_URL".to_owned());
    };
    registry.set_mode(Mode::Code);
    let runtime =
        mount_runtime(registry, args.lang, args.runtime, Default::default(), false).await?;
    let run = |id: &str| durable_run(journal, id, OpenMode::Existing);
    let store = || {
        open_journal(journal, OpenMode::Existing)
            .map(|store| Arc::new(store) as Arc<dyn JournalStore>)
    };
    let outcome = match &args.action {
        RunsAction::Approve { id } => match store() {
            Ok(store) => with_progress(registry, registry.approve_run(store, id))
                .await
                .map_err(|error| decision_error(&error))
                .and_then(|result| settle(&result, json_output)),
            Err(error) => Err(error),
        },
        RunsAction::Deny { id, reason } => match store() {
            Ok(store) => with_progress(registry, registry.deny_run(store, id, reason.clone()))
                .await
                .map_err(|error| decision_error(&error))
                .and_then(|result| settle(&result, json_output)),
            Err(error) => Err(error),
        },
        RunsAction::Resume { id } => match run(id) {
            Ok(run) => with_progress(registry, registry.resume_run(run))
                .await
                .map_err(|error| error.to_string())
                .and_then(|result| settle(&result, json_output)),
            Err(error) => Err(error),
        },
        RunsAction::Rollback {
            id,
            revert,
            revert_unknown,
        } => {
            let mut unknown = None;
            for (tool, revert_tool) in revert {
                if registry.get(revert_tool, None).is_none() {
                    unknown = Some(format!(
                        "--revert {tool}={revert_tool}: no tool named {revert_tool:?} is loaded"
                    ));
                }
                registry.set_revert(tool.clone(), revert_tool.clone());
            }
            match unknown.map_or_else(|| run(id), Err) {
                Ok(run) => registry
                    .rollback_run_reverting_unknown(run, revert_unknown)
                    .await
                    .map_err(|error| {
                        let mut message = error.to_string();
                        if matches!(error, dsh_tools::durable::JournalError::NoRevert { .. }) {
                            message.push_str(" (name one with --revert TOOL=REVERT_TOOL)");
                        }
                        message
                    })
                    .and_then(|reverts| {
                        let text = rollback_text(&reverts, json_output);
                        let failed = reverts
                            .iter()
                            .filter(|r| r.outcome.is_error() && !skipped(r))
                            .count();
                        let unknown: Vec<String> = reverts
                            .iter()
                            .filter(|r| skipped(r))
                            .map(|r| format!("#{}", r.seq))
                            .collect();
                        if failed == 0 && unknown.is_empty() {
                            return Ok(text);
                        }
                        // The reports still print: they say which calls stay in place.
                        println!("{text}");
                        let mut problems = Vec::new();
                        if failed > 0 {
                            problems.push(format!(
                                "{failed} revert(s) failed (rolling back again retries them)"
                            ));
                        }
                        if !unknown.is_empty() {
                            problems.push(format!(
                                "call(s) {} were cut off while they ran and may have happened: \
                                 not reverted (--revert-unknown N runs the revert tool for call N)",
                                unknown.join(", ")
                            ));
                        }
                        Err(format!(
                            "rollback incomplete: {}; the run is not rolled back",
                            problems.join("; ")
                        ))
                    }),
                Err(error) => Err(error),
            }
        }
        RunsAction::List | RunsAction::Show { .. } => Err("runs: nothing to do".to_owned()),
    };
    runtime.dispose().await;
    outcome
}

/// `replay`: reads an event log and writes its replay page; says how many events it drew and where.
pub(crate) fn replay(args: &ReplayArgs, json_output: bool) -> Result<String, String> {
    let limits = dsh_tools::events::ReadLimits::default().with_max_log_bytes(args.max_log_bytes);
    let events =
        dsh_tools::events::read_log_with(&args.log, &limits).map_err(|error| error.to_string())?;
    let out = args
        .html
        .clone()
        .unwrap_or_else(|| args.log.with_extension("html"));
    let page = dsh_tools::presentation::ReplayLimits::default().with_max_calls(args.max_calls);
    std::fs::write(
        &out,
        dsh_tools::presentation::render_html_with(&events, &page),
    )
    .map_err(|error| format!("cannot write {}: {error}", out.display()))?;
    Ok(if json_output {
        pretty(&json!({"events": events.len(), "html": out.display().to_string()}))
    } else {
        format!("{} events → {}", events.len(), out.display())
    })
}

fn progress_line(event: &ToolEvent, started: &mut HashMap<String, Instant>) {
    match event {
        ToolEvent::CodeDispatchStart { call_id, .. } => {
            started.insert(call_id.clone(), Instant::now());
        }
        ToolEvent::CodeDispatch {
            call_id,
            name,
            is_error,
            ..
        } => {
            let ms = started
                .remove(call_id)
                .map_or(0.0, |start| start.elapsed().as_secs_f64() * 1000.0);
            let outcome = if *is_error { "error" } else { "ok" };
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "{name} {ms:.1} ms {outcome}");
        }
        ToolEvent::DurableReplayed {
            name,
            is_error,
            outcome_unknown,
            ..
        } => {
            let outcome = match (outcome_unknown, is_error) {
                (true, _) => "OUTCOME_UNKNOWN (cut off while it ran; not run again)",
                (false, true) => "replayed error",
                (false, false) => "replayed ok",
            };
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "{name} {outcome}");
        }
        ToolEvent::DurableDiverged { message, .. } => {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "diverged: {}", escaped(message));
        }
        _ => {}
    }
}

/// A call a rollback left in place because its outcome is unknown and its revert was not asked
/// for.
fn skipped(report: &dsh_tools::durable::RevertReport) -> bool {
    report.outcome_unknown
        && matches!(&report.outcome, CallOutcome::Err { code: Some(code), .. }
            if code == dsh_tools::durable::OUTCOME_UNKNOWN)
}

/// What a rollback prints: each reverted call, or the reports as JSON.
fn rollback_text(reverts: &[dsh_tools::durable::RevertReport], json_output: bool) -> String {
    if json_output {
        return pretty(&serde_json::to_value(reverts).unwrap_or_default());
    }
    let lines: Vec<String> = reverts
        .iter()
        .map(|revert| {
            if skipped(revert) {
                return format!(
                    "#{} {} not reverted: its outcome is unknown (cut off while it ran)",
                    revert.seq, revert.tool
                );
            }
            let how = if revert.outcome.is_error() {
                "failed"
            } else {
                "ok"
            };
            format!(
                "#{} {} reverted by {}: {how}",
                revert.seq, revert.tool, revert.revert
            )
        })
        .collect();
    let reverted = reverts.iter().filter(|r| !r.outcome.is_error()).count();
    format!("{reverted} call(s) reverted\n{}", lines.join("\n"))
        .trim_end()
        .to_owned()
}

/// Awaits `work` while printing progress lines for the calls it makes (live or replayed).
async fn with_progress<T>(registry: &Registry, work: impl std::future::Future<Output = T>) -> T {
    let mut events = registry.subscribe();
    let mut started: HashMap<String, Instant> = HashMap::new();
    tokio::pin!(work);
    let output = loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Ok(event) => progress_line(&event, &mut started),
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break (&mut work).await,
            },
            output = &mut work => break output,
        }
    };
    while let Ok(event) = events.try_recv() {
        progress_line(&event, &mut started);
    }
    output
}

/// `message` (with its code) for one line: control characters escaped.
fn failure_text(message: &str, code: Option<&str>) -> String {
    let text = match code {
        Some(code) => format!("{message} ({code})"),
        None => message.to_owned(),
    };
    escaped(&text)
}

/// A success prints its content (or the whole result with `--json`); a failure is an error
/// line, except with `--json`, where the result is printed and the exit is still non-zero.
fn settle(result: &ToolResult, json_output: bool) -> Result<String, String> {
    if json_output {
        let text = pretty(&serde_json::to_value(result).map_err(|error| error.to_string())?);
        if result.is_error() {
            crate::print_stdout(&text)?;
            return Err(failure_message(result));
        }
        return Ok(text);
    }
    if result.is_error() {
        return Err(failure_message(result));
    }
    Ok(result.text())
}

fn failure_message(result: &ToolResult) -> String {
    result
        .error()
        .map(|error| match error.code() {
            Some(code) => format!("{} ({code})", error.message),
            None => error.message.clone(),
        })
        .unwrap_or_else(|| result.text())
}

fn unknown_tool(registry: &Registry, name: &str) -> String {
    let mut names: Vec<(usize, String)> = registry
        .tools(None)
        .iter()
        .map(|tool| {
            (
                strsim::levenshtein(name, tool.name()),
                tool.name().to_owned(),
            )
        })
        .collect();
    names.sort();
    let nearest: Vec<String> = names.into_iter().take(3).map(|(_, name)| name).collect();
    if nearest.is_empty() {
        return format!("unknown tool \"{name}\": no tools are registered");
    }
    format!("unknown tool \"{name}\"; nearest: {}", nearest.join(", "))
}

fn start_log(registry: &Registry, path: Option<&Path>) -> Result<Option<EventLog>, String> {
    path.map(|path| {
        EventLog::start(registry, path)
            .map_err(|error| format!("--events {}: {error}", path.display()))
    })
    .transpose()
}

async fn finish_log(log: Option<EventLog>) -> Result<(), String> {
    if let Some(log) = log {
        log.finish()
            .await
            .map_err(|error| format!("--events: {error}"))?;
    }
    Ok(())
}

fn language_of_file(path: &Path) -> Language {
    match path.extension().and_then(|ext| ext.to_str()) {
        Some("py") => Language::Python,
        _ => Language::TypeScript,
    }
}

fn language_name(language: Language) -> &'static str {
    match language {
        Language::Python => "python",
        _ => "typescript",
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
