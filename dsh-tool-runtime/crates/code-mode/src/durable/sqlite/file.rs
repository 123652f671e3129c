//! The journal's file and who holds it: created private, files others could read found, room
//! left under the size bound, and the process an owner row names.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{PRIVATE_MODE, store};
use crate::durable::JournalError;

/// A process as an owner row names it: its pid and its start time (clock ticks after boot,
/// field 22 of `/proc/<pid>/stat`; 0 where there is no `/proc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Process {
    pub(super) pid: u32,
    pub(super) started: u64,
}

impl Process {
    pub(super) fn me() -> Self {
        let pid = std::process::id();
        Process {
            pid,
            started: start_time(pid).unwrap_or(0),
        }
    }

    /// Whether the process still runs (a pid reused by a later process does not count).
    pub(super) fn alive(self) -> bool {
        if Path::new("/proc/self/stat").exists() {
            return start_time(self.pid) == Some(self.started);
        }
        let Some(pid) = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return false;
        };
        // Signal 0 only checks: no such process is ESRCH; another user's is EPERM (alive).
        !matches!(
            rustix::process::test_kill_process(pid),
            Err(rustix::io::Errno::SRCH)
        )
    }
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`; the fields are counted after the command
/// name's closing parenthesis, as the name may hold spaces and parentheses.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Creates `path` empty with mode `0600` unless it exists (a URI or `:memory:` is left to
/// SQLite). The mode is set after creation too, so the umask cannot take bits away.
#[cfg(unix)]
pub(super) fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let text = path.to_string_lossy();
    if text.starts_with("file:") || text == ":memory:" {
        return Ok(());
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE_MODE)
        .open(path)
    {
        Ok(file) => file.set_permissions(std::fs::Permissions::from_mode(PRIVATE_MODE)),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}

/// Why one of the journal's files (`path`, its `-wal` and `-shm`, those that exist) is not
/// this process's to trust: a symbolic link (SQLite would follow it to a file someone else may
/// control) or a file another user owns (who could mark a parked call approved, even in a
/// directory only this user may write to, if they created it first). `None` when all are this
/// process's effective user's own files.
pub(super) fn untrusted_file(path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = rustix::process::geteuid().as_raw();
        journal_files(path).into_iter().find_map(|file| {
            let meta = std::fs::symlink_metadata(&file).ok()?;
            if meta.is_symlink() {
                return Some(format!(
                    "{}: a symbolic link; name the journal file itself, not a link to it",
                    file.display()
                ));
            }
            (meta.uid() != me).then(|| {
                format!(
                    "{}: owned by another user (uid {}), who could decide its runs; use a \
                     journal of your own",
                    file.display(),
                    meta.uid()
                )
            })
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The journal's files: `path`, its `-wal` and its `-shm`.
fn journal_files(path: &Path) -> [PathBuf; 3] {
    let with = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    [path.to_owned(), with("-wal"), with("-shm")]
}

/// The journal's files (`path`, its `-wal` and `-shm`) whose group or others may read or
/// write them, with their permission bits.
pub(super) fn exposed_files(path: &Path) -> Vec<(PathBuf, u32)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        journal_files(path)
            .into_iter()
            .filter_map(|file| {
                let bits = std::fs::metadata(&file).ok()?.permissions().mode() & 0o777;
                (bits & 0o066 != 0).then_some((file, bits))
            })
            .collect()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Vec::new()
    }
}

/// Refuses what would grow the file past `max` bytes (its pages in use, `extra` more): a new
/// run or a new call.
pub(super) fn check_room(
    connection: &Connection,
    extra: usize,
    max: u64,
) -> Result<(), JournalError> {
    let used: i64 = connection
        .query_row(
            "SELECT (SELECT page_count FROM pragma_page_count) * \
             (SELECT page_size FROM pragma_page_size)",
            [],
            |row| row.get(0),
        )
        .map_err(|error| store(&error))?;
    let used = u64::try_from(used).unwrap_or_default();
    if used.saturating_add(extra as u64) > max {
        return Err(JournalError::Full {
            used_bytes: used,
            max_bytes: max,
        });
    }
    Ok(())
}
