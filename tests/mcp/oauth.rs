//! OAuth 2.1 on streamable HTTP against a real authorization server (oauth2-mock-server, pinned
//! by `.ci/install-tools.sh`, started by `tests/oauth/authorization_server.mjs`): `serve --http
//! --oauth-issuer` as a protected resource, our client's client-credentials grant, and a
//! person's login at the command line (authorization code + PKCE, loopback redirect). Every
//! wait is for a printed line or an answer, bounded by [`FAILURE_BOUND`] only to fail.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;

use dsh_tools::mcp::{
    McpClientCredentials, McpHttpAuth, McpOAuthResource, McpServer, McpTransport,
};
use dsh_tools::{Registry, ToolCall};
use serde_json::{Value, json};

use crate::http_server::{Answer, FAILURE_BOUND, INITIALIZE, ROOT, Server};
use crate::mcp_support::{self, free_port};
use crate::toolset;
use dsh_tools::prelude::*;

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;

/// The launcher's child, killed on drop.
pub(crate) struct AuthorizationServer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    pub(crate) issuer: String,
}

impl AuthorizationServer {
    /// Starts it and waits for its `issuer` line; `None` (printing why) when the pinned server
    /// cannot be installed on this machine.
    pub(crate) fn start() -> Option<AuthorizationServer> {
        let tools = mcp_support::tools()?;
        let mut child = Command::new("node")
            .arg(format!("{ROOT}/tests/oauth/authorization_server.mjs"))
            .arg(&tools.oauth_modules)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = AuthorizationServer {
            child,
            stdin,
            lines,
            issuer: String::new(),
        };
        server.issuer = server.answer("issuer");
        Some(server)
    }

    /// The next line on stdout, which must start with `word `: the rest of it.
    fn answer(&self, word: &str) -> String {
        let line = self
            .lines
            .recv_timeout(FAILURE_BOUND)
            .unwrap_or_else(|error| {
                panic!("no `{word}` line from the authorization server: {error}")
            });
        line.strip_prefix(&format!("{word} "))
            .unwrap_or_else(|| panic!("expected `{word} …`, got {line:?}"))
            .to_owned()
    }

    fn command(&mut self, command: Value) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// A token signed by the issuer, `claims` over its own (`iss`, `iat`, `exp`, `nbf`, `sub`
    /// "tester"), typed `at+jwt`.
    pub(crate) fn token(&mut self, claims: Value, expires_in: i64) -> String {
        self.command(json!({"token": {"claims": claims, "expiresIn": expires_in}}));
        self.answer("token")
    }

    /// A token as [`AuthorizationServer::token`], its header's `typ` being `typ`.
    fn typed_token(&mut self, claims: Value, typ: &str) -> String {
        self.command(json!({"token": {"claims": claims, "expiresIn": 3600, "typ": typ}}));
        self.answer("token")
    }

    /// The token endpoint's answers from now on say their tokens expire in `seconds`.
    fn grants_expire_in(&mut self, seconds: u64) {
        self.command(json!({"grantsExpireIn": seconds}));
        assert_eq!(self.answer("expiresIn"), seconds.to_string());
    }

    /// How many tokens the token endpoint has issued.
    fn grants(&mut self) -> u64 {
        self.command(json!({"grants": true}));
        self.answer("grants").parse().unwrap()
    }

    /// The next `count` token requests get no answer: the server closes their connection
    /// once it has read them.
    fn drop_token_answers(&mut self, count: u64) {
        self.command(json!({"dropTokenAnswers": count}));
        assert_eq!(self.answer("dropping"), count.to_string());
    }

    /// How many token requests are still to go unanswered.
    fn dropping(&mut self) -> u64 {
        self.command(json!({"dropping": true}));
        self.answer("dropping").parse().unwrap()
    }

    /// The next `count` metadata requests are answered by a TCP reset.
    fn reset_metadata(&mut self, count: u64) {
        self.command(json!({"resetMetadata": count}));
        assert_eq!(self.answer("resetting"), count.to_string());
    }

