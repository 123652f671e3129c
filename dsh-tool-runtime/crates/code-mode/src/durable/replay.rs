//! The journal of one run as its session sees it: each call the program makes is checked
//! against the journaled one at its sequence number and answered from it, or run live:
//! journaled as started before it runs, and its outcome journaled before the run's next record
//! ([`JournalStore::put_deferred`](super::JournalStore::put_deferred)).

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{
    CallOutcome, Claim, EntryState, JOURNAL_FAILED, JournalEntry, JournalError, JournalStore,
    OUTCOME_UNKNOWN, RunStatus,
};
use crate::code_runtime::{
    Admission, BindingError, CallFuture, FailureKind, MakeCall, ParkSlot, RunJournal,
};
use crate::events::ToolEvent;

/// At most this many characters of each call's arguments go into a divergence message.
const SHOWN_ARGS: usize = 300;

/// The journal of one durable run, shared by its session (which admits calls) and `run_code`
/// (which reads how the run ended).
pub struct Replay {
    store: Arc<dyn JournalStore>,
    run_id: String,
    /// The `run_code` call id, for events.
    parent: String,
    entries: Vec<JournalEntry>,
    /// `namespace.name` of the calls that may run again when their outcome is unknown.
    idempotent: HashSet<String>,
    /// `namespace.name` of the calls that change nothing: journaled once, when finished.
    read_only: HashSet<String>,
    publish: Arc<dyn Fn(ToolEvent) + Send + Sync>,
    /// The run's own signal: a park ends the run through it.
    run_signal: CancellationToken,
    state: Mutex<State>,
    /// This process's claim on the run, released when the run ends (or the replay is dropped).
    claim: Mutex<Option<Claim>>,
    /// The bound of the run's journaled bytes.
    max_bytes: u64,
    /// The `run_code` call's span: calls answered from the journal get spans under it.
    span: tracing::Span,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The store is any `JournalStore`, the publisher a closure.
        f.debug_struct("Replay")
            .field("run_id", &self.run_id)
            .field("parent", &self.parent)
            .field("entries", &self.entries.len())
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    /// The status a park left.
    parked: Option<RunStatus>,
    /// Calls admitted so far.
    admitted: u64,
    /// The stored size of each journaled call, by sequence number, and their sum.
    sizes: Vec<u64>,
    bytes: u64,
    /// Why the run ended at its journal's bound, when an outcome did not fit.
    over: Option<String>,
}

/// The tools whose calls a run treats apart, by `namespace.name`.
#[derive(Debug)]
pub struct ToolKinds {
    /// May run again when their outcome is unknown.
    pub idempotent: HashSet<String>,
    /// Change nothing: journaled once, when finished.
    pub read_only: HashSet<String>,
}

impl RunJournal for Replay {
    fn admit(self: Arc<Self>, seq: u64, tool: String, args: &Value, call: MakeCall) -> Admission {
        match self.check(seq, &tool, args) {
            Admit::End(kind, message) => Admission::End(kind, message),
            Admit::Answer(result) => Admission::Answer(result),
            Admit::Unknown(answer) => Admission::Run(answer),
            Admit::Live(slot) => {
                let made = call(slot.clone());
                Admission::Run(self.live(seq, tool, args, slot, made))
            }
        }
    }
}

/// What to do with a call the program made.
enum Admit {
    /// It differs from the journaled call (`replay-diverged`), or its entry would pass the
    /// run's bound of journaled bytes (`journal-limit`): the run ends with this.
    End(FailureKind, String),
    /// Answered from the journal.
    Answer(Result<Value, BindingError>),
    /// Started before and its tool is not idempotent: answered `OUTCOME_UNKNOWN` (journaled by
    /// the future).
    Unknown(CallFuture),
    /// Run live: the call gets this slot, and its future goes through [`Replay::live`].
    Live(ParkSlot),
}

impl Replay {
    /// The journal `entries` of the run `claim` holds, ready to answer the run's calls in
    /// order; the run's journal may hold `max_bytes`.
    pub fn new(
        claim: Claim,
        exec: &crate::call::ToolExec,
        entries: Vec<JournalEntry>,
        kinds: ToolKinds,
        publish: Arc<dyn Fn(ToolEvent) + Send + Sync>,
        run_signal: CancellationToken,
        max_bytes: u64,
    ) -> Self {
        let sizes: Vec<u64> = entries.iter().map(stored_len).collect();
        let state = State {
            bytes: sizes.iter().sum(),
            sizes,
            ..State::default()
        };
        Replay {
            store: Arc::clone(&claim.store),
            run_id: claim.run_id.clone(),
            parent: exec.call_id().to_owned(),
            entries,
            idempotent: kinds.idempotent,
            read_only: kinds.read_only,
            publish,
            run_signal,
            state: Mutex::new(state),
            claim: Mutex::new(Some(claim)),
            max_bytes,
            span: exec.span().clone(),
        }
    }

