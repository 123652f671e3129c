//! [`JournalStore`] on the SQLite journal: runs, entries, claims and the continuation secret.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::future::BoxFuture;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use super::file::{Process, check_room};
use super::writer::{Message, Record};
use super::{corrupt, next_claim, now_ms, store, text};
use crate::durable::{
    ContinuationSecret, EntryState, JournalEntry, JournalError, JournalStore, RunRecord, RunStatus,
    SqliteJournal,
};

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
            if let Some(differs) = crate::durable::program_differs(&record.program, &program) {
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
