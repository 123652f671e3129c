//! The deployment's HTTP/2 listener: who may call it (Restate's request identity) and what it
//! holds for a connection (a cap tied to the descriptor limit, handshake and idle timeouts).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::Service;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use restate_sdk::hyper::HyperEndpoint;
use restate_sdk::prelude::*;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use super::{DurableApprovals, DurableRuns};
use crate::registry::Registry;

/// The most bytes of headers one request may carry: Restate's requests carry a few small ones
/// (and the identity JWT).
const MAX_HEADER_LIST_BYTES: u32 = 64 * 1024;

/// How long a closed connection may take to wind down (GOAWAY sent, nothing open) before it is
/// dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// What [`serve_deployment`] accepts and holds.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeploymentOptions {
    /// Restate's request identity keys (`publickeyv1_…`, the Ed25519 public key of the
    /// server's `request-identity-private-key-pem-file`, which the server logs at start as
    /// `Loaded request identity key kid: …`). With any, every request must carry a JWT signed
    /// by one of them (restate-sdk's check: `x-restate-jwt-v1`, audience the request path,
    /// 1-minute expiry); any other request, a discovery included, is answered `401`, and its
    /// connection closed. Required unless the deployment is bound to a loopback address.
    pub identity_keys: Vec<String>,
    /// Connections open at once (at least 1; default 256), never more than a quarter of the
    /// process's descriptor limit (`RLIMIT_NOFILE`, read at start), so that idle connections
    /// cannot take the descriptors the MCP face and the tools need. A connection past it is
    /// closed at once.
    pub max_connections: usize,
    /// How long a new connection may take to send its first request (at least 1 ms; default
    /// 30 s, as the MCP face's header timeout).
    pub handshake_timeout: Duration,
    /// How long a connection may stay open with no request in flight before it is closed with
    /// an HTTP/2 GOAWAY (at least 1 ms; default 120 s; Restate opens another when it needs
    /// one). A request in flight (a run, however long) keeps its connection; a peer that stops
    /// answering HTTP/2 pings (every 40 s, 20 s to answer) loses it.
    pub idle_timeout: Duration,
}

impl Default for DeploymentOptions {
    fn default() -> Self {
        DeploymentOptions {
            identity_keys: Vec::new(),
            max_connections: 256,
            handshake_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

impl DeploymentOptions {
    /// Adds `key` (`publickeyv1_…`) to [`DeploymentOptions::identity_keys`]; checked when
    /// serving starts.
    pub fn identity_key(mut self, key: impl Into<String>) -> Self {
        self.identity_keys.push(key.into());
        self
    }

    /// Sets [`DeploymentOptions::max_connections`] (0 counts as 1).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// Sets [`DeploymentOptions::handshake_timeout`] (below 1 ms counts as 1 ms).
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Sets [`DeploymentOptions::idle_timeout`] (below 1 ms counts as 1 ms).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Checks these options for a deployment on `addr` without serving: what
    /// [`serve_deployment`] checks before it binds.
    ///
    /// # Errors
    /// [`DeploymentError::NoIdentityOffLoopback`] and
    /// [`DeploymentError::InvalidIdentityKey`].
    pub fn check(&self, addr: SocketAddr) -> Result<(), DeploymentError> {
        self.endpoint(addr, |builder| builder).map(drop)
    }

    /// The endpoint of the services `bind` adds, verifying the identity keys.
    fn endpoint(
        &self,
        addr: SocketAddr,
        bind: impl FnOnce(restate_sdk::endpoint::Builder) -> restate_sdk::endpoint::Builder,
    ) -> Result<Endpoint, DeploymentError> {
        if self.identity_keys.is_empty() && !addr.ip().to_canonical().is_loopback() {
            return Err(DeploymentError::NoIdentityOffLoopback(addr));
        }
        let mut builder = bind(Endpoint::builder());
        for key in &self.identity_keys {
            builder =
                builder
                    .identity_key(key)
                    .map_err(|error| DeploymentError::InvalidIdentityKey {
                        key: key.clone(),
                        reason: error.to_string(),
                    })?;
        }
        Ok(builder.build())
    }
}

/// Why [`serve_deployment`] did not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeploymentError {
    /// No identity key, on an address that is not loopback: anyone reaching it could register
    /// it with a Restate server of their own and run programs over every tool.
    #[error(
        "the Restate deployment is refused on {0} without a request identity key: off loopback \
         only a Restate server holding the matching private key \
         (request-identity-private-key-pem-file) may call it; give its public key \
         (publickeyv1_…, --restate-identity-key) or bind 127.0.0.1"
    )]
    NoIdentityOffLoopback(SocketAddr),
    /// An identity key that is not a `publickeyv1_` Ed25519 public key, for the reason given.
    #[error("the Restate request identity key \"{key}\" is unusable: {reason}")]
    InvalidIdentityKey {
        /// The key as given.
        key: String,
        /// Why it is unusable.
        reason: String,
    },
    /// The address cannot be bound (in use, not local, no permission).
    #[error("cannot bind {0}: {1}")]
    Bind(SocketAddr, #[source] std::io::Error),
}

/// Serves the Restate deployment of `registry`'s durable runs (the service
/// [`SERVICE`](super::SERVICE) with its handler [`HANDLER`](super::HANDLER), and the virtual
/// object [`APPROVALS`](super::APPROVALS)) over HTTP/2 without TLS on `addr`, until the future
/// is dropped, within `options`. The registry must have a code runtime
/// (`crate::CodeModeExt::set_code_runtime`); each invocation runs its program with it.
///
/// # Errors
/// [`DeploymentError`]: no identity key off loopback, a key that is not one, or the address
/// cannot be bound; checked before anything is served.
///
/// ```no_run
/// # async fn serve(registry: dsh_tool_runtime::Registry) -> Result<(), Box<dyn std::error::Error>> {
/// use dsh_tool_code_mode::durable::restate::{DeploymentOptions, serve_deployment};
/// let options = DeploymentOptions::default()
///     .identity_key("publickeyv1_7kHQm2FbDbUiJrnbk35iKpdLBqUQ8KivpkYUZZiXT4Pn");
/// serve_deployment(registry, "10.0.0.5:9080".parse()?, options).await?;
/// # Ok(())
/// # }
/// ```
pub async fn serve_deployment(
    registry: Registry,
    addr: SocketAddr,
    options: DeploymentOptions,
) -> Result<(), DeploymentError> {
    let endpoint = options.endpoint(addr, |builder| {
        builder
            .bind(DurableRuns {
                registry: registry.clone(),
            })
            .bind(DurableApprovals { registry })
    })?;
    let endpoint = HyperEndpoint::new(endpoint);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| DeploymentError::Bind(addr, error))?;
    let cap = connection_cap(options.max_connections);
    let connections = Arc::new(Semaphore::new(cap));
    let mut http = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http.timer(TokioTimer::new())
        .max_header_list_size(MAX_HEADER_LIST_BYTES)
        .keep_alive_interval(Some(Duration::from_secs(40)))
        .keep_alive_timeout(Duration::from_secs(20));
    let mut acceptor = crate::accept::Acceptor::new(listener, "Restate deployment");
    loop {
        let stream = acceptor.accept().await;
        // Past the cap the socket is closed at once: its descriptor is back before the next
        // accept.
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            tracing::debug!(
                limit = cap,
                "Restate deployment: a connection past the limit"
            );
            continue;
        };
        // Each journal entry is a small HTTP/2 frame the handler then waits on Restate's answer
        // to: with Nagle's algorithm on, each can wait out the server's delayed ACK (~40 ms).
        let _ = stream.set_nodelay(true);
        let (activity, watched) = watch::channel(Activity::default());
        let activity = Arc::new(activity);
        let endpoint = endpoint.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            std::future::ready(Ok::<_, Infallible>(track(&endpoint, &activity, request)))
        });
        let connection = http.serve_connection(TokioIo::new(stream), service);
        let (handshake, idle) = (options.handshake_timeout, options.idle_timeout);
        tokio::spawn(async move {
            let mut connection = pin!(connection);
            let close = tokio::select! {
                // A connection that fails ends on its own; Restate retries what it carried.
                _ = connection.as_mut() => false,
                () = unwanted(watched, handshake, idle) => true,
            };
            if close {
                connection.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(CLOSE_GRACE, connection).await;
            }
            drop(permit);
        });
    }
}

