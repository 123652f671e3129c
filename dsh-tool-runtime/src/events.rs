//! Events published for every call.
//!
//! Subscribe with [`Registry::subscribe`](crate::Registry::subscribe). Every call publishes at most
//! one [`ToolEvent::Call`] (none when it is refused before any hook runs) and exactly one
//! [`ToolEvent::Result`]. Together they carry what a viewer needs to show the session without the
//! tools' code: arguments, both cards, the result (content, error info, `meta`), the ids that nest
//! code-mode sub-calls under their run, the agent and the timing. [`EventLog`] writes them to a
//! JSON-lines file and [`read_log`] reads one back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent_id::AgentId;
use crate::cards::{CallView, ResultView};
use crate::result::ToolResult;

mod log;
mod read;
pub use log::EventLog;
pub use read::{LogError, LoggedEvent, MAX_LOG_DEPTH, ReadLimits, read_log, read_log_with};

/// One pipeline event. Serializes as an object tagged by `"event"` (`call`, `result`,
/// `code_dispatch_start`, `code_dispatch`, `progress`, `tools_changed`, and for durable runs
/// `durable_replayed`, `durable_diverged`, `durable_parked`, `durable_decided`,
/// `durable_reverted`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolEvent {
    /// A call passed entry checks and is about to run its pre-execute hooks.
    Call {
        /// Call id.
        call_id: String,
        /// The top-level call this one belongs to (its own id for top-level calls).
        root_call_id: String,
        /// Tool name.
        name: String,
        /// Arguments as received.
        arguments: Arc<Value>,
        /// The agent, if any.
        agent: Option<AgentId>,
        /// The enclosing transport call for sub-calls.
        parent: Option<String>,
        /// The tool's pending-state card; `None` for the generic card (tool name and raw
        /// arguments).
        view: Option<CallView>,
        /// When the event was published, ms since the Unix epoch.
        at_ms: u64,
    },
    /// A call's final result (exactly one per call).
    Result {
        /// Call id.
        call_id: String,
        /// The top-level call this one belongs to (its own id for top-level calls).
        root_call_id: String,
        /// Tool name.
        name: String,
        /// The agent, if any.
        agent: Option<AgentId>,
        /// The enclosing transport call for sub-calls.
        parent: Option<String>,
        /// The result, shared with the caller.
        result: Arc<ToolResult>,
        /// The tool's completed-state card of a success; `None` for the generic card (the
        /// pending title and the raw content) and for every failure.
        view: Option<ResultView>,
        /// When the event was published, ms since the Unix epoch.
        at_ms: u64,
        /// From the call entering the pipeline to this result, in ms (monotonic clock).
        duration_ms: f64,
    },
    /// A code-mode program started a binding call (a nested call of `run_code`).
    CodeDispatchStart {
        /// The `run_code` call id.
        parent: String,
        /// The sub-call id, `<parent>:code:<n>`.
        call_id: String,
        /// Tool name.
        name: String,
    },
    /// A code-mode binding call settled.
    CodeDispatch {
        /// The `run_code` call id.
        parent: String,
        /// The sub-call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// `true` when the sub-call failed.
        is_error: bool,
    },
    /// A running call reported progress (MCP `notifications/progress`).
    Progress {
        /// The call id.
        call_id: String,
        /// Progress so far (increases with every report).
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// A human-readable status line.
        message: Option<String>,
    },
    /// A tool source replaced its set of tools (an MCP server's `tools/list` re-sync).
    ToolsChanged {
        /// The source, e.g. the MCP server name.
        source: String,
        /// The generation now live (1 for the first list; increases with every sync).
        generation: u64,
        /// The public names registered in that generation, in list order (empty after a
        /// rolled-back sync).
        tools: Vec<String>,
    },
    /// A durable run's binding call was answered from its journal instead of running.
    DurableReplayed {
        /// The `run_code` call id.
        parent: String,
        /// The durable run.
        run_id: String,
        /// The call's place in the run, from 0.
        seq: u64,
        /// `namespace.name`.
        name: String,
        /// `true` when the journaled outcome is a failure.
        is_error: bool,
        /// `true` when the call was cut off while it ran and, not being idempotent, is answered
        /// with `OUTCOME_UNKNOWN`.
        outcome_unknown: bool,
    },
    /// A resumed durable run made another call than the journaled one: it ends as
    /// `replay-diverged`.
    DurableDiverged {
        /// The `run_code` call id.
        parent: String,
        /// The durable run.
        run_id: String,
        /// Where it diverged.
        seq: u64,
        /// The journaled and the new call.
        message: String,
    },
    /// A durable run parked at a call whose pre-execute hook asked for approval.
    DurableParked {
        /// The `run_code` call id.
        parent: String,
        /// The durable run: the handle to approve or deny.
        run_id: String,
        /// The call that waits.
        seq: u64,
        /// `namespace.name`.
        name: String,
        /// The hook's reason.
        reason: Option<String>,
    },
    /// A parked run was approved or denied.
    DurableDecided {
        /// The durable run.
        run_id: String,
        /// The call that waited.
        seq: u64,
        /// `namespace.name`.
        name: String,
        /// `true` when approved.
        approved: bool,
        /// The denial's reason.
        reason: Option<String>,
    },
    /// A rollback reverted one completed call of a durable run.
    DurableReverted {
        /// The durable run.
        run_id: String,
        /// The reverted call.
        seq: u64,
        /// `namespace.name` of the reverted call.
        name: String,
        /// The tool that reverted it.
        revert: String,
        /// `true` when the revert call failed.
        is_error: bool,
    },
}

