//! The built-in repo toolset against a hostile root: symbolic links out of it (to a file, to
//! `/proc/self/environ`, swapped in a loop during reads), special files (`/dev/zero`, a FIFO, a
//! device node), a huge one-line file, a pattern too large to compile, and cancellation of a
//! search that would read for minutes. Memory is measured on the `dsh-tools` child's peak
//! resident size.

// The test calls libc directly (`wait4` for a child's resource usage), with a SAFETY note at each block.
#![allow(unsafe_code)]

#[path = "../src/bin/dsh-tools/toolset.rs"]
mod toolset;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dsh_tools::{CancellationToken, Registry, ToolCall, ToolResult};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_dsh-tools");

/// A failure bound only: every wait below ends on an event long before it.
const FAILURE_BOUND: Duration = Duration::from_secs(120);

/// A root holding `inside.txt`, and beside it (outside the root) `secret.txt`.
struct Fixture {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    secret: std::path::PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("inside.txt"), "inside line\n").unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "SECRET_TOKEN=hunter2\n").unwrap();
    Fixture {
        _dir: dir,
        root,
        secret,
    }
}

fn registry(root: &Path) -> Registry {
    let registry = Registry::new();
    registry.register_all(toolset::definitions(root)).unwrap();
    registry
}

async fn call(registry: &Registry, name: &str, arguments: Value) -> ToolResult {
    tokio::time::timeout(
        FAILURE_BOUND,
        registry.execute(ToolCall::new("t-1", name, arguments)),
    )
    .await
    .expect("the call settles")
}

/// The paths `list_files` lists for the whole root.
async fn listed_paths(registry: &Registry) -> Vec<String> {
    let listed = call(registry, "list_files", json!({})).await;
    listed
        .value()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["path"].as_str().unwrap().to_owned())
        .collect()
}

fn refused_as_escape(result: &ToolResult) {
    assert!(result.is_error(), "refused: {}", result.text());
    let text = result.text();
    assert!(text.contains("leads outside the root"), "{text}");
    assert!(
        !text.contains("SECRET") && !text.contains("PATH="),
        "{text}"
    );
}

#[tokio::test]
async fn a_link_out_of_the_root_is_refused_by_every_tool() {
    let fixture = fixture();
    symlink(&fixture.secret, fixture.root.join("to_secret")).unwrap();
    symlink("/proc/self/environ", fixture.root.join("environ")).unwrap();
    symlink("../secret.txt", fixture.root.join("relative_out")).unwrap();
    symlink(
        fixture.secret.parent().unwrap(),
        fixture.root.join("outdir"),
    )
    .unwrap();
    symlink("inside.txt", fixture.root.join("to_inside")).unwrap();
    let registry = registry(&fixture.root);

    for path in ["to_secret", "environ", "relative_out", "outdir/secret.txt"] {
        refused_as_escape(&call(&registry, "read_file", json!({ "path": path })).await);
        refused_as_escape(&call(&registry, "file_stats", json!({ "path": path })).await);
    }
    refused_as_escape(&call(&registry, "list_files", json!({ "dir": "outdir" })).await);
    refused_as_escape(
        &call(
            &registry,
            "grep",
            json!({ "pattern": "SECRET", "dir": "outdir" }),
        )
        .await,
    );

    // A link that stays inside the root is followed.
    let inside = call(&registry, "read_file", json!({ "path": "to_inside" })).await;
    assert_eq!(inside.value().unwrap()["lines"], json!(["inside line"]));

    // Walks never follow a link: the listing and the search see the real file only.
    let paths = listed_paths(&registry).await;
    assert_eq!(paths, ["inside.txt"]);
    let found = call(
        &registry,
        "grep",
        json!({ "pattern": "SECRET|PATH=|inside" }),
    )
    .await;
    let matches = &found.value().unwrap()["matches"];
    assert_eq!(matches.as_array().unwrap().len(), 1, "{matches}");
    assert_eq!(matches[0]["path"], "inside.txt");
}

