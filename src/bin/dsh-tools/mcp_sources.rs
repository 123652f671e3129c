//! MCP servers as tool sources: `--mcp "COMMAND LINE"`, `--mcp-http URL` and `--config FILE` in
//! the `mcpServers` JSON format MCP hosts use:
//!
//! ```json
//! {"mcpServers": {
//!   "fs":     {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
//!   "remote": {"url": "http://127.0.0.1:3001/mcp", "headers": {"Authorization": "Bearer …"}}
//! }}
//! ```
//!
//! A server's tools are registered as `mcp__<server>__<tool>`. The server name comes from the
//! config key, or for `--mcp` from the package or program name (`server-filesystem` →
//! `filesystem`), for `--mcp-http` from the host. The `tracing` subscriber that keeps a stdio
//! server's last stderr lines for its error is in [`tracing_layers`].

mod tracing_layers;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use dsh_tools::Registry;
use dsh_tools::mcp::{
    McpClientCredentials, McpHandle, McpLoopbackAuthorizer, McpOAuthLogin, McpServer,
    is_valid_server_name,
};
use serde::Deserialize;

use crate::args::Sources;
use dsh_tools::prelude::*;
use tracing_layers::StderrTails;
pub(crate) use tracing_layers::install_tracing;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigFile {
    mcp_servers: BTreeMap<String, ServerEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerEntry {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// `stdio`, `http` or `streamable-http`; implied by `command` / `url` when absent.
    #[serde(rename = "type")]
    kind: Option<String>,
    /// Hosts' on/off switch for an entry.
    #[serde(default)]
    disabled: bool,
    /// OAuth for an HTTP server: client credentials, or a person's login.
    oauth: Option<OAuthEntry>,
}

/// `"oauth": {"clientId": …, "clientSecret" | "clientSecretEnv" | "clientSecretFile": …,
/// "scopes": […]}`: the secret itself, the variable holding it, or the file holding it. With
/// `"login": true` a person logs in (authorization code + PKCE), the client id and secret being
/// optional, `"tokenFile"` keeping the tokens, `"openBrowser"` opening the URL and
/// `"clientMetadataUrl"` the client ID metadata document (`--mcp-oauth-client-metadata-url`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OAuthEntry {
    client_id: Option<String>,
    client_secret: Option<String>,
    client_secret_env: Option<String>,
    client_secret_file: Option<PathBuf>,
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default)]
    login: bool,
    token_file: Option<PathBuf>,
    #[serde(default)]
    open_browser: bool,
    client_metadata_url: Option<String>,
}

/// The variable `--mcp-http` servers' OAuth client secret is read from.
const CLIENT_SECRET_VAR: &str = "DSH_TOOLS_OAUTH_CLIENT_SECRET";

/// A secret from a file (surrounding whitespace trimmed; refused when others may read it) or a
/// variable.
fn read_secret(file: Option<&Path>, var: Option<&str>) -> Result<Option<String>, String> {
    if let Some(path) = file {
        return crate::secret_file::read_private_file(path)
            .map(|text| Some(text.trim().to_owned()))
            .map_err(|error| format!("{}: {error}", path.display()));
    }
    match var.map(std::env::var) {
        Some(Ok(secret)) => Ok(Some(secret.trim().to_owned())),
        Some(Err(_)) => Err(format!(
            "{} is not set (or not UTF-8)",
            var.unwrap_or_default()
        )),
        None => Ok(None),
    }
}

/// How long the person has to log in: the loopback listener's wait, not counted in the connect
/// timeout.
const LOGIN_WAIT: Duration = Duration::from_secs(300);

/// The settings of a person's login (authorization code + PKCE) to one server.
struct Login<'a> {
    client_id: Option<&'a str>,
    client_secret: Option<String>,
    scopes: &'a [String],
    token_file: Option<&'a Path>,
    open_browser: bool,
    /// The client ID metadata document's URL, the client id where it is accepted.
    client_metadata_url: Option<&'a str>,
}

