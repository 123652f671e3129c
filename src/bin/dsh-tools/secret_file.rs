//! Secrets the command reads from files: a link, another user's file, or a file others could
//! read or replace is refused.

use std::path::Path;

/// The text of a file holding a secret (a bearer token, a client secret), opened as
/// [`open_private_file`] allows.
pub(crate) fn read_private_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut text = String::new();
    open_private_file(path)?
        .read_to_string(&mut text)
        .map_err(|error| error.to_string())?;
    Ok(text)
}

/// Opens a file holding a secret: the path itself, never a symbolic link's target
/// (`O_NOFOLLOW`: a link planted there could lead to a file someone else chose), without
/// blocking on a FIFO, and only a regular file this user owns that group and others may neither
/// read nor write, as ssh refuses such a key: the secret may have been read or replaced, and
/// the message names the fix.
pub(crate) fn open_private_file(path: &Path) -> Result<std::fs::File, String> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP)
            if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_symlink()) =>
        {
            return Err(
                "it is a symbolic link, and a secret is read only from the file itself (name \
                 the file, not a link to it)"
                    .to_owned(),
            );
        }
        Err(errno) => return Err(std::io::Error::from(errno).to_string()),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|errno| std::io::Error::from(errno).to_string())?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Err("it is not a regular file".to_owned());
    }
    if stat.st_uid != rustix::process::geteuid().as_raw() {
        return Err(format!(
            "it is owned by another user (uid {}), who can read or replace the secret",
            stat.st_uid
        ));
    }
    let mode = stat.st_mode & 0o7777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "group or others may read or write it (mode {mode:04o}): run `chmod 600 {}`, and \
             replace the secret if others could read it",
            path.display()
        ));
    }
    Ok(std::fs::File::from(fd))
}

/// The fewest bytes of a Restate secret (`McpRestate::MIN_SECRET_BYTES`, here without the
/// `restate` feature for `runs --restate`).
const MIN_RESTATE_SECRET_BYTES: usize = 32;

/// The Restate secret in `path` (`--restate-secret-file`), its trailing line end dropped.
/// Errors: as [`open_private_file`], or under 32 bytes.
pub(crate) fn read_restate_secret(path: &Path) -> Result<Vec<u8>, String> {
    let failed = |why: String| format!("--restate-secret-file {}: {why}", path.display());
    let mut secret = Vec::new();
    std::io::Read::read_to_end(&mut open_private_file(path).map_err(failed)?, &mut secret)
        .map_err(|error| failed(error.to_string()))?;
    while secret
        .last()
        .is_some_and(|byte| matches!(byte, b'\n' | b'\r'))
    {
        secret.pop();
    }
    if secret.len() < MIN_RESTATE_SECRET_BYTES {
        return Err(failed(format!(
            "{} bytes; at least {} are needed",
            secret.len(),
            MIN_RESTATE_SECRET_BYTES
        )));
    }
    Ok(secret)
}
