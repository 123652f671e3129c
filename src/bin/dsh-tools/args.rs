//! The command line: subcommands, tool sources, budgets, and value parsers whose errors name
//! the accepted values on the same line.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use dsh_tools::Mode;
use dsh_tools::dialect::Dialect;
use dsh_tools::sdk::Language;

/// Typed tools for LLM agents: inspect a toolset, call it, run code-mode programs over it, or
/// serve it to any MCP host.
#[derive(Debug, Parser)]
#[command(name = "dsh-tools", version)]
pub(crate) struct Cli {
    /// Where the tools come from.
    #[command(flatten)]
    pub sources: Sources,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Export every call's span over OTLP/HTTP to this base URL (e.g. http://127.0.0.1:6006
    /// for Phoenix; `/v1/traces` is appended). Without it, spans are exported when
    /// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
    #[arg(long, global = true, value_name = "URL",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub otlp_endpoint: Option<String>,
    /// Put each call's arguments and result on its span (they can hold secrets: whoever reads
    /// the traces reads them too).
    #[arg(long, global = true)]
    pub trace_content: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// One subcommand; each has its own arguments and handler.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve the tools as an MCP server (stdio by default).
    Serve(Box<ServeArgs>),
    /// Print the tool schemas in a provider dialect.
    Tools(ToolsArgs),
    /// Print the code-mode SDK of the tools.
    Sdk(SdkArgs),
    /// Print what the model is shown: tool schemas and prompt sections.
    View(ViewArgs),
    /// Make one tool call through the pipeline.
    Call(CallArgs),
    /// Run one code-mode program (`run_code`) over the tools.
    Run(RunArgs),
    /// Render an event log (`--events`) as one self-contained HTML page. Needs no tool source.
    Replay(ReplayArgs),
    /// Durable runs in a journal (`run --journal`): list, show, approve, deny, resume, roll back;
    /// or parked on Restate (`--restate`): list, show, approve, deny.
    Runs(RunsArgs),
}

/// Arguments of `runs`.
#[derive(Debug, Args)]
pub(crate) struct RunsArgs {
    /// The journal file (SQLite).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "restate",
        conflicts_with = "restate"
    )]
    pub journal: Option<PathBuf>,
    /// Runs on Restate instead, through its ingress (e.g. http://127.0.0.1:8080): `show`,
    /// `approve` and `deny` a run by its key (the `run_id` of its input, or its invocation id);
    /// `list` needs --restate-admin too. Needs no tool source: the run goes on in Restate.
    #[arg(long, value_name = "INGRESS_URL")]
    pub restate: Option<String>,
    /// Restate's admin API (e.g. http://127.0.0.1:9070): where `runs --restate ... list` finds
    /// the parked runs.
    #[arg(long, value_name = "ADMIN_URL", requires = "restate")]
    pub restate_admin: Option<String>,
    /// The secret the Restate deployment holds (`serve --restate-secret-file FILE`, the same
    /// file): `runs --restate ... show KEY` then prints a continuation for the waiting call,
    /// which `approve` and `deny` take.
    #[arg(long, value_name = "FILE", requires = "restate")]
    pub restate_secret_file: Option<PathBuf>,
    /// Replaced by --restate-secret-file: refused, naming it.
    #[arg(long, value_name = "FILE", hide = true)]
    pub restate_secret: Option<PathBuf>,
    /// The language of the run's program, for a resume (approve, deny, resume): ts or py.
    #[arg(long, default_value = "ts", value_parser = parse_language)]
    pub lang: Language,
    /// The code runtime a resume runs on.
    #[arg(long, default_value = "subprocess", value_parser = parse_runtime)]
    pub runtime: RuntimeKind,
    #[command(subcommand)]
    pub action: RunsAction,
}

