//! `examples/agent.rs` in its recorded mode: the recorded answers drive the real tools, pipeline
//! and terminal approvals, in native and code mode.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The features this test was built with, so the example builds against the same artifacts.
fn features() -> Vec<&'static str> {
    [
        ("default", cfg!(feature = "default")),
        ("full", cfg!(feature = "full")),
        ("code-mode", cfg!(feature = "code-mode")),
        ("mcp", cfg!(feature = "mcp")),
        ("mcp-server", cfg!(feature = "mcp-server")),
        ("oauth", cfg!(feature = "oauth")),
        ("cli", cfg!(feature = "cli")),
        ("embedded-js", cfg!(feature = "embedded-js")),
        ("embedded-python", cfg!(feature = "embedded-python")),
        ("event-log-zstd", cfg!(feature = "event-log-zstd")),
        ("durable", cfg!(feature = "durable")),
        ("restate", cfg!(feature = "restate")),
        ("async-openai", cfg!(feature = "async-openai")),
        ("otel", cfg!(feature = "otel")),
        ("rig", cfg!(feature = "rig")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect()
}

/// Runs the example in `mode` with `answer` on its standard input; its standard output.
fn run(mode: &str, answer: &str) -> String {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("a target dir");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(ROOT)
        .env("CARGO_TARGET_DIR", target)
        .args([
            "build",
            "--offline",
            "--no-default-features",
            "--example",
            "agent",
            "--features",
        ])
        .arg(features().join(","))
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the example failed: {status}");
    let mut child = Command::new(target.join("debug/examples/agent"))
        .arg(mode)
        .env_remove("DSH_AGENT_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the example starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    let output = child.wait_with_output().expect("the example ends");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn the_example_plays_its_recorded_exchange_in_both_modes() {
    let native = run("native", "y\n");
    assert!(
        native.contains("No DSH_AGENT_URL: playing the exchange recorded"),
        "{native}"
    );
    assert!(
        native.contains("add {\"a\":2.5,\"b\":4} -> ok: 6.5"),
        "{native}"
    );
    assert!(
        native.contains("[note saved] 2.5 + 4 = 6.5; 4 words"),
        "{native}"
    );
    assert!(native.contains("done after"), "{native}");
    // Denied on the terminal: the model reads the denial as the call's error.
    let denied = run("native", "n\n");
    assert!(
        denied.contains("save_note")
            && denied.contains("-> failed: Error: the user rejected tool \"save_note\""),
        "{denied}"
    );
    assert!(!denied.contains("[note saved]"), "{denied}");
    let code = run("code", "y\n");
    assert!(code.contains("run_code"), "{code}");
    assert!(code.contains("[note saved] sum 6.5, words 4"), "{code}");
    assert!(code.contains("done after"), "{code}");
}
