//! The worker's frame channel to the host: the frame protocol (`print` output as `log` frames,
//! so that it is ordered with the calls and belongs to its run) over two rings in memory shared
//! with the host (fd 5; fds 3 and 4 are the doorbells, see `ring.rs`). Both
//! directions are buffered; the interpreter thread reads and writes them itself, with no thread
//! in between.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use serde_json::Value;

use crate::monty::interpreter::{Halt, Link};
use crate::monty::values::{BindingReply, decode_reply, parse};
use crate::ring;

/// The largest frame buffer kept between runs.
const KEEP_BUFFER: usize = 1 << 20;

/// The frame channel to the host, from the descriptors it gives every worker; `Err` with the
/// exit code when the shared region cannot be mapped.
pub(crate) fn open_channel() -> Result<Channel, i32> {
    // SAFETY: the host gives every worker exactly these three descriptors (see code mode's
    // `process.rs` and `ring.rs`); nothing else in this process owns them.
    #[allow(unsafe_code)]
    let (bell_out, bell_in, region) = unsafe {
        (
            File::from_raw_fd(3),
            File::from_raw_fd(4),
            OwnedFd::from_raw_fd(ring::REGION_FD),
        )
    };
    let Ok(region) = ring::Region::map(region.as_fd()) else {
        return Err(74);
    };
    let (up, down) = region.worker_ends();
    let bells = Arc::new(Bells {
        out: bell_out,
        inbox: bell_in,
    });
    let channel = Channel {
        out: BufWriter::with_capacity(
            64 << 10,
            RingOut {
                ring: up,
                bells: Arc::clone(&bells),
                published: false,
            },
        ),
        inbox: BufReader::with_capacity(64 << 10, RingIn { ring: down, bells }),
        line: Vec::new(),
    };
    Ok(channel)
}

/// The frame channel of a worker process: the shared rings, buffered both ways.
pub(crate) struct Channel {
    out: BufWriter<RingOut>,
    inbox: BufReader<RingIn>,
    line: Vec<u8>,
}

/// The doorbells: fd 3 rings the host, fd 4 is where the host rings this worker (for bytes to
/// read or for space to write, whichever it parked for).
struct Bells {
    out: File,
    inbox: File,
}

impl Bells {
    fn ring_host(&self) -> std::io::Result<()> {
        (&self.out).write_all(&[1]).map_err(|_| closed())
    }

    /// Blocks until the host rings (or goes away: `Err`), then takes every waiting ring.
    fn wait(&self) -> std::io::Result<()> {
        let mut buf = [0u8; 64];
        match (&self.inbox).read(&mut buf) {
            Ok(0) | Err(_) => Err(closed()),
            Ok(_) => Ok(()),
        }
    }
}

fn closed() -> std::io::Error {
    std::io::Error::from(std::io::ErrorKind::BrokenPipe)
}

/// The ring to the host, as a `Write`: a write waits for space, a flush rings the host if it
/// parked.
struct RingOut {
    ring: ring::Producer,
    bells: Arc<Bells>,
    /// Bytes were published since the last flush. Monty flushes its print writer at checkpoints
    /// of a computing program; ringing then, with nothing new, would wake a parked host to find
    /// nothing, over and over.
    published: bool,
}

impl Write for RingOut {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        loop {
            let n = self.ring.write(bytes).map_err(|_| closed())?;
            if n > 0 || bytes.is_empty() {
                self.published |= n > 0;
                return Ok(n);
            }
            // Full: what is in it must reach the host before it can make room.
            self.flush()?;
            if !self.ring.park().map_err(|_| closed())? {
                self.bells.wait()?;
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // A host that parks after this looks at the ring once more before it blocks, so bytes
        // published before now need a ring only if it is parked already.
        if std::mem::take(&mut self.published) && self.ring.consumer_needs_bell() {
            self.bells.ring_host()?;
        }
        Ok(())
    }
}

/// The ring from the host, as a `Read`: waits (polling for [`REPLY_SPIN`], then parked) until
/// bytes come; end of input once the host is gone.
struct RingIn {
    ring: ring::Consumer,
    bells: Arc<Bells>,
}

impl RingIn {
    /// Waits until bytes are there: `false` when the host is gone.
    fn wait_for_bytes(&mut self) -> bool {
        let until = std::time::Instant::now() + REPLY_SPIN;
        loop {
            match self.ring.available() {
                Ok(0) => {}
                Ok(_) => return true,
                Err(_) => return false,
            }
            if std::time::Instant::now() >= until {
                break;
            }
            std::hint::spin_loop();
        }
        loop {
            match self.ring.park() {
                Ok(true) => return true,
                Ok(false) => {}
                Err(_) => return false,
            }
            if self.bells.wait().is_err() {
                return false;
            }
            match self.ring.available() {
                Ok(0) => {}
                Ok(_) => return true,
                Err(_) => return false,
            }
        }
    }
}

impl Read for RingIn {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() || !self.wait_for_bytes() {
            return Ok(0);
        }
        let n = self.ring.read(out).map_err(|_| closed())?;
        // The host may be parked with replies queued for want of space.
        if self.ring.producer_needs_bell() {
            self.bells.ring_host()?;
        }
        Ok(n)
    }
}

