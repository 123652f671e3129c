//! Tokens kept in a file the user names: rmcp's stored credentials as JSON, readable by the
//! owner only, replaced atomically (a new file renamed over the old), so a crash never leaves
//! half a token file and a reader never sees one. A file that group or others may read or
//! write is refused, as ssh refuses such a key: its tokens may have been read or replaced.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};

/// The largest token file read back: a token response is a few KiB.
const MAX_TOKEN_FILE_BYTES: u64 = 1 << 20;

/// rmcp's credential store on one file.
pub(crate) struct FileTokenStore {
    path: PathBuf,
}

impl fmt::Debug for FileTokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileTokenStore")
            .field("path", &self.path)
            .finish()
    }
}

impl FileTokenStore {
    pub(crate) fn new(path: PathBuf) -> FileTokenStore {
        FileTokenStore { path }
    }

    fn error(&self, what: &str, error: impl fmt::Display) -> AuthError {
        AuthError::CredentialStoreError(format!(
            "token file {}: {what}: {error}",
            self.path.display()
        ))
    }

    fn read(&self) -> Result<Option<StoredCredentials>, AuthError> {
        #[cfg(unix)]
        let file = match crate::private_file::open(&self.path) {
            Ok(file) => file,
            Err(crate::private_file::OpenRefused::Io(error))
                if error.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(None);
            }
            Err(crate::private_file::OpenRefused::Io(error)) => {
                return Err(self.error("cannot open", error));
            }
            Err(refused) => return Err(self.error("refused", refused)),
        };
        #[cfg(not(unix))]
        let file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(self.error("cannot open", error)),
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = file
                .metadata()
                .map_err(|error| self.error("cannot read", error))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(self.error(
                    "refused",
                    format!(
                        "group or others may read or write it (mode {:04o}): its tokens may \
                         have been read; run `chmod 600 {}` and log in again if others could",
                        mode & 0o7777,
                        self.path.display()
                    ),
                ));
            }
        }
        let mut text = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_TOKEN_FILE_BYTES + 1),
            &mut text,
        )
        .map_err(|error| self.error("cannot read", error))?;
        // A file that is not ours to read back says how to recover: its tokens are lost
        // either way, and without the file the next login starts afresh and writes it anew.
        let recover = "delete it and log in again; the login writes a new one";
        if text.len() as u64 > MAX_TOKEN_FILE_BYTES {
            return Err(self.error(
                "too large",
                format!("over {MAX_TOKEN_FILE_BYTES} bytes; {recover}"),
            ));
        }
        // serde_json's message names a line and column, never the token it was reading.
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|error| self.error("not a token file", format!("{error}; {recover}")))
    }

    fn write(&self, credentials: &StoredCredentials) -> Result<(), AuthError> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let text = serde_json::to_vec(credentials).map_err(|error| self.error("encode", error))?;
        // A temporary file is created with mode 0600 in the same directory, then renamed over
        // the old one: atomic, and the token is never readable by others.
        let mut file = tempfile::NamedTempFile::new_in(dir)
            .map_err(|error| self.error("cannot create beside it", error))?;
        file.write_all(&text)
            .and_then(|()| file.as_file().sync_all())
            .map_err(|error| self.error("cannot write", error))?;
        file.persist(&self.path)
            .map_err(|error| self.error("cannot replace", error.error))?;
        Ok(())
    }

    fn remove(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(self.error("cannot remove", error))
            }
            _ => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileTokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.read()
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.write(&credentials)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.remove()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn credentials(token: &str) -> StoredCredentials {
        let response = serde_json::from_value(serde_json::json!({
            "access_token": token,
            "token_type": "Bearer",
            "refresh_token": "refresh-secret",
            "expires_in": 3600,
        }))
        .unwrap();
        StoredCredentials::new("client".into(), Some(response), vec!["a".into()], Some(1))
    }

    #[test]
    fn a_corrupt_token_file_is_named_with_how_to_recover() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        std::fs::write(&path, "{\"client_id\": ").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let error = FileTokenStore::new(path.clone())
            .read()
            .unwrap_err()
            .to_string();
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(error.contains("not a token file"), "{error}");
        assert!(error.contains("delete it and log in again"), "{error}");
    }

    #[test]
    fn a_saved_token_is_read_back_from_a_file_only_its_owner_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let store = FileTokenStore::new(path.clone());
        assert!(store.read().unwrap().is_none(), "no file yet: no tokens");
        // A file left readable by others is replaced, not rewritten in place.
        std::fs::write(&path, "{}").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        store.write(&credentials("access-1")).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        store.write(&credentials("access-2")).unwrap();
        let back = store.read().unwrap().expect("stored");
        assert_eq!(back.client_id, "client");
        let token = back.token_response.expect("a token");
        assert_eq!(
            oauth2::TokenResponse::access_token(&token).secret(),
            "access-2"
        );
        // Only the token file is left in the directory: no temporary file.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        store.remove().unwrap();
        assert!(store.read().unwrap().is_none());
        store.remove().unwrap();
        assert!(!format!("{store:?}").contains("access"));
    }

    /// A token file that is a link (to a private file of tokens someone else chose) is refused
    /// with a message saying why, never followed.
    #[test]
    fn a_token_file_behind_a_symbolic_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let planted = dir.path().join("planted.json");
        FileTokenStore::new(planted.clone())
            .write(&credentials("planted"))
            .unwrap();
        let path = dir.path().join("tokens.json");
        std::os::unix::fs::symlink(&planted, &path).unwrap();
        let error = FileTokenStore::new(path).read().unwrap_err().to_string();
        assert!(
            error.contains("refused") && error.contains("is a symbolic link"),
            "{error}"
        );
    }

    #[test]
    fn a_broken_or_huge_token_file_is_a_store_error_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        std::fs::write(&path, r#"{"client_id": "c", "token_response": "secret-ish"#).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let store = FileTokenStore::new(path.clone());
        let error = store.read().unwrap_err();
        assert!(
            matches!(error, AuthError::CredentialStoreError(_)),
            "{error:?}"
        );
        assert!(error.to_string().contains("not a token file"), "{error}");
        assert!(!error.to_string().contains("secret-ish"), "{error}");
        std::fs::write(&path, vec![b' '; MAX_TOKEN_FILE_BYTES as usize + 2]).unwrap();
        let error = store.read().unwrap_err();
        assert!(error.to_string().contains("too large"), "{error}");
    }

    /// A token file group or others may read (or write) is refused, naming the fix, and its
    /// content is not read.
    #[test]
    fn a_token_file_others_may_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let store = FileTokenStore::new(path.clone());
        store.write(&credentials("access-1")).unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let error = store.read().unwrap_err().to_string();
            assert!(
                error.contains(&format!(
                    "refused: group or others may read or write it (mode {mode:04o})"
                )) && error.contains(&format!("run `chmod 600 {}`", path.display())),
                "{error}"
            );
            assert!(!error.contains("access-1"), "{error}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(store.read().unwrap().is_some());
    }
}
