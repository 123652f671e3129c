//! The `dsh-tools` command: inspect, call and serve a toolset, and turn any set of MCP servers into
//! a code-mode MCP server.
//!
//! ```text
//! dsh-tools [--builtin repo --root DIR] [--mcp "COMMAND"]... [--mcp-http URL]... [--config FILE]
//!           [--json] serve|tools|sdk|view|call|run|runs ...
//! dsh-tools replay LOG [--html OUT] [--max-log-bytes BYTES] [--max-calls N]
//! dsh-tools runs --journal FILE list|show ID
//! dsh-tools SOURCE runs --journal FILE approve|deny|resume|rollback ID ...
//! dsh-tools runs --restate INGRESS_URL [--restate-admin ADMIN_URL] list|show|approve|deny KEY ...
//! ```
//!
//! Output goes to stdout; every error is one line on stderr and a non-zero exit (2 for a bad
//! command line, 1 for anything else).

#![forbid(unsafe_code)]

mod args;
mod commands;
mod elicit;
mod mcp_sources;
mod restate_runs;
mod secret_file;
mod sources;
mod terminal;
mod toolset;

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error)
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            let _ = error.print();
            return if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
        Err(error) => {
            // clap's first paragraph names the problem (a missing argument on its own
            // indented lines); the usage block after it is noise here.
            let rendered = error.render().to_string();
            let problem: Vec<&str> = rendered
                .lines()
                .skip_while(|line| line.trim().is_empty())
                .take_while(|line| !line.trim().is_empty())
                .map(str::trim)
                .collect();
            if problem.is_empty() {
                eprintln!("error: invalid command line");
            } else {
                eprintln!("{}", problem.join(" "));
            }
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(cli));
    // A blocking stdin read (tokio's stdio on a terminal or file) never returns by itself:
    // waiting for it would keep a stopped server alive until its input closes.
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // One line: the message's own lines (a failed run's captured output) stay apart.
            // Control characters (a run id with ESC or CR in it) are escaped, never sent to the
            // terminal.
            let lines: Vec<String> = message
                .lines()
                .filter(|line| !line.is_empty())
                .map(terminal::escaped)
                .collect();
            eprintln!("error: {}", lines.join(" | "));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    // Dropped when the command ends: the spans still queued are flushed then.
    let otlp = if cli.otlp_endpoint.is_some() || dsh_tools::otel::Otlp::configured_by_env() {
        Some(
            dsh_tools::otel::Otlp::new(cli.otlp_endpoint.as_deref(), "dsh-tools").map_err(
                // Without the flag the endpoint came from a variable, which the error names.
                |error| match cli.otlp_endpoint {
                    Some(_) => format!("--otlp-endpoint: {error}"),
                    None => error.to_string(),
                },
            )?,
        )
    } else {
        None
    };
    mcp_sources::install_tracing(otlp.as_ref());
    if let Command::Replay(args) = &cli.command {
        // A log is read back without the tools' code: no tool source is loaded.
        return print_stdout(&commands::replay(args, cli.json)?);
    }
    if let Command::Runs(args) = &cli.command
        && let Some(output) = commands::runs_offline(args, cli.json).await?
    {
        return print_stdout(&output);
    }
    let loaded = sources::registry(&cli.sources).await?;
    loaded.registry.set_span_content(cli.trace_content);
    let outcome = dispatch(&loaded.registry, &cli).await;
    loaded.close().await;
    match outcome? {
        Some(output) => print_stdout(&output),
        None => Ok(()),
    }
}

/// Runs the subcommand over the loaded tools; `Some` is what to print on stdout.
async fn dispatch(registry: &dsh_tools::Registry, cli: &Cli) -> Result<Option<String>, String> {
    Ok(Some(match &cli.command {
        Command::Serve(args) => {
            commands::serve(registry, args).await?;
            return Ok(None);
        }
        Command::Tools(args) => commands::tools(registry, args, cli.json).await?,
        Command::Sdk(args) => commands::sdk(registry, args, cli.json).await?,
        Command::View(args) => commands::view(registry, args, cli.json).await?,
        Command::Call(args) => commands::call(registry, args, cli.json).await?,
        Command::Run(args) => commands::run(registry, args, cli.json).await?,
        Command::Replay(args) => commands::replay(args, cli.json)?,
        Command::Runs(args) => commands::runs(registry, args, cli.json).await?,
    }))
}

/// Writes one output to stdout; a reader that closed the pipe early (`| head`) is not an error.
pub fn print_stdout(text: &str) -> Result<(), String> {
    use std::io::Write;
    match writeln!(std::io::stdout().lock(), "{text}") {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("stdout: {error}"))
        }
        _ => Ok(()),
    }
}
