//! Retains and releases that arrived while the server was lent out.

use crate::handle::HandleId;
use crate::server::ComputeServer;
use core::cell::Cell;

/// Net deferred reference changes, one counter per handle slot.
///
/// While a handle has a deferred release its slot still holds a reference, so the slot cannot be
/// reused and the id stored with the counter stays the right one. A counter of 0 has nothing to
/// apply, so it needs no id: the slot keeps the last one beside it (12 bytes a slot, not the 16
/// of an `Option<HandleId>` beside the counter).
pub struct Deferred<const N: usize> {
    slots: [Cell<(HandleId, i32)>; N],
    any: Cell<bool>,
}

/// The id of a slot that never had a change.
const UNUSED: HandleId = HandleId::from_parts(0, 0, 0);

impl<const N: usize> Default for Deferred<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Deferred<N> {
    /// No deferred change.
    pub const fn new() -> Self {
        Deferred {
            slots: [const { Cell::new((UNUSED, 0)) }; N],
            any: Cell::new(false),
        }
    }

    /// Record a change of `delta` references to `id`. Returns false if the id's slot is beyond
    /// `N` (the channel is smaller than the server's handle table; prevented at compile time).
    pub fn push(&self, id: HandleId, delta: i32) -> bool {
        let Some(slot) = self.slots.get(id.index() as usize) else {
            return false;
        };
        let (_, d) = slot.get();
        slot.set((id, d.saturating_add(delta)));
        self.any.set(true);
        true
    }

    /// Apply every waiting change to the server. Every channel call runs it twice, and there
    /// is rarely anything waiting: the check is inlined, the walk is not.
    #[inline]
    pub fn apply<S: ComputeServer>(&self, server: &mut S) {
        if self.any.get() {
            self.apply_all(server);
        }
    }

    #[inline(never)]
    fn apply_all<S: ComputeServer>(&self, server: &mut S) {
        self.any.set(false);
        for slot in &self.slots {
            let (id, delta) = slot.get();
            slot.set((id, 0));
            // A stale id means the tensor is gone already; nothing is left to do.
            let _ = match delta {
                d if d > 0 => server.retain(id, d as u32),
                d if d < 0 => server.release_late(id, d.unsigned_abs()),
                _ => Ok(()),
            };
        }
    }
}
