//! The approvals of durable runs on Restate: the virtual object `DurableApprovals`, keyed by a
//! run's key, holds the approval a parked run waits for. The run waits on a Restate awakeable;
//! `approve` and `deny` resolve it (`resolve_awakeable`), which Restate journals in the run's
//! invocation and then resumes it. Restate's object state and awakeables are the whole
//! mechanism: nothing else records or coordinates approvals.
//!
//! `approve` and `deny` take a continuation signed with the deployment's secret
//! ([`crate::DurableExt::set_continuation_secret`](crate::DurableExt::set_continuation_secret)) for exactly
//! the waiting call ([`ContinuationSecret::sign_for_owner`](super::ContinuationSecret)); `pending`
//! shows the waiting call but neither the awakeable nor the invocation, so reaching the ingress
//! is not enough to decide a run.

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};

use super::continuation::{Presenter, args_digest};
use super::{ContinuationError, Principal};
use crate::durable::run::DurableExt;
use crate::registry::Registry;

/// The Restate virtual object of approvals: `POST /DurableApprovals/{run key}/pending`,
/// `.../approve` and `.../deny` (body `{"reason": "..."}`) on the ingress.
pub const APPROVALS: &str = "DurableApprovals";

/// At most this many bytes of a waiting call's canonical arguments are kept in its approval.
pub const SHOWN_ARGS_BYTES: usize = 2048;

/// At most this many bytes of a denial's reason.
const MAX_REASON_BYTES: usize = 4096;

/// The approval a parked run waits for, as `DurableApprovals/<key>/pending` answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The run's key.
    pub run: String,
    /// The waiting call's place in the run, from 0.
    pub seq: u64,
    /// Its tool, `namespace.name`.
    pub tool: String,
    /// Its canonical arguments, cut to 2 KB (then ending in `…`).
    pub args: String,
    /// SHA-256 (hex) of its whole canonical arguments: what a continuation names.
    pub digest: String,
    /// The hook's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The approval a parked run waits for, as the object keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    /// The run's key (the object's key).
    pub run: String,
    /// The Restate invocation running the program.
    pub invocation: String,
    /// The awakeable the run waits on.
    pub awakeable: String,
    /// The call's place in the run, from 0.
    pub seq: u64,
    /// `namespace.name`.
    pub tool: String,
    /// The canonical arguments, cut to [`SHOWN_ARGS_BYTES`] (then ending in `…`).
    pub args: String,
    /// SHA-256 (hex) of the whole canonical arguments.
    pub digest: String,
    /// The hook's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Pending {
    /// The approval for the call `seq` (`tool`, canonical `args`) of run `run`, waiting on
    /// `awakeable` of `invocation`.
    pub fn new(
        run: &str,
        invocation: &str,
        awakeable: String,
        seq: u64,
        tool: &str,
        args: &str,
        reason: Option<String>,
    ) -> Self {
        Pending {
            run: run.to_owned(),
            invocation: invocation.to_owned(),
            awakeable,
            seq,
            tool: tool.to_owned(),
            args: bounded(args),
            digest: args_digest(args),
            reason,
        }
    }

    /// What `pending` shows: neither the awakeable nor the invocation.
    fn shown(self) -> PendingApproval {
        PendingApproval {
            run: self.run,
            seq: self.seq,
            tool: self.tool,
            args: self.args,
            digest: self.digest,
            reason: self.reason,
        }
    }
}

/// The answer the awakeable is resolved with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
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
pub struct Decided {
    run: String,
    seq: u64,
    tool: String,
    #[serde(flatten)]
    decision: Decision,
}

/// The body of `approve`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Approval {
    continuation: String,
}

/// The body of `deny`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Denial {
    continuation: String,
    reason: String,
}