/// A link flipped between a file inside the root and one outside it, as fast as a thread can,
/// while reads go on: no read ever returns the outside file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_swapped_during_reads_never_leaks() {
    let fixture = fixture();
    let link = fixture.root.join("flip");
    symlink("inside.txt", &link).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (root, secret, stop) = (fixture.root.clone(), fixture.secret.clone(), stop.clone());
        std::thread::spawn(move || {
            let staged = root.join("flip.next");
            let mut outside = false;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&staged);
                if outside {
                    symlink("inside.txt", &staged).unwrap();
                } else {
                    symlink(&secret, &staged).unwrap();
                }
                // rename(2) swaps the link atomically: every open sees one target or the other.
                std::fs::rename(&staged, root.join("flip")).unwrap();
                outside = !outside;
            }
        })
    };
    let registry = registry(&fixture.root);
    let (mut read, mut refused) = (0, 0);
    for _ in 0..400 {
        let result = call(&registry, "read_file", json!({ "path": "flip" })).await;
        assert!(!result.text().contains("SECRET"), "{}", result.text());
        if result.is_error() {
            refused += 1;
        } else {
            assert_eq!(result.value().unwrap()["lines"], json!(["inside line"]));
            read += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(read + refused, 400);
}

#[tokio::test]
async fn special_files_are_refused_without_blocking() {
    let fixture = fixture();
    symlink("/dev/zero", fixture.root.join("zero")).unwrap();
    let fifo = fixture.root.join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let registry = registry(&fixture.root);

    refused_as_escape(&call(&registry, "read_file", json!({ "path": "zero" })).await);
    for tool in ["read_file", "file_stats"] {
        let result = call(&registry, tool, json!({ "path": "fifo" })).await;
        assert!(result.is_error());
        assert!(
            result.text().contains("it is a FIFO, not a regular file"),
            "{}",
            result.text()
        );
    }
    // A search walks past the FIFO instead of waiting on it.
    let found = call(&registry, "grep", json!({ "pattern": "inside" })).await;
    assert_eq!(
        found.value().unwrap()["matches"].as_array().unwrap().len(),
        1
    );

    // A device node inside the root (making one needs CAP_MKNOD).
    let device = fixture.root.join("zero_device");
    match rustix::fs::mknodat(
        rustix::fs::CWD,
        &device,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::makedev(1, 5),
    ) {
        Ok(()) => {
            let result = call(&registry, "read_file", json!({ "path": "zero_device" })).await;
            assert!(
                result
                    .text()
                    .contains("it is a character device, not a regular file"),
                "{}",
                result.text()
            );
        }
        Err(error) => eprintln!("skipped the device-node case: mknod: {error}"),
    }
}

/// Runs `dsh-tools call TOOL ARGS` over `root`; returns the result's value and its peak resident size
/// in bytes (from `wait4`'s resource usage).
// The child is reaped by `wait4` (for its resource usage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn call_in_child(root: &Path, tool: &str, arguments: Value) -> (Value, u64) {
    let mut child = Command::new(BIN)
        .args(["--json", "--builtin", "repo", "--root"])
        .arg(root)
        .args(["call", tool, &arguments.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
        text
    });
    let mut status = 0;
    // SAFETY: `rusage` is plain data, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child is ours and not yet reaped; `status` and `usage` are valid for writes.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let text = reader.join().unwrap();
    let printed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(printed["status"], "success", "{text:.300}");
    (printed["value"].clone(), usage.ru_maxrss as u64 * 1024)
}

/// The peak a `dsh-tools call` may reach on a huge one-line file: well above what the process
/// needs (its binary and runtime), far below the file.
const CHILD_PEAK_BYTES: u64 = 96 * 1024 * 1024;

/// The one-line file of [`a_huge_one_line_file_is_read_in_bounded_memory`]: 1.5× the peak allowed.
const HUGE_FILE_BYTES: u64 = CHILD_PEAK_BYTES * 3 / 2;

