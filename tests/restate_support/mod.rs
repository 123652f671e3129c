//! The pinned `restate-server` (`.ci/tools/restate`, installed by `.ci/install-tools.sh`) as the
//! Restate tests start it: free loopback ports, data in a temporary directory, retries of an
//! invocation whose deployment is down at most a second apart. Every wait is on an event,
//! bounded by [`BOUND`] only to fail.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

/// A failure bound only: every wait ends on an event long before it.
pub(crate) const BOUND: Duration = Duration::from_secs(120);

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The pinned server binary of this platform; `None` (with a printed reason) when it cannot be
/// installed, and a panic under CI.
pub(crate) fn server_binary() -> Option<PathBuf> {
    crate::mcp_support::tools()?;
    let scope = Path::new(ROOT).join(".tools/restate/node_modules/@restatedev");
    let found = std::fs::read_dir(&scope).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|entry| entry.path().join("bin/restate-server"))
            .find(|path| path.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no restate-server binary for this platform under {} (CI)",
            scope.display()
        );
        eprintln!("SKIPPED: no restate-server binary for this platform");
    }
    found
}

/// Polls `ready` until it holds; panics with `what` after [`BOUND`].
pub(crate) async fn wait_until<F: std::future::Future<Output = bool>>(
    what: &str,
    mut ready: impl FnMut() -> F,
) {
    let deadline = Instant::now() + BOUND;
    while !ready().await {
        assert!(Instant::now() < deadline, "{what} within {BOUND:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until something accepts connections on `port` of 127.0.0.1.
pub(crate) async fn wait_for_port(what: &str, port: u16) {
    wait_until(what, || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
}

/// A child process killed (SIGKILL) and reaped when dropped.
pub(crate) struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `restate-server` on free loopback ports, its data in a temporary directory.
pub(crate) struct Server {
    _process: Process,
    _base: tempfile::TempDir,
    pub admin: String,
    pub ingress: String,
}

impl Server {
    pub(crate) async fn start(binary: &Path, http: &reqwest::Client) -> Server {
        Server::start_signing(binary, http, None).await
    }

    /// A server that signs its requests to deployments with the Ed25519 private key in the PEM
    /// file `identity` (`request-identity-private-key-pem-file`), when given.
    pub(crate) async fn start_signing(
        binary: &Path,
        http: &reqwest::Client,
        identity: Option<&Path>,
    ) -> Server {
        let base = tempfile::tempdir().unwrap();
        let port = crate::mcp_support::free_port;
        let (admin, ingress, node) = (port(), port(), port());
        let mut command = Command::new(binary);
        if let Some(identity) = identity {
            command.env(
                "RESTATE_WORKER__INVOKER__REQUEST_IDENTITY_PRIVATE_KEY_PEM_FILE",
                identity,
            );
        }
        let child = command
            .args(["--no-logo", "--node-name", "test", "--base-dir"])
            .arg(base.path())
            .env("RESTATE_LISTEN_MODE", "tcp")
            .env("RESTATE_ADMIN__BIND_ADDRESS", format!("127.0.0.1:{admin}"))
            .env(
                "RESTATE_INGRESS__BIND_ADDRESS",
                format!("127.0.0.1:{ingress}"),
            )
            .env("RESTATE_BIND_ADDRESS", format!("127.0.0.1:{node}"))
            .env("RESTATE_DISABLE_TELEMETRY", "true")
            .env("RESTATE_DEFAULT_NUM_PARTITIONS", "1")
            .env("RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE", "256MiB")
            // Retries of an invocation whose deployment is down come at most a second apart.
            .env("RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL", "1s")
            .env("RESTATE_DEFAULT_RETRY_POLICY__MAX_ATTEMPTS", "1000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("restate-server starts");
        let server = Server {
            _process: Process(child),
            _base: base,
            admin: format!("http://127.0.0.1:{admin}"),
            ingress: format!("http://127.0.0.1:{ingress}"),
        };
        let health = format!("{}/health", server.admin);
        wait_until("the admin API is healthy", || {
            let request = http.get(&health).send();
            async move { request.await.is_ok_and(|r| r.status().is_success()) }
        })
        .await;
        server
    }

    /// Asks the server to register the deployment at `uri` once: its HTTP status and answer.
    pub(crate) async fn try_register(&self, http: &reqwest::Client, uri: &str) -> (u16, String) {
        let answer = http
            .post(format!("{}/deployments", self.admin))
            .json(&json!({"uri": uri}))
            .send()
            .await
            .expect("the admin API answers");
        let status = answer.status().as_u16();
        (status, answer.text().await.unwrap_or_default())
    }

    /// Registers the deployment at `uri` (`POST /deployments`), once the server takes it.
    pub(crate) async fn register(&self, http: &reqwest::Client, uri: &str) {
        let url = format!("{}/deployments", self.admin);
        wait_until("the deployment is registered", || {
            let request = http.post(&url).json(&json!({"uri": uri})).send();
            async move { request.await.is_ok_and(|r| r.status().is_success()) }
        })
        .await;
    }
}

/// A client whose requests may wait as long as Restate retries an invocation.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(BOUND).build().unwrap()
}

/// The `_meta` of a stateless (2026-07-28) request; `tasks` declares the tasks extension.
pub(crate) fn meta(tasks: bool) -> serde_json::Value {
    let capabilities = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "replica-test", "version": "1"}
    })
}

/// One stateless JSON-RPC request to the MCP endpoint `url`: `Ok` with the JSON-RPC answer
/// (`result` or `error`), `Err` with what the HTTP layer said (a load balancer's 502 or 503
/// while a replica is down, a connection reset).
pub(crate) async fn rpc(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    method: &str,
    name: Option<&str>,
    params: serde_json::Value,
) -> Result<serde_json::Value, String> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .json(&body);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let response = request.send().await.map_err(|error| error.to_string())?;
    let status = response.status();
    let text = response.text().await.map_err(|error| error.to_string())?;
    if !status.is_success() {
        return Err(format!("HTTP {status}: {text}"));
    }
    // A JSON body, or an event stream whose `data:` line holds the answer.
    let answer = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .chain(std::iter::once(text.as_str()))
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some());
    answer.ok_or_else(|| format!("no JSON-RPC answer in: {text}"))
}

