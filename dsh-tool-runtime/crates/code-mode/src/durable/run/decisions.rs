//! Deciding a parked run: the continuation issued (and renewed) for the call it waits at,
//! approve, deny and resume, and the decision journaled.

use std::sync::Arc;

use serde_json::Value;

use super::lifecycle::{LANGUAGE, SCOPE};
use super::{Decider, DurableExt, continuation_claims, parked, wrong};
use crate::call::ToolCall;
use crate::durable::continuation::{Claims, Presenter, args_digest};
use crate::durable::{
    CallOutcome, Claim, ContinuationError, DurableCallExt, DurableRun, EntryState, JournalEntry,
    JournalError, JournalStore, ParkedRun, Principal, RunRecord, RunStatus,
};
use crate::error::ErrorCode;
use crate::events::ToolEvent;
use crate::registry::{RUN_CODE, Registry, read};
use crate::result::ToolResult;
use crate::scope::AgentId;

pub(super) async fn issue(
    registry: &Registry,
    run: &DurableRun,
    principal: &Principal,
    by: &str,
) -> Result<ParkedRun, JournalError> {
    let id = run.checked_id()?;
    let record = parked(run, id).await?;
    let RunStatus::Parked {
        seq,
        tool,
        args,
        reason,
    } = record.status
    else {
        return Err(wrong(id, "is not parked"));
    };
    let secret = run.store.continuation_secret()?;
    let claims = Claims::new(
        &secret,
        id,
        seq,
        &args,
        principal,
        by,
        registry.continuation_ttl(),
    );
    Ok(ParkedRun {
        run_id: id.to_owned(),
        seq,
        tool,
        arguments: serde_json::from_str(&args).unwrap_or(Value::String(args)),
        reason,
        continuation: secret.sign(&claims),
    })
}

pub(super) async fn renew(
    registry: &Registry,
    store: &Arc<dyn JournalStore>,
    continuation: &str,
    presenter: &Presenter<'_>,
    by: &str,
) -> Result<ParkedRun, JournalError> {
    let (claims, secret) = continuation_claims(store, continuation)?;
    claims.check_holder(presenter, &secret)?;
    let run = DurableRun::new(store.clone(), claims.run.clone());
    let id = run.checked_id()?;
    let still_waiting = match parked(&run, id).await?.status {
        RunStatus::Parked { seq, args, .. } => {
            seq == claims.seq && args_digest(&args) == claims.args
        }
        _ => false,
    };
    if !still_waiting {
        return Err(ContinuationError::Mismatch {
            run_id: claims.run,
            seq: claims.seq,
        }
        .into());
    }
    registry.issue(&run, presenter.principal, by).await
}

pub(super) async fn approve_run(
    registry: &Registry,
    store: Arc<dyn JournalStore>,
    continuation: &str,
) -> Result<ToolResult, JournalError> {
    let decider = Decider {
        principal: &Principal::local(),
        issuers: &[String::new()],
        source: crate::call::approval::DenialSource::Owner,
    };
    let run = registry
        .decide(&store, continuation, &decider, None)
        .await?;
    registry.resume_run(run).await
}

pub(super) async fn deny_run(
    registry: &Registry,
    store: Arc<dyn JournalStore>,
    continuation: &str,
    reason: impl Into<String> + Send,
) -> Result<ToolResult, JournalError> {
    let decider = Decider {
        principal: &Principal::local(),
        issuers: &[String::new()],
        source: crate::call::approval::DenialSource::Owner,
    };
    let run = registry
        .decide(&store, continuation, &decider, Some(reason.into()))
        .await?;
    registry.resume_run(run).await
}

pub(super) async fn resume_run(
    registry: &Registry,
    run: DurableRun,
) -> Result<ToolResult, JournalError> {
    let id = run.checked_id()?.to_owned();
    let record = run
        .store
        .run(&id)
        .await?
        .ok_or_else(|| JournalError::UnknownRun(id.clone()))?;
    let entries = run.store.entries(&id).await?;
    if let Some(problem) = registry.unresumable(&record, &entries) {
        return Err(JournalError::Unresumable {
            run_id: id,
            problem,
        });
    }
    // The language is the journal's note of the program, not a `run_code` argument.
    let mut program = record.program.clone();
    if let Value::Object(fields) = &mut program {
        fields.remove(LANGUAGE);
    }
    // The scope too: the run resumes where it started.
    let agent = program
        .get(SCOPE)
        .and_then(|scope| scope["agent"].as_str())
        .map(AgentId::new);
    if let Value::Object(fields) = &mut program {
        fields.remove(SCOPE);
    }
    let mut call = ToolCall::new(format!("resume-{id}"), RUN_CODE, program).durable(run);
    if let Some(agent) = agent {
        call = call.with_agent(agent);
    }
    Ok(registry.execute(call).await)
}