    /// The call number `seq` to `tool` (`namespace.name`) with `args`.
    fn check(self: &Arc<Self>, seq: u64, tool: &str, args: &Value) -> Admit {
        self.state.lock().admitted = seq + 1;
        let canonical = crate::json::compact(args, true);
        let Some(entry) = usize::try_from(seq).ok().and_then(|i| self.entries.get(i)) else {
            return self.live_within_bound(seq, tool, canonical, false);
        };
        if entry.tool != tool || entry.args != canonical {
            let message = format!(
                "call #{seq} diverged from the journal: journaled {}({}), now {tool}({}); the \
                 program must make the same calls in the same order when it runs again (no \
                 branching on clocks or randomness)",
                entry.tool,
                shown(&entry.args),
                shown(&canonical)
            );
            (self.publish)(ToolEvent::DurableDiverged {
                parent: self.parent.clone(),
                run_id: self.run_id.clone(),
                seq,
                message: message.clone(),
            });
            return Admit::End(FailureKind::ReplayDiverged, message);
        }
        match &entry.state {
            EntryState::Finished { outcome } | EntryState::Reverted { outcome, .. } => {
                let code = match outcome {
                    CallOutcome::Ok { .. } => Ok(()),
                    CallOutcome::Err { code, .. } => Err(code.as_deref()),
                };
                self.replayed(seq, tool, code, false);
                Admit::Answer(outcome.to_result())
            }
            EntryState::Approved => self.live_within_bound(seq, tool, canonical, true),
            EntryState::Parked { .. } => self.live_within_bound(seq, tool, canonical, false),
            EntryState::Started if self.idempotent.contains(tool) => {
                self.live_within_bound(seq, tool, canonical, false)
            }
            EntryState::Started => {
                self.replayed(seq, tool, Err(Some(OUTCOME_UNKNOWN)), true);
                let error = BindingError::new(format!(
                    "the outcome of {tool} is unknown: the run was cut off while the call ran, \
                     and the tool is not idempotent, so it is not run again"
                ))
                .with_code(OUTCOME_UNKNOWN);
                let replay = Arc::clone(self);
                let entry = entry.clone();
                Admit::Unknown(Box::pin(async move {
                    let result = Err(error);
                    replay.finish(entry, &result).await
                }))
            }
        }
    }

    /// The call `seq` run live with a slot `approved` or not, unless its entry as started
    /// would take the run's journal past its bound: then the run ends and it is not made.
    fn live_within_bound(&self, seq: u64, tool: &str, canonical: String, approved: bool) -> Admit {
        let entry = JournalEntry {
            seq,
            tool: tool.to_owned(),
            args: canonical,
            state: EntryState::Started,
        };
        match self.reserve(&entry) {
            Ok(()) => Admit::Live(ParkSlot::new(approved)),
            Err(used) => Admit::End(
                FailureKind::JournalLimit,
                format!(
                    "journal limit reached: call #{seq} ({tool}) would take the run's journal \
                     past {} bytes ({used} in use); it was not made",
                    self.max_bytes
                ),
            ),
        }
    }

    /// Counts `entry` as the stored form of its call; the bytes in use when it does not fit
    /// the run's bound (nothing is counted then).
    fn reserve(&self, entry: &JournalEntry) -> Result<(), u64> {
        let size = stored_len(entry);
        let mut state = self.state.lock();
        let index = usize::try_from(entry.seq).unwrap_or(usize::MAX);
        let before = state.sizes.get(index).copied().unwrap_or(0);
        let after = state.bytes - before + size;
        if after > self.max_bytes && size > before {
            return Err(state.bytes);
        }
        if state.sizes.len() <= index {
            state.sizes.resize(index.saturating_add(1), 0);
        }
        state.sizes[index] = size;
        state.bytes = after;
        Ok(())
    }

    /// The live call `seq` (`call`, made with `slot`): journaled as started first, then as
    /// finished (deferred: durable before the run's next record). A call of a read-only tool is journaled
    /// only as finished: one record instead of two, and cut off before it, it runs again on
    /// resume exactly as a started one of a read-only tool would. A call that parked the run
    /// ends it instead: the future never resolves, the run's signal is cancelled.
    fn live(
        self: &Arc<Self>,
        seq: u64,
        tool: String,
        args: &Value,
        slot: ParkSlot,
        call: CallFuture,
    ) -> CallFuture {
        let replay = Arc::clone(self);
        let entry = JournalEntry {
            seq,
            tool,
            args: crate::json::compact(args, true),
            state: EntryState::Started,
        };
        Box::pin(async move {
            // Journaled as started before it runs (again, for an approved or idempotent call):
            // a crash while it runs leaves its outcome unknown. A read-only call writes no
            // record first, so it waits for the outcomes kept before it to be durable: a host
            // cut off while it runs still finds them.
            let first = if replay.read_only.contains(&entry.tool) {
                replay.store.settle(&replay.run_id).await
            } else {
                replay.store.put(&replay.run_id, &entry).await
            };
            if let Err(error) = first {
                return Err(journal_failed(&error));
            }
            let result = call.await;
            if let Some(reason) = slot.parked() {
                replay.park(entry, reason).await;
                return std::future::pending().await;
            }
            replay.finish(entry, &result).await
        })
    }

