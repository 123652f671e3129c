//! How the HTTP client opens a 2025-11-25 session, against a server of a few lines of HTTP/1.1
//! on a socket that sees the order in which requests arrive:
//! - the first request waits for the session's standalone GET stream to be answered: a server
//!   may send the answer of a request whose own stream it closed, or ask the person
//!   (elicitation), only on that stream, so a request sent before it opens can lose what belongs
//!   to it;
//! - a slow 2025-era answer to `server/discover` still opens the session with `initialize`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dsh_tools::Registry;
use dsh_tools::mcp::McpServer;
use dsh_tools::prelude::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// How long the server holds the GET's answer back, giving a client that does not wait the
/// chance to send its next request first. A client that waits passes however long this is.
const HOLD: Duration = Duration::from_secs(3);

/// What the server saw, and how long it takes to answer `server/discover`.
#[derive(Default)]
struct Seen {
    discover_delay: Duration,
    /// The GET stream has been answered.
    get_answered: AtomicBool,
    /// A request after `notifications/initialized` arrived before the GET was answered.
    early_request: AtomicBool,
    /// A request after `notifications/initialized` arrived.
    request: Notify,
}

/// One HTTP/1.1 request: method, headers (lowercase names) and body.
struct Request {
    method: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let method = line.split(' ').next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await.ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.ok()?;
    Some(Request {
        method,
        headers,
        body,
    })
}

async fn answer_json(reader: &mut BufReader<TcpStream>, status: &str, body: Option<Value>) {
    let body = body.map(|body| body.to_string()).unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    let stream = reader.get_mut();
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
}

/// One connection: a 2025-11-25 session on `/mcp` with one tool.
async fn serve(stream: TcpStream, seen: Arc<Seen>) {
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader).await {
        match request.method.as_str() {
            "GET" => {
                // Held until the client's next request arrives (a client that did not wait) or
                // for `HOLD` (one that waits); then an open, empty event stream.
                let _ = tokio::time::timeout(HOLD, seen.request.notified()).await;
                seen.get_answered.store(true, Ordering::SeqCst);
                let stream = reader.get_mut();
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                          cache-control: no-cache\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                let _ = stream.flush().await;
                // The stream stays open until the client closes it.
                let mut rest = Vec::new();
                let _ = reader.read_to_end(&mut rest).await;
                return;
            }
            "DELETE" => answer_json(&mut reader, "200 OK", None).await,
            _ => {
                let message: Value = serde_json::from_slice(&request.body).unwrap_or_default();
                let has_session = request
                    .headers
                    .iter()
                    .any(|(name, _)| name == "mcp-session-id");
                let id = message["id"].clone();
                match message["method"].as_str().unwrap_or_default() {
                    "initialize" => {
                        let result = json!({
                            "protocolVersion": "2025-11-25",
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "standalone", "version": "1"},
                        });
                        let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
                        answer_json(&mut reader, "200 OK", Some(body)).await;
                    }
                    "notifications/initialized" => {
                        answer_json(&mut reader, "202 Accepted", None).await;
                    }
                    method if has_session => {
                        if !seen.get_answered.load(Ordering::SeqCst) {
                            seen.early_request.store(true, Ordering::SeqCst);
                        }
                        seen.request.notify_one();
                        let result = match method {
                            "tools/list" => json!({"tools": [{
                                "name": "noop",
                                "inputSchema": {"type": "object"},
                            }]}),
                            _ => json!({}),
                        };
                        let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
                        answer_json(&mut reader, "200 OK", Some(body)).await;
                    }
                    // `server/discover` and anything else before the session: a 2025-era
                    // server knows no such method.
                    method => {
                        if method == "server/discover" {
                            tokio::time::sleep(seen.discover_delay).await;
                        }
                        let error = json!({"code": -32601, "message": "Method not found"});
                        let body = json!({"jsonrpc": "2.0", "id": id, "error": error});
                        answer_json(&mut reader, "200 OK", Some(body)).await;
                    }
                }
            }
        }
    }
}

/// Starts the server; returns its URL and what it sees.
async fn start(seen: Seen) -> (String, Arc<Seen>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(seen);
    let accepting = seen.clone();
    let server = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, accepting.clone()));
        }
    });
    (url, seen, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_request_waits_for_the_standalone_get_stream() {
    let (url, seen, server) = start(Seen::default()).await;
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(McpServer::http("standalone", url))
        .await
        .expect("connects");
    assert_eq!(handle.tools(), vec!["mcp__standalone__noop".to_owned()]);
    assert!(seen.get_answered.load(Ordering::SeqCst));
    assert!(
        !seen.early_request.load(Ordering::SeqCst),
        "a request reached the server before its standalone GET stream was answered"
    );
    handle.disconnect().await;
    server.abort();
}

/// rmcp's own fallback gives `server/discover` 10 seconds, then sends `initialize` on the same
/// transport, where the late answer to `server/discover` fails it. Answered after 12 seconds,
/// the discover is still waited for and the session opened again with `initialize`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_2025_answer_to_discover_still_opens_with_initialize() {
    let (url, _seen, server) = start(Seen {
        discover_delay: Duration::from_secs(12),
        ..Seen::default()
    })
    .await;
    let registry = Registry::new();
    let handle = registry
        .add_mcp_server(McpServer::http("slow", url).connect_timeout_ms(120_000))
        .await
        .expect("connects");
    assert_eq!(handle.tools(), vec!["mcp__slow__noop".to_owned()]);
    handle.disconnect().await;
    server.abort();
}