/// What `runs` does.
#[derive(Debug, Subcommand)]
pub(crate) enum RunsAction {
    /// Every run: id, status. Needs no tool source.
    List,
    /// One run: its status and journaled calls. Needs no tool source.
    Show {
        /// The run id.
        id: String,
    },
    /// Approve the call a parked run waits at and resume the run here (over the tool source
    /// given).
    Approve {
        /// The continuation `runs show ID` prints for the parked call (used once; expires).
        id: String,
    },
    /// Deny the call a parked run waits at (it fails with REASON) and resume the run here.
    Deny {
        /// The continuation `runs show ID` prints for the parked call (used once; expires).
        id: String,
        /// What the program reads as the failure.
        reason: String,
    },
    /// Resume a run cut off by a crash (`runs list` shows it running) here, over the tool
    /// source given.
    Resume {
        /// The run id.
        id: String,
    },
    /// Revert a parked or failed run's completed calls, newest first. Refused, reverting
    /// nothing, when a completed call's tool is not read-only and has no revert tool. A call
    /// cut off while it ran (its outcome unknown) is not reverted unless named with
    /// --revert-unknown: the run then stays unrolled and the command exits 1.
    Rollback {
        /// The run id.
        id: String,
        /// TOOL=REVERT_TOOL: revert each completed call of TOOL by calling REVERT_TOOL with
        /// `{"arguments": <the call's arguments>, "result": <its value>}` (repeatable).
        #[arg(long, value_name = "TOOL=REVERT_TOOL", value_parser = parse_revert)]
        revert: Vec<(String, String)>,
        /// Also run the revert tool for call number N, whose outcome is unknown (it may or may
        /// not have happened), with `{"arguments": <its arguments>, "outcome_unknown": true}`
        /// (repeatable).
        #[arg(long, value_name = "N")]
        revert_unknown: Vec<u64>,
    },
}

fn parse_revert(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((tool, revert)) if !tool.is_empty() && !revert.is_empty() => {
            Ok((tool.to_owned(), revert.to_owned()))
        }
        _ => Err(format!(
            "invalid --revert {value:?}: expected TOOL=REVERT_TOOL"
        )),
    }
}

/// Arguments of `replay`.
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The event log: JSON lines, zstd when it ends in `.zst` (a torn last line is skipped).
    pub log: PathBuf,
    /// Where to write the page (default: the log's path with the extension `.html`).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Decoded bytes of the log read at most; a larger log is an error.
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20)]
    pub max_log_bytes: u64,
    /// Call cards the page draws at most; the rest are counted in a notice.
    #[arg(long, value_name = "N", default_value_t = 2_000)]
    pub max_calls: usize,
}