    /// How many metadata requests are still to be reset.
    fn resetting(&mut self) -> u64 {
        self.command(json!({"resetting": true}));
        self.answer("resetting").parse().unwrap()
    }

    /// A new signing key, used by the tokens after it.
    fn rotate(&mut self) -> String {
        self.command(json!({"rotate": true}));
        self.answer("kid")
    }
}

impl Drop for AuthorizationServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

macro_rules! require_authorization_server {
    () => {
        match AuthorizationServer::start() {
            Some(server) => server,
            None => {
                eprintln!(
                    "SKIPPED: {}: the OAuth authorization server is unavailable",
                    module_path!()
                );
                return;
            }
        }
    };
}

fn bearer(token: &str) -> String {
    format!("authorization: Bearer {token}\r\n")
}

/// `initialize`, `notifications/initialized` and `tools/list` with `headers`.
fn list_tools(server: &Server, headers: &str) -> Answer {
    let initialized = server.send("POST", headers, INITIALIZE);
    assert_eq!(initialized.status, 200, "{initialized:?}");
    let session = format!("{headers}mcp-session-id: {}\r\n", initialized.session_id());
    let notified = server.send("POST", &session, INITIALIZED);
    assert!(notified.status < 300, "{notified:?}");
    server.send("POST", &session, TOOLS_LIST)
}

