//! The journal thread: jobs run in the order they were sent, deferred records batched into one
//! transaction, checkpoints taken off the callers' tasks.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rusqlite::{Connection, TransactionBehavior, params};

use super::{millis, store, text};
use crate::durable::{JournalEntry, JournalError};

/// One statement (or a few in a transaction) for the journal thread.
pub(super) type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// What the journal thread is sent.
pub(super) enum Message {
    /// Run this job (its deferred records first).
    Job(Job),
    /// Deferred records wait: write them within [`FLUSH_AFTER`] unless a statement on the
    /// caller has written them by then.
    Flush,
}

/// How long the thread leaves deferred records for a caller's statement to write with its own
/// (one commit for both): a run's next record comes microseconds after a call's outcome.
pub(super) const FLUSH_AFTER: Duration = Duration::from_millis(1);

/// One call's record, as a statement writes it.
#[derive(Clone)]
pub(super) struct Record {
    pub(super) run_id: String,
    pub(super) seq: i64,
    pub(super) tool: String,
    pub(super) args: String,
    pub(super) state: String,
}

impl Record {
    pub(super) fn of(run_id: &str, entry: &JournalEntry) -> Result<Record, JournalError> {
        Ok(Record {
            run_id: run_id.to_owned(),
            seq: i64::try_from(entry.seq).map_err(|_| {
                JournalError::Store(format!("sequence number {} too large", entry.seq))
            })?,
            tool: entry.tool.clone(),
            args: entry.args.clone(),
            state: text(&entry.state)?,
        })
    }

    pub(super) fn len(&self) -> usize {
        self.tool.len() + self.args.len() + self.state.len()
    }
}

/// What the caller's fast path and the journal thread share.
pub(super) struct Shared {
    pub(super) connection: Mutex<Connection>,
    /// Jobs sent to the thread and not yet run: the fast path waits its turn behind them.
    pub(super) queued: AtomicUsize,
    /// Statements run since the last checkpoint (reads counted too: an early checkpoint
    /// costs little).
    pub(super) writes: AtomicU64,
    /// Records of [`JournalStore::put_deferred`] not yet written, oldest first: whoever holds
    /// `connection` next writes them before anything else, in the same transaction as a
    /// call's record. Taken only by the holder of `connection`.
    pub(super) deferred: Mutex<Vec<Record>>,
    /// Set while the thread has been told of deferred records ([`Message::Flush`]).
    pub(super) flush_due: AtomicBool,
    /// The busy timeout in ms, for the thread's own writes of deferred records.
    pub(super) busy_ms: AtomicU64,
    /// The bound of the file's contents, in bytes.
    pub(super) max_file_bytes: AtomicU64,
}

impl Shared {
    /// Writes the deferred records, then `own`, in one transaction. A deferred record refused
    /// for room is dropped (its call's outcome stays unknown) and `own` is not written: the
    /// error is [`JournalError::Full`]. On any other error nothing is written and the deferred
    /// records stay for the next statement.
    pub(super) fn flush(
        &self,
        connection: &mut Connection,
        own: Option<&Record>,
    ) -> Result<(), JournalError> {
        let deferred = std::mem::take(&mut *self.deferred.lock());
        if deferred.is_empty() && own.is_none() {
            return Ok(());
        }
        let max = self.max_file_bytes.load(Ordering::Relaxed);
        let written = write_records(connection, &deferred, own, max);
        if written
            .as_ref()
            .is_err_and(|error| !matches!(error, JournalError::Full { .. }))
        {
            let mut kept = self.deferred.lock();
            let later = std::mem::replace(&mut *kept, deferred);
            kept.extend(later);
        }
        written
    }
}

