//! Streamable HTTP serving: ours against plain rmcp, then memory per idle session.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_tools::mcp::McpTransport;
use dsh_tools::prelude::ServeExt;
use dsh_tools::{Registry, ToolDefinition};
use futures::future::join_all;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ContentBlock, Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

const CLIENTS: usize = 50;
const CALLS_PER_CLIENT: usize = 100;
const ROUNDS: usize = 5;
const IDLE_SESSIONS: usize = 200;

/// The trivial tool both servers serve: its `text` back.
fn echo_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

/// The minimal plain rmcp server: one tool, no pipeline, no authentication.
#[derive(Clone)]
struct PlainEcho;

impl ServerHandler for PlainEcho {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Value::Object(schema) = echo_schema() else {
            unreachable!("an object schema")
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "echo",
            "Echoes its text.",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request
            .arguments
            .and_then(|arguments| arguments.get("text").cloned())
            .and_then(|text| text.as_str().map(str::to_owned))
            .unwrap_or_default();
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// Serves [`PlainEcho`] the way rmcp's examples do: its tower service on hyper, one
/// connection per accepted socket.
async fn plain_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = TowerToHyperService::new(StreamableHttpService::new(
        || Ok(PlainEcho),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    ));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let service = service.clone();
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// The same tool in a registry, served with the bearer token `McpTransport::http` makes.
async fn our_server() -> (SocketAddr, String) {
    let registry = Registry::new();
    let echo = ToolDefinition::builder("echo")
        .description("Echoes its text.")
        .parameters(echo_schema())
        .concurrency_safe()
        .handler(|args: Value, _exec| async move { Ok(args["text"].clone()) })
        .build()
        .unwrap();
    registry.register(echo).unwrap();
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let addr = transport.local_addr().unwrap();
    let token = transport.bearer_token().unwrap().to_owned();
    tokio::spawn(async move {
        let _ = registry.serve_mcp(None, transport).await;
    });
    (addr, token)
}

async fn client(addr: SocketAddr, token: Option<&str>) -> RunningService<RoleClient, ClientConfig> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"));
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("bench", "1"),
    );
    info.serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize")
}

/// Requests per second of [`CLIENTS`] clients, each making [`CALLS_PER_CLIENT`] calls in a
/// row.
async fn round(clients: &[RunningService<RoleClient, ClientConfig>]) -> f64 {
    let start = Instant::now();
    join_all(clients.iter().enumerate().map(|(n, client)| async move {
        for i in 0..CALLS_PER_CLIENT {
            let params = CallToolRequestParams::new("echo").with_arguments(
                json!({"text": format!("hello {n} {i}")})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
            let result = client.call_tool(params).await.expect("tools/call");
            assert_ne!(result.is_error, Some(true), "{result:?}");
        }
    }))
    .await;
    (clients.len() * CALLS_PER_CLIENT) as f64 / start.elapsed().as_secs_f64()
}

pub(crate) fn run() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let [plain, ours] = rt.block_on(async {
        let (ours_addr, token) = our_server().await;
        let plain_addr = plain_server().await;
        let ours = join_all((0..CLIENTS).map(|_| client(ours_addr, Some(&token)))).await;
        let plain = join_all((0..CLIENTS).map(|_| client(plain_addr, None))).await;
        // Warm both up.
        round(&ours).await;
        round(&plain).await;
        let mut rates = [Vec::new(), Vec::new()];
        for n in 0..ROUNDS {
            // Which goes first swaps every round.
            for ours_now in [n % 2 == 0, n % 2 == 1] {
                let rate = round(if ours_now { &ours } else { &plain }).await;
                rates[usize::from(ours_now)].push(rate);
            }
        }
        for clients in [ours, plain] {
            join_all(clients.into_iter().map(|client| client.cancel())).await;
        }
        rates.each_mut().map(|rates| {
            rates.sort_by(f64::total_cmp);
            rates[rates.len() / 2]
        })
    });
    println!(
        "serve over streamable HTTP, {CLIENTS} concurrent clients x {CALLS_PER_CLIENT} calls, \
         median of {ROUNDS} alternating rounds: ours (Registry::serve_mcp, bearer auth) \
         {ours:.0} req/s vs plain rmcp {plain:.0} req/s, ratio {:.3}",
        ours / plain
    );
    idle_session_memory();
}

/// The resident memory of `dsh-tools serve --http` before and after [`IDLE_SESSIONS`]
/// sessions are initialized and left idle.
fn idle_session_memory() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-tools"))
        .args([
            "--builtin",
            "repo",
            "--root",
            env!("CARGO_MANIFEST_DIR"),
            "serve",
        ])
        .args(["--http", "0", "--max-sessions", "1000"])
        .env_remove("DSH_TOOLS_AUTH_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("dsh-tools serve --http");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("the URL");
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("dsh-tools: serving MCP on http://")
        .and_then(|rest| rest.split_once("/mcp "))
        .map(|(addr, _)| addr)
        .and_then(|addr| addr.parse().ok())
        .expect("the URL line");
    line.clear();
    stderr.read_line(&mut line).expect("the notice");
    let token = line
        .split_once("\"Authorization: Bearer ")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(token, _)| token.to_owned())
        .expect("a generated token");
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let rss = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.trim().strip_suffix("kB"))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .expect("VmRSS")
    };
    let request = |session: Option<&str>, body: &str| -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let session = session
            .map(|id| format!("mcp-session-id: {id}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
             accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n\
             mcp-protocol-version: 2025-06-18\r\n{session}content-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let open = |count: usize| {
        for _ in 0..count {
            let answer = request(None, initialize);
            let id = answer
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("mcp-session-id")
                        .then(|| value.trim().to_owned())
                })
                .expect("a session id");
            request(Some(&id), initialized);
        }
    };
    // One session first, so that what every session shares is paid before the baseline.
    open(1);
    let before = rss();
    open(IDLE_SESSIONS);
    let after = rss();
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "dsh-tools serve --http: {IDLE_SESSIONS} idle initialized sessions, resident memory \
         {before:.0} KiB -> {after:.0} KiB, {:.1} KiB per session",
        (after - before) / IDLE_SESSIONS as f64
    );
}