/// A plain `GET path`, answered in full.
fn get(server: &Server, path: &str) -> Answer {
    let mut stream = server.connect();
    let head = format!(
        "GET {path} HTTP/1.1\r\nhost: {}\r\naccept: application/json\r\nconnection: close\r\n\r\n",
        server.addr
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    Answer::parse(&raw)
}

/// `serve --http` on a free loopback port as the protected resource of `issuer`, scope
/// `tools.read` required.
fn protected_server(issuer: &str) -> (Server, String) {
    protected_server_with(issuer, &[])
}

/// [`protected_server`] with more flags.
pub(crate) fn protected_server_with(issuer: &str, flags: &[&str]) -> (Server, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let resource = format!("http://{addr}/mcp");
    let mut command = Command::new(crate::http_server::BIN);
    command
        .args(["--builtin", "repo", "--root", ROOT, "serve"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command.args([
        "--http",
        &addr,
        "--oauth-issuer",
        issuer,
        "--oauth-resource",
        &resource,
        "--oauth-scope",
        "tools.read",
    ]);
    command.args(flags);
    (Server::spawn(command), resource)
}

/// A good token lists the tools; a token for another audience, expired, from another issuer,
/// without `exp`, with a broken signature, with an HMAC algorithm or signed by no known key is
/// answered 401 `invalid_token`, one without the scope 403 `insufficient_scope`, and none at all
/// 401 pointing at the metadata, which is served at both well-known paths. A rotated key is
/// fetched when a token names it.
#[test]
fn oauth_serve_checks_access_tokens_against_the_issuer() {
    let mut issuer = require_authorization_server!();
    let (server, resource) = protected_server(&issuer.issuer);
    assert!(
        server.notice.contains("OAuth access token") && server.notice.contains(&issuer.issuer),
        "{}",
        server.notice
    );
    let metadata_url = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        server.addr
    );

    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let metadata = get(&server, path);
        assert_eq!(metadata.status, 200, "{path}: {metadata:?}");
        let document: Value = serde_json::from_str(&metadata.body).unwrap();
        assert_eq!(document["resource"], resource.as_str());
        assert_eq!(document["authorization_servers"], json!([issuer.issuer]));
        assert_eq!(document["scopes_supported"], json!(["tools.read"]));
    }

    let missing = server.send("POST", "", INITIALIZE);
    assert_eq!(missing.status, 401, "{missing:?}");
    assert_eq!(
        missing.header("www-authenticate"),
        Some(format!("bearer resource_metadata=\"{metadata_url}\", scope=\"tools.read\"").as_str()),
        "{missing:?}"
    );

    let good = issuer.token(json!({"aud": resource, "scope": "tools.read other"}), 3600);
    let listed = list_tools(&server, &bearer(&good));
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.body.contains(r#""name":"file_stats""#), "{listed:?}");

    let other_audience = issuer.token(
        json!({"aud": "http://elsewhere.example/mcp", "scope": "tools.read"}),
        3600,
    );
    let expired = issuer.token(json!({"aud": resource, "scope": "tools.read"}), -3600);
    let foreign = issuer.token(
        json!({"aud": resource, "scope": "tools.read", "iss": "http://127.0.0.1:1"}),
        3600,
    );
    let no_subject = issuer.token(
        json!({"aud": resource, "scope": "tools.read", "sub": null}),
        3600,
    );
    let no_expiry = issuer.token(
        json!({"aud": resource, "scope": "tools.read", "exp": null}),
        3600,
    );
    let (head, signature) = good.rsplit_once('.').unwrap();
    let flipped = signature
        .chars()
        .enumerate()
        .map(|(at, char)| match (at, char) {
            (10, 'A') => 'B',
            (10, _) => 'A',
            (_, char) => char,
        })
        .collect::<String>();
    let bad_signature = format!("{head}.{flipped}");
    // Another token's claims under this token's signature.
    let (other_head, _) = expired.rsplit_once('.').unwrap();
    let swapped_claims = format!("{other_head}.{signature}");
    // `{"alg":"HS256","typ":"JWT"}`: a public key must never serve as an HMAC secret.
    let hmac = format!(
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.{}",
        good.split('.').nth(1).unwrap()
    ) + ".c2ln";
    for (token, why) in [
        (
            other_audience.as_str(),
            "the token is not for this resource",
        ),
        (&expired, "the token has expired"),
        (&foreign, "the token is from another issuer"),
        (&no_expiry, "the token lacks exp, iss or aud"),
        (&no_subject, "the token has no subject (sub)"),
        (&bad_signature, "the token's signature does not verify"),
        (&swapped_claims, "the token's signature does not verify"),
        (&hmac, "the token's algorithm is not accepted"),
        ("not-a-jwt", "the token is not a jwt"),
    ] {
        let answer = server.send("POST", &bearer(token), INITIALIZE);
        assert_eq!(answer.status, 401, "{why}: {answer:?}");
        assert_eq!(
            answer.header("www-authenticate"),
            Some(
                format!(
                    "bearer error=\"invalid_token\", error_description=\"{why}\", \
                     resource_metadata=\"{metadata_url}\""
                )
                .to_ascii_lowercase()
                .as_str()
            ),
            "{answer:?}"
        );
    }

    let unscoped = issuer.token(json!({"aud": resource, "scope": "other"}), 3600);
    let answer = server.send("POST", &bearer(&unscoped), INITIALIZE);
    assert_eq!(answer.status, 403, "{answer:?}");
    assert_eq!(
        answer.header("www-authenticate"),
        Some(
            format!(
                "bearer error=\"insufficient_scope\", scope=\"tools.read\", \
                 error_description=\"the token lacks a required scope\", \
                 resource_metadata=\"{metadata_url}\""
            )
            .as_str()
        ),
        "{answer:?}"
    );

    // A key published after the server fetched the set: the unknown kid fetches it again.
    issuer.rotate();
    let rotated = issuer.token(json!({"aud": resource, "scope": "tools.read"}), 3600);
    assert_ne!(
        rotated.split('.').next(),
        good.split('.').next(),
        "the rotated token names another key"
    );
    let listed = list_tools(&server, &bearer(&rotated));
    assert_eq!(listed.status, 200, "{listed:?}");
}

/// RFC 9068 §4: a token typed `JWT` (an ID token of the same issuer and audience, say) is
/// answered 401; `--oauth-accept-plain-jwt` lets it through for issuers that send no other.
#[test]
fn oauth_serve_refuses_tokens_not_typed_at_jwt_unless_told() {
    let mut issuer = require_authorization_server!();
    let (server, resource) = protected_server(&issuer.issuer);
    let claims = json!({"aud": resource, "scope": "tools.read"});
    let plain = issuer.typed_token(claims.clone(), "JWT");
    let answer = server.send("POST", &bearer(&plain), INITIALIZE);
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(
        answer
            .header("www-authenticate")
            .is_some_and(|challenge| challenge.contains(
                "error_description=\"the token is not typed as an access token (typ at+jwt)\""
            )),
        "{answer:?}"
    );
    let typed = issuer.typed_token(claims, "application/at+jwt");
    assert_eq!(list_tools(&server, &bearer(&typed)).status, 200);

    let (lenient, resource) = protected_server_with(&issuer.issuer, &["--oauth-accept-plain-jwt"]);
    let plain = issuer.typed_token(json!({"aud": resource, "scope": "tools.read"}), "JWT");
    let listed = list_tools(&lenient, &bearer(&plain));
    assert_eq!(listed.status, 200, "{listed:?}");
}

/// An issuer whose keys cannot be fetched gets 503 (the token is neither accepted nor called
/// invalid); OAuth flags need each other and `--http`, and bad settings are refused before
/// serving, saying which.
#[test]
fn oauth_serve_refuses_unusable_settings() {
    let (server, _) = protected_server("http://127.0.0.1:1");
    // `{"alg":"RS256","typ":"at+jwt"}`
    let token = "eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCJ9.e30.c2ln";
    let answer = server.send("POST", &bearer(token), INITIALIZE);
    assert_eq!(answer.status, 503, "{answer:?}");
    assert!(answer.body.contains("keys cannot be fetched"), "{answer:?}");
    // The person who started the server is told why.
    let warning = server.line_containing("cannot fetch the OAuth issuer's keys");
    assert!(
        warning.starts_with("dsh-tools: warning: ")
            && warning.contains(
                "http://127.0.0.1:1/.well-known/oauth-authorization-server: error sending request"
            )
            && warning.to_ascii_lowercase().contains("connection refused"),
        "{warning}"
    );

    let refused = |args: &[&str]| {
        let output = Command::new(crate::http_server::BIN)
            .args(["--builtin", "repo", "--root", ROOT, "serve"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    for flags in [
        &["--http", "0", "--oauth-issuer", "http://as.example"][..],
        &[
            "--oauth-issuer",
            "http://as.example",
            "--oauth-resource",
            "http://r.example/mcp",
        ],
        &["--http", "0", "--oauth-resource", "http://r.example/mcp"],
        &[
            "--http",
            "0",
            "--no-auth",
            "--oauth-issuer",
            "http://as.example",
            "--oauth-resource",
            "http://r.example/mcp",
        ],
    ] {
        let (code, stderr) = refused(flags);
        assert_eq!(code, Some(2), "{flags:?}: {stderr}");
    }
    // No TLS is built in: keys over https could never be fetched.
    for https in [
        &["--oauth-issuer", "https://login.example.com"][..],
        &[
            "--oauth-issuer",
            "http://as.example",
            "--oauth-jwks-uri",
            "https://as.example/keys",
        ],
    ] {
        let mut flags = vec!["--http", "0", "--oauth-resource", "http://r.example/mcp"];
        flags.extend_from_slice(https);
        let (code, stderr) = refused(&flags);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.contains(
                "https needs TLS, which this build does not include: put the issuer behind \
                 plain http on loopback or a TLS-terminating proxy"
            ),
            "{stderr}"
        );
    }
    let (code, stderr) = refused(&[
        "--http",
        "0",
        "--oauth-issuer",
        "http://as.example",
        "--oauth-resource",
        "r.example/mcp",
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "--oauth-issuer: the MCP OAuth settings are unusable: resource \"r.example/mcp\""
        ),
        "{stderr}"
    );
}

/// Our client with client credentials gets a token from the authorization server the served
/// registry names in its metadata, then lists and calls a tool; without credentials it cannot
/// connect. A token that has expired is asked for again before the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_reach_a_protected_server() {
    let mut issuer = require_authorization_server!();
    let served = Registry::new();
    served.register_all(toolset::definitions(ROOT)).unwrap();
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", transport.local_addr().unwrap());
    let transport = transport.with_auth(McpHttpAuth::OAuth(
        McpOAuthResource::new(&issuer.issuer, &url).scope("tools.read"),
    ));
    let server = tokio::spawn(async move { served.serve_mcp(None, transport).await });

    let client = Registry::new();
    let bare = client.add_mcp_server(McpServer::http("bare", &url)).await;
    assert!(bare.is_err(), "connected without a token");

    let credentials = McpClientCredentials::new("service", "s3cret").scope("tools.read");
    assert!(!format!("{credentials:?}").contains("s3cret"));
    let handle = client
        .add_mcp_server(McpServer::http("secured", &url).client_credentials(credentials))
        .await
        .expect("client credentials connect");
    assert!(
        handle
            .tools()
            .iter()
            .any(|name| name == "mcp__secured__file_stats"),
        "{:?}",
        handle.tools()
    );
    let stats = client
        .execute(ToolCall::new(
            "1",
            "mcp__secured__file_stats",
            json!({"path": "Cargo.toml"}),
        ))
        .await;
    let value = stats
        .value()
        .unwrap_or_else(|| panic!("call failed: {stats:?}"));
    assert_eq!(
        value["structuredContent"]["path"], "Cargo.toml",
        "{stats:?}"
    );
    assert!(
        value["structuredContent"]["lines"].as_u64() > Some(10),
        "{stats:?}"
    );

    // Tokens said to expire at once: every request asks for a new one first.
    issuer.grants_expire_in(0);
    let expiring =
        client
            .add_mcp_server(McpServer::http("expiring", &url).client_credentials(
                McpClientCredentials::new("service", "s3cret").scope("tools.read"),
            ))
            .await
            .expect("connects with expiring tokens");
    let before = issuer.grants();
    let stats = client
        .execute(ToolCall::new(
            "2",
            "mcp__expiring__file_stats",
            json!({"path": "Cargo.toml"}),
        ))
        .await;
    assert!(stats.value().is_some(), "{stats:?}");
    assert!(issuer.grants() > before, "no new token for the call");
    expiring.disconnect().await;

    // A scope the server does not grant with: the token lacks `tools.read`.
    let unscoped = client
        .add_mcp_server(
            McpServer::http("unscoped", &url)
                .client_credentials(McpClientCredentials::new("service", "s3cret").scope("other"))
                .reconnect(dsh_tools::mcp::ReconnectPolicy::disabled()),
        )
        .await;
    assert!(unscoped.is_err(), "connected without the scope");
    handle.disconnect().await;
    server.abort();
}

/// The command line as a client: `--mcp-http` with `--mcp-oauth-client-id` (secret from
/// `DSH_TOOLS_OAUTH_CLIENT_SECRET`) and a `--config` entry with `"oauth"` (secret from a file)
/// reach a protected `serve --http`; without credentials the server is reported unreachable,
/// with the hint to log in, or, given a static token it refuses, to check that token.
#[test]
fn cli_clients_authenticate_with_client_credentials() {
    let issuer = require_authorization_server!();
    let (_server, resource) = protected_server(&issuer.issuer);
    let tools = |args: &[&str], secret: Option<&str>| {
        let mut command = Command::new(crate::http_server::BIN);
        command
            .args(args)
            .args(
                ["--mcp-oauth-scope", "tools.read"]
                    .iter()
                    .filter(|_| args.contains(&"--mcp-oauth-client-id")),
            )
            .args(["tools", "--dialect", "mcp"])
            .env_remove("DSH_TOOLS_OAUTH_CLIENT_SECRET")
            .stdin(Stdio::null());
        if let Some(secret) = secret {
            command.env("DSH_TOOLS_OAUTH_CLIENT_SECRET", secret);
        }
        let output = command.output().unwrap();
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (listed, stderr) = tools(
        &["--mcp-http", &resource, "--mcp-oauth-client-id", "service"],
        Some("s3cret"),
    );
    assert!(listed.contains("file_stats"), "{listed}\n{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
    std::fs::set_permissions(&secret, private).unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"secured": {"url": resource, "oauth": {
            "clientId": "service", "clientSecretFile": secret, "scopes": ["tools.read"]
        }}}})
        .to_string(),
    )
    .unwrap();
    let (listed, stderr) = tools(&["--config", config.to_str().unwrap()], None);
    assert!(
        listed.contains("mcp__secured__file_stats"),
        "{listed}\n{stderr}"
    );

    // A server given a static token that it refuses: the token is what to look at.
    std::fs::write(
        &config,
        json!({"mcpServers": {"fixed": {
            "url": resource, "headers": {"Authorization": "Bearer stale"}
        }}})
        .to_string(),
    )
    .unwrap();
    let (listed, stderr) = tools(&["--config", config.to_str().unwrap()], None);
    assert!(!listed.contains("file_stats"), "{listed}");
    assert!(
        stderr.contains("it refused the Authorization header its --config entry gives"),
        "{stderr}"
    );
    assert!(!stderr.contains("--mcp-oauth-login"), "{stderr}");

    let (listed, stderr) = tools(&["--mcp-http", &resource], None);
    assert!(!listed.contains("file_stats"), "{listed}");
    assert!(
        stderr.contains(&format!(
            "the MCP server at {resource} requires OAuth authorization (HTTP 401): \
             authorization required: Bearer resource_metadata="
        )) && stderr.contains(
            "log in with --mcp-oauth-login, or give client credentials with \
             --mcp-oauth-client-id"
        ),
        "{stderr}"
    );
}

/// The person's browser: follows `url` and its redirects (to the loopback listener); the
/// status of the last answer.
fn browse(url: &str) -> u16 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let answer = reqwest::get(url)
            .await
            .expect("the browser follows the URL");
        answer.status().as_u16()
    })
}