    /// Journals `entry` as finished with `result` (deferred); the program sees `result`, or
    /// the journal's failure when the store refused it at once.
    async fn finish(
        &self,
        mut entry: JournalEntry,
        result: &Result<Value, BindingError>,
    ) -> Result<Value, BindingError> {
        // Once parked, the run is over: the calls still settling beside the parked one are left
        // as started (their outcome, if any, is unknown to the resumed run).
        if self.state.lock().parked.is_some() {
            return std::future::pending().await;
        }
        entry.state = EntryState::Finished {
            outcome: CallOutcome::of(result),
        };
        if let Err(used) = self.reserve(&entry) {
            // The outcome is not recorded: the call stays started (its outcome unknown to a
            // rollback) and the run ends, as a call past the bound does.
            let message = format!(
                "journal limit reached: the outcome of call #{} ({}) would take the run's \
                 journal past {} bytes ({used} in use); it was not recorded, and the call's \
                 outcome stays unknown",
                entry.seq, entry.tool, self.max_bytes
            );
            self.state.lock().over.get_or_insert(message);
            self.run_signal.cancel();
            return std::future::pending().await;
        }
        // Deferred: the program may see its outcome before it is durable, since nothing
        // outside the run acts on it before the run's next record, which the store writes
        // after it.
        match self.store.put_deferred(&self.run_id, &entry).await {
            Ok(()) => result.clone(),
            Err(error) => Err(journal_failed(&error)),
        }
    }

    async fn park(&self, mut entry: JournalEntry, reason: Option<String>) {
        let status = RunStatus::Parked {
            seq: entry.seq,
            tool: entry.tool.clone(),
            args: entry.args.clone(),
            reason: reason.clone(),
        };
        {
            let mut state = self.state.lock();
            if state.parked.is_some() {
                return;
            }
            state.parked = Some(status);
        }
        (self.publish)(ToolEvent::DurableParked {
            parent: self.parent.clone(),
            run_id: self.run_id.clone(),
            seq: entry.seq,
            name: entry.tool.clone(),
            reason: reason.clone(),
        });
        entry.state = EntryState::Parked { reason };
        // A failed write leaves the call as started: the resumed run then reads its outcome as
        // unknown instead of asking again.
        let _ = self.store.put(&self.run_id, &entry).await;
        self.run_signal.cancel();
    }

    /// A call answered from the journal: its event and its span (`code`: the failure's code).
    fn replayed(&self, seq: u64, tool: &str, code: Result<(), Option<&str>>, unknown: bool) {
        let is_error = code.is_err();
        // `tool` is `namespace.name`: the span names the tool as the registry does.
        crate::telemetry::replayed_call(
            &self.span,
            tool.split_once('.').map_or(tool, |(_, name)| name),
            &format!("{}:journal:{seq}", self.parent),
            code,
        );
        (self.publish)(ToolEvent::DurableReplayed {
            parent: self.parent.clone(),
            run_id: self.run_id.clone(),
            seq,
            name: tool.to_owned(),
            is_error,
            outcome_unknown: unknown,
        });
    }

    /// Gives up this process's claim on the run (once its end is recorded).
    pub async fn release(&self) -> Result<(), JournalError> {
        let claim = self.claim.lock().take();
        match claim {
            Some(claim) => claim.release().await,
            None => Ok(()),
        }
    }

    /// Why the run ended at its journal's bound after a call, if it did.
    pub fn over_limit(&self) -> Option<String> {
        self.state.lock().over.clone()
    }

    /// The status a park left, if the run parked.
    pub fn parked(&self) -> Option<RunStatus> {
        self.state.lock().parked.clone()
    }

    /// How many journaled calls the run did not make again (a program that ended early).
    pub fn unused(&self) -> u64 {
        let admitted = self.state.lock().admitted;
        u64::try_from(self.entries.len())
            .unwrap_or(u64::MAX)
            .saturating_sub(admitted)
    }
}

fn journal_failed(error: &JournalError) -> BindingError {
    BindingError::new(format!("the call could not be journaled: {error}"))
        .with_code(error.code_or(JOURNAL_FAILED))
}

/// The bytes `entry` takes as stored: its tool, its canonical arguments and its state as JSON.
pub fn stored_len(entry: &JournalEntry) -> u64 {
    (entry.tool.len() + entry.args.len()) as u64 + crate::json::serialized_len(&entry.state)
}

pub fn shown(args: &str) -> String {
    let mut chars = args.chars();
    let mut out: String = chars.by_ref().take(SHOWN_ARGS).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}
