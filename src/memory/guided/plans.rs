//! Plans: what the tracker records of a measured pass, the plan made from it, and what a plan
//! expects of each reservation and release of a guided pass.

use super::{GuidedMemory, Pass};
use crate::memory::arena_plan::{plan_arena, Lifetime};
use crate::memory::{MemoryBinding, MemoryManagement};

/// "Never released in the pass": the tensor escapes.
pub(super) const ESCAPES: u16 = u16::MAX;

/// One reservation of a plan.
#[derive(Clone, Copy, Debug)]
pub(super) struct Planned {
    pub(super) bytes: u32,
    /// Offset in the pool (meaningless when the reservation escapes).
    pub(super) offset: u32,
    /// Step of the reservation.
    pub(super) first: u16,
    /// Step of the release, or [`ESCAPES`].
    pub(super) last: u16,
}

const NO_PLANNED: Planned = Planned {
    bytes: 0,
    offset: 0,
    first: 0,
    last: ESCAPES,
};

/// The plan of one key.
#[derive(Debug)]
pub(super) struct Plan<const EVENTS: usize> {
    pub(super) key: u32,
    /// Pool bytes (0: nothing to place).
    pub(super) pool: u32,
    /// Reservations of the pass.
    pub(super) count: u16,
    /// Steps of the pass (reservations and releases).
    pub(super) steps: u16,
    /// Tick of the last pass that used or stored it (least recently used goes first).
    pub(super) used: u32,
    /// The last guided pass differed: measure again.
    pub(super) stale: bool,
    pub(super) slots: [Planned; EVENTS],
}

/// One reservation of the current pass.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tracked {
    /// The binding while the tensor is held.
    pub(super) binding: Option<MemoryBinding>,
    pub(super) bytes: u32,
    pub(super) first: u16,
    pub(super) last: u16,
    pub(super) placed: bool,
}

pub(super) const NO_TRACKED: Tracked = Tracked {
    binding: None,
    bytes: 0,
    first: 0,
    last: ESCAPES,
    placed: false,
};

/// What the plan says of the next reservation.
pub(super) enum Expect {
    Place(u32),
    Escape,
    Diverge,
}

impl<M: MemoryManagement, const PLANS: usize, const EVENTS: usize> GuidedMemory<M, PLANS, EVENTS> {
    /// What the plan of `slot` says of reservation `k` of `bytes` at `step`.
    pub(super) fn expect(&self, slot: usize, k: usize, bytes: u32, step: u16) -> Expect {
        let Some(p) = self.plans.get(slot).and_then(Option::as_ref) else {
            return Expect::Diverge;
        };
        match p.slots.get(k) {
            Some(s) if k < usize::from(p.count) && s.bytes == bytes && s.first == step => {
                if s.last == ESCAPES {
                    Expect::Escape
                } else {
                    Expect::Place(s.offset)
                }
            }
            _ => Expect::Diverge,
        }
    }

    /// Whether the plan of `slot` has reservation `k` released at `step`.
    pub(super) fn release_planned(&self, slot: usize, k: usize, step: u16) -> bool {
        self.plans
            .get(slot)
            .and_then(Option::as_ref)
            .and_then(|p| p.slots.get(k))
            .is_some_and(|s| s.last == step)
    }

    /// Plans the measured pass and stores the plan.
    pub(super) fn store_plan(&mut self, pass: Pass) {
        let count = usize::from(pass.count);
        let mut lifetimes: heapless::Vec<Lifetime, EVENTS> = heapless::Vec::new();
        let mut index: heapless::Vec<u16, EVENTS> = heapless::Vec::new();
        for (k, t) in self.tracked[..count].iter().enumerate() {
            if t.binding.is_none() {
                // Both hold at most `count <= EVENTS` entries.
                let _ = lifetimes.push(Lifetime {
                    bytes: t.bytes,
                    first: t.first,
                    last: t.last,
                });
                let _ = index.push(k as u16);
            }
        }
        let Ok(planned) = plan_arena::<EVENTS>(&lifetimes, self.inner.alignment(), self.effort)
        else {
            self.stats.overflowed_passes += 1;
            return;
        };
        let slot = match self
            .plans
            .iter()
            .position(|p| p.as_ref().is_some_and(|p| p.key == pass.key))
            .or_else(|| self.plans.iter().position(Option::is_none))
        {
            Some(slot) => slot,
            None => {
                let lru = self
                    .plans
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, p)| p.as_ref().map_or(0, |p| p.used))
                    .map(|(i, _)| i);
                let Some(lru) = lru else { return };
                self.stats.plan_evictions += 1;
                lru
            }
        };
        let mut entry = Plan {
            key: pass.key,
            pool: planned.size(),
            count: pass.count,
            steps: pass.step,
            used: self.tick,
            stale: false,
            slots: [NO_PLANNED; EVENTS],
        };
        for (s, t) in entry.slots.iter_mut().zip(&self.tracked[..count]) {
            *s = Planned {
                bytes: t.bytes,
                offset: 0,
                first: t.first,
                last: ESCAPES,
            };
        }
        for (j, &k) in index.iter().enumerate() {
            let k = usize::from(k);
            entry.slots[k].offset = planned.offset(j).unwrap_or(0);
            entry.slots[k].last = self.tracked[k].last;
        }
        self.plans[slot] = Some(entry);
        self.stats.plans_stored += 1;
    }
}
