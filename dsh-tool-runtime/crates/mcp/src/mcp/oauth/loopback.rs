//! The command line's browser step: the authorization URL printed (and opened when asked), the
//! redirect received on a loopback listener (RFC 8252 §7.3: `127.0.0.1`, a port the OS chose).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::login::{McpAuthorizeError, McpAuthorizer};

/// The path the redirect comes to.
const CALLBACK_PATH: &str = "/callback";
/// The largest request head read from the browser.
const MAX_REQUEST_BYTES: usize = 16 << 10;
/// How long one browser connection may take to send its request head.
const REQUEST_BOUND: Duration = Duration::from_secs(30);
/// Default of [`McpLoopbackAuthorizer::wait`]: five minutes for the person to log in.
const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// Callbacks with a wrong `state` (or no code) answered with an error page before the login
/// ends: forged requests cannot end it one by one, nor keep it waiting past this.
const MAX_BAD_CALLBACKS: usize = 16;

type Notice = Arc<dyn Fn(&str) + Send + Sync>;

/// An [`McpAuthorizer`] for a person at a terminal: the authorization URL is shown (on stderr
/// by default, see [`notice`](Self::notice)), opened in the default browser only when
/// [`open_browser`](Self::open_browser) asks, and the redirect is received on
/// `http://127.0.0.1:<port>/callback`, a port the OS chose at [`bind`](Self::bind). The browser
/// gets a page saying it may close; any other path gets `404`, and waiting goes on until the
/// redirect comes or [`wait`](Self::wait) runs out. Only a callback carrying the `state` of the
/// authorization URL counts (RFC 6749 §10.12): one with another `state` or without a code (a
/// forged request from another local process or a web page) gets a `400` page and waiting goes
/// on, up to 16 such requests, past which the login ends saying so. A redirect with the right
/// `state` carrying `error` (the person refused) ends the login with that error.
pub struct McpLoopbackAuthorizer {
    /// Bound at once (so the redirect URI is known before any runtime runs); each wait reads it
    /// through a tokio listener of its own.
    listener: tokio::sync::Mutex<std::net::TcpListener>,
    port: u16,
    open_browser: bool,
    wait: Duration,
    notice: Notice,
}

impl fmt::Debug for McpLoopbackAuthorizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpLoopbackAuthorizer")
            .field("port", &self.port)
            .field("open_browser", &self.open_browser)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl McpLoopbackAuthorizer {
    /// Listens on `127.0.0.1` on a port the OS chooses.
    ///
    /// # Errors
    /// The listener cannot be bound.
    pub fn bind() -> std::io::Result<McpLoopbackAuthorizer> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        Ok(McpLoopbackAuthorizer {
            listener: tokio::sync::Mutex::new(listener),
            port,
            open_browser: false,
            wait: DEFAULT_WAIT,
            notice: Arc::new(|url| {
                eprintln!("To authorize, open this URL in a browser:\n  {url}");
            }),
        })
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Opens the URL in the default browser too (`xdg-open`, `open` on macOS, `start` on
    /// Windows); a browser that cannot be started leaves the printed URL.
    pub fn open_browser(mut self, open: bool) -> Self {
        self.open_browser = open;
        self
    }

    /// How long to wait for the redirect (default five minutes).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Shows the authorization URL with `notice` instead of on stderr.
    pub fn notice(mut self, notice: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.notice = Arc::new(notice);
        self
    }

    /// The redirect whose `state` is `state` (any when the authorization URL has none).
    async fn receive(&self, state: Option<String>) -> Result<String, McpAuthorizeError> {
        let bound = self.listener.lock().await;
        let listener = bound
            .try_clone()
            .and_then(TcpListener::from_std)
            .map_err(|error| {
                McpAuthorizeError::new(format!("the redirect listener failed: {error}"))
            })?;
        // Connections are read side by side: a slow or silent one (a browser's speculative
        // connection) must not hold up the redirect that follows it.
        let mut pending = tokio::task::JoinSet::new();
        let mut bad = 0;
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, _) = accepted.map_err(|error| {
                        McpAuthorizeError::new(format!("the redirect listener failed: {error}"))
                    })?;
                    let request = request_target(stream, state.clone());
                    pending.spawn(tokio::time::timeout(REQUEST_BOUND, request));
                }
                Some(Ok(Ok(Ok(received)))) = pending.join_next() => match received {
                    Received::Redirect(answer) => {
                        return answer
                            .map(|target| format!("http://127.0.0.1:{}{target}", self.port));
                    }
                    Received::BadCallback => {
                        bad += 1;
                        if bad >= MAX_BAD_CALLBACKS {
                            return Err(McpAuthorizeError::new(format!(
                                "{bad} requests to the redirect listener carried a wrong state \
                                 or no code: the login was stopped, as someone else may be \
                                 sending them"
                            )));
                        }
                    }
                    Received::Other => {}
                },
            }
        }
    }
}

