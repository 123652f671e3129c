//! Admitting a run, shared by the backends that queue for a slot: its binding names checked, a
//! cancelled run or a program over the size limit refused before it starts, and the wait for one of `max_concurrent_runs` slots,
//! which cancellation and disposal end.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::names::validate_namespaces;
use super::strip::oversized;
use super::{CodeRuntimeError, FailureKind, RunOutcome, RunRequest};

/// A slot for `request`, or the outcome it ends with instead (`abort`, from `early`).
///
/// # Errors
/// [`CodeRuntimeError::InvalidBindings`] for unusable binding names, and
/// [`CodeRuntimeError::Disposed`] when the slots are closed.
pub async fn admit(
    request: &RunRequest,
    slots: &Arc<Semaphore>,
    disposed: &CancellationToken,
    early: impl Fn(FailureKind, String) -> RunOutcome,
) -> Result<Result<OwnedSemaphorePermit, RunOutcome>, CodeRuntimeError> {
    validate_namespaces(&request.bindings).map_err(CodeRuntimeError::InvalidBindings)?;
    let abort = |message: &str| Ok(Err(early(FailureKind::Abort, message.to_owned())));
    if request.signal.is_cancelled() {
        return abort("run aborted before it started");
    }
    // Refused before it takes a slot: one size limit for every language.
    if let Some(refusal) = oversized(&request.program) {
        return Ok(Err(early(FailureKind::Exception, refusal)));
    }
    // Waiting for a slot is where a run may queue: cancellation and disposal end it there.
    let permit = tokio::select! {
        biased;
        _ = request.signal.cancelled() => return abort("run aborted while queued"),
        _ = disposed.cancelled() => return abort("runtime disposed"),
        permit = Arc::clone(slots).acquire_owned() => permit,
    };
    permit.map(Ok).map_err(|_| CodeRuntimeError::Disposed)
}
