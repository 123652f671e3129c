//! A Restate deployment of durable `run_code` runs over a tool that changes state:
//! `append_line` appends a line to a file. Register it with a Restate server, invoke
//! `DurableRuns/run` with a program, kill this process mid-run and start it again on the same
//! address: Restate retries the invocation, the calls already made are answered from its
//! journal, and every line is in the file once.
//!
//! ```text
//! cargo run --example restate_append --features restate -- ADDR DIR [--idempotent] [--pause-in FILE:LINE] [--ask FILE:LINE] [--identity-key KEY]
//! ```
//!
//! - `append_line({file, line})` appends `line` to the file named `file` (a plain name) in DIR
//!   and returns the file's line count; `--idempotent` declares it idempotent, and then it
//!   appends only a line not in the file yet.
//! - `checkpoint({label})` is read-only and returns `label`.
//! - `--pause-in FILE:LINE`: `append_line` of LINE to FILE appends, then blocks for ever (the
//!   process is killed in the middle of that call).
//! - `--ask FILE:LINE`: a pre-execute hook asks for approval before `append_line` appends LINE
//!   to FILE: the run waits for `DurableApprovals/{run key}/approve` or `deny` with a
//!   continuation signed with a key derived from the secret in `DIR/restate.secret` (64 hex
//!   digits, mode 0600, made on first start), as `dsh-tools serve --restate-secret-file` does,
//!   e.g. `dsh-tools runs --restate INGRESS --restate-secret-file DIR/restate.secret show KEY`,
//!   then `... approve CONTINUATION`.
//! - `--identity-key KEY`: only the Restate server whose request identity key is KEY
//!   (`publickeyv1_…`) may call the deployment; needed when ADDR is not loopback.
//!
//! Prints `listening on ADDR` once it serves; a failure is one line on stderr and exit code 1.
//! Built with the `otel` feature and run with `OTEL_EXPORTER_OTLP_ENDPOINT` set, it exports the
//! runs' spans: the calls a retried invocation answers from Restate's journal are spans marked
//! `dsh.replayed`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_tools::code::SubprocessRuntime;
use dsh_tools::definition::ToolAnnotations;
use dsh_tools::durable::restate::{DeploymentOptions, serve_deployment};
use dsh_tools::hooks::PreDecision;
use dsh_tools::prelude::*;
use dsh_tools::{Mode, Registry, ToolDefinition, ToolError, ToolExec};
use serde_json::{Value, json};

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

struct Options {
    addr: std::net::SocketAddr,
    dir: PathBuf,
    idempotent: bool,
    pause_in: Option<String>,
    ask: Option<String>,
    deployment: DeploymentOptions,
}

fn options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(dir)) = (args.next(), args.next()) else {
        return Err(
            "usage: restate_append ADDR DIR [--idempotent] [--pause-in FILE:LINE] [--ask FILE:LINE] \
             [--identity-key KEY]"
                .to_owned(),
        );
    };
    let (mut idempotent, mut pause_in, mut ask) = (false, None, None);
    let mut deployment = DeploymentOptions::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--idempotent" => idempotent = true,
            "--pause-in" => pause_in = args.next(),
            "--ask" => ask = args.next(),
            "--identity-key" => {
                let key = args.next().ok_or("--identity-key needs a KEY")?;
                deployment = deployment.identity_key(key);
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(Options {
        addr: addr
            .parse()
            .map_err(|error| format!("ADDR {addr}: {error}"))?,
        dir: dir.into(),
        idempotent,
        pause_in,
        ask,
        deployment,
    })
}

