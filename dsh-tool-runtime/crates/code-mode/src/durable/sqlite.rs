//! The embedded journal: one SQLite file in WAL mode, used from a thread of its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use super::continuation::ContinuationSecretFile;
use super::{
    ContinuationSecret, EntryState, JournalEntry, JournalError, JournalStore, RunRecord, RunStatus,
};

/// `application_id` of a journal file: "DSHJ".
const APPLICATION_ID: i32 = 0x4453_484A;
/// The schema this version writes (`user_version`); 1 had no `owners` table.
const SCHEMA_VERSION: i32 = 2;
/// How long a statement waits for another connection's lock by default, counted from the
/// moment it was asked for (time queued behind other statements included).
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(2);
/// The default bound of a journal file's contents: 1 GiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1 << 30;
/// What the write-ahead log is cut back to after a checkpoint: 16 MiB.
const WAL_SIZE_LIMIT: i64 = 16 << 20;
/// The permission bits a new journal file gets (the `-wal` and `-shm` files copy them).
#[cfg(unix)]
const PRIVATE_MODE: u32 = 0o600;

const SCHEMA: &str = "
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY NOT NULL,
    program TEXT NOT NULL,
    status TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE TABLE calls (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    seq INTEGER NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

/// Schema 2: who runs each run now (a process, told apart from a later one with its pid by its
/// start time).
const OWNERS: &str = "
CREATE TABLE IF NOT EXISTS owners (
    run_id TEXT PRIMARY KEY NOT NULL,
    pid INTEGER NOT NULL,
    started INTEGER NOT NULL,
    claim INTEGER NOT NULL
);
";

/// How [`SqliteJournal::open_with`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenMode {
    /// Read and write; a missing or empty file becomes a new journal.
    Create,
    /// Read and write an existing journal; a missing file is [`JournalError::Missing`].
    Existing,
    /// Read only (a file without write permission works): listing and showing runs. Every
    /// write fails with [`JournalError::Store`]. A missing file is [`JournalError::Missing`].
    ReadOnly,
}

/// A [`JournalStore`] in one SQLite file (bundled SQLite, no server).
///
/// The file is in WAL mode with `synchronous = NORMAL`: a write is durable against a crash of
/// the process (what the journal is for) once committed, which every method's future waits
/// for except [`put_deferred`](JournalStore::put_deferred)'s (a live call's outcome): that
/// record is committed with the next statement of this journal (the run's next call, its
/// status), in the same transaction when that is a call's record, or by the journal's thread
/// about 1 ms after it when no statement comes. A power loss may lose the last commits before
/// a checkpoint (the only `fsync`), never corrupt the file. Several processes on one machine
/// may open the same file. Files on a network file system are not supported (SQLite's
/// WAL needs shared memory).
///
/// Statements run one at a time in the order they were asked for, on a thread the journal
/// starts for itself; none waits for a lock on the caller's task: a file another connection
/// holds locked (a `sqlite3` shell, a backup) never stalls an async runtime's workers. A call's
/// record runs on the caller only when the connection is free, nothing is queued before it and
/// no other connection holds the lock (it is tried without waiting, and handed to the thread
/// when it would wait), in one transaction with the outcomes deferred before it: a binding
/// call of a program that makes its calls one after another costs one commit, its start
/// together with the previous call's outcome. Checkpoints, the only `fsync`, are the
/// thread's. A statement waits at most the busy timeout ([`DEFAULT_BUSY_TIMEOUT`], 2 s;
/// [`with_busy_timeout`](Self::with_busy_timeout)) from the moment it was asked for, then fails
/// with [`JournalError::Locked`].
///
/// The journal holds every program, every call's arguments and every outcome verbatim. A file
/// it creates gets mode `0600` whatever the umask (its `-wal` and `-shm` files copy the
/// file's mode); an existing file whose group or others may read it is used, with a
/// `tracing` warning and [`readable_by_others`](Self::readable_by_others) naming it. Its
/// contents are bounded ([`DEFAULT_MAX_FILE_BYTES`], 1 GiB;
/// [`with_max_file_bytes`](Self::with_max_file_bytes)): past the bound a new run or a new call
/// is refused with [`JournalError::Full`], while runs under way may still record how their
/// calls and they themselves end. The write-ahead log is cut back to 16 MiB after each
/// checkpoint.
///
/// A run is claimed ([`JournalStore::claim`]) by a row naming the process (pid and, on Linux,
/// its start time from `/proc/<pid>/stat`, so a later process reusing the pid is not taken
/// for the owner); a claim whose process is gone is taken over.
///
/// The file is marked with `application_id` 0x4453484A ("DSHJ") and a schema version
/// (`user_version`); opening a file that is not SQLite, belongs to another application or has a
/// newer schema fails with [`JournalError::Unusable`] and leaves it byte for byte untouched
/// (the marks are read before anything is written, WAL mode included).
///
/// Continuations of its parked runs are signed with the secret in the file beside it
/// ([`ContinuationSecret::path_for`]: `<path>.secret`, mode 0600), made on first use.
pub struct SqliteJournal {
    /// The journal thread's queue; `None` once dropped.
    jobs: Option<mpsc::Sender<Message>>,
    /// The connection (the thread takes it for each job) and how many jobs are queued.
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// This process, as an owner row names it.
    me: Process,
    /// The continuation secret beside the file, read (or made) on first use.
    secret: ContinuationSecretFile,
    busy_timeout: Duration,
    /// The journal's files others could read when it was opened, with their permission bits.
    exposed: Vec<(PathBuf, u32)>,
}

