//! [`GuidedMemory`]: measured then guided planned offsets for eager workloads that repeat;
//! the design is on the type.

use super::arena_plan::{plan_arena, Lifetime};
use crate::error::Error;
use crate::hal::Fence;
use crate::memory::{Access, ChunkSliceMemory, MemoryBinding, MemoryManagement, MemoryStats};
use crate::storage::Block;

/// Pools that placed tensors kept past their pass may hold back at once.
pub const HELD_POOLS: usize = 4;

/// Local search rounds of the planner by default (see [`plan_arena`]).
pub const DEFAULT_EFFORT: u32 = 200;

/// "Never released in the pass": the tensor escapes.
const ESCAPES: u16 = u16::MAX;

/// Counters of the passes of a [`MemoryManagement`] (all zero for a manager without passes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PassStats {
    /// Passes served by the inner manager while the tracker recorded them.
    pub measured_passes: u32,
    /// Passes that ran with a pool, placing reservations at planned offsets.
    pub guided_passes: u32,
    /// Passes whose key had a plan but that ran unguided: the pool could not be reserved, or
    /// [`HELD_POOLS`] pools were held back.
    pub unguided_passes: u32,
    /// Guided passes that differed from their plan (their key is measured again next time).
    pub diverged_passes: u32,
    /// Measured passes not planned: more reservations than the tracker holds (`EVENTS`), or
    /// the planner refused them.
    pub overflowed_passes: u32,
    /// Reservations placed at their planned offset.
    pub placed_reservations: u32,
    /// Reservations of guided passes served by the inner manager because the workload had
    /// diverged from the plan or the placement failed.
    pub fallback_reservations: u32,
    /// Reservations of guided passes that escape their pass (the caller keeps them), served by
    /// the inner manager as planned.
    pub escaping_reservations: u32,
    /// Plans stored (new keys and re-measured ones).
    pub plans_stored: u32,
    /// Plans forgotten to make room for another key.
    pub plan_evictions: u32,
    /// Pools held back now by placed tensors kept past their pass.
    pub held_pools: u32,
}

/// One reservation of a plan.
#[derive(Clone, Copy, Debug)]
struct Planned {
    bytes: u32,
    /// Offset in the pool (meaningless when the reservation escapes).
    offset: u32,
    /// Step of the reservation.
    first: u16,
    /// Step of the release, or [`ESCAPES`].
    last: u16,
}

const NO_PLANNED: Planned = Planned {
    bytes: 0,
    offset: 0,
    first: 0,
    last: ESCAPES,
};

/// The plan of one key.
#[derive(Debug)]
struct Plan<const EVENTS: usize> {
    key: u32,
    /// Pool bytes (0: nothing to place).
    pool: u32,
    /// Reservations of the pass.
    count: u16,
    /// Steps of the pass (reservations and releases).
    steps: u16,
    /// Tick of the last pass that used or stored it (least recently used goes first).
    used: u32,
    /// The last guided pass differed: measure again.
    stale: bool,
    slots: [Planned; EVENTS],
}

/// One reservation of the current pass.
#[derive(Clone, Copy, Debug)]
struct Tracked {
    /// The binding while the tensor is held.
    binding: Option<MemoryBinding>,
    bytes: u32,
    first: u16,
    last: u16,
    placed: bool,
}

const NO_TRACKED: Tracked = Tracked {
    binding: None,
    bytes: 0,
    first: 0,
    last: ESCAPES,
    placed: false,
};

/// A pool reserved from the inner manager.
#[derive(Clone, Copy, Debug)]
struct Pool {
    binding: MemoryBinding,
    /// Requested bytes (counted in the inner manager's `in_use`).
    bytes: u32,
    /// Its arena range: a binding inside it is one of its placements.
    block: Block,
}

impl Pool {
    fn contains(&self, b: Block) -> bool {
        self.block.offset <= b.offset && b.offset < self.block.offset + self.block.len.max(1)
    }
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Served by the inner manager, recorded.
    Measuring,
    /// Placed in a pool (none when nothing is planned to be placed) at the plan's offsets.
    Guided {
        slot: usize,
        pool: Option<Pool>,
        diverged: bool,
    },
    /// Served by the inner manager, not recorded.
    Unguided,
}

