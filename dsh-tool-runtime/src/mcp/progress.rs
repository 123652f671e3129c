//! Progress notifications, published in the order the server sent them.
//!
//! rmcp hands each notification to the client handler on a task of its own, so two progress
//! notifications of one call can reach the handler in either order on a multi-threaded runtime.
//! [`ProgressTap`] therefore reads them where rmcp reads the transport — one message after the
//! other — and publishes each as [`ToolEvent::Progress`] before rmcp sees it.

use std::collections::{HashMap, VecDeque};
use std::sync::Weak;

use parking_lot::Mutex;
use rmcp::RoleClient;
use rmcp::model::{
    ProgressNotificationParam, ProgressToken, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::connection::Link;
use crate::events::ToolEvent;
use crate::registry::Registry;

/// Notifications kept for tokens not claimed yet. rmcp picks a call's token while sending it, so
/// the answer's first notifications can be read before [`ProgressRoutes::claim`] runs; a server
/// sending tokens nobody asked for only ever fills this bounded window.
const EARLY_NOTIFICATIONS: usize = 256;

/// Progress token → call id of the calls in flight, plus notifications read before their call
/// claimed its token.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    inner: Mutex<Routes>,
}

#[derive(Default)]
struct Routes {
    calls: HashMap<ProgressToken, String>,
    early: VecDeque<ProgressNotificationParam>,
}

impl ProgressRoutes {
    /// Routes `token`'s notifications to `call_id` from now on, publishing first those already
    /// read for it, in their order.
    pub(crate) fn claim(&self, registry: &Registry, token: ProgressToken, call_id: &str) {
        let mut routes = self.inner.lock();
        let early = std::mem::take(&mut routes.early);
        for params in early {
            if params.progress_token == token {
                publish(registry, call_id, params);
            } else {
                routes.early.push_back(params);
            }
        }
        routes.calls.insert(token, call_id.to_owned());
    }

    /// Stops routing `token` (its call has settled).
    pub(crate) fn release(&self, token: &ProgressToken) {
        self.inner.lock().calls.remove(token);
    }

    /// Publishes one notification read from the transport, or keeps it until its token is
    /// claimed.
    fn route(&self, registry: &Registry, params: ProgressNotificationParam) {
        let mut routes = self.inner.lock();
        match routes.calls.get(&params.progress_token) {
            Some(call_id) => publish(registry, call_id, params),
            None => {
                if routes.early.len() == EARLY_NOTIFICATIONS {
                    routes.early.pop_front();
                }
                routes.early.push_back(params);
            }
        }
    }
}

fn publish(registry: &Registry, call_id: &str, params: ProgressNotificationParam) {
    registry.publish(|| ToolEvent::Progress {
        call_id: call_id.to_owned(),
        progress: params.progress,
        total: params.total,
        message: params.message,
    });
}

/// A client transport that publishes progress notifications as it reads them and passes every
/// message on unchanged.
pub(crate) struct ProgressTap<T> {
    pub(crate) inner: T,
    pub(crate) link: Weak<Link>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressTap<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
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
        routes.route(&registry, params(7, 1.0));
        routes.route(&registry, params(8, 5.0));
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
    fn unclaimed_tokens_fill_a_bounded_window() {
        let registry = Registry::new();
        let routes = ProgressRoutes::default();
        for token in 0..(EARLY_NOTIFICATIONS as i64 * 4) {
            routes.route(&registry, params(token, 1.0));
        }
        assert_eq!(routes.inner.lock().early.len(), EARLY_NOTIFICATIONS);
    }
}
