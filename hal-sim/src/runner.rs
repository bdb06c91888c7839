//! Running `.tflite` models on the simulated NPU from the host (behind the `std` feature):
//! what `npu-sim run`, `npu-sim trace`, `npu-sim inspect` and `npu-sim bench models` do.
//!
//! A model runs through the whole stack — [`Graph`] over client, channel, server and
//! [`SimNpu`] — exactly as firmware runs it. The figures of a run come from the simulator's
//! virtual clock and the memory manager, so they are the same on every machine; only
//! `host_us` is wall-clock time.

use std::fmt::Write as _;
use std::time::Instant;

use npu_compute::channel::ComputeChannel;
use npu_compute::client::ComputeClient;
use npu_compute::graph::{
    ArenaReport, Graph, GraphError, Optimise, PrepareOptions, ScheduleReport, Scheduling,
};
use npu_compute::hal::Npu;
use npu_compute::memory::MemoryConfig;
use npu_compute::model::{DataType, Model, ModelError};
use npu_compute::ops::{LowerCtx, Lowered, OpKind};
use npu_compute::schedule::Policy;

use npu_compute::channel::RefCellChannel;
use npu_compute::memory::ChunkSliceMemory;
use npu_compute::server::NpuServer;

use npu_compute::server::{ComputeServer, TuneStats, DEFAULT_STAGING};
use npu_compute::tune::{TuneConfig, TuneMode, DEFAULT_TUNE_ENTRIES};

use crate::access_list::GraphFacts;
use crate::workloads::{self, WorkloadError};
use crate::{SimConfig, SimNpu, TraceEntry, TraceRegions};
use npu_compute::hal::ExecutionUnit;

// Capacities are const generics, so the runner has two stacks, and a model runs on the first
// that holds it: the small one, whose figures (`runtime_state_bytes`) are those of a typical
// firmware build, or the large one, which holds any model a microcontroller runs. The command
// line thus never refuses a model for a capacity it chose; `npu-sim plan` measures the
// capacities a firmware build must declare.

/// Operators a model may have on the small stack (the graph's `OPS` capacity).
pub const OPS: usize = 64;
/// Tensors a model may have on the small stack (the graph's `TENSORS` capacity).
pub const TENSORS: usize = 128;
/// Tensor handles of the small stack's server: a model's constants (weights, biases,
/// multipliers: up to three per operator) plus its live activations.
pub const HANDLES: usize = 256;
/// Memory chunks of the small stack's server (each constant in the arena and each live
/// activation holds one).
pub const CHUNKS: usize = 256;

/// The large stack's capacities: what a model too large for the small one runs on, and what
/// [`capacities`] measures on (a figure reaching one of them is refused, as a floor and not a
/// size): well above the largest public microcontroller model seen (399 tensors).
pub mod large {
    /// Operators (graph steps).
    pub const OPS: usize = 1024;
    /// Tensors of a model and of its job plan.
    pub const TENSORS: usize = 1024;
    /// Tensor handles.
    pub const HANDLES: usize = 2048;
    /// Memory chunks.
    pub const CHUNKS: usize = 2048;
    /// Host staging blocks.
    pub const STAGING: usize = 256;
    /// Tuning entries.
    pub const TUNE: usize = 1024;
}

/// The runner's server at the given capacities.
pub type ServerOf<'a, const H: usize, const K: usize, const S: usize, const T: usize> =
    NpuServer<SimNpu<'a>, ChunkSliceMemory<K>, H, S, T>;
/// The runner's channel at the given capacities.
pub type ChannelOf<'a, const H: usize, const K: usize, const S: usize, const T: usize> =
    RefCellChannel<ServerOf<'a, H, K, S, T>, H>;
/// The server of the small stack.
pub type ModelServer<'a> = ServerOf<'a, HANDLES, CHUNKS, DEFAULT_STAGING, DEFAULT_TUNE_ENTRIES>;
/// The channel of the small stack.
pub type ModelChannel<'a> = RefCellChannel<ModelServer<'a>, HANDLES>;
/// The graph type of the small stack.
pub type SimGraph<'c, 'a> = Graph<'c, ModelChannel<'a>, OPS, TENSORS>;
/// The channel of the large stack.
pub type LargeChannel<'a> =
    ChannelOf<'a, { large::HANDLES }, { large::CHUNKS }, { large::STAGING }, { large::TUNE }>;
/// The graph type of the large stack.
pub type LargeGraph<'c, 'a> = Graph<'c, LargeChannel<'a>, { large::OPS }, { large::TENSORS }>;

/// Calls the generic function `$f` on the small stack's capacities, and again on the large
/// stack's (on a thread of its own, see [`on_large_stack`]) if a capacity of the small one ran
/// out.
macro_rules! on_fitting_stack {
    ($f:ident($($arg:expr),*)) => {{
        use $crate::runner::{large, on_large_stack, CHUNKS, HANDLES, OPS, TENSORS};
        use npu_compute::server::DEFAULT_STAGING;
        use npu_compute::tune::DEFAULT_TUNE_ENTRIES;
        match $f::<OPS, TENSORS, HANDLES, CHUNKS, DEFAULT_STAGING, DEFAULT_TUNE_ENTRIES>($($arg),*) {
            Err(e) if e.is_capacity() => on_large_stack(|| $f::<
                { large::OPS },
                { large::TENSORS },
                { large::HANDLES },
                { large::CHUNKS },
                { large::STAGING },
                { large::TUNE },
            >($($arg),*)),
            other => other,
        }
    }};
}
pub(crate) use on_fitting_stack;

