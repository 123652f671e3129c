//! Opening a file that holds a secret (a continuation secret, an OAuth token file): the path
//! itself, never a symbolic link's target, and only a regular file of this process's user, so
//! that a link planted where the secret is expected, or a file another user controls, is
//! refused instead of read.

use std::fs::File;
use std::path::Path;

/// Why a secret file was not opened.
#[derive(Debug)]
pub enum OpenRefused {
    /// Opening it failed (missing, unreadable, …).
    Io(std::io::Error),
    /// The path is a symbolic link.
    Link,
    /// Another user owns it.
    Foreign { uid: u32 },
    /// A directory, FIFO, device or socket.
    NotRegular,
}

impl std::fmt::Display for OpenRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenRefused::Io(error) => error.fmt(f),
            OpenRefused::Link => f.write_str(
                "it is a symbolic link, and a secret is read only from the file itself (name \
                 the file, not a link to it)",
            ),
            OpenRefused::Foreign { uid } => write!(
                f,
                "it is owned by another user (uid {uid}), who can read or replace the secret"
            ),
            OpenRefused::NotRegular => f.write_str("it is not a regular file"),
        }
    }
}

/// Opens `path` for reading without following a symbolic link at its last component
/// (`O_NOFOLLOW`) and without blocking on a FIFO (`O_NONBLOCK`), then checks on the open file
/// that it is a regular file owned by this process's effective user. The caller checks its
/// mode.
pub fn open(path: &Path) -> Result<File, OpenRefused> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let flags = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(error)
            if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
                && std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_symlink()) =>
        {
            return Err(OpenRefused::Link);
        }
        Err(error) => return Err(OpenRefused::Io(error)),
    };
    let meta = file.metadata().map_err(OpenRefused::Io)?;
    if !meta.is_file() {
        return Err(OpenRefused::NotRegular);
    }
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(OpenRefused::Foreign { uid: meta.uid() });
    }
    Ok(file)
}