/// Writes `deferred`, then `own`, in one `BEGIN IMMEDIATE` transaction (the bound read under
/// the write lock, so it holds against other connections): a new call's record (its start, or
/// the one record of a read-only call) is refused past the file's bound `max`; how a call
/// journaled before ended (or was decided, reverted) is recorded whatever the bound, so
/// nothing is left unknown.
fn write_records(
    connection: &mut Connection,
    deferred: &[Record],
    own: Option<&Record>,
    max: u64,
) -> Result<(), JournalError> {
    let tx = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|error| store(&error))?;
    // Cached `PRAGMA` statements: the `pragma_page_count` table-valued function compiles
    // a `PRAGMA` statement each time it runs.
    let page_size: i64 = tx
        .prepare_cached("PRAGMA page_size")
        .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
        .map_err(|error| store(&error))?;
    let max_bytes = i64::try_from(max).unwrap_or(i64::MAX);
    let mut full = None;
    let records = deferred.iter().chain(own);
    for (index, record) in records.enumerate() {
        if full.is_some() && index >= deferred.len() {
            break;
        }
        let pages: i64 = tx
            .prepare_cached("PRAGMA page_count")
            .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
            .map_err(|error| store(&error))?;
        let used = pages.saturating_mul(page_size);
        let after = used.saturating_add(i64::try_from(record.len()).unwrap_or(i64::MAX));
        let written = tx
            .prepare_cached(
                "INSERT INTO calls (run_id, seq, tool, args, state) \
                 SELECT ?1, ?2, ?3, ?4, ?5 \
                 WHERE EXISTS (SELECT 1 FROM calls WHERE run_id = ?1 AND seq = ?2) OR ?6 <= ?7 \
                 ON CONFLICT (run_id, seq) DO UPDATE SET tool = ?3, args = ?4, state = ?5",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    record.run_id,
                    record.seq,
                    record.tool,
                    record.args,
                    record.state,
                    after,
                    max_bytes
                ])
            })
            .map_err(|error| store(&error))?;
        if written == 0 {
            full.get_or_insert(JournalError::Full {
                used_bytes: u64::try_from(used).unwrap_or_default(),
                max_bytes: max,
            });
        }
    }
    tx.commit().map_err(|error| store(&error))?;
    full.map_or(Ok(()), Err)
}

/// Commits between two checkpoints the thread makes (automatic checkpoints are off, so the
/// `fsync` of a checkpoint never happens on a caller's task): with 2-3 pages a commit, about
/// SQLite's own default of 1,000 pages.
pub(super) const CHECKPOINT_EVERY: u64 = 384;

/// The journal thread: runs the jobs in the order they were sent, writes deferred records
/// [`FLUSH_AFTER`] after it is told of them (again after that while another connection holds
/// the lock), checkpoints, and once the queue closes writes what is still deferred.
pub(super) fn journal_thread(shared: &Shared, queue: &mpsc::Receiver<Message>) {
    let mut due: Option<Instant> = None;
    loop {
        let message = match due {
            None => queue
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(at) => queue.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        match message {
            Ok(Message::Job(job)) => {
                let mut connection = shared.connection.lock();
                job(&mut connection);
                checkpoint(shared, &connection);
                drop(connection);
                shared.queued.fetch_sub(1, Ordering::AcqRel);
            }
            Ok(Message::Flush) => {
                due.get_or_insert_with(|| Instant::now() + FLUSH_AFTER);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // Cleared before the records are taken: one deferred after this is told again.
                shared.flush_due.store(false, Ordering::SeqCst);
                due = None;
                if let Err(JournalError::Locked { .. }) = write_deferred(shared) {
                    shared.flush_due.store(true, Ordering::SeqCst);
                    due = Some(Instant::now() + FLUSH_AFTER);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Err(error) = write_deferred(shared) {
                    tracing::warn!(
                        %error,
                        "durable journal: call outcomes not written before the journal closed"
                    );
                }
                return;
            }
        }
    }
}

/// Writes the deferred records on the thread, waiting at most the busy timeout for a lock.
/// On an error other than [`JournalError::Full`] they stay for the next statement.
fn write_deferred(shared: &Shared) -> Result<(), JournalError> {
    let mut connection = shared.connection.lock();
    let timeout = Duration::from_millis(shared.busy_ms.load(Ordering::Relaxed));
    let written = connection
        .busy_timeout(timeout)
        .map_err(|error| store(&error))
        .and_then(|()| shared.flush(&mut connection, None))
        .map_err(|error| match error {
            JournalError::Locked { .. } => JournalError::Locked {
                timeout_ms: millis(timeout),
            },
            other => other,
        });
    shared.writes.fetch_add(1, Ordering::Relaxed);
    checkpoint(shared, &connection);
    written
}

/// A checkpoint once [`CHECKPOINT_EVERY`] statements ran since the last.
pub(super) fn checkpoint(shared: &Shared, connection: &Connection) {
    if shared.writes.load(Ordering::Relaxed) >= CHECKPOINT_EVERY {
        shared.writes.store(0, Ordering::Relaxed);
        // PASSIVE never waits for a lock; what it cannot copy now, a later one does.
        let _ = connection.pragma_update(None, "wal_checkpoint", "PASSIVE");
    }
}