/// Runs `f` on a thread with a call stack large enough for the large stack's tables (a few
/// MiB, which an unoptimised build copies on its call stack more than once).
pub(crate) fn on_large_stack<T: Send>(
    f: impl FnOnce() -> Result<T, RunError> + Send,
) -> Result<T, RunError> {
    const CALL_STACK_BYTES: usize = 256 << 20;
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .stack_size(CALL_STACK_BYTES)
            .spawn_scoped(scope, f)
            .map_err(|_| RunError::NoThread)?;
        thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The most bytes of NPU arena or of host staging memory a run can have
/// ([`RunOptions::arena_bytes`], [`RunOptions::host_bytes`]): the simulator addresses its
/// memories with 32-bit offsets, so a larger one is refused
/// ([`SimError::MemoryTooLarge`](crate::SimError::MemoryTooLarge)).
pub const MAX_MEMORY_BYTES: usize = u32::MAX as usize;

/// The arena and host staging memory `opts` asks for, zeroed; refused with
/// [`RunError::MemoryTooLarge`] before anything is allocated when either is larger than
/// [`MAX_MEMORY_BYTES`].
fn memories(opts: &RunOptions) -> Result<Memories, RunError> {
    for (what, bytes) in [
        ("arena", opts.arena_bytes),
        ("host staging memory", opts.host_bytes),
        ("slow memory tier", opts.slow_bytes),
    ] {
        if bytes > MAX_MEMORY_BYTES {
            return Err(RunError::MemoryTooLarge {
                what,
                bytes,
                limit: MAX_MEMORY_BYTES,
            });
        }
    }
    Ok((
        workloads::aligned_memory(opts.arena_bytes),
        workloads::aligned_memory(opts.host_bytes),
        workloads::aligned_memory(opts.slow_bytes),
    ))
}

/// The simulator's arena, host memory and slow tier, as 16-byte words.
type Memories = (Vec<u128>, Vec<u128>, Vec<u128>);

/// The simulator over `memories` (the slow tier given when it has bytes).
fn sim_over<'a>(
    (device, host, slow): &'a mut Memories,
    config: SimConfig,
) -> Result<SimNpu<'a>, RunError> {
    let sim = |e| RunError::Setup(WorkloadError::Sim(e));
    let npu = SimNpu::new(sim_bytes(device), sim_bytes(host), config).map_err(sim)?;
    if slow.is_empty() {
        return Ok(npu);
    }
    npu.with_slow_memory(sim_bytes(slow)).map_err(sim)
}

/// `words` as the simulator's memory: all of it, but at most [`MAX_MEMORY_BYTES`] (a size
/// is rounded up to 16-byte words, which past the limit would make the memory unaddressable).
fn sim_bytes(words: &mut [u128]) -> &mut [u8] {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(words);
    let len = bytes.len().min(MAX_MEMORY_BYTES);
    &mut bytes[..len]
}

/// How to run a model.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// Bytes of device memory (the NPU arena).
    pub arena_bytes: usize,
    /// Bytes of DMA-capable host staging memory.
    pub host_bytes: usize,
    /// The simulated NPU.
    pub config: SimConfig,
    /// Invocations timed for `host_us` (the first one, untimed, gives every other figure).
    pub repeats: usize,
    /// What the arena plan optimises.
    pub optimise: Optimise,
    /// How layers are tuned ([`TuneMode::Off`] by default). In [`TuneMode::Tune`] an untimed
    /// first invoke measures; the figures come from the next one.
    pub tune_mode: TuneMode,
    /// A tuning table to import before the model is prepared (then use
    /// [`TuneMode::CacheOnly`] to run from it alone).
    pub tune_table: Option<&'static [u8]>,
    /// How operators are spread over the execution units ([`Scheduling::Static`] by default).
    pub scheduling: Scheduling,
    /// How a static schedule picks units ([`Policy::CostEffective`] by default).
    pub policy: Policy,
    /// Measure the second invoke, the first replaying the graph's job plan, rather than the
    /// first, which runs job by job (default `false`). On one unit both take the same
    /// cycles; on several, the plan's dependencies are worked out from memory once, the
    /// per-job path's from each placement, which can be more cautious.
    pub steady: bool,
    /// Bytes of the simulator's slow memory tier (default 0: none).
    pub slow_bytes: usize,
    /// Activations kept in the slow tier ([`PrepareOptions::slow_tensors`]; default none).
    pub slow_tensors: &'static [u16],
}

impl RunOptions {
    /// How the graph is prepared: [`optimise`](Self::optimise) and
    /// [`scheduling`](Self::scheduling).
    pub fn prepare(&self) -> PrepareOptions {
        PrepareOptions {
            optimise: self.optimise,
            scheduling: self.scheduling,
            policy: self.policy,
            schedule_table: None,
            slow_tensors: self.slow_tensors,
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            arena_bytes: 1 << 20,
            host_bytes: 256 << 10,
            config: SimConfig::default(),
            repeats: 1,
            optimise: Optimise::Cycles,
            tune_mode: TuneMode::Off,
            tune_table: None,
            scheduling: Scheduling::Static,
            policy: Policy::CostEffective,
            steady: false,
            slow_bytes: 0,
            slow_tensors: &[],
        }
    }
}

/// The figures of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// The raw bytes of each output tensor, from the measured invoke, which starts from the
    /// model's initial state: a stateful model's (LSTM, SVDF) outputs are those of a first
    /// invoke, as TFLM gives them, whatever the tuning invoke and timed repeats.
    pub outputs: Vec<Vec<u8>>,
    /// Peak arena bytes reserved (constants that live in the arena included).
    pub arena_peak_bytes: u32,
    /// Arena bytes held by the prepared model between invocations (per-channel multipliers,
    /// and weights when the NPU cannot read flash).
    pub arena_constant_bytes: u32,
    /// The arena plan of the prepared graph: activation pool, its lower bound, constants.
    pub plan: ArenaReport,
    /// RAM the runtime needs for this model beyond the arena: the prepared graph's tables.
    pub runtime_state_bytes: usize,
    /// Virtual NPU cycles of one invocation, from the input upload to the output download.
    pub npu_cycles: u64,
    /// Jobs the NPU ran in one invocation (transfers included).
    pub jobs: u64,
    /// DMA transfers in one invocation.
    pub transfers: u64,
    /// Host→device transfers in one invocation, counted by the server.
    pub uploads: u32,
    /// Device→host transfers in one invocation, counted by the server.
    pub downloads: u32,
    /// Bytes moved across the bus in one invocation (both directions).
    pub transfer_bytes: u64,
    /// Bytes the CPU copied through staging in one invocation (the input into staging and
    /// the output out of it; zero for pipelined invokes over pinned buffers).
    pub staging_copy_bytes: u64,
    /// Operators run on the CPU fallback in one invocation.
    pub cpu_ops: u32,
    /// Whether the weights were read in place from flash.
    pub weights_in_flash: bool,
    /// Median host microseconds per invocation (simulator included).
    pub host_us: f64,
    /// The tuner's counters over the whole run (measuring invokes included).
    pub tuning: TuneStats,
    /// The execution units, as `--units` names them: the names of
    /// [`SimConfig::active_units`] joined by commas (`"u55-256,u55-128"`).
    pub units: String,
    /// Cycles each execution unit spent on the jobs of one invocation
    /// ([`SimStats::busy_cycles`](crate::SimStats::busy_cycles)), unit 0 first.
    pub unit_busy_cycles: Vec<u64>,
    /// Cycles the CPU fallback was charged in one invocation
    /// ([`SimStats::cpu_cycles`](crate::SimStats::cpu_cycles)).
    pub cpu_busy_cycles: u64,
    /// The schedule the graph followed: how it was asked to schedule, the makespan it
    /// predicted and the lower bound of its tasks on these units.
    pub schedule: ScheduleReport,
}

