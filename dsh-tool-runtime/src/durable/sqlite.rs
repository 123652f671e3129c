//! The embedded journal: one SQLite file in WAL mode.

use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use super::{EntryState, JournalEntry, JournalError, JournalStore, RunRecord, RunStatus};

/// `application_id` of a journal file: "DSHJ".
const APPLICATION_ID: i32 = 0x4453_484A;
/// The schema this version writes (`user_version`).
const SCHEMA_VERSION: i32 = 1;
/// How long a writer waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

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

/// A [`JournalStore`] in one SQLite file (bundled SQLite, no server).
///
/// The file is in WAL mode with `synchronous = NORMAL`: a write is durable against a crash of
/// the process (what the journal is for) as soon as its statement returns; a power loss may
/// lose the last writes before a checkpoint, never corrupt the file. Several processes on one
/// machine may open the same file: a writer waits up to 30 s for another's lock. Files on a
/// network file system are not supported (SQLite's WAL needs shared memory).
///
/// The file is marked with `application_id` 0x4453484A ("DSHJ") and a schema version
/// (`user_version`); opening a file that is not SQLite, belongs to another application or has a
/// newer schema fails with [`JournalError::Unusable`] and leaves it untouched.
///
/// Each write is one statement run on the calling task (tens of microseconds on a local disk),
/// not moved to a blocking thread.
pub struct SqliteJournal {
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteJournal").finish_non_exhaustive()
    }
}

fn store(error: &rusqlite::Error) -> JournalError {
    JournalError::Store(error.to_string())
}

fn corrupt(error: &serde_json::Error) -> JournalError {
    JournalError::Corrupt(error.to_string())
}

impl SqliteJournal {
    /// Opens the journal at `path`, creating it (and its schema) when the file does not exist or
    /// is empty.
    ///
    /// # Errors
    /// [`JournalError::Unusable`] for a file that is not a journal of this version, and
    /// [`JournalError::Store`] when it cannot be opened or written.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, JournalError> {
        let path = path.as_ref();
        let unusable = |why: String| JournalError::Unusable(format!("{}: {why}", path.display()));
        let mut connection = Connection::open(path).map_err(|error| store(&error))?;
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|error| store(&error))?;
        // The first read of the header tells a file that is not SQLite at all.
        let application_id: i32 = connection
            .pragma_query_value(None, "application_id", |row| row.get(0))
            .map_err(|error| unusable(format!("not a journal ({error})")))?;
        let version: i32 = connection
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(|error| unusable(format!("not a journal ({error})")))?;
        if application_id != APPLICATION_ID && application_id != 0 {
            return Err(unusable(format!(
                "another application's database (application_id {application_id:#x})"
            )));
        }
        if version > SCHEMA_VERSION {
            return Err(unusable(format!(
                "written by a newer version (schema {version}; this one reads {SCHEMA_VERSION})"
            )));
        }
        connection
            .pragma_update_and_check(None, "journal_mode", "wal", |row| row.get::<_, String>(0))
            .map_err(|error| store(&error))?;
        connection
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(|error| store(&error))?;
        if application_id == 0 {
            // Another process may be creating it at the same moment: decide under the write lock.
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
                tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                    .map_err(|error| store(&error))?;
            } else if id != APPLICATION_ID {
                return Err(unusable(format!(
                    "another application's database (application_id {id:#x})"
                )));
            }
            tx.commit().map_err(|error| store(&error))?;
        }
        Ok(SqliteJournal {
            connection: Mutex::new(connection),
        })
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
        Box::pin(async move {
            let program_text = crate::json::compact(program, true);
            let status = text(&RunStatus::Running)?;
            let connection = self.connection.lock();
            connection
                .execute(
                    "INSERT INTO runs (run_id, program, status, updated_ms) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (run_id) DO NOTHING",
                    params![run_id, program_text, status, now_ms()],
                )
                .map_err(|error| store(&error))?;
            let record = Self::get(&connection, run_id)?
                .ok_or_else(|| JournalError::UnknownRun(run_id.to_owned()))?;
            if crate::json::compact(&record.program, true) != program_text {
                return Err(JournalError::ProgramMismatch(run_id.to_owned()));
            }
            Ok(record)
        })
    }

    fn run<'a>(
        &'a self,
        run_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<RunRecord>, JournalError>> {
        Box::pin(async move { Self::get(&self.connection.lock(), run_id) })
    }

    fn runs(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, JournalError>> {
        Box::pin(async move {
            let connection = self.connection.lock();
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
        })
    }

    fn set_status<'a>(
        &'a self,
        run_id: &'a str,
        status: &'a RunStatus,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        Box::pin(async move {
            let status = text(status)?;
            let changed = self
                .connection
                .lock()
                .execute(
                    "UPDATE runs SET status = ?2, updated_ms = ?3 WHERE run_id = ?1",
                    params![run_id, status, now_ms()],
                )
                .map_err(|error| store(&error))?;
            if changed == 0 {
                return Err(JournalError::UnknownRun(run_id.to_owned()));
            }
            Ok(())
        })
    }

    fn entries<'a>(
        &'a self,
        run_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<JournalEntry>, JournalError>> {
        Box::pin(async move {
            let connection = self.connection.lock();
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
        })
    }

    fn put<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        Box::pin(async move {
            let state = text(&entry.state)?;
            let seq = i64::try_from(entry.seq).map_err(|_| {
                JournalError::Store(format!("sequence number {} too large", entry.seq))
            })?;
            let connection = self.connection.lock();
            let mut statement = connection
                .prepare_cached(
                    "INSERT INTO calls (run_id, seq, tool, args, state) VALUES (?1, ?2, ?3, ?4, ?5) \
                     ON CONFLICT (run_id, seq) DO UPDATE SET tool = ?3, args = ?4, state = ?5",
                )
                .map_err(|error| store(&error))?;
            statement
                .execute(params![run_id, seq, entry.tool, entry.args, state])
                .map_err(|error| store(&error))?;
            Ok(())
        })
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
        assert_eq!(
            second.open_run("r", &other).await,
            Err(JournalError::ProgramMismatch("r".to_owned()))
        );
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
}
