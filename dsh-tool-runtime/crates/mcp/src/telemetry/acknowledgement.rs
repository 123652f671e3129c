//! The `CLIENT` span of the `notifications/subscriptions/acknowledged` a stdio server sends.
//!
//! rmcp sends the acknowledgement of a `subscriptions/listen` stream itself, before the
//! handler's `listen` (and so the request's `SERVER` span) runs, and gives no hook to set its
//! `_meta`. Over stdio the server's own transport sees it go: [`Acknowledgements`] makes its span
//! there, a child of the trace context in the listen request's `_meta` (so a sibling of the
//! request's `SERVER` span), and puts the span's context in the acknowledgement's `_meta`, as
//! for every other notification. Over streamable HTTP rmcp writes it to the response itself.

use std::collections::HashMap;

use rmcp::model::{GetMeta, MetaObject, RequestId, ServerNotification};
use tracing::Span;

use super::server::{Outbound, outbound_span};
use super::{PIPE, extract, inject, server_notification_method};

/// Most listen requests kept waiting for their acknowledgement: a client that opens streams
/// the server never acknowledges cannot grow the map past it.
const PENDING: usize = 1024;

/// The `_meta` keys of a trace context (W3C Trace Context, as MCP carries it).
const TRACE_CONTEXT: [&str; 2] = ["traceparent", "tracestate"];

/// The `subscriptions/listen` requests a stdio server read and has not acknowledged yet: the
/// trace context and the protocol version of each, for its acknowledgement's span.
#[derive(Debug, Default)]
pub(crate) struct Acknowledgements {
    pending: HashMap<RequestId, (MetaObject, Option<String>)>,
}

impl Acknowledgements {
    /// A listen request `id` read, with its `_meta` (`meta`) and the version it names.
    pub(crate) fn listening(&mut self, id: &RequestId, meta: &MetaObject, version: Option<String>) {
        if self.pending.len() >= PENDING {
            return;
        }
        let mut context = MetaObject::default();
        for key in TRACE_CONTEXT {
            if let Some(value) = meta.0.get(key) {
                context.0.insert(key.to_owned(), value.clone());
            }
        }
        self.pending.insert(id.clone(), (context, version));
    }

    /// The listen request `id` was answered or cancelled: no acknowledgement follows.
    pub(crate) fn ended(&mut self, id: &RequestId) {
        self.pending.remove(id);
    }

    /// The span of `notification`, being sent, when it acknowledges a listen request read: a
    /// `CLIENT` span under the request's trace context, its own context put in the
    /// notification's `_meta`. It ends when the caller drops it, once the notification is
    /// written.
    pub(crate) fn acknowledging(&mut self, notification: &mut ServerNotification) -> Option<Span> {
        if !matches!(
            notification,
            ServerNotification::SubscriptionsAcknowledgedNotification(_)
        ) {
            return None;
        }
        let id = notification.get_meta().subscription_id()?;
        let (context, version) = self.pending.remove(&id)?;
        let span = outbound_span(
            server_notification_method(notification),
            &Outbound {
                protocol_version: version,
                session: None,
                transport: PIPE,
                http_version: None,
            },
        );
        extract(&span, &context);
        inject(&span, &mut notification.get_meta_mut().0);
        Some(span)
    }
}
