//! The per-call timeouts of one connection, kept by one watchdog task.
//!
//! A tokio timer per call costs a wake-up of the runtime's driver on every call (registering a
//! deadline earlier than the driver's own wakes it to re-arm: an eventfd write and a context
//! switch), which profiling showed to be the largest cost the bridge added to a call. Every call
//! of a connection has the same timeout, so deadlines come in the order calls start: they form a
//! queue. The watchdog sleeps until the oldest deadline still pending and is woken only when a
//! call starts while it is idle; a call that settles just marks its entry, which the next call
//! or the watchdog drops.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The deadlines of one connection's calls in flight.
pub(crate) struct Deadlines {
    shared: Arc<Shared>,
}

struct Shared {
    timeout: Duration,
    state: Mutex<State>,
    /// Wakes an idle watchdog.
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// In start order, hence in deadline order.
    queue: VecDeque<(Instant, Arc<Slot>)>,
    /// The watchdog waits for a first call instead of sleeping until a deadline.
    idle: bool,
    /// The length past which settled entries behind a pending one are swept out.
    sweep_at: usize,
}

/// Entries kept before the first sweep.
const SWEEP_FLOOR: usize = 64;

/// The deadline of a timeout the clock cannot represent.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

#[derive(Default)]
struct Slot {
    /// The call has settled; its deadline no longer matters.
    settled: AtomicBool,
    /// Holds a permit once the deadline has passed.
    expired: Notify,
}

/// One call's deadline; dropping it (the call settled) retires the deadline.
pub(crate) struct CallDeadline {
    slot: Arc<Slot>,
}

impl Deadlines {
    /// Deadlines `timeout` after each call starts, watched until `closed` is cancelled.
    pub(crate) fn new(timeout: Duration, closed: CancellationToken) -> Deadlines {
        let shared = Arc::new(Shared {
            timeout,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
        });
        tokio::spawn(watch(shared.clone(), closed));
        Deadlines { shared }
    }

    /// Starts the deadline of a call starting now.
    pub(crate) fn start(&self) -> CallDeadline {
        let slot = Arc::new(Slot::default());
        let mut state = self.shared.state.lock();
        state.retire_settled();
        let now = Instant::now();
        // A timeout too large for the clock reads as one that never comes.
        let when = now
            .checked_add(self.shared.timeout)
            .unwrap_or_else(|| now + FAR_FUTURE);
        state.queue.push_back((when, slot.clone()));
        state.compact();
        let wake = std::mem::take(&mut state.idle);
        drop(state);
        if wake {
            self.shared.wake.notify_one();
        }
        CallDeadline { slot }
    }
}

impl State {
    /// Keeps the queue as long as the calls in flight, not as long as the calls since the
    /// oldest one in flight: a call that hangs until its deadline must not hold every later
    /// (settled) call's entry. Amortised: a sweep doubles the length the next one waits for.
    fn compact(&mut self) {
        if self.queue.len() > self.sweep_at.max(SWEEP_FLOOR) {
            self.queue
                .retain(|(_, slot)| !slot.settled.load(Ordering::Acquire));
            self.sweep_at = 2 * self.queue.len();
        }
    }

    fn retire_settled(&mut self) {
        while self
            .queue
            .front()
            .is_some_and(|(_, slot)| slot.settled.load(Ordering::Acquire))
        {
            self.queue.pop_front();
        }
    }
}

impl CallDeadline {
    /// Resolves once the call's deadline has passed.
    pub(crate) async fn expired(&self) {
        self.slot.expired.notified().await;
    }
}

impl Drop for CallDeadline {
    fn drop(&mut self) {
        self.slot.settled.store(true, Ordering::Release);
    }
}

async fn watch(shared: Arc<Shared>, closed: CancellationToken) {
    loop {
        let next = {
            let mut state = shared.state.lock();
            state.retire_settled();
            let next = state.queue.front().map(|(when, _)| *when);
            state.idle = next.is_none();
            next
        };
        let wait = async {
            match next {
                // A call that starts meanwhile leaves a permit: no start is missed.
                None => shared.wake.notified().await,
                Some(when) => {
                    tokio::time::sleep_until(when).await;
                    let mut state = shared.state.lock();
                    let now = Instant::now();
                    while let Some((when, _)) = state.queue.front()
                        && *when <= now
                    {
                        if let Some((_, slot)) = state.queue.pop_front()
                            && !slot.settled.load(Ordering::Acquire)
                        {
                            slot.expired.notify_one();
                        }
                    }
                }
            }
        };
        tokio::select! {
            biased;
            _ = closed.cancelled() => return,
            _ = wait => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(deadlines: &Deadlines) -> usize {
        deadlines.shared.state.lock().queue.len()
    }

    /// Deadlines of `timeout` whose watchdog stops when the guard drops.
    fn watched(timeout: Duration) -> (Deadlines, tokio_util::sync::DropGuard) {
        let closed = CancellationToken::new();
        (Deadlines::new(timeout, closed.clone()), closed.drop_guard())
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_expires_its_own_timeout_after_it_started() {
        let (deadlines, _watching) = watched(Duration::from_millis(100));
        let first = deadlines.start();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(first);
        let started = Instant::now();
        let second = deadlines.start();
        second.expired().await;
        // Virtual time: the second call's own 100 ms, not what was left of the first's.
        assert_eq!(started.elapsed(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn a_settled_call_never_expires_and_leaves_the_queue() {
        let (deadlines, _watching) = watched(Duration::from_millis(100));
        for _ in 0..1_000 {
            drop(deadlines.start());
        }
        // Each start retires the settled calls before it.
        assert_eq!(queued(&deadlines), 1);
        let kept = deadlines.start();
        tokio::time::sleep(Duration::from_millis(150)).await;
        // The kept call expired (its permit is there) and the queue is empty.
        tokio::time::timeout(Duration::ZERO, kept.expired())
            .await
            .expect("the kept call expired");
        assert_eq!(queued(&deadlines), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_call_does_not_keep_the_settled_calls_after_it() {
        let (deadlines, _watching) = watched(Duration::from_secs(60));
        let hanging = deadlines.start();
        for _ in 0..10_000 {
            drop(deadlines.start());
        }
        assert!(
            queued(&deadlines) <= 2 * SWEEP_FLOOR,
            "{}",
            queued(&deadlines)
        );
        drop(hanging);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_past_the_clock_never_expires() {
        let (deadlines, _watching) = watched(Duration::MAX);
        let call = deadlines.start();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        tokio::time::timeout(Duration::ZERO, call.expired())
            .await
            .expect_err("no expiry");
    }

    #[tokio::test(start_paused = true)]
    async fn calls_in_flight_expire_in_order_of_their_starts() {
        let (deadlines, _watching) = watched(Duration::from_millis(100));
        let first = deadlines.start();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let second = deadlines.start();
        let origin = Instant::now();
        first.expired().await;
        assert_eq!(origin.elapsed(), Duration::from_millis(70));
        second.expired().await;
        assert_eq!(origin.elapsed(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_watchdog_wakes_for_the_next_call() {
        let (deadlines, _watching) = watched(Duration::from_millis(100));
        // Let the watchdog go idle on an empty queue first.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(deadlines.shared.state.lock().idle);
        let call = deadlines.start();
        let origin = Instant::now();
        call.expired().await;
        assert_eq!(origin.elapsed(), Duration::from_millis(100));
    }
}
