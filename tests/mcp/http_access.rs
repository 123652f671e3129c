//! Who `serve --http` and `Registry::serve_mcp` over HTTP let in: a bearer token on every
//! request (generated and printed at start, or from a file or the environment; 401 with
//! `WWW-Authenticate` without it), browser origins refused with 403 unless allowed, and no
//! authentication only on loopback.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use dsh_tools::Registry;
use dsh_tools::mcp::{McpHttpAuth, McpServeError, McpServer, McpTransport};

use crate::http_server::{Answer, BIN, INITIALIZE, ROOT, Server};
use crate::toolset;
use dsh_tools::prelude::*;

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;

fn bearer(token: &str) -> String {
    format!("authorization: Bearer {token}\r\n")
}

fn origin(origin: &str) -> String {
    format!("origin: {origin}\r\n")
}

/// `initialize`, `notifications/initialized` and `tools/list` with `headers`: the listing's
/// answer.
fn list_tools(server: &Server, headers: &str) -> Answer {
    let initialized = server.send("POST", headers, INITIALIZE);
    assert_eq!(initialized.status, 200, "{initialized:?}");
    let session = format!("{headers}mcp-session-id: {}\r\n", initialized.session_id());
    let notified = server.send("POST", &session, INITIALIZED);
    assert!(notified.status < 300, "{notified:?}");
    server.send("POST", &session, TOOLS_LIST)
}

/// A command line that must fail before serving: its exit code and stderr.
fn refused(args: &[&str], env: Option<(&str, &str)>) -> (Option<i32>, String) {
    let mut command = Command::new(BIN);
    command
        .args(["--builtin", "repo", "--root", ROOT, "serve"])
        .args(args)
        .env_remove("DSH_TOOLS_AUTH_TOKEN")
        .stdin(Stdio::null());
    if let Some((key, value)) = env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

/// Without a token, with another scheme or with a wrong token, every method is answered 401
/// with the RFC 6750 challenge, and no session is made: with room for one session, the
/// authenticated `initialize` after them still gets it.
#[test]
fn http_serve_answers_401_without_the_bearer_token() {
    let server = Server::start(&["--max-sessions", "1"], None);
    for method in ["POST", "GET", "DELETE"] {
        for headers in ["", "authorization: Basic dXNlcjpwYXNz\r\n"] {
            let answer = server.send(method, headers, INITIALIZE);
            assert_eq!(answer.status, 401, "{method} {headers:?}: {answer:?}");
            assert_eq!(
                answer.header("www-authenticate"),
                Some("bearer"),
                "{answer:?}"
            );
            assert_eq!(
                answer.body,
                "Unauthorized: send the header \"Authorization: Bearer <token>\"\n"
            );
        }
        let token = server.token.as_deref().unwrap();
        for wrong in ["wrong", &token[1..], &format!("{token}0")] {
            let answer = server.send(method, &bearer(wrong), INITIALIZE);
            assert_eq!(answer.status, 401, "{method} {wrong}: {answer:?}");
            assert_eq!(
                answer.header("www-authenticate"),
                Some("bearer error=\"invalid_token\""),
                "{answer:?}"
            );
            assert_eq!(answer.body, "Unauthorized: the bearer token is not valid\n");
        }
    }
    let answer = server.initialize();
    assert_eq!(answer.status, 200, "{answer:?}");
}

/// The command line's client, sent to a `serve --http` without its token, is told to give
/// the token as a header, not to log in with OAuth: the server's 401 names no OAuth metadata.
#[test]
fn a_client_without_the_token_is_told_to_send_it_not_to_log_in() {
    let server = Server::start(&[], None);
    let output = Command::new(BIN)
        .args([
            "--mcp-http",
            &format!("http://{}/mcp", server.addr),
            "tools",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("give it in a --config entry, \"headers\""),
        "{stderr}"
    );
    assert!(!stderr.contains("--mcp-oauth-login"), "{stderr}");
}

/// The token generated at start is printed on stderr, 256 bits in hex, and lets its bearer
/// list the tools.
#[test]
fn http_serve_prints_a_generated_token_that_works() {
    let server = Server::start(&[], None);
    let token = server.token.clone().expect("a token in the notice");
    assert_eq!(token.len(), 64, "{}", server.notice);
    assert!(
        token.bytes().all(|byte| byte.is_ascii_hexdigit()),
        "{token}"
    );
    assert!(
        server.notice.contains("DSH_TOOLS_AUTH_TOKEN"),
        "{}",
        server.notice
    );
    let listed = list_tools(&server, &bearer(&token));
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.body.contains(r#""name":"file_stats""#), "{listed:?}");
    // Another start, another token.
    assert_ne!(Server::start(&[], None).token, Some(token));
}

/// `--auth-token-file` (trimmed) comes before `DSH_TOOLS_AUTH_TOKEN`, which comes before a
/// generated token; a token given either way is never printed.
#[test]
fn http_serve_takes_its_token_from_a_file_or_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "  from-file_1~from-file_1~\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file_arg = file.to_str().unwrap();

    let mut command = Server::command(&["--auth-token-file", file_arg]);
    command.env("DSH_TOOLS_AUTH_TOKEN", "from-env.2.from-env.2.");
    let mut server = Server::spawn(command);
    assert_eq!(server.token, None, "{}", server.notice);
    assert!(
        server
            .notice
            .contains(&format!("<the token in {file_arg}>"))
            && !server.notice.contains("from-file_1~"),
        "{}",
        server.notice
    );
    assert_eq!(
        server
            .send("POST", &bearer("from-env.2.from-env.2."), INITIALIZE)
            .status,
        401
    );
    server.token = Some("from-file_1~from-file_1~".to_owned());
    assert_eq!(server.initialize().status, 200);

    let mut command = Server::command(&[]);
    command.env("DSH_TOOLS_AUTH_TOKEN", " from-env.2.from-env.2. ");
    let mut server = Server::spawn(command);
    assert_eq!(server.token, None, "{}", server.notice);
    assert!(
        server
            .notice
            .contains("<the token in DSH_TOOLS_AUTH_TOKEN>"),
        "{}",
        server.notice
    );
    server.token = Some("from-env.2.from-env.2.".to_owned());
    let listed = list_tools(&server, &server.auth_line());
    assert_eq!(listed.status, 200, "{listed:?}");

    // A token that is no token is refused before serving, without showing it.
    std::fs::write(&file, "two words\n").unwrap();
    let (code, stderr) = refused(&["--http", "0", "--auth-token-file", file_arg], None);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--auth-token-file {file_arg}: the MCP bearer token is not"
        )) && !stderr.contains("two words"),
        "{stderr}"
    );
    let (code, stderr) = refused(&["--http", "0"], Some(("DSH_TOOLS_AUTH_TOKEN", " ")));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("DSH_TOOLS_AUTH_TOKEN: the MCP bearer token is empty"),
        "{stderr}"
    );
}