/// [`DeploymentOptions::max_connections`] within a quarter of the descriptor limit.
fn connection_cap(configured: usize) -> usize {
    #[cfg(unix)]
    let configured = match rustix::process::getrlimit(rustix::process::Resource::Nofile).current {
        Some(limit) => configured.min(usize::try_from(limit / 4).unwrap_or(usize::MAX)),
        None => configured,
    };
    configured.max(1)
}

/// What one connection is doing.
#[derive(Debug, Default, Clone, Copy)]
struct Activity {
    /// Requests whose answer is still being sent.
    open: usize,
    /// Whether a request has come at all.
    started: bool,
    /// Whether a request was refused for its identity: the connection is not Restate's.
    refused: bool,
}

/// Resolves when the connection should be closed: no first request within `handshake`, no
/// request in flight for `idle`, or a request refused for its identity.
async fn unwanted(mut activity: watch::Receiver<Activity>, handshake: Duration, idle: Duration) {
    let started = matches!(
        tokio::time::timeout(handshake, activity.wait_for(|now| now.started)).await,
        Ok(Ok(_))
    );
    if !started {
        return;
    }
    loop {
        let refused = match activity.wait_for(|now| now.open == 0 || now.refused).await {
            Ok(now) => now.refused,
            Err(_) => return,
        };
        if refused {
            return;
        }
        // A change within `idle` (a request came, or the identity was refused) starts over.
        match tokio::time::timeout(idle, activity.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

/// What reading the endpoint's answer may fail with.
type BodyError = <restate_sdk::endpoint::ResponseBody as hyper::body::Body>::Error;

/// Marks a request ended when dropped.
struct InFlight(Arc<watch::Sender<Activity>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|now| now.open -= 1);
    }
}

/// The endpoint's answer to `request`, counted in `activity` as in flight until its body is
/// dropped (sent or abandoned); a `401` (a request without Restate's identity) marks the
/// connection refused.
fn track(
    endpoint: &HyperEndpoint,
    activity: &Arc<watch::Sender<Activity>>,
    request: Request<Incoming>,
) -> Response<impl hyper::body::Body<Data = bytes::Bytes, Error = BodyError> + Send + use<>> {
    activity.send_modify(|now| {
        now.open += 1;
        now.started = true;
    });
    let in_flight = InFlight(activity.clone());
    let Ok(response) = endpoint.call(request).into_inner();
    if response.status() == StatusCode::UNAUTHORIZED {
        activity.send_modify(|now| now.refused = true);
    }
    response.map(|body| {
        // The closure owns the marker: the request ends when the body is dropped.
        body.map_frame(move |frame| {
            let _ = &in_flight;
            frame
        })
    })
}
