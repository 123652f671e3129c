//! The journal's secret: generated or derived, kept in a private file beside the journal, and
//! the HMAC that signs and opens continuations and names principals.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::{Claims, ContinuationError, MAX_CONTINUATION_BYTES, PREFIX, Principal, SECRET_BYTES};
use crate::durable::JournalError;

/// The secret continuations are signed with: 32 bytes from the operating system's random source
/// (`getrandom`). [`SqliteJournal`](crate::durable::SqliteJournal) keeps it in a file beside the journal
/// ([`ContinuationSecret::path_for`]), created mode 0600 on first use; every process that opens
/// the journal (and can read that file) signs and checks with it. Deleting the file rotates it:
/// the next use makes a new one and every continuation issued before is refused as forged (the
/// runs stay parked; a new continuation is issued on request).
#[derive(Clone)]
pub struct ContinuationSecret {
    pub(super) key: [u8; SECRET_BYTES],
}

impl std::fmt::Debug for ContinuationSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ContinuationSecret(..)")
    }
}

impl ContinuationSecret {
    /// A secret of these bytes (a host that keeps its own, e.g. in a secret manager).
    pub fn from_bytes(key: [u8; SECRET_BYTES]) -> Self {
        ContinuationSecret { key }
    }

    /// The secret derived from `shared`, a longer secret several parties hold (the file of
    /// `dsh-tools serve --restate-secret-file`, which also tags task ids): HMAC-SHA256 (RFC
    /// 2104) of a fixed label under `shared`, so continuations are never signed with the key
    /// that tags task ids, and whoever holds the same bytes derives the same secret.
    pub fn derive(shared: &[u8]) -> Self {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(shared)
            .expect("HMAC takes keys of any length");
        mac.update(b"dsh-tools continuation secret\0");
        ContinuationSecret {
            key: mac.finalize().into_bytes().into(),
        }
    }

    /// A new random secret.
    ///
    /// # Errors
    /// [`JournalError::Store`] when the operating system gives no random bytes.
    pub fn generate() -> Result<Self, JournalError> {
        let mut key = [0u8; SECRET_BYTES];
        getrandom::fill(&mut key)
            .map_err(|error| JournalError::Store(format!("no random bytes: {error}")))?;
        Ok(ContinuationSecret { key })
    }

    /// Where the secret of the journal at `journal` lives: the journal's path with `.secret`
    /// appended (`runs.db` → `runs.db.secret`).
    pub fn path_for(journal: &Path) -> PathBuf {
        let mut path = journal.as_os_str().to_owned();
        path.push(".secret");
        PathBuf::from(path)
    }