/// `text` as the inside of a JSON string.
fn json_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// The names of `config`'s execution units joined by commas: the normal form of a
/// [`parse_units`](crate::parse_units) spec.
pub fn units_spec(config: &SimConfig) -> String {
    config
        .active_units()
        .iter()
        .map(|u| u.name)
        .collect::<Vec<_>>()
        .join(",")
}

impl RunReport {
    /// The report as a JSON object.
    pub fn to_json(&self) -> String {
        format!(
            "{{\n  \"arena_peak_bytes\": {},\n  \"arena_constant_bytes\": {},\n  \"activation_bytes\": {},\n  \"activation_lower_bound_bytes\": {},\n  \"tiled_chains\": {},\n  \"recomputed_macs\": {},\n  \"runtime_state_bytes\": {},\n  \"npu_cycles\": {},\n  \"jobs\": {},\n  \"transfers\": {},\n  \"uploads\": {},\n  \"downloads\": {},\n  \"transfer_bytes\": {},\n  \"staging_copy_bytes\": {},\n  \"cpu_ops\": {},\n  \"weights_in_flash\": {},\n  \"host_us\": {:.1},\n  \"tuning_runs\": {},\n  \"tune_measurements\": {},\n  \"tuning_cycles\": {},\n  \"tune_hits\": {},\n  \"tune_fallbacks\": {},\n  \"units\": \"{}\",\n  \"unit_busy_cycles\": [{}],\n  \"cpu_busy_cycles\": {},\n  \"schedule\": \"{}\",\n  \"schedule_planned\": {},\n  \"schedule_tasks\": {},\n  \"schedule_split_operators\": {},\n  \"schedule_predicted_cycles\": {},\n  \"schedule_lower_bound_cycles\": {},\n  \"schedule_bound_critical_path_cycles\": {},\n  \"schedule_bound_work_cycles\": {},\n  \"schedule_bound_memory_cycles\": {},\n  \"schedule_bound_weight_copies_cycles\": {},\n  \"schedule_weight_copy_cycles\": {},\n  \"slow_bytes_peak\": {},\n  \"swapped_bytes\": 0,\n  \"prefetch_late_cycles\": 0\n}}\n",
            self.arena_peak_bytes,
            self.arena_constant_bytes,
            self.plan.activation_bytes,
            self.plan.lower_bound_bytes,
            self.plan.tiled_chains,
            self.plan.recomputed_macs,
            self.runtime_state_bytes,
            self.npu_cycles,
            self.jobs,
            self.transfers,
            self.uploads,
            self.downloads,
            self.transfer_bytes,
            self.staging_copy_bytes,
            self.cpu_ops,
            self.weights_in_flash,
            self.host_us,
            self.tuning.tuning_runs,
            self.tuning.measurements,
            self.tuning.tuning_cycles,
            self.tuning.hits,
            self.tuning.fallbacks,
            json_escape(&self.units),
            self.unit_busy_cycles
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            self.cpu_busy_cycles,
            self.schedule.scheduling.name(),
            self.schedule.planned,
            self.schedule.tasks,
            self.schedule.split_operators,
            self.schedule.predicted_cycles,
            self.schedule.lower_bound.max(),
            self.schedule.lower_bound.critical_path,
            self.schedule.lower_bound.work,
            self.schedule.lower_bound.memory,
            self.schedule.lower_bound.weight_copies,
            self.schedule.weight_copy_cycles,
            self.plan.slow_bytes,
        )
    }
}

/// Why a run failed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RunError {
    /// The simulator or stack could not be set up.
    Setup(WorkloadError),
    /// The model could not be prepared or run.
    Graph(GraphError),
    /// The model bytes are malformed.
    Model(ModelError),
    /// An input file has the wrong length.
    InputSize {
        /// Which input.
        index: usize,
        /// Bytes the model expects.
        expected: u32,
        /// Bytes given.
        actual: usize,
    },
    /// A pipeline run ([`crate::pipeline`]) could not be made or measured: what went wrong.
    Pipeline(&'static str),
    /// A soak ([`crate::soak`]) could not go on: what went wrong.
    Soak(&'static str),
    /// A tuning table was refused, or could not be made.
    Tuning(npu_compute::Error),
    /// The host could not start the thread the large stack runs on.
    NoThread,
    /// A memory asked for is larger than the simulator can address (nothing was allocated).
    MemoryTooLarge {
        /// Which memory: `"arena"` or `"host staging memory"`.
        what: &'static str,
        /// Bytes asked for.
        bytes: usize,
        /// The most it may have ([`MAX_MEMORY_BYTES`]).
        limit: usize,
    },
    /// Sizing a model ([`capacities`]) reached one of the sizing run's own capacities, so
    /// the figure would be a floor, not the size.
    Sizing {
        /// What ran out.
        what: &'static str,
        /// The sizing run's capacity of it.
        limit: usize,
    },
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Setup(e) => write!(f, "setting up the simulator: {e}"),
            RunError::Graph(e) => write!(f, "{e}"),
            RunError::Model(e) => write!(f, "{e}"),
            RunError::Pipeline(what) => write!(f, "pipeline run: {what}"),
            RunError::Soak(what) => write!(f, "soak: {what}"),
            RunError::NoThread => write!(
                f,
                "cannot start a thread for the runner's large stack: the host is out of \
                 threads or memory"
            ),
            RunError::Tuning(e) => write!(f, "{e}"),
            RunError::Sizing { what, limit } => write!(
                f,
                "the model uses {limit} {what} or more, as many as the sizing run has: it cannot \
                 be sized here"
            ),
            RunError::MemoryTooLarge { what, bytes, limit } => write!(
                f,
                "the {what} asked for, {bytes} bytes, is more than the simulator can address: its \
                 memories have at most {limit} bytes (32-bit offsets); give a smaller one"
            ),
            RunError::InputSize {
                index,
                expected,
                actual,
            } => write!(
                f,
                "input {index} has {actual} bytes; the model's input tensor has {expected}"
            ),
        }
    }
}

impl std::error::Error for RunError {}

impl RunError {
    /// Whether a fixed capacity of the stack ran out (so a larger stack may run the model).
    pub fn is_capacity(&self) -> bool {
        match self {
            RunError::Graph(GraphError::CapacityExceeded { .. }) => true,
            RunError::Graph(GraphError::Compute { error, .. }) | RunError::Tuning(error) => {
                matches!(error, npu_compute::Error::CapacityExceeded { .. })
            }
            _ => false,
        }
    }
}

