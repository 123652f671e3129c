//! Continuations of parked runs: the handle a person or a client approves or denies a parked
//! durable run with.
//!
//! A continuation is `dshc1.<claims>.<tag>`: the claims (JSON, base64url) name the run, the call
//! it waits at (its sequence number), a SHA-256 digest of the call's canonical arguments as they
//! were shown, the principal they were shown to — by a keyed digest only
//! ([`ContinuationSecret`]'s HMAC of the principal, so whoever reads a continuation learns no
//! session id or subject it could present) — who issued it and when it expires; the tag is
//! HMAC-SHA256 (RFC 2104) of the claims under the journal's secret ([`ContinuationSecret`]). A
//! decision is taken only for a continuation whose tag verifies, that has not expired, that is
//! presented by the principal it names, that an accepted issuer made, and whose run still waits at
//! that very call with those very arguments. The decision moves that call out of its parked state
//! in the journal, under the run's claim, so a continuation is used once: the same one again —
//! a retry sent twice — is refused and never decides the run's next call.
//!
//! The secret that signs them, and the file that keeps it, are in `secret.rs`.

mod secret;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use secret::ContinuationSecret;
#[cfg(feature = "durable")]
pub use secret::ContinuationSecretFile;

/// The error code of every refused continuation (forged, expired, another principal's, another
/// issuer's, used, or for a call the run no longer waits at).
pub const CONTINUATION_REFUSED: &str = "CONTINUATION_REFUSED";

/// How long a continuation stays valid unless the registry says otherwise
/// ([`crate::DurableExt::set_continuation_ttl`](crate::DurableExt::set_continuation_ttl)): one day.
pub const DEFAULT_CONTINUATION_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The prefix (format version) of a continuation.
const PREFIX: &str = "dshc1.";

/// The longest continuation read; anything longer is refused unread.
const MAX_CONTINUATION_BYTES: usize = 4096;

/// Bytes of a secret.
const SECRET_BYTES: usize = 32;

/// Who a continuation was shown to, and who may use it: the local owner of the journal (the
/// command line and a Rust host), one MCP session, or one OAuth subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal(String);

impl Principal {
    /// The journal's owner on this machine: whoever can read the journal's secret file (mode
    /// 0600) — the command line and a Rust host's own code.
    pub fn local() -> Self {
        Principal("local".to_owned())
    }

    /// The MCP session `id` (one client connection of `serve`).
    pub fn mcp_session(id: impl AsRef<str>) -> Self {
        Principal(format!("mcp-session:{}", id.as_ref()))
    }

    /// The OAuth subject of an access token: its `sub` claim as issued by `issuer` (its `iss`),
    /// so that the same `sub` from two issuers names two principals.
    pub fn oauth_subject(issuer: impl AsRef<str>, subject: impl AsRef<str>) -> Self {
        // JSON text keeps the pair unambiguous whatever characters either holds.
        let pair = serde_json::json!([issuer.as_ref(), subject.as_ref()]);
        Principal(format!("oauth:{pair}"))
    }

    /// Its text, e.g. `local`, `mcp-session:<id>`, `oauth:["<iss>","<sub>"]`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a continuation names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The run.
    pub run: String,
    /// The call it waits at.
    pub seq: u64,
    /// SHA-256 (hex) of the call's canonical arguments.
    pub args: String,
    /// Who it was shown to: [`ContinuationSecret::principal_tag`] of the principal.
    pub to: String,
    /// Who issued it: empty for the local owner, else the name of the serving face.
    pub by: String,
    /// Expiry, ms since the Unix epoch.
    pub exp: u64,
}

/// What a decision with a continuation must match besides its tag.
#[derive(Debug, Clone)]
pub struct Presenter<'a> {
    /// Who presents it.
    pub principal: &'a Principal,
    /// The issuers whose continuations are taken.
    pub issuers: &'a [String],
}

impl Claims {
    /// Claims for the call `seq` (canonical arguments `args`) of run `run`, shown to `to` (named
    /// by its digest under `secret`) by `by`, valid for `ttl` from now.
    pub fn new(
        secret: &ContinuationSecret,
        run: &str,
        seq: u64,
        args: &str,
        to: &Principal,
        by: &str,
        ttl: Duration,
    ) -> Self {
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        Claims {
            run: run.to_owned(),
            seq,
            args: args_digest(args),
            to: secret.principal_tag(to),
            by: by.to_owned(),
            exp: crate::events::unix_ms().saturating_add(ttl),
        }
    }