pub(super) fn unresumable(
    registry: &Registry,
    record: &RunRecord,
    entries: &[JournalEntry],
) -> Option<String> {
    let Some(runtime) = crate::code_runtime::mounted(&read(&registry.inner.state)) else {
        return Some("no code runtime is mounted".to_owned());
    };
    if let Some(language) = record.program.get(LANGUAGE).and_then(Value::as_str)
        && language != runtime.language()
    {
        return Some(format!(
            "its program is {language}, the code runtime here runs {}",
            runtime.language()
        ));
    }
    // The tools are looked up in the scope the run resumes in: its journaled agent's.
    let agent = record
        .program
        .get(SCOPE)
        .and_then(|scope| scope["agent"].as_str())
        .map(AgentId::new);
    let missing: std::collections::BTreeSet<&str> = entries
        .iter()
        .map(|entry| entry.tool.as_str())
        .filter(|tool| match tool.strip_prefix("tools.") {
            Some(name) => registry.get(name, agent.as_ref()).is_none(),
            None => !tool.starts_with("sdk."),
        })
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "it calls {}, which the tools here do not have",
            missing.into_iter().collect::<Vec<_>>().join(", ")
        )
    })
}

pub(super) async fn decide(
    registry: &Registry,
    store: &Arc<dyn JournalStore>,
    continuation: &str,
    decider: &Decider<'_>,
    denial: Option<String>,
) -> Result<DurableRun, JournalError> {
    let (claims, secret) = continuation_claims(store, continuation)?;
    claims.check(
        &Presenter {
            principal: decider.principal,
            issuers: decider.issuers,
        },
        &secret,
    )?;
    let run = DurableRun::new(store.clone(), claims.run.clone());
    let id = run.checked_id()?;
    let denial = denial.map(|reason| crate::call::approval::denial_text(reason, decider.source));
    // Held while the decision is recorded: two processes deciding at once record one, and
    // the continuation is used once.
    let tool = Claim::hold(
        &run.store,
        id,
        registry.record_decision(&run, id, &claims, &denial),
    )
    .await?;
    registry.publish(|| ToolEvent::DurableDecided {
        run_id: id.to_owned(),
        seq: claims.seq,
        name: tool,
        approved: denial.is_none(),
        reason: denial.clone(),
    });
    Ok(run)
}

pub(super) async fn record_decision(
    registry: &Registry,
    run: &DurableRun,
    id: &str,
    claims: &Claims,
    denial: &Option<String>,
) -> Result<String, JournalError> {
    let record = parked(run, id).await?;
    let entries = run.store.entries(id).await?;
    let named = entries.iter().find(|entry| entry.seq == claims.seq);
    // Decided already: the call left its parked state (this continuation, or another for
    // the same call, was used).
    if named.is_some_and(|entry| !matches!(entry.state, EntryState::Parked { .. })) {
        return Err(ContinuationError::Used {
            run_id: id.to_owned(),
            seq: claims.seq,
        }
        .into());
    }
    let waiting = match &record.status {
        RunStatus::Parked { seq, args, .. } => {
            *seq == claims.seq && args_digest(args) == claims.args
        }
        _ => false,
    };
    let Some(entry) = named.filter(|entry| waiting && args_digest(&entry.args) == claims.args)
    else {
        return Err(ContinuationError::Mismatch {
            run_id: id.to_owned(),
            seq: claims.seq,
        }
        .into());
    };
    // Checked before anything is recorded: a decision this registry cannot act on would
    // leave the run failed for good instead of parked.
    if let Some(problem) = registry.unresumable(&record, &entries) {
        return Err(JournalError::Unresumable {
            run_id: id.to_owned(),
            problem,
        });
    }
    let mut entry = entry.clone();
    entry.state = match denial {
        None => EntryState::Approved,
        Some(reason) => EntryState::Finished {
            outcome: CallOutcome::Err {
                message: reason.clone(),
                code: Some(ErrorCode::Denied.as_str().to_owned()),
            },
        },
    };
    run.store.put(id, &entry).await?;
    Ok(entry.tool)
}
