//! The command line's spans in a receiver users run: Arize Phoenix (pinned by
//! `.ci/install-tools.sh`) on a free loopback port, fed over OTLP/HTTP, read back through its REST
//! API. A native call, a failing call, a code-mode program of three binding calls (one tree), and
//! a call through a client, a proxy and an upstream server, three processes (one trace).
//! Every wait polls for what it needs; the bounds only fail a stuck run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::mcp_support::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_dsh-tools");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Phoenix starts in tens of seconds on two busy cores; the bound is far beyond.
const STARTUP_BOUND: Duration = Duration::from_secs(300);
/// Spans arrive within a batch delay (100 ms here); the bound is far beyond.
const SPANS_BOUND: Duration = Duration::from_secs(120);

/// The pinned Phoenix's venv, or `None` (printed) when it cannot be installed here; under CI
/// it must be.
fn phoenix_venv() -> Option<PathBuf> {
    let status = Command::new(format!("{ROOT}/.ci/install-tools.sh"))
        .stdout(Stdio::null())
        .status();
    let venv = PathBuf::from(format!("{ROOT}/.tools/phoenix"));
    match status {
        Ok(status) if status.success() && venv.join("bin/phoenix").exists() => Some(venv),
        other if std::env::var_os("CI").is_some() => {
            panic!(".ci/install-tools.sh could not install Arize Phoenix ({other:?}) under CI")
        }
        other => {
            eprintln!(
                "SKIPPED: .ci/install-tools.sh could not install Arize Phoenix ({other:?}); \
                 needs python3 with venv"
            );
            None
        }
    }
}

/// A Phoenix server of its own (its own database), killed on drop.
struct Phoenix {
    child: std::cell::RefCell<Child>,
    url: String,
    log: PathBuf,
    err: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let child = self.child.get_mut();
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// How many times Phoenix is started on fresh ports when it could not bind the ones it was
/// given: a free port is picked, then released for Phoenix to bind, and another process on the
/// machine may take it in between.
const PORT_RACES: usize = 3;

impl Phoenix {
    fn start(venv: &Path) -> Phoenix {
        for _ in 0..PORT_RACES {
            let phoenix = Phoenix::spawn(venv);
            match phoenix.wait_until(STARTUP_BOUND, "Phoenix to answer /healthz", |phoenix| {
                phoenix
                    .get("/healthz")
                    .is_some_and(|(status, _)| status == 200)
            }) {
                Ok(()) => return phoenix,
                // uvicorn's words for the HTTP port, gRPC's for the other.
                Err(stderr)
                    if stderr.contains("address already in use")
                        || stderr.contains("Failed to bind") =>
                {
                    continue;
                }
                Err(stderr) => panic!("Phoenix exited before it answered: {stderr}"),
            }
        }
        panic!("Phoenix lost the race for its ports {PORT_RACES} times");
    }

    fn spawn(venv: &Path) -> Phoenix {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let log = dir.path().join("phoenix.log");
        let err = dir.path().join("phoenix.err");
        let child = Command::new(venv.join("bin/phoenix"))
            .arg("serve")
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("phoenix starts");
        Phoenix {
            child: std::cell::RefCell::new(child),
            url: format!("http://127.0.0.1:{port}"),
            log,
            err,
            _dir: dir,
        }
    }

