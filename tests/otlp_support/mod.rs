//! An OTLP/HTTP receiver on loopback for the tests that read back what an exporter sends: every
//! request's path and body, as they arrive, decoded with the OTLP protobuf messages.

use std::convert::Infallible;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;

/// A receiver listening on a free loopback port: its base endpoint (`http://127.0.0.1:PORT`)
/// and the requests it gets (path, body), in order.
pub(crate) async fn receiver() -> (String, mpsc::UnboundedReceiver<(String, Bytes)>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let (sender, received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let sender = sender.clone();
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let sender = sender.clone();
                async move {
                    let path = request.uri().path().to_owned();
                    let body = request.into_body().collect().await.unwrap().to_bytes();
                    let _ = sender.send((path, body));
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    (address, received)
}