/// One run of `dsh-tools --mcp-http … --mcp-oauth-login tools`: its stdout, its stderr, and
/// whether it printed an authorization URL (which the browser then followed, or, when `allow`
/// is false, which fails the test at once instead of leaving the run waiting for a person).
fn login_run(args: &[&str], allow: bool) -> (String, String, bool) {
    let mut child = Command::new(crate::http_server::BIN)
        .args(args)
        .args(["tools", "--dialect", "mcp"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).unwrap();
        text
    });
    let (send, lines) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let mut text = String::new();
    let mut asked = false;
    // Until stderr closes, i.e. the run ended.
    while let Ok(line) = lines.recv_timeout(FAILURE_BOUND) {
        text.push_str(&line);
        text.push('\n');
        let url = line.trim();
        if url.starts_with("http://") && text.contains("To authorize") {
            asked = true;
            if !allow {
                let _ = child.kill();
                let _ = child.wait();
                panic!("asked the person again: {text}");
            }
            assert_eq!(browse(url), 200, "the loopback listener's page");
        }
    }
    assert!(child.wait().unwrap().code().is_some(), "{text}");
    (reader.join().unwrap(), text, asked)
}

/// The command line as a person: `--mcp-oauth-login` prints the authorization URL; the
/// browser's visit (the authorization server approves at once) lands on the loopback listener,
/// the code is exchanged (PKCE), and the tools are listed. Tokens said to expire at once are
/// refreshed with the refresh token, never by asking again. `--mcp-oauth-token-file` keeps them
/// (mode 0600, the secrets never on stderr), so the next run lists the tools without asking.
#[test]
fn cli_person_logs_in_with_a_loopback_redirect_and_keeps_the_tokens() {
    let mut issuer = require_authorization_server!();
    let (_server, resource) = protected_server(&issuer.issuer);
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    let args = [
        "--mcp-http",
        &resource,
        "--mcp-oauth-login",
        "--mcp-oauth-client-id",
        "person",
        "--mcp-oauth-scope",
        "tools.read",
        "--mcp-oauth-token-file",
        tokens.to_str().unwrap(),
    ];
    issuer.grants_expire_in(0);
    let before = issuer.grants();
    let (listed, stderr, asked) = login_run(&args, true);
    assert!(asked, "no authorization URL: {stderr}");
    assert!(listed.contains("file_stats"), "{listed}\n{stderr}");
    // The code's exchange, then at least one refresh of the token that expired at once.
    assert!(issuer.grants() >= before + 2, "no refresh: {stderr}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&tokens).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&tokens).unwrap()).unwrap();
    let access = stored["token_response"]["access_token"].as_str().unwrap();
    let refresh = stored["token_response"]["refresh_token"].as_str().unwrap();
    assert!(
        !stderr.contains(access) && !stderr.contains(refresh),
        "{stderr}"
    );

    let (listed, stderr, _) = login_run(&args, false);
    assert!(listed.contains("file_stats"), "{listed}\n{stderr}");
}

/// With `--mcp-oauth-login`, a server that accepts connections and never answers fails within
/// the normal connect timeout (30 s): only a person's pending authorization extends the wait.
#[test]
fn cli_login_to_a_silent_server_keeps_the_connect_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().map_while(Result::ok) {
            held.push(stream);
        }
    });
    let child = Command::new(crate::http_server::BIN)
        .args(["--mcp-http", &url, "--mcp-oauth-login", "tools"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (send, done) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait_with_output());
    });
    // Past the failure bound the run is still waiting: the wait was extended.
    let output = match done.recv_timeout(2 * FAILURE_BOUND) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            panic!("the run still waits for a server that never answers");
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("timed out after 30000ms"), "{stderr}");
    assert!(!stderr.contains("To authorize"), "{stderr}");
}

