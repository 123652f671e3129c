//! One step's calls: [`Registry::execute_batch`] on the shared scheduler.

use tokio_util::sync::CancellationToken;

use super::{Schedule, Sink, Unstarted};
use crate::agent_id::AgentId;
use crate::call::ToolCall;
use crate::registry::Registry;
use crate::result::ToolResult;

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

/// The results of a batch, by model position.
struct Results(Vec<Option<ToolResult>>);

impl Sink for Results {
    type Ticket = ();

    fn committed(&mut self, seq: usize, (): (), result: ToolResult) {
        self.0[seq] = Some(result);
    }
}

impl Registry {
    /// Runs one step's calls for `scope` (each call's agent is set to it and its signal to the
    /// batch signal) and returns their results in model order. Every call gets exactly one result.
    ///
    /// Once the batch signal fires nothing new dispatches: started calls drain, the rest get
    /// `ABORTED_BEFORE_DISPATCH` without running any pre-execute hook, guard, wrapper or body
    /// (their results still reach `finalize_content`, observers and subscribers). Dropping the
    /// returned future does the same without cancelling the signal: started calls are not
    /// cancelled, they run to completion and commit on the batch's own task.
    pub async fn execute_batch(
        &self,
        scope: Option<&AgentId>,
        calls: Vec<ToolCall>,
        options: BatchOptions,
    ) -> Vec<ToolResult> {
        let total = calls.len();
        let mut schedule = Schedule::new(
            self.clone(),
            options.max_parallel,
            options.signal.clone(),
            Unstarted::Dispatch,
            Results((0..total).map(|_| None).collect()),
        );
        // The schedule runs on a task of its own: the calls' spans go under the caller's.
        let current = tracing::Span::current();
        for mut call in calls {
            call.agent = scope.cloned();
            call.signal = options.signal.clone();
            call.trace_parent.get_or_insert_with(|| current.clone());
            schedule.push(call, ());
        }
        let results = schedule
            .run()
            .await
            .map_or_else(|| (0..total).map(|_| None).collect(), |results| results.0);
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
