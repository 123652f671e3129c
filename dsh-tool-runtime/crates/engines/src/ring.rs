//! The frame channel between the host and a pooled worker (Monty or QuickJS): two byte rings in
//! one shared memory region (a `memfd` the worker finds at fd 5), with the protocol pipes kept
//! only as doorbells.
//!
//! A binding round trip over pipes costs five system calls (write, poll and read in the
//! worker; read and write in the host), each 0.5–1 µs in a virtual machine, on top of the
//! interpreter's own work. Over the rings a round trip needs none while both sides are
//! polling: the writer copies the frame in and publishes its end position, the reader sees the
//! position move. A side that stops polling *parks*: it raises its flag in the ring, checks the
//! ring once more, then blocks on its pipe; the other side rings that pipe (one byte) only when
//! it finds the flag raised. Both orders are sequentially consistent (a store, a full fence, a
//! load on each side), so a frame is never left unannounced to a parked reader (the
//! store-buffering pattern: at least one side sees the other's store).
//!
//! The host trusts nothing the worker writes here: it keeps its own copy of the positions it
//! owns, checks every position the worker publishes against them and the capacity
//! ([`Corrupt`] otherwise, and the worker is killed), and copies bytes out of the ring before
//! the frame decoder looks at them, so a worker rewriting the ring under it can only produce
//! bytes the decoder then refuses. A doorbell is a hint to look again, never data: a worker
//! ringing without cause costs the host a look at an empty ring.

// Memory shared with another process, mapped and read raw; every block notes its SAFETY.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use rustix::fs::{MemfdFlags, fstat, ftruncate, memfd_create};
use rustix::mm::{MapFlags, ProtFlags, mmap, munmap};

/// Bytes of each ring. A frame longer than a ring streams through it in parts.
pub(crate) const RING_BYTES: usize = 256 << 10;

/// The worker's descriptor of the shared region.
pub(crate) const REGION_FD: i32 = 5;

/// One ring's positions and flags. Positions count bytes since the region was made (never
/// wrapping in practice: 2^64 bytes); each sits on a cache line of its own, so that the writer's
/// and the reader's stores do not contend.
#[repr(C)]
struct Control {
    /// End of the published bytes; written by the producer.
    tail: Line<AtomicU64>,
    /// End of the consumed bytes; written by the consumer.
    head: Line<AtomicU64>,
    /// 1 while the consumer is parked (or about to be) waiting for bytes.
    consumer_parked: Line<AtomicU32>,
    /// 1 while the producer is parked waiting for space.
    producer_parked: Line<AtomicU32>,
}

#[repr(C, align(64))]
struct Line<T>(T);

/// Region layout: both controls, then both rings' bytes.
const UP_CONTROL: usize = 0;
const DOWN_CONTROL: usize = size_of::<Control>();
const UP_DATA: usize = 2 * size_of::<Control>();
const DOWN_DATA: usize = UP_DATA + RING_BYTES;
const REGION_BYTES: usize = DOWN_DATA + RING_BYTES;

/// The ring's state is impossible: a position moved backwards or past the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Corrupt;

/// The shared region, mapped into this process; the ends taken from it keep the mapping.
#[derive(Clone)]
pub(crate) struct Region {
    map: Arc<Mapping>,
}

/// One mapping of the region, unmapped when the region and every end of it are gone.
struct Mapping {
    base: NonNull<u8>,
}

