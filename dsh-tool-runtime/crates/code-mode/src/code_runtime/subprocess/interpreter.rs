//! Finding and checking a subprocess runtime's interpreter: the binary on `PATH`, its real
//! executable and library directories (which the sandbox lets the child reach), its version.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::CodeRuntimeError;
use crate::sdk::Language;

/// `wanted` itself when it is a path, else the first executable of that name on `PATH`.
pub(super) fn resolve_binary(wanted: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if wanted.components().count() > 1 {
        return executable(wanted).then(|| wanted.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(wanted))
        .find(|candidate| executable(candidate))
}

/// The interpreter's real executable (not a launcher script or shim: the sandbox lets the child
/// execute that one file) and the directories of its own libraries.
pub(super) async fn locate(
    language: Language,
    binary: &Path,
) -> Result<(PathBuf, Vec<PathBuf>), CodeRuntimeError> {
    let args: &[&str] = match language {
        Language::TypeScript => &["-p", "process.execPath"],
        Language::Python => &[
            "-I",
            "-c",
            "import sys, sysconfig\nprint(sys.executable)\nprint(sys.base_prefix + '/lib')\n\
             for k in ('stdlib', 'platstdlib'): print(sysconfig.get_paths()[k])",
        ],
    };
    let unusable = |reason: String| CodeRuntimeError::InterpreterUnusable {
        language: language.id(),
        binary: binary.display().to_string(),
        reason,
    };
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(binary)
            .args(args)
            .env_clear()
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| unusable("it did not report its executable within 30 s".to_owned()))?
    .map_err(|e| unusable(e.to_string()))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let executable = lines
        .next()
        .map(PathBuf::from)
        .and_then(|p| std::fs::canonicalize(p).ok())
        .ok_or_else(|| unusable("it did not report its executable".to_owned()))?;
    let libraries = lines
        .map(PathBuf::from)
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    Ok((executable, libraries))
}

/// Refuses an interpreter older than the bootstrap supports (Node.js 18, CPython 3.10).
pub(super) async fn check_version(
    language: Language,
    binary: &Path,
) -> Result<(), CodeRuntimeError> {
    let shown = binary.display().to_string();
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(binary)
            .arg("--version")
            .env_clear()
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| "it did not answer `--version` within 30 s".to_owned())
    .and_then(|r| r.map_err(|e| e.to_string()))
    .map_err(|reason| CodeRuntimeError::InterpreterUnusable {
        language: language.id(),
        binary: shown.clone(),
        reason,
    })?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned()
        + String::from_utf8_lossy(&output.stderr).trim();
    let numbers: Vec<u64> = text
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .split(|c: char| !c.is_ascii_digit())
        .take(2)
        .map_while(|n| n.parse().ok())
        .collect();
    let (ok, minimum) = match language {
        Language::TypeScript => (numbers.first().is_some_and(|&major| major >= 18), "18"),
        Language::Python => (matches!(numbers[..], [3, minor, ..] if minor >= 10), "3.10"),
    };
    if ok {
        Ok(())
    } else {
        Err(CodeRuntimeError::InterpreterTooOld {
            language: language.id(),
            binary: shown,
            found: text,
            minimum,
        })
    }
}
