//! What watches a child process while it runs a program, for both kinds of child: a subprocess
//! run's interpreter (`subprocess/`) and a pooled worker (the engines crate's `pool/`). The
//! run's abort, the runtime's disposal, the wall-clock ceiling and the CPU and memory budgets
//! (sampled over the child's process tree) end a run the same way on both; each transport's own
//! loop selects on [`Watch::ending`] first, then on its frames.

use std::collections::HashMap;
use std::pin::Pin;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::budget::{Budgets, TreeBudget};
use super::ending::Ending;
use super::process;

/// How often the tree's CPU time and resident memory are sampled; a compute overrun is caught
/// within one interval plus the kernel's accounting granularity (one clock tick, usually 10 ms).
const USAGE_POLL: Duration = Duration::from_millis(10);

/// How long output (or log frames) a settled child had already written may take to arrive.
pub const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// How long a child whose protocol channel closed may take to show its exit status. A dying
/// child closes its descriptors just before its exit status exists; the status says how the run
/// ended (a signal, a pooled worker's out-of-memory exit code), so losing it misreports the
/// run. Waited in full only by a child that closed its channel and keeps running, which is then
/// killed: the longer of the two graces the runtimes had, for a loaded machine.
const CLOSE_GRACE: Duration = Duration::from_millis(50);

/// Frame slack beyond `max_output_bytes`: the frame's own keys, and numbers that the child
/// writes longer than the host does.
pub const FRAME_SLACK: usize = 64 << 10;

/// Descendants remembered before the record is pruned of processes that are gone.
const SEEN_BOUND: usize = 4 * 4096;

/// The watch over one run on one child: abort, disposal, wall clock and budgets.
pub struct Watch {
    aborted: Pin<Box<WaitForCancellationFutureOwned>>,
    disposed: Pin<Box<WaitForCancellationFutureOwned>>,
    wall: Pin<Box<Sleep>>,
    max_wall_ms: u64,
    tick: Interval,
    budget: TreeBudget,
    pid: i32,
    sampling: bool,
    /// Descendants seen so far (pid → start time), killed at settle even if re-parented away;
    /// `None` for a child that starts no processes of its own.
    seen: Option<HashMap<i32, u64>>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The clocks and signals are pinned futures.
        f.debug_struct("Watch")
            .field("pid", &self.pid)
            .field("max_wall_ms", &self.max_wall_ms)
            .field("sampling", &self.sampling)
            .finish_non_exhaustive()
    }
}

