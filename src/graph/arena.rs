//! The arena plan of a model: every activation's lifetime, buffers shared where an operator
//! runs in place or writes into a concatenation, tiled chains chosen for the smallest arena,
//! then one [`ArenaPlan`](crate::memory::ArenaPlan) for all of them (see
//! [`plan_arena`](crate::memory::plan_arena)), reserved as one pool at prepare.
//!
//! Choosing tiled chains (the `stripes` submodule, for [`Optimise::Memory`]) is built with
//! the cargo feature `striping` (on by default). Without it a graph has no tiled chain, the
//! paths that run them are left out, and [`Optimise::Memory`] fails with
//! [`Error::NotBuilt`](crate::error::Error::NotBuilt).

use super::tile::{self, Tile};
use super::{not_one_op, ArenaReport, Graph, GraphError, Optimise, StepOperand};
use crate::channel::ComputeChannel;
use crate::hal::MAX_JOB_INPUTS;
use crate::memory::{ArenaPlanError, Lifetime};
use crate::ops::Op;

/// A model's activation buffers: lifetimes and, per tensor, the buffer holding it and the
/// tensor's offset in that buffer.
pub(super) struct Buffers<const N: usize> {
    lifetimes: heapless::Vec<Lifetime, N>,
    of: heapless::Vec<u16, N>,
    at: heapless::Vec<u32, N>,
}

#[cfg(feature = "striping")]
mod stripes;

/// Rounds of local search the arena planner runs at prepare (see [`plan_arena`](crate::memory::plan_arena)).
pub const PLAN_EFFORT: u32 = 200;

impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'c, C, OPS, TENSORS> {
    /// The activation buffers under `tiles`: their lifetimes, and the buffer of each tensor
    /// (`u16::MAX` for constants and tensors never produced).
    ///
    /// A buffer is the memory of an activation and of the RESHAPEs that alias it. It is live
    /// from the step that writes it (step 0 for a model input) to its last reader (past the
    /// last step for a model output, which is read after the run). In a tiled chain, an
    /// intermediate tensor is only its band, the chain's input lives to the chain's last step
    /// and its output from the chain's first step.
    fn buffers(&self, tiles: &[Tile], alignment: u32, in_place: bool) -> Option<Buffers<TENSORS>> {
        let n = self.tensors.len();
        let end = self.steps.len() as u16;
        let mut root: heapless::Vec<u16, TENSORS> = (0..n as u16).collect();
        let mut first: heapless::Vec<u16, TENSORS> = heapless::Vec::new();
        let _ = first.resize(n, u16::MAX);
        let mut last: heapless::Vec<u16, TENSORS> = heapless::Vec::new();
        let _ = last.resize(n, 0);
        let mut bytes: heapless::Vec<u32, TENSORS> = self.tensors.iter().map(|s| s.bytes).collect();
        for &t in &self.inputs {
            first[usize::from(t)] = 0;
        }
        for (si, step) in self.steps.iter().enumerate() {
            let out = usize::from(step.output);
            if let (None, Some(StepOperand::Tensor(input))) = (step.op, step.operands.first()) {
                root[out] = root[usize::from(*input)];
            }
            let r = usize::from(root[out]);
            first[r] = first[r].min(si as u16);
        }
        for (t, slot) in self.tensors.iter().enumerate() {
            if !slot.constant {
                let r = usize::from(root[t]);
                // With several units, a buffer lives one step past its last reader, so that
                // the next step's output never overwrites what the bands of the step before
                // still read: the memory a schedule's concurrent tasks need does not overlap.
                let used = if slot.last_use == u16::MAX {
                    end
                } else {
                    slot.last_use
                        .saturating_add(u16::from(self.overlap))
                        .min(end)
                };
                last[r] = last[r].max(used);
            }
        }
        // A variable lives for the graph's lifetime: from before the first step to after the
        // last, so no other buffer ever shares its memory and its bytes last from one invoke
        // to the next.
        for (t, slot) in self.tensors.iter().enumerate() {
            if slot.variable {
                let r = usize::from(root[t]);
                first[r] = 0;
                last[r] = end;
            }
        }
        if in_place {
            // An op that runs in place writes its output over an input whose buffer dies at
            // that op (and has the output's size): the output joins that buffer.
            for (si, step) in self.steps.iter().enumerate() {
                let out = usize::from(step.output);
                if !step.op.is_some_and(|op| op.runs_in_place()) || usize::from(root[out]) != out {
                    continue;
                }
                let dying = step.operands.iter().find_map(|o| match *o {
                    StepOperand::Tensor(t) => {
                        let r = usize::from(root[usize::from(t)]);
                        let fits = !self.tensors[r].constant && bytes[r] == bytes[out];
                        (fits && usize::from(last[r]) == si).then_some(r)
                    }
                    StepOperand::Aux(_) => None,
                });
                if let Some(r) = dying {
                    for t in root.iter_mut().filter(|t| usize::from(**t) == out) {
                        *t = r as u16;
                    }
                    last[r] = last[r].max(last[out]);
                }
            }
        }
        // A chain's input that nothing reads after the chain starts shares memory with the
        // chain's output: the output starts `lag` bytes below the input and overwrites only
        // input rows no later stripe reads (streaming in place). `into[r]` is the buffer the
        // root `r` moved into and its offset there.
        let mut into: heapless::Vec<Option<(u16, u32)>, TENSORS> = heapless::Vec::new();
        let _ = into.resize(n, None);
        for tile in tiles {
            let (a, b) = (usize::from(tile.first), usize::from(tile.last));
            let cost = self.tile_cost(tile)?;
            for (k, rows) in cost.band_rows.iter().enumerate() {
                let out = tile::shapes(self.chain_op(a, k)?)?.1;
                bytes[usize::from(self.steps[a + k].output)] = rows * tile::row_bytes(out);
            }
            let r_in = usize::from(root[usize::from(self.chain_input(a)?)]);
            let r_out = usize::from(root[usize::from(self.steps[b].output)]);
            first[r_out] = first[r_out].min(tile.first);
            if tile.in_place && last[r_in] <= tile.first && into[r_in].is_none() && r_in != r_out {
                let lag = cost.input_lag.div_ceil(alignment) * alignment;
                into[r_in] = Some((r_out as u16, lag));
                bytes[r_out] = bytes[r_out].max(lag.checked_add(bytes[r_in])?);
                first[r_out] = first[r_out].min(first[r_in]);
            } else {
                last[r_in] = last[r_in].max(tile.last);
            }
        }
        if in_place {
            self.concat_in_place(alignment, &root, &mut first, &last, &bytes, &mut into);
        }
        let mut buffers = Buffers {
            lifetimes: heapless::Vec::new(),
            of: heapless::Vec::new(),
            at: heapless::Vec::new(),
        };
        let _ = buffers.of.resize(n, u16::MAX);
        let _ = buffers.at.resize(n, 0);
        for (t, slot) in self.tensors.iter().enumerate() {
            let owns = usize::from(root[t]) == t && into[t].is_none();
            if owns && first[t] != u16::MAX && !slot.constant {
                buffers.of[t] = buffers.lifetimes.len() as u16;
                let _ = buffers.lifetimes.push(Lifetime {
                    bytes: bytes[t],
                    first: first[t],
                    last: last[t].max(first[t]),
                });
            }
        }
        for t in 0..n {
            let r = usize::from(root[t]);
            (buffers.of[t], buffers.at[t]) = match into[r] {
                Some((o, lag)) => (buffers.of[usize::from(o)], lag),
                None => (buffers.of[r], 0),
            };
        }
        Some(buffers)
    }
    /// Moves the inputs of each concatenation along its outermost axis into their blocks of
    /// the output, when every input is an activation whose buffer dies at the concatenation
    /// (nothing else reads it later), has exactly its block's size, starts at an aligned
    /// offset and is no other buffer's home: the producers then write straight into the
    /// output, and the concatenation copies nothing. Moves never nest.
    fn concat_in_place(
        &self,
        alignment: u32,
        root: &[u16],
        first: &mut [u16],
        last: &[u16],
        bytes: &[u32],
        into: &mut [Option<(u16, u32)>],
    ) {
        for si in 0..self.steps.len() {
            let Some(blocks) = self.concat_blocks(si) else {
                continue;
            };
            let r_out = usize::from(root[usize::from(self.steps[si].output)]);
            let root_of = |t: u16| usize::from(root[usize::from(t)]);
            let movable = |k: usize, &(t, at, len): &(u16, u32, u32)| {
                let r = root_of(t);
                let is_home = into.iter().flatten().any(|&(o, _)| usize::from(o) == r);
                !self.tensors[r].constant
                    && first[r] != u16::MAX
                    && usize::from(last[r]) == si
                    && bytes[r] == len
                    && at % alignment == 0
                    && r != r_out
                    && into[r].is_none()
                    && into[r_out].is_none()
                    && !is_home
                    && !blocks[..k].iter().any(|&(u, ..)| root_of(u) == r)
            };
            if blocks.iter().enumerate().all(|(k, b)| movable(k, b)) {
                for &(t, at, _) in &blocks {
                    let r = root_of(t);
                    into[r] = Some((r_out as u16, at));
                    first[r_out] = first[r_out].min(first[r]);
                }
            }
        }
    }
    /// For a concatenation along its outermost axis (one outer slice, so each input is one
    /// contiguous block of the output): each input with its block's byte offset and length.
    fn concat_blocks(&self, si: usize) -> Option<heapless::Vec<(u16, u32, u32), MAX_JOB_INPUTS>> {
        let step = self.steps.get(si)?;
        let lens = step.op.as_ref()?.contiguous_inputs()?;
        let mut blocks = heapless::Vec::new();
        let mut at = 0_u32;
        for (operand, &len) in step.operands.iter().zip(&lens) {
            let StepOperand::Tensor(t) = *operand else {
                return None;
            };
            blocks.push((t, at, len)).ok()?;
            at = at.checked_add(len)?;
        }
        Some(blocks)
    }

    /// Op `k` of a chain starting at step `a`.
    pub(super) fn chain_op(&self, a: usize, k: usize) -> Option<&Op> {
        self.steps.get(a + k).and_then(|s| s.op.as_ref())
    }
    /// What running `tile` in stripes costs (`None`: some op cannot be cut).
    pub(super) fn tile_cost(&self, tile: &Tile) -> Option<tile::ChainCost> {
        let a = usize::from(tile.first);
        let len = usize::from(tile.last.checked_sub(tile.first)?) + 1;
        tile::chain_cost(len, |k| self.chain_op(a, k), tile.rows)
    }
    /// The activation a chain starting at step `a` reads (its first operand).
    pub(super) fn chain_input(&self, a: usize) -> Option<u16> {
        match self.steps.get(a)?.operands.first()? {
            StepOperand::Tensor(t) => Some(*t),
            StepOperand::Aux(_) => None,
        }
    }
    /// Lays the activations out in one pool (see [`plan_arena`](crate::memory::plan_arena)) and reserves it,
    /// after choosing tiled chains when `optimise` asks for the smallest arena.
    // Out of line, as `add_step`: its tables then share no frame with prepare's others.
    #[inline(never)]
    pub(super) fn plan_arena(
        &mut self,
        optimise: Optimise,
        slow_tensors: &[u16],
    ) -> Result<(), GraphError> {
        let alignment = self
            .client
            .capabilities()
            .map_err(not_one_op)?
            .alignment
            .max(1);
        if optimise == Optimise::Memory {
            if let Some(&tensor) = slow_tensors.first() {
                return Err(GraphError::SlowTensor {
                    tensor,
                    reason: "stripes are planned over whole tensors in one pool: prepare with \
                             Optimise::Cycles to keep tensors in the slow tier",
                });
            }
            self.choose_tiles(alignment)?;
        }
        // Before the plan's own buffers: the two tables are then never alive at once.
        let lower_bound_bytes = crate::memory::lower_bound(
            &self
                .buffers(&[], alignment, false)
                .map(|b| b.lifetimes)
                .unwrap_or_default(),
            alignment,
        );
        let buffers = self
            .buffers(self.striped(), alignment, true)
            .ok_or(GraphError::Plan(ArenaPlanError::BadInput {
                buffer: u32::MAX,
            }))?;
        // A buffer goes to the slow tier with any of its tensors listed there.
        let mut slow: heapless::Vec<bool, TENSORS> = heapless::Vec::new();
        let _ = slow.resize(buffers.lifetimes.len(), false);
        for (t, &b) in buffers.of.iter().enumerate() {
            if slow_tensors.contains(&(t as u16)) {
                match slow.get_mut(usize::from(b)) {
                    Some(s) => *s = true,
                    None => {
                        return Err(GraphError::SlowTensor {
                            tensor: t as u16,
                            reason: "it is a constant, or no operator that runs produces it: \
                                     list activations only",
                        })
                    }
                }
            }
        }
        let tier = |in_slow: bool| -> heapless::Vec<Lifetime, TENSORS> {
            let keep = |(_, s): &(&Lifetime, &bool)| **s == in_slow;
            (buffers.lifetimes.iter().zip(&slow).filter(keep))
                .map(|(l, _)| *l)
                .collect()
        };
        // Without a tier (every firmware but one that asks), one plan over the buffers as
        // they are: no second plan, no split tables on prepare's stack.
        let any_slow = slow.contains(&true);
        let plan = if any_slow {
            crate::memory::plan_arena::<TENSORS>(&tier(false), alignment, PLAN_EFFORT)
        } else {
            crate::memory::plan_arena::<TENSORS>(&buffers.lifetimes, alignment, PLAN_EFFORT)
        }
        .map_err(GraphError::Plan)?;
        let slow_plan = if any_slow {
            let p = crate::memory::plan_arena::<TENSORS>(&tier(true), alignment, PLAN_EFFORT);
            Some(p.map_err(GraphError::Plan)?)
        } else {
            None
        };
        for ((slot, &b), &at) in self.tensors.iter_mut().zip(&buffers.of).zip(&buffers.at) {
            let b = usize::from(b);
            let Some(&in_slow) = slow.get(b) else {
                continue;
            };
            // The buffer's index among those of its tier.
            let k = slow[..b].iter().filter(|&&s| s == in_slow).count();
            let offset = match (&slow_plan, in_slow) {
                (Some(slow_plan), true) => slow_plan.offset(k),
                _ => plan.offset(k),
            };
            if let Some(offset) = offset {
                slot.offset = offset + at;
                slot.slow = in_slow;
            }
        }
        let slow_bytes = slow_plan.as_ref().map_or(0, |p| p.size());
        for si in 0..self.steps.len() {
            // Buffers live at the same step never overlap, so an input found exactly at its
            // block of the output was moved there.
            let out = usize::from(self.steps[si].output);
            let in_place = self.concat_blocks(si).is_some_and(|blocks| {
                blocks.iter().all(|&(t, at, _)| {
                    let (t, o) = (usize::from(t), out);
                    buffers.of[t] == buffers.of[o]
                        && self.tensors[t].offset == self.tensors[o].offset + at
                })
            });
            self.steps[si].in_place = in_place;
        }
        let recomputed_macs = self
            .striped()
            .iter()
            .filter_map(|t| self.tile_cost(t))
            .map(|c| c.extra_macs)
            .sum();
        let rounded = |bytes: u32| bytes.div_ceil(alignment) * alignment;
        let constant_bytes = self
            .tensors
            .iter()
            .filter_map(|s| s.value.as_ref())
            .chain(&self.aux)
            .filter(|v| !self.client.is_in_flash(v).unwrap_or(false))
            .map(|v| rounded(v.bytes()))
            .sum();
        self.memory = ArenaReport {
            activation_bytes: plan.size(),
            lower_bound_bytes,
            constant_bytes,
            tiled_chains: self.striped().len() as u8,
            recomputed_macs,
            slow_bytes,
        };
        // Placements go through the arena's pool, so it exists whenever the slow one does.
        if plan.size() > 0 || slow_bytes > 0 {
            let pool = self.client.empty(plan.size().max(1)).map_err(not_one_op)?;
            self.pool = Some(pool);
        }
        if slow_bytes > 0 {
            let pool = self.client.empty_slow(slow_bytes).map_err(not_one_op)?;
            self.slow_pool = Some(pool);
        }
        Ok(())
    }
}

impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'c, C, OPS, TENSORS> {
    /// The tiled chains the graph runs: none in a build without `striping`, which lets the
    /// compiler leave out the paths that run them.
    pub(super) fn striped(&self) -> &[Tile] {
        if cfg!(feature = "striping") {
            &self.tiles
        } else {
            &[]
        }
    }
}

/// Tiled chains in a build without them: [`Optimise::Memory`] is refused.
#[cfg(not(feature = "striping"))]
mod stripes {
    use super::super::{Graph, GraphError};
    use crate::channel::ComputeChannel;
    use crate::error::Error;

    impl<C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'_, C, OPS, TENSORS> {
        /// Refused: this build does not run layers in stripes.
        pub(in crate::graph) fn choose_tiles(&mut self, _alignment: u32) -> Result<(), GraphError> {
            Err(GraphError::Compute {
                op_index: None,
                error: Error::NotBuilt {
                    feature: "striping",
                },
            })
        }
    }
}