impl From<GraphError> for RunError {
    fn from(e: GraphError) -> Self {
        RunError::Graph(e)
    }
}

impl From<WorkloadError> for RunError {
    fn from(e: WorkloadError) -> Self {
        RunError::Setup(e)
    }
}

/// A copy of `bytes` at a 16-byte aligned address, leaked: a model read from a file stands in
/// for one in flash, which lives as long as the program.
pub fn leak_aligned(bytes: &[u8]) -> &'static [u8] {
    let words: &'static mut [u128] =
        Box::leak(vec![0u128; bytes.len().div_ceil(16)].into_boxed_slice());
    let all: &'static mut [u8] = bytemuck::cast_slice_mut(words);
    all[..bytes.len()].copy_from_slice(bytes);
    &all[..bytes.len()]
}

/// The runner's stack over `device` (the arena) and `host` (staging memory).
pub fn channel<'a>(
    device: &'a mut [u128],
    host: &'a mut [u128],
    config: SimConfig,
) -> Result<ModelChannel<'a>, WorkloadError> {
    workloads::sim_channel(device, host, config, MemoryConfig::default())
}

/// Prepares `model` and runs it on `inputs` (one buffer per model input), on the small stack
/// or, if a capacity of that one runs out, the large one.
pub fn run(
    model: &'static [u8],
    inputs: &[&[u8]],
    opts: &RunOptions,
) -> Result<RunReport, RunError> {
    on_fitting_stack!(run_on(model, inputs, opts))
}

fn run_on<
    const OPS_: usize,
    const TENSORS_: usize,
    const H: usize,
    const K: usize,
    const S: usize,
    const T: usize,
>(
    model: &'static [u8],
    inputs: &[&[u8]],
    opts: &RunOptions,
) -> Result<RunReport, RunError> {
    let mut mems = memories(opts)?;
    let channel = tuned_channel::<H, K, S, T>(&mut mems, opts)?;
    let client = ComputeClient::new(&channel);
    let stack = |e| RunError::Setup(WorkloadError::Stack(e));
    // Boxed: the large stack's graph is too large for a test thread's stack.
    let mut graph: Box<Graph<'_, _, OPS_, TENSORS_>> =
        Box::new(Graph::prepare_with(client, model, opts.prepare())?);
    for (index, (input, expected)) in inputs.iter().zip(graph.input_sizes()).enumerate() {
        if input.len() != expected as usize {
            return Err(RunError::InputSize {
                index,
                expected,
                actual: input.len(),
            });
        }
    }
    // The prepare's uploads (multipliers, copied constants) finish before the measured invoke.
    client.sync().map_err(stack)?;
    let mut outputs: Vec<Vec<u8>> = graph.output_sizes().map(|n| vec![0; n as usize]).collect();
    if opts.tune_mode == TuneMode::Tune || opts.steady {
        invoke(&mut graph, inputs, &mut outputs)?;
        // A stateful model (LSTM, SVDF) moved its state on: the measured invoke, whose
        // outputs the report gives, starts from the initial state as a first invoke does.
        graph.reset_state()?;
        client.sync().map_err(stack)?;
    }

    let before = channel
        .with(|s| (s.npu().now(), s.npu().stats()))
        .map_err(stack)?;
    let server_before = client.stats().map_err(stack)?;
    invoke(&mut graph, inputs, &mut outputs)?;
    let after = channel
        .with(|s| (s.npu().now(), s.npu().stats()))
        .map_err(stack)?;
    let server_after = client.stats().map_err(stack)?;
    let memory = client.memory_stats().map_err(stack)?;

    // The timed invokes write elsewhere: the report's outputs stay the measured invoke's,
    // which for a stateful model later invokes would not give (its state has moved on).
    let mut spare = outputs.clone();
    // Not reserved for all of them up front: a count from the command line may be huge.
    let mut times = Vec::with_capacity(opts.repeats.min(1 << 10));
    for _ in 0..opts.repeats {
        let t0 = Instant::now();
        invoke(&mut graph, inputs, &mut spare)?;
        times.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    Ok(RunReport {
        outputs,
        arena_peak_bytes: memory.reserved_peak,
        arena_constant_bytes: graph.arena().constant_bytes,
        plan: graph.arena(),
        runtime_state_bytes: Graph::<'_, ChannelOf<'_, H, K, S, T>, OPS_, TENSORS_>::state_bytes(),
        npu_cycles: after.0 - before.0,
        jobs: after.1.jobs_completed - before.1.jobs_completed,
        transfers: after.1.transfers - before.1.transfers,
        uploads: server_after.uploads - server_before.uploads,
        downloads: server_after.downloads - server_before.downloads,
        transfer_bytes: (server_after.upload_bytes + server_after.download_bytes)
            - (server_before.upload_bytes + server_before.download_bytes),
        staging_copy_bytes: server_after.staging_copy_bytes - server_before.staging_copy_bytes,
        cpu_ops: server_after.cpu_ops - server_before.cpu_ops,
        weights_in_flash: graph.weights_in_flash(),
        host_us: times.get(times.len() / 2).copied().unwrap_or(0.0),
        tuning: channel.with(|s| s.tune_stats()).map_err(stack)?,
        units: units_spec(&opts.config),
        unit_busy_cycles: (0..opts.config.execution_units)
            .map(|n| {
                let unit = npu_compute::hal::Queue::Unit(n);
                after.1.busy(unit) - before.1.busy(unit)
            })
            .collect(),
        cpu_busy_cycles: after.1.cpu_cycles - before.1.cpu_cycles,
        schedule: graph.schedule(),
    })
}

/// The runner's stack as [`channel`] builds it, at the given capacities, with the server
/// tuning as `opts` say: in `opts.tune_mode`, from `opts.tune_table` when one is given.
fn tuned_channel<'a, const H: usize, const K: usize, const S: usize, const T: usize>(
    mems: &'a mut Memories,
    opts: &RunOptions,
) -> Result<ChannelOf<'a, H, K, S, T>, RunError> {
    let stack = |e| RunError::Setup(WorkloadError::Stack(e));
    let npu = sim_over(mems, opts.config)?;
    let mut server = ServerOf::<H, K, S, T>::new(npu, MemoryConfig::default())
        .map_err(stack)?
        .with_tuning(opts.tune_mode, TuneConfig::default());
    if let Some(table) = opts.tune_table {
        server = server.with_tuning_table(table).map_err(RunError::Tuning)?;
    }
    Ok(RefCellChannel::new(server))
}