/// Tool sources, usable with every subcommand. At least one is needed by those that use tools.
#[derive(Debug, Args)]
pub(crate) struct Sources {
    /// A built-in toolset: `repo` (read-only file tools over `--root`).
    #[arg(long, global = true, value_enum)]
    pub builtin: Option<Builtin>,
    /// The directory the built-in toolset serves (default: the current directory).
    #[arg(long, global = true)]
    pub root: Option<PathBuf>,
    /// An MCP server to start over stdio, as one command line, optionally named:
    /// `NAME=COMMAND ARGS…` (repeatable; unnamed, the server is named after its command).
    #[arg(long = "mcp", global = true, value_name = "[NAME=]COMMAND LINE")]
    pub mcp: Vec<String>,
    /// An MCP server reached over streamable HTTP (repeatable).
    #[arg(long = "mcp-http", global = true, value_name = "URL")]
    pub mcp_http: Vec<String>,
    /// OAuth client id for the `--mcp-http` servers: each gets an access token from its
    /// authorization server with the client-credentials grant (secret from
    /// `--mcp-oauth-client-secret-file`, else `DSH_TOOLS_OAUTH_CLIENT_SECRET`), or, with
    /// `--mcp-oauth-login`, the id registered for the person's login. A `--config` entry takes
    /// `"oauth": {"clientId", "clientSecret" | "clientSecretEnv" | "clientSecretFile",
    /// "scopes", "login", "tokenFile", "openBrowser"}`.
    #[arg(long, global = true, value_name = "ID")]
    pub mcp_oauth_client_id: Option<String>,
    /// The OAuth client secret, read from FILE (surrounding whitespace trimmed).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        requires = "mcp_oauth_client_id"
    )]
    pub mcp_oauth_client_secret_file: Option<PathBuf>,
    /// A scope to ask the `--mcp-http` servers' authorization server for (repeatable).
    #[arg(long, global = true, value_name = "SCOPE")]
    pub mcp_oauth_scope: Vec<String>,
    /// Log a person in to the `--mcp-http` servers when they ask for a token: the OAuth
    /// authorization code grant with PKCE. The authorization URL is printed on stderr and the
    /// redirect received on 127.0.0.1 (a port the OS picks); the client is registered
    /// dynamically unless `--mcp-oauth-client-id` names one. The person has 300 seconds to
    /// log in; after that the login, and the server's connection, fail.
    #[arg(long, global = true)]
    pub mcp_oauth_login: bool,
    /// Also open the authorization URL in the default browser.
    #[arg(long, global = true, requires = "mcp_oauth_login")]
    pub mcp_oauth_open_browser: bool,
    /// The login's client id as a Client ID Metadata Document: URL (an `https://` URL with a
    /// path) serves this client's metadata, and is the client id where the authorization server
    /// says it accepts such documents (`client_id_metadata_document_supported`); elsewhere the
    /// client registers dynamically. A pre-registered `--mcp-oauth-client-id` goes first.
    #[arg(long, global = true, value_name = "URL", requires = "mcp_oauth_login")]
    pub mcp_oauth_client_metadata_url: Option<String>,
    /// Keep the login's tokens in FILE (mode 0600) and reuse them on the next run; without it
    /// they live in memory for this run only. One `--mcp-http` server only.
    #[arg(long, global = true, value_name = "FILE", requires = "mcp_oauth_login")]
    pub mcp_oauth_token_file: Option<PathBuf>,
    /// MCP servers from a JSON file in the `mcpServers` format MCP hosts use.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How long each MCP server may take to connect and answer `initialize`, in ms (default
    /// 30000); a person's pending OAuth authorization does not count.
    #[arg(long, global = true, value_name = "MS")]
    pub mcp_connect_timeout_ms: Option<u64>,
    /// How long each MCP server may take to answer one `tools/list` page, in ms (default 30000).
    #[arg(long, global = true, value_name = "MS")]
    pub mcp_list_timeout_ms: Option<u64>,
    /// How long one call of an MCP server's tool may run, in ms (default 60000); past it the
    /// call fails with `TOOL_TIMEOUT` and the server is sent `notifications/cancelled`.
    #[arg(long, global = true, value_name = "MS")]
    pub mcp_call_timeout_ms: Option<u64>,
}

/// The built-in toolsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Builtin {
    /// `list_files`, `read_file`, `grep`, `file_stats` confined to `--root`.
    Repo,
}

/// Code runtime budgets.
#[derive(Debug, Args, Clone, Copy, Default)]
pub(crate) struct Budgets {
    /// CPU time a program may use, in ms (default 60000).
    #[arg(long, value_name = "MS")]
    pub cpu_ms: Option<u64>,
    /// Wall-clock ceiling of a program, in ms (default 600000).
    #[arg(long, value_name = "MS")]
    pub wall_ms: Option<u64>,
    /// Cap on a program's output (logs plus result), in bytes (default 67108864, 64 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_output: Option<u64>,
}

impl Budgets {
    /// Sets the budgets given on the command line, leaving the others as they are.
    pub(crate) fn apply(self, to: &mut dsh_tools::code::Budgets) {
        if let Some(cpu_ms) = self.cpu_ms {
            to.compute_ms = cpu_ms;
        }
        if let Some(wall_ms) = self.wall_ms {
            to.max_wall_ms = wall_ms;
        }
        if let Some(max_output) = self.max_output {
            to.max_output_bytes = max_output;
        }
    }
}

/// Which kind of code runtime runs the programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum RuntimeKind {
    /// A Node.js or CPython child process per run, sandboxed.
    #[default]
    Subprocess,
    /// An interpreter with no ambient authority: QuickJS inside this process (TypeScript),
    /// Monty in a sandboxed worker process (Python).
    Embedded,
}

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

