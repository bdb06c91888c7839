//! Graph execution: running a TensorFlow Lite model through the compute client.
//!
//! # Design
//!
//! A [`Graph`] is a model prepared once and invoked many times:
//!
//! - **Prepare** ([`Graph::prepare`]) reads the `.tflite` flatbuffer in place with the
//!   zero-copy [`model`](crate::model) reader, lowers every operator to one HAL [`Op`] (shapes
//!   checked, quantization turned into fixed-point parameters), and binds the constants:
//!   weights and biases stay where they are in flash when the NPU reads flash
//!   ([`ComputeClient::create_const`]), and are uploaded once otherwise. Per-channel
//!   multipliers are computed straight into host staging memory and uploaded once. Last, it
//!   plans the activations' arena (see [`ArenaPlan`](crate::memory::ArenaPlan)) from every activation's lifetime and
//!   reserves it as one pool.
//! - **Invoke** ([`Graph::invoke`]) writes the inputs into the pool, then for each operator
//!   places the output at its planned offset (`client.place`, nothing is reserved), submits
//!   the job, and drops the inputs whose last use it was. A placement over memory that older
//!   jobs read or write waits for their fences, so nothing here waits on the NPU until the
//!   outputs are read. Each operator runs on the NPU, or on the CPU fallback kernels when the
//!   HAL declares it unsupported: the server decides, per operator.
//! - **In place**: RESHAPE's output is another handle to its input's memory; ADD, MUL and
//!   ReLU without broadcasting write over an input that dies there; a concatenation whose
//!   inputs are contiguous blocks of its output has its producers write straight into those
//!   blocks, and runs nothing. With [`Optimise::Memory`], chains of convolutions and pools
//!   run in stripes of rows (see `tile`).
//!
//! Every operator is dispatched with
//! [`execute_autotune`](crate::client::ComputeClient::execute_autotune): with the server's
//! tuning off (the default) that is plain `execute`; in [`TuneMode::Tune`](crate::tune::TuneMode)
//! the first invoke measures each new layer shape once, and with an imported table
//! ([`TuneMode::CacheOnly`](crate::tune::TuneMode)) each layer runs its tuned variant at no
//! measuring cost.
//!
//! Several graphs can be prepared over the same client and run one after another; each maps
//! its model as its own flash segment. Capacities are const generics: `OPS` operators and
//! `TENSORS` tensors per model, [`MAX_IO`] inputs and outputs.
//!
//! ```
//! use npu_compute::graph::Graph;
//! use npu_compute::prelude::*;
//! use npu_sim::{AlignedMemory, SimConfig, SimNpu};
//!
//! static MODEL: &[u8] = npu_compute::include_aligned!("../../examples/models/convnet/model.tflite");
//! let input = include_bytes!("../../examples/models/convnet/input_0.bin");
//! let expected = include_bytes!("../../examples/models/convnet/expected_tflm_0.bin");
//!
//! let mut device = AlignedMemory::<65536>::new();
//! let mut host = AlignedMemory::<16384>::new();
//! let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
//! let channel: RefCellChannel<_> = RefCellChannel::new(NpuServer::<_>::new(npu, MemoryConfig::default()).unwrap());
//! let client = ComputeClient::new(&channel);
//!
//! let mut graph: Graph<_> = Graph::prepare(client, MODEL).unwrap();
//! let mut out = [0u8; 10];
//! graph.invoke(&[input], &mut [&mut out]).unwrap();
//! assert_eq!(&out, expected);
//! ```

mod error;
mod lower;
mod planned;
mod tile;

pub use error::GraphError;
pub use planned::GraphPlan;

use crate::channel::ComputeChannel;
use crate::client::{ComputeClient, Tensor};
use crate::error::Error;
use crate::hal::{Op, OpKind, CHANNEL_MULTIPLIER_BYTES, MAX_JOB_INPUTS};
use crate::memory::{ArenaPlanError, Lifetime};
use crate::model::{BuiltinOp, Model, SubGraph};
use lower::{Lowered, Operand};
use npu_kernels::int8::ChannelMultiplier;
use tile::Tile;

/// Most model inputs, and most model outputs, a graph handles.
pub const MAX_IO: usize = 4;

/// Most tiled chains in one graph.
pub const MAX_TILES: usize = 8;

/// What the arena plan optimises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Optimise {
    /// The fewest cycles: whole tensors, no recomputation.
    #[default]
    Cycles,
    /// The smallest arena: chains of convolutions and pools run in stripes of rows wherever
    /// that shrinks the arena (recomputing the halo rows between stripes).
    Memory,
}

/// A model's activation buffers: lifetimes and, per tensor, the buffer holding it and the
/// tensor's offset in that buffer.
struct Buffers<const N: usize> {
    lifetimes: heapless::Vec<Lifetime, N>,
    of: heapless::Vec<u16, N>,
    at: heapless::Vec<u32, N>,
}

/// Rounds of local search the arena planner runs at prepare (see [`plan_arena`](crate::memory::plan_arena)).
pub const PLAN_EFFORT: u32 = 200;

