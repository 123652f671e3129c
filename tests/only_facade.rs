//! A crate that depends on `dsh-tools` alone (or on it renamed, with `#[tool(crate = …)]`)
//! compiles: expansions name serde, schemars and serde_json only through `dsh_tools::__private`,
//! so a user never has to add serde_json to their own dependencies for the macro's sake.
//!
//! Runs `cargo check --offline` on the two crates under `ui-tests/`, sharing the target directory
//! trybuild uses so dependencies are already built.

use std::path::{Path, PathBuf};
use std::process::Command;

fn target_dir() -> PathBuf {
    // `CARGO_TARGET_TMPDIR` is `<target>/tmp`; trybuild builds under `<target>/tests/trybuild`.
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target tmp dir has a parent")
        .join("tests")
        .join("trybuild")
}

fn check(crate_dir: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = root.join("ui-tests").join(crate_dir).join("Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .arg("check")
        .arg("--quiet")
        .arg("--offline")
        .arg("--manifest-path")
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "`cargo check` of {crate_dir} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_crate_depending_only_on_dsh_tools_compiles() {
    check("only-facade");
}

#[test]
fn a_crate_depending_on_dsh_tools_renamed_compiles() {
    check("only-facade-renamed");
}

/// What a library user compiles with the default features: code mode and the MCP client, but
/// neither the command line (clap), zstd's C build, QuickJS nor Monty; `full` brings all four.
#[test]
fn the_default_features_compile_no_cli_c_library_or_interpreter() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let tree = |features: &[&str]| {
        let output = Command::new(&cargo)
            .args(["tree", "--offline", "-p", "dsh-tools", "-e", "normal"])
            .args(["--prefix", "none", "--format", "{p}"])
            .args(features)
            .current_dir(root)
            .output()
            .expect("cargo runs");
        assert!(
            output.status.success(),
            "`cargo tree` failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        ["clap ", "zstd-sys ", "rquickjs ", "monty "]
            .into_iter()
            .filter(|name| text.lines().any(|line| line.starts_with(name)))
            .map(str::trim)
            .collect::<Vec<_>>()
    };
    assert_eq!(tree(&[]), Vec::<&str>::new());
    assert_eq!(
        tree(&["--features", "full"]),
        ["clap", "zstd-sys", "rquickjs", "monty"]
    );
}