/// What one request to the listener was.
enum Received {
    /// The redirect of this login: its target, or the authorization server's refusal.
    Redirect(Result<String, McpAuthorizeError>),
    /// A callback with a wrong `state` or no code: answered `400`, counted.
    BadCallback,
    /// Another path, or no complete request: answered `404` or not at all.
    Other,
}

/// Reads one request and answers it; `state` is the one the redirect must carry.
async fn request_target(mut stream: TcpStream, state: Option<String>) -> std::io::Result<Received> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = stream.read(&mut chunk).await?;
        if read == 0 || head.len() + read > MAX_REQUEST_BYTES {
            return Ok(Received::Other);
        }
        head.extend_from_slice(&chunk[..read]);
    }
    let line = String::from_utf8_lossy(&head);
    let target = line
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("GET "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_default()
        .to_owned();
    if target.split('?').next() != Some(CALLBACK_PATH) {
        respond(&mut stream, "404 Not Found", "Not found.").await?;
        return Ok(Received::Other);
    }
    let url = url::Url::parse(&format!("http://127.0.0.1{target}"))
        .map_err(|error| std::io::Error::other(error.to_string()))?;
    let param = |name: &str| {
        url.query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    if state.is_some() && param("state") != state {
        respond(
            &mut stream,
            "400 Bad Request",
            "This redirect does not belong to the login in progress (its state does not match); \
             the login goes on.",
        )
        .await?;
        return Ok(Received::BadCallback);
    }
    if let Some(error) = param("error") {
        respond(
            &mut stream,
            "200 OK",
            "Authorization was refused. You may close this window.",
        )
        .await?;
        let description = param("error_description").unwrap_or_default();
        return Ok(Received::Redirect(Err(McpAuthorizeError::new(format!(
            "the authorization server answered {error}: {description}"
        )))));
    }
    if param("code").is_none() {
        respond(&mut stream, "400 Bad Request", "The redirect has no code.").await?;
        return Ok(Received::BadCallback);
    }
    respond(
        &mut stream,
        "200 OK",
        "Authorized. You may close this window.",
    )
    .await?;
    Ok(Received::Redirect(Ok(target)))
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) -> std::io::Result<()> {
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{text}",
        text.len()
    );
    stream.write_all(answer.as_bytes()).await?;
    stream.shutdown().await
}

/// Starts the platform's opener on `url`; its failure is only said, the URL is already shown.
fn open(url: &str) {
    let command = if cfg!(target_os = "macos") {
        std::process::Command::new("open").arg(url).spawn()
    } else if cfg!(windows) {
        std::process::Command::new("cmd")
            .args(["/C", "start", ""])
            .arg(url)
            .spawn()
    } else {
        std::process::Command::new("xdg-open").arg(url).spawn()
    };
    if let Err(error) = command {
        eprintln!("cannot open a browser ({error}); open the URL above by hand");
    }
}

