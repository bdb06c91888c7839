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
//!   plans the activations' arena (an [`ArenaPlan`](crate::memory::ArenaPlan)) from every
//!   activation's lifetime and reserves it as one pool.
//! - **Invoke** ([`Graph::invoke`], or [`Graph::submit`] over pinned buffers without
//!   waiting) runs the model. The first invoke runs job by job: it writes the inputs into
//!   the pool, then for each operator places the output at its planned offset
//!   (`client.place`, nothing is reserved), submits the job with `execute`, and drops the
//!   inputs whose last use it was. A placement over memory that older jobs read or write
//!   waits for their fences, so nothing here waits on the NPU until the outputs are read.
//!   From the second invoke on, the same jobs replay from a [job plan](crate::client::JobPlan)
//!   built once: operands checked, queues and candidates chosen, dependencies worked out,
//!   activations placed for good; an invoke is then one channel call for all its jobs, with
//!   the same results and transfers (and cycles, but for the overlap of CPU steps with the
//!   NPU's). Operators on the CPU fallback are steps of the plan,
//!   computed while the NPU runs what does not depend on them. A graph whose jobs a plan
//!   cannot hold (tiled chains) keeps the per-job path; [`Graph::job_plan`] says which.
//!   [`Graph::invoke_async`] is the same invoke as a future, for an executor: it submits
//!   everything at its first poll and is woken by the NPU's interrupt for the outputs.
//! - **Where each operator runs**: on the NPU, or on the CPU fallback kernels when the HAL
//!   declares it unsupported: the server decides, per operator, following the tuning it was
//!   built with ([`NpuServer::with_tuning`](crate::server::NpuServer::with_tuning)): off by
//!   default; in [`TuneMode::Tune`](crate::tune::TuneMode) the first invoke measures each new
//!   layer shape once, and with an imported table
//!   ([`TuneMode::CacheOnly`](crate::tune::TuneMode)) each layer runs its tuned variant at no
//!   measuring cost.
//! - **In place**: RESHAPE's output is another handle to its input's memory; ADD, MUL and
//!   ReLU without broadcasting write over an input that dies there; a concatenation whose
//!   inputs are contiguous blocks of its output has its producers write straight into those
//!   blocks, and runs nothing. With [`Optimise::Memory`], chains of convolutions and pools
//!   run in stripes of rows (see `tile`).
//!
//! - **State**: a model's variable tensors (TFLite's `is_variable`: the memory of stateful
//!   operators such as SVDF and UNIDIRECTIONAL_SEQUENCE_LSTM) each have a block of the pool
//!   for the graph's lifetime, which the arena plan gives no other tensor. They are set to
//!   TFLM's initial value at prepare (an int8 variable's zero point, else zeros), keep their
//!   bytes from one invoke to the next, and move between host and device only as the
//!   operators reading them need; [`Graph::reset_state`] sets them back. An operator updates
//!   its state in place, as a [state operand](crate::ops::Operator::state_inputs).
//!
//! # Static schedules
//!
//! At prepare, a graph plans where and when each operator runs ([`Scheduling::Static`], the
//! default; [`PrepareOptions`]): each row-local operator (a convolution, depthwise
//! convolution or pool of one batch) may be split into one band of output rows per NPU unit,
//! and each elementwise one into ranges of elements, cut where the HAL's estimates balance
//! the units; every task is costed on every unit that runs it by the
//! HAL's estimates ([`Npu::estimate`](crate::hal::Npu::estimate)); tasks whose memory meets in
//! model order are ordered as in the model, so the schedule never needs more arena than the
//! arena plan gave; and the [`schedule`](crate::schedule) module list-schedules them, each
//! where it finishes earliest. Of three task sets (operators whole, split where a split is
//! faster, one operator at a time) the graph keeps the one predicted shortest and replays it
//! with no decisions, job by job and from its job plan: each job on its unit, in the
//! schedule's order. On one unit with every operator on the NPU, that is the model's order on
//! it, and the graph keeps its plain path. The schedule exports as a table
//! ([`Graph::export_schedule`]) that firmware follows at prepare instead of planning
//! ([`PrepareOptions::schedule_table`]). [`Graph::schedule`] reports it.
//!
//! Several graphs can be prepared over the same client and run one after another; each maps
//! its model as its own flash segment. Capacities are const generics: `OPS` operators and
//! `TENSORS` tensors per model (those of its job plan included, which also holds the
//! per-channel multipliers; a graph whose job plan would hold more than 255 runs job by job, as a
//! plan indexes its tensors with a byte), [`MAX_IO`]
//! inputs and outputs. `npu-sim plan` measures both for a model.
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

