//! Streamable HTTP: rmcp's tower service on a hyper connection per accepted socket.

use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use super::McpServeError;
use super::handler::McpHandler;

pub(crate) async fn serve(handler: McpHandler, listener: TcpListener) -> Result<(), McpServeError> {
    let handler = Arc::new(handler);
    let service = StreamableHttpService::new(
        move || Ok(handler.session()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    loop {
        let (stream, _) = listener
            .accept()
            .await
            .map_err(|error| McpServeError::Transport(error.to_string()))?;
        let service = TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            // One client's broken connection ends only that connection.
            let _ = Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
