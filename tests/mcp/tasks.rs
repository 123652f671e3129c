//! `run_code` as an MCP task over streamable HTTP (`Registry::serve_mcp` on
//! `McpTransport::http`, bearer auth on), driven by rmcp's own client, which declares the
//! `io.modelcontextprotocol/tasks` extension: the task outlives the client that started it and is
//! polled to its result from another; `tasks/cancel` kills the program's process; the number of
//! live tasks is bounded. And a stateless call whose HTTP stream the client closes is cancelled,
//! its process killed. Every wait is for an event, bounded by `WAIT` only to fail.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use dsh_tools::code::{SubprocessConfig, SubprocessRuntime};
use dsh_tools::mcp::{McpServeOptions, McpTaskLimits, McpTransport};
use dsh_tools::{Mode, Registry, ToolDefinition, ToolExec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    DetailedTask, GetTaskParams, Implementation, TaskPayload, TaskStatus,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use crate::mcp_support::WAIT;
use dsh_tools::prelude::*;

/// The program: reports its interpreter's pid through `hold`, then waits there.
const PROGRAM: &str = "return await tools.hold({ pid: process.pid });";

/// The host side of a served registry in code mode whose one tool, `hold`, records the pid the
/// program sends and then waits until the test releases it (or the call is cancelled).
struct Served {
    url: String,
    token: String,
    addr: SocketAddr,
    pids: watch::Receiver<Vec<u64>>,
    release: Arc<Notify>,
    cancelled: watch::Receiver<usize>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Serves a code-mode registry with `limits` on loopback; `None` when Node.js is missing
/// (printed as skipped, a failure under CI).
async fn serve(limits: McpTaskLimits) -> Option<Served> {
    let config = SubprocessConfig {
        standby: false,
        ..Default::default()
    };
    let runtime = match SubprocessRuntime::typescript(config).await {
        Ok(runtime) => runtime,
        Err(error) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED: tasks tests need Node.js: {error}");
            return None;
        }
        Err(error) => panic!("the TypeScript runtime did not start: {error}"),
    };
    let (pid_sender, pids) = watch::channel(Vec::new());
    let (cancel_sender, cancelled) = watch::channel(0usize);
    let release = Arc::new(Notify::new());
    let released = release.clone();
    let hold = ToolDefinition::builder("hold")
        .description("Records the caller's pid, then waits to be released.")
        .parameters(json!({
            "type": "object",
            "properties": {"pid": {"type": "integer"}},
            "required": ["pid"]
        }))
        .concurrency_safe()
        .handler(move |args: Value, exec: ToolExec| {
            let pid_sender = pid_sender.clone();
            let cancel_sender = cancel_sender.clone();
            let released = released.clone();
            async move {
                let pid = args["pid"].as_u64().unwrap_or_default();
                // Waiting before the pid is out: a release right after it is never missed.
                let release = released.notified();
                tokio::pin!(release);
                release.as_mut().enable();
                pid_sender.send_modify(|pids| pids.push(pid));
                tokio::select! {
                    () = release => Ok(json!("released")),
                    () = exec.signal().cancelled() => {
                        cancel_sender.send_modify(|count| *count += 1);
                        Ok(json!("cancelled"))
                    }
                }
            }
        })
        .build()
        .unwrap();
    let registry = Registry::new();
    registry.register(hold).unwrap();
    registry.set_code_runtime(Arc::new(runtime));
    registry.set_mode(Mode::Code);
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let addr = transport.local_addr().unwrap();
    let token = transport.bearer_token().unwrap().to_owned();
    let options = McpServeOptions::default().task_limits(limits);
    let server = tokio::spawn(async move {
        registry
            .serve_mcp_with(None, transport, options)
            .await
            .unwrap();
    });
    Some(Served {
        url: format!("http://{addr}/mcp"),
        token,
        addr,
        pids,
        release,
        cancelled,
        server,
    })
}

impl Served {
    /// A new rmcp client (its own HTTP connections), declaring the tasks extension or not.
    async fn client(&self, tasks: bool) -> RunningService<RoleClient, ClientConfig> {
        let capabilities = if tasks {
            ClientCapabilities::builder().enable_tasks().build()
        } else {
            ClientCapabilities::default()
        };
        let info = ClientConfig::new(capabilities, Implementation::new("tasks-test", "1"));
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(self.url.as_str())
                .auth_header(self.token.clone()),
        );
        info.serve(transport).await.unwrap()
    }

    /// Waits until `hold` has been called `count` times; the pid of the last call.
    async fn held(&self, count: usize) -> u64 {
        let mut pids = self.pids.clone();
        let seen = tokio::time::timeout(WAIT, pids.wait_for(|pids| pids.len() >= count))
            .await
            .expect("the program never called hold")
            .unwrap();
        seen[count - 1]
    }
}

