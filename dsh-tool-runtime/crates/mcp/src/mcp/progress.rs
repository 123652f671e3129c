//! Progress notifications, published in the order the server sent them.
//!
//! rmcp hands each notification to the client handler on a task of its own, so two progress
//! notifications of one call can reach the handler in either order on a multi-threaded runtime.
//! [`ProgressTap`] therefore reads them where rmcp reads the transport — one message after the
//! other — and publishes each as [`ToolEvent::Progress`] before rmcp sees it.

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::pin::pin;
use std::sync::{Arc, Weak};
use std::task::Poll;

use parking_lot::Mutex;
use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetMeta, ProgressNotificationParam, ProgressToken,
    ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::answers::CallAnswers;
use crate::events::ToolEvent;
use crate::registry::Registry;
use crate::telemetry::ClientSpans;

/// Notifications kept for tokens sent but not claimed yet (and tokens sent, not claimed). rmcp
/// picks a call's token while sending it, so the answer's first notifications can be read before
/// [`ProgressRoutes::claim`] runs; both windows are bounded.
const EARLY_NOTIFICATIONS: usize = 256;

/// What a connection's notification handler and its transport's [`ProgressTap`] need from
/// the bridge.
pub(crate) struct Link {
    pub(crate) registry: Registry,
    /// Progress token → call id of the calls in flight.
    pub(crate) progress: ProgressRoutes,
    /// Woken by `notifications/tools/list_changed`.
    pub(crate) list_changed: tokio::sync::Notify,
}

/// Progress token → call id of the calls in flight, plus notifications read before their call
/// claimed its token.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    inner: Mutex<Routes>,
}

#[derive(Default)]
struct Routes {
    calls: HashMap<ProgressToken, Route>,
    early: VecDeque<ProgressNotificationParam>,
    /// Tokens of requests written to the server and not claimed yet: only these can have early
    /// notifications. A token the server has not been sent (rmcp counts them 0, 1, 2, …) is a
    /// guess at a future call's, and its notifications are dropped.
    sent: VecDeque<ProgressToken>,
}

/// Where one token's notifications go, and the last progress published for it.
struct Route {
    call_id: String,
    last: Option<f64>,
}

impl Route {
    /// Publishes `params` unless its progress does not exceed the last one: MCP's progress
    /// "MUST increase with each notification", and [`ToolEvent::Progress`] promises as much, so a
    /// stale or repeated value from the server is dropped.
    fn publish(&mut self, registry: &Registry, params: ProgressNotificationParam) {
        if self.last.is_some_and(|last| params.progress <= last) || params.progress.is_nan() {
            return;
        }
        self.last = Some(params.progress);
        registry.publish(|| ToolEvent::Progress {
            call_id: self.call_id.clone(),
            progress: params.progress,
            total: params.total,
            message: params.message,
        });
    }
}

impl ProgressRoutes {
    /// Routes `token`'s notifications to `call_id` from now on, publishing first those already
    /// read for it, in their order.
    pub(crate) fn claim(&self, registry: &Registry, token: ProgressToken, call_id: &str) {
        let mut routes = self.inner.lock();
        routes.sent.retain(|sent| *sent != token);
        let mut route = Route {
            call_id: call_id.to_owned(),
            last: None,
        };
        if !routes.early.is_empty() {
            for params in std::mem::take(&mut routes.early) {
                if params.progress_token == token {
                    route.publish(registry, params);
                } else {
                    routes.early.push_back(params);
                }
            }
        }
        routes.calls.insert(token, route);
    }

    /// Notes that a request carrying `token` is being written to the server. rmcp hands the
    /// request to its service task, so the call has usually claimed the token already; then
    /// nothing needs noting.
    fn sent(&self, token: ProgressToken) {
        let mut routes = self.inner.lock();
        if routes.calls.contains_key(&token) {
            return;
        }
        if routes.sent.len() == EARLY_NOTIFICATIONS {
            routes.sent.pop_front();
        }
        routes.sent.push_back(token);
    }

    /// Stops routing `token` (its call has settled).
    pub(crate) fn release(&self, token: &ProgressToken) {
        self.inner.lock().calls.remove(token);
    }

    /// Publishes one notification read from the transport, or keeps it until its token is
    /// claimed.
    fn route(&self, registry: &Registry, params: ProgressNotificationParam) {
        let mut routes = self.inner.lock();
        if let Some(route) = routes.calls.get_mut(&params.progress_token) {
            route.publish(registry, params);
        } else if routes.sent.contains(&params.progress_token) {
            if routes.early.len() == EARLY_NOTIFICATIONS {
                routes.early.pop_front();
            }
            routes.early.push_back(params);
        }
    }
}