/// A `dsh-tools serve --http` process on Restate (`--restate`), with the MCP server
/// `append` (`tests/mcp_servers/append_server.py` over `lines`) as its tool source.
pub(crate) struct Replica {
    pub process: Process,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    pub mcp_port: u16,
    pub deployment_port: u16,
}

/// What every replica of one test shares.
pub(crate) struct ReplicaSetup<'a> {
    pub binary: &'a Path,
    pub python: String,
    pub lines: &'a Path,
    pub token_file: &'a Path,
    pub server: &'a Server,
}

impl ReplicaSetup<'_> {
    /// Starts a replica on `mcp_port` (MCP) and `deployment_port` (its Restate deployment),
    /// running programs on the embedded QuickJS when the binary has it, else on Node.js; waits
    /// until both ports accept connections. Panics with the replica's stderr when it exits
    /// first.
    pub(crate) async fn start(&self, mcp_port: u16, deployment_port: u16) -> Replica {
        self.try_start(mcp_port, deployment_port)
            .await
            .unwrap_or_else(|stderr| panic!("the replica exited before serving: {stderr}"))
    }

    /// [`start`](Self::start) on two free ports. A port is free when picked, and another
    /// process may take it before the replica binds it: a replica that exits because its
    /// address is in use is started again on two other ports (at most five times).
    pub(crate) async fn start_free(&self) -> Replica {
        let mut stderr = String::new();
        for _ in 0..5 {
            let ports = (
                crate::mcp_support::free_port(),
                crate::mcp_support::free_port(),
            );
            match self.try_start(ports.0, ports.1).await {
                Ok(replica) => return replica,
                Err(text) if text.contains("in use") => stderr = text,
                Err(text) => panic!("the replica exited before serving: {text}"),
            }
        }
        panic!("five replicas in a row found their port taken: {stderr}")
    }

    /// A started replica, or its stderr when it exits before both ports accept connections.
    async fn try_start(&self, mcp_port: u16, deployment_port: u16) -> Result<Replica, String> {
        let append = format!(
            "append={} {ROOT}/tests/mcp_servers/append_server.py {}",
            self.python,
            self.lines.display()
        );
        let runtime = if cfg!(feature = "embedded-python") {
            "embedded"
        } else {
            "subprocess"
        };
        // The replicas' shared secret: each answers for the tasks the others started.
        let secret = self.token_file.with_file_name("restate-secret");
        std::fs::write(&secret, "replicas-of-one-deployment-share-this-secret").unwrap();
        std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let stderr_path = self
            .token_file
            .with_file_name(format!("replica-{mcp_port}.stderr"));
        let child = Command::new(self.binary)
            .args([
                "--mcp",
                &append,
                "serve",
                "--mode",
                "code",
                "--runtime",
                runtime,
            ])
            .arg("--http")
            .arg(format!("127.0.0.1:{mcp_port}"))
            .arg("--auth-token-file")
            .arg(self.token_file)
            .args(["--restate", &self.server.ingress])
            .args(["--restate-admin", &self.server.admin])
            .arg("--restate-secret-file")
            .arg(&secret)
            .arg("--restate-deployment")
            .arg(format!("127.0.0.1:{deployment_port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("dsh-tools serve starts");
        let mut process = Process(child);
        for port in [mcp_port, deployment_port] {
            let deadline = Instant::now() + BOUND;
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                if let Some(status) = process.0.try_wait().unwrap() {
                    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                    return Err(format!("{status}: {stderr}"));
                }
                assert!(
                    Instant::now() < deadline,
                    "the replica serves port {port} within {BOUND:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(Replica {
            process,
            url: format!("http://127.0.0.1:{mcp_port}/mcp"),
            mcp_port,
            deployment_port,
        })
    }
}

/// The lines of `path` (none when it does not exist yet).
pub(crate) fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}
