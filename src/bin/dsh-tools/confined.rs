//! Paths confined to one root directory by the kernel, not by string checks.
//!
//! Every path is opened relative to a handle of the root with `openat2(2)` and
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: the kernel refuses any resolution that would leave
//! the root — `..`, an absolute path, a symbolic link pointing outside it (also one swapped in
//! between a check and the open), and `/proc` magic links. Only regular files are read (opened
//! non-blocking, so a FIFO cannot stall the open, then checked with `fstat`), and every read is a
//! bounded stream that checks a cancellation token between chunks.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use dsh_tools::CancellationToken;
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};

/// Bytes read from a file at a time; cancellation is checked between reads.
const CHUNK_BYTES: usize = 64 * 1024;

/// Why a confined open or read failed.
#[derive(Debug)]
pub(super) enum ConfinedError {
    /// The path leaves the root (through `..`, an absolute path or a symbolic link).
    Escapes,
    /// The path names something that is not what the operation reads (a FIFO, a device, a socket,
    /// a directory where a file is wanted).
    NotRegular(&'static str),
    /// The call's signal fired while reading.
    Cancelled,
    /// Any other system error (`ENOENT`, `EACCES`, …).
    Io(io::Error),
}

impl std::fmt::Display for ConfinedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfinedError::Escapes => f.write_str("it leads outside the root"),
            ConfinedError::NotRegular(kind) => write!(f, "it is a {kind}, not a regular file"),
            ConfinedError::Cancelled => f.write_str("cancelled"),
            ConfinedError::Io(error) => error.fmt(f),
        }
    }
}

impl From<rustix::io::Errno> for ConfinedError {
    fn from(errno: rustix::io::Errno) -> Self {
        // EXDEV: resolution crossed the root; ELOOP: a magic link, or a link loop.
        if errno == rustix::io::Errno::XDEV || errno == rustix::io::Errno::LOOP {
            ConfinedError::Escapes
        } else {
            ConfinedError::Io(errno.into())
        }
    }
}

impl From<io::Error> for ConfinedError {
    fn from(error: io::Error) -> Self {
        ConfinedError::Io(error)
    }
}

/// What a path names, by `fstat` of its handle.
pub(super) enum Kind {
    File { bytes: u64 },
    Dir,
}

/// A handle of the root directory; every path below is resolved against it.
pub(super) struct Root {
    dir: OwnedFd,
}

fn resolve_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
}

fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Directory => "directory",
        FileType::Fifo => "FIFO",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Socket => "socket",
        FileType::Symlink => "symbolic link",
        _ => "special file",
    }
}