/// A token under 128 bits (fewer than 22 characters) is refused at start, from a file or the
/// environment; a token file group or others may read is refused as ssh refuses such a key,
/// the message naming `chmod 600`, and the token is never shown; a token file that is a
/// symbolic link is refused without being followed.
#[test]
fn http_serve_refuses_short_tokens_and_token_files_others_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    let file_arg = file.to_str().unwrap();
    std::fs::write(&file, "x\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let short = "the MCP bearer token is shorter than 22 characters, under 128 bits";
    let (code, stderr) = refused(&["--http", "0", "--auth-token-file", file_arg], None);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("--auth-token-file {file_arg}: {short}")),
        "{stderr}"
    );
    let env = Some(("DSH_TOOLS_AUTH_TOKEN", "abcdefghijklmnopqrstu"));
    let (code, stderr) = refused(&["--http", "0"], env);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("DSH_TOOLS_AUTH_TOKEN: {short}"))
            && !stderr.contains("abcdefghij"),
        "{stderr}"
    );

    let secret = "readable-by-others-readable-by-others";
    std::fs::write(&file, secret).unwrap();
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let (code, stderr) = refused(&["--http", "0", "--auth-token-file", file_arg], None);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "--auth-token-file {file_arg}: group or others may read or write it (mode \
                 {mode:04o}): run `chmod 600 {file_arg}`"
            )) && !stderr.contains(secret),
            "{stderr}"
        );
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    // A link to a private token file (one someone else could have chosen) is never followed.
    let link = dir.path().join("link");
    let link_arg = link.to_str().unwrap();
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let (code, stderr) = refused(&["--http", "0", "--auth-token-file", link_arg], None);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--auth-token-file {link_arg}: it is a symbolic link, and a secret is read only \
             from the file itself"
        )) && !stderr.contains(secret),
        "{stderr}"
    );
    let mut server = Server::spawn(Server::command(&["--auth-token-file", file_arg]));
    server.token = Some(secret.to_owned());
    assert_eq!(server.initialize().status, 200);
}