fn register(registry: &Registry, options: &Options) -> Result<(), String> {
    let (dir, idempotent) = (Arc::new(options.dir.clone()), options.idempotent);
    let pause_in = options.pause_in.clone();
    let append = ToolDefinition::builder("append_line")
        .description("Append a line to the output file; returns its line count.")
        .parameters(json!({
            "type": "object",
            "properties": {"file": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$"}, "line": {"type": "string"}},
            "required": ["file", "line"]
        }))
        .annotations({
            let mut hints = ToolAnnotations::default();
            hints.idempotent_hint = Some(idempotent);
            hints
        })
        .handler(move |args: Value, _exec: ToolExec| {
            let file = args["file"].as_str().unwrap_or_default();
            // The schema's pattern keeps the name inside DIR, but for `.` and `..`.
            let out = (file != "." && file != "..").then(|| dir.join(file));
            let line = args["line"].as_str().unwrap_or_default().to_owned();
            let at = format!("{file}:{line}");
            let pause = pause_in.as_deref() == Some(at.as_str());
            async move {
                let out = out.ok_or_else(|| ToolError::new("file: a plain file name"))?;
                if !(idempotent && lines(&out).contains(&line)) {
                    let mut file = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&out)
                        .map_err(|error| ToolError::new(error.to_string()))?;
                    writeln!(file, "{line}").map_err(|error| ToolError::new(error.to_string()))?;
                }
                if pause {
                    std::future::pending::<()>().await;
                }
                Ok(json!(lines(&out).len()))
            }
        })
        .build()
        .map_err(|error| error.to_string())?;
    let checkpoint = ToolDefinition::builder("checkpoint")
        .description("Returns its label.")
        .parameters(json!({"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}))
        .annotations({
            let mut hints = ToolAnnotations::default();
            hints.read_only_hint = Some(true);
            hints
        })
        .handler(|args: Value, _exec: ToolExec| async move { Ok(args["label"].clone()) })
        .build()
        .map_err(|error| error.to_string())?;
    registry
        .register(append)
        .map_err(|error| error.to_string())?;
    registry
        .register(checkpoint)
        .map_err(|error| error.to_string())?;
    if let Some(asked) = options.ask.clone() {
        registry.on_pre_execute(move |view, next| {
            let asked = asked.clone();
            async move {
                let at = format!(
                    "{}:{}",
                    view.arguments["file"].as_str().unwrap_or_default(),
                    view.arguments["line"].as_str().unwrap_or_default()
                );
                if view.name == "append_line" && at == asked {
                    let line = asked.split_once(':').map_or("", |(_, line)| line);
                    return PreDecision::Ask {
                        reason: Some(format!("append \"{line}\"?")),
                    };
                }
                next.run().await
            }
        });
    }
    Ok(())
}

/// The secret in `path`, made (64 hex digits of the OS's random bytes, mode 0600, exclusively)
/// when there is none; its trailing line end dropped, as `dsh-tools` reads it.
fn shared_secret(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |error: std::io::Error| format!("{}: {error}", path.display());
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match created {
        Ok(mut file) => {
            let mut random = [0u8; 32];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut source| source.read_exact(&mut random))
                .map_err(failed)?;
            let hex: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
            file.write_all(hex.as_bytes()).map_err(failed)?;
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(failed(error)),
    }
    let mut secret = std::fs::read(path).map_err(failed)?;
    while secret
        .last()
        .is_some_and(|byte| matches!(byte, b'\n' | b'\r'))
    {
        secret.pop();
    }
    Ok(secret)
}

/// Exports this project's spans over OTLP when the standard variables name an endpoint.
///
/// Only `dsh_*` targets are exported: the HTTP/2 stack under the Restate SDK opens a span per
/// frame, and with those the exporter's bounded queue fills and drops the tool calls' spans.
#[cfg(feature = "otel")]
fn export_spans() -> Result<Option<dsh_tools::otel::Otlp>, String> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::filter_fn;
    use tracing_subscriber::layer::SubscriberExt;
    if !dsh_tools::otel::Otlp::configured_by_env() {
        return Ok(None);
    }
    let otlp = dsh_tools::otel::Otlp::new(None, "restate_append").map_err(|e| e.to_string())?;
    let ours = filter_fn(dsh_tools::otel::is_library_target);
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(otlp.layer().with_filter(ours)),
    )
    .map_err(|error| error.to_string())?;
    Ok(Some(otlp))
}

async fn run() -> Result<(), String> {
    let options = options()?;
    #[cfg(feature = "otel")]
    let _otlp = export_spans()?;
    let registry = Registry::new();
    register(&registry, &options)?;
    let runtime = SubprocessRuntime::typescript(Default::default())
        .await
        .map_err(|error| error.to_string())?;
    registry.set_code_runtime(Arc::new(runtime));
    registry.set_mode(Mode::Code);
    let secret = shared_secret(&options.dir.join("restate.secret"))?;
    registry.set_continuation_secret(dsh_tools::durable::ContinuationSecret::derive(&secret));
    println!("listening on {}", options.addr);
    serve_deployment(registry, options.addr, options.deployment)
        .await
        .map_err(|error| format!("{}: {error}", options.addr))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