/// `server` logging a person in with a loopback redirect; its connect waits for the login.
fn with_login(server: McpServer, login: Login<'_>) -> Result<McpServer, String> {
    let authorizer = McpLoopbackAuthorizer::bind()
        .map_err(|error| format!("the OAuth redirect listener on 127.0.0.1: {error}"))?
        .open_browser(login.open_browser)
        .wait(LOGIN_WAIT);
    let mut config = McpOAuthLogin::new(authorizer);
    if let Some(id) = login.client_id {
        config = config.client_id(id);
        if let Some(secret) = login.client_secret {
            config = config.client_secret(secret);
        }
    }
    for scope in login.scopes {
        config = config.scope(scope);
    }
    if let Some(path) = login.token_file {
        config = config.token_file(path);
    }
    if let Some(url) = login.client_metadata_url {
        config = config.client_metadata_url(url);
    }
    Ok(server.oauth_login(config))
}

fn credentials(id: &str, secret: String, scopes: &[String]) -> McpClientCredentials {
    scopes.iter().fold(
        McpClientCredentials::new(id, secret),
        |credentials, scope| credentials.scope(scope),
    )
}

/// The MCP servers that started and, for each one that did not, one line saying why (its
/// error and the tail of its stderr).
pub(crate) struct Started {
    /// The servers connected, their tools registered.
    pub handles: Vec<McpHandle>,
    /// One line per server that failed, in the order the sources name them.
    pub failures: Vec<String>,
}

/// Connects every MCP server the sources name and registers its tools. A server that fails is
/// left out (its tools are missing) and reported in [`Started::failures`]; the others start.
/// An error only for sources that name no server correctly (a bad `--mcp` line or config file).
pub(crate) async fn add(registry: &Registry, sources: &Sources) -> Result<Started, String> {
    let servers = servers(sources)?;
    let mut started = Started {
        handles: Vec::new(),
        failures: Vec::new(),
    };
    if servers.is_empty() {
        return Ok(started);
    }
    let tails = StderrTails::installed();
    for server in servers {
        let name = server.name().to_owned();
        let static_token = server.sends_header("authorization");
        match registry.add_mcp_server(server).await {
            Ok(handle) => started.handles.push(handle),
            Err(error) => {
                let tail = tails.wait_for(&name).await;
                let mut failure = error.to_string();
                // A server given its token refused that token: logging in is not the remedy.
                if failure.contains("requires OAuth authorization (HTTP 401)") && static_token {
                    failure.push_str(
                        "; it refused the Authorization header its --config entry gives: \
                         check or renew that token",
                    );
                } else if failure.contains("requires OAuth authorization (HTTP 401)")
                    && failure.contains("resource_metadata=")
                {
                    failure.push_str(
                        "; log in with --mcp-oauth-login, or give client credentials with \
                         --mcp-oauth-client-id (a --config entry: \"oauth\")",
                    );
                } else if failure.contains("requires OAuth authorization (HTTP 401)") {
                    // No protected-resource metadata (RFC 9728): a server that takes a fixed
                    // token, such as `dsh-tools serve --http`.
                    failure.push_str(
                        "; its answer names no OAuth metadata, so it likely takes a fixed \
                         token: give it in a --config entry, \"headers\": \
                         {\"Authorization\": \"Bearer <token>\"}",
                    );
                }
                if !tail.is_empty() {
                    failure = format!("{failure}; stderr: {}", tail.join(" | "));
                }
                started.failures.push(failure);
            }
        }
    }
    Ok(started)
}