#[derive(Clone, Copy, Debug)]
struct Pass {
    key: u32,
    mode: Mode,
    /// Reservations tracked.
    count: u16,
    /// Steps so far.
    step: u16,
    /// More reservations or steps than the tracker holds.
    overflow: bool,
}

/// What the plan says of the next reservation.
enum Expect {
    Place(u32),
    Escape,
    Diverge,
}

/// A memory manager that measures the first run of each shape of an eager workload and places
/// the later runs at planned offsets.
///
/// # Design
///
/// An eager workload (work driven through the client, not a model file) reserves and releases
/// tensors one call at a time, so a memory manager cannot know what comes next. An inference
/// loop repeats itself, though: the second run of a shape makes the same reservations, in the
/// same order, with the same lifetimes, as the first. [`GuidedMemory`] uses that. The caller
/// brackets each run with [`begin_pass(key)`](GuidedMemory::begin_pass) and
/// [`end_pass`](GuidedMemory::end_pass) (through
/// [`ComputeClient::pass`](crate::client::ComputeClient::pass)), where `key` names the run's
/// shape (a sequence length, a batch size):
///
/// 1. **Measure.** The first pass of a key is served by the inner manager `M` (by default the
///    chunk/slice manager). A tracker numbers the pass's reservations and records, for the
///    k-th, its bytes, the step at which it was reserved and the step at which it was
///    released (a step is one reservation or release made in the pass). A tensor still held
///    at `end_pass` escapes the pass (the caller keeps it) and is never planned.
/// 2. **Plan.** At `end_pass`, the interval packer [`plan_arena`] lays the tensors that did not
///    escape out in one *pool*: tensors never live at the same step share bytes. The plan
///    (key, pool bytes and, per reservation, bytes, steps and offset) goes into a table of
///    `PLANS` entries; a full table forgets its least recently used key. The measured run's
///    free chunks then go back to the arena ([`MemoryManagement::release_free`]).
/// 3. **Guide.** A pass whose key has a plan reserves one pool of the plan's bytes from `M` at
///    `begin_pass`. Each reservation that is the one the plan expects (same bytes, same step)
///    is placed in the pool at its planned offset ([`MemoryManagement::place`]): nothing is
///    searched or carved. Escaping reservations go to `M` as in the measured run. At
///    `end_pass` the pool goes back to `M` and free chunks to the arena, so the next pass, of
///    any shape, finds the arena as the last one left it.
///
/// **When the workload changes.** Every reservation and release of a guided pass is checked
/// against the plan: another size, another order, a tensor released earlier or later. From
/// the first difference on, the pass falls back to `M` (tensors already placed stay valid: up
/// to that step the run was the planned one, and nothing more is placed), and the key is
/// measured again on its next pass ([`PassStats::diverged_passes`]). A shape that changes from
/// run to run (a transformer whose sequence length varies) thus gets chunk/slice reuse on the
/// first run of each shape, and a plan of its own from then on, for up to `PLANS` shapes.
///
/// **Safety.** Placed tensors and the pool are ordinary bindings of `M`: `release`, `block` and
/// `access_mut` go to `M`, and the fences that make reuse safe are `M`'s (a placement takes on
/// the jobs of the released tensors it lies over and of the pool's chunk). A placed tensor the
/// caller keeps past `end_pass` (the workload changed) holds its pool back until its release;
/// while [`HELD_POOLS`] pools are held back, passes with a plan run unguided.
///
/// **Capacity.** A pass with more than `EVENTS` reservations is not planned
/// ([`PassStats::overflowed_passes`]): never an error. Nothing is allocated: the tracker and
/// the plans are fixed arrays of about `EVENTS × (24 + 12 × PLANS)` bytes.
///
/// **Figures.** [`MemoryStats::in_use`] and its peak count tensors (placed ones included), not
/// the pool that holds them; [`MemoryStats::reserved`] counts the pool, a chunk of `M`.
///
/// ```
/// use npu_compute::memory::{ChunkSliceMemory, GuidedMemory, MemoryConfig, MemoryManagement};
///
/// let inner = ChunkSliceMemory::<16>::new(4096, 16, MemoryConfig::default()).unwrap();
/// let mut m: GuidedMemory<_, 2, 8> = GuidedMemory::new(inner);
/// for _ in 0..2 {
///     m.begin_pass(7).unwrap();
///     let a = m.reserve(256).unwrap();
///     let b = m.reserve(64).unwrap();
///     m.release(a).unwrap();
///     let c = m.reserve(256).unwrap(); // may reuse a's bytes
///     m.release(b).unwrap();
///     m.release(c).unwrap();
///     m.end_pass().unwrap();
/// }
/// let s = m.pass_stats();
/// assert_eq!((s.measured_passes, s.guided_passes, s.placed_reservations), (1, 1, 3));
/// ```
///
///
/// - `M`: the inner manager, serving everything that is not placed (default
///   [`ChunkSliceMemory`] with 64 chunks; placements take chunk slots too).
/// - `PLANS`: shapes (keys) whose plans are kept (default 4).
/// - `EVENTS`: reservations per pass the tracker records (default 64).
#[derive(Debug)]
pub struct GuidedMemory<
    M: MemoryManagement = ChunkSliceMemory<64>,
    const PLANS: usize = 4,
    const EVENTS: usize = 64,
