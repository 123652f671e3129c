//! The stdio transport of `serve`: the process's stdin and stdout, read and written without a
//! thread hop when they are pipes or sockets.
//!
//! tokio's `stdin()`/`stdout()` (what `rmcp::transport::stdio` uses) hand every read and write
//! to the blocking thread pool, because a terminal or a regular file cannot be polled. An MCP
//! client that spawns the server connects pipes (or a socket pair) instead, and those are
//! registered with the reactor like any socket: one round trip saves a thread hand-off in each
//! direction. Anything else (a terminal, a file) keeps tokio's blocking stdio.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

/// The read half of the transport.
pub(crate) type Input = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of the transport.
pub(crate) type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// stdin and stdout as an async pair. The descriptors are duplicated, so 0 and 1 stay open for
/// the rest of the process; a pipe or socket is switched to non-blocking mode (a property of
/// the open file, which only this process's end shares).
pub(crate) fn transport() -> (Input, Output) {
    let polled = || -> io::Result<(Input, Output)> {
        let input = io::stdin().as_fd().try_clone_to_owned()?;
        let output = io::stdout().as_fd().try_clone_to_owned()?;
        Ok((reader(input)?, writer(output)?))
    };
    polled().unwrap_or_else(|_| {
        let (input, output) = rmcp::transport::stdio();
        (Box::new(input), Box::new(output))
    })
}

fn is_socket(fd: &OwnedFd) -> io::Result<bool> {
    Ok(File::from(fd.try_clone()?)
        .metadata()?
        .file_type()
        .is_socket())
}

fn reader(fd: OwnedFd) -> io::Result<Input> {
    if is_socket(&fd)? {
        return Ok(Box::new(socket(fd)?));
    }
    Ok(Box::new(pipe::Receiver::from_owned_fd(fd)?))
}

fn writer(fd: OwnedFd) -> io::Result<Output> {
    if is_socket(&fd)? {
        return Ok(Box::new(socket(fd)?));
    }
    Ok(Box::new(pipe::Sender::from_owned_fd(fd)?))
}

fn socket(fd: OwnedFd) -> io::Result<UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    UnixStream::from_std(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn pipes_and_sockets_are_polled_and_a_file_is_refused() {
        let (rx, tx) = std::io::pipe().unwrap();
        let mut read = reader(OwnedFd::from(rx)).unwrap();
        let mut write = writer(OwnedFd::from(tx)).unwrap();
        write.write_all(b"{}\n").await.unwrap();
        let mut line = [0u8; 3];
        read.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"{}\n");

        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut read = reader(OwnedFd::from(a)).unwrap();
        let mut write = writer(OwnedFd::from(b)).unwrap();
        write.write_all(b"[]\n").await.unwrap();
        read.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"[]\n");

        // A regular file is no pipe: `transport` falls back to tokio's blocking stdio for it.
        let file = tempfile::tempfile().unwrap();
        assert!(reader(OwnedFd::from(file)).is_err());
    }
}