impl Channel {
    fn string(&mut self, s: &str) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, s).map_err(std::io::Error::other)
    }

    /// Waits for the host's next `run` frame, skipping replies to a finished run's calls;
    /// `Err` with the exit code once the host is gone (0) or sent what is not JSON.
    pub(crate) fn next_run(&mut self) -> Result<Value, i32> {
        loop {
            self.line.clear();
            match self.inbox.read_until(b'\n', &mut self.line) {
                Ok(0) | Err(_) => return Err(0),
                Ok(_) => {}
            }
            let run = parse(&self.line).ok_or(73)?;
            if self.line.capacity() > KEEP_BUFFER {
                self.line = Vec::new();
            }
            // A reply the host sent before it read the last run's completion: nothing awaits it.
            if run.get("type").and_then(Value::as_str) == Some("run") {
                return Ok(run);
            }
        }
    }

    /// Sends a run's `done` frame (given without its newline).
    pub(crate) fn done(&mut self, done: &str) -> std::io::Result<()> {
        self.out.write_all(done.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    /// Waits until at least one line has come from the host, then hands `each` every line
    /// there is, without its newline.
    pub(crate) fn lines(&mut self, mut each: impl FnMut(&[u8])) -> Result<(), Halt> {
        // One line is waited for; the others already read are taken without waiting.
        let mut first = true;
        while first || self.inbox.buffer().contains(&b'\n') {
            first = false;
            self.line.clear();
            match self.inbox.read_until(b'\n', &mut self.line) {
                Ok(0) | Err(_) => return Err(Halt),
                Ok(_) => {}
            }
            each(&self.line);
        }
        if self.line.capacity() > KEEP_BUFFER {
            self.line = Vec::new();
        }
        Ok(())
    }
}

impl Link for Channel {
    fn call(
        &mut self,
        id: u64,
        global: &str,
        name: &str,
        args: &str,
    ) -> Result<Result<(), String>, Halt> {
        let mut write = || -> std::io::Result<()> {
            write!(self.out, r#"{{"type":"call","id":{id},"global":"#)?;
            self.string(global)?;
            self.out.write_all(br#","name":"#)?;
            self.string(name)?;
            self.out.write_all(br#","args":"#)?;
            self.out.write_all(args.as_bytes())?;
            self.out.write_all(b"}\n")?;
            self.out.flush()
        };
        write().map(Ok).map_err(|_| Halt)
    }

    fn replies(&mut self, out: &mut Vec<(u64, BindingReply)>) -> Result<(), Halt> {
        self.lines(|line| {
            if let Some(reply) = decode_reply(line) {
                out.push(reply);
            }
        })
    }

    fn log(&mut self, text: &str) -> Result<(), Halt> {
        let mut write = || -> std::io::Result<()> {
            self.out.write_all(br#"{"type":"log","text":"#)?;
            self.string(text)?;
            self.out.write_all(b"}\n")
        };
        write().map_err(|_| Halt)
    }

    fn flush(&mut self) -> Result<(), Halt> {
        self.out.flush().map_err(|_| Halt)
    }
}

/// How long a worker waiting for a reply polls its ring before it parks. A binding's reply
/// usually comes within microseconds; a parked reader is woken by the scheduler, which on an
/// idle machine takes tens of microseconds per wake-up (two per round trip, one on each side).
const REPLY_SPIN: std::time::Duration = std::time::Duration::from_micros(50);