> {
    inner: M,
    plans: [Option<Plan<EVENTS>>; PLANS],
    tracked: [Tracked; EVENTS],
    pass: Option<Pass>,
    held: [Option<Pool>; HELD_POOLS],
    /// Requested bytes of the pools reserved now (current and held back).
    pool_bytes: u32,
    /// Requested bytes of the placed tensors held now.
    placed_live: u32,
    in_use_peak: u32,
    tick: u32,
    effort: u32,
    stats: PassStats,
}

impl<M: MemoryManagement, const PLANS: usize, const EVENTS: usize> GuidedMemory<M, PLANS, EVENTS> {
    /// A guided manager over `inner`, with the planner's default effort ([`DEFAULT_EFFORT`]).
    pub fn new(inner: M) -> Self {
        let in_use_peak = inner.stats().in_use_peak;
        GuidedMemory {
            inner,
            plans: [const { None }; PLANS],
            tracked: [NO_TRACKED; EVENTS],
            pass: None,
            held: [None; HELD_POOLS],
            pool_bytes: 0,
            placed_live: 0,
            in_use_peak,
            tick: 0,
            effort: DEFAULT_EFFORT,
            stats: PassStats::default(),
        }
    }

    /// Sets the planner's local search rounds (see [`plan_arena`]); 0 keeps its greedy orders only.
    pub fn with_effort(mut self, effort: u32) -> Self {
        self.effort = effort;
        self
    }

    /// The inner manager (read only).
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The keys that have a plan now, with the plan's pool bytes (unordered).
    pub fn plans(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.plans.iter().flatten().map(|p| (p.key, p.pool))
    }

    /// Starts a pass: measured when `key` has no plan (or its last guided pass diverged),
    /// guided otherwise (the pool of its plan is reserved now).
    ///
    /// Errors: [`Error::PassAlreadyOpen`] while a pass is open. When the pool cannot be
    /// reserved, the pass runs unguided, except that [`Error::OutOfMemory`] or
    /// [`Error::CapacityExceeded`] is returned (and no pass begun) while free chunks are held
    /// back by running jobs, so that the server waits for them and asks again.
    pub fn begin_pass(&mut self, key: u32) -> Result<(), Error> {
        if let Some(p) = self.pass {
            return Err(Error::PassAlreadyOpen { key: p.key });
        }
        let tick = self.tick.wrapping_add(1);
        let found = self
            .plans
            .iter()
            .position(|p| p.as_ref().is_some_and(|p| p.key == key));
        let plan = found.and_then(|slot| {
            let p = self.plans[slot].as_ref()?;
            Some((slot, p.stale, p.pool))
        });
        let mode = match plan {
            Some((_, true, _)) => Mode::Measuring,
            Some(_) if self.held.iter().all(Option::is_some) => Mode::Unguided,
            Some((slot, _, 0)) => Mode::Guided {
                slot,
                pool: None,
                diverged: false,
            },
            Some((slot, _, bytes)) => {
                self.inner.release_free();
                match self.inner.reserve(bytes) {
                    Ok(binding) => {
                        let offset = self.inner.block(binding)?.offset;
                        self.pool_bytes = self.pool_bytes.saturating_add(bytes);
                        Mode::Guided {
                            slot,
                            pool: Some(Pool {
                                binding,
                                bytes,
                                block: Block { offset, len: bytes },
                            }),
                            diverged: false,
                        }
                    }
                    Err(e @ (Error::OutOfMemory { .. } | Error::CapacityExceeded { .. })) => {
                        if self.inner.has_busy_free_chunks() {
                            return Err(e);
                        }
                        Mode::Unguided
                    }
                    Err(e) => return Err(e),
                }
            }
            None => Mode::Measuring,
        };
        self.tick = tick;
        if let Some(p) = found.and_then(|slot| self.plans[slot].as_mut()) {
            p.used = tick;
        }
        match mode {
            Mode::Measuring => self.stats.measured_passes += 1,
            Mode::Guided { .. } => self.stats.guided_passes += 1,
            Mode::Unguided => self.stats.unguided_passes += 1,
        }
        self.tracked = [NO_TRACKED; EVENTS];
        self.pass = Some(Pass {
            key,
            mode,
            count: 0,
            step: 0,
            overflow: false,
        });
        self.note();
        Ok(())
    }