impl Watch {
    /// Starts the watch over a run on the child `pid`: the wall clock and the CPU budget count
    /// from now. `abort` is the run's signal, `disposed` the runtime's.
    pub fn start(
        pid: i32,
        budgets: &Budgets,
        abort: &CancellationToken,
        disposed: &CancellationToken,
    ) -> Self {
        let mut tick = tokio::time::interval_at(Instant::now() + USAGE_POLL, USAGE_POLL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Watch {
            aborted: Box::pin(abort.clone().cancelled_owned()),
            disposed: Box::pin(disposed.clone().cancelled_owned()),
            wall: Box::pin(tokio::time::sleep(Duration::from_millis(
                budgets.max_wall_ms,
            ))),
            max_wall_ms: budgets.max_wall_ms,
            tick,
            budget: TreeBudget::start(pid, budgets.compute_ms, budgets.max_memory_mb),
            pid,
            sampling: true,
            seen: None,
        }
    }

    /// Also remembers every descendant a sample finds, for [`Watch::kill_descendants`].
    pub fn remembering_descendants(mut self) -> Self {
        self.seen = Some(HashMap::new());
        self
    }

    /// The child has exited: there is no tree left to sample. Abort, disposal and the wall
    /// clock still end the run.
    pub fn child_exited(&mut self) {
        self.sampling = false;
    }

    /// Resolves with the ending when the run is aborted, the runtime disposed, the wall clock
    /// reached or a budget overrun, checked in that order. Cancel-safe: the clocks and signals
    /// live in the watch, so a loop may select on a fresh call every turn.
    pub async fn ending(&mut self) -> Ending {
        loop {
            tokio::select! {
                biased;
                _ = &mut self.aborted => return Ending::aborted(),
                _ = &mut self.disposed => return Ending::disposed(),
                _ = &mut self.wall => return Ending::wall(self.max_wall_ms),
                _ = self.tick.tick(), if self.sampling => {
                    if let Some(ending) = self.sample() {
                        return ending;
                    }
                }
            }
        }
    }

    /// Samples the child's tree; the ending if it overran a budget.
    fn sample(&mut self) -> Option<Ending> {
        let tree = process::tree(self.pid);
        if let Some(seen) = &mut self.seen {
            remember(seen, &tree);
        }
        self.budget.overrun(&process::usage(&tree)?)
    }

    /// Kills the descendants the samples found that are still the same processes.
    pub fn kill_descendants(&self) {
        if let Some(seen) = &self.seen {
            process::kill_seen(seen);
        }
    }
}

/// Records the descendants of a tree sample (the root is the child itself).
fn remember(seen: &mut HashMap<i32, u64>, tree: &[i32]) {
    for &pid in tree.iter().skip(1) {
        if !seen.contains_key(&pid)
            && let Some(started) = process::start_time(pid)
        {
            seen.insert(pid, started);
        }
    }
    // Processes that are gone need no killing: keep the record small.
    if seen.len() > SEEN_BOUND {
        seen.retain(|&pid, &mut started| process::start_time(pid) == Some(started));
    }
}

/// The child's exit status after its protocol channel closed, if it shows within
/// [`CLOSE_GRACE`].
pub async fn exit_after_close(child: &mut tokio::process::Child) -> Option<ExitStatus> {
    tokio::time::timeout(CLOSE_GRACE, child.wait())
        .await
        .ok()?
        .ok()
}

/// `worker-exit`: the child closed its protocol channel before completing, and how it ended
/// when its exit status showed.
pub fn closed_before_completing(status: Option<ExitStatus>) -> Ending {
    Ending::worker_exit(match status {
        Some(status) => format!(
            "worker {} before completing",
            process::describe_exit(status)
        ),
        None => "worker closed its protocol channel before completing".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code_runtime::FailureKind;

    fn budgets(compute_ms: u64, max_wall_ms: u64) -> Budgets {
        Budgets {
            compute_ms,
            max_wall_ms,
            ..Budgets::default()
        }
    }

    fn this_process() -> i32 {
        i32::try_from(std::process::id()).unwrap()
    }

    fn failure(ending: Ending) -> (FailureKind, String) {
        match ending {
            Ending::Fail(kind, message) => (kind, message),
            other => panic!("not a failure: {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_wall_clock_ends_a_run_that_stays_within_its_budgets() {
        let (abort, disposed) = (CancellationToken::new(), CancellationToken::new());
        let mut watch = Watch::start(this_process(), &budgets(u64::MAX, 1_000), &abort, &disposed);
        let started = Instant::now();
        let (kind, message) = failure(watch.ending().await);
        assert_eq!(kind, FailureKind::Timeout);
        assert_eq!(message, "wall-clock ceiling reached (1000ms)");
        assert_eq!(started.elapsed(), Duration::from_millis(1_000));
    }

    #[tokio::test(start_paused = true)]
    async fn an_abort_wins_over_a_disposal_and_a_wall_clock_due_at_once() {
        let (abort, disposed) = (CancellationToken::new(), CancellationToken::new());
        let mut watch = Watch::start(this_process(), &budgets(u64::MAX, 1), &abort, &disposed);
        tokio::time::advance(Duration::from_millis(5)).await;
        disposed.cancel();
        abort.cancel();
        assert_eq!(failure(watch.ending().await).1, "run aborted");
        let mut watch = Watch::start(this_process(), &budgets(u64::MAX, 1), &abort, &disposed);
        abort.cancel();
        assert_eq!(
            failure(watch.ending().await).0,
            FailureKind::Abort,
            "a fresh watch sees an abort that came before it started"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_sampled_cpu_overrun_ends_the_run_as_a_timeout() {
        let (abort, disposed) = (CancellationToken::new(), CancellationToken::new());
        let mut watch = Watch::start(
            this_process(),
            &budgets(1, u64::MAX >> 2),
            &abort,
            &disposed,
        );
        // The samples themselves spend this process's CPU time: the budget of 1 ms runs out.
        let (kind, message) = failure(watch.ending().await);
        assert_eq!(kind, FailureKind::Timeout);
        assert_eq!(message, "compute budget exhausted (1ms of CPU time)");
    }

    #[tokio::test(start_paused = true)]
    async fn a_child_that_exited_is_sampled_no_more() {
        let (abort, disposed) = (CancellationToken::new(), CancellationToken::new());
        let mut watch = Watch::start(this_process(), &budgets(1, 10_000), &abort, &disposed);
        watch.child_exited();
        let (kind, message) = failure(watch.ending().await);
        assert_eq!(kind, FailureKind::Timeout);
        assert_eq!(message, "wall-clock ceiling reached (10000ms)");
    }

    #[tokio::test(start_paused = true)]
    async fn the_close_grace_reports_how_a_dying_child_ended_and_not_a_live_one() {
        let mut exited = tokio::process::Command::new("sh")
            .args(["-c", "kill -9 $$"])
            .spawn()
            .unwrap();
        // Its status exists before the grace starts: no race with the (paused) clock.
        exited.wait().await.unwrap();
        let status = exit_after_close(&mut exited).await;
        let (kind, message) = failure(closed_before_completing(status));
        assert_eq!(kind, FailureKind::WorkerExit);
        assert_eq!(
            message,
            "worker was killed by signal 9 (SIGKILL) before completing"
        );

        let mut living = tokio::process::Command::new("sleep")
            .arg("600")
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = exit_after_close(&mut living).await;
        assert_eq!(status, None);
        assert_eq!(started.elapsed(), CLOSE_GRACE);
        assert_eq!(
            failure(closed_before_completing(status)).1,
            "worker closed its protocol channel before completing"
        );
    }
}
