//! `dsh-tools serve --http` against hostile clients: descriptor floods of idle and slow
//! connections, headers and bodies that never finish, more connections or sessions than
//! allowed, and sessions left behind. Requests are written by hand on plain sockets
//! ([`crate::http_server`]) so a test can stop anywhere inside one.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::http_server::{Answer, BIN, ROOT, Server, wait_for_close, wait_until};

/// Idle and header-dribbling connections past the server's descriptor limit make `accept` fail
/// (EMFILE) for as long as they stay; the server keeps retrying and answers once they leave.
#[test]
fn http_serve_outlives_a_descriptor_flood_of_idle_and_slow_connections() {
    const NOFILE: u64 = 64;
    let mut server = Server::start(&[], Some(NOFILE));
    let flood: Vec<TcpStream> = (0..2 * NOFILE)
        .map(|n| {
            let mut stream = server.connect();
            if n % 2 == 1 {
                stream
                    .write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
                    .unwrap();
            }
            stream
        })
        .collect();
    let descriptors = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    let pid = server.pid();
    wait_until("the server's descriptor table fills up", || {
        descriptors(pid) as u64 >= NOFILE
    });
    server.assert_running();
    drop(flood);
    let answer = server.initialize();
    assert_eq!(answer.status, 200, "{answer:?}");
    server.assert_running();
}

/// A connection that sends nothing, one that never finishes its headers, and one kept alive
/// after its answer without a next request are all closed once the header timeout passes.
#[test]
fn http_serve_closes_connections_whose_headers_never_finish() {
    let server = Server::start(&["--header-timeout-ms", "50"], None);
    let mut silent = server.connect();
    let mut dribbling = server.connect();
    dribbling
        .write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .unwrap();
    let mut kept_alive = server.connect();
    // Answered at once (400: no session id), then the connection waits for its next request.
    let request = format!(
        "DELETE /mcp HTTP/1.1\r\nhost: {}\r\n{}\r\n",
        server.addr,
        server.auth_line()
    );
    kept_alive.write_all(request.as_bytes()).unwrap();
    wait_for_close(&mut silent);
    wait_for_close(&mut dribbling);
    wait_for_close(&mut kept_alive);
    assert_eq!(server.initialize().status, 200);
}

/// A request head past the 64 KiB read buffer is answered 431 instead of being buffered on.
#[test]
fn http_serve_refuses_an_oversized_request_head() {
    let server = Server::start(&[], None);
    let mut stream = server.connect();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\nconnection: close\r\nx-padding: {}\r\n\r\n",
        server.addr,
        "a".repeat(100 * 1024)
    );
    // The server may answer and close before it has read all of it.
    let _ = stream.write_all(head.as_bytes());
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    assert_eq!(Answer::parse(&raw).status, 431);
}