/// Includes a file as a `&'static [u8]` aligned to 16 bytes, the alignment NPUs need to read a
/// model's weights in place (`include_bytes!` gives no alignment).
///
/// ```
/// static MODEL: &[u8] = npu_compute::include_aligned!("../../examples/models/kws_dscnn/model.tflite");
/// assert_eq!(MODEL.as_ptr() as usize % 16, 0);
/// ```
#[macro_export]
macro_rules! include_aligned {
    ($path:expr) => {{
        #[repr(C, align(16))]
        struct Aligned<T: ?Sized>(T);
        static ALIGNED: &Aligned<[u8]> = &Aligned(*include_bytes!($path));
        &ALIGNED.0
    }};
}

/// One operand of a step: a model tensor or a prepared auxiliary tensor (multipliers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepOperand {
    Tensor(u16),
    Aux(u16),
}

/// One lowered operator.
#[derive(Clone, Debug)]
struct Step {
    /// Index of the operator in the model.
    op_index: u16,
    builtin: BuiltinOp,
    /// `None` for an alias (RESHAPE).
    op: Option<Op>,
    operands: heapless::Vec<StepOperand, MAX_JOB_INPUTS>,
    output: u16,
    /// The arena plan put every input where the output wants it (a concatenation whose
    /// producers wrote straight into its output): the step runs nothing.
    in_place: bool,
}

/// A model tensor's state.
struct Slot<'c, C: ComputeChannel> {
    bytes: u32,
    /// Last step reading it (`u16::MAX`: a model output, kept until read).
    last_use: u16,
    constant: bool,
    /// For an activation: its offset in the graph's pool, from the arena plan.
    offset: u32,
    /// The constant, or during an invoke the live activation.
    value: Option<Tensor<'c, C>>,
}

/// Where one operator runs, as [`Graph::operators`] reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OperatorPlan {
    /// Index in the model.
    pub op_index: u16,
    /// The TFLite operator.
    pub builtin: BuiltinOp,
    /// The HAL operation (`None`: RESHAPE, which shares its input's memory and runs nothing).
    pub op: Option<Op>,
    /// Whether the NPU runs it (else the CPU fallback kernels do).
    pub on_npu: bool,
}

/// A prepared model (see the [module docs](self)).
pub struct Graph<'c, C: ComputeChannel, const OPS: usize = 64, const TENSORS: usize = 128> {
    client: ComputeClient<'c, C>,
    steps: heapless::Vec<Step, OPS>,
    tensors: heapless::Vec<Slot<'c, C>, TENSORS>,
    aux: heapless::Vec<Tensor<'c, C>, OPS>,
    inputs: heapless::Vec<u16, MAX_IO>,
    outputs: heapless::Vec<u16, MAX_IO>,
    flash_segment: Option<u8>,
    tiles: heapless::Vec<Tile, MAX_TILES>,
    /// The activations' memory, reserved once at prepare and laid out by the arena plan.
    pool: Option<Tensor<'c, C>>,
    memory: ArenaReport,
}

/// Pinned input and output buffers of one in-flight invoke ([`Graph::io_buffers`],
/// [`Graph::submit`]). Fill the inputs with [`ComputeClient::host_mut`] and read the outputs
/// with [`ComputeClient::host_ref`]: no staging copy either way.
pub struct IoBuffers<'c, C: ComputeChannel> {
    inputs: heapless::Vec<Tensor<'c, C>, MAX_IO>,
    outputs: heapless::Vec<Tensor<'c, C>, MAX_IO>,
}

impl<'c, C: ComputeChannel> IoBuffers<'c, C> {
    /// The pinned buffer of model input `k`.
    pub fn input(&self, k: usize) -> Option<&Tensor<'c, C>> {
        self.inputs.get(k)
    }

    /// The pinned buffer of model output `k`.
    pub fn output(&self, k: usize) -> Option<&Tensor<'c, C>> {
        self.outputs.get(k)
    }
}

/// The arena figures of a prepared graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArenaReport {
    /// Bytes of the activation pool the arena plan needs.
    pub activation_bytes: u32,
    /// The activations' whole-tensor lower bound: the most bytes live at one step (aligned),
    /// without tiling.
    pub lower_bound_bytes: u32,
    /// Chains of layers run in stripes ([`Optimise::Memory`]).
    pub tiled_chains: u8,
    /// Multiply-accumulates per invoke computed twice because stripes overlap.
    pub recomputed_macs: u64,
    /// Bytes of constants the graph keeps in the arena (per-channel multipliers, and weights
    /// that could not stay in flash), each rounded to the arena's alignment.
    pub constant_bytes: u32,
}

impl ArenaReport {
    /// The arena the graph needs: constants and activations.
    pub fn arena_bytes(&self) -> u32 {
        self.activation_bytes.saturating_add(self.constant_bytes)
    }
}