    /// Claims for the call `seq` of run `run` whose canonical arguments have the SHA-256 digest
    /// `digest` (hex), shown to the local owner (named by its digest under `secret`), valid for
    /// `ttl` from now.
    pub fn local_for_digest(
        secret: &ContinuationSecret,
        run: &str,
        seq: u64,
        digest: &str,
        ttl: Duration,
    ) -> Self {
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        Claims {
            run: run.to_owned(),
            seq,
            args: digest.to_owned(),
            to: secret.principal_tag(&Principal::local()),
            by: String::new(),
            exp: crate::events::unix_ms().saturating_add(ttl),
        }
    }

    /// The claims of `continuation` read without checking its tag: only to route it to the
    /// place that checks it.
    pub fn unverified(continuation: &str) -> Option<Self> {
        let (body, _) = continuation.strip_prefix(PREFIX)?.split_once('.')?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()
    }

    /// Refused unless it is unexpired, shown to `presenter`'s principal (its digest under
    /// `secret`, the secret the claims were opened with) and issued by one of its issuers.
    pub fn check(
        &self,
        presenter: &Presenter<'_>,
        secret: &ContinuationSecret,
    ) -> Result<(), ContinuationError> {
        if crate::events::unix_ms() >= self.exp {
            return Err(ContinuationError::Expired {
                run_id: self.run.clone(),
            });
        }
        self.check_holder(presenter, secret)
    }

    /// Refused unless it was shown to `presenter`'s principal and issued by one of its issuers,
    /// expired or not: who may ask for a new continuation for the same call.
    pub fn check_holder(
        &self,
        presenter: &Presenter<'_>,
        secret: &ContinuationSecret,
    ) -> Result<(), ContinuationError> {
        let run = || self.run.clone();
        if self.to != secret.principal_tag(presenter.principal) {
            return Err(ContinuationError::WrongPrincipal { run_id: run() });
        }
        if !presenter.issuers.contains(&self.by) {
            return Err(ContinuationError::ForeignIssuer {
                run_id: run(),
                issuer: self.by.clone(),
            });
        }
        Ok(())
    }
}

/// The run a continuation names, read without checking it: only to route it to whoever checks
/// it (a Restate run's key in `DurableApprovals/<key>/approve`).
pub fn continuation_run(continuation: &str) -> Option<String> {
    Claims::unverified(continuation).map(|claims| claims.run)
}

/// SHA-256 of `args` (canonical JSON), hex.
pub fn args_digest(args: &str) -> String {
    Sha256::digest(args.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Why a continuation was refused. The run stays parked whatever the reason. Every variant has
/// the code [`CONTINUATION_REFUSED`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContinuationError {
    /// Not a continuation this journal's secret signed (made up, altered, cut, or signed before
    /// the secret was rotated).
    #[error(
        "the continuation is not valid: it is malformed or altered, or was not issued with this \
         journal's secret"
    )]
    Forged,
    /// Past its expiry.
    #[error("the continuation for run {run_id:?} has expired; ask for a new one")]
    Expired {
        /// The run.
        run_id: String,
    },
    /// Shown to another principal (another MCP session or OAuth subject, or the local owner).
    #[error("the continuation for run {run_id:?} was issued to someone else")]
    WrongPrincipal {
        /// The run.
        run_id: String,
    },
    /// Issued by a serving face this one does not share runs with.
    #[error(
        "the continuation for run {run_id:?} was issued by {issuer:?}, whose runs are not \
         resumed here"
    )]
    ForeignIssuer {
        /// The run.
        run_id: String,
        /// Who issued it (empty: the local owner).
        issuer: String,
    },
    /// The call it names was decided already (the continuation was used).
    #[error("the continuation for run {run_id:?} call #{seq} was used already")]
    Used {
        /// The run.
        run_id: String,
        /// The call.
        seq: u64,
    },
    /// The run does not wait at the call it names, or waits at it with other arguments.
    #[error(
        "the continuation for run {run_id:?} names call #{seq}, which the run does not wait at \
         with the arguments shown"
    )]
    Mismatch {
        /// The run.
        run_id: String,
        /// The call it names.
        seq: u64,
    },
}

impl ContinuationError {
    /// [`CONTINUATION_REFUSED`].
    pub fn code(&self) -> &'static str {
        CONTINUATION_REFUSED
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::JournalError;