    /// Ends the pass: a measured pass is planned and stored, a guided pass returns its pool
    /// (or holds it back while placed tensors are kept). Free chunks then go back to the arena.
    ///
    /// Errors: [`Error::NoPassOpen`] without a pass.
    pub fn end_pass(&mut self) -> Result<(), Error> {
        let pass = self.pass.take().ok_or(Error::NoPassOpen)?;
        let result = match pass.mode {
            Mode::Measuring if pass.overflow => {
                self.stats.overflowed_passes += 1;
                Ok(())
            }
            Mode::Measuring => {
                self.store_plan(pass);
                Ok(())
            }
            Mode::Guided {
                slot,
                pool,
                diverged,
            } => {
                let complete = self.plans[slot].as_ref().is_some_and(|p| {
                    !diverged && !pass.overflow && p.count == pass.count && p.steps == pass.step
                });
                if !complete {
                    self.stats.diverged_passes += 1;
                    if let Some(p) = self.plans[slot].as_mut() {
                        p.stale = true;
                    }
                }
                match pool {
                    Some(pool) => self.release_pool(pool),
                    None => Ok(()),
                }
            }
            Mode::Unguided => Ok(()),
        };
        self.inner.release_free();
        self.note();
        result
    }

    /// Counters of the passes.
    pub fn pass_stats(&self) -> PassStats {
        PassStats {
            held_pools: self.held.iter().flatten().count() as u32,
            ..self.stats
        }
    }

    /// Bytes held by tensors now: the inner manager's, less the pools, plus the placements.
    fn in_use(&self) -> u32 {
        (self.inner.stats().in_use.saturating_sub(self.pool_bytes)).saturating_add(self.placed_live)
    }

    fn note(&mut self) {
        self.in_use_peak = self.in_use_peak.max(self.in_use());
    }

