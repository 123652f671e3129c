//! The embedded journal: one SQLite file in WAL mode, used from a thread of its own.
//!
//! This file opens the journal and holds its settings; `writer.rs` is the journal thread,
//! `queries.rs` the [`JournalStore`](super::JournalStore) methods, `file.rs` the file and its owners.

mod file;
mod queries;
#[cfg(test)]
mod tests;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use super::continuation::ContinuationSecretFile;
use super::{JournalError, RunRecord};
use file::{Process, create_private, exposed_files, untrusted_file};
use writer::{CHECKPOINT_EVERY, Message, Shared, journal_thread};

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

/// `duration` in whole milliseconds, saturating.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
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
        // Whoever owns the file, or a link's target, can write it: as for the mode below.
        if mode != OpenMode::ReadOnly
            && let Some(why) = untrusted_file(path)
        {
            return Err(JournalError::Unusable(why));
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
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
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