/// A compute-stack error not tied to one operator (the pool, the inputs and outputs).
fn not_one_op(error: Error) -> GraphError {
    GraphError::Compute {
        op_index: None,
        error,
    }
}

fn capacity(capacity: &'static str, limit: usize, needed: usize) -> GraphError {
    GraphError::CapacityExceeded {
        capacity,
        limit: limit as u32,
        needed: u32::try_from(needed).unwrap_or(u32::MAX),
    }
}

fn io_list<const N: usize>(
    list: crate::model::TensorIndices<'_>,
) -> Result<heapless::Vec<u16, N>, GraphError> {
    let mut out = heapless::Vec::new();
    for i in 0..list.len() {
        let t = list.get(i).ok_or(capacity("MAX_IO", N, list.len()))?;
        out.push(t).map_err(|_| capacity("MAX_IO", N, list.len()))?;
    }
    Ok(out)
}

impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'c, C, OPS, TENSORS> {
    /// Prepares `model` (a `.tflite` flatbuffer, read in place) to run through `client`.
    ///
    /// Errors: [`GraphError::Model`] for malformed bytes, [`GraphError::Unsupported`] naming
    /// the first operator or parameter the runtime does not support,
    /// [`GraphError::Kernel`]/[`GraphError::ShapeMismatch`] for inconsistent operators,
    /// [`GraphError::CapacityExceeded`] naming `OPS`, `TENSORS` or `MAX_IO`, and
    /// [`GraphError::Compute`] when the arena or a table of the stack cannot hold the
    /// constants or the activation pool.
    pub fn prepare(client: ComputeClient<'c, C>, model: &'static [u8]) -> Result<Self, GraphError> {
        Self::prepare_with(client, model, Optimise::Cycles)
    }

    /// [`prepare`](Self::prepare), with the arena plan optimised for `optimise`:
    /// [`Optimise::Memory`] runs chains of layers in stripes where that shrinks the arena.
    pub fn prepare_with(
        client: ComputeClient<'c, C>,
        model: &'static [u8],
        optimise: Optimise,
    ) -> Result<Self, GraphError> {
        let parsed = Model::parse(model)?;
        let sub = parsed.subgraph();
        let tensor_count = usize::from(sub.tensor_count());
        let op_count = sub.operator_count() as usize;
        if tensor_count > TENSORS {
            return Err(capacity("TENSORS", TENSORS, tensor_count));
        }
        if op_count > OPS || op_count >= usize::from(u16::MAX) {
            return Err(capacity("OPS", OPS, op_count));
        }
        let flash_segment = client.map_flash(model).ok();
        let mut graph = Graph {
            client,
            steps: heapless::Vec::new(),
            tensors: heapless::Vec::new(),
            aux: heapless::Vec::new(),
            inputs: io_list(sub.inputs())?,
            outputs: io_list(sub.outputs())?,
            flash_segment,
            tiles: heapless::Vec::new(),
            pool: None,
            memory: ArenaReport::default(),
        };
        for t in sub.tensors() {
            let t = t?;
            let slot = Slot {
                bytes: t.byte_size.unwrap_or(0),
                last_use: 0,
                constant: false,
                offset: 0,
                value: None,
            };
            // Capacity checked above.
            let _ = graph.tensors.push(slot);
        }
        for info in sub.operators() {
            let info = info?;
            let lowered = lower::lower(&sub, &info)?;
            graph.add_step(&sub, &info, lowered)?;
        }
        for &o in &graph.outputs {
            if let Some(slot) = graph.tensors.get_mut(usize::from(o)) {
                slot.last_use = u16::MAX;
            }
        }
        graph.plan_arena(optimise)?;
        Ok(graph)
    }

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
                let used = if slot.last_use == u16::MAX {
                    end
                } else {
                    slot.last_use
                };
                last[r] = last[r].max(used);
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
        let Some(Op::ConcatenationI8 { params }) = step.op else {
            return None;
        };
        if params.outer() != 1 {
            return None;
        }
        let mut blocks = heapless::Vec::new();
        let mut at = 0_u32;
        for (k, operand) in step.operands.iter().enumerate() {
            let StepOperand::Tensor(t) = *operand else {
                return None;
            };
            let len = u32::try_from(params.input_len(k)).ok()?;
            blocks.push((t, at, len)).ok()?;
            at = at.checked_add(len)?;
        }
        Some(blocks)
    }

    /// Op `k` of a chain starting at step `a`.
    fn chain_op(&self, a: usize, k: usize) -> Option<&Op> {
        self.steps.get(a + k).and_then(|s| s.op.as_ref())
    }

    /// What running `tile` in stripes costs (`None`: some op cannot be cut).
    fn tile_cost(&self, tile: &Tile) -> Option<tile::ChainCost> {
        let a = usize::from(tile.first);
        let len = usize::from(tile.last.checked_sub(tile.first)?) + 1;
        tile::chain_cost(len, |k| self.chain_op(a, k), tile.rows)
    }

    /// The activation a chain starting at step `a` reads (its first operand).
    fn chain_input(&self, a: usize) -> Option<u16> {
        match self.steps.get(a)?.operands.first()? {
            StepOperand::Tensor(t) => Some(*t),
            StepOperand::Aux(_) => None,
        }
    }

    /// Whether steps `si` and `si + 1` can run in one tiled chain: both row-local, and the
    /// second reads the first's output, which nothing else reads.
    fn chainable(&self, si: usize, alignment: u32) -> bool {
        let (Some(s), Some(next)) = (self.steps.get(si), self.steps.get(si + 1)) else {
            return false;
        };
        let local = |st: &Step| {
            st.op
                .as_ref()
                .is_some_and(|op| tile::is_row_local(op, alignment))
        };
        local(s)
            && local(next)
            && self.chain_input(si + 1) == Some(s.output)
            && usize::from(self.tensors[usize::from(s.output)].last_use) == si + 1
    }

    /// Arena bytes of the plan under `tiles` (`None`: some tile cannot be cut).
    fn planned_size(&self, tiles: &[Tile], alignment: u32) -> Option<u32> {
        let b = self.buffers(tiles, alignment, true)?;
        crate::memory::plan_arena::<TENSORS>(&b.lifetimes, alignment, 0)
            .ok()
            .map(|p| p.size())
    }

    /// Picks tiled chains greedily: each round tries every chain of chainable steps that does
    /// not overlap a chosen one, in stripes of 1, 2, 4, ... rows, and keeps the one giving the
    /// smallest arena (fewest recomputed multiply-accumulates on a tie), while the arena
    /// shrinks.
    fn choose_tiles(&mut self, alignment: u32) {
        let n = self.steps.len();
        let mut tiles: heapless::Vec<Tile, MAX_TILES> = heapless::Vec::new();
        let Some(mut best) = self.planned_size(&tiles, alignment) else {
            return;
        };
        while !tiles.is_full() {
            let mut found: Option<(u32, u64, Tile)> = None;
            for a in 0..n {
                for b in a + 1..n.min(a + tile::MAX_CHAIN) {
                    if !self.chainable(b - 1, alignment) {
                        break;
                    }
                    if tiles
                        .iter()
                        .any(|t| usize::from(t.first) <= b && a <= usize::from(t.last))
                    {
                        continue;
                    }
                    let height = self
                        .chain_op(a, b - a)
                        .and_then(tile::shapes)
                        .map_or(0, |(_, o)| o.height);
                    // Stripes of 1, 2, 4, ... rows, each with and without streaming in place.
                    let heights = (0..16).map(|p| 1u32 << p).take_while(|&r| r < height);
                    for (rows, in_place) in heights.flat_map(|r| [(r, false), (r, true)]) {
                        let tile = Tile {
                            first: a as u16,
                            last: b as u16,
                            rows: rows as u16,
                            in_place,
                        };
                        let Some(cost) = self.tile_cost(&tile) else {
                            continue;
                        };
                        let _ = tiles.push(tile);
                        let size = self.planned_size(&tiles, alignment);
                        tiles.pop();
                        if let Some(size) = size {
                            let key = (size, cost.extra_macs);
                            if found.is_none_or(|(s, m, _)| key < (s, m)) {
                                found = Some((size, cost.extra_macs, tile));
                            }
                        }
                    }
                }
            }
            match found {
                Some((size, _, tile)) if size < best => {
                    best = size;
                    let _ = tiles.push(tile);
                }
                _ => break,
            }
        }
        self.tiles = tiles;
    }

    /// Lays the activations out in one pool (see [`plan_arena`](crate::memory::plan_arena)) and reserves it,
    /// after choosing tiled chains when `optimise` asks for the smallest arena.
    fn plan_arena(&mut self, optimise: Optimise) -> Result<(), GraphError> {
        let alignment = self
            .client
            .capabilities()
            .map_err(not_one_op)?
            .alignment
            .max(1);
        if optimise == Optimise::Memory {
            self.choose_tiles(alignment);
        }
        let buffers = self
            .buffers(&self.tiles, alignment, true)
            .ok_or(GraphError::Plan(ArenaPlanError::BadInput {
                buffer: u32::MAX,
            }))?;
        let plan = crate::memory::plan_arena::<TENSORS>(&buffers.lifetimes, alignment, PLAN_EFFORT)
            .map_err(GraphError::Plan)?;
        for ((slot, &b), &at) in self.tensors.iter_mut().zip(&buffers.of).zip(&buffers.at) {
            if let Some(offset) = plan.offset(usize::from(b)) {
                slot.offset = offset + at;
            }
        }
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
            .tiles
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
            lower_bound_bytes: crate::memory::lower_bound(
                &self
                    .buffers(&[], alignment, false)
                    .map(|b| b.lifetimes)
                    .unwrap_or_default(),
                alignment,
            ),
            constant_bytes,
            tiled_chains: self.tiles.len() as u8,
            recomputed_macs,
        };
        if plan.size() > 0 {
            let pool = self.client.empty(plan.size()).map_err(not_one_op)?;
            self.pool = Some(pool);
        }
        Ok(())
    }

    /// The arena figures: the activation pool of the plan, its lower bound, and the constants.
    pub fn arena(&self) -> ArenaReport {
        self.memory
    }

    fn add_step(
        &mut self,
        sub: &SubGraph<'static>,
        info: &crate::model::OperatorInfo<'_>,
        lowered: Lowered,
    ) -> Result<(), GraphError> {
        let step_index = self.steps.len() as u16;
        let compute_error = |error| GraphError::Compute {
            op_index: Some(info.index),
            error,
        };
        let (op, list) = match lowered {
            Lowered::Compute { op, operands } => (Some(op), operands),
            Lowered::Alias { input } => {
                let mut l = heapless::Vec::new();
                let _ = l.push(Operand::Tensor(input));
                (None, l)
            }
        };
        let mut operands = heapless::Vec::new();
        for operand in list {
            let step_operand = match operand {
                Operand::Tensor(t) => {
                    let info_t = sub.tensor(t)?;
                    let slot = &mut self.tensors[usize::from(t)];
                    if let Some(data) = info_t.data {
                        if slot.value.is_none() {
                            slot.value =
                                Some(self.client.create_const(data).map_err(compute_error)?);
                            slot.constant = true;
                        }
                    }
                    slot.last_use = step_index;
                    StepOperand::Tensor(t)
                }
                Operand::Multipliers {
                    input_scale,
                    filter,
                    output_scale,
                    channels,
                } => {
                    let f = sub.tensor(filter)?;
                    let q = f.quantization;
                    let bytes = channels
                        .checked_mul(CHANNEL_MULTIPLIER_BYTES)
                        .ok_or(capacity("multiplier bytes", u32::MAX as usize, usize::MAX))?;
                    let multiplier = |c: usize| {
                        let scale = q
                            .as_ref()
                            .and_then(|q| q.scale(if q.len() == 1 { 0 } else { c }));
                        ChannelMultiplier::new(input_scale, scale.unwrap_or(f32::NAN), output_scale)
                    };
                    // Validate every channel first, so that filling staging memory cannot fail.
                    for c in 0..channels as usize {
                        multiplier(c).map_err(|error| GraphError::Kernel {
                            op_index: info.index,
                            op: info.builtin,
                            error,
                        })?;
                    }
                    let tensor = self
                        .client
                        .create_const_with(bytes, |buf| {
                            for (c, out) in buf
                                .chunks_exact_mut(CHANNEL_MULTIPLIER_BYTES as usize)
                                .enumerate()
                            {
                                let m = multiplier(c).unwrap_or_default();
                                out.copy_from_slice(bytemuck::bytes_of(&m));
                            }
                            Ok(())
                        })
                        .map_err(compute_error)?;
                    let index = self.aux.len() as u16;
                    self.aux
                        .push(tensor)
                        .map_err(|_| capacity("OPS", OPS, OPS + 1))?;
                    StepOperand::Aux(index)
                }
            };
            // `list` has at most MAX_JOB_INPUTS entries.
            let _ = operands.push(step_operand);
        }
        let output = info.output(0).ok_or(GraphError::Unsupported {
            op_index: info.index,
            op: info.builtin,
            what: "omitted output",
        })?;
        self.tensors[usize::from(output)].last_use = step_index;
        let step = Step {
            op_index: info.index as u16,
            builtin: info.builtin,
            op,
            operands,
            output,
            in_place: false,
        };
        self.steps
            .push(step)
            .map_err(|_| capacity("OPS", OPS, OPS + 1))
    }

    /// Runs the model: `inputs[k]` holds the bytes of model input `k`, and `outputs[k]`
    /// receives model output `k`. Returns once the outputs are read.
    ///
    /// Errors: [`GraphError::BadIo`] for a wrong count or length (nothing runs then), and
    /// [`GraphError::Compute`] naming the operator whose job could not be submitted or whose
    /// result could not be read. Every activation is released before returning, even on
    /// error.
    pub fn invoke(
        &mut self,
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
    ) -> Result<(), GraphError> {
        self.check_io("input", &self.inputs, inputs.iter().map(|b| b.len()))?;
        self.check_io("output", &self.outputs, outputs.iter().map(|b| b.len()))?;
        let result = self.run(inputs, outputs);
        for slot in self.tensors.iter_mut().filter(|s| !s.constant) {
            slot.value = None;
        }
        result
    }

    /// Pinned buffers for one in-flight invoke: one per model input and output, sized for
    /// them (see [`submit`](Self::submit)). Errors: [`GraphError::Compute`] when host memory
    /// or the staging capacity cannot hold them.
    pub fn io_buffers(&self) -> Result<IoBuffers<'c, C>, GraphError> {
        let pinned = |list: &[u16]| -> Result<heapless::Vec<Tensor<'c, C>, MAX_IO>, GraphError> {
            let mut out = heapless::Vec::new();
            for &t in list {
                let bytes = self.tensors[usize::from(t)].bytes;
                let tensor = self.client.pinned(bytes).map_err(not_one_op)?;
                // `list` has at most MAX_IO entries.
                let _ = out.push(tensor);
            }
            Ok(out)
        };
        Ok(IoBuffers {
            inputs: pinned(&self.inputs)?,
            outputs: pinned(&self.outputs)?,
        })
    }

    /// Submits one invoke over the pinned buffers `io` and returns without waiting: the
    /// inputs are uploaded straight from `io`'s blocks, every job is queued, and so are the
    /// downloads of the outputs into `io`'s output blocks. Read them with
    /// [`ComputeClient::host_ref`] (which waits for that download only) or
    /// [`ComputeClient::try_host_ref`] (which never waits).
    ///
    /// With two or more [`IoBuffers`], the CPU prepares the next input while the NPU runs
    /// this one: writing an input block waits only for its own previous upload, and the
    /// next invoke's jobs wait, on the NPU, for the ones they overwrite.
    ///
    /// ```
    /// # use npu_compute::graph::Graph;
    /// # use npu_compute::prelude::*;
    /// # use npu_sim::{AlignedMemory, SimConfig, SimNpu};
    /// # static MODEL: &[u8] = npu_compute::include_aligned!("../../examples/models/convnet/model.tflite");
    /// # let input = include_bytes!("../../examples/models/convnet/input_0.bin");
    /// # let expected = include_bytes!("../../examples/models/convnet/expected_tflm_0.bin");
    /// # let mut device = AlignedMemory::<65536>::new();
    /// # let mut host = AlignedMemory::<16384>::new();
    /// # let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
    /// # let channel: RefCellChannel<_> = RefCellChannel::new(NpuServer::<_>::new(npu, MemoryConfig::default()).unwrap());
    /// # let client = ComputeClient::new(&channel);
    /// let mut graph: Graph<_> = Graph::prepare(client, MODEL).unwrap();
    /// let sets = [graph.io_buffers().unwrap(), graph.io_buffers().unwrap()];
    /// for frame in 0..4 {
    ///     let io = &sets[frame % 2];
    ///     client.host_mut(io.input(0).unwrap(), |b| b.copy_from_slice(input)).unwrap();
    ///     graph.submit(io).unwrap();
    ///     if frame > 0 {
    ///         // The previous frame's output, read while this one runs.
    ///         let prev = &sets[(frame - 1) % 2];
    ///         let out = client.host_ref(prev.output(0).unwrap(), |b| b.to_vec()).unwrap();
    ///         assert_eq!(&out[..], &expected[..]);
    ///     }
    /// }
    /// ```
    ///
    /// Errors: [`GraphError::BadIo`] for buffers of other sizes (nothing runs then), and
    /// [`GraphError::Compute`] naming the operator whose job could not be submitted.
    pub fn submit(&mut self, io: &IoBuffers<'c, C>) -> Result<(), GraphError> {
        self.check_io(
            "input",
            &self.inputs,
            io.inputs.iter().map(|t| t.bytes() as usize),
        )?;
        self.check_io(
            "output",
            &self.outputs,
            io.outputs.iter().map(|t| t.bytes() as usize),
        )?;
        let result = self.submit_steps(io);
        for slot in self.tensors.iter_mut().filter(|s| !s.constant) {
            slot.value = None;
        }
        result
    }

    fn submit_steps(&mut self, io: &IoBuffers<'c, C>) -> Result<(), GraphError> {
        let client = self.client;
        let pool = self.pool()?;
        self.place_inputs(&pool, |k, t| client.copy(&io.inputs[k], t))?;
        self.run_steps(&pool)?;
        for (k, out) in io.outputs.iter().enumerate() {
            client
                .copy(self.output_value(k)?, out)
                .map_err(not_one_op)?;
        }
        Ok(())
    }

    fn check_io(
        &self,
        what: &'static str,
        tensors: &[u16],
        lens: impl ExactSizeIterator<Item = usize>,
    ) -> Result<(), GraphError> {
        if lens.len() != tensors.len() {
            return Err(GraphError::BadIo {
                what,
                index: lens.len() as u32,
                expected: tensors.len() as u32,
                actual: lens.len() as u32,
            });
        }
        for (k, (len, &t)) in lens.zip(tensors).enumerate() {
            let expected = self.tensors[usize::from(t)].bytes;
            if len != expected as usize {
                return Err(GraphError::BadIo {
                    what,
                    index: k as u32,
                    expected,
                    actual: u32::try_from(len).unwrap_or(u32::MAX),
                });
            }
        }
        Ok(())
    }

    /// The activation pool (absent only if preparing it failed).
    fn pool(&self) -> Result<Tensor<'c, C>, GraphError> {
        self.pool
            .clone()
            .ok_or(not_one_op(Error::StaleHandle { index: 0 }))
    }

    /// Places each model input at its planned offset and fills it with `fill(k, tensor)`.
    fn place_inputs(
        &mut self,
        pool: &Tensor<'c, C>,
        mut fill: impl FnMut(usize, &Tensor<'c, C>) -> Result<(), Error>,
    ) -> Result<(), GraphError> {
        for (k, &t) in self.inputs.iter().enumerate() {
            let slot = &mut self.tensors[usize::from(t)];
            let tensor = self
                .client
                .place(pool, slot.offset, slot.bytes)
                .and_then(|tensor| fill(k, &tensor).map(|()| tensor))
                .map_err(not_one_op)?;
            slot.value = Some(tensor);
        }
        Ok(())
    }

    /// The live tensor of model output `k`.
    fn output_value(&self, k: usize) -> Result<&Tensor<'c, C>, GraphError> {
        let t = self.outputs[k];
        self.tensors[usize::from(t)]
            .value
            .as_ref()
            .ok_or(not_one_op(Error::StaleHandle { index: t }))
    }

    fn run(&mut self, inputs: &[&[u8]], outputs: &mut [&mut [u8]]) -> Result<(), GraphError> {
        let client = self.client;
        let pool = self.pool()?;
        self.place_inputs(&pool, |k, t| client.write(t, inputs[k]))?;
        self.run_steps(&pool)?;
        for (k, out) in outputs.iter_mut().enumerate() {
            client
                .read(self.output_value(k)?, out)
                .map_err(not_one_op)?;
        }
        Ok(())
    }

    /// Submits every step; returns once they are queued.
    fn run_steps(&mut self, pool: &Tensor<'c, C>) -> Result<(), GraphError> {
        let mut si = 0;
        while si < self.steps.len() {
            let last = match self.tiles.iter().find(|t| usize::from(t.first) == si) {
                Some(&tile) => {
                    self.run_tile(pool, tile)?;
                    usize::from(tile.last)
                }
                None => {
                    self.run_step(pool, si)?;
                    si
                }
            };
            for k in si..=last {
                for operand in &self.steps[k].operands {
                    if let StepOperand::Tensor(t) = *operand {
                        let slot = &mut self.tensors[usize::from(t)];
                        if !slot.constant && usize::from(slot.last_use) == k {
                            slot.value = None;
                        }
                    }
                }
            }
            si = last + 1;
        }
        Ok(())
    }

    fn failed(&self, si: usize) -> impl Fn(Error) -> GraphError {
        let op_index = self.steps.get(si).map(|s| u32::from(s.op_index));
        move |error| GraphError::Compute { op_index, error }
    }

    /// Step `si`'s operands: its activations and constants, in order, from operand `from` on,
    /// the live activations of this invoke.
    fn operand_refs(
        &self,
        si: usize,
        from: usize,
    ) -> Result<heapless::Vec<&Tensor<'c, C>, MAX_JOB_INPUTS>, GraphError> {
        self.operands_with(si, from, |t| self.tensors[usize::from(t)].value.as_ref())
    }

    /// Step `si`'s operands from operand `from` on, each activation `t` as `activation(t)`
    /// gives it (the live tensor of an invoke, or a job plan's placement); constants and
    /// auxiliary tensors are the graph's own.
    fn operands_with<'s>(
        &'s self,
        si: usize,
        from: usize,
        activation: impl Fn(u16) -> Option<&'s Tensor<'c, C>>,
    ) -> Result<heapless::Vec<&'s Tensor<'c, C>, MAX_JOB_INPUTS>, GraphError> {
        let mut refs = heapless::Vec::new();
        for operand in self.steps[si].operands.iter().skip(from) {
            let t = match *operand {
                StepOperand::Tensor(t) => {
                    let slot = &self.tensors[usize::from(t)];
                    if slot.constant {
                        slot.value.as_ref()
                    } else {
                        activation(t)
                    }
                }
                StepOperand::Aux(a) => self.aux.get(usize::from(a)),
            };
            let _ = refs.push(t.ok_or(self.failed(si)(Error::StaleHandle { index: 0 }))?);
        }
        Ok(refs)
    }

    /// Runs one step on whole tensors: its output is placed where the plan says.
    fn run_step(&mut self, pool: &Tensor<'c, C>, si: usize) -> Result<(), GraphError> {
        let step = &self.steps[si];
        let refs = self.operand_refs(si, 0)?;
        let value = match &step.op {
            None => refs[0].clone(),
            Some(op) => {
                let slot = &self.tensors[usize::from(step.output)];
                // Placing the output over its inputs' memory makes its readers wait for the
                // producers' writes.
                let out = self.client.place(pool, slot.offset, slot.bytes);
                let out = out.map_err(self.failed(si))?;
                if !step.in_place {
                    // As the server's tune mode says: `execute` when tuning is off.
                    self.client
                        .execute_autotune(op, &refs, &out)
                        .map_err(self.failed(si))?;
                }
                out
            }
        };
        let output = usize::from(step.output);
        drop(refs);
        self.tensors[output].value = Some(value);
        Ok(())
    }

    /// Runs a tiled chain stripe by stripe (see [`tile`]): each op reads a band of the
    /// previous op's band buffer (of the chain's input, for the first) and writes its own band
    /// buffer (its rows of the chain's output, for the last). Bands are placed tensors, so
    /// reusing a band buffer waits for the jobs that read its previous stripe.
    fn run_tile(&mut self, pool: &Tensor<'c, C>, tile: Tile) -> Result<(), GraphError> {
        let client = self.client;
        let (a, b) = (usize::from(tile.first), usize::from(tile.last));
        let len = b - a + 1;
        let op_at = |k: usize| self.chain_op(a, k);
        let uncut = |k: usize| GraphError::Unsupported {
            op_index: u32::from(self.steps[a + k].op_index),
            op: self.steps[a + k].builtin,
            what: "row band of a tiled chain",
        };
        let input = self.chain_input(a).ok_or(uncut(0))?;
        let in_offset = self.tensors[usize::from(input)].offset;
        let output = self.steps[b].output;
        let (out_offset, out_bytes) = {
            let slot = &self.tensors[usize::from(output)];
            (slot.offset, slot.bytes)
        };
        let height = op_at(len - 1)
            .and_then(tile::shapes)
            .ok_or(uncut(len - 1))?
            .1
            .height;
        for stripe in tile::stripes(height, tile.rows) {
            let rows = tile::stripe_rows(len, op_at, stripe.clone()).ok_or(uncut(0))?;
            let mut band: Option<Tensor<'c, C>> = None;
            for k in 0..len {
                let failed = self.failed(a + k);
                let base = op_at(k).ok_or(uncut(k))?;
                let (in_shape, out_shape) = tile::shapes(base).ok_or(uncut(k))?;
                let produced = rows.get(k + 1).cloned().unwrap_or(stripe.clone());
                let (op, in_rows) = tile::band_op(base, produced.clone()).ok_or(uncut(k))?;
                let input = match band.take() {
                    Some(t) => t,
                    None => {
                        let row = tile::row_bytes(in_shape);
                        let view = client.place(
                            pool,
                            in_offset + in_rows.start * row,
                            (in_rows.end - in_rows.start) * row,
                        );
                        view.map_err(&failed)?
                    }
                };
                let row = tile::row_bytes(out_shape);
                let at = if k + 1 == len {
                    out_offset + produced.start * row
                } else {
                    self.tensors[usize::from(self.steps[a + k].output)].offset
                };
                let out = client
                    .place(pool, at, (produced.end - produced.start) * row)
                    .map_err(&failed)?;
                let mut refs = self.operand_refs(a + k, 1)?;
                refs.insert(0, &input).map_err(|_| uncut(k))?;
                // A band is a shape of its own: tuned under its own key.
                client.execute_autotune(op, &refs, &out).map_err(&failed)?;
                band = Some(out);
            }
        }
        let whole = client
            .place(pool, out_offset, out_bytes)
            .map_err(self.failed(b))?;
        self.tensors[usize::from(output)].value = Some(whole);
        Ok(())
    }

    /// Byte sizes of the model's inputs, in order.
    pub fn input_sizes(&self) -> impl Iterator<Item = u32> + '_ {
        self.inputs
            .iter()
            .map(|&t| self.tensors[usize::from(t)].bytes)
    }

    /// Byte sizes of the model's outputs, in order.
    pub fn output_sizes(&self) -> impl Iterator<Item = u32> + '_ {
        self.outputs
            .iter()
            .map(|&t| self.tensors[usize::from(t)].bytes)
    }

    /// Each operator with its HAL operation and where it runs.
    pub fn operators(&self) -> impl Iterator<Item = OperatorPlan> + '_ {
        let ops = self
            .client
            .capabilities()
            .map(|c| c.ops)
            .unwrap_or_default();
        self.steps.iter().map(move |s| OperatorPlan {
            op_index: s.op_index,
            builtin: s.builtin,
            op: s.op,
            on_npu: s.op.is_some_and(|op| {
                op.kind() == OpKind::Reshape || ops.contains(op.kind(), op.dtype())
            }),
        })
    }

    /// Whether the weights are read in place from flash (else they were copied to the arena).
    pub fn weights_in_flash(&self) -> bool {
        self.flash_segment.is_some()
    }

    /// Bytes of RAM this prepared graph occupies outside the arena (its tables, sized by
    /// `OPS` and `TENSORS`): what a firmware build reserves for it, besides the compute
    /// stack itself.
    pub const fn state_bytes() -> usize {
        core::mem::size_of::<Self>()
    }
}

impl<C: ComputeChannel, const OPS: usize, const TENSORS: usize> Drop
    for Graph<'_, C, OPS, TENSORS>
{
    fn drop(&mut self) {
        // Constants bound in the flash segment must be released before it is unmapped.
        self.tensors.clear();
        self.aux.clear();
        if let Some(segment) = self.flash_segment {
            let _ = self.client.unmap_flash(segment);
        }
    }
}