// SAFETY: the region is plain shared memory; every access to it goes through atomics or through
// byte copies of ranges that the protocol gives to one side at a time.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Region {
    /// A new zeroed region and the descriptor to hand the worker (close-on-exec; the spawn
    /// places it at [`REGION_FD`]).
    pub(crate) fn create() -> io::Result<(Region, OwnedFd)> {
        let fd = memfd_create("dsh-monty-frames", MemfdFlags::CLOEXEC)?;
        ftruncate(&fd, REGION_BYTES as u64)?;
        let region = Region::map(fd.as_fd())?;
        Ok((region, fd))
    }

    /// Maps the region of `fd` (the worker's side). Fails when `fd` is smaller than a region.
    pub(crate) fn map(fd: BorrowedFd<'_>) -> io::Result<Region> {
        let size = fstat(fd)?.st_size;
        if usize::try_from(size).map_or(true, |size| size < REGION_BYTES) {
            return Err(io::Error::other("the frame region is too small"));
        }
        // SAFETY: a fresh shared mapping of `fd` at an address the kernel picks; nothing else
        // in this process refers to that range.
        let base = unsafe {
            mmap(
                std::ptr::null_mut(),
                REGION_BYTES,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )?
        };
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| io::Error::other("mmap"))?;
        Ok(Region {
            map: Arc::new(Mapping { base }),
        })
    }

    fn ring(&self, control: usize, data: usize) -> Ring {
        let base = self.map.base.as_ptr();
        // SAFETY: both offsets lie inside the mapping, which the ring keeps alive; `Control`
        // is atomics only, so any bytes are a valid value of it.
        unsafe {
            Ring {
                control: NonNull::new_unchecked(base.add(control).cast()),
                data: NonNull::new_unchecked(base.add(data)),
                _map: Arc::clone(&self.map),
            }
        }
    }

    /// The worker's side: producer of the ring to the host, consumer of the ring from it.
    pub(crate) fn worker_ends(&self) -> (Producer, Consumer) {
        (
            Producer::new(self.ring(UP_CONTROL, UP_DATA)),
            Consumer::new(self.ring(DOWN_CONTROL, DOWN_DATA)),
        )
    }

    /// The host's side: producer of the ring to the worker, consumer of the ring from it.
    pub(crate) fn host_ends(&self) -> (Producer, Consumer) {
        (
            Producer::new(self.ring(DOWN_CONTROL, DOWN_DATA)),
            Consumer::new(self.ring(UP_CONTROL, UP_DATA)),
        )
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Region::map`, unmapped once, when nothing points into
        // it any more.
        unsafe {
            let _ = munmap(self.base.as_ptr().cast(), REGION_BYTES);
        }
    }
}

/// One ring, seen from one side.
struct Ring {
    control: NonNull<Control>,
    data: NonNull<u8>,
    _map: Arc<Mapping>,
}

impl Ring {
    fn control(&self) -> &Control {
        // SAFETY: see `Region::ring`.
        unsafe { self.control.as_ref() }
    }

    /// Copies `bytes` into the ring from position `at` (wrapping at the end).
    fn copy_in(&self, at: u64, bytes: &[u8]) {
        let start = (at % RING_BYTES as u64) as usize;
        let first = bytes.len().min(RING_BYTES - start);
        // SAFETY: both ranges lie inside this ring's bytes, which the protocol gives to the
        // producer between `tail` and `head + RING_BYTES`.
        unsafe {
            let data = self.data.as_ptr();
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), data.add(start), first);
            std::ptr::copy_nonoverlapping(bytes.as_ptr().add(first), data, bytes.len() - first);
        }
    }

    /// Copies `out.len()` bytes out of the ring from position `at`.
    fn copy_out(&self, at: u64, out: &mut [u8]) {
        let start = (at % RING_BYTES as u64) as usize;
        let first = out.len().min(RING_BYTES - start);
        // SAFETY: both ranges lie inside this ring's bytes. The producer does not write the
        // published range; one that does anyway (a hostile worker) only changes the bytes this
        // copy reads, which are then checked as any frame is.
        unsafe {
            let data = self.data.as_ptr();
            std::ptr::copy_nonoverlapping(data.add(start), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, out.as_mut_ptr().add(first), out.len() - first);
        }
    }
}

// SAFETY: a ring end is a pair of pointers into a mapping that is `Send` and `Sync` and that
// the ring keeps alive.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

/// The writing end of a ring.
pub(crate) struct Producer {
    ring: Ring,
    /// Our own copy of `tail`: the other side could overwrite the shared one.
    tail: u64,
}

impl Producer {
    fn new(ring: Ring) -> Producer {
        let tail = ring.control().tail.0.load(Ordering::Relaxed);
        Producer { ring, tail }
    }

    /// Bytes that fit now.
    fn space(&self) -> Result<usize, Corrupt> {
        let head = self.ring.control().head.0.load(Ordering::Acquire);
        match self.tail.checked_sub(head) {
            Some(used) if used <= RING_BYTES as u64 => Ok(RING_BYTES - used as usize),
            _ => Err(Corrupt),
        }
    }

    /// Copies in and publishes as much of `bytes` as fits; the count written.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<usize, Corrupt> {
        let n = bytes.len().min(self.space()?);
        if n > 0 {
            self.ring.copy_in(self.tail, &bytes[..n]);
            self.tail += n as u64;
            self.ring
                .control()
                .tail
                .0
                .store(self.tail, Ordering::Release);
        }
        Ok(n)
    }

    /// After publishing: whether the consumer parked and its doorbell must be rung (the flag
    /// is lowered here, so one doorbell answers one park).
    pub(crate) fn consumer_needs_bell(&self) -> bool {
        take_flag(&self.ring.control().consumer_parked.0)
    }

    /// Raises the producer's flag before it blocks for space; `Ok(true)` when there is space
    /// after all (the flag is lowered again and the caller does not block).
    pub(crate) fn park(&self) -> Result<bool, Corrupt> {
        park(&self.ring.control().producer_parked.0, || {
            Ok(self.space()? > 0)
        })
    }

    /// Lowers the producer's flag: awake again, it needs no doorbell.
    pub(crate) fn unpark(&self) {
        self.ring
            .control()
            .producer_parked
            .0
            .store(0, Ordering::Relaxed);
    }
}

/// The reading end of a ring.
pub(crate) struct Consumer {
    ring: Ring,
    /// Our own copy of `head`.
    head: u64,
}

impl Consumer {
    fn new(ring: Ring) -> Consumer {
        let head = ring.control().head.0.load(Ordering::Relaxed);
        Consumer { ring, head }
    }

    /// Bytes published and not yet read.
    pub(crate) fn available(&self) -> Result<usize, Corrupt> {
        let tail = self.ring.control().tail.0.load(Ordering::Acquire);
        match tail.checked_sub(self.head) {
            Some(ready) if ready <= RING_BYTES as u64 => Ok(ready as usize),
            _ => Err(Corrupt),
        }
    }

    /// Copies out up to `out.len()` published bytes and frees their space; the count read.
    pub(crate) fn read(&mut self, out: &mut [u8]) -> Result<usize, Corrupt> {
        let n = out.len().min(self.available()?);
        if n > 0 {
            self.ring.copy_out(self.head, &mut out[..n]);
            self.head += n as u64;
            self.ring
                .control()
                .head
                .0
                .store(self.head, Ordering::Release);
        }
        Ok(n)
    }

    /// After reading: whether the producer parked for space and its doorbell must be rung.
    pub(crate) fn producer_needs_bell(&self) -> bool {
        take_flag(&self.ring.control().producer_parked.0)
    }

    /// Raises the consumer's flag before it blocks for bytes; `Ok(true)` when bytes came after
    /// all (the flag is lowered again and the caller does not block).
    pub(crate) fn park(&self) -> Result<bool, Corrupt> {
        park(&self.ring.control().consumer_parked.0, || {
            Ok(self.available()? > 0)
        })
    }

    /// Lowers the consumer's flag: awake again, it needs no doorbell.
    pub(crate) fn unpark(&self) {
        self.ring
            .control()
            .consumer_parked
            .0
            .store(0, Ordering::Relaxed);
    }
}

/// After publishing or freeing bytes: whether the other side's `flag` was raised; lowers it, so
/// that one doorbell answers one park.
fn take_flag(flag: &AtomicU32) -> bool {
    fence(Ordering::SeqCst);
    flag.load(Ordering::Relaxed) != 0 && flag.swap(0, Ordering::SeqCst) != 0
}

/// Raises `flag`, then looks once more (`go_on`): `Ok(true)` when the wait is over after all, and
/// the flag is lowered again.
fn park(flag: &AtomicU32, go_on: impl FnOnce() -> Result<bool, Corrupt>) -> Result<bool, Corrupt> {
    flag.store(1, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    let over = go_on()?;
    if over {
        flag.store(0, Ordering::Relaxed);
    }
    Ok(over)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Region, Region) {
        let (host, fd) = Region::create().expect("region");
        let worker = Region::map(fd.as_fd()).expect("second mapping");
        (host, worker)
    }

    #[test]
    fn bytes_cross_in_order_through_the_wrap() {
        let (host, worker) = pair();
        let (mut down, _) = host.host_ends();
        let (_, mut inbox) = worker.worker_ends();
        let mut sent = Vec::new();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 10_000];
        for round in 0..100u32 {
            let chunk: Vec<u8> = (0..7_919u32).map(|i| (i ^ round) as u8).collect();
            assert_eq!(down.write(&chunk), Ok(chunk.len()));
            sent.extend_from_slice(&chunk);
            let n = inbox.read(&mut buf).expect("consistent ring");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(
            got, sent,
            "100 × 7,919 bytes wrap the 256 KiB ring three times"
        );
    }

    #[test]
    fn a_full_ring_takes_what_fits_and_frees_space_as_it_is_read() {
        let (host, worker) = pair();
        let (mut down, _) = host.host_ends();
        let (_, mut inbox) = worker.worker_ends();
        let big = vec![7u8; RING_BYTES + 100];
        assert_eq!(down.write(&big), Ok(RING_BYTES));
        assert_eq!(down.write(&big), Ok(0));
        assert_eq!(down.park(), Ok(false), "no space: the producer may block");
        let mut buf = vec![0u8; 100];
        assert_eq!(inbox.read(&mut buf), Ok(100));
        assert!(inbox.producer_needs_bell(), "the parked producer is rung");
        assert!(!inbox.producer_needs_bell(), "once per park");
        assert_eq!(down.write(&big), Ok(100));
    }

    #[test]
    fn a_parked_consumer_is_rung_once_and_a_late_frame_is_seen_before_blocking() {
        let (host, worker) = pair();
        let (mut down, _) = host.host_ends();
        let (_, inbox) = worker.worker_ends();
        assert!(!down.consumer_needs_bell(), "nobody parked");
        assert_eq!(inbox.park(), Ok(false));
        assert_eq!(down.write(b"x"), Ok(1));
        assert!(down.consumer_needs_bell());
        assert!(!down.consumer_needs_bell());
        // Bytes already there: parking reports them and leaves no flag behind.
        assert_eq!(inbox.park(), Ok(true));
        assert!(!down.consumer_needs_bell());
    }

    #[test]
    fn positions_a_hostile_peer_writes_are_refused() {
        let (host, worker) = pair();
        let (mut down, mut up) = host.host_ends();
        let (_, _) = worker.worker_ends();
        let control = |offset: usize| -> &Control {
            // SAFETY: the control blocks of the host's own mapping.
            unsafe { &*host.map.base.as_ptr().add(offset).cast::<Control>() }
        };
        // The worker claims more bytes than a ring holds, then a tail behind our head.
        control(UP_CONTROL)
            .tail
            .0
            .store(RING_BYTES as u64 + 1, Ordering::SeqCst);
        assert_eq!(up.read(&mut [0u8; 8]), Err(Corrupt));
        control(UP_CONTROL).tail.0.store(0, Ordering::SeqCst);
        assert_eq!(up.read(&mut [0u8; 8]), Ok(0));
        // It claims to have read bytes never written.
        control(DOWN_CONTROL).head.0.store(5, Ordering::SeqCst);
        assert_eq!(down.write(b"abc"), Err(Corrupt));
        // And overwrites the tail we own: our own copy is what counts.
        control(DOWN_CONTROL).head.0.store(0, Ordering::SeqCst);
        assert_eq!(down.write(b"abc"), Ok(3));
        control(DOWN_CONTROL)
            .tail
            .0
            .store(u64::MAX, Ordering::SeqCst);
        assert_eq!(down.write(b"de"), Ok(2));
        assert_eq!(control(DOWN_CONTROL).tail.0.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn a_descriptor_smaller_than_a_region_is_refused() {
        let fd = memfd_create("small", MemfdFlags::CLOEXEC).expect("memfd");
        ftruncate(&fd, 4096).expect("size");
        assert!(Region::map(fd.as_fd()).is_err());
    }
}