fn servers(sources: &Sources) -> Result<Vec<McpServer>, String> {
    let mut taken = HashSet::new();
    let mut servers = Vec::new();
    for value in &sources.mcp {
        // `NAME=COMMAND ARGS…` names the server; a first word that is no server name followed
        // by `=` is part of the command.
        let (named, line) = match value.split_once('=') {
            Some((name, rest)) if is_valid_server_name(name) => (Some(name), rest),
            _ => (None, value.as_str()),
        };
        let words = shlex::split(line)
            .filter(|words| !words.is_empty())
            .ok_or_else(|| {
                format!("--mcp \"{value}\": not a command line (empty or unbalanced quotes)")
            })?;
        let name = match named {
            Some(name) if !taken.insert(name.to_owned()) => {
                return Err(format!("--mcp \"{value}\": server name {name} is taken"));
            }
            Some(name) => name.to_owned(),
            None => unique(&mut taken, server_name_of_command(&words)),
        };
        servers.push(McpServer::stdio(
            name,
            words[0].clone(),
            words[1..].to_vec(),
        ));
    }
    if sources.mcp_oauth_token_file.is_some() && sources.mcp_http.len() > 1 {
        return Err(
            "--mcp-oauth-token-file: one file holds one server's tokens; give the servers \
             --config entries with a \"tokenFile\" each"
                .to_owned(),
        );
    }
    if !sources.mcp_oauth_scope.is_empty()
        && sources.mcp_oauth_client_id.is_none()
        && !sources.mcp_oauth_login
    {
        return Err(
            "--mcp-oauth-scope needs --mcp-oauth-client-id or --mcp-oauth-login".to_owned(),
        );
    }
    for url in &sources.mcp_http {
        let host = url
            .split("://")
            .nth(1)
            .unwrap_or(url)
            .split(['/', '?'])
            .next()
            .unwrap_or_default();
        let name = unique(&mut taken, sanitize(host));
        let mut server = McpServer::http(name, url.clone());
        if sources.mcp_oauth_login {
            // A person's login may use a public client: the secret only when one is given.
            let var = std::env::var_os(CLIENT_SECRET_VAR).map(|_| CLIENT_SECRET_VAR);
            let secret = match &sources.mcp_oauth_client_id {
                Some(_) => read_secret(sources.mcp_oauth_client_secret_file.as_deref(), var)
                    .map_err(|error| {
                        format!("--mcp-oauth-client-id: the client secret: {error}")
                    })?,
                None => None,
            };
            server = with_login(
                server,
                Login {
                    client_id: sources.mcp_oauth_client_id.as_deref(),
                    client_secret: secret,
                    scopes: &sources.mcp_oauth_scope,
                    token_file: sources.mcp_oauth_token_file.as_deref(),
                    open_browser: sources.mcp_oauth_open_browser,
                    client_metadata_url: sources.mcp_oauth_client_metadata_url.as_deref(),
                },
            )
            .map_err(|error| format!("--mcp-oauth-login: {error}"))?;
        } else if let Some(id) = &sources.mcp_oauth_client_id {
            let secret = read_secret(
                sources.mcp_oauth_client_secret_file.as_deref(),
                Some(CLIENT_SECRET_VAR),
            )
            .map_err(|error| format!("--mcp-oauth-client-id: the client secret: {error}"))?
            .unwrap_or_default();
            server = server.client_credentials(credentials(id, secret, &sources.mcp_oauth_scope));
        }
        servers.push(server);
    }
    if let Some(path) = &sources.config {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("--config {}: {error}", path.display()))?;
        let config: ConfigFile = serde_json::from_str(&text)
            .map_err(|error| format!("--config {}: {error}", path.display()))?;
        for (key, entry) in config.mcp_servers {
            if entry.disabled {
                continue;
            }
            if !taken.insert(key.clone()) {
                return Err(format!(
                    "--config {}: server \"{key}\" is named twice",
                    path.display()
                ));
            }
            servers.push(
                entry_server(&key, entry)
                    .map_err(|error| format!("--config {}: {error}", path.display()))?,
            );
        }
    }
    Ok(servers
        .into_iter()
        .map(|server| match sources.mcp_connect_timeout_ms {
            Some(ms) => server.connect_timeout_ms(ms),
            None => server,
        })
        .map(|server| match sources.mcp_list_timeout_ms {
            Some(ms) => server.list_timeout_ms(ms),
            None => server,
        })
        .map(|server| match sources.mcp_call_timeout_ms {
            Some(ms) => server.call_timeout_ms(ms),
            None => server,
        })
        .map(crate::elicit::attach)
        .collect())
}