/// With no origin allowed (the default), a request carrying any `Origin` is answered 403, even
/// the server's own; with `--allow-origin`, that origin passes and every other is refused. A
/// request without `Origin` (not from a browser) passes either way, and one without the token
/// is answered 401 whatever its origin.
#[test]
fn http_serve_refuses_foreign_origins() {
    let server = Server::start(&[], None);
    let auth = server.auth_line();
    let own = format!("http://{}", server.addr);
    for foreign in ["http://evil.example", own.as_str(), "null"] {
        let answer = server.send("POST", &format!("{auth}{}", origin(foreign)), INITIALIZE);
        assert_eq!(answer.status, 403, "{foreign}: {answer:?}");
        assert_refusal_says_how_to_allow(&answer);
    }
    // The refusal never repeats the client's text.
    let hostile = "http://evil.example/<script>alert(1)</script>";
    let answer = server.send("POST", &format!("{auth}{}", origin(hostile)), INITIALIZE);
    assert_eq!(answer.status, 403, "{answer:?}");
    assert_refusal_says_how_to_allow(&answer);
    assert!(!answer.body.contains("evil.example"), "{answer:?}");
    assert!(!answer.body.contains('<'), "{answer:?}");
    let unauthenticated = server.send("POST", &origin("http://evil.example"), INITIALIZE);
    assert_eq!(unauthenticated.status, 401, "{unauthenticated:?}");
    assert_eq!(server.initialize().status, 200);

    let server = Server::start(
        &[
            "--allow-origin",
            "http://app.example:8080",
            "--allow-origin",
            "https://ui.example:*",
        ],
        None,
    );
    let auth = server.auth_line();
    for allowed in ["http://app.example:8080", "https://ui.example:4443"] {
        let listed = list_tools(&server, &format!("{auth}{}", origin(allowed)));
        assert_eq!(listed.status, 200, "{allowed}: {listed:?}");
    }
    for foreign in [
        "http://app.example:9090",
        "https://app.example:8080",
        "http://evil.example",
    ] {
        let answer = server.send("POST", &format!("{auth}{}", origin(foreign)), INITIALIZE);
        assert_eq!(answer.status, 403, "{foreign}: {answer:?}");
    }
    assert_eq!(server.initialize().status, 200);
}

/// A `403` for an origin names both ways to allow one.
fn assert_refusal_says_how_to_allow(answer: &Answer) {
    assert!(answer.body.starts_with("Forbidden: "), "{answer:?}");
    assert!(answer.body.contains("--allow-origin"), "{answer:?}");
    assert!(answer.body.contains("allow_origin"), "{answer:?}");
}

/// Whether `answer` has a `Vary` header naming `Origin`.
fn varies_by_origin(answer: &Answer) -> bool {
    answer
        .head
        .lines()
        .any(|line| line.starts_with("vary:") && line.contains("origin"))
}

