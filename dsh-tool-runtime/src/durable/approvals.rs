//! The approvals of durable runs on Restate: the virtual object `DurableApprovals`, keyed by a
//! run's key, holds the approval a parked run waits for. The run waits on a Restate awakeable;
//! `approve` and `deny` resolve it (`resolve_awakeable`), which Restate journals in the run's
//! invocation and then resumes it. Restate's object state and awakeables are the whole
//! mechanism: nothing else records or coordinates approvals.

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};

/// The Restate virtual object of approvals: `POST /DurableApprovals/{run key}/pending`,
/// `.../approve` and `.../deny` (body `{"reason": "..."}`) on the ingress.
pub const APPROVALS: &str = "DurableApprovals";

/// At most this many bytes of a waiting call's canonical arguments are kept in its approval.
pub(crate) const SHOWN_ARGS_BYTES: usize = 2048;

/// At most this many bytes of a denial's reason.
const MAX_REASON_BYTES: usize = 4096;

/// The approval a parked run waits for, as `pending` answers it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pending {
    /// The run's key (the object's key).
    pub(crate) run: String,
    /// The Restate invocation running the program.
    pub(crate) invocation: String,
    /// The awakeable the run waits on.
    pub(crate) awakeable: String,
    /// The call's place in the run, from 0.
    pub(crate) seq: u64,
    /// `namespace.name`.
    pub(crate) tool: String,
    /// The canonical arguments, cut to [`SHOWN_ARGS_BYTES`] (then ending in `…`).
    pub(crate) args: String,
    /// The hook's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

/// The answer the awakeable is resolved with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub(crate) enum Decision {
    /// Run the call.
    Approved,
    /// The call fails with this reason (code `DENIED`).
    Denied {
        /// What the program reads.
        reason: String,
    },
}

/// A decision, as `approve` and `deny` answer it (and the object keeps, so a second answer is
/// told the call was decided already).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Decided {
    run: String,
    seq: u64,
    tool: String,
    #[serde(flatten)]
    decision: Decision,
}

/// The body of `deny`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Denial {
    reason: String,
}

/// `args` cut to at most [`SHOWN_ARGS_BYTES`] bytes on a character boundary.
pub(crate) fn bounded(args: &str) -> String {
    if args.len() <= SHOWN_ARGS_BYTES {
        return args.to_owned();
    }
    let mut end = SHOWN_ARGS_BYTES - '…'.len_utf8();
    while !args.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &args[..end])
}

const PENDING: &str = "pending";
const DECIDED: &str = "decided";

/// The object, in a module of its own: the macro also generates clients for it, which are not
/// part of this crate's documented API.
#[allow(missing_docs)]
pub(crate) mod object {
    use super::*;

    pub(crate) struct DurableApprovals;

    #[restate_sdk::object(name = "DurableApprovals")]
    impl DurableApprovals {
        /// Records the approval the run waits for (sent by the run itself, not callable
        /// through the ingress).
        #[handler(name = "park", ingress_private)]
        async fn park(&self, ctx: ObjectContext<'_>, pending: Json<Pending>) -> HandlerResult<()> {
            ctx.set(PENDING, pending);
            ctx.clear(DECIDED);
            Ok(())
        }

        /// The approval waiting, or `null`.
        #[handler(name = "pending")]
        async fn pending(
            &self,
            ctx: SharedObjectContext<'_>,
        ) -> HandlerResult<Json<Option<Pending>>> {
            Ok(Json(
                ctx.get::<Json<Pending>>(PENDING)
                    .await?
                    .map(Json::into_inner),
            ))
        }

        /// Approves the waiting call: the run goes on and makes it.
        #[handler(name = "approve")]
        async fn approve(&self, ctx: ObjectContext<'_>) -> HandlerResult<Json<Decided>> {
            decide(&ctx, Decision::Approved).await
        }

        /// Denies the waiting call: the program reads a failure with code `DENIED` and
        /// `reason`, and goes on.
        #[handler(name = "deny")]
        async fn deny(
            &self,
            ctx: ObjectContext<'_>,
            denial: Json<Denial>,
        ) -> HandlerResult<Json<Decided>> {
            let reason = denial.into_inner().reason;
            if reason.trim().is_empty() || reason.len() > MAX_REASON_BYTES {
                return Err(TerminalError::new_with_code(
                    400,
                    format!("reason: expected 1 to {MAX_REASON_BYTES} bytes of text"),
                )
                .into());
            }
            decide(&ctx, Decision::Denied { reason }).await
        }
    }

    /// Resolves the pending approval's awakeable with `decision`. Errors (code 404): nothing
    /// is pending under this key.
    async fn decide(ctx: &ObjectContext<'_>, decision: Decision) -> HandlerResult<Json<Decided>> {
        let Some(Json(pending)) = ctx.get::<Json<Pending>>(PENDING).await? else {
            let run = ctx.key();
            let message = match ctx.get::<Json<Decided>>(DECIDED).await? {
                Some(Json(decided)) => format!(
                    "run {run:?} has no approval pending: call #{} {} was {} already",
                    decided.seq,
                    decided.tool,
                    match decided.decision {
                        Decision::Approved => "approved",
                        Decision::Denied { .. } => "denied",
                    }
                ),
                None => format!(
                    "run {run:?} has no approval pending (no such run, or it is not parked)"
                ),
            };
            return Err(TerminalError::new_with_code(404, message).into());
        };
        ctx.resolve_awakeable(&pending.awakeable, Json(decision.clone()));
        let decided = Decided {
            run: pending.run,
            seq: pending.seq,
            tool: pending.tool,
            decision,
        };
        ctx.clear(PENDING);
        ctx.set(DECIDED, Json(decided.clone()));
        Ok(Json(decided))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_cut_on_a_character_boundary() {
        assert_eq!(bounded("{\"a\":1}"), "{\"a\":1}");
        let long = "é".repeat(SHOWN_ARGS_BYTES);
        let cut = bounded(&long);
        assert!(cut.len() <= SHOWN_ARGS_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
    }
}