mod arena;
mod async_invoke;
mod compile;
mod cut;
mod error;
mod layout;
mod planned;
mod run;
mod schedule;
mod schedule_table;
mod tile;

pub use arena::PLAN_EFFORT;
pub use error::GraphError;
pub use layout::{Activation, StepTensors};
pub use planned::JobPlanReport;
pub use schedule::{ScheduleReport, Scheduling};
pub use schedule_table::{fingerprint, GraphTableError, GRAPH_TABLE_FORMAT, GRAPH_TABLE_MAGIC};

use planned::Path;

use crate::channel::ComputeChannel;
use crate::client::{ComputeClient, Tensor};
use crate::error::Error;
use crate::hal::MAX_JOB_INPUTS;
use crate::model::{BuiltinOp, Model, SubGraph};
use crate::ops::{LowerCtx, LowerError, Lowered, Operand};
use crate::ops::{Op, OpKind, CHANNEL_MULTIPLIER_BYTES};
use crate::server::Placement;
use npu_kernels::int8::ChannelMultiplier;
use tile::Tile;

/// The default `OPS` of a [`Graph`]: operators of its model.
pub const DEFAULT_OPS: usize = 64;

/// The default `TENSORS` of a [`Graph`]: tensors of its model and of its job plan.
pub const DEFAULT_TENSORS: usize = 128;

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

/// How to prepare a graph ([`Graph::prepare_with`]). An [`Optimise`] converts into it with
/// the default scheduling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PrepareOptions {
    /// What the arena plan optimises.
    pub optimise: Optimise,
    /// How operators are spread over the execution units.
    pub scheduling: Scheduling,
    /// How a static schedule picks each task's unit: where it finishes earliest given the
    /// tasks placed before it (the default, the most cost-effective), or where it alone is
    /// fastest (to compare).
    pub policy: crate::schedule::Policy,
    /// A schedule exported from a graph of the same model on the same units
    /// ([`Graph::export_schedule`], `npu-sim plan MODEL --schedule FILE`): followed instead of
    /// planning one, so prepare does no scheduling work. Checked against the model and the
    /// units ([`GraphError::ScheduleTable`]).
    pub schedule_table: Option<&'static [u8]>,
    /// Activations (by tensor index in the model) kept in the NPU's slow memory tier
    /// ([`ComputeClient::empty_slow`]) rather than the arena: their operators read and write
    /// them there, at the tier's cost, and the arena plan leaves them out. A tier plan
    /// chooses them (`npu-sim plan MODEL --budget BYTES`). A tensor that shares memory with
    /// another (a RESHAPE's, an operator's in place) takes that one along. Not with
    /// [`Optimise::Memory`], nor a constant ([`GraphError::SlowTensor`]).
    pub slow_tensors: &'static [u16],
}

impl From<Optimise> for PrepareOptions {
    fn from(optimise: Optimise) -> Self {
        PrepareOptions {
            optimise,
            ..PrepareOptions::default()
        }
    }
}

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
pub(super) enum StepOperand {
    Tensor(u16),
    Aux(u16),
}

/// One lowered operator.
#[derive(Clone, Debug)]
pub(super) struct Step {
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
    /// Where the schedule runs it ([`Placement::Auto`] without a static schedule).
    placement: Placement,
    /// For a band step (appended after the model's steps): its rows of its parent step
    /// ([`Step::band`]). Only the planner makes band steps: a build without it keeps nothing
    /// here.
    #[cfg_attr(not(feature = "static-schedule"), allow(dead_code))]
    band: schedule::StepBand,
    /// The schedule cut it into band steps: it runs nothing itself.
    split: bool,
}