/// `--allow-origin` lets a page of that origin call the server from a browser (the Fetch
/// standard's CORS protocol): its preflight is answered before authentication with the
/// transport's methods and headers, and every answer to it, the `401` included, names the
/// origin and exposes `Mcp-Session-Id` and `WWW-Authenticate`. Another origin's preflight and
/// requests get `403` and no CORS headers.
#[test]
fn http_serve_answers_cors_for_allowed_origins() {
    let allowed = "http://localhost:18434";
    let server = Server::start(&["--allow-origin", allowed], None);
    let asks = "access-control-request-method: POST\r\n\
                access-control-request-headers: authorization, content-type, mcp-session-id, \
                mcp-param-region\r\n";
    let preflight = server.send("OPTIONS", &format!("{}{asks}", origin(allowed)), "");
    assert!(matches!(preflight.status, 200 | 204), "{preflight:?}");
    assert_eq!(
        preflight.header("access-control-allow-origin"),
        Some(allowed)
    );
    let methods = preflight.header("access-control-allow-methods").unwrap();
    for method in ["post", "get", "delete", "options"] {
        assert!(methods.contains(method), "{methods}");
    }
    let headers = preflight.header("access-control-allow-headers").unwrap();
    for header in [
        "authorization",
        "content-type",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "last-event-id",
        "mcp-param-region",
    ] {
        assert!(headers.contains(header), "{header}: {headers}");
    }
    assert!(varies_by_origin(&preflight), "{preflight:?}");

    let unauthenticated = server.send("POST", &origin(allowed), INITIALIZE);
    assert_eq!(unauthenticated.status, 401, "{unauthenticated:?}");
    assert_eq!(
        unauthenticated.header("access-control-allow-origin"),
        Some(allowed)
    );
    let exposed = unauthenticated
        .header("access-control-expose-headers")
        .unwrap();
    assert!(exposed.contains("mcp-session-id"), "{exposed}");
    assert!(exposed.contains("www-authenticate"), "{exposed}");

    let browser = format!("{}{}", server.auth_line(), origin(allowed));
    let initialized = server.send("POST", &browser, INITIALIZE);
    assert_eq!(initialized.status, 200, "{initialized:?}");
    assert_eq!(
        initialized.header("access-control-allow-origin"),
        Some(allowed)
    );
    assert!(varies_by_origin(&initialized), "{initialized:?}");
    let listed = list_tools(&server, &browser);
    assert_eq!(listed.status, 200, "{listed:?}");
    assert_eq!(listed.header("access-control-allow-origin"), Some(allowed));

    let foreign = "http://evil.example";
    let preflight = server.send("OPTIONS", &format!("{}{asks}", origin(foreign)), "");
    assert_eq!(preflight.status, 403, "{preflight:?}");
    assert!(!preflight.head.contains("access-control-"), "{preflight:?}");
    let answer = server.send(
        "POST",
        &format!("{}{}", server.auth_line(), origin(foreign)),
        INITIALIZE,
    );
    assert_eq!(answer.status, 403, "{answer:?}");
    assert!(!answer.head.contains("access-control-"), "{answer:?}");
}

/// A JSON body that does not parse is answered `400` with JSON-RPC 2.0's `-32700 Parse error`
/// (id `null`), JSON that is no message `400` with `-32600 Invalid Request` and its id.
#[test]
fn http_serve_answers_unparsable_bodies_with_json_rpc_errors() {
    let server = Server::start(&[], None);
    let auth = server.auth_line();
    let answer = server.send("POST", &auth, r#"{"jsonrpc":"2.0","id":1,"method":"#);
    assert_eq!(answer.status, 400, "{answer:?}");
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let error: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(error["id"], serde_json::Value::Null, "{error}");
    assert_eq!(error["error"]["code"], -32700, "{error}");
    let answer = server.send("POST", &auth, r#"{"id":7,"hello":true}"#);
    assert_eq!(answer.status, 400, "{answer:?}");
    let error: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(error["id"], 7, "{error}");
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert_eq!(server.initialize().status, 200);
}

/// `--no-auth` serves without a token on loopback, its own loopback origins included, and is
/// refused, saying why, anywhere else;
/// the access flags need `--http`, an origin must look like one, and `--no-auth` cannot come
/// with a token file.
#[test]
fn http_serve_without_auth_only_on_loopback() {
    let (code, stderr) = refused(&["--http", "0.0.0.0:0", "--no-auth"], None);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--no-auth: MCP over HTTP without authentication is refused on 0.0.0.0:0")
            && stderr.contains("only a loopback address"),
        "{stderr}"
    );

    let server = Server::start(&["--no-auth"], None);
    assert_eq!(server.token, None);
    assert!(
        server.notice.contains("no authentication (--no-auth)"),
        "{}",
        server.notice
    );
    let listed = list_tools(&server, "");
    assert_eq!(listed.status, 200, "{listed:?}");
    // Without authentication its own loopback origins are served (the MCP transport's
    // DNS-rebinding rule); any other origin is still refused.
    let port = server.addr.port();
    for host in ["localhost", "127.0.0.1", "[::1]"] {
        let own = format!("http://{host}:{port}");
        let listed = list_tools(&server, &origin(&own));
        assert_eq!(listed.status, 200, "{own}: {listed:?}");
    }
    for foreign in ["http://evil.example", "http://localhost:1", "null"] {
        let answer = server.send("POST", &origin(foreign), INITIALIZE);
        assert_eq!(answer.status, 403, "{foreign}: {answer:?}");
    }

    for flags in [
        &["--no-auth"][..],
        &["--auth-token-file", "token"],
        &["--allow-origin", "http://app.example:80"],
    ] {
        let (code, stderr) = refused(flags, None);
        assert_eq!(code, Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains("--http"), "{stderr}");
    }
    let (code, stderr) = refused(
        &["--http", "0", "--no-auth", "--auth-token-file", "t"],
        None,
    );
    assert_eq!(code, Some(2), "{stderr}");
    let (code, stderr) = refused(&["--http", "0", "--allow-origin", "app.example:80"], None);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is not an origin"), "{stderr}");
}

/// From the library: `McpTransport::http` generates a token a client must send, and refuses one
/// that does not; `McpHttpAuth::None` serves anyone on loopback; an unusable token ends
/// `serve_mcp` at once with a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_http_needs_the_transports_token() {
    let served = Registry::new();
    served.register_all(toolset::definitions(ROOT)).unwrap();
    let serve = |transport: McpTransport| {
        let served = served.clone();
        tokio::spawn(async move { served.serve_mcp(None, transport).await })
    };

    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let token = transport.bearer_token().unwrap().to_owned();
    assert!(!format!("{transport:?}").contains(&token), "{transport:?}");
    let server = serve(transport);
    let client = Registry::new();
    let unauthenticated = client.add_mcp_server(McpServer::http("bare", &url)).await;
    assert!(unauthenticated.is_err(), "connected without the token");
    let handle = client
        .add_mcp_server(
            McpServer::http("served", &url).header("Authorization", format!("Bearer {token}")),
        )
        .await
        .unwrap();
    assert_eq!(handle.tools().len(), 4);
    handle.disconnect().await;
    server.abort();

    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap()
        .with_auth(McpHttpAuth::None);
    assert_eq!(transport.bearer_token(), None);
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let server = serve(transport);
    let handle = client
        .add_mcp_server(McpServer::http("open", &url))
        .await
        .unwrap();
    assert_eq!(handle.tools().len(), 4);
    handle.disconnect().await;
    server.abort();

    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap()
        .with_auth(McpHttpAuth::Bearer(String::new()));
    assert!(matches!(
        served.serve_mcp(None, transport).await,
        Err(McpServeError::InvalidBearerToken("empty"))
    ));
}