impl Root {
    /// Opens `path` as the root.
    ///
    /// # Errors
    /// The system's error when `path` is not a directory that can be opened.
    pub(super) fn open(path: &Path) -> io::Result<Root> {
        let dir = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root { dir })
    }

    /// `relative` opened below `dir` with `flags`; `.` and an empty path name `dir` itself.
    fn open_below(
        dir: impl AsFd,
        relative: &OsStr,
        flags: OFlags,
    ) -> Result<OwnedFd, ConfinedError> {
        let relative = if relative.is_empty() {
            OsStr::new(".")
        } else {
            relative
        };
        // openat2 refuses O_PATH with any flag but O_DIRECTORY, O_NOFOLLOW and O_CLOEXEC.
        let flags = if flags.contains(OFlags::PATH) {
            flags | OFlags::CLOEXEC
        } else {
            flags | OFlags::CLOEXEC | OFlags::NOCTTY
        };
        Ok(rustix::fs::openat2(
            dir,
            relative,
            flags,
            Mode::empty(),
            resolve_flags(),
        )?)
    }

    /// What `relative` names: a regular file (with its size) or a directory.
    ///
    /// # Errors
    /// [`ConfinedError::Escapes`] outside the root, [`ConfinedError::NotRegular`] for anything
    /// else than a file or a directory, [`ConfinedError::Io`] otherwise.
    pub(super) fn kind(&self, relative: &str) -> Result<Kind, ConfinedError> {
        // O_PATH: no open of a device's driver, no wait on a FIFO.
        let fd = Self::open_below(&self.dir, OsStr::new(relative), OFlags::PATH)?;
        let stat = rustix::fs::fstat(&fd)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Ok(Kind::File {
                bytes: stat.st_size as u64,
            }),
            FileType::Directory => Ok(Kind::Dir),
            other => Err(ConfinedError::NotRegular(kind_name(other))),
        }
    }

    /// Opens the regular file `relative` for reading.
    ///
    /// # Errors
    /// As [`Root::kind`]; a directory is [`ConfinedError::NotRegular`] too.
    pub(super) fn open_file(&self, relative: &str) -> Result<File, ConfinedError> {
        // Non-blocking so that a FIFO's open returns at once; the fstat below refuses it.
        let fd = Self::open_below(
            &self.dir,
            OsStr::new(relative),
            OFlags::RDONLY | OFlags::NONBLOCK,
        )?;
        let stat = rustix::fs::fstat(&fd)?;
        match FileType::from_raw_mode(stat.st_mode) {
            // A regular file's reads ignore O_NONBLOCK.
            FileType::RegularFile => Ok(File::from(fd)),
            other => Err(ConfinedError::NotRegular(kind_name(other))),
        }
    }

    /// Every regular file below the directory `relative`, as `/`-separated paths relative to
    /// the root, sorted, skipping directories named in `skipped` and never following a symbolic
    /// link. Names that are not UTF-8 cannot be named back in a tool call: they are left out and
    /// counted in [`Walk::non_utf8`].
    ///
    /// # Errors
    /// As [`Root::kind`] for `relative`; [`ConfinedError::Cancelled`] when `cancel` fires.
    pub(super) fn walk(
        &self,
        relative: &str,
        skipped: &[&str],
        cancel: &CancellationToken,
    ) -> Result<Walk, ConfinedError> {
        let start = Self::open_below(
            &self.dir,
            OsStr::new(relative),
            OFlags::RDONLY | OFlags::DIRECTORY,
        )?;
        let prefix = Path::new(relative)
            .components()
            .filter_map(|part| match part {
                std::path::Component::Normal(name) => name.to_str().map(str::to_owned),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("/");
        let mut walk = Walk::default();
        let mut stack = vec![(start, prefix)];
        while let Some((dir, path)) = stack.pop() {
            if cancel.is_cancelled() {
                return Err(ConfinedError::Cancelled);
            }
            let entries = rustix::fs::Dir::read_from(&dir)?;
            for entry in entries {
                let entry = entry?;
                let name = OsStr::from_bytes(entry.file_name().to_bytes());
                if name == "." || name == ".." {
                    continue;
                }
                let Some(text) = name.to_str() else {
                    walk.non_utf8 += 1;
                    continue;
                };
                let child = if path.is_empty() {
                    text.to_owned()
                } else {
                    format!("{path}/{text}")
                };
                // The entry's own type (never a link's target); `Unknown` on some file systems.
                let mut kind = entry.file_type();
                if kind == FileType::Unknown {
                    kind = rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                        .map(|stat| FileType::from_raw_mode(stat.st_mode))
                        .unwrap_or(FileType::Unknown);
                }
                match kind {
                    FileType::Directory if !skipped.contains(&text) => {
                        // NOFOLLOW: a directory swapped for a link since the listing is refused.
                        if let Ok(sub) = Self::open_below(
                            &dir,
                            name,
                            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW,
                        ) {
                            stack.push((sub, child));
                        }
                    }
                    FileType::RegularFile => {
                        let bytes =
                            rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                                .map(|stat| stat.st_size as u64)
                                .unwrap_or(0);
                        walk.files.push((child, bytes));
                    }
                    _ => {}
                }
            }
        }
        walk.files.sort();
        Ok(walk)
    }
}

/// What [`Root::walk`] found.
#[derive(Default)]
pub(super) struct Walk {
    /// `(path, bytes)` of each regular file, sorted by path.
    pub files: Vec<(String, u64)>,
    /// Entries left out because their names are not UTF-8.
    pub non_utf8: u64,
}

/// Reads `file` line by line, calling `line` with each line's bytes (without its `\n`, cut to
/// `max_line` bytes) and the number of bytes cut; `line` returns `false` to stop early.
/// Memory stays within one chunk plus `max_line`, whatever the file holds.
///
/// # Errors
/// [`ConfinedError::Cancelled`] when `cancel` fires, [`ConfinedError::Io`] for a failed read.
pub(super) fn for_each_line(
    mut file: impl Read,
    max_line: usize,
    cancel: &CancellationToken,
    mut line: impl FnMut(&[u8], u64) -> bool,
) -> Result<(), ConfinedError> {
    let mut chunk = vec![0u8; CHUNK_BYTES];
    let mut current: Vec<u8> = Vec::new();
    let mut cut: u64 = 0;
    let mut any = false;
    loop {
        if cancel.is_cancelled() {
            return Err(ConfinedError::Cancelled);
        }
        let read = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error.into()),
        };
        any = true;
        let mut rest = &chunk[..read];
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            take(&mut current, &mut cut, &rest[..end], max_line);
            if !line(strip_cr(&current), cut) {
                return Ok(());
            }
            current.clear();
            cut = 0;
            rest = &rest[end + 1..];
        }
        take(&mut current, &mut cut, rest, max_line);
    }
    // A last line without its newline; an empty file has no lines.
    if any && (!current.is_empty() || cut > 0) {
        line(strip_cr(&current), cut);
    }
    Ok(())
}

fn take(current: &mut Vec<u8>, cut: &mut u64, bytes: &[u8], max_line: usize) {
    let room = max_line.saturating_sub(current.len());
    let kept = bytes.len().min(room);
    current.extend_from_slice(&bytes[..kept]);
    *cut += (bytes.len() - kept) as u64;
}

/// `str::lines` drops a `\r` before each `\n`; so does this.
fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Counts the `\n` bytes of `file`, streamed.
///
/// # Errors
/// As [`for_each_line`].
pub(super) fn count_newlines(
    mut file: impl Read,
    cancel: &CancellationToken,
) -> Result<u64, ConfinedError> {
    let mut chunk = vec![0u8; CHUNK_BYTES];
    let mut count = 0u64;
    loop {
        if cancel.is_cancelled() {
            return Err(ConfinedError::Cancelled);
        }
        match file.read(&mut chunk) {
            Ok(0) => return Ok(count),
            Ok(read) => count += chunk[..read].iter().filter(|b| **b == b'\n').count() as u64,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error.into()),
        }
    }
}