impl McpAuthorizer for McpLoopbackAuthorizer {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}{CALLBACK_PATH}", self.port)
    }

    fn authorize<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<String, McpAuthorizeError>> {
        Box::pin(async move {
            (self.notice)(url);
            if self.open_browser {
                open(url);
            }
            // The `state` the authorization server will send back (RFC 6749 §4.1.1).
            let state = url::Url::parse(url).ok().and_then(|url| {
                url.query_pairs()
                    .find(|(key, _)| key == "state")
                    .map(|(_, value)| value.into_owned())
            });
            tokio::time::timeout(self.wait, self.receive(state))
                .await
                .map_err(|_| {
                    McpAuthorizeError::new(format!(
                        "no authorization came back within {} s",
                        self.wait.as_secs()
                    ))
                })?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16, target: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream
            .write_all(format!("GET {target} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn the_redirect_on_the_loopback_listener_is_the_answer() {
        let (shown, seen) = tokio::sync::oneshot::channel::<String>();
        let shown = std::sync::Mutex::new(Some(shown));
        let authorizer = McpLoopbackAuthorizer::bind().unwrap().notice(move |url| {
            if let Some(shown) = shown.lock().unwrap().take() {
                let _ = shown.send(url.to_owned());
            }
        });
        let port = authorizer.port();
        assert_eq!(
            authorizer.redirect_uri(),
            format!("http://127.0.0.1:{port}/callback")
        );
        let browser = tokio::spawn(async move {
            assert_eq!(seen.await.unwrap(), "https://as.example/authorize?x=1");
            // A silent connection, a stray path and a redirect without code come first.
            let _silent = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            assert!(get(port, "/favicon.ico").await.starts_with("HTTP/1.1 404"));
            assert!(
                get(port, "/callback?state=s")
                    .await
                    .starts_with("HTTP/1.1 400")
            );
            let page = get(port, "/callback?code=c&state=s").await;
            assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        });
        let redirect = authorizer
            .authorize("https://as.example/authorize?x=1")
            .await
            .unwrap();
        browser.await.unwrap();
        assert_eq!(
            redirect,
            format!("http://127.0.0.1:{port}/callback?code=c&state=s")
        );
    }

    /// A forged redirect (another `state`, or no code) is answered with an error page and the
    /// login goes on to the right one; the error of a forged refusal does not end it either.
    #[tokio::test]
    async fn a_redirect_with_a_wrong_state_is_refused_and_the_login_goes_on() {
        let authorizer = McpLoopbackAuthorizer::bind().unwrap().notice(|_| {});
        let port = authorizer.port();
        let browser = tokio::spawn(async move {
            let forged = get(port, "/callback?code=evil&state=guess").await;
            assert!(forged.starts_with("HTTP/1.1 400"), "{forged}");
            assert!(forged.contains("does not match"), "{forged}");
            let refusal = get(port, "/callback?error=access_denied&state=guess").await;
            assert!(refusal.starts_with("HTTP/1.1 400"), "{refusal}");
            assert!(
                get(port, "/callback?code=evil")
                    .await
                    .starts_with("HTTP/1.1 400")
            );
            let page = get(port, "/callback?code=good&state=s3cr3t").await;
            assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        });
        let redirect = authorizer
            .authorize("https://as.example/authorize?client_id=c&state=s3cr3t")
            .await
            .unwrap();
        browser.await.unwrap();
        assert_eq!(
            redirect,
            format!("http://127.0.0.1:{port}/callback?code=good&state=s3cr3t")
        );
    }

    /// Forged redirects are bounded: past the cap the login ends saying why.
    #[tokio::test]
    async fn too_many_forged_redirects_end_the_login() {
        let authorizer = McpLoopbackAuthorizer::bind().unwrap().notice(|_| {});
        let port = authorizer.port();
        let browser = tokio::spawn(async move {
            for _ in 0..MAX_BAD_CALLBACKS {
                assert!(
                    get(port, "/callback?code=evil&state=guess")
                        .await
                        .starts_with("HTTP/1.1 400")
                );
            }
        });
        let error = authorizer
            .authorize("https://as.example/authorize?state=s3cr3t")
            .await
            .unwrap_err();
        browser.await.unwrap();
        assert!(
            error
                .to_string()
                .starts_with("16 requests to the redirect listener carried a wrong state"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_refusal_is_the_authorization_servers_error() {
        let authorizer = McpLoopbackAuthorizer::bind().unwrap().notice(|_| {});
        let port = authorizer.port();
        let browser = tokio::spawn(async move {
            get(
                port,
                "/callback?error=access_denied&error_description=no&state=s",
            )
            .await
        });
        let error = authorizer.authorize("u").await.unwrap_err();
        assert!(browser.await.unwrap().starts_with("HTTP/1.1 200"));
        assert_eq!(
            error.to_string(),
            "the authorization server answered access_denied: no"
        );
    }
}