/// On every interface (`0.0.0.0`) with a token, requests naming the machine's address or any
/// name are served, and the start-up line gives a URL a client can use rather than
/// `http://0.0.0.0`; `--allow-host` there limits the hosts to loopback and those named, and the
/// URL names the first.
#[test]
fn http_serve_on_every_interface_serves_remote_hosts() {
    let server = Server::spawn(Server::command_on("0.0.0.0:0", &[]));
    let port = server.addr.port();
    assert!(
        server.serving.starts_with(&format!(
            "dsh-tools: serving MCP on http://127.0.0.1:{port}/mcp (bound to 0.0.0.0:{port}, \
             every interface; any Host allowed"
        )),
        "{}",
        server.serving
    );
    let auth = server.auth_line();
    for host in [
        format!("192.0.2.2:{port}"),
        "tools.example.com".to_owned(),
        format!("[2001:db8::2]:{port}"),
    ] {
        let answer = server.send_to(&host, "POST", &auth, INITIALIZE);
        assert_eq!(answer.status, 200, "{host}: {answer:?}");
    }
    // Authentication still comes first.
    let answer = server.send_to("tools.example.com", "POST", "", INITIALIZE);
    assert_eq!(answer.status, 401, "{answer:?}");

    let server = Server::spawn(Server::command_on(
        "0.0.0.0:0",
        &["--allow-host", "tools.example.com"],
    ));
    let port = server.addr.port();
    assert!(
        server.serving.starts_with(&format!(
            "dsh-tools: serving MCP on http://tools.example.com:{port}/mcp (bound to \
             0.0.0.0:{port}, every interface; Host allowed: localhost, 127.0.0.1, ::1, \
             tools.example.com"
        )),
        "{}",
        server.serving
    );
    let auth = server.auth_line();
    for host in [
        format!("tools.example.com:{port}"),
        "TOOLS.example.com".to_owned(),
        format!("localhost:{port}"),
    ] {
        let answer = server.send_to(&host, "POST", &auth, INITIALIZE);
        assert_eq!(answer.status, 200, "{host}: {answer:?}");
    }
    let answer = server.send_to(&format!("192.0.2.2:{port}"), "POST", &auth, INITIALIZE);
    assert_eq!(answer.status, 403, "{answer:?}");
    assert_eq!(answer.body, "Forbidden: Host header is not allowed");
}

