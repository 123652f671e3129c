use serde_json::json;

use super::super::{EntryState, JournalEntry, JournalStore, RunStatus};
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