fn entry_server(key: &str, entry: ServerEntry) -> Result<McpServer, String> {
    let mut server = match (entry.kind.as_deref(), entry.command, entry.url) {
        (None | Some("stdio"), Some(command), None) => McpServer::stdio(key, command, entry.args),
        (
            None | Some("http") | Some("streamable-http") | Some("streamableHttp"),
            None,
            Some(url),
        ) => McpServer::http(key, url),
        (Some(kind), _, _)
            if !["stdio", "http", "streamable-http", "streamableHttp"].contains(&kind) =>
        {
            return Err(format!(
                "server \"{key}\": unsupported type \"{kind}\" (known: stdio, http)"
            ));
        }
        _ => {
            return Err(format!(
                "server \"{key}\": give either \"command\" (stdio) or \"url\" (http)"
            ));
        }
    };
    for (name, value) in entry.env {
        server = server.env(name, value);
    }
    if let Some(cwd) = entry.cwd {
        server = server.cwd(cwd);
    }
    for (name, value) in entry.headers {
        server = server.header(name, value);
    }
    if let Some(oauth) = entry.oauth {
        let secret = match (
            oauth.client_secret,
            oauth.client_secret_env,
            oauth.client_secret_file,
        ) {
            (Some(secret), None, None) => Some(secret),
            (None, None, None) if oauth.login => None,
            (None, var, file) if var.is_some() != file.is_some() => {
                read_secret(file.as_deref(), var.as_deref())
                    .map_err(|error| format!("server \"{key}\": oauth: {error}"))?
            }
            _ => {
                return Err(format!(
                    "server \"{key}\": oauth: give one of \"clientSecret\", \"clientSecretEnv\" \
                     and \"clientSecretFile\""
                ));
            }
        };
        server = match (oauth.login, &oauth.client_id) {
            (true, client_id) => with_login(
                server,
                Login {
                    client_id: client_id.as_deref(),
                    client_secret: secret,
                    scopes: &oauth.scopes,
                    token_file: oauth.token_file.as_deref(),
                    open_browser: oauth.open_browser,
                    client_metadata_url: oauth.client_metadata_url.as_deref(),
                },
            )
            .map_err(|error| format!("server \"{key}\": oauth: {error}"))?,
            (false, Some(id)) => server.client_credentials(credentials(
                id,
                secret.unwrap_or_default(),
                &oauth.scopes,
            )),
            (false, None) => {
                return Err(format!(
                    "server \"{key}\": oauth: give \"clientId\" (client credentials) or \
                     \"login\": true (a person's login)"
                ));
            }
        };
    }
    Ok(server)
}

/// Programs that start another program: the server is named after what they start.
const LAUNCHERS: [&str; 12] = [
    "npx", "uvx", "node", "python", "python3", "bunx", "deno", "pipx", "uv", "sh", "bash", "env",
];

/// `npx -y @modelcontextprotocol/server-filesystem .` → `filesystem`; `mcp-server-time` → `time`.
fn server_name_of_command(words: &[String]) -> String {
    let program = basename(&words[0]);
    let subject = if LAUNCHERS.contains(&program) {
        words[1..]
            .iter()
            .find(|word| !word.starts_with('-') && !["run", "exec", "-m"].contains(&word.as_str()))
            .map_or(program, |word| basename(word))
    } else {
        program
    };
    let mut name = subject
        .split('@')
        .find(|part| !part.is_empty())
        .unwrap_or(subject);
    for suffix in [".py", ".js", ".mjs", ".ts"] {
        name = name.strip_suffix(suffix).unwrap_or(name);
    }
    for prefix in ["mcp-server-", "server-", "mcp-"] {
        if let Some(rest) = name.strip_prefix(prefix).filter(|rest| !rest.is_empty()) {
            name = rest;
            break;
        }
    }
    for suffix in ["-mcp-server", "-mcp", "-server"] {
        if let Some(rest) = name.strip_suffix(suffix).filter(|rest| !rest.is_empty()) {
            name = rest;
            break;
        }
    }
    sanitize(name)
}