/// On loopback only loopback names are served (a page whose name was made to resolve to
/// 127.0.0.1 gets 403) unless `--allow-host` names the host, for any port or the one given;
/// a value that is not a host is refused.
#[test]
fn http_serve_on_loopback_allows_only_loopback_hosts_and_those_named() {
    let server = Server::start(&[], None);
    let port = server.addr.port();
    assert!(
        server.serving.starts_with(&format!(
            "dsh-tools: serving MCP on http://127.0.0.1:{port}/mcp (bound to 127.0.0.1:{port}; \
             Host allowed: localhost, 127.0.0.1, ::1 "
        )),
        "{}",
        server.serving
    );
    let auth = server.auth_line();
    let answer = server.send_to(
        &format!("rebound.example:{port}"),
        "POST",
        &auth,
        INITIALIZE,
    );
    assert_eq!(answer.status, 403, "{answer:?}");
    assert_eq!(answer.body, "Forbidden: Host header is not allowed");
    let answer = server.send_to(&format!("localhost:{port}"), "POST", &auth, INITIALIZE);
    assert_eq!(answer.status, 200, "{answer:?}");

    let server = Server::start(
        &[
            "--allow-host",
            "tools.example.com",
            "--allow-host",
            "proxy.example:8443",
        ],
        None,
    );
    let auth = server.auth_line();
    for host in [
        "tools.example.com",
        "tools.example.com:1",
        "proxy.example:8443",
    ] {
        let answer = server.send_to(host, "POST", &auth, INITIALIZE);
        assert_eq!(answer.status, 200, "{host}: {answer:?}");
    }
    for host in ["proxy.example:8444", "rebound.example"] {
        let answer = server.send_to(host, "POST", &auth, INITIALIZE);
        assert_eq!(answer.status, 403, "{host}: {answer:?}");
    }

    for bad in [
        "",
        "http://tools.example.com",
        "a b",
        "tools.example.com:x",
        "*",
    ] {
        let (code, stderr) = refused(&["--http", "0", "--allow-host", bad], None);
        assert_eq!(code, Some(2), "{bad:?}: {stderr}");
        assert!(stderr.contains("is not a host"), "{bad:?}: {stderr}");
    }
    let (code, stderr) = refused(&["--allow-host", "tools.example.com"], None);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--http"), "{stderr}");
}

/// From the library: the `Host` rule of a transport, with the OAuth resource's host allowed
/// automatically.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_http_allows_loopback_named_and_resource_hosts() {
    use dsh_tools::mcp::{McpHttpLimits, McpOAuthResource};
    let loopback = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let limits = McpHttpLimits::default();
    assert_eq!(
        loopback.allowed_hosts(&limits),
        Some(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()])
    );
    let named = limits.clone().allow_host("tools.example.com:8443");
    assert_eq!(
        loopback.allowed_hosts(&named).unwrap()[3..],
        ["tools.example.com:8443"]
    );
    let protected = loopback.with_auth(McpHttpAuth::OAuth(McpOAuthResource::new(
        "http://127.0.0.1:9000",
        "https://tools.example.com/mcp",
    )));
    assert_eq!(
        protected.allowed_hosts(&limits).unwrap()[3..],
        ["tools.example.com"]
    );

    let everywhere = McpTransport::http("0.0.0.0:0".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(everywhere.allowed_hosts(&limits), None);
    assert_eq!(
        everywhere.allowed_hosts(&named).unwrap(),
        ["localhost", "127.0.0.1", "::1", "tools.example.com:8443"]
    );
    assert_eq!(McpTransport::Stdio.allowed_hosts(&limits), None);
}

/// `DSH_TOOLS_AUTH_TOKEN` with `--oauth-issuer` or `--no-auth` is refused, as
/// `--auth-token-file` is, rather than silently unused.
#[test]
fn http_serve_refuses_a_token_variable_it_would_not_use() {
    for flags in [
        &["--http", "0", "--no-auth"][..],
        &[
            "--http",
            "0",
            "--oauth-issuer",
            "http://127.0.0.1:1",
            "--oauth-resource",
            "http://127.0.0.1:2/mcp",
        ],
    ] {
        let (code, stderr) = refused(flags, Some(("DSH_TOOLS_AUTH_TOKEN", "s3cr3t")));
        assert_eq!(code, Some(1), "{flags:?}: {stderr}");
        assert!(
            stderr.contains("DSH_TOOLS_AUTH_TOKEN is set, but --")
                && stderr.contains("takes no bearer token: unset DSH_TOOLS_AUTH_TOKEN"),
            "{flags:?}: {stderr}"
        );
        assert!(!stderr.contains("s3cr3t"), "{stderr}");
    }
}
