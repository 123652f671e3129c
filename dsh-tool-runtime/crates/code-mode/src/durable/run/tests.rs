use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;

use serde_json::json;

use super::super::{ContinuationSecret, EntryState, JournalStore, RunRecord, SqliteJournal};
use super::lifecycle::LANGUAGE;
use super::*;

/// A SQLite journal that counts claims taken and releases finished.
struct Counted {
    inner: SqliteJournal,
    claims: AtomicUsize,
    releases: AtomicUsize,
}

impl JournalStore for Counted {
    fn open_run<'a>(
        &'a self,
        run_id: &'a str,
        program: &'a Value,
    ) -> BoxFuture<'a, Result<RunRecord, JournalError>> {
        self.inner.open_run(run_id, program)
    }
    fn run<'a>(
        &'a self,
        run_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<RunRecord>, JournalError>> {
        self.inner.run(run_id)
    }
    fn runs(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, JournalError>> {
        self.inner.runs()
    }
    fn set_status<'a>(
        &'a self,
        run_id: &'a str,
        status: &'a RunStatus,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        self.inner.set_status(run_id, status)
    }
    fn entries<'a>(
        &'a self,
        run_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<JournalEntry>, JournalError>> {
        self.inner.entries(run_id)
    }
    fn put<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        self.inner.put(run_id, entry)
    }
    fn continuation_secret(&self) -> Result<ContinuationSecret, JournalError> {
        self.inner.continuation_secret()
    }
    fn claim<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<u64, JournalError>> {
        Box::pin(async move {
            let claim = self.inner.claim(run_id).await?;
            self.claims.fetch_add(1, Ordering::SeqCst);
            Ok(claim)
        })
    }
    fn release<'a>(
        &'a self,
        run_id: &'a str,
        claim: u64,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        Box::pin(async move {
            self.inner.release(run_id, claim).await?;
            self.releases.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    }
}

/// A store holding run `r`, parked at its second call after a completed first one.
async fn parked_run(dir: &tempfile::TempDir) -> (Arc<Counted>, DurableRun) {
    let store = Arc::new(Counted {
        inner: SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        claims: AtomicUsize::new(0),
        releases: AtomicUsize::new(0),
    });
    let program = json!({"code": "x", LANGUAGE: "typescript"});
    store.open_run("r", &program).await.unwrap();
    let done = JournalEntry {
        seq: 0,
        tool: "tools.append_line".to_owned(),
        args: r#"{"line":"a"}"#.to_owned(),
        state: EntryState::Finished {
            outcome: CallOutcome::Ok { value: json!(1) },
        },
    };
    store.put("r", &done).await.unwrap();
    let waiting = JournalEntry {
        seq: 1,
        args: r#"{"line":"b"}"#.to_owned(),
        state: EntryState::Parked { reason: None },
        ..done
    };
    store.put("r", &waiting).await.unwrap();
    let status = RunStatus::Parked {
        seq: 1,
        tool: waiting.tool.clone(),
        args: waiting.args.clone(),
        reason: None,
    };
    store.set_status("r", &status).await.unwrap();
    let run = DurableRun::new(store.clone() as Arc<dyn JournalStore>, "r");
    (store, run)
}

// Checked the moment each refusal returns, with no await between: a claim left to a
// background release would make the very next approve, deny or rollback (from this
// process or another) read `Busy`.
#[tokio::test]
async fn a_refused_decision_or_rollback_has_released_its_claim_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run) = parked_run(&dir).await;
    let registry = Registry::new();
    let settled = |refusal: &Result<(), JournalError>| {
        assert_eq!(
            store.releases.load(Ordering::SeqCst),
            store.claims.load(Ordering::SeqCst),
            "a claim is still held after {refusal:?}"
        );
    };
    let continuation = registry.parked_run(&run).await.unwrap().continuation;
    let approved = registry
        .approve_run(run.store.clone(), &continuation)
        .await
        .map(|_| ());
    settled(&approved);
    assert!(
        matches!(&approved, Err(JournalError::Unresumable { .. })),
        "{approved:?}"
    );
    let denied = registry
        .deny_run(run.store.clone(), &continuation, "no")
        .await
        .map(|_| ());
    settled(&denied);
    assert!(
        matches!(&denied, Err(JournalError::Unresumable { .. })),
        "{denied:?}"
    );
    let rolled_back = registry.rollback_run(run.clone()).await.map(|_| ());
    settled(&rolled_back);
    assert!(
        matches!(&rolled_back, Err(JournalError::NoRevert { .. })),
        "{rolled_back:?}"
    );
    assert_eq!(store.claims.load(Ordering::SeqCst), 3);
}
