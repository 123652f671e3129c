//! The order-preserving batch scheduler (SPEC §7, REFERENCE §2.5).
//!
//! A model's tool calls of one step run like this: each call is classified just before it
//! starts; consecutive parallel-safe calls share a rolling pool of `max_parallel`; an exclusive
//! call is a barrier (it starts once everything before it has committed, and nothing starts until
//! it has committed). Pre-execute and guards run in model order one call at a time; only execute
//! wrappers and bodies overlap; results commit (post-execute, `finalize_content`, observers) in
//! model order. Once the batch signal fires nothing new dispatches: started calls drain, the rest
//! get `ABORTED_BEFORE_DISPATCH` without running any pre-execute hook, guard, wrapper or body
//! (their results still reach `finalize_content`, observers and subscribers, so every call is
//! seen ending exactly once).

use std::collections::BTreeMap;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::execute::DispatchedCall;
use crate::registry::{Mode, RUN_CODE, Registry, ToolCall, read};
use crate::result::ToolResult;
use crate::scope::AgentId;

/// How a call may be scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionMode {
    /// May overlap with other parallel calls.
    Parallel,
    /// Runs alone.
    Exclusive,
}

/// Options of [`Registry::execute_batch`].
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// Most calls whose bodies run at once; at least 1 (0 is treated as 1). Default 10.
    pub max_parallel: usize,
    /// The step's cancellation signal; every call of the batch observes it.
    pub signal: CancellationToken,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            max_parallel: 10,
            signal: CancellationToken::new(),
        }
    }
}

impl Registry {
    /// Classifies a call: `Parallel` only when the tool is visible, not collapsed by code mode,
    /// and its classifier returns `true` for these arguments. Unknown tools, arguments that do not
    /// parse and panicking classifiers are `Exclusive`.
    pub fn execution_mode(&self, call: &ToolCall) -> ExecutionMode {
        let definition = {
            let state = read(&self.inner.state);
            let collapsed = call.parent.is_none()
                && call.name != RUN_CODE
                && state.mode(call.agent.as_ref()) == Mode::Code;
            if collapsed {
                None
            } else {
                state.resolve(&call.name, call.agent.as_ref())
            }
        };
        let Some(definition) = definition else {
            return ExecutionMode::Exclusive;
        };
        let safe = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            definition.is_concurrency_safe(&call.arguments)
        }));
        if matches!(safe, Ok(true)) {
            ExecutionMode::Parallel
        } else {
            ExecutionMode::Exclusive
        }
    }

    /// Runs one step's calls for `scope` (each call's agent is set to it and its signal to the
    /// batch signal) and returns their results in model order. Every call gets exactly one result.
    pub async fn execute_batch(
        &self,
        scope: Option<&AgentId>,
        calls: Vec<ToolCall>,
        options: BatchOptions,
    ) -> Vec<ToolResult> {
        let max_parallel = options.max_parallel.max(1);
        let mut queue: Vec<Option<ToolCall>> = calls
            .into_iter()
            .map(|mut call| {
                call.agent = scope.cloned();
                call.signal = options.signal.clone();
                Some(call)
            })
            .collect();
        let total = queue.len();
        let mut results: Vec<Option<ToolResult>> = (0..total).map(|_| None).collect();
        let mut running = Detached(JoinSet::new());
        let mut done: BTreeMap<usize, DispatchedCall> = BTreeMap::new();
        let mut next_start = 0;
        let mut next_commit = 0;
        // Index of a started exclusive call that has not committed yet.
        let mut barrier: Option<usize> = None;
        while next_commit < total {
            // Start whatever the rules allow.
            while next_start < total && barrier.is_none() && running.0.len() < max_parallel {
                let Some(call) = queue[next_start].take() else {
                    break;
                };
                let exclusive = !options.signal.is_cancelled()
                    && self.execution_mode(&call) == ExecutionMode::Exclusive;
                if exclusive && next_commit < next_start {
                    // An exclusive call waits for everything before it to commit.
                    queue[next_start] = Some(call);
                    break;
                }
                let index = next_start;
                next_start += 1;
                if exclusive {
                    barrier = Some(index);
                }
                let prepared = self.prepare(call).await;
                if exclusive {
                    // Nothing else runs beside an exclusive call: dispatch it inline, saving a
                    // task hand-off per barrier.
                    done.insert(index, self.dispatch(prepared).await);
                    break;
                }
                let registry = self.clone();
                running
                    .0
                    .spawn(async move { (index, registry.dispatch(prepared).await) });
            }
            match running.0.join_next().await {
                Some(Ok((index, dispatched))) => {
                    done.insert(index, dispatched);
                }
                Some(Err(join_error)) => {
                    // Dispatch contains panics itself, so only a runtime shutdown lands here.
                    tracing::error!("tool dispatch task failed: {join_error}");
                    break;
                }
                None => {}
            }
            while let Some(dispatched) = done.remove(&next_commit) {
                results[next_commit] = Some(self.commit(dispatched).await);
                if barrier == Some(next_commit) {
                    barrier = None;
                }
                next_commit += 1;
            }
        }
        results
            .into_iter()
            .map(|result| {
                result.unwrap_or_else(|| {
                    ToolResult::coded_failure(
                        crate::ErrorCode::AbortedBeforeDispatch,
                        "tool call aborted before dispatch",
                    )
                })
            })
            .collect()
    }
}

/// Started bodies are never dropped: if the batch future itself is dropped, the tasks still
/// running are detached and run to completion instead of being aborted with the `JoinSet`.
struct Detached(JoinSet<(usize, DispatchedCall)>);

impl Drop for Detached {
    fn drop(&mut self) {
        self.0.detach_all();
    }
}