fn basename(word: &str) -> &str {
    word.rsplit('/')
        .find(|part| !part.is_empty())
        .unwrap_or(word)
}

/// A server name made of `[A-Za-z0-9_-]`: other characters become `_`, runs of `_` one `_`, no
/// `_` at the end (a valid server name never holds `__` or ends in `_`).
fn sanitize(name: &str) -> String {
    let mut clean = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && clean.ends_with('_')) {
            clean.push(c);
        }
        if clean.len() == 28 {
            break;
        }
    }
    let clean = clean.trim_end_matches('_');
    if clean.is_empty() {
        "mcp".to_owned()
    } else {
        clean.to_owned()
    }
}

fn unique(taken: &mut HashSet<String>, name: String) -> String {
    let mut candidate = name.clone();
    let mut n = 2;
    while !taken.insert(candidate.clone()) {
        candidate = format!("{name}_{n}");
        n += 1;
    }
    candidate
}

#[cfg(test)]
mod tests {
    use super::{sanitize, server_name_of_command, servers};
    use crate::args::Sources;
    use dsh_tools::mcp::is_valid_server_name;

    fn name(line: &str) -> String {
        server_name_of_command(&shlex::split(line).unwrap())
    }

    #[test]
    fn servers_are_named_after_what_they_run() {
        assert_eq!(
            name("npx -y @modelcontextprotocol/server-filesystem ."),
            "filesystem"
        );
        assert_eq!(
            name("npx -y @modelcontextprotocol/server-everything"),
            "everything"
        );
        assert_eq!(
            name("/venv/bin/mcp-server-time --local-timezone UTC"),
            "time"
        );
        assert_eq!(name("python3 tests/servers/slow_server.py"), "slow_server");
        assert_eq!(name("uvx mcp-server-fetch"), "fetch");
        assert_eq!(name("my-tool"), "my-tool");
    }

    /// Hosts and program names become valid server names: no `__`, no `_` at the end.
    #[test]
    fn sanitized_names_are_valid_server_names() {
        for (raw, clean) in [
            ("127.0.0.1:3001", "127_0_0_1_3001"),
            ("a..b", "a_b"),
            ("tool.", "tool"),
            ("__", "mcp"),
            ("_lead", "_lead"),
        ] {
            assert_eq!(sanitize(raw), clean, "{raw}");
            assert!(is_valid_server_name(&sanitize(raw)), "{raw}");
        }
        assert!(is_valid_server_name(&sanitize(&"a.".repeat(40))));
    }

    #[test]
    fn name_equals_names_a_server_and_a_taken_name_is_refused() {
        let sources = |mcp: &[&str]| Sources {
            builtin: None,
            root: None,
            mcp: mcp.iter().map(|line| (*line).to_owned()).collect(),
            mcp_http: Vec::new(),
            mcp_oauth_client_id: None,
            mcp_oauth_client_secret_file: None,
            mcp_oauth_scope: Vec::new(),
            mcp_oauth_login: false,
            mcp_oauth_open_browser: false,
            mcp_oauth_client_metadata_url: None,
            mcp_oauth_token_file: None,
            mcp_connect_timeout_ms: None,
            mcp_list_timeout_ms: None,
            mcp_call_timeout_ms: None,
            config: None,
        };
        let named = servers(&sources(&[
            "ev=npx -y @modelcontextprotocol/server-everything",
            "npx -y @modelcontextprotocol/server-everything",
            "python3 -c 'x=1'",
        ]))
        .unwrap();
        let names: Vec<&str> = named.iter().map(|server| server.name()).collect();
        // The `=` inside the command names nothing: the server is named after the command.
        assert_eq!(names, ["ev", "everything", "x_1"]);
        let error = servers(&sources(&["a=cmd", "a=other"])).unwrap_err();
        assert!(error.contains("server name a is taken"), "{error}");
    }
}