/// Tunes `model`: prepares it in [`TuneMode::Tune`] (with `opts`' arena and NPU) and invokes
/// it once on `inputs`, measuring every layer shape's candidates; returns the tuning table
/// and the tuner's counters.
pub fn tune(
    model: &'static [u8],
    inputs: &[&[u8]],
    opts: &RunOptions,
) -> Result<(Vec<u8>, TuneStats), RunError> {
    let (table, stats, _) = on_fitting_stack!(tune_on(model, inputs, opts))?;
    Ok((table, stats))
}

/// The arena in which tuning `model` on `inputs` (as [`tune`] with `opts` does) finds room
/// for every measuring ([`TuneStats::starved`] 0): beside the model, measuring a layer takes a
/// scratch output, device copies of weights in flash and a kernel variant's own scratch.
/// Tunes in ever larger arenas, from twice `opts.arena_bytes` (at least 1 MiB), until one
/// starves nothing; its peak reservation, rounded up to the NPU's alignment, is the answer
/// when tuning in that much starves nothing too (else the larger arena is).
///
/// Errors: those of [`tune`], and [`RunError::Sizing`] when even an arena of
/// [`MAX_MEMORY_BYTES`] starves.
pub fn tuning_arena(
    model: &'static [u8],
    inputs: &[&[u8]],
    opts: &RunOptions,
) -> Result<usize, RunError> {
    let tune_in = |arena_bytes| {
        let opts = RunOptions {
            arena_bytes,
            ..*opts
        };
        on_fitting_stack!(tune_on(model, inputs, &opts))
    };
    let mut arena = opts
        .arena_bytes
        .saturating_mul(2)
        .clamp(1 << 20, MAX_MEMORY_BYTES);
    loop {
        let (_, stats, peak) = tune_in(arena)?;
        if stats.starved == 0 {
            let tight = (peak as usize)
                .next_multiple_of(opts.config.alignment.max(1) as usize)
                .min(arena);
            if tight < arena && tune_in(tight)?.1.starved == 0 {
                return Ok(tight);
            }
            return Ok(arena);
        }
        if arena == MAX_MEMORY_BYTES {
            return Err(RunError::Sizing {
                what: "bytes of arena to tune in",
                limit: MAX_MEMORY_BYTES,
            });
        }
        arena = arena.saturating_mul(2).min(MAX_MEMORY_BYTES);
    }
}

fn tune_on<
    const OPS_: usize,
    const TENSORS_: usize,
    const H: usize,
    const K: usize,
    const S: usize,
    const T: usize,
>(
    model: &'static [u8],
    inputs: &[&[u8]],
    opts: &RunOptions,
) -> Result<(Vec<u8>, TuneStats, u32), RunError> {
    let mut mems = memories(opts)?;
    let tuning = RunOptions {
        tune_mode: TuneMode::Tune,
        ..*opts
    };
    let channel = tuned_channel::<H, K, S, T>(&mut mems, &tuning)?;
    let stack = |e| RunError::Setup(WorkloadError::Stack(e));
    let mut graph: Box<Graph<'_, _, OPS_, TENSORS_>> = Box::new(Graph::prepare_with(
        ComputeClient::new(&channel),
        model,
        opts.optimise,
    )?);
    let mut outputs: Vec<Vec<u8>> = graph.output_sizes().map(|n| vec![0; n as usize]).collect();
    invoke(&mut graph, inputs, &mut outputs)?;
    let mut table = vec![0u8; npu_compute::tune::table_bytes(T)];
    let len = channel
        .with(|s| s.export_tuning(&mut table))
        .map_err(stack)?
        .map_err(RunError::Tuning)?;
    table.truncate(len);
    let peak = ComputeClient::new(&channel)
        .memory_stats()
        .map_err(stack)?
        .reserved_peak;
    Ok((
        table,
        channel.with(|s| s.tune_stats()).map_err(stack)?,
        peak,
    ))
}

fn invoke<C: ComputeChannel, const OPS_: usize, const TENSORS_: usize>(
    graph: &mut Graph<'_, C, OPS_, TENSORS_>,
    inputs: &[&[u8]],
    outputs: &mut [Vec<u8>],
) -> Result<(), GraphError> {
    let mut outs: Vec<&mut [u8]> = outputs.iter_mut().map(|o| o.as_mut_slice()).collect();
    graph.invoke(inputs, &mut outs)
}

/// The memories the command line gives `model` when none are asked for: the defaults of
/// [`RunOptions`] (1 MiB of arena, 256 KiB of host staging), or more where the model needs
/// more ([`planned_memory`]). Returns `(arena_bytes, host_bytes)`.
pub fn default_memory(
    model: &'static [u8],
    config: SimConfig,
    optimise: Optimise,
) -> Result<(usize, usize), RunError> {
    let (arena, host) = planned_memory(model, config, optimise)?;
    let defaults = RunOptions::default();
    Ok((
        defaults.arena_bytes.max(arena),
        defaults.host_bytes.max(host),
    ))
}

/// The memories `model` needs: its planned arena for `optimise` on `config`'s NPU (plus a
/// margin for the stack's alignment), and host staging for twice its largest input or output
/// (plus the same margin). Returns `(arena_bytes, host_bytes)`.
pub fn planned_memory(
    model: &'static [u8],
    config: SimConfig,
    optimise: Optimise,
) -> Result<(usize, usize), RunError> {
    let (arena, io) = with_large_graph(model, config, optimise, |g| {
        let largest = g.input_sizes().chain(g.output_sizes()).max().unwrap_or(0);
        (g.arena().arena_bytes(), largest)
    })?;
    let margin = 4096;
    Ok((arena as usize + margin, 2 * io as usize + margin))
}

/// A traced invoke of a model: what `npu-sim trace` draws ([`crate::gantt`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRun {
    /// The traced invoke's jobs and CPU work, each with its regions, in trace order.
    pub jobs: Vec<(TraceEntry, TraceRegions)>,
    /// Each execution unit's declared name, by index (empty when the driver declares none).
    pub units: Vec<&'static str>,
    /// Whether the traced invoke replayed the graph's job plan (else it ran job by job: the
    /// graph could not be planned).
    pub planned: bool,
}

/// Prepares `model`, invokes it twice on `inputs` as firmware does (the first invoke job by
/// job, which records the graph's job plan, the second from that plan) and returns the second
/// invoke's trace, with its regions. The trace storage is sized from the model: a first run
/// counts the second invoke's jobs and CPU operators, so the traced run loses none.
pub fn trace(
    model: &'static [u8],
    inputs: &[&[u8]],
    opts: &RunOptions,
) -> Result<TraceRun, RunError> {
    trace_with_facts(model, inputs, opts).map(|(run, _)| run)
}

