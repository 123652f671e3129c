//! The registry's lock, and the generation counter every write through it bumps.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::scope::State;

/// A generation counter that wakes its receivers on every registry write.
pub(crate) struct Changes(pub(super) tokio::sync::watch::Sender<u64>);

impl Default for Changes {
    fn default() -> Self {
        Changes(tokio::sync::watch::Sender::new(0))
    }
}

impl Changes {
    /// A receiver woken after each later write.
    #[cfg_attr(not(feature = "mcp-server"), allow(dead_code))]
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }
}

pub(crate) fn read(lock: &RwLock<State>) -> RwLockReadGuard<'_, State> {
    lock.read()
}

/// Takes the write lock and bumps the change generation.
pub(crate) fn write(lock: &RwLock<State>) -> RwLockWriteGuard<'_, State> {
    let state = lock.write();
    // Receivers read the state through the lock, so they see this write once it is released.
    state
        .changes
        .0
        .send_modify(|generation| *generation = generation.wrapping_add(1));
    state
}
