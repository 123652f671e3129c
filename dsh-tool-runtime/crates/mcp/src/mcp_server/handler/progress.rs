//! A plain call's progress, forwarded to its client as progress notifications.

use rmcp::model::{Notification, ProgressNotificationParam, ProgressToken, ServerNotification};
use rmcp::{Peer, RoleServer};
use tokio::sync::broadcast::error::RecvError;
use tracing::{Instrument, Span};

use crate::call::ToolCall;
use crate::events::ToolEvent;
use crate::mcp_server::results::progress_of;
use crate::registry::Registry;
use crate::result::ToolResult;
use crate::telemetry;

/// Runs one call, forwarding its progress to `token` until it settles. Events published
/// before the result are all sent before it, so the client sees them in order.
pub(super) async fn execute_with_progress(
    registry: Registry,
    call: ToolCall,
    token: ProgressToken,
    peer: Peer<RoleServer>,
    outbound: telemetry::Outbound,
) -> ToolResult {
    let call_id = call.call_id.clone();
    // The notifications' spans are under the request's, also when the call runs on a task.
    let parent = call.trace_parent.clone().unwrap_or_else(Span::current);
    let to = Progress {
        token,
        peer,
        outbound,
        parent,
    };
    let mut events = registry.subscribe();
    let execution = registry.execute(call);
    tokio::pin!(execution);
    let mut sent = 0u64;
    let result = loop {
        tokio::select! {
            biased;
            result = &mut execution => break result,
            event = events.recv() => match event {
                Ok(event) => forward(&event, &call_id, &to, &mut sent).await,
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break execution.await,
            },
        }
    };
    while let Ok(event) = events.try_recv() {
        forward(&event, &call_id, &to, &mut sent).await;
    }
    result
}

/// Where a call's progress goes: the client's token, and the session and span the
/// notifications' spans name.
struct Progress {
    token: ProgressToken,
    peer: Peer<RoleServer>,
    outbound: telemetry::Outbound,
    parent: Span,
}

/// Sends one progress notification for `event` when it belongs to the call `call_id`.
async fn forward(event: &ToolEvent, call_id: &str, to: &Progress, sent: &mut u64) {
    let Some((progress, total, message)) = progress_of(event, call_id) else {
        return;
    };
    *sent += 1;
    let mut params =
        ProgressNotificationParam::new(to.token.clone(), progress.unwrap_or(*sent as f64));
    if let Some(total) = total {
        params = params.with_total(total);
    }
    if let Some(message) = message {
        params = params.with_message(message);
    }
    let notification = ServerNotification::ProgressNotification(Notification::new(params));
    // A client that went away cannot be told; the call still settles and answers.
    let _ = telemetry::notify(&to.peer, &to.outbound, notification)
        .instrument(to.parent.clone())
        .await;
}