    fn claims(secret: &ContinuationSecret, ttl: Duration) -> Claims {
        Claims::new(secret, "r", 2, r#"{"a":1}"#, &Principal::local(), "", ttl)
    }

    #[test]
    fn a_signed_continuation_opens_and_an_altered_one_is_forged() {
        let secret = ContinuationSecret::generate().unwrap();
        let original = claims(&secret, DEFAULT_CONTINUATION_TTL);
        let signed = secret.sign(&original);
        assert_eq!(secret.open(&signed).unwrap(), original);
        let other = ContinuationSecret::generate().unwrap();
        assert_eq!(other.open(&signed), Err(ContinuationError::Forged));
        // The claims of one continuation under the tag of another.
        let second = secret.sign(&Claims {
            seq: 3,
            ..original.clone()
        });
        let (head, _) = signed.rsplit_once('.').unwrap();
        let (_, tag) = second.rsplit_once('.').unwrap();
        assert_eq!(
            secret.open(&format!("{head}.{tag}")),
            Err(ContinuationError::Forged)
        );
        for junk in ["", "run:r", "dshc1.", "dshc1.a.b", &"x".repeat(10_000)] {
            assert_eq!(secret.open(junk), Err(ContinuationError::Forged), "{junk}");
        }
        // Junk is not told it came from another secret.
        assert!(
            ContinuationError::Forged
                .to_string()
                .contains("malformed or altered")
        );
    }

    #[test]
    fn expiry_principal_and_issuer_are_checked() {
        let secret = ContinuationSecret::generate().unwrap();
        let claims = |ttl| claims(&secret, ttl);
        let local = Principal::local();
        let issuers = [String::new()];
        let presenter = Presenter {
            principal: &local,
            issuers: &issuers,
        };
        claims(DEFAULT_CONTINUATION_TTL)
            .check(&presenter, &secret)
            .unwrap();
        assert!(matches!(
            claims(Duration::ZERO).check(&presenter, &secret),
            Err(ContinuationError::Expired { .. })
        ));
        let session = Principal::mcp_session("s1");
        let as_session = Presenter {
            principal: &session,
            ..presenter.clone()
        };
        assert!(matches!(
            claims(DEFAULT_CONTINUATION_TTL).check(&as_session, &secret),
            Err(ContinuationError::WrongPrincipal { .. })
        ));
        let elsewhere = [String::from("other")];
        let foreign = Presenter {
            issuers: &elsewhere,
            ..presenter
        };
        assert!(matches!(
            claims(DEFAULT_CONTINUATION_TTL).check(&foreign, &secret),
            Err(ContinuationError::ForeignIssuer { .. })
        ));
    }

    #[test]
    fn the_claims_name_their_principal_by_a_keyed_digest_only() {
        let secret = ContinuationSecret::generate().unwrap();
        let session = Principal::mcp_session("alice-session");
        let signed = secret.sign(&Claims::new(
            &secret,
            "r",
            0,
            "{}",
            &session,
            "",
            DEFAULT_CONTINUATION_TTL,
        ));
        let unverified = Claims::unverified(&signed).unwrap();
        let text = serde_json::to_string(&unverified).unwrap();
        assert!(
            !text.contains("alice") && !text.contains("mcp-session"),
            "{text}"
        );
        // The digest is the secret's: another secret names the same principal otherwise.
        let other = ContinuationSecret::generate().unwrap();
        assert_eq!(unverified.to, secret.principal_tag(&session));
        assert_ne!(unverified.to, other.principal_tag(&session));
        assert_ne!(
            unverified.to,
            secret.principal_tag(&Principal::mcp_session("bob"))
        );
    }

    #[test]
    fn the_secret_file_is_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = ContinuationSecret::path_for(&dir.path().join("runs.db"));
        assert!(path.ends_with("runs.db.secret"));
        let first = ContinuationSecret::load_or_create(&path).unwrap();
        let again = ContinuationSecret::load_or_create(&path).unwrap();
        assert_eq!(first.key, again.key);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert!(matches!(
                ContinuationSecret::load_or_create(&path),
                Err(JournalError::Unusable(message)) if message.contains("readable by others")
            ));
        }
    }

    /// A link where the secret belongs is never followed, whether it points at another
    /// private secret (whoever planted it chose the key) or nowhere (the first use would
    /// create the target).
    #[cfg(unix)]
    #[test]
    fn a_secret_behind_a_symbolic_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("planted");
        ContinuationSecret::load_or_create(&target).unwrap();
        let path = ContinuationSecret::path_for(&dir.path().join("runs.db"));
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let dangling = ContinuationSecret::path_for(&dir.path().join("other.db"));
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        for link in [&path, &dangling] {
            match ContinuationSecret::load_or_create(link) {
                Err(JournalError::Unusable(message)) => {
                    assert!(message.contains("is a symbolic link"), "{message}")
                }
                other => panic!("a link was followed: {other:?}"),
            }
        }
        assert!(!dir.path().join("nowhere").exists());
        // Another user's file (only a privileged test run can give one away).
        let foreign = dir.path().join("foreign.secret");
        ContinuationSecret::load_or_create(&foreign).unwrap();
        if std::os::unix::fs::chown(&foreign, Some(65534), None).is_ok() {
            match ContinuationSecret::load_or_create(&foreign) {
                Err(JournalError::Unusable(message)) => {
                    assert!(message.contains("owned by another user"), "{message}")
                }
                other => panic!("another user's secret was used: {other:?}"),
            }
        }
    }
}