/// [`trace`], with what the prepared graph says of its tensors and tasks (for
/// [`crate::access_list`]).
pub(crate) fn trace_with_facts(
    model: &'static [u8],
    inputs: &[&[u8]],
    opts: &RunOptions,
) -> Result<(TraceRun, GraphFacts), RunError> {
    let (_, _, entries) = on_fitting_stack!(trace_on(model, inputs, opts, 0))?;
    let (run, facts, needed) = on_fitting_stack!(trace_on(model, inputs, opts, entries))?;
    if needed > entries || run.jobs.len() != needed {
        // The simulator is deterministic: the second run repeats the first.
        return Err(RunError::Sizing {
            what: "trace entries",
            limit: entries,
        });
    }
    Ok((run, facts))
}

/// [`trace`] on one stack, with trace storage of `entries`; also returns the graph's facts
/// and the entries the traced invoke needs.
fn trace_on<
    const OPS_: usize,
    const TENSORS_: usize,
    const H: usize,
    const K: usize,
    const S: usize,
    const T: usize,
>(
    model: &'static [u8],
    inputs: &[&[u8]],
    opts: &RunOptions,
    entries: usize,
) -> Result<(TraceRun, GraphFacts, usize), RunError> {
    let mut mems = memories(opts)?;
    let mut trace = vec![TraceEntry::EMPTY; entries];
    let mut regions = vec![TraceRegions::EMPTY; entries];
    let stack = |e| RunError::Setup(WorkloadError::Stack(e));
    let npu = sim_over(&mut mems, opts.config)?.with_trace_regions(&mut trace, &mut regions);
    let server = ServerOf::<H, K, S, T>::new(npu, MemoryConfig::default())
        .map_err(stack)?
        .with_tuning(opts.tune_mode, TuneConfig::default());
    let channel = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let mut graph: Box<Graph<'_, _, OPS_, TENSORS_>> =
        Box::new(Graph::prepare_with(client, model, opts.prepare())?);
    for (index, (input, expected)) in inputs.iter().zip(graph.input_sizes()).enumerate() {
        if input.len() != expected as usize {
            return Err(RunError::InputSize {
                index,
                expected,
                actual: input.len(),
            });
        }
    }
    let mut outputs: Vec<Vec<u8>> = graph.output_sizes().map(|n| vec![0; n as usize]).collect();
    invoke(&mut graph, inputs, &mut outputs)?;
    client.sync().map_err(stack)?;
    let counts = |s: &ChannelOf<'_, H, K, S, T>| {
        s.with(|s| {
            let stats = s.npu().stats();
            stats.jobs_submitted + stats.cpu_ops
        })
        .map_err(stack)
    };
    let before = counts(&channel)?;
    channel.with(|s| s.npu_mut().clear_trace()).map_err(stack)?;
    invoke(&mut graph, inputs, &mut outputs)?;
    client.sync().map_err(stack)?;
    let needed = usize::try_from(counts(&channel)? - before).unwrap_or(usize::MAX);
    let (jobs, units) = channel
        .with(|s| {
            let npu = s.npu();
            let jobs: Vec<(TraceEntry, TraceRegions)> = npu
                .trace_regions()
                .map(|(e, r)| (e, r.cloned().unwrap_or_default()))
                .collect();
            let units = (0..npu.capabilities().execution_units)
                .map(|n| npu.execution_unit(n))
                .map(|u| {
                    if u == ExecutionUnit::UNDECLARED {
                        ""
                    } else {
                        u.name
                    }
                })
                .collect();
            (jobs, units)
        })
        .map_err(stack)?;
    let pool = graph.pool_id();
    let mut pool_base = None;
    channel
        .with(|s| {
            s.for_each_tensor(|t| {
                if Some(t.id) == pool {
                    pool_base = t.device.map(|r| r.offset);
                }
            })
        })
        .map_err(stack)?
        .map_err(stack)?;
    let facts = GraphFacts {
        operators: graph
            .operators()
            .map(|o| o.op.map(|op| (op.kind(), op.dtype())))
            .collect(),
        model_ops: graph.operators().map(|o| o.op_index).collect(),
        steps: graph.step_tensors().collect(),
        activations: graph.activations().collect(),
        tasks: graph.tasks().collect(),
        pool_base,
        arena: graph.arena(),
        alignment: opts.config.alignment,
    };
    let run = TraceRun {
        jobs,
        units,
        planned: graph.job_plan().is_some(),
    };
    Ok((run, facts, needed))
}

/// Bytes of each of `model`'s inputs.
pub fn input_sizes(model: &'static [u8]) -> Result<Vec<u32>, RunError> {
    with_large_graph(model, SimConfig::default(), Optimise::Cycles, |g| {
        g.input_sizes().collect()
    })
}

/// Prepares `model` on the large stack (16 MiB of arena) and answers `f` of the graph.
fn with_large_graph<R: Send>(
    model: &'static [u8],
    config: SimConfig,
    options: impl Into<PrepareOptions> + Send,
    f: impl FnOnce(&LargeGraph<'_, '_>) -> R + Send,
) -> Result<R, RunError> {
    let options = options.into();
    on_large_stack(|| {
        // A slow tier only for a graph that keeps tensors there.
        let slow = if options.slow_tensors.is_empty() {
            0
        } else {
            16 << 20
        };
        let mut mems = (
            workloads::aligned_memory(16 << 20),
            workloads::aligned_memory(256 << 10),
            workloads::aligned_memory(slow),
        );
        let opts = RunOptions {
            config,
            ..RunOptions::default()
        };
        let channel: LargeChannel<'_> = tuned_channel(&mut mems, &opts)?;
        let graph: Box<LargeGraph<'_, '_>> = Box::new(Graph::prepare_with(
            ComputeClient::new(&channel),
            model,
            options,
        )?);
        Ok(f(&graph))
    })
}

/// The arena a model needs on `config`'s NPU, from its prepared graph's plan: an arena of
/// `arena_bytes()` runs it, one alignment unit less does not.
pub fn plan(
    model: &'static [u8],
    config: SimConfig,
    optimise: Optimise,
) -> Result<ArenaReport, RunError> {
    with_large_graph(model, config, optimise, |g| g.arena())
}