/// Client errors name what failed: an authorization server that refuses connections (the
/// protected server's metadata points at a closed port), a URL that is not one, an `https` URL
/// (no TLS is built in).
#[test]
fn cli_client_errors_name_what_failed() {
    // Kept alive to the end: its metadata leads the client to the closed port.
    let (_server, resource) = protected_server("http://127.0.0.1:1");
    let run = |url: &str| {
        let output = Command::new(crate::http_server::BIN)
            .args(["--mcp-http", url, "--mcp-oauth-login", "tools"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = run(&resource);
    assert!(
        stderr.contains(&format!(
            "OAuth: the authorization server of {resource} failed: Connection refused"
        )),
        "{stderr}"
    );
    let stderr = run("not a url");
    assert!(
        stderr.contains("cannot connect: \"not a url\" is not a URL"),
        "{stderr}"
    );
    let stderr = run("https://127.0.0.1:1/mcp");
    assert!(
        stderr.contains(
            "https://127.0.0.1:1/mcp: https needs TLS, which this build does not include"
        ),
        "{stderr}"
    );
    let stderr = run("ftp://127.0.0.1:1/mcp");
    assert!(stderr.contains("is not an http:// URL"), "{stderr}");
}

/// A token request whose connection the server closes before answering (as when it closes an
/// idle keep-alive connection the request was just written to) is sent once more: the client
/// credentials connect, and a person's login exchanges its code without asking the person
/// again.
#[test]
fn a_token_request_that_got_no_answer_is_sent_once_more() {
    survives_one_fault(
        AuthorizationServer::drop_token_answers,
        AuthorizationServer::dropping,
        "token request",
    );
}

/// `--mcp-connect-timeout-ms` bounds connecting to a server that accepts and never answers.
#[test]
fn cli_connect_timeout_is_the_one_given() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().map_while(Result::ok) {
            held.push(stream);
        }
    });
    let output = Command::new(crate::http_server::BIN)
        .args([
            "--mcp-http",
            &url,
            "--mcp-connect-timeout-ms",
            "700",
            "tools",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("timed out after 700ms"), "{stderr}");
}

/// `--mcp-list-timeout-ms` bounds a `tools/list` that is never answered, and
/// `--mcp-call-timeout-ms` a call that is never answered: each fails after the time given,
/// not the defaults' 30 and 60 s.
#[test]
fn cli_list_and_call_timeouts_are_the_ones_given() {
    let script = format!(
        "{}/tests/mcp_servers/hostile_server.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let output = Command::new(crate::http_server::BIN)
        .args(["--mcp", &format!("mute=python3 {script} mute_list")])
        .args(["--mcp-list-timeout-ms", "700", "tools"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("timed out after 700ms"), "{stderr}");

    let output = Command::new(crate::http_server::BIN)
        .args(["--mcp", &format!("mute=python3 {script} mute_call")])
        .args([
            "--mcp-call-timeout-ms",
            "700",
            "--json",
            "call",
            "mcp__mute__mute",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("TOOL_TIMEOUT"), "{stdout}");
    assert!(stdout.contains("700"), "{stdout}");
}

/// A call the command gives up at its timeout is cancelled at the server before the command
/// exits: the server reads `notifications/cancelled` for it (it may read it after the command
/// has gone, from the pipe; the wait for it is bounded).
#[test]
fn a_timed_out_call_is_cancelled_at_the_server_before_the_command_exits() {
    let script = format!(
        "{}/tests/mcp_servers/hostile_server.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let notices = tempfile::NamedTempFile::new().unwrap();
    let output = Command::new(crate::http_server::BIN)
        .args(["--mcp", &format!("mute=python3 {script} mute_call")])
        .args([
            "--mcp-call-timeout-ms",
            "700",
            "--json",
            "call",
            "mcp__mute__mute",
        ])
        .env("HOSTILE_CANCELLED_TO", notices.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("TOOL_TIMEOUT"), "{stdout}");
    let bound = std::time::Instant::now() + mcp_support::WAIT;
    let notice = loop {
        let text = std::fs::read_to_string(notices.path()).unwrap();
        if let Some(line) = text.lines().next() {
            break serde_json::from_str::<Value>(line).unwrap();
        }
        assert!(
            std::time::Instant::now() < bound,
            "the server never read a cancellation; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(notice["reason"], "timed out", "{notice}");
    assert!(notice["requestId"].is_number(), "{notice}");
}

/// A metadata request answered by a connection reset (as when the server resets a keep-alive
/// connection it is closing as the request arrives) is sent once more: the client credentials
/// connect, and a person's login discovers its authorization server.
#[test]
fn a_metadata_request_reset_by_the_server_is_sent_once_more() {
    survives_one_fault(
        AuthorizationServer::reset_metadata,
        AuthorizationServer::resetting,
        "metadata request",
    );
}

/// Client credentials, then a person's login, each connect although the issuer spoils one
/// request of theirs (`inject`), which they met (`left` reads 0 after) and sent again; the
/// person is asked once.
fn survives_one_fault(
    inject: fn(&mut AuthorizationServer, u64),
    left: fn(&mut AuthorizationServer) -> u64,
    what: &str,
) {
    let mut issuer = require_authorization_server!();
    let (_server, resource) = protected_server(&issuer.issuer);

    inject(&mut issuer, 1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = Registry::new();
        let credentials = McpClientCredentials::new("service", "s3cret").scope("tools.read");
        let handle = client
            .add_mcp_server(McpServer::http("secured", &resource).client_credentials(credentials))
            .await
            .unwrap_or_else(|error| panic!("no connection once the {what} is sent again: {error}"));
        handle.disconnect().await;
    });
    assert_eq!(left(&mut issuer), 0, "no {what} was spoiled");

    inject(&mut issuer, 1);
    let args = [
        "--mcp-http",
        &resource,
        "--mcp-oauth-login",
        "--mcp-oauth-client-id",
        "person",
        "--mcp-oauth-scope",
        "tools.read",
    ];
    let (listed, stderr, asked) = login_run(&args, true);
    assert!(asked, "no authorization URL: {stderr}");
    assert_eq!(left(&mut issuer), 0, "no {what} was spoiled: {stderr}");
    assert!(listed.contains("file_stats"), "{listed}\n{stderr}");
    assert_eq!(
        stderr.matches("To authorize").count(),
        1,
        "the person was asked again: {stderr}"
    );
}