    /// The secret in the file at `path`, created (mode 0600, exclusively: of two processes
    /// creating it at once, one writes it and both read it) when there is none.
    ///
    /// # Errors
    /// [`JournalError::Store`] when the file cannot be read or created, and
    /// [`JournalError::Unusable`] when it does not hold a secret (another length), others can
    /// read it (its mode allows group or world access), it is a symbolic link (never followed:
    /// a link planted there could point at a file another user wrote), another user owns it,
    /// or it is not a regular file.
    pub fn load_or_create(path: &Path) -> Result<Self, JournalError> {
        let store = |error: std::io::Error| JournalError::Store(format!("{path:?}: {error}"));
        let created = ContinuationSecret::generate()?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(path) {
            Ok(mut file) => {
                use std::io::Write;
                file.write_all(&created.key).map_err(store)?;
                file.sync_all().map_err(store)?;
                return Ok(created);
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(store(error)),
        }
        #[cfg(unix)]
        let file = crate::private_file::open(path).map_err(|refused| match refused {
            crate::private_file::OpenRefused::Io(error) => store(error),
            refused => JournalError::Unusable(format!(
                "{path:?}: not used as the continuation secret: {refused}"
            )),
        })?;
        #[cfg(not(unix))]
        let file = std::fs::File::open(path).map_err(store)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = file.metadata().map_err(store)?.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(JournalError::Unusable(format!(
                    "{path:?}: the continuation secret is readable by others (mode {:o}); \
                     make it 0600 or delete it to make a new one",
                    mode & 0o777
                )));
            }
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, SECRET_BYTES as u64 + 1),
            &mut bytes,
        )
        .map_err(store)?;
        let key: [u8; SECRET_BYTES] = bytes.try_into().map_err(|bytes: Vec<u8>| {
            JournalError::Unusable(format!(
                "{path:?}: not a continuation secret ({} bytes, expected {SECRET_BYTES}); \
                 delete it to make a new one",
                bytes.len()
            ))
        })?;
        Ok(ContinuationSecret { key })
    }

    /// The keyed digest a continuation names its principal by: HMAC-SHA256 (RFC 2104) of a
    /// fixed label and the principal's text under this secret, base64url. Readable claims
    /// disclose nothing a client could present as the principal (a session id, an OAuth
    /// subject), and without the secret no digest can be made for another principal.
    pub fn principal_tag(&self, principal: &Principal) -> String {
        let mut mac = self.mac();
        mac.update(b"dsh-tools continuation principal\0");
        mac.update(principal.as_str().as_bytes());
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }

    /// A continuation for the local owner ([`Principal::local`]) deciding the call `seq` of run
    /// `run`, whose canonical arguments have the SHA-256 digest `args_digest` (hex, as a run on
    /// Restate shows it in its pending approval), valid for `ttl`. For a journal's run,
    /// [`crate::DurableExt::parked_run`](crate::DurableExt::parked_run) issues it.
    pub fn sign_for_owner(&self, run: &str, seq: u64, args_digest: &str, ttl: Duration) -> String {
        self.sign(&Claims::local_for_digest(self, run, seq, args_digest, ttl))
    }

    fn mac(&self) -> Hmac<Sha256> {
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key).expect("HMAC takes keys of any length")
    }

    /// `claims` signed.
    pub fn sign(&self, claims: &Claims) -> String {
        let body = serde_json::to_vec(claims).unwrap_or_default();
        let mut mac = self.mac();
        mac.update(&body);
        let tag = mac.finalize().into_bytes();
        format!(
            "{PREFIX}{}.{}",
            URL_SAFE_NO_PAD.encode(&body),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// The claims of `continuation` when its tag verifies (compared in constant time).
    ///
    /// # Errors
    /// [`ContinuationError::Forged`] for anything else.
    pub fn open(&self, continuation: &str) -> Result<Claims, ContinuationError> {
        if continuation.len() > MAX_CONTINUATION_BYTES {
            return Err(ContinuationError::Forged);
        }
        let (body, tag) = continuation
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('.'))
            .ok_or(ContinuationError::Forged)?;
        let body = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| ContinuationError::Forged)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| ContinuationError::Forged)?;
        let mut mac = self.mac();
        mac.update(&body);
        mac.verify_slice(&tag)
            .map_err(|_| ContinuationError::Forged)?;
        serde_json::from_slice(&body).map_err(|_| ContinuationError::Forged)
    }
}

/// The secret in the file beside a journal, read (or made) on first use and kept.
#[cfg(feature = "durable")]
#[derive(Debug)]
pub struct ContinuationSecretFile {
    path: PathBuf,
    secret: std::sync::OnceLock<ContinuationSecret>,
}

#[cfg(feature = "durable")]
impl ContinuationSecretFile {
    /// The secret of the journal at `journal`.
    pub fn beside(journal: &Path) -> Self {
        ContinuationSecretFile {
            path: ContinuationSecret::path_for(journal),
            secret: std::sync::OnceLock::new(),
        }
    }

    /// The secret ([`ContinuationSecret::load_or_create`]).
    pub fn get(&self) -> Result<ContinuationSecret, JournalError> {
        if let Some(secret) = self.secret.get() {
            return Ok(secret.clone());
        }
        let secret = ContinuationSecret::load_or_create(&self.path)?;
        Ok(self.secret.get_or_init(|| secret).clone())
    }
}