/// `tools`.
#[derive(Debug, Args)]
pub(crate) struct ToolsArgs {
    /// portable, openai-strict, gemini, anthropic or mcp.
    #[arg(long, default_value = "portable", value_parser = parse_dialect)]
    pub dialect: Dialect,
}

/// `sdk`.
#[derive(Debug, Args)]
pub(crate) struct SdkArgs {
    /// ts or py.
    #[arg(long, value_parser = parse_language)]
    pub lang: Language,
}

/// `view`.
#[derive(Debug, Args)]
pub(crate) struct ViewArgs {
    /// native, code or both.
    #[arg(long, default_value = "native", value_parser = parse_mode)]
    pub mode: Mode,
    /// The language of code-mode programs: ts or py.
    #[arg(long, default_value = "ts", value_parser = parse_language)]
    pub lang: Language,
    /// The code runtime whose view is shown: subprocess or embedded (which may add a
    /// `tools:runtime` section).
    #[arg(long, default_value = "subprocess", value_parser = parse_runtime)]
    pub runtime: RuntimeKind,
}

/// `call`.
#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    /// The tool name.
    pub name: String,
    /// The arguments, a JSON object (default `{}`).
    pub arguments: Option<String>,
    /// Write every pipeline event to PATH as JSON lines (zstd when PATH ends in `.zst`).
    #[arg(long, value_name = "PATH")]
    pub events: Option<PathBuf>,
}

/// `run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The program file.
    pub file: PathBuf,
    /// ts or py (default: from the file extension, else ts).
    #[arg(long, value_parser = parse_language)]
    pub lang: Option<Language>,
    /// The code runtime: subprocess (full Node.js or CPython) or embedded (QuickJS / Monty).
    #[arg(long, default_value = "subprocess", value_parser = parse_runtime)]
    pub runtime: RuntimeKind,
    /// Write every pipeline event to PATH as JSON lines (zstd when PATH ends in `.zst`).
    #[arg(long, value_name = "PATH")]
    pub events: Option<PathBuf>,
    /// Make the run durable: journal its tool calls in FILE (SQLite); the same command resumes
    /// it after a crash. Needs `--run-id`.
    #[arg(long, value_name = "FILE", requires = "run_id")]
    pub journal: Option<PathBuf>,
    /// The durable run's id (its handle for `runs approve|deny|rollback`).
    #[arg(long, value_name = "ID", requires = "journal")]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub budgets: Budgets,
}

fn parse_mode(value: &str) -> Result<Mode, String> {
    match value {
        "native" => Ok(Mode::Native),
        "code" => Ok(Mode::Code),
        "both" => Ok(Mode::Both),
        _ => Err(format!(
            "unknown mode \"{value}\" (known: native, code, both)"
        )),
    }
}

fn parse_runtime(value: &str) -> Result<RuntimeKind, String> {
    match value {
        "subprocess" => Ok(RuntimeKind::Subprocess),
        "embedded" => Ok(RuntimeKind::Embedded),
        _ => Err(format!(
            "unknown runtime \"{value}\" (known: subprocess, embedded)"
        )),
    }
}

/// `ts`/`typescript` or `py`/`python`.
pub(crate) fn parse_language(value: &str) -> Result<Language, String> {
    match value {
        "ts" | "typescript" => Ok(Language::TypeScript),
        "py" | "python" => Ok(Language::Python),
        _ => Err(format!("unknown language \"{value}\" (known: ts, py)")),
    }
}

fn parse_dialect(value: &str) -> Result<Dialect, String> {
    Dialect::ALL
        .into_iter()
        .find(|dialect| dialect.as_str() == value)
        .ok_or_else(|| {
            let known: Vec<&str> = Dialect::ALL
                .iter()
                .map(|dialect| dialect.as_str())
                .collect();
            format!("unknown dialect \"{value}\" (known: {})", known.join(", "))
        })
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