/// One statement (or a few in a transaction) for the journal thread.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// What the journal thread is sent.
enum Message {
    /// Run this job (its deferred records first).
    Job(Job),
    /// Deferred records wait: write them within [`FLUSH_AFTER`] unless a statement on the
    /// caller has written them by then.
    Flush,
}

/// How long the thread leaves deferred records for a caller's statement to write with its own
/// (one commit for both): a run's next record comes microseconds after a call's outcome.
const FLUSH_AFTER: Duration = Duration::from_millis(1);

/// One call's record, as a statement writes it.
#[derive(Clone)]
struct Record {
    run_id: String,
    seq: i64,
    tool: String,
    args: String,
    state: String,
}

impl Record {
    fn of(run_id: &str, entry: &JournalEntry) -> Result<Record, JournalError> {
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

    fn len(&self) -> usize {
        self.tool.len() + self.args.len() + self.state.len()
    }
}

/// What the caller's fast path and the journal thread share.
struct Shared {
    connection: Mutex<Connection>,
    /// Jobs sent to the thread and not yet run: the fast path waits its turn behind them.
    queued: AtomicUsize,
    /// Statements run since the last checkpoint (reads counted too: an early checkpoint
    /// costs little).
    writes: AtomicU64,
    /// Records of [`JournalStore::put_deferred`] not yet written, oldest first: whoever holds
    /// `connection` next writes them before anything else, in the same transaction as a
    /// call's record. Taken only by the holder of `connection`.
    deferred: Mutex<Vec<Record>>,
    /// Set while the thread has been told of deferred records ([`Message::Flush`]).
    flush_due: AtomicBool,
    /// The busy timeout in ms, for the thread's own writes of deferred records.
    busy_ms: AtomicU64,
    /// The bound of the file's contents, in bytes.
    max_file_bytes: AtomicU64,
}

impl Shared {
    /// Writes the deferred records, then `own`, in one transaction. A deferred record refused
    /// for room is dropped (its call's outcome stays unknown) and `own` is not written: the
    /// error is [`JournalError::Full`]. On any other error nothing is written and the deferred
    /// records stay for the next statement.
    fn flush(&self, connection: &mut Connection, own: Option<&Record>) -> Result<(), JournalError> {
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
const CHECKPOINT_EVERY: u64 = 384;

impl std::fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteJournal").finish_non_exhaustive()
    }
}

impl Drop for SqliteJournal {
    fn drop(&mut self) {
        // The queue closed, the thread runs what is queued (each bounded by the busy timeout)
        // and closes the file: once dropped, the journal holds no lock and no descriptor.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn store(error: &rusqlite::Error) -> JournalError {
    match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            // The timeout is filled in by `SqliteJournal::call`, which knows it.
            JournalError::Locked { timeout_ms: 0 }
        }
        _ => JournalError::Store(error.to_string()),
    }
}

fn corrupt(error: &serde_json::Error) -> JournalError {
    JournalError::Corrupt(error.to_string())
}

/// A process as an owner row names it: its pid and its start time (clock ticks after boot,
/// field 22 of `/proc/<pid>/stat`; 0 where there is no `/proc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Process {
    pid: u32,
    started: u64,
}

impl Process {
    fn me() -> Self {
        let pid = std::process::id();
        Process {
            pid,
            started: start_time(pid).unwrap_or(0),
        }
    }