impl Step {
    /// Its rows of its parent step, for a band step (see `band`).
    fn band(&self) -> Option<schedule::Band> {
        #[cfg(feature = "static-schedule")]
        return self.band;
        #[cfg(not(feature = "static-schedule"))]
        None
    }

    /// Where the schedule runs it: [`Placement::Auto`] in a build without the planner (which
    /// alone places steps), so that the compiler leaves out the paths that follow a
    /// placement.
    pub(super) fn placement(&self) -> Placement {
        if cfg!(feature = "static-schedule") {
            self.placement
        } else {
            Placement::Auto
        }
    }
}

/// A model tensor's state.
pub(super) struct Slot<'c, C: ComputeChannel> {
    bytes: u32,
    /// Last step reading it (`u16::MAX`: a model output, kept until read).
    last_use: u16,
    constant: bool,
    /// A variable tensor (TFLite's `is_variable`: an operator's state, such as SVDF's): it
    /// has its own block of the pool for the graph's lifetime, keeps its bytes from one
    /// invoke to the next, and `value` holds its placed tensor for good.
    variable: bool,
    /// A variable's initial byte, as TFLM sets it: an int8 variable's zero point, else 0.
    initial: u8,
    /// For an activation or a variable: its offset in the graph's pool, from the arena plan
    /// (in the slow pool when `slow`).
    offset: u32,
    /// Kept in the slow memory tier ([`PrepareOptions::slow_tensors`]).
    slow: bool,
    /// The constant or the variable, or during an invoke the live activation.
    value: Option<Tensor<'c, C>>,
}

impl<C: ComputeChannel> Slot<'_, C> {
    /// Whether the graph holds its tensor for good (a constant or a variable), rather than
    /// only during an invoke.
    fn kept(&self) -> bool {
        self.constant || self.variable
    }
}

/// One operator as lowered, and where it runs, as [`Graph::operators`] reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LoweredOperator {
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
pub struct Graph<
    'c,
    C: ComputeChannel,
    const OPS: usize = DEFAULT_OPS,
    const TENSORS: usize = DEFAULT_TENSORS,
> {
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
    /// The memory of the activations kept in the slow tier, laid out by a plan of their own.
    slow_pool: Option<Tensor<'c, C>>,
    memory: ArenaReport,
    /// How invokes run: job by job, or from a job plan.
    path: Path<'c, C, OPS, TENSORS>,
    /// Whether invokes may replay a job plan ([`Graph::set_replay`]).
    replay: bool,
    /// Steps in the static schedule's submission order (band steps included); empty when
    /// the model's order is followed.
    order: heapless::Vec<u16, OPS>,
    /// The model's own steps (band steps follow them).
    model_steps: u16,
    schedule: ScheduleReport,
    /// What [`Graph::export_schedule`] needs of the static schedule followed.
    // (Nothing to read in a build without the planner: a unit type then.)
    #[cfg_attr(not(feature = "static-schedule"), allow(dead_code))]
    kept: schedule::Kept<OPS>,
    /// The arena plan keeps each activation one step past its last reader, for a schedule
    /// that runs consecutive operators' tasks at once (several NPU units).
    overlap: bool,
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
    /// Bytes of the slow tier the activations kept there need
    /// ([`PrepareOptions::slow_tensors`]); not part of [`arena_bytes`](Self::arena_bytes).
    pub slow_bytes: u32,
}

impl ArenaReport {
    /// The arena the graph needs: constants and activations.
    pub fn arena_bytes(&self) -> u32 {
        self.activation_bytes.saturating_add(self.constant_bytes)
    }
}

/// A lowering's refusal as the graph reports it, naming the operator.
fn lowering_failed(info: &crate::model::OperatorInfo<'_>, error: LowerError) -> GraphError {
    let (op_index, op) = (info.index, info.builtin);
    match error {
        LowerError::Unsupported(what) => GraphError::Unsupported { op_index, op, what },
        LowerError::Kernel(error) => GraphError::Kernel {
            op_index,
            op,
            error,
        },
        LowerError::ShapeMismatch {
            tensor,
            expected,
            actual,
        } => GraphError::ShapeMismatch {
            op_index,
            op,
            tensor,
            expected,
            actual,
        },
        LowerError::Model(e) => GraphError::Model(e),
    }
}