/// Where a registry's events are published: what a call's context needs to report on it,
/// without holding the registry itself. Subscribers get a broadcast channel (a slow one misses
/// the oldest); an event log gets a [`Tap`], a queue filled by the publisher itself, so it loses
/// nothing however rarely its reader is scheduled, unless [`TAP_CAPACITY`] events wait at once.
#[derive(Debug, Clone)]
#[doc(hidden)]
pub struct EventSender {
    broadcast: tokio::sync::broadcast::Sender<ToolEvent>,
    taps: Arc<Taps>,
}

/// Events one [`Tap`] holds before the publisher counts the next ones as missed.
#[doc(hidden)]
pub const TAP_CAPACITY: usize = 16_384;

/// The open taps; `open` is read on every publish without the lock.
#[derive(Debug, Default)]
struct Taps {
    open: AtomicUsize,
    next_id: AtomicU64,
    list: parking_lot::Mutex<Vec<TapSlot>>,
}

#[derive(Debug)]
struct TapSlot {
    id: u64,
    queue: std::sync::mpsc::SyncSender<ToolEvent>,
    missed: Arc<AtomicU64>,
}

/// A queue of every event published after [`EventSender::tap`], for a reader on a thread of
/// its own. Events that found the queue full are counted in `missed`. The queue ends (its
/// receiver's iteration stops after the events already queued) once [`TapHandle::close`] runs.
#[doc(hidden)]
#[derive(Debug)]
pub struct Tap {
    /// The events, in publishing order.
    pub events: std::sync::mpsc::Receiver<ToolEvent>,
    /// Events dropped because the queue was full since the reader last took this count.
    pub missed: Arc<AtomicU64>,
    /// Closes the tap.
    pub handle: TapHandle,
}

/// Where an [`EventLog`] takes its events from: the [`Registry`](crate::Registry) implements it.
/// The log names this trait rather than the registry so that the events sit below the registry
/// that publishes them.
pub trait EventSource {
    /// A queue of every event published from now on (see [`Registry::tap_events`](crate::Registry::tap_events)).
    fn tap_events(&self) -> Tap;
}

/// Closes its [`Tap`]: no event is queued after [`close`](Self::close) (or drop).
#[derive(Debug)]
#[doc(hidden)]
pub struct TapHandle {
    id: u64,
    taps: Arc<Taps>,
}

