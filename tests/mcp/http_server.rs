//! A `dsh-tools serve --http` child driven by requests written by hand on plain sockets, so a
//! test can send any header, or stop anywhere inside a request. Every wait is for an event (a
//! line on stderr, a closed connection, an answer), bounded by [`FAILURE_BOUND`] only to fail.

// The test calls libc directly (`setrlimit` in the child it starts), with a SAFETY note at each block.
#![allow(unsafe_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const ROOT: &str = env!("CARGO_MANIFEST_DIR");
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_dsh-tools");

/// How long any awaited event may take before the test fails; never a measured duration.
pub(crate) const FAILURE_BOUND: Duration = Duration::from_secs(60);

pub(crate) const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// A `dsh-tools serve --http` child over the built-in toolset, killed on drop.
pub(crate) struct Server {
    child: Child,
    pub addr: SocketAddr,
    /// The token [`Server::request`] sends: the one printed at start when it was generated;
    /// a test that gave its own sets it.
    pub token: Option<String>,
    /// The first line on stderr: the URL, the bind and the hosts allowed.
    pub serving: String,
    /// The second line on stderr: what clients must send.
    pub notice: String,
    /// The lines on stderr after those two.
    later: std::sync::Mutex<std::sync::mpsc::Receiver<String>>,
}

impl Server {
    /// `dsh-tools --builtin repo --root ROOT serve --http 0 SERVE…`, stderr piped.
    pub(crate) fn command(serve: &[&str]) -> Command {
        Server::command_on("0", serve)
    }

    /// [`Server::command`] bound to `addr` (`--http ADDR`).
    pub(crate) fn command_on(addr: &str, serve: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(["--builtin", "repo", "--root", ROOT, "serve", "--http", addr])
            .args(serve)
            // The token is the generated one unless a test sets its own.
            .env_remove("DSH_TOOLS_AUTH_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    /// Starts the server with `serve` arguments, its descriptors capped at `nofile` if given.
    pub(crate) fn start(serve: &[&str], nofile: Option<u64>) -> Server {
        let mut command = Server::command(serve);
        if let Some(nofile) = nofile {
            let limit = libc::rlimit {
                rlim_cur: nofile,
                rlim_max: nofile,
            };
            // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits.
            unsafe {
                command.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        Server::spawn(command)
    }

    /// Spawns `command` and waits for its two lines on stderr: the URL and the bind, then the
    /// notice of what clients must send (with the token in it when it was generated). A server
    /// bound to every interface is reached on loopback.
    pub(crate) fn spawn(mut command: Command) -> Server {
        let mut child = command.spawn().unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let first = read_line(&mut stderr);
        let mut addr: SocketAddr = first
            .strip_prefix("dsh-tools: serving MCP on http://")
            .and_then(|rest| rest.split_once("(bound to "))
            .and_then(|(_, rest)| rest.split_once([',', ';']))
            .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
            .0
            .parse()
            .unwrap();
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let notice = read_line(&mut stderr);
        let token = printed_token(&notice);
        // Keep draining stderr so the server never blocks on a full pipe.
        let (send, later) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                // Once the test stopped listening, the lines are only drained.
                let _ = send.send(line);
            }
        });
        Server {
            child,
            addr,
            token,
            serving: first,
            notice,
            later: std::sync::Mutex::new(later),
        }
    }

    /// The next line on stderr (after the two read at start) that contains `text`; the server
    /// exiting first, or [`FAILURE_BOUND`] passing, fails.
    pub(crate) fn line_containing(&self, text: &str) -> String {
        let later = self.later.lock().unwrap();
        let deadline = Instant::now() + FAILURE_BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match later.recv_timeout(left) {
                Ok(line) if line.contains(text) => return line,
                Ok(_) => {}
                Err(error) => panic!("no line on stderr with {text:?}: {error}"),
            }
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn assert_running(&mut self) {
        assert_eq!(self.child.try_wait().unwrap(), None, "the server exited");
    }

    /// A connected socket whose reads fail past [`FAILURE_BOUND`].
    pub(crate) fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).unwrap();
        stream.set_read_timeout(Some(FAILURE_BOUND)).unwrap();
        stream
    }

    /// The `authorization` header line of [`Server::token`]; empty without one.
    pub(crate) fn auth_line(&self) -> String {
        self.token
            .as_ref()
            .map(|token| format!("authorization: Bearer {token}\r\n"))
            .unwrap_or_default()
    }

    /// One authenticated request on its own connection, answered in full.
    pub(crate) fn request(&self, method: &str, session: Option<&str>, body: &str) -> Answer {
        let session = session
            .map(|id| format!("mcp-session-id: {id}\r\n"))
            .unwrap_or_default();
        self.send(method, &format!("{}{session}", self.auth_line()), body)
    }

    /// One request with `headers` (whole lines, each ending in CRLF) besides the usual ones, on
    /// its own connection (`Connection: close`), answered in full.
    pub(crate) fn send(&self, method: &str, headers: &str, body: &str) -> Answer {
        self.send_to(&self.addr.to_string(), method, headers, body)
    }

    /// [`Server::send`] naming `host` in its `Host` header.
    pub(crate) fn send_to(&self, host: &str, method: &str, headers: &str, body: &str) -> Answer {
        let mut stream = self.connect();
        let head = format!(
            "{method} /mcp HTTP/1.1\r\nhost: {host}\r\naccept: application/json, text/event-stream\r\n\
             content-type: application/json\r\nmcp-protocol-version: 2025-06-18\r\n{headers}\
             content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .unwrap_or_else(|error| panic!("no complete answer to {method}: {error}"));
        Answer::parse(&raw)
    }

    pub(crate) fn initialize(&self) -> Answer {
        self.request("POST", None, INITIALIZE)
    }

    /// A `/proc/<pid>/status` field in KiB (`VmRSS`, `VmHWM`).
    pub(crate) fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|value| value.trim().strip_suffix("kB")?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {status}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The token in the notice `serve --http` prints when it generated one.
pub(crate) fn printed_token(notice: &str) -> Option<String> {
    notice
        .split_once("\"Authorization: Bearer ")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(token, _)| token.to_owned())
        .filter(|token| !token.starts_with('<'))
}

/// One line of the server's stderr, without its newline; the server exiting first fails.
fn read_line(stderr: &mut BufReader<ChildStderr>) -> String {
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(!line.is_empty(), "the server exited before printing a line");
    line.trim_end().to_owned()
}

/// An HTTP answer: status, lower-cased head, body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    pub(crate) fn parse(raw: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
        Answer {
            status,
            head: head.to_ascii_lowercase(),
            body: body.to_owned(),
        }
    }

    /// The value of header `name` (lower case), if the answer has it.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key == name).then_some(value.trim())
        })
    }

    pub(crate) fn session_id(&self) -> String {
        self.header("mcp-session-id")
            .unwrap_or_else(|| panic!("no session id: {self:?}"))
            .to_owned()
    }
}

/// Waits until the server closes `stream` (end of file or reset), failing past the bound.
pub(crate) fn wait_for_close(stream: &mut TcpStream) {
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return,
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(error) => panic!("the server kept the connection open: {error}"),
        }
    }
}

/// Polls `done` until it holds; the bound only fails the test.
pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + FAILURE_BOUND;
    while !done() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