    /// Whether the process still runs (a pid reused by a later process does not count).
    fn alive(self) -> bool {
        if Path::new("/proc/self/stat").exists() {
            return start_time(self.pid) == Some(self.started);
        }
        let Some(pid) = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return false;
        };
        // Signal 0 only checks: no such process is ESRCH; another user's is EPERM (alive).
        !matches!(
            rustix::process::test_kill_process(pid),
            Err(rustix::io::Errno::SRCH)
        )
    }
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`; the fields are counted after the command
/// name's closing parenthesis, as the name may hold spaces and parentheses.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Creates `path` empty with mode `0600` unless it exists (a URI or `:memory:` is left to
/// SQLite). The mode is set after creation too, so the umask cannot take bits away.
#[cfg(unix)]
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let text = path.to_string_lossy();
    if text.starts_with("file:") || text == ":memory:" {
        return Ok(());
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE_MODE)
        .open(path)
    {
        Ok(file) => file.set_permissions(std::fs::Permissions::from_mode(PRIVATE_MODE)),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}

/// The journal's files (`path`, its `-wal` and `-shm`) whose group or others may read or
/// write them, with their permission bits.
fn exposed_files(path: &Path) -> Vec<(PathBuf, u32)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut files = vec![path.to_owned()];
        for suffix in ["-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            files.push(PathBuf::from(name));
        }
        files
            .into_iter()
            .filter_map(|file| {
                let bits = std::fs::metadata(&file).ok()?.permissions().mode() & 0o777;
                (bits & 0o066 != 0).then_some((file, bits))
            })
            .collect()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Vec::new()
    }
}

/// Refuses what would grow the file past `max` bytes (its pages in use, `extra` more): a new
/// run or a new call.
fn check_room(connection: &Connection, extra: usize, max: u64) -> Result<(), JournalError> {
    let used: i64 = connection
        .query_row(
            "SELECT (SELECT page_count FROM pragma_page_count) * \
             (SELECT page_size FROM pragma_page_size)",
            [],
            |row| row.get(0),
        )
        .map_err(|error| store(&error))?;
    let used = u64::try_from(used).unwrap_or_default();
    if used.saturating_add(extra as u64) > max {
        return Err(JournalError::Full {
            used_bytes: used,
            max_bytes: max,
        });
    }
    Ok(())
}

/// `duration` in whole milliseconds, saturating.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The journal thread: runs the jobs in the order they were sent, writes deferred records
/// [`FLUSH_AFTER`] after it is told of them (again after that while another connection holds
/// the lock), checkpoints, and once the queue closes writes what is still deferred.
fn journal_thread(shared: &Shared, queue: &mpsc::Receiver<Message>) {
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
fn checkpoint(shared: &Shared, connection: &Connection) {
    if shared.writes.load(Ordering::Relaxed) >= CHECKPOINT_EVERY {
        shared.writes.store(0, Ordering::Relaxed);
        // PASSIVE never waits for a lock; what it cannot copy now, a later one does.
        let _ = connection.pragma_update(None, "wal_checkpoint", "PASSIVE");
    }
}

/// A claim number unique in this process (the owner row's pid tells processes apart).
fn next_claim() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl SqliteJournal {
    /// Opens the journal at `path` to read and write, creating it (and its schema) when the
    /// file does not exist or is empty: [`open_with`](Self::open_with) and [`OpenMode::Create`].
    ///
    /// # Errors
    /// [`JournalError::Unusable`] for a file that is not a journal of this version, and
    /// [`JournalError::Store`] when it cannot be opened or written.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, JournalError> {
        Self::open_with(path, OpenMode::Create)
    }

    /// Opens the journal at `path` as `mode` says. A journal of schema 1 opened to write gets
    /// the table of schema 2.
    ///
    /// # Errors
    /// [`JournalError::Missing`] when `mode` is not [`OpenMode::Create`] and there is no file,
    /// [`JournalError::Unusable`] for a file that is not a journal of this version (an empty
    /// file opened read-only included), and [`JournalError::Store`] when it cannot be opened or
    /// written.
    pub fn open_with(path: impl AsRef<Path>, mode: OpenMode) -> Result<Self, JournalError> {
        let path = path.as_ref();
        let unusable = |why: String| JournalError::Unusable(format!("{path:?}: {why}"));
        if mode != OpenMode::Create && !path.exists() {
            return Err(JournalError::Missing(path.display().to_string()));
        }
        // Made private before SQLite opens it: SQLite would create it 0644 less the umask,
        // and its `-wal` and `-shm` files take the file's mode.
        #[cfg(unix)]
        if mode == OpenMode::Create {
            create_private(path).map_err(|error| {
                JournalError::Store(format!("cannot create {}: {error}", path.display()))
            })?;
        }
        let exposed = exposed_files(path);
        // Whoever can write the journal can mark a parked call approved: a file others may
        // write is refused, as ssh refuses such a key file (readers are only warned about).
        if let Some((file, bits)) = exposed.iter().find(|(_, bits)| bits & 0o022 != 0) {
            return Err(JournalError::Unusable(format!(
                "{}: writable by other users (mode {bits:04o}), who could decide its runs; \
                 `chmod 600` it",
                file.display()
            )));
        }
        for (file, bits) in &exposed {
            tracing::warn!(
                file = %file.display(),
                mode = format_args!("{bits:04o}"),
                "the journal file is readable by other users; it holds every program, argument \
                 and result verbatim"
            );
        }
        let flags = match mode {
            OpenMode::Create => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
            OpenMode::Existing => OpenFlags::SQLITE_OPEN_READ_WRITE,
            OpenMode::ReadOnly => OpenFlags::SQLITE_OPEN_READ_ONLY,
        } | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut connection =
            Connection::open_with_flags(path, flags).map_err(|error| store(&error))?;
        connection
            .busy_timeout(DEFAULT_BUSY_TIMEOUT)
            .map_err(|error| store(&error))?;
        // Only reads until the file is known to be a journal (or empty): a foreign file is
        // refused exactly as it was found.
        let (application_id, version, tables): (i32, i32, i64) = connection
            .query_row(
                "SELECT (SELECT application_id FROM pragma_application_id), \
                 (SELECT user_version FROM pragma_user_version), \
                 (SELECT count(*) FROM sqlite_schema)",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .map_err(|error| unusable(format!("not a journal ({error})")))?;
        if application_id != APPLICATION_ID && application_id != 0 {
            return Err(unusable(format!(
                "another application's database (application_id {application_id:#x})"
            )));
        }
        if application_id == 0 && tables > 0 {
            return Err(unusable(
                "a SQLite database of something else (it has tables but no journal mark)"
                    .to_owned(),
            ));
        }
        if version > SCHEMA_VERSION {
            return Err(unusable(format!(
                "written by a newer version (schema {version}; this one reads {SCHEMA_VERSION})"
            )));
        }
        if mode == OpenMode::ReadOnly {
            if application_id == 0 {
                return Err(unusable("not a journal (empty)".to_owned()));
            }
            return Self::start(connection, exposed, path);
        }
        connection
            .pragma_update_and_check(None, "journal_mode", "wal", |row| row.get::<_, String>(0))
            .map_err(|error| store(&error))?;
        connection
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(|error| store(&error))?;
        connection
            .pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)
            .map_err(|error| store(&error))?;
        if application_id == 0 || version < SCHEMA_VERSION {
            // Another process may be creating or upgrading it at the same moment: decide under
            // the write lock.
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|error| store(&error))?;
            let (id, tables): (i32, i64) = tx
                .query_row(
                    "SELECT (SELECT application_id FROM pragma_application_id), \
                     (SELECT count(*) FROM sqlite_schema)",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .map_err(|error| store(&error))?;
            if id == 0 {
                if tables > 0 {
                    return Err(unusable(
                        "a SQLite database of something else (it has tables but no journal mark)"
                            .to_owned(),
                    ));
                }
                tx.execute_batch(SCHEMA).map_err(|error| store(&error))?;
                tx.pragma_update(None, "application_id", APPLICATION_ID)
                    .map_err(|error| store(&error))?;
            } else if id != APPLICATION_ID {
                return Err(unusable(format!(
                    "another application's database (application_id {id:#x})"
                )));
            }
            tx.execute_batch(OWNERS).map_err(|error| store(&error))?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(|error| store(&error))?;
            tx.commit().map_err(|error| store(&error))?;
        }
        Self::start(connection, exposed, path)
    }

    /// The journal over `connection`, its statements run by a thread of its own.
    fn start(
        connection: Connection,
        exposed: Vec<(PathBuf, u32)>,
        path: &Path,
    ) -> Result<Self, JournalError> {
        // Checkpoints are the thread's (`Shared::writes`), never a commit's on the caller.
        connection
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(|error| store(&error))?;
        let shared = Arc::new(Shared {
            connection: Mutex::new(connection),
            queued: AtomicUsize::new(0),
            writes: AtomicU64::new(0),
            deferred: Mutex::new(Vec::new()),
            flush_due: AtomicBool::new(false),
            busy_ms: AtomicU64::new(millis(DEFAULT_BUSY_TIMEOUT)),
            max_file_bytes: AtomicU64::new(DEFAULT_MAX_FILE_BYTES),
        });
        let (jobs, queue) = mpsc::channel::<Message>();
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("dsh-journal".to_owned())
            .spawn(move || journal_thread(&theirs, &queue))
            .map_err(|error| {
                JournalError::Store(format!("cannot start the journal's thread: {error}"))
            })?;
        Ok(SqliteJournal {
            jobs: Some(jobs),
            shared,
            thread: Some(thread),
            me: Process::me(),
            secret: ContinuationSecretFile::beside(path),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            exposed,
        })
    }

    /// How long a statement may wait for another connection's lock, counted from the moment it
    /// was asked for; past it the statement fails with [`JournalError::Locked`].
    #[must_use]
    pub fn with_busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self.shared
            .busy_ms
            .store(millis(timeout), Ordering::Relaxed);
        self
    }

    /// The bound of the file's contents, in bytes (SQLite's pages in use, the write-ahead log's
    /// included): past it a new run or a new call is refused with [`JournalError::Full`].
    #[must_use]
    pub fn with_max_file_bytes(self, bytes: u64) -> Self {
        self.shared.max_file_bytes.store(bytes, Ordering::Relaxed);
        self
    }

    /// The journal's files (the file, its `-wal` and `-shm`) that other users could read when
    /// it was opened (group or other read permission), with their permission bits: each was
    /// warned about through `tracing`. Empty for a private journal.
    pub fn readable_by_others(&self) -> &[(PathBuf, u32)] {
        &self.exposed
    }

    /// Runs `job` on the journal thread, its lock waits bounded by what is left of the busy
    /// timeout.
    fn call<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Connection, Process) -> Result<T, JournalError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, JournalError>> {
        let (reply, answer) = futures::channel::oneshot::channel();
        let (timeout, queued, me) = (self.busy_timeout, Instant::now(), self.me);
        let timeout_ms = millis(timeout);
        let shared = Arc::clone(&self.shared);
        let sent = self.jobs.as_ref().is_some_and(|jobs| {
            self.shared.queued.fetch_add(1, Ordering::AcqRel);
            let sent = jobs.send(Message::Job(Box::new(
                move |connection: &mut Connection| {
                    let left = timeout.saturating_sub(queued.elapsed());
                    let result = connection
                        .busy_timeout(left)
                        .map_err(|error| store(&error))
                        .and_then(|()| shared.flush(connection, None))
                        .and_then(|()| job(connection, me))
                        .map_err(|error| match error {
                            JournalError::Locked { .. } => JournalError::Locked { timeout_ms },
                            other => other,
                        });
                    shared.writes.fetch_add(1, Ordering::Relaxed);
                    let _ = reply.send(result);
                },
            )));
            if sent.is_err() {
                self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            }
            sent.is_ok()
        });
        Box::pin(async move {
            let gone = || JournalError::Store("the journal's thread has ended".to_owned());
            if !sent {
                return Err(gone());
            }
            answer.await.unwrap_or_else(|_| Err(gone()))
        })
    }

    /// Runs `job` on the caller when it cannot wait: nothing is queued for the thread (the
    /// order statements were asked for is kept), no job holds the connection, and SQLite's busy
    /// timeout is 0, so a lock held by another connection fails the statement at once instead
    /// of being waited for. Then (and only then, `job` having written nothing) it goes to the
    /// thread as [`call`](Self::call) sends it, its wait bounded by the busy timeout. No
    /// checkpoint runs here (`wal_autocheckpoint` is off; the thread makes them): with
    /// `synchronous = NORMAL` a commit in WAL mode appends to the log without an `fsync`.
    ///
    /// Each hand-off to the thread and back is two wake-ups of threads that may each wait for
    /// a core; a live binding call's start is awaited here (its outcome is deferred and
    /// written with the next start), so this path is most of its journal's cost.
    /// Only for a job that is one statement (or one transaction), so a retry on the thread
    /// repeats nothing that was written.
    fn call_inline_first<T: Send + 'static>(
        &self,
        job: impl Fn(&mut Connection, Process) -> Result<T, JournalError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, JournalError>> {
        if let Some(mut connection) = self.shared.connection.try_lock()
            && self.shared.queued.load(Ordering::Acquire) == 0
            && connection.busy_timeout(Duration::ZERO).is_ok()
        {
            match job(&mut connection, self.me) {
                Err(JournalError::Locked { .. }) => {}
                done => {
                    self.shared.writes.fetch_add(1, Ordering::Relaxed);
                    if self.shared.writes.load(Ordering::Relaxed) >= CHECKPOINT_EVERY {
                        // The thread checkpoints after this (empty) job.
                        drop(self.call(|_, _| Ok(())));
                    }
                    return Box::pin(std::future::ready(done));
                }
            }
        }
        self.call(job)
    }

    fn record(
        run_id: String,
        program: &str,
        status: &str,
        updated_ms: i64,
    ) -> Result<RunRecord, JournalError> {
        Ok(RunRecord {
            run_id,
            program: serde_json::from_str(program).map_err(|e| corrupt(&e))?,
            status: serde_json::from_str(status).map_err(|e| corrupt(&e))?,
            updated_ms: u64::try_from(updated_ms).unwrap_or_default(),
        })
    }

    fn get(connection: &Connection, run_id: &str) -> Result<Option<RunRecord>, JournalError> {
        let row = connection
            .query_row(
                "SELECT program, status, updated_ms FROM runs WHERE run_id = ?1",
                params![run_id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                },
            )
            .optional()
            .map_err(|error| store(&error))?;
        row.map(|(program, status, updated)| {
            Self::record(run_id.to_owned(), &program, &status, updated)
        })
        .transpose()
    }
}

fn now_ms() -> i64 {
    i64::try_from(crate::events::unix_ms()).unwrap_or(i64::MAX)
}

fn text<T: serde::Serialize>(value: &T) -> Result<String, JournalError> {
    serde_json::to_string(value).map_err(|e| corrupt(&e))
}

impl JournalStore for SqliteJournal {
    fn open_run<'a>(
        &'a self,
        run_id: &'a str,
        program: &'a Value,
    ) -> BoxFuture<'a, Result<RunRecord, JournalError>> {
        let (run_id, program) = (run_id.to_owned(), program.clone());
        let max = self.shared.max_file_bytes.load(Ordering::Relaxed);
        Box::pin(self.call(move |connection, _| {
            let program_text = crate::json::compact(&program, true);
            let status = text(&RunStatus::Running)?;
            if Self::get(connection, &run_id)?.is_none() {
                check_room(connection, program_text.len() + run_id.len(), max)?;
            }
            connection
                .execute(
                    "INSERT INTO runs (run_id, program, status, updated_ms) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (run_id) DO NOTHING",
                    params![run_id, program_text, status, now_ms()],
                )
                .map_err(|error| store(&error))?;
            let record = Self::get(connection, &run_id)?
                .ok_or_else(|| JournalError::UnknownRun(run_id.clone()))?;
            if let Some(differs) = super::program_differs(&record.program, &program) {
                return Err(JournalError::ProgramMismatch { run_id, differs });
            }
            Ok(record)
        }))
    }

    fn run<'a>(
        &'a self,
        run_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<RunRecord>, JournalError>> {
        let run_id = run_id.to_owned();
        Box::pin(self.call(move |connection, _| Self::get(connection, &run_id)))
    }

    fn runs(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, JournalError>> {
        Box::pin(self.call(|connection, _| {
            let mut statement = connection
                .prepare(
                    "SELECT run_id, program, status, updated_ms FROM runs \
                     ORDER BY updated_ms DESC, run_id",
                )
                .map_err(|error| store(&error))?;
            let rows = statement
                .query_map([], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, i64>(3)?,
                    ))
                })
                .map_err(|error| store(&error))?;
            rows.map(|row| {
                let (id, program, status, updated) = row.map_err(|error| store(&error))?;
                Self::record(id, &program, &status, updated)
            })
            .collect()
        }))
    }

    fn set_status<'a>(
        &'a self,
        run_id: &'a str,
        status: &'a RunStatus,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        let run_id = run_id.to_owned();
        let status = text(status);
        Box::pin(self.call(move |connection, _| {
            let changed = connection
                .execute(
                    "UPDATE runs SET status = ?2, updated_ms = ?3 WHERE run_id = ?1",
                    params![run_id, status?, now_ms()],
                )
                .map_err(|error| store(&error))?;
            if changed == 0 {
                return Err(JournalError::UnknownRun(run_id));
            }
            Ok(())
        }))
    }

    fn entries<'a>(
        &'a self,
        run_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<JournalEntry>, JournalError>> {
        let run_id = run_id.to_owned();
        Box::pin(self.call(move |connection, _| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT seq, tool, args, state FROM calls WHERE run_id = ?1 ORDER BY seq",
                )
                .map_err(|error| store(&error))?;
            let rows = statement
                .query_map(params![run_id], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                    ))
                })
                .map_err(|error| store(&error))?;
            let mut entries = Vec::new();
            for row in rows {
                let (seq, tool, args, state) = row.map_err(|error| store(&error))?;
                let seq = u64::try_from(seq).map_err(|_| {
                    JournalError::Corrupt(format!("negative sequence number {seq}"))
                })?;
                // Calls are journaled in order from 0: a gap is damage, never a divergence.
                if seq != entries.len() as u64 {
                    return Err(JournalError::Corrupt(format!(
                        "run \"{run_id}\" misses call #{}",
                        entries.len()
                    )));
                }
                let state: EntryState = serde_json::from_str(&state).map_err(|e| corrupt(&e))?;
                entries.push(JournalEntry {
                    seq,
                    tool,
                    args,
                    state,
                });
            }
            Ok(entries)
        }))
    }

    fn put<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        let record = match Record::of(run_id, entry) {
            Ok(record) => record,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let shared = Arc::clone(&self.shared);
        // One transaction, so one commit, for the records deferred before it and this one.
        Box::pin(
            self.call_inline_first(move |connection, _| shared.flush(connection, Some(&record))),
        )
    }

    /// Keeps the record for the next statement to write in its transaction, and tells the
    /// thread to write it within [`FLUSH_AFTER`] if none comes: a call's outcome and the next
    /// call's start are one commit.
    fn put_deferred<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        let record = match Record::of(run_id, entry) {
            Ok(record) => record,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        self.shared.deferred.lock().push(record);
        if !self.shared.flush_due.swap(true, Ordering::SeqCst)
            && let Some(jobs) = &self.jobs
        {
            let _ = jobs.send(Message::Flush);
        }
        Box::pin(std::future::ready(Ok(())))
    }

    /// Nothing to wait for when no record is kept; else a statement of nothing, which writes
    /// the kept records first.
    fn settle<'a>(&'a self, _run_id: &'a str) -> BoxFuture<'a, Result<(), JournalError>> {
        if self.shared.deferred.lock().is_empty() {
            return Box::pin(std::future::ready(Ok(())));
        }
        self.call(|_connection, _me| Ok(()))
    }

    fn claim<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<u64, JournalError>> {
        let run_id = run_id.to_owned();
        Box::pin(self.call(move |connection, me| {
            let claim = next_claim();
            // Read and write under the write lock: of two processes taking over a dead owner's
            // claim at once, the second sees the first's row.
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|error| store(&error))?;
            let owner = tx
                .query_row(
                    "SELECT pid, started, claim FROM owners WHERE run_id = ?1",
                    params![run_id],
                    |row| {
                        Ok((
                            row.get::<_, i64>(0)?,
                            row.get::<_, i64>(1)?,
                            row.get::<_, i64>(2)?,
                        ))
                    },
                )
                .optional()
                .map_err(|error| store(&error))?;
            if let Some((pid, started, _)) = owner {
                let owner = Process {
                    pid: u32::try_from(pid).unwrap_or(0),
                    started: u64::try_from(started).unwrap_or(0),
                };
                if owner.alive() {
                    return Err(JournalError::Busy {
                        run_id,
                        pid: owner.pid,
                    });
                }
            }
            tx.execute(
                "INSERT INTO owners (run_id, pid, started, claim) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (run_id) DO UPDATE SET pid = ?2, started = ?3, claim = ?4",
                params![
                    run_id,
                    i64::from(me.pid),
                    i64::try_from(me.started).unwrap_or(i64::MAX),
                    i64::try_from(claim).unwrap_or(i64::MAX)
                ],
            )
            .map_err(|error| store(&error))?;
            tx.commit().map_err(|error| store(&error))?;
            Ok(claim)
        }))
    }

    fn continuation_secret(&self) -> Result<ContinuationSecret, JournalError> {
        self.secret.get()
    }

    fn release<'a>(
        &'a self,
        run_id: &'a str,
        claim: u64,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        let run_id = run_id.to_owned();
        Box::pin(self.call(move |connection, me| {
            connection
                .execute(
                    "DELETE FROM owners WHERE run_id = ?1 AND pid = ?2 AND claim = ?3",
                    params![
                        run_id,
                        i64::from(me.pid),
                        i64::try_from(claim).unwrap_or(i64::MAX)
                    ],
                )
                .map_err(|error| store(&error))?;
            Ok(())
        }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn unusable(result: Result<SqliteJournal, JournalError>) -> String {
        match result {
            Err(JournalError::Unusable(message)) => message,
            other => panic!("expected an unusable file, got {other:?}"),
        }
    }

    #[test]
    fn foreign_newer_and_damaged_files_are_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let foreign = dir.path().join("foreign.db");
        let connection = Connection::open(&foreign).unwrap();
        connection
            .pragma_update(None, "application_id", 0x1234)
            .unwrap();
        drop(connection);
        assert!(unusable(SqliteJournal::open(&foreign)).contains("another application"));

        let other = dir.path().join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t (x);")
            .unwrap();
        assert!(unusable(SqliteJournal::open(&other)).contains("something else"));

        let newer = dir.path().join("newer.db");
        drop(SqliteJournal::open(&newer).unwrap());
        Connection::open(&newer)
            .unwrap()
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        assert!(unusable(SqliteJournal::open(&newer)).contains("newer version"));

        let garbage = dir.path().join("garbage.db");
        std::fs::write(&garbage, b"SQLite format 3\0 but not really, just text").unwrap();
        unusable(SqliteJournal::open(&garbage));
    }

    #[test]
    fn a_foreign_database_is_refused_byte_for_byte_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        let before = std::fs::read(&other).unwrap();
        // Bytes 18-19 are 01 01 in rollback-journal mode and would be 02 02 after a WAL switch.
        assert_eq!(&before[18..20], &[1, 1]);
        for mode in [OpenMode::Create, OpenMode::Existing, OpenMode::ReadOnly] {
            assert!(unusable(SqliteJournal::open_with(&other, mode)).contains("something else"));
            assert_eq!(std::fs::read(&other).unwrap(), before, "{mode:?}");
        }
    }

    #[test]
    fn a_read_only_journal_reads_and_refuses_writes_and_a_missing_one_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        assert_eq!(
            SqliteJournal::open_with(&path, OpenMode::ReadOnly).unwrap_err(),
            JournalError::Missing(path.display().to_string())
        );
        assert!(SqliteJournal::open_with(&path, OpenMode::Existing).is_err());
        assert!(!path.exists());
        let program = json!({"code": "return 1", "description": "one"});
        futures::executor::block_on(async {
            SqliteJournal::open(&path)
                .unwrap()
                .open_run("r", &program)
                .await
                .unwrap();
            let reader = SqliteJournal::open_with(&path, OpenMode::ReadOnly).unwrap();
            assert_eq!(reader.runs().await.unwrap().len(), 1);
            assert!(matches!(
                reader.set_status("r", &RunStatus::RolledBack).await,
                Err(JournalError::Store(_))
            ));
        });
    }

    #[test]
    fn a_put_runs_on_the_caller_unless_it_would_wait_for_a_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let journal = SqliteJournal::open(&path).unwrap();
        let program = json!({"code": "return 1", "description": "one"});
        futures::executor::block_on(journal.open_run("r", &program)).unwrap();
        let entry = JournalEntry {
            seq: 0,
            tool: "tools.a".to_owned(),
            args: "{}".to_owned(),
            state: EntryState::Started,
        };
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        // A journal whose thread has ended: only what runs on the caller is written.
        let mut direct = SqliteJournal::open(&path).unwrap();
        drop(direct.jobs.take());
        // The connection free and nothing queued: written by the caller, done at once.
        let mut put = direct.put("r", &entry);
        assert_eq!(put.as_mut().poll(&mut cx), std::task::Poll::Ready(Ok(())));
        drop(put);
        // Another connection holds the write lock: the put is not waited for on the caller
        // (that would take the whole busy timeout) but handed to the thread, which waits.
        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        assert_eq!(
            futures::executor::block_on(direct.put("r", &entry)),
            Err(JournalError::Store(
                "the journal's thread has ended".to_owned()
            ))
        );
        let mut put = journal.put("r", &entry);
        assert!(put.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            futures::executor::block_on(put),
            Err(JournalError::Locked {
                timeout_ms: u64::try_from(DEFAULT_BUSY_TIMEOUT.as_millis()).unwrap()
            })
        );
        holder.execute_batch("ROLLBACK").unwrap();
        futures::executor::block_on(journal.put("r", &entry)).unwrap();
        assert_eq!(
            futures::executor::block_on(journal.entries("r")).unwrap(),
            std::slice::from_ref(&entry)
        );
    }

    #[tokio::test]
    async fn a_run_has_one_claim_at_a_time_and_a_dead_owners_claim_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let first = SqliteJournal::open(&path).unwrap();
        let second = SqliteJournal::open(&path).unwrap();
        let claim = first.claim("r").await.unwrap();
        let me = std::process::id();
        assert_eq!(
            second.claim("r").await,
            Err(JournalError::Busy {
                run_id: "r".to_owned(),
                pid: me
            })
        );
        // Another run is not held.
        second.claim("other").await.unwrap();
        // Releasing someone else's claim number changes nothing.
        second.release("r", claim + 1000).await.unwrap();
        assert!(second.claim("r").await.is_err());
        first.release("r", claim).await.unwrap();
        let taken = second.claim("r").await.unwrap();
        // A claim whose process is gone (a pid with another start time) is taken over.
        second
            .call(|connection, _| {
                connection
                    .execute(
                        "UPDATE owners SET started = started + 1 WHERE run_id = 'r'",
                        [],
                    )
                    .map_err(|error| store(&error))
            })
            .await
            .unwrap();
        first.claim("r").await.unwrap();
        second.release("r", taken).await.unwrap();
        assert!(second.claim("r").await.is_err(), "the new claim stands");
    }

    #[tokio::test]
    async fn a_run_keeps_its_program_and_its_calls_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let program = json!({"code": "return 1", "description": "one"});
        let first = SqliteJournal::open(&path).unwrap();
        // A second connection, as another process would hold.
        let second = SqliteJournal::open(&path).unwrap();
        first.open_run("r", &program).await.unwrap();
        let entry = JournalEntry {
            seq: 0,
            tool: "tools.a".to_owned(),
            args: "{}".to_owned(),
            state: EntryState::Started,
        };
        first.put("r", &entry).await.unwrap();
        assert_eq!(second.entries("r").await.unwrap(), [entry]);
        let other = json!({"code": "return 2", "description": "two"});
        assert!(matches!(
            second.open_run("r", &other).await,
            Err(JournalError::ProgramMismatch { differs, .. }) if differs.contains("code")
        ));
        assert_eq!(
            second.set_status("nope", &RunStatus::Running).await,
            Err(JournalError::UnknownRun("nope".to_owned()))
        );
        let gap = JournalEntry {
            seq: 2,
            ..second.entries("r").await.unwrap().remove(0)
        };
        second.put("r", &gap).await.unwrap();
        assert!(matches!(
            first.entries("r").await,
            Err(JournalError::Corrupt(_))
        ));
    }
    /// The `-wal` file's length: it grows by a frame for each page a commit changes.
    fn wal_len(path: &Path) -> u64 {
        std::fs::metadata(path.with_extension("db-wal")).map_or(0, |meta| meta.len())
    }

    fn started(seq: u64) -> JournalEntry {
        JournalEntry {
            seq,
            tool: "tools.a".to_owned(),
            args: "{}".to_owned(),
            state: EntryState::Started,
        }
    }

    fn finished(seq: u64) -> JournalEntry {
        JournalEntry {
            state: EntryState::Finished {
                outcome: super::super::CallOutcome::Ok { value: json!(seq) },
            },
            ..started(seq)
        }
    }

    /// A journal at `path` holding run `r`.
    fn journal_with_run(path: &Path) -> SqliteJournal {
        let journal = SqliteJournal::open(path).unwrap();
        let program = json!({"code": "return 1", "description": "one"});
        futures::executor::block_on(journal.open_run("r", &program)).unwrap();
        journal
    }

    /// A deferred outcome is written by the next call's record in the same commit: the log
    /// grows by the pages of one commit (the calls table's leaf and its key's), as for a
    /// start alone, not by those of two.
    #[test]
    fn a_deferred_outcome_and_the_next_start_are_one_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let journal = journal_with_run(&path);
        // Its thread ended: nothing is written but by the caller's statements.
        let mut direct = SqliteJournal::open(&path).unwrap();
        drop(direct.jobs.take());
        let put = |entry: &JournalEntry| futures::executor::block_on(direct.put("r", entry));
        put(&started(0)).unwrap();
        let before = wal_len(&path);
        put(&started(1)).unwrap();
        let one_commit = wal_len(&path) - before;
        assert!(one_commit > 0);
        let before = wal_len(&path);
        futures::executor::block_on(direct.put_deferred("r", &finished(0))).unwrap();
        assert_eq!(wal_len(&path), before, "not written yet");
        put(&started(2)).unwrap();
        assert_eq!(wal_len(&path) - before, one_commit);
        let entries = futures::executor::block_on(journal.entries("r")).unwrap();
        assert_eq!(entries, [finished(0), started(1), started(2)]);
    }

    /// With no statement after it, a deferred outcome is written by the journal's thread; one
    /// still deferred when the journal is dropped is written before the file is closed.
    #[test]
    fn a_deferred_outcome_is_written_without_a_next_statement() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let journal = journal_with_run(&path);
        futures::executor::block_on(journal.put("r", &started(0))).unwrap();
        futures::executor::block_on(journal.put_deferred("r", &finished(0))).unwrap();
        let reader = Connection::open(&path).unwrap();
        let state = || -> String {
            reader
                .query_row("SELECT state FROM calls WHERE seq = 0", [], |row| {
                    row.get(0)
                })
                .unwrap()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while state() == text(&EntryState::Started).unwrap() {
            assert!(Instant::now() < deadline, "the outcome was never written");
            std::thread::sleep(Duration::from_millis(5));
        }
        futures::executor::block_on(journal.put("r", &started(1))).unwrap();
        futures::executor::block_on(journal.put_deferred("r", &finished(1))).unwrap();
        drop(journal);
        let journal = SqliteJournal::open(&path).unwrap();
        let entries = futures::executor::block_on(journal.entries("r")).unwrap();
        assert_eq!(entries, [finished(0), finished(1)]);
    }

    /// While another connection holds the write lock, the statement after a deferred outcome
    /// fails as locked and writes neither; the outcome stays deferred and is written once the
    /// lock is released.
    #[test]
    fn a_deferred_outcome_outlives_a_held_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let journal = journal_with_run(&path).with_busy_timeout(Duration::from_millis(50));
        futures::executor::block_on(journal.put("r", &started(0))).unwrap();
        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        futures::executor::block_on(journal.put_deferred("r", &finished(0))).unwrap();
        assert_eq!(
            futures::executor::block_on(journal.put("r", &started(1))),
            Err(JournalError::Locked { timeout_ms: 50 })
        );
        holder.execute_batch("ROLLBACK").unwrap();
        let entries = futures::executor::block_on(journal.entries("r")).unwrap();
        assert_eq!(entries, [finished(0)]);
    }
}