    /// A GET's status and body, `None` while nothing listens.
    fn get(&self, path: &str) -> Option<(u16, String)> {
        let url = format!("{}{path}", self.url);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let response = reqwest::get(&url).await.ok()?;
            let status = response.status().as_u16();
            Some((status, response.text().await.ok()?))
        })
    }

    /// Polls `done` until it holds; `Err` with Phoenix's stderr as soon as Phoenix has exited
    /// (nothing would ever answer), a panic once `bound` has passed.
    fn wait_until(
        &self,
        bound: Duration,
        what: &str,
        mut done: impl FnMut(&Phoenix) -> bool,
    ) -> Result<(), String> {
        let started = Instant::now();
        while !done(self) {
            if let Ok(Some(status)) = self.child.borrow_mut().try_wait() {
                let stderr = std::fs::read_to_string(&self.err).unwrap_or_default();
                return Err(format!(
                    "{status} while waiting for {what}; stderr:\n{stderr}"
                ));
            }
            assert!(
                started.elapsed() < bound,
                "waited {bound:?} for {what}; phoenix log:\n{}\nstderr:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default(),
                std::fs::read_to_string(&self.err).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Every span of the default project.
    fn spans(&self) -> Vec<Span> {
        let Some((200, body)) = self.get("/v1/projects/default/spans?limit=1000") else {
            return Vec::new();
        };
        let body: Value = serde_json::from_str(&body).expect("Phoenix answers JSON");
        body["data"]
            .as_array()
            .into_iter()
            .flatten()
            .map(Span::from_json)
            .collect()
    }

    /// Polls until `pick` finds what it needs among the spans.
    fn wait_for<T>(&self, what: &str, mut pick: impl FnMut(&[Span]) -> Option<T>) -> T {
        let mut found = None;
        if let Err(exit) = self.wait_until(SPANS_BOUND, what, |phoenix| {
            found = pick(&phoenix.spans());
            found.is_some()
        }) {
            panic!("Phoenix exited: {exit}");
        }
        found.expect("found")
    }
}

/// A span as Phoenix's REST API returns it.
#[derive(Clone, Debug)]
struct Span {
    name: String,
    trace: String,
    id: String,
    parent: Option<String>,
    status: String,
    attributes: HashMap<String, Value>,
}

impl Span {
    fn from_json(span: &Value) -> Span {
        Span {
            name: span["name"].as_str().unwrap_or_default().to_owned(),
            trace: span["context"]["trace_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            id: span["context"]["span_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            parent: span["parent_id"].as_str().map(str::to_owned),
            status: span["status_code"].as_str().unwrap_or_default().to_owned(),
            attributes: span["attributes"]
                .as_object()
                .map(|map| map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
        }
    }

    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).and_then(Value::as_str)
    }
}

/// Runs the command line, exporting to `phoenix` (flag for this process, the standard variable
/// for the servers it starts), and returns its stdout. Every export must reach Phoenix: a
/// failed one is reported on stderr, and fails the test at once. A loaded Phoenix may take
/// seconds to read a batch: one export may take as long as the test waits for spans (a bound,
/// the exit waits only until the batch is taken). Phoenix takes no metrics.
fn dsh_tools(phoenix: &Phoenix, args: &[&str]) -> String {
    let output = Command::new(BIN)
        .arg("--otlp-endpoint")
        .arg(&phoenix.url)
        .args(args)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &phoenix.url)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env(
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            SPANS_BOUND.as_millis().to_string(),
        )
        .env("OTEL_METRICS_EXPORTER", "none")
        .stdin(Stdio::null())
        .output()
        .expect("dsh-tools runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("OTLP export failed"),
        "dsh-tools {args:?}: {stderr}"
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|span| span.name == name).collect()
}

#[test]
fn phoenix_reads_back_every_kind_of_call() {
    let Some(venv) = phoenix_venv() else { return };
    let phoenix = Phoenix::start(&venv);
    let repo = ["--builtin", "repo", "--root", ROOT];

    // A native call and a failing one.
    dsh_tools(
        &phoenix,
        &[
            &repo[..],
            &["call", "file_stats", r#"{"path": "Cargo.toml"}"#],
        ]
        .concat(),
    );
    dsh_tools(
        &phoenix,
        &[&repo[..], &["call", "read_file", r#"{"path": 42}"#]].concat(),
    );
    let ok = phoenix.wait_for("the native call's span", |spans| {
        named(spans, "execute_tool file_stats")
            .first()
            .map(|span| (*span).clone())
    });
    assert_eq!(ok.attribute("gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(ok.attribute("gen_ai.tool.name"), Some("file_stats"));
    assert_eq!(ok.attribute("gen_ai.tool.type"), Some("function"));
    assert_eq!(ok.attribute("dsh.mode"), Some("native"));
    assert_eq!(ok.attribute("error.type"), None);
    assert_eq!(ok.parent, None, "a root span");
    let failed = phoenix.wait_for("the failing call's span", |spans| {
        named(spans, "execute_tool read_file")
            .first()
            .map(|span| (*span).clone())
    });
    assert_eq!(failed.attribute("error.type"), Some("INVALID_ARGS"));
    assert_eq!(failed.status, "ERROR");

    // A program of three binding calls: one tree under `run_code`.
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("three.ts");
    std::fs::write(
        &program,
        "const a = await tools.file_stats({ path: 'Cargo.toml' });\n\
         const [b, c] = await Promise.all([\n\
           tools.file_stats({ path: 'README.md' }),\n\
           tools.list_files({ dir: 'docs', limit: 5 }),\n\
         ]);\n\
         return [a.path, b.path, c !== undefined];\n",
    )
    .unwrap();
    dsh_tools(
        &phoenix,
        &[&repo[..], &["run", program.to_str().unwrap()]].concat(),
    );
    let (run, children) = phoenix.wait_for("the program's tree", |spans| {
        let run = named(spans, "execute_tool run_code")
            .first()
            .map(|span| (*span).clone())?;
        let children: Vec<Span> = spans
            .iter()
            .filter(|span| span.parent.as_deref() == Some(run.id.as_str()))
            .filter(|span| span.name.starts_with("execute_tool "))
            .cloned()
            .collect();
        (children.len() == 3).then_some((run, children))
    });
    assert_eq!(run.attribute("dsh.code.outcome"), Some("ok"), "{run:#?}");
    assert_eq!(run.attribute("dsh.code.language"), Some("typescript"));
    let mut names: Vec<&str> = children.iter().map(|span| span.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "execute_tool file_stats",
            "execute_tool file_stats",
            "execute_tool list_files"
        ]
    );
    for child in &children {
        assert_eq!(child.trace, run.trace);
        assert_eq!(
            child.attribute("dsh.parent_call.id"),
            run.attribute("gen_ai.tool.call.id")
        );
    }

    // Client -> proxy (`serve` over an upstream) -> upstream `serve`: three processes.
    let upstream = format!("{BIN} --builtin repo --root {ROOT} serve");
    let proxy = format!("{BIN} --mcp '{upstream}' serve");
    let root_name = "execute_tool mcp__dsh-tools__mcp__dsh-tools__grep";
    dsh_tools(
        &phoenix,
        &[
            "--mcp",
            &proxy,
            "call",
            "mcp__dsh-tools__mcp__dsh-tools__grep",
            r#"{"pattern": "semantic-conventions-genai"}"#,
        ],
    );
    let chain = phoenix.wait_for("the spans of three processes", |spans| {
        let root = named(spans, root_name)
            .first()
            .map(|span| (*span).clone())?;
        let trace: Vec<Span> = spans
            .iter()
            .filter(|span| span.trace == root.trace)
            .cloned()
            .collect();
        // Each process exports on its own: the chain is complete once the upstream's own span
        // of the tool reaches the client's root through parents that have all arrived (the
        // proxy's may come after the upstream's).
        let by_id: HashMap<&str, &Span> =
            trace.iter().map(|span| (span.id.as_str(), span)).collect();
        let mut at = *named(&trace, "execute_tool grep").first()?;
        while let Some(parent) = at.parent.as_deref() {
            at = by_id.get(parent)?;
        }
        (at.id == root.id).then_some(trace)
    });
    let by_id: HashMap<&str, &Span> = chain.iter().map(|span| (span.id.as_str(), span)).collect();
    let mut ancestry = Vec::new();
    let mut at = named(&chain, "execute_tool grep")[0];
    loop {
        ancestry.push(at.name.as_str());
        match at.parent.as_deref().and_then(|parent| by_id.get(parent)) {
            Some(parent) => at = parent,
            None => break,
        }
    }
    let calls: Vec<&str> = ancestry
        .into_iter()
        .filter(|name| !["execute"].contains(name))
        .collect();
    assert_eq!(
        calls,
        [
            "execute_tool grep",
            "tools/call grep",
            "tools/call grep",
            "execute_tool mcp__dsh-tools__grep",
            "tools/call mcp__dsh-tools__grep",
            "tools/call mcp__dsh-tools__grep",
            root_name,
        ],
        "upstream span up to the client's root, one trace: {chain:#?}"
    );
    let served = named(&chain, "tools/call grep");
    assert!(
        served
            .iter()
            .all(|span| span.attribute("mcp.method.name") == Some("tools/call")),
        "{served:#?}"
    );
}

/// An endpoint that is not a URL is refused before anything runs, naming the flag.
#[test]
fn an_endpoint_that_is_not_a_url_is_refused() {
    let output = Command::new(BIN)
        .args([
            "--otlp-endpoint",
            "not a url",
            "--builtin",
            "repo",
            "--root",
            ROOT,
        ])
        .args(["call", "file_stats", r#"{"path": "Cargo.toml"}"#])
        .stdin(Stdio::null())
        .output()
        .expect("dsh-tools runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: --otlp-endpoint: "), "{stderr}");
    assert!(output.stdout.is_empty());
}