impl TapHandle {
    /// Stops queueing events for this tap.
    pub fn close(&self) {
        let mut list = self.taps.list.lock();
        let before = list.len();
        list.retain(|slot| slot.id != self.id);
        if list.len() < before {
            self.taps.open.fetch_sub(1, Ordering::Release);
        }
    }
}

impl Drop for TapHandle {
    fn drop(&mut self) {
        self.close();
    }
}

impl EventSender {
    /// A channel keeping the last `capacity` events for each subscriber.
    pub fn new(capacity: usize) -> Self {
        EventSender {
            broadcast: tokio::sync::broadcast::channel(capacity).0,
            taps: Arc::default(),
        }
    }

    /// A new subscriber, receiving the events published from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<ToolEvent> {
        self.broadcast.subscribe()
    }

    /// A queue of every event published from now on, holding up to [`TAP_CAPACITY`].
    #[doc(hidden)]
    pub fn tap(&self) -> Tap {
        let (queue, events) = std::sync::mpsc::sync_channel(TAP_CAPACITY);
        let missed = Arc::new(AtomicU64::new(0));
        let id = self.taps.next_id.fetch_add(1, Ordering::Relaxed);
        let mut list = self.taps.list.lock();
        list.push(TapSlot {
            id,
            queue,
            missed: missed.clone(),
        });
        self.taps.open.fetch_add(1, Ordering::Release);
        drop(list);
        Tap {
            events,
            missed,
            handle: TapHandle {
                id,
                taps: self.taps.clone(),
            },
        }
    }

    /// Publishes the event `event` makes, made only when someone listens.
    pub fn publish(&self, event: impl FnOnce() -> ToolEvent) {
        let tapped = self.taps.open.load(Ordering::Acquire) > 0;
        // Counting receivers takes the channel's lock: once per event.
        let subscribed = self.broadcast.receiver_count() > 0;
        if !tapped && !subscribed {
            return;
        }
        let event = event();
        if tapped {
            let list = self.taps.list.lock();
            for slot in list.iter() {
                if let Err(std::sync::mpsc::TrySendError::Full(_)) =
                    slot.queue.try_send(event.clone())
                {
                    slot.missed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if subscribed {
            // A send error only means every receiver went away meanwhile.
            let _ = self.broadcast.send(event);
        }
    }
}

/// Now, in ms since the Unix epoch (0 if the clock is before it).
#[doc(hidden)]
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use super::{EventSender, TAP_CAPACITY, ToolEvent};

    fn progress(n: usize) -> ToolEvent {
        ToolEvent::Progress {
            call_id: format!("c{n}"),
            progress: n as f64,
            total: None,
            message: None,
        }
    }

    #[test]
    fn a_tap_holds_every_event_published_while_nobody_reads_it() {
        let sender = EventSender::new(4);
        let tap = sender.tap();
        // Far past the broadcast's capacity: a subscriber would have lagged.
        let _subscriber = sender.subscribe();
        for n in 0..TAP_CAPACITY {
            sender.publish(|| progress(n));
        }
        for extra in 0..5 {
            sender.publish(|| progress(TAP_CAPACITY + extra));
        }
        tap.handle.close();
        sender.publish(|| progress(0));
        let ids: Vec<String> = tap
            .events
            .iter()
            .map(|event| match event {
                ToolEvent::Progress { call_id, .. } => call_id,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ids.len(), TAP_CAPACITY, "every event up to the capacity");
        assert_eq!(ids[0], "c0");
        assert_eq!(ids[TAP_CAPACITY - 1], format!("c{}", TAP_CAPACITY - 1));
        assert_eq!(
            tap.missed.load(std::sync::atomic::Ordering::Relaxed),
            5,
            "the events past the capacity are counted, and nothing after close"
        );
    }

    #[test]
    fn a_closed_tap_costs_the_publisher_nothing() {
        let sender = EventSender::new(4);
        let tap = sender.tap();
        drop(tap);
        let made = std::cell::Cell::new(false);
        sender.publish(|| {
            made.set(true);
            progress(0)
        });
        assert!(!made.get(), "no listener: the event is never made");
    }
}