/// A client transport that publishes progress notifications as it reads them and passes every
/// message on (a request's `_meta` with its span's trace context added). Over stdio it also
/// hands rmcp the `tools/call` answers the reader parsed itself ([`CallAnswers`]), in the order
/// the server wrote them.
pub(crate) struct ProgressTap<T> {
    pub(crate) inner: T,
    pub(crate) link: Weak<Link>,
    pub(crate) answers: Option<Arc<CallAnswers>>,
    /// The spans of the requests in flight.
    pub(crate) spans: ClientSpans,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressTap<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.spans.sent(&mut item);
        if let ClientJsonRpcMessage::Request(request) = &item {
            if let Some(answers) = &self.answers {
                match request.request {
                    ClientRequest::CallToolRequest(_) => answers.sent(request.id.clone()),
                    ClientRequest::ListToolsRequest(_) => answers.list_sent(request.id.clone()),
                    _ => {}
                }
            }
            if let Some(token) = request.request.get_meta().get_progress_token()
                && let Some(link) = self.link.upgrade()
            {
                link.progress.sent(token);
            }
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = match &self.answers {
            None => self.inner.receive().await?,
            Some(answers) => {
                let mut read = pin!(self.inner.receive());
                // The answers the reader took go first, and are looked for again as soon as
                // the read comes back pending: the reader stops at a taken answer without
                // arranging a wake-up. A read dropped here loses nothing (rmcp's reads are
                // cancel-safe).
                let message = poll_fn(|cx| {
                    if let Some(answer) = answers.next() {
                        return Poll::Ready(Some(answer));
                    }
                    match read.as_mut().poll(cx) {
                        Poll::Pending => answers
                            .next()
                            .map_or(Poll::Pending, |a| Poll::Ready(Some(a))),
                        Poll::Ready(message) => Poll::Ready(message.or_else(|| answers.next())),
                    }
                })
                .await?;
                // An answer rmcp read itself ends the fast path of its id.
                let id = match &message {
                    ServerJsonRpcMessage::Response(response) => Some(&response.id),
                    ServerJsonRpcMessage::Error(error) => error.id.as_ref(),
                    _ => None,
                };
                if let Some(id) = id {
                    answers.forget(id);
                }
                message
            }
        };
        self.spans.received(&message);
        if let ServerJsonRpcMessage::Notification(notification) = &message
            && let ServerNotification::ProgressNotification(progress) = &notification.notification
            && let Some(link) = self.link.upgrade()
        {
            link.progress.route(&link.registry, progress.params.clone());
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn params(token: i64, progress: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(token)), progress)
    }

    fn progress_of(event: ToolEvent) -> (String, f64) {
        match event {
            ToolEvent::Progress {
                call_id, progress, ..
            } => (call_id, progress),
            other => panic!("not a progress event: {other:?}"),
        }
    }

    #[test]
    fn early_notifications_are_published_in_order_when_their_token_is_claimed() {
        let registry = Registry::new();
        let mut events = registry.subscribe();
        let routes = ProgressRoutes::default();
        routes.sent(ProgressToken(NumberOrString::Number(7)));
        routes.sent(ProgressToken(NumberOrString::Number(8)));
        routes.route(&registry, params(7, 1.0));
        routes.route(&registry, params(8, 5.0));
        // Token 9 was never sent: a server guessing the next call's token is ignored.
        routes.route(&registry, params(9, 777.0));
        routes.route(&registry, params(7, 2.0));
        assert!(
            events.try_recv().is_err(),
            "nothing is published before the claim"
        );
        routes.claim(&registry, ProgressToken(NumberOrString::Number(7)), "c7");
        routes.route(&registry, params(7, 3.0));
        let seen: Vec<_> = (0..3)
            .map(|_| progress_of(events.try_recv().unwrap()))
            .collect();
        assert_eq!(
            seen,
            [("c7".into(), 1.0), ("c7".into(), 2.0), ("c7".into(), 3.0)]
        );
        routes.release(&ProgressToken(NumberOrString::Number(7)));
        routes.route(&registry, params(7, 4.0));
        assert!(
            events.try_recv().is_err(),
            "a released token publishes nothing"
        );
    }

    #[test]
    fn progress_that_does_not_increase_is_dropped() {
        let registry = Registry::new();
        let mut events = registry.subscribe();
        let routes = ProgressRoutes::default();
        routes.sent(ProgressToken(NumberOrString::Number(3)));
        routes.route(&registry, params(3, 5.0));
        routes.claim(&registry, ProgressToken(NumberOrString::Number(3)), "c3");
        for progress in [3.0, 5.0, 10.0, f64::NAN, 2.0, 11.0] {
            routes.route(&registry, params(3, progress));
        }
        let mut seen = Vec::new();
        while let Ok(event) = events.try_recv() {
            seen.push(progress_of(event).1);
        }
        assert_eq!(seen, [5.0, 10.0, 11.0]);
    }

    #[test]
    fn a_token_claimed_before_its_request_is_written_is_not_kept() {
        let registry = Registry::new();
        let routes = ProgressRoutes::default();
        for token in 0..1_000 {
            let token = ProgressToken(NumberOrString::Number(token));
            routes.claim(&registry, token.clone(), "call");
            routes.sent(token.clone());
            routes.release(&token);
        }
        let routes = routes.inner.lock();
        assert!(routes.sent.is_empty());
        assert!(routes.calls.is_empty());
    }

    #[test]
    fn unclaimed_tokens_fill_a_bounded_window() {
        let registry = Registry::new();
        let routes = ProgressRoutes::default();
        for token in 0..(EARLY_NOTIFICATIONS as i64 * 4) {
            routes.sent(ProgressToken(NumberOrString::Number(token)));
            routes.route(&registry, params(token, 1.0));
        }
        let routes = routes.inner.lock();
        assert_eq!(routes.early.len(), EARLY_NOTIFICATIONS);
        assert_eq!(routes.sent.len(), EARLY_NOTIFICATIONS);
    }
}
