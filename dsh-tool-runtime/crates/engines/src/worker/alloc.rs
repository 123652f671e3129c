//! The worker's global allocator, which holds the heap to the memory budget: the one limit the
//! worker decides, reported only through the exit status [`OOM_EXIT_CODE`], which no program
//! can choose. After a run, the heap it freed goes back to the system.

// A global allocator is an `unsafe` trait: every method notes its SAFETY.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use monty_types::{LIVE_MEMORY, OOM_EXIT_CODE};

/// Heap bytes the worker may hold (set once from its command line; `usize::MAX` until then).
pub(super) static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// The most heap bytes held since the last run ended.
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The worker's global allocator: the system allocator, counting live bytes into
/// [`monty_types::LIVE_MEMORY`] and ending the process with [`OOM_EXIT_CODE`] at the first
/// allocation past the memory budget (the host reads that status as `memory-limit`).
#[doc(hidden)]
#[derive(Debug)]
pub struct WorkerAllocator;

impl WorkerAllocator {
    fn reserve(size: usize) {
        let after = LIVE_MEMORY
            .fetch_add(size, Ordering::Relaxed)
            .saturating_add(size);
        if after > LIMIT.load(Ordering::Relaxed) {
            // Raw `_exit`: `std::process::exit` runs exit handlers that may allocate, and
            // rustix offers `_exit` only in its unstable runtime API. SAFETY: `_exit` ends the
            // process at once; nothing runs after it.
            unsafe { libc::_exit(OOM_EXIT_CODE) }
        }
        if after > PEAK.load(Ordering::Relaxed) {
            PEAK.store(after, Ordering::Relaxed);
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's layout; the counters are atomics.
unsafe impl GlobalAlloc for WorkerAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::reserve(layout.size());
        // SAFETY: forwarded with the caller's (non-zero-sized) layout.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            LIVE_MEMORY.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::reserve(layout.size());
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            LIVE_MEMORY.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_MEMORY.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            Self::reserve(new_size - layout.size());
        }
        // SAFETY: `ptr` came from this allocator with `layout`; `new_size` is the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > layout.size() {
                LIVE_MEMORY.fetch_sub(new_size - layout.size(), Ordering::Relaxed);
            }
        } else if new_size < layout.size() {
            LIVE_MEMORY.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        p
    }
}

/// Heap a run may leave behind before the worker gives freed memory back to the system: the
/// host reads the worker's resident size against the next run's budget.
const TRIM_ABOVE: usize = 32 << 20;

/// Gives the heap a large run freed back to the system, so that the worker's resident size
/// is that of an idle worker again.
pub(crate) fn release_memory() {
    if PEAK.swap(LIVE_MEMORY.load(Ordering::Relaxed), Ordering::Relaxed) > TRIM_ABOVE {
        // SAFETY: `malloc_trim` only releases free memory of the C heap.
        unsafe { libc::malloc_trim(0) };
    }
}