#[test]
fn a_huge_one_line_file_is_read_in_bounded_memory() {
    let fixture = fixture();
    // Zero bytes and no newline, sparse: nothing written to disk. Larger than the peak allowed
    // (a whole-file read fails the test), small enough for `read_file`'s declared 5 s timeout
    // on a busy machine running a debug build.
    let big = std::fs::File::create(fixture.root.join("one_line.bin")).unwrap();
    big.set_len(HUGE_FILE_BYTES).unwrap();
    drop(big);

    let (value, peak) = call_in_child(
        &fixture.root,
        "read_file",
        json!({ "path": "one_line.bin" }),
    );
    assert!(peak < CHILD_PEAK_BYTES, "read_file peak {peak} bytes");
    assert_eq!(value["total_lines"], 1, "{value}");
    let line = value["lines"][0].as_str().unwrap();
    assert!(
        line.ends_with(&format!(" … [{} more bytes]", HUGE_FILE_BYTES - 16 * 1024)),
        "{:.100}",
        &line[line.len() - 60..]
    );

    let (value, peak) = call_in_child(
        &fixture.root,
        "file_stats",
        json!({ "path": "one_line.bin" }),
    );
    assert!(peak < CHILD_PEAK_BYTES, "file_stats peak {peak} bytes");
    assert_eq!(value["bytes"], HUGE_FILE_BYTES, "{value}");
    assert_eq!(value["lines"], 0);

    let (value, peak) = call_in_child(&fixture.root, "grep", json!({ "pattern": "\\x00" }));
    assert!(peak < CHILD_PEAK_BYTES, "grep peak {peak} bytes");
    let matches = value["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 1, "{value}");
    assert!(matches[0]["line"].as_str().unwrap().len() < 2048);
}

#[tokio::test]
async fn a_pattern_too_large_to_compile_is_refused() {
    let fixture = fixture();
    let registry = registry(&fixture.root);
    let result = call(&registry, "grep", json!({ "pattern": "(\\w{100}){100}" })).await;
    assert!(result.is_error());
    assert!(
        result.text().contains("invalid pattern"),
        "{}",
        result.text()
    );
}

/// A search of a 1 TiB sparse file would read for minutes: cancelled once it started, it
/// settles as cancelled (the search ran on tokio's workers before, blind to the signal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_search_stops_when_cancelled() {
    let fixture = fixture();
    let big = std::fs::File::create(fixture.root.join("huge.bin")).unwrap();
    big.set_len(1 << 40).unwrap();
    drop(big);
    let registry = registry(&fixture.root);
    let signal = CancellationToken::new();
    let call = registry.execute(
        ToolCall::new("g-1", "grep", json!({ "pattern": "never-there" }))
            .with_signal(signal.clone()),
    );
    // The event to cancel on: the search has the file open, so its body is reading.
    let cancel = async {
        while !holds_open("huge.bin") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        signal.cancel();
    };
    let (result, ()) = tokio::time::timeout(FAILURE_BOUND, async { tokio::join!(call, cancel) })
        .await
        .expect("the cancelled search settles");
    assert_eq!(
        result.error_code(),
        Some(dsh_tools::result::ErrorCode::Aborted),
        "{}",
        result.text()
    );
}

#[tokio::test]
async fn names_that_are_not_utf8_are_left_out_of_walks() {
    use std::os::unix::ffi::OsStrExt;
    let fixture = fixture();
    let name = std::ffi::OsStr::from_bytes(b"bad\xffname.txt");
    std::fs::write(fixture.root.join(name), "inside too\n").unwrap();
    let registry = registry(&fixture.root);
    let paths = listed_paths(&registry).await;
    // Every listed path opens again.
    assert_eq!(paths, ["inside.txt"]);
    for path in &paths {
        assert!(
            !call(&registry, "read_file", json!({ "path": path }))
                .await
                .is_error()
        );
    }
}

/// Whether this process has a descriptor open on a file named `name`.
fn holds_open(name: &str) -> bool {
    std::fs::read_dir("/proc/self/fd").is_ok_and(|fds| {
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.ends_with(name)))
    })
}