/// A request whose body stops arriving is failed and its connection closed.
#[test]
fn http_serve_closes_a_connection_whose_body_stalls() {
    let server = Server::start(&["--body-timeout-ms", "50"], None);
    let mut stream = server.connect();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\n{}content-length: 4096\r\n\r\n{{\"jsonrpc\":",
        server.addr,
        server.auth_line()
    );
    stream.write_all(head.as_bytes()).unwrap();
    wait_for_close(&mut stream);
    assert_eq!(server.initialize().status, 200);
}

/// The limit flags belong to `--http`: without it they are a usage error.
#[test]
fn http_limit_flags_need_http() {
    let output = Command::new(BIN)
        .args([
            "--builtin",
            "repo",
            "--root",
            ROOT,
            "serve",
            "--max-sessions",
            "3",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--http"), "{stderr}");
}

/// Past `--max-connections` a connection is answered 503 at once and closed; a connection that
/// leaves frees its place.
#[test]
fn http_serve_refuses_connections_past_the_cap() {
    let server = Server::start(&["--max-connections", "2"], None);
    let held = [server.connect(), server.connect()];
    // Accepted in order: the third comes after both held ones took their places.
    let mut third = server.connect();
    let mut raw = Vec::new();
    third.read_to_end(&mut raw).unwrap();
    let answer = Answer::parse(&raw);
    assert_eq!(answer.status, 503, "{answer:?}");
    assert_eq!(
        answer.body,
        "Service Unavailable: too many connections (limit 2); retry later\n"
    );
    drop(held);
    wait_until("a place frees after the held connections left", || {
        server.initialize().status == 200
    });
}

/// Past `--max-sessions` an `initialize` is answered 503 "too many MCP sessions"; a session
/// ended with HTTP DELETE is answered 204 No Content, frees its slot at once and is unknown
/// (404) after.
#[test]
fn http_serve_refuses_sessions_past_the_cap() {
    let server = Server::start(&["--max-sessions", "2"], None);
    let first = server.initialize();
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(server.initialize().status, 200);
    let refused = server.initialize();
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(
        refused
            .body
            .starts_with("Service Unavailable: too many MCP sessions (limit 2)"),
        "{refused:?}"
    );
    let deleted = server.request("DELETE", Some(&first.session_id()), "");
    // RFC 9110 §9.3.5: the session is closed when the answer is sent, so 204 (not 202, which
    // the Python SDK logs as a failed termination) with no content.
    assert_eq!(deleted.status, 204, "{deleted:?}");
    assert_eq!(deleted.body, "", "{deleted:?}");
    assert_eq!(server.initialize().status, 200);
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let closed = server.request("POST", Some(&first.session_id()), ping);
    assert_eq!(closed.status, 404, "{closed:?}");
}

/// A session left idle past `--session-idle-ms` ends: its slot frees and its id is unknown.
#[test]
fn http_serve_expires_idle_sessions() {
    let server = Server::start(&["--max-sessions", "1", "--session-idle-ms", "50"], None);
    let first = server.initialize();
    assert_eq!(first.status, 200, "{first:?}");
    wait_until("the idle session's slot frees", || {
        server.initialize().status == 200
    });
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let stale = server.request("POST", Some(&first.session_id()), ping);
    assert_eq!(stale.status, 404, "{stale:?}");
}

/// A thousand `initialize` requests that never end their sessions leave the server's resident
/// size within 24 MiB of where it started (it grows by about 1 MiB; uncapped, the same run grew
/// it by some 60 MiB, each session held for five minutes).
#[test]
fn http_serve_memory_stays_bounded_over_many_session_openings() {
    const OPENINGS: usize = 1000;
    const SESSIONS: usize = 16;
    const GROWTH_LIMIT_KIB: u64 = 24 * 1024;
    let server = Server::start(&["--max-sessions", &SESSIONS.to_string()], None);
    assert_eq!(server.initialize().status, 200);
    let baseline = server.memory_kib("VmRSS");
    let mut opened = 1;
    for _ in 1..OPENINGS {
        let answer = server.initialize();
        match answer.status {
            200 => opened += 1,
            503 => {}
            _ => panic!("{answer:?}"),
        }
    }
    assert_eq!(opened, SESSIONS);
    let peak = server.memory_kib("VmHWM");
    let resident = server.memory_kib("VmRSS");
    eprintln!(
        "VmRSS {baseline} KiB after one session, {resident} KiB (peak {peak} KiB) after {OPENINGS}"
    );
    assert!(
        resident.saturating_sub(baseline) < GROWTH_LIMIT_KIB
            && peak.saturating_sub(baseline) < GROWTH_LIMIT_KIB,
        "grew from {baseline} KiB to {resident} KiB (peak {peak} KiB)"
    );
}

/// The documented defaults, and settings below the floor raised to it (0 connections or
/// sessions would refuse everyone; a zero timeout would close every connection at once).
#[test]
fn http_limits_have_bounded_defaults_and_floors() {
    use dsh_tools::mcp::McpHttpLimits;
    let defaults = McpHttpLimits::default();
    assert_eq!(
        (defaults.max_connections, defaults.max_sessions),
        (512, 256)
    );
    assert_eq!(defaults.header_read_timeout, Duration::from_secs(30));
    assert_eq!(defaults.body_read_timeout, Duration::from_secs(30));
    assert_eq!(defaults.session_idle_timeout, Duration::from_secs(300));
    let floored = McpHttpLimits::default()
        .max_connections(0)
        .max_sessions(0)
        .header_read_timeout(Duration::ZERO)
        .body_read_timeout(Duration::ZERO)
        .session_idle_timeout(Duration::ZERO);
    assert_eq!((floored.max_connections, floored.max_sessions), (1, 1));
    for timeout in [
        floored.header_read_timeout,
        floored.body_read_timeout,
        floored.session_idle_timeout,
    ] {
        assert_eq!(timeout, Duration::from_millis(1));
    }
}