/// A compute-stack error not tied to one operator (the pool, the inputs and outputs).
pub(super) fn not_one_op(error: Error) -> GraphError {
    GraphError::Compute {
        op_index: None,
        error,
    }
}

pub(super) fn capacity(capacity: &'static str, limit: usize, needed: usize) -> GraphError {
    GraphError::CapacityExceeded {
        capacity,
        limit: limit as u32,
        needed: u32::try_from(needed).unwrap_or(u32::MAX),
    }
}

/// The byte TFLM fills a variable tensor with when it allocates it and at every reset
/// (`MicroInterpreterGraph::ResetTensorData`): an int8 tensor's first zero point, else 0.
fn initial_byte(t: &crate::model::TensorInfo<'_>) -> u8 {
    let zero_point = match (t.dtype, &t.quantization) {
        (crate::model::DataType::Int8, Some(q)) => q.zero_point(0).unwrap_or(0),
        _ => 0,
    };
    // memset's conversion of its int argument to unsigned char.
    zero_point as u8
}

/// Which tensors of `sub` a run needs, by index: the model's outputs, and, walking the
/// operators from the last, every tensor an operator producing a needed one reads as an
/// operand of its lowering (an operator that cannot be lowered reads all its inputs, so that
/// its error is reported). An operator none of whose outputs is needed is not run.
///
/// Errors: [`GraphError::Model`] for malformed bytes; a `TENSORS` below the model's tensor
/// count leaves the rest unmarked (a graph checks its capacity before).
pub fn needed_tensors<const TENSORS: usize>(
    sub: &SubGraph<'static>,
) -> Result<heapless::Vec<bool, TENSORS>, GraphError> {
    let mut live = heapless::Vec::new();
    // The tensor count is checked against TENSORS before.
    let _ = live.resize(usize::from(sub.tensor_count()), false);
    let outputs = sub.outputs();
    for t in (0..outputs.len()).filter_map(|i| outputs.get(i)) {
        if let Some(l) = live.get_mut(usize::from(t)) {
            *l = true;
        }
    }
    for index in (0..sub.operator_count()).rev() {
        let info = sub.operator(index)?;
        let needed = |t: &Option<u16>| t.is_some_and(|t| live.get(usize::from(t)) == Some(&true));
        if !info.outputs.iter().any(needed) {
            continue;
        }
        let mut mark = |t: u16| {
            if let Some(l) = live.get_mut(usize::from(t)) {
                *l = true;
            }
        };
        for output in 0..info.outputs.len().max(1) {
            match crate::ops::lower(&LowerCtx::for_output(sub, &info, output)) {
                Ok(Lowered::Compute { operands, .. }) => {
                    for operand in operands {
                        match operand {
                            Operand::Tensor(t) => mark(t),
                            Operand::Multipliers { filter, .. } => mark(filter),
                            Operand::Joined(parts) => parts.into_iter().for_each(&mut mark),
                        }
                    }
                }
                Ok(Lowered::Alias { input }) => mark(input),
                Err(_) => info.inputs.iter().flatten().for_each(|&t| mark(t)),
            }
        }
    }
    Ok(live)
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
    /// [`prepare`](Self::prepare) with [`PrepareOptions`] (or just an [`Optimise`]): the
    /// arena plan optimised for `optimise` ([`Optimise::Memory`] runs chains of layers in
    /// stripes where that shrinks the arena), and the operators spread over the execution
    /// units as `scheduling` says.
    pub fn prepare_with(
        client: ComputeClient<'c, C>,
        model: &'static [u8],
        options: impl Into<PrepareOptions>,
    ) -> Result<Self, GraphError> {
        let mut graph = Self::unprepared(client);
        graph.prepare_in_place(model, options)?;
        Ok(graph)
    }

    /// A graph over `client` holding no model yet, for
    /// [`prepare_in_place`](Self::prepare_in_place). Invoking it fails as for a model of no
    /// inputs and no outputs.
    ///
    /// A graph's tables are kilobytes (`OPS` steps, `TENSORS` tensors): [`prepare`](Self::prepare)
    /// builds them in its own frame and returns them, a copy the compiler does not elide, so
    /// a firmware counting its stack makes the graph where it keeps it (a local of the function
    /// that invokes it, or a `static`) with this, then prepares it there.
    pub fn unprepared(client: ComputeClient<'c, C>) -> Self {
        Graph {
            client,
            steps: heapless::Vec::new(),
            tensors: heapless::Vec::new(),
            aux: heapless::Vec::new(),
            inputs: heapless::Vec::new(),
            outputs: heapless::Vec::new(),
            flash_segment: None,
            tiles: heapless::Vec::new(),
            pool: None,
            slow_pool: None,
            memory: ArenaReport::default(),
            path: Path::First,
            replay: true,
            order: heapless::Vec::new(),
            model_steps: 0,
            schedule: ScheduleReport::default(),
            kept: schedule::Kept::new(&[]),
            overlap: false,
        }
    }

    /// [`prepare_with`](Self::prepare_with) into this graph, where it lies: the model it held
    /// before (if any) is released first, its flash segment unmapped. Errors as `prepare`;
    /// after one the graph holds no model, or the part of this one prepared so far, which
    /// dropping it (or preparing another) releases.
    pub fn prepare_in_place(
        &mut self,
        model: &'static [u8],
        options: impl Into<PrepareOptions>,
    ) -> Result<(), GraphError> {
        self.release_model();
        self.kept = schedule::Kept::new(model);
        let options = options.into();
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
        let graph = self;
        graph.flash_segment = graph.client.map_flash(model).ok();
        graph.inputs = io_list(sub.inputs())?;
        graph.outputs = io_list(sub.outputs())?;
        for t in sub.tensors() {
            let t = t?;
            let slot = Slot {
                bytes: t.byte_size.unwrap_or(0),
                last_use: 0,
                constant: false,
                variable: t.is_variable,
                initial: initial_byte(&t),
                offset: 0,
                slow: false,
                value: None,
            };
            // Capacity checked above.
            let _ = graph.tensors.push(slot);
        }
        let live = needed_tensors::<TENSORS>(&sub)?;
        // A variable no operator that runs reads needs no memory.
        for (slot, &l) in graph.tensors.iter_mut().zip(&live) {
            slot.variable &= l;
        }
        for info in sub.operators() {
            let info = info?;
            // An operator nothing reads runs nothing (TFLM runs it for a result no one
            // uses): a converter's shape arithmetic for a parameter the lowering reads from
            // the model instead (a TRANSPOSE_CONV's output shape, a RESHAPE's new shape).
            if !info.outputs.iter().flatten().any(|&t| live[usize::from(t)]) {
                continue;
            }
            // One step per output: an operator with several (SPLIT, UNPACK) becomes one op
            // per output, each computing its output alone.
            for output in 0..info.outputs.len().max(1) {
                let lowered = crate::ops::lower(&LowerCtx::for_output(&sub, &info, output))
                    .map_err(|e| lowering_failed(&info, e))?;
                graph.add_step(&sub, &info, output, lowered)?;
            }
        }
        for &o in &graph.outputs {
            if let Some(slot) = graph.tensors.get_mut(usize::from(o)) {
                slot.last_use = u16::MAX;
            }
        }
        let units = graph
            .client
            .capabilities()
            .map_err(not_one_op)?
            .execution_units;
        graph.overlap = units > 1 && options.scheduling != Scheduling::Dynamic;
        graph.plan_arena(options.optimise, options.slow_tensors)?;
        graph.place_variables()?;
        graph.model_steps = graph.steps.len() as u16;
        match options.schedule_table {
            Some(table) => graph.follow_table(table)?,
            None => graph.plan_schedule(options.scheduling, options.policy)?,
        }
        Ok(())
    }

    /// Releases the model the graph holds (its tensors, then its flash segment) and empties
    /// its tables, as [`unprepared`](Self::unprepared) made them.
    fn release_model(&mut self) {
        // Constants bound in the flash segment must be released before it is unmapped.
        self.path = Path::First;
        self.pool = None;
        self.slow_pool = None;
        self.tensors.clear();
        self.aux.clear();
        if let Some(segment) = self.flash_segment.take() {
            let _ = self.client.unmap_flash(segment);
        }
        self.steps.clear();
        self.inputs.clear();
        self.outputs.clear();
        self.tiles.clear();
        self.memory = ArenaReport::default();
        self.replay = true;
        self.order.clear();
        self.model_steps = 0;
        self.schedule = ScheduleReport::default();
        self.overlap = false;
    }
    /// Places each variable tensor in its block of the pool for the graph's lifetime and sets
    /// it to its initial value.
    fn place_variables(&mut self) -> Result<(), GraphError> {
        if !self.tensors.iter().any(|s| s.variable) {
            return Ok(());
        }
        let pool = self.pool()?;
        for t in 0..self.tensors.len() {
            let slot = &self.tensors[t];
            if !slot.variable {
                continue;
            }
            let view = self
                .client
                .place(self.pool_of(&pool, slot), slot.offset, slot.bytes);
            self.tensors[t].value = Some(view.map_err(not_one_op)?);
        }
        self.reset_state()
    }

    /// Resets the model's state: every variable tensor (the memory of stateful operators
    /// such as SVDF, which they carry from one invoke to the next) back to the value it had
    /// after [`prepare`](Self::prepare), as TFLM's `MicroInterpreter::ResetVariableTensors`
    /// does: an int8 variable is filled with its zero point, any other with zeros. The next
    /// invoke then gives what the first one gave. A model without variable tensors has
    /// nothing to reset.
    ///
    /// The bytes are written to the device from a small stack buffer; nothing is read back.
    ///
    /// ```
    /// use npu_compute::graph::Graph;
    /// use npu_compute::prelude::*;
    /// use npu_sim::{AlignedMemory, SimConfig, SimNpu};
    ///
    /// // One SVDF operator: its output depends on the inputs of earlier invokes.
    /// static MODEL: &[u8] = npu_compute::include_aligned!("../../tests/models/ops/svdf_int8_rank1/model.tflite");
    /// let first = include_bytes!("../../tests/models/ops/svdf_int8_rank1/input_0_0.bin");
    /// let expected = include_bytes!("../../tests/models/ops/svdf_int8_rank1/expected_0_0.bin");
    /// let mut device = AlignedMemory::<16384>::new();
    /// let mut host = AlignedMemory::<4096>::new();
    /// let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
    /// let channel: RefCellChannel<_> = RefCellChannel::new(NpuServer::<_>::new(npu, MemoryConfig::default()).unwrap());
    /// let mut graph: Graph<_> = Graph::prepare(ComputeClient::new(&channel), MODEL).unwrap();
    /// let mut out = [0u8; 4];
    /// graph.invoke(&[first], &mut [&mut out]).unwrap();
    /// assert_eq!(&out, expected);
    /// // The same input again: the state has moved on, so the output differs.
    /// graph.invoke(&[first], &mut [&mut out]).unwrap();
    /// assert_ne!(&out, expected);
    /// // After a reset, the first invoke's output again.
    /// graph.reset_state().unwrap();
    /// graph.invoke(&[first], &mut [&mut out]).unwrap();
    /// assert_eq!(&out, expected);
    /// ```
    ///
    /// Errors: [`GraphError::Compute`] when the stack cannot write them.
    pub fn reset_state(&mut self) -> Result<(), GraphError> {
        /// Bytes written per upload.
        const CHUNK: u32 = 256;
        let Some(pool) = self.pool.as_ref() else {
            return Ok(());
        };
        for slot in self.tensors.iter().filter(|s| s.variable) {
            let fill = [slot.initial; CHUNK as usize];
            let mut at = 0;
            while at < slot.bytes {
                let n = (slot.bytes - at).min(CHUNK);
                let view = self
                    .client
                    .place(self.pool_of(pool, slot), slot.offset + at, n);
                let view = view.map_err(not_one_op)?;
                self.client
                    .write(&view, &fill[..n as usize])
                    .map_err(not_one_op)?;
                at += n;
            }
        }
        Ok(())
    }
    /// The arena figures: the activation pool of the plan, its lower bound, and the constants.
    pub fn arena(&self) -> ArenaReport {
        self.memory
    }

    // Out of line: inlined into prepare, its temporaries (the lowered op, the step) and
    // those of the arena plan were laid side by side in one frame, a kilobyte or two more
    // of the deepest stack a firmware needs.
    #[inline(never)]
    fn add_step(
        &mut self,
        sub: &SubGraph<'static>,
        info: &crate::model::OperatorInfo<'_>,
        output: usize,
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
                    // A variable's bytes in the file (if any) are not its value: TFLM sets it
                    // to its initial value at allocation (see `reset_state`).
                    if let (Some(data), false) = (info_t.data, slot.variable) {
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
                Operand::Joined(parts) => {
                    let mut data: [&[u8]; 4] = [&[]; 4];
                    for (d, &t) in data.iter_mut().zip(&parts) {
                        *d = sub.tensor(t)?.data.ok_or(GraphError::Unsupported {
                            op_index: info.index,
                            op: info.builtin,
                            what: "non-constant tensor joined into one constant",
                        })?;
                    }
                    let bytes = data
                        .iter()
                        .try_fold(0u32, |n, d| n.checked_add(u32::try_from(d.len()).ok()?))
                        .ok_or(capacity("joined bytes", u32::MAX as usize, usize::MAX))?;
                    let tensor = self
                        .client
                        .create_const_with(bytes, |buf| {
                            let mut at = 0;
                            for d in data {
                                buf[at..at + d.len()].copy_from_slice(d);
                                at += d.len();
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
        let output = info.output(output).ok_or(GraphError::Unsupported {
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
            placement: Placement::Auto,
            band: Default::default(),
            split: false,
        };
        self.steps
            .push(step)
            .map_err(|_| capacity("OPS", OPS, OPS + 1))
    }
    /// Runs the model: `inputs[k]` holds the bytes of model input `k`, and `outputs[k]`
    /// receives model output `k`. Returns once the outputs are read. The first invoke runs
    /// job by job; later ones replay a job plan where one holds the graph (see the
    /// [module docs](self)): the same bytes, cycles and transfers either way.
    ///
    /// Errors: [`GraphError::IoCount`] for more or fewer buffers than the model has inputs
    /// (or outputs), [`GraphError::BadIo`] for a buffer of another length (nothing runs
    /// then), and [`GraphError::Compute`] naming the operator whose job could not be submitted
    /// or whose result could not be read. Every activation of a per-job invoke is released
    /// before returning, even on error.
    pub fn invoke(
        &mut self,
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
    ) -> Result<(), GraphError> {
        self.check_io("input", &self.inputs, inputs.iter().map(|b| b.len()))?;
        self.check_io("output", &self.outputs, outputs.iter().map(|b| b.len()))?;
        // Every invoke after the first takes this path: kept short and first.
        if let (true, Path::Planned(plan)) = (self.replay, &mut self.path) {
            let io = (self.inputs.as_slice(), self.outputs.as_slice());
            match plan.invoke((&self.steps, &self.order), io, inputs, outputs) {
                // Built before the server's tuning changed: nothing ran; build it again.
                Err(e) if planned::stale(&e) => self.path = Path::Build,
                other => return other,
            }
        }
        self.invoke_otherwise(inputs, outputs)
    }

    /// An invoke that does not replay a ready job plan: the first one, one that builds the
    /// plan, or one of a graph that keeps the per-job path.
    #[inline(never)]
    fn invoke_otherwise(
        &mut self,
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
    ) -> Result<(), GraphError> {
        if self.use_plan()? {
            if let Path::Planned(plan) = &mut self.path {
                let io = (self.inputs.as_slice(), self.outputs.as_slice());
                return plan.invoke((&self.steps, &self.order), io, inputs, outputs);
            }
        }
        let result = self.run(inputs, outputs);
        for slot in self.tensors.iter_mut().filter(|s| !s.kept()) {
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
    /// Submits one invoke over the pinned buffers `io` and returns without waiting (but for
    /// operators on the CPU fallback, which wait for their inputs and compute): the
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
    /// use npu_compute::graph::Graph;
    /// use npu_compute::prelude::*;
    /// use npu_sim::{AlignedMemory, SimConfig, SimNpu};
    /// static MODEL: &[u8] = npu_compute::include_aligned!("../../examples/models/convnet/model.tflite");
    /// let input = include_bytes!("../../examples/models/convnet/input_0.bin");
    /// let expected = include_bytes!("../../examples/models/convnet/expected_tflm_0.bin");
    /// let mut device = AlignedMemory::<65536>::new();
    /// let mut host = AlignedMemory::<16384>::new();
    /// let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
    /// let channel: RefCellChannel<_> = RefCellChannel::new(NpuServer::<_>::new(npu, MemoryConfig::default()).unwrap());
    /// let client = ComputeClient::new(&channel);
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
        for _ in 0..2 {
            if !self.use_plan()? {
                break;
            }
            if let Path::Planned(plan) = &mut self.path {
                let names = (self.inputs.as_slice(), self.outputs.as_slice());
                match plan.submit((&self.steps, &self.order), names, io) {
                    // Built before the server's tuning changed: nothing ran; build it again.
                    Err(e) if planned::stale(&e) => self.path = Path::Build,
                    other => return other,
                }
            }
        }
        let result = self.submit_steps(io);
        for slot in self.tensors.iter_mut().filter(|s| !s.kept()) {
            slot.value = None;
        }
        result
    }

    /// Whether invokes may replay a job plan (the default) or run job by job, as the first
    /// one does. Either way gives the same results and transfers, and the same cycles unless
    /// an operator runs on the CPU (the plan then overlaps it with the NPU); job by job costs
    /// the CPU the dispatch work of every job at every invoke. For measuring what the plan
    /// saves, and for debugging: turning it off releases the plan, turning it on builds a new
    /// one at the next invoke.
    pub fn set_replay(&mut self, replay: bool) {
        self.replay = replay;
        if !replay && matches!(self.path, Path::Planned(_)) {
            self.path = Path::Build;
        }
    }

    /// The job plan invokes replay, with its figures: `None` before the second invoke, and
    /// for a graph whose jobs a plan cannot hold (tiled chains, a capacity too small for
    /// every activation placed at once), which runs job by job.
    pub fn job_plan(&self) -> Option<JobPlanReport> {
        match &self.path {
            Path::Planned(plan) => Some(plan.report()),
            _ => None,
        }
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
    pub fn operators(&self) -> impl Iterator<Item = LoweredOperator> + '_ {
        let ops = self
            .client
            .capabilities()
            .map(|c| c.ops)
            .unwrap_or_default();
        self.model_steps().iter().map(move |s| LoweredOperator {
            op_index: s.op_index,
            builtin: s.builtin,
            op: s.op,
            on_npu: s.op.is_some_and(|op| {
                op.kind() == OpKind::Reshape || ops.contains(op.kind(), op.dtype())
            }),
        })
    }
    /// The static schedule the graph's invokes follow (see [`Scheduling`]).
    pub fn schedule(&self) -> ScheduleReport {
        self.schedule
    }
    /// The model's own steps, without the band steps a schedule appended.
    pub(super) fn model_steps(&self) -> &[Step] {
        &self.steps[..usize::from(self.model_steps).min(self.steps.len())]
    }
    /// Whether the weights are read in place from flash (else they were copied to the arena).
    pub fn weights_in_flash(&self) -> bool {
        self.flash_segment.is_some()
    }
    /// Bytes of RAM this prepared graph occupies outside the arena (its tables and its job
    /// plan, sized by `OPS` and `TENSORS`): what a firmware build reserves for it, besides the
    /// compute stack itself.
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