fn run_code() -> CallToolRequestParams {
    CallToolRequestParams::new("run_code").with_arguments(
        json!({"description": "hold", "code": PROGRAM})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

async fn start_task(client: &RunningService<RoleClient, ClientConfig>) -> String {
    match client.call_tool_once(run_code()).await.unwrap() {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            created.task.task_id
        }
        other => panic!("not a task: {other:?}"),
    }
}

async fn get(client: &RunningService<RoleClient, ClientConfig>, id: &str) -> DetailedTask {
    client.get_task(GetTaskParams::new(id)).await.unwrap().task
}

/// Polls `tasks/get` until `done` accepts the task.
async fn poll_until(
    client: &RunningService<RoleClient, ClientConfig>,
    id: &str,
    done: impl Fn(&DetailedTask) -> bool,
) -> DetailedTask {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let task = get(client, id).await;
        if done(&task) {
            return task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task never got there: {task:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until process `pid` is gone (a zombie counts as gone).
async fn wait_gone(pid: u64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let gone = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        };
        if gone {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} is still running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_code_task_outlives_its_client_and_is_polled_from_another() {
    let Some(served) = serve(McpTaskLimits::default()).await else {
        return;
    };
    let first = served.client(true).await;
    let id = start_task(&first).await;
    served.held(1).await;
    // The client that started the task goes away: its connections close.
    first.cancel().await.unwrap();

    let second = served.client(true).await;
    // While the program waits in `hold`, its progress is the status message.
    let working = poll_until(&second, &id, |task| {
        task.task.status_message.as_deref() == Some("hold started")
    })
    .await;
    assert_eq!(working.task.status, TaskStatus::Working);
    assert_eq!(working.task.ttl_ms, Some(300_000));

    served.release.notify_waiters();
    let done = poll_until(&second, &id, |task| task.task.status.is_terminal()).await;
    let TaskPayload::Completed { result } = done.payload else {
        panic!("not completed: {done:?}");
    };
    assert_eq!(result["isError"], json!(false), "{result:?}");
    assert_eq!(
        result["structuredContent"]["result"],
        json!("released"),
        "{result:?}"
    );
    // The result stays: a later poll reads it again.
    let again = get(&second, &id).await;
    assert_eq!(again.task.status, TaskStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_cancel_kills_the_programs_process() {
    let Some(served) = serve(McpTaskLimits::default()).await else {
        return;
    };
    let client = served.client(true).await;
    let id = start_task(&client).await;
    let pid = served.held(1).await;
    assert!(
        std::fs::metadata(format!("/proc/{pid}")).is_ok(),
        "the program runs"
    );

    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    let ended = poll_until(&client, &id, |task| task.task.status.is_terminal()).await;
    assert_eq!(ended.task.status, TaskStatus::Cancelled, "{ended:?}");
    wait_gone(pid).await;
    assert_eq!(*served.cancelled.borrow(), 1, "hold saw its signal fire");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_number_of_live_tasks_is_bounded() {
    let Some(served) = serve(McpTaskLimits::default().max_live(1)).await else {
        return;
    };
    let client = served.client(true).await;
    let id = start_task(&client).await;
    served.held(1).await;

    let CallToolResponse::Complete(refused) = client.call_tool_once(run_code()).await.unwrap()
    else {
        panic!("a second task was made");
    };
    assert_eq!(refused.is_error, Some(true));
    let text = refused.content[0].as_text().unwrap().text.clone();
    assert!(text.starts_with("too many live tasks (limit 1)"), "{text}");
    // Only one program ever ran.
    assert_eq!(served.pids.borrow().len(), 1);

    // A client without the extension is not refused: its call runs as a plain call.
    let plain = served.client(false).await;
    let call = tokio::spawn(async move { plain.call_tool_once(run_code()).await });
    served.held(2).await;
    served.release.notify_waiters();
    let CallToolResponse::Complete(result) = call.await.unwrap().unwrap() else {
        panic!("a task for a client without the extension");
    };
    assert_eq!(result.is_error, Some(false), "{result:?}");
    // The release ended the task too.
    let ended = poll_until(&client, &id, |task| task.task.status.is_terminal()).await;
    assert_eq!(ended.task.status, TaskStatus::Completed, "{ended:?}");
}

/// A 2026-07-28 (stateless) `tools/call` written by hand, whose client then closes the
/// connection while the program waits: that is its cancellation, and the program's process is
/// killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_calls_stream_cancels_it() {
    let Some(served) = serve(McpTaskLimits::default()).await else {
        return;
    };
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "run_code",
            "arguments": {"description": "hold", "code": PROGRAM},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
            }
        }
    })
    .to_string();
    let addr = served.addr;
    let token = served.token.clone();
    let stream = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
             accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n\
             mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: run_code\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream
    })
    .await
    .unwrap();
    let pid = served.held(1).await;
    assert_eq!(*served.cancelled.borrow(), 0);
    // Nothing has been answered yet: the call is still running.
    stream.set_nonblocking(true).unwrap();
    let mut peek = [0u8; 1];
    assert!(
        (&stream).read(&mut peek).is_err(),
        "the call was answered before its stream closed"
    );
    drop(stream);

    let mut cancelled = served.cancelled.clone();
    tokio::time::timeout(WAIT, cancelled.wait_for(|count| *count == 1))
        .await
        .expect("closing the stream never cancelled the call")
        .unwrap();
    wait_gone(pid).await;
}
