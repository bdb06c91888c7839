//! [`GuidedMemory`]: measured then guided planned offsets for eager workloads that repeat;
//! the design is on the type.

mod plans;

use crate::error::Error;
use crate::hal::Fence;
use crate::memory::{
    Access, ChunkSliceMemory, MemoryBinding, MemoryManagement, MemoryStats, DEFAULT_CHUNKS,
};
use crate::storage::Block;
use plans::{Expect, Plan, Tracked, ESCAPES, NO_TRACKED};

/// Pools that placed tensors kept past their pass may hold back at once.
pub const HELD_POOLS: usize = 4;

/// Local search rounds of the planner by default (see [`plan_arena`]).
///
/// [`plan_arena`]: crate::memory::plan_arena
pub const DEFAULT_EFFORT: u32 = 200;

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
///
/// [`plan_arena`]: crate::memory::plan_arena
#[derive(Debug)]
pub struct GuidedMemory<
    M: MemoryManagement = ChunkSliceMemory<DEFAULT_CHUNKS>,
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
    ///
    /// [`plan_arena`]: crate::memory::plan_arena
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

    fn set_diverged(&mut self) {
        if let Some(Pass {
            mode: Mode::Guided { diverged, .. },
            ..
        }) = self.pass.as_mut()
        {
            *diverged = true;
        }
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

    /// Not guided: passes plan the fast arena, and a tensor asked for in the slow tier is the
    /// caller's plan already.
    fn reserve_slow(&mut self, bytes: u32) -> Result<MemoryBinding, Error> {
        self.inner.reserve_slow(bytes)
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
mod tests;