/// `args` cut to at most [`SHOWN_ARGS_BYTES`] bytes on a character boundary.
fn bounded(args: &str) -> String {
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
pub mod object {
    use super::*;

    #[derive(Debug)]
    pub struct DurableApprovals {
        /// Whose secret checks continuations.
        pub registry: Registry,
    }

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
        ) -> HandlerResult<Json<Option<PendingApproval>>> {
            Ok(Json(
                ctx.get::<Json<Pending>>(PENDING)
                    .await?
                    .map(|pending| pending.into_inner().shown()),
            ))
        }

        /// Approves the waiting call the continuation names: the run goes on and makes it.
        #[handler(name = "approve")]
        async fn approve(
            &self,
            ctx: ObjectContext<'_>,
            approval: Json<Approval>,
        ) -> HandlerResult<Json<Decided>> {
            let continuation = approval.into_inner().continuation;
            decide(&ctx, &self.registry, &continuation, Decision::Approved).await
        }

        /// Denies the waiting call: the program reads a failure with code `DENIED` and
        /// `reason`, and goes on.
        #[handler(name = "deny")]
        async fn deny(
            &self,
            ctx: ObjectContext<'_>,
            denial: Json<Denial>,
        ) -> HandlerResult<Json<Decided>> {
            let Denial {
                continuation,
                reason,
            } = denial.into_inner();
            if reason.trim().is_empty() || reason.len() > MAX_REASON_BYTES {
                return Err(TerminalError::new_with_code(
                    400,
                    format!("reason: expected 1 to {MAX_REASON_BYTES} bytes of text"),
                )
                .into());
            }
            let reason = crate::call::approval::denial_text(
                reason,
                crate::call::approval::DenialSource::Owner,
            );
            decide(
                &ctx,
                &self.registry,
                &continuation,
                Decision::Denied { reason },
            )
            .await
        }
    }

    /// A refused continuation as the ingress answers it: 403, `CONTINUATION_REFUSED: …`.
    fn refused(refusal: &ContinuationError) -> TerminalError {
        TerminalError::new_with_code(403, format!("{}: {refusal}", refusal.code()))
    }

    /// Checks `continuation` against the deployment's secret and the pending approval, then
    /// resolves its awakeable with `decision`. Errors: 403 for a refused continuation (the run
    /// stays parked), 404 when nothing is pending under this key.
    async fn decide(
        ctx: &ObjectContext<'_>,
        registry: &Registry,
        continuation: &str,
        decision: Decision,
    ) -> HandlerResult<Json<Decided>> {
        let Some(secret) = registry.continuation_secret() else {
            return Err(TerminalError::new_with_code(
                403,
                format!(
                    "{}: this deployment has no continuation secret, so it decides no run",
                    super::super::CONTINUATION_REFUSED
                ),
            )
            .into());
        };
        let claims = secret.open(continuation).map_err(|e| refused(&e))?;
        claims
            .check(
                &Presenter {
                    principal: &Principal::local(),
                    issuers: &[String::new()],
                },
                &secret,
            )
            .map_err(|e| refused(&e))?;
        let key = ctx.key().to_owned();
        let pending = ctx
            .get::<Json<Pending>>(PENDING)
            .await?
            .map(Json::into_inner);
        let decided = ctx
            .get::<Json<Decided>>(DECIDED)
            .await?
            .map(Json::into_inner);
        let waits = pending
            .as_ref()
            .is_some_and(|p| p.seq == claims.seq && p.digest == claims.args);
        if claims.run != key || (pending.is_some() && !waits) {
            let used = decided.as_ref().is_some_and(|d| d.seq == claims.seq);
            return Err(refused(&if used {
                ContinuationError::Used {
                    run_id: claims.run,
                    seq: claims.seq,
                }
            } else {
                ContinuationError::Mismatch {
                    run_id: claims.run,
                    seq: claims.seq,
                }
            })
            .into());
        }
        let Some(pending) = pending else {
            // Decided already: this continuation (or another for the same call) was used.
            let message = match decided {
                Some(decided) if decided.seq == claims.seq => {
                    let refusal = ContinuationError::Used {
                        run_id: claims.run,
                        seq: claims.seq,
                    };
                    return Err(TerminalError::new_with_code(
                        403,
                        format!(
                            "{}: {refusal}: call #{} {} was {} already",
                            refusal.code(),
                            decided.seq,
                            decided.tool,
                            match decided.decision {
                                Decision::Approved => "approved",
                                Decision::Denied { .. } => "denied",
                            }
                        ),
                    )
                    .into());
                }
                _ => format!(
                    "run {key:?} has no approval pending (no such run, or it is not parked)"
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
