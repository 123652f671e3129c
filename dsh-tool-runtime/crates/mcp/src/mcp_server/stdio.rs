//! The stdio transport of `serve`: the process's stdin and stdout, read and written without a
//! thread hop when both are pipes.
//!
//! tokio's `stdin()`/`stdout()` (what `rmcp::transport::stdio` uses) hand every read and write
//! to the blocking thread pool, because a terminal or a regular file cannot be polled. An MCP
//! client that spawns the server usually connects pipes, and a pipe can be registered with the
//! reactor: a round trip then saves a thread hand-off in each direction.
//!
//! Polling needs `O_NONBLOCK`, a flag of the open file description, which every process holding
//! the same end shares (a shell pipeline's next command, a parent that kept its copy): setting it
//! on descriptor 0 or 1 would make their reads and writes fail with `EAGAIN`. So each pipe is
//! opened again through `/proc/self/fd/N`, which gives this process a description of its own for
//! the same pipe. Anything else (a terminal, a file, a socket, no `/proc`) keeps tokio's blocking
//! stdio for both directions, and nothing shared is changed.

use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use rmcp::RoleServer;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

/// The read half of the transport.
pub(crate) type Input = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of the transport.
pub(crate) type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// The longest request line read: 64 MiB, as the MCP client side reads (rmcp's default is
/// 16 MiB). A longer line is dropped by rmcp with an error in the log.
pub(crate) const MAX_REQUEST_BYTES: usize = 64 << 20;

/// stdin and stdout as the server's transport: both polled when both are pipes, else both
/// through tokio's blocking stdio. `ended` is cancelled when stdin ends (or fails): rmcp then
/// waits up to 5 s for the requests still being handled, and a `subscriptions/listen` stream
/// ends only when told to, so the handler's streams stop on it instead of holding the process.
pub(crate) fn transport(ended: CancellationToken) -> AsyncRwTransport<RoleServer, Input, Output> {
    let (input, output): (Input, Output) =
        match polled(Path::new("/proc/self/fd/0"), Path::new("/proc/self/fd/1")) {
            Ok((input, output)) => (Box::new(input), Box::new(output)),
            Err(_) => {
                let (input, output) = rmcp::transport::stdio();
                (Box::new(input), Box::new(output))
            }
        };
    let input: Input = Box::new(EndSignal {
        input,
        ended: ended.clone(),
    });
    AsyncRwTransport::new_server(input, output).with_max_line_length(MAX_REQUEST_BYTES)
}

/// A reader that cancels `ended` once its input reads end of file or fails.
struct EndSignal {
    input: Input,
    ended: CancellationToken,
}

impl AsyncRead for EndSignal {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.input).poll_read(cx, buf);
        let ended = match &poll {
            Poll::Ready(Ok(())) => buf.filled().len() == before && buf.remaining() > 0,
            Poll::Ready(Err(_)) => true,
            Poll::Pending => false,
        };
        if ended {
            self.ended.cancel();
        }
        poll
    }
}

/// Opens the pipes behind `input` and `output` (paths of `/proc/self/fd`) as new non-blocking
/// descriptions. Fails, changing nothing, when either is not a pipe or cannot be opened (a pipe
/// without a reader cannot be opened for writing without blocking).
fn polled(input: &Path, output: &Path) -> std::io::Result<(pipe::Receiver, pipe::Sender)> {
    let options = pipe::OpenOptions::new();
    let receiver = options.open_receiver(input)?;
    let sender = options.open_sender(output)?;
    Ok((receiver, sender))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn nonblocking(fd: &impl AsRawFd) -> bool {
        // SAFETY: F_GETFL reads the flags of a descriptor this test owns.
        #[allow(unsafe_code)]
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        flags & libc::O_NONBLOCK != 0
    }

    #[tokio::test]
    async fn pipes_are_polled_through_descriptions_of_their_own() {
        let (theirs_in, mut ours_in) = std::io::pipe().unwrap();
        let (mut ours_out, theirs_out) = std::io::pipe().unwrap();
        let path = |fd: &dyn AsRawFd| format!("/proc/self/fd/{}", fd.as_raw_fd());
        let (mut input, mut output) =
            polled(Path::new(&path(&theirs_in)), Path::new(&path(&theirs_out))).unwrap();
        std::io::Write::write_all(&mut ours_in, b"{}\n").unwrap();
        let mut line = [0u8; 3];
        input.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"{}\n");
        output.write_all(b"[]\n").await.unwrap();
        std::io::Read::read_exact(&mut ours_out, &mut line).unwrap();
        assert_eq!(&line, b"[]\n");
        // The descriptors given to us keep blocking: others holding them are not disturbed.
        assert!(!nonblocking(&theirs_in));
        assert!(!nonblocking(&theirs_out));
    }

    #[tokio::test]
    async fn a_file_is_not_polled() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let (_read, write) = std::io::pipe().unwrap();
        let write = format!("/proc/self/fd/{}", write.as_raw_fd());
        assert!(polled(file.path(), Path::new(&write)).is_err());
        assert!(polled(Path::new(&write), file.path()).is_err());
    }
}
