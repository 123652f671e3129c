//! The journal a run's session admits its binding calls through ([`RunJournal`]): the seam
//! between the session every code runtime shares (`calls.rs`) and the stores that make a run
//! durable — a [`JournalStore`](crate::durable::JournalStore)'s replay (`durable/replay.rs`)
//! and Restate's journaled steps (`durable/steps.rs`). The session numbers the calls and makes
//! them; the journal decides whether a call runs, is answered from the journal, or ends the run.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::{BindingError, FailureKind};
use crate::hooks::Park;

/// One binding call's outcome, as the program reads it.
pub(crate) type CallFuture = BoxFuture<'static, Result<Value, BindingError>>;

/// Makes one binding call, its pre-execute `Ask` meeting the slot: a journal makes it when the
/// call runs live, and again (with an approved slot) when the person approves the call whose
/// `Ask` parked the run.
pub type MakeCall = Arc<dyn Fn(ParkSlot) -> CallFuture + Send + Sync>;

/// What the journal makes of a call the program made.
pub(crate) enum Admission {
    /// The run ends with this failure (a divergence from the journal, the journal's bound).
    End(FailureKind, String),
    /// Answered at once, from the journal.
    Answer(Result<Value, BindingError>),
    /// Under way: run live (and journaled), or answered by the journal later.
    Run(CallFuture),
}

/// The journal of one durable run, as its session sees it.
pub(crate) trait RunJournal: Send + Sync {
    /// The call number `seq` (from 0, in the order the program made its calls) to `tool`
    /// (`namespace.name`) with `args`, made by `call` if it runs.
    fn admit(self: Arc<Self>, seq: u64, tool: String, args: &Value, call: MakeCall) -> Admission;
}

/// Where a binding call of a durable run meets a pre-execute `Ask`: approved ahead (the run
/// resumes after an approval), or parked (the run ends and waits for one).
#[derive(Debug, Clone)]
pub struct ParkSlot {
    approved: bool,
    parked: Arc<parking_lot::Mutex<Option<Option<String>>>>,
}

impl ParkSlot {
    /// A slot for one call; `approved` when its `Ask` was answered already.
    pub(crate) fn new(approved: bool) -> Self {
        ParkSlot {
            approved,
            parked: Arc::default(),
        }
    }

    /// The park's reason, when the call parked.
    pub(crate) fn parked(&self) -> Option<Option<String>> {
        self.parked.lock().clone()
    }
}

impl Park for ParkSlot {
    fn ask(&self, reason: Option<String>) -> bool {
        if !self.approved {
            *self.parked.lock() = Some(reason);
        }
        self.approved
    }
}