/// [`plan`] for a graph that keeps `slow_tensors` in the slow tier
/// ([`PrepareOptions::slow_tensors`]): the arena's figures without them, and
/// [`ArenaReport::slow_bytes`] the tier's.
///
/// Also every activation the graph keeps there: those listed and those sharing their memory.
pub fn plan_tiered(
    model: &'static [u8],
    config: SimConfig,
    slow_tensors: &'static [u16],
) -> Result<(ArenaReport, Vec<u16>), RunError> {
    let options = PrepareOptions {
        slow_tensors,
        ..PrepareOptions::default()
    };
    with_large_graph(model, config, options, |g| {
        let slow = g.activations().filter(|a| a.slow).map(|a| a.tensor);
        (g.arena(), slow.collect())
    })
}

/// The static schedule a graph of `model` plans on `config`'s units, as a schedule table
/// ([`Graph::export_schedule`]) for firmware to follow
/// ([`PrepareOptions::schedule_table`]).
pub fn schedule_table(
    model: &'static [u8],
    config: SimConfig,
    optimise: Optimise,
) -> Result<Vec<u8>, RunError> {
    with_large_graph(model, config, optimise, |g| {
        // The graph section and the schedule: 6 + 20 bytes a task, two headers.
        let mut table = vec![0; 64 + 26 * large::OPS];
        let n = g.export_schedule(&mut table)?;
        table.truncate(n);
        Ok(table)
    })?
}

/// `model` compiled for a device's CPU ([`Graph::compile`]): prepared on the simulator with
/// one unit, every operator on the CPU fallback (what a compiled model runs on), whole
/// tensors. Its bytes; run them with [`npu_compute::compiled::CompiledModel`].
pub fn compile(model: &'static [u8]) -> Result<Vec<u8>, RunError> {
    let config = SimConfig {
        ops: npu_compute::ops::OpSet::EMPTY,
        ..SimConfig::default()
    };
    with_large_graph(model, config, Optimise::Cycles, |g| {
        // Its constants, a step per operator, and room for the header and the tables.
        let mut image = vec![0; model.len() + 4096 + 1024 * large::OPS];
        let n = g.compile(model, &mut image)?;
        image.truncate(n);
        Ok(image)
    })?
}

/// The fixed capacities and the host staging memory a model needs, measured by running it.
///
/// Each figure is the most the run used at once, so a firmware build with at least these
/// capacities runs the model (with more, nothing changes). The run is the one firmware
/// makes: prepare, a first invoke job by job, a second from the graph's job plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacities {
    /// The arena the model needs (the graph's arena plan, as [`plan`] reports it).
    pub arena: ArenaReport,
    /// Operators the graph lowers: `Graph`'s `OPS`.
    pub ops: usize,
    /// Tensors of the model, or of its job plan if more (the plan also holds the graph's
    /// per-channel multipliers): `Graph`'s `TENSORS`.
    pub tensors: usize,
    /// Most tensor handles alive at once: `NpuServer`'s `HANDLES` (and the channel's `N`).
    pub handles: u32,
    /// Most chunk slots in use at once (the graph's pool, each constant in the arena, each
    /// activation placed in the pool): `ChunkSliceMemory`'s `CHUNKS`.
    pub chunks: u32,
    /// Most host staging blocks at once: `NpuServer`'s `STAGING`.
    pub staging_blocks: u32,
    /// Host staging memory that served the run without waiting for a transfer: the `host`
    /// memory to give the driver.
    pub host_staging_bytes: u32,
    /// The largest single staging block: the least host memory that runs the model, with
    /// transfers waiting for earlier ones to free their blocks.
    pub host_staging_min_bytes: u32,
    /// Layer shapes with a choice of kernel variant: the entries a tuning table holds, and
    /// `NpuServer`'s `TUNE` for a server that tunes or imports one.
    pub tune_entries: u32,
    /// Jobs of the graph's job plan (0 when the graph runs job by job; see
    /// `Graph::job_plan`).
    pub plan_jobs: usize,
}

/// The sizing run: the large stack, so that what a model uses is measured rather than capped
/// (a figure at its cap is an error, not a size).
mod sizing {
    pub use super::large::*;
    /// Bytes of the NPU arena and of host memory.
    pub const MEMORY_BYTES: usize = 16 << 20;
}

/// Measures the [`Capacities`] `model` needs on `config`'s NPU, planned for `optimise`: it
/// runs the model twice on zero inputs (capacities do not depend on the values), then tunes it
/// on a second stack, for the tuning entries. Both stacks have capacities far above the
/// runner's; a model that reaches one of those is refused with [`RunError::Sizing`].
pub fn capacities(
    model: &'static [u8],
    config: SimConfig,
    optimise: Optimise,
) -> Result<Capacities, RunError> {
    let stack = |e| RunError::Setup(WorkloadError::Stack(e));
    let run = |mode: TuneMode| -> Result<_, RunError> {
        let mut device = workloads::aligned_memory(sizing::MEMORY_BYTES);
        let mut host = workloads::aligned_memory(sizing::MEMORY_BYTES);
        let npu = SimNpu::new(
            bytemuck::cast_slice_mut(&mut device),
            bytemuck::cast_slice_mut(&mut host),
            config,
        )
        .map_err(|e| RunError::Setup(WorkloadError::Sim(e)))?;
        let server = ServerOf::<
            { sizing::HANDLES },
            { sizing::CHUNKS },
            { sizing::STAGING },
            { sizing::TUNE },
        >::new(npu, MemoryConfig::default())
        .map_err(stack)?
        .with_tuning(mode, TuneConfig::default());
        let channel: LargeChannel<'_> = RefCellChannel::new(server);
        let client = ComputeClient::new(&channel);
        // Boxed: at the sizing capacities the graph is too large for a test thread's stack.
        let mut graph: Box<Graph<'_, _, { sizing::OPS }, { sizing::TENSORS }>> =
            Box::new(Graph::prepare_with(client, model, optimise)?);
        let inputs: Vec<Vec<u8>> = graph.input_sizes().map(|n| vec![0; n as usize]).collect();
        let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let mut outputs: Vec<Vec<u8>> = graph.output_sizes().map(|n| vec![0; n as usize]).collect();
        for _ in 0..2 {
            invoke(&mut graph, &inputs, &mut outputs)?;
        }
        let plan = graph.job_plan();
        Ok((
            graph.arena(),
            graph.operators().count(),
            plan,
            client.stats().map_err(stack)?,
            client.memory_stats().map_err(stack)?,
            client.tune_stats().map_err(stack)?,
        ))
    };
    let (arena, ops, plan, server, memory, _) = on_large_stack(|| run(TuneMode::Off))?;
    let (.., tuning) = on_large_stack(|| run(TuneMode::Tune))?;
    let model_tensors = Model::parse(model)
        .map_err(RunError::Model)?
        .subgraph()
        .tensor_count();
    let caps = Capacities {
        arena,
        ops,
        tensors: usize::from(model_tensors).max(plan.map_or(0, |p| p.tensors)),
        handles: server.handles_peak,
        chunks: memory.chunk_slots_peak,
        staging_blocks: server.staging_blocks_peak,
        host_staging_bytes: server.staging_bytes_peak,
        host_staging_min_bytes: server.staging_largest_bytes,
        tune_entries: tuning.tuning_runs,
        plan_jobs: plan.map_or(0, |p| p.jobs),
    };
    let reached = [
        ("handles", caps.handles as usize, sizing::HANDLES),
        ("chunk slots", caps.chunks as usize, sizing::CHUNKS),
        (
            "staging blocks",
            caps.staging_blocks as usize,
            sizing::STAGING,
        ),
        (
            "tuned layer shapes",
            caps.tune_entries as usize,
            sizing::TUNE,
        ),
        ("tensors", caps.tensors, sizing::TENSORS),
        ("operators", caps.ops, sizing::OPS),
        // While the highest staging byte and the largest block fit together, the tail of
        // host memory could always take a block: no transfer waited for memory.
        (
            "bytes of host staging",
            (caps.host_staging_bytes + caps.host_staging_min_bytes) as usize,
            sizing::MEMORY_BYTES + 1,
        ),
    ];
    match reached.into_iter().find(|&(_, used, cap)| used >= cap) {
        Some((what, _, limit)) => Err(RunError::Sizing { what, limit }),
        None => Ok(caps),
    }
}

