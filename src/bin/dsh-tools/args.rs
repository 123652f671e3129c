//! The command line: subcommands, tool sources, budgets, and value parsers whose errors name
//! the accepted values on the same line. `serve`'s arguments, with its HTTP listener's, are in
//! [`serve`].

mod serve;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use dsh_tools::Mode;
use dsh_tools::dialect::Dialect;
use dsh_tools::sdk::Language;

pub(crate) use serve::{HttpAccess, HttpLimits, ServeArgs};

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