    /// What the plan of `slot` says of reservation `k` of `bytes` at `step`.
    fn expect(&self, slot: usize, k: usize, bytes: u32, step: u16) -> Expect {
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
    fn release_planned(&self, slot: usize, k: usize, step: u16) -> bool {
        self.plans
            .get(slot)
            .and_then(Option::as_ref)
            .and_then(|p| p.slots.get(k))
            .is_some_and(|s| s.last == step)
    }

    fn set_diverged(&mut self) {
        if let Some(Pass {
            mode: Mode::Guided { diverged, .. },
            ..
        }) = self.pass.as_mut()
        {
            *diverged = true;
        }
    }

    /// Plans the measured pass and stores the plan.
    fn store_plan(&mut self, pass: Pass) {
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

    /// Returns a pool to the inner manager, or holds it back while placements are held.
    fn release_pool(&mut self, pool: Pool) -> Result<(), Error> {
        match self.inner.release(pool.binding) {
            Ok(()) => {
                self.pool_bytes = self.pool_bytes.saturating_sub(pool.bytes);
                Ok(())
            }
            Err(Error::PoolInUse { .. }) => {
                if let Some(slot) = self.held.iter_mut().find(|h| h.is_none()) {
                    *slot = Some(pool);
                }
                // `begin_pass` guides only with a free slot, so one was found.
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// After the release of a tensor outside the current pass's tracker: if it was placed in a
    /// held-back pool, account for it and release the pool once it is empty.
    fn release_held(&mut self, binding: MemoryBinding) -> Result<bool, Error> {
        let Ok(block) = self.inner.block(binding) else {
            return Ok(false);
        };
        let Some(i) = self
            .held
            .iter()
            .position(|h| h.is_some_and(|p| p.binding != binding && p.contains(block)))
        else {
            return Ok(false);
        };
        self.inner.release(binding)?;
        self.placed_live = self.placed_live.saturating_sub(block.len);
        if let Some(pool) = self.held[i] {
            match self.inner.release(pool.binding) {
                Ok(()) => {
                    self.held[i] = None;
                    self.pool_bytes = self.pool_bytes.saturating_sub(pool.bytes);
                }
                Err(Error::PoolInUse { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

impl<M: MemoryManagement, const PLANS: usize, const EVENTS: usize> MemoryManagement
    for GuidedMemory<M, PLANS, EVENTS>
{
    fn reserve(&mut self, bytes: u32) -> Result<MemoryBinding, Error> {
        let Some(pass) = self.pass else {
            let b = self.inner.reserve(bytes)?;
            self.note();
            return Ok(b);
        };
        let k = usize::from(pass.count);
        let mut placed = false;
        let binding = match pass.mode {
            Mode::Guided {
                slot,
                pool,
                diverged: false,
            } => match (self.expect(slot, k, bytes, pass.step), pool) {
                (Expect::Place(offset), Some(pool)) => {
                    match self.inner.place(pool.binding, offset, bytes) {
                        Ok(b) => {
                            placed = true;
                            self.stats.placed_reservations += 1;
                            b
                        }
                        Err(_) => {
                            let b = self.inner.reserve(bytes)?;
                            self.stats.fallback_reservations += 1;
                            b
                        }
                    }
                }
                (Expect::Escape, _) => {
                    let b = self.inner.reserve(bytes)?;
                    self.stats.escaping_reservations += 1;
                    b
                }
                _ => {
                    self.set_diverged();
                    let b = self.inner.reserve(bytes)?;
                    self.stats.fallback_reservations += 1;
                    b
                }
            },
            Mode::Guided { diverged: true, .. } => {
                let b = self.inner.reserve(bytes)?;
                self.stats.fallback_reservations += 1;
                b
            }
            Mode::Measuring | Mode::Unguided => self.inner.reserve(bytes)?,
        };
        if placed {
            self.placed_live = self.placed_live.saturating_add(bytes);
        }
        if let Some(p) = self
            .pass
            .as_mut()
            .filter(|p| !matches!(p.mode, Mode::Unguided))
        {
            let next = p.step.checked_add(1).filter(|&s| s < ESCAPES);
            match (self.tracked.get_mut(k), next) {
                (Some(t), Some(next)) if !p.overflow => {
                    *t = Tracked {
                        binding: Some(binding),
                        bytes,
                        first: p.step,
                        last: ESCAPES,
                        placed,
                    };
                    p.count += 1;
                    p.step = next;
                }
                _ => p.overflow = true,
            }
        }
        if self.pass.is_some_and(|p| p.overflow) {
            // A guided pass the tracker cannot follow places nothing more.
            self.set_diverged();
        }
        self.note();
        Ok(binding)
    }

    fn place(
        &mut self,
        pool: MemoryBinding,
        offset: u32,
        bytes: u32,
    ) -> Result<MemoryBinding, Error> {
        self.inner.place(pool, offset, bytes)
    }

    fn release(&mut self, binding: MemoryBinding) -> Result<(), Error> {
        let tracked = self.pass.and_then(|p| {
            self.tracked[..usize::from(p.count)]
                .iter()
                .position(|t| t.binding == Some(binding))
                .map(|k| (p, k))
        });
        if let Some((pass, k)) = tracked {
            self.inner.release(binding)?;
            let t = &mut self.tracked[k];
            t.binding = None;
            t.last = pass.step;
            if t.placed {
                self.placed_live = self.placed_live.saturating_sub(t.bytes);
            }
            if let Mode::Guided {
                slot,
                diverged: false,
                ..
            } = pass.mode
            {
                if !self.release_planned(slot, k, pass.step) {
                    self.set_diverged();
                }
            }
            let next = pass.step.checked_add(1).filter(|&s| s < ESCAPES);
            if let Some(p) = self.pass.as_mut() {
                match next {
                    Some(next) => p.step = next,
                    None => p.overflow = true,
                }
            }
            if self.pass.is_some_and(|p| p.overflow) {
                self.set_diverged();
            }
        } else if !self.release_held(binding)? {
            self.inner.release(binding)?;
        }
        self.note();
        Ok(())
    }

    fn block(&self, binding: MemoryBinding) -> Result<Block, Error> {
        self.inner.block(binding)
    }

    fn access_mut(&mut self, binding: MemoryBinding) -> Result<&mut Access, Error> {
        self.inner.access_mut(binding)
    }

    fn block_and_access(&mut self, binding: MemoryBinding) -> Result<(Block, &mut Access), Error> {
        self.inner.block_and_access(binding)
    }

    fn retire_fences(&mut self, done: &mut dyn FnMut(usize, Fence) -> bool) {
        self.inner.retire_fences(done);
    }

    fn has_busy_free_chunks(&self) -> bool {
        self.inner.has_busy_free_chunks()
    }

    fn stats(&self) -> MemoryStats {
        MemoryStats {
            in_use: self.in_use(),
            in_use_peak: self.in_use_peak,
            ..self.inner.stats()
        }
    }

    fn alignment(&self) -> u32 {
        self.inner.alignment()
    }

    fn release_free(&mut self) {
        self.inner.release_free();
    }

    fn reset_peak(&mut self) {
        self.inner.reset_peak();
        self.in_use_peak = self.in_use();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{DeallocStrategy, MemoryConfig, SliceStrategy};

    type Guided<const P: usize, const E: usize> = GuidedMemory<ChunkSliceMemory<32>, P, E>;

    fn guided<const P: usize, const E: usize>() -> Guided<P, E> {
        let config = MemoryConfig {
            slice: SliceStrategy::Ratio(0.8),
            dealloc: DeallocStrategy::Never,
        };
        GuidedMemory::new(ChunkSliceMemory::new(1 << 16, 16, config).unwrap())
    }

    /// A little chain: x → a → b, c, as an inference would, with sizes scaled by `n`.
    fn run<const P: usize, const E: usize>(m: &mut Guided<P, E>, key: u32, n: u32) -> [Block; 4] {
        m.begin_pass(key).unwrap();
        let x = m.reserve(64 * n).unwrap();
        let a = m.reserve(128 * n).unwrap();
        let bx = m.block(x).unwrap();
        let ba = m.block(a).unwrap();
        m.release(x).unwrap();
        let b = m.reserve(64 * n).unwrap();
        let bb = m.block(b).unwrap();
        m.release(a).unwrap();
        let c = m.reserve(96 * n).unwrap();
        let bc = m.block(c).unwrap();
        m.release(b).unwrap();
        m.release(c).unwrap();
        m.end_pass().unwrap();
        [bx, ba, bb, bc]
    }

    #[test]
    fn measured_then_guided_places_at_the_bound() {
        let mut m = guided::<4, 8>();
        run(&mut m, 1, 1);
        assert_eq!(
            m.stats().reserved,
            0,
            "measured chunks went back to the arena"
        );
        m.reset_peak();
        let blocks = run(&mut m, 1, 1);
        let s = m.pass_stats();
        assert_eq!((s.measured_passes, s.guided_passes), (1, 1));
        assert_eq!(s.placed_reservations, 4);
        assert_eq!((s.fallback_reservations, s.diverged_passes), (0, 0));
        // Live at once at most: x + a (192) or a + b (192) or b + c (160): the pool is 192.
        let stats = m.stats();
        assert_eq!(stats.reserved_peak, 192);
        assert_eq!(stats.in_use_peak, 192);
        assert_eq!((stats.in_use, stats.reserved), (0, 0));
        // a and b live together do not share bytes.
        let [_, a, b, _] = blocks;
        assert!(a.end() <= b.offset || b.end() <= a.offset);
    }

    #[test]
    fn a_changed_workload_falls_back_and_is_measured_again() {
        let mut m = guided::<4, 8>();
        run(&mut m, 1, 1);
        run(&mut m, 1, 2); // same key, other sizes
        let s = m.pass_stats();
        assert_eq!((s.diverged_passes, s.placed_reservations), (1, 0));
        assert_eq!(s.fallback_reservations, 4);
        run(&mut m, 1, 2);
        assert_eq!(m.pass_stats().measured_passes, 2, "measured again");
        run(&mut m, 1, 2);
        assert_eq!(m.pass_stats().placed_reservations, 4);
    }

    #[test]
    fn a_tensor_released_late_stops_placement() {
        let mut m = guided::<4, 8>();
        run(&mut m, 1, 1);
        m.begin_pass(1).unwrap();
        let x = m.reserve(64).unwrap();
        let a = m.reserve(128).unwrap();
        // x is kept: b must not be placed over it.
        let b = m.reserve(64).unwrap();
        let (bx, bb) = (m.block(x).unwrap(), m.block(b).unwrap());
        assert!(bx.end() <= bb.offset || bb.end() <= bx.offset);
        assert_eq!(m.pass_stats().placed_reservations, 2);
        for t in [x, a, b] {
            m.release(t).unwrap();
        }
        m.end_pass().unwrap();
        assert_eq!(m.pass_stats().diverged_passes, 1);
        assert_eq!(m.stats().in_use, 0);
    }

    #[test]
    fn escaping_tensors_are_not_planned_and_kept_placements_hold_the_pool() {
        let mut m = guided::<4, 8>();
        for _ in 0..2 {
            m.begin_pass(3).unwrap();
            let t = m.reserve(32).unwrap();
            let keep = m.reserve(48).unwrap();
            m.release(t).unwrap();
            m.end_pass().unwrap();
            m.release(keep).unwrap();
        }
        let s = m.pass_stats();
        assert_eq!((s.placed_reservations, s.escaping_reservations), (1, 1));
        // A placed tensor kept past the pass holds its pool back until released.
        m.begin_pass(3).unwrap();
        let t = m.reserve(32).unwrap();
        let keep = m.reserve(48).unwrap();
        m.end_pass().unwrap();
        assert_eq!(m.pass_stats().held_pools, 1);
        assert_eq!(m.stats().in_use, 80);
        m.release(t).unwrap();
        m.release(keep).unwrap();
        assert_eq!(m.pass_stats().held_pools, 0);
        assert_eq!(m.stats().in_use, 0);
        m.release_free();
        assert_eq!(m.stats().reserved, 0);
    }

    #[test]
    fn plans_are_evicted_least_recently_used_first() {
        let mut m = guided::<2, 8>();
        run(&mut m, 1, 1);
        run(&mut m, 2, 1);
        run(&mut m, 1, 1); // guided: 1 is now more recent than 2
        run(&mut m, 3, 1); // evicts 2
        let mut keys: heapless::Vec<u32, 2> = m.plans().map(|(k, _)| k).collect();
        keys.sort_unstable();
        assert_eq!(&keys[..], &[1, 3]);
        assert_eq!(m.pass_stats().plan_evictions, 1);
        run(&mut m, 2, 1);
        assert_eq!(m.pass_stats().measured_passes, 4);
    }

    #[test]
    fn too_many_reservations_are_not_planned_nor_an_error() {
        let mut m = guided::<2, 3>();
        for _ in 0..2 {
            run(&mut m, 1, 1);
        }
        let s = m.pass_stats();
        assert_eq!(
            (s.overflowed_passes, s.measured_passes, s.guided_passes),
            (2, 2, 0)
        );
        assert_eq!(m.stats().in_use, 0);
    }

    #[test]
    fn passes_do_not_nest() {
        let mut m = guided::<2, 8>();
        assert_eq!(m.end_pass(), Err(Error::NoPassOpen));
        m.begin_pass(5).unwrap();
        assert_eq!(m.begin_pass(6), Err(Error::PassAlreadyOpen { key: 5 }));
        m.end_pass().unwrap();
    }

    #[test]
    fn a_pool_that_does_not_fit_leaves_the_pass_unguided() {
        let config = MemoryConfig::default();
        let inner = ChunkSliceMemory::<8>::new(512, 16, config).unwrap();
        let mut m: GuidedMemory<_, 2, 8> = GuidedMemory::new(inner);
        m.begin_pass(1).unwrap();
        let a = m.reserve(256).unwrap();
        m.release(a).unwrap();
        m.end_pass().unwrap();
        let hog = m.reserve(384).unwrap();
        m.begin_pass(1).unwrap();
        assert_eq!(m.pass_stats().unguided_passes, 1);
        assert!(matches!(
            m.reserve(256),
            Err(Error::OutOfMemory { .. } | Error::CapacityExceeded { .. })
        ));
        m.end_pass().unwrap();
        m.release(hog).unwrap();
    }
}