/// What [`inspect`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspection {
    /// The description, as `npu-sim inspect` prints it.
    pub text: String,
    /// Operators that cannot run (each listed in `text` with why).
    pub unsupported: usize,
}

/// A human-readable description of a model: tensors with shapes and quantization, and each
/// operator with where it runs on `config`'s NPU, or why it cannot run (every such operator,
/// not only the first).
pub fn inspect(model: &'static [u8], config: SimConfig) -> Result<Inspection, RunError> {
    let parsed = Model::parse(model).map_err(RunError::Model)?;
    let sub = parsed.subgraph();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "model: version {}, {} operators, {} tensors",
        parsed.version(),
        sub.operator_count(),
        sub.tensor_count()
    );
    let _ = writeln!(out, "\ntensors:");
    for t in sub.tensors() {
        let t = t.map_err(RunError::Model)?;
        let q = match &t.quantization {
            Some(q) if q.len() == 1 => format!(
                "scale {} zero point {}",
                q.scale(0).unwrap_or(0.0),
                q.zero_point(0).unwrap_or(0)
            ),
            Some(q) => format!(
                "{} scales along axis {}",
                q.len(),
                q.quantized_dimension().unwrap_or(0)
            ),
            None => "not quantized".into(),
        };
        let kind = if t.is_constant() {
            "const"
        } else {
            "activation"
        };
        let _ = writeln!(
            out,
            "  {:>3} {:<10} {:<7} {:?} {} B, {q}  {}",
            t.index,
            kind,
            dtype_name(t.dtype),
            t.shape.dims(),
            t.byte_size.unwrap_or(0),
            t.name
        );
    }
    // Each operator is lowered on its own, so that every unsupported one is listed (with why
    // and its element types), not only the first, as preparing the graph would.
    let _ = writeln!(out, "\noperators:");
    let mut counts = [0usize; 5]; // NPU, CPU, alias, unsupported, not run
    let needed = npu_compute::graph::needed_tensors::<{ large::TENSORS }>(&sub)?;
    for info in sub.operators() {
        let info = info.map_err(RunError::Model)?;
        let mut place = String::new();
        let mut chosen = None;
        let run = info
            .outputs
            .iter()
            .flatten()
            .any(|&t| needed[usize::from(t)]);
        if !run {
            counts[4] += 1;
            place = "not run (nothing reads its output)".into();
        }
        for output in (0..info.outputs.len().max(1)).filter(|_| run) {
            let lowered = npu_compute::ops::lower(&LowerCtx::for_output(&sub, &info, output));
            let (what, slot) = match &lowered {
                Ok(Lowered::Alias { .. }) => ("alias (no job)".to_string(), 2),
                Ok(Lowered::Compute { op, .. })
                    if op.kind() == OpKind::Reshape || config.ops.runs(op) =>
                {
                    ("NPU".to_string(), 0)
                }
                Ok(Lowered::Compute { .. }) => ("CPU fallback".to_string(), 1),
                Err(e) => (format!("UNSUPPORTED ({e})"), 3),
            };
            // The first output's place, unless another output cannot be computed.
            if output == 0 || (slot == 3 && chosen != Some(3)) {
                place = what;
                chosen = Some(slot);
            }
        }
        if let Some(slot) = chosen {
            counts[slot] += 1;
        }
        let types = |list: &[Option<u16>]| {
            list.iter()
                .flatten()
                .map(|&t| {
                    sub.tensor(t)
                        .map_or("?", |t| dtype_name(t.dtype))
                        .to_string()
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        let _ = writeln!(
            out,
            "  {:>3} {:<28} {:<15} in {:?} ({}) out {:?} ({})",
            info.index,
            info.builtin.name(),
            place,
            info.inputs.iter().flatten().collect::<Vec<_>>(),
            types(&info.inputs),
            info.outputs.iter().flatten().collect::<Vec<_>>(),
            types(&info.outputs),
        );
    }
    let [npu, cpu, alias, unsupported, unread] = counts;
    let _ = writeln!(
        out,
        "\n{} operators: {npu} on the NPU, {cpu} on the CPU fallback, {alias} aliases, \
         {unread} not run (nothing reads them), {unsupported} unsupported",
        sub.operator_count()
    );
    if unsupported > 0 {
        return Ok(Inspection {
            text: out,
            unsupported,
        });
    }
    let in_flash = with_large_graph(model, config, Optimise::Cycles, |g| g.weights_in_flash())?;
    let _ = writeln!(
        out,
        "weights: {}",
        if in_flash {
            "read in place from flash"
        } else {
            "copied to the arena"
        }
    );
    Ok(Inspection {
        text: out,
        unsupported: 0,
    })
}

fn dtype_name(d: DataType) -> &'static str {
    match d {
        DataType::Int8 => "int8",
        DataType::Int32 => "int32",
        DataType::Float32 => "float32",
        DataType::UInt8 => "uint8",
        DataType::Int16 => "int16",
        DataType::Int64 => "int64",
        _ => "other",
    }
}
