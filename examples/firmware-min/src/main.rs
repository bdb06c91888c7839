//! A minimal product firmware: the keyword-spotting model (`kws_dscnn`) from flash, run by the
//! runtime on the CPU alone, on QEMU's `mps2-an386` (Cortex-M4F).
//!
//! This is what a product built on npu-compute flashes on a part without an NPU (or that keeps
//! it for something else): the model in flash ([`npu_compute::include_aligned!`]), the arena
//! and the staging memory the runtime plans in as `static`s in RAM sized for this model, and
//! [`CpuOnly`] as the HAL, which runs no operator, so every operator takes the server's CPU
//! fallback kernels. No simulator, no measuring harness, no logging framework unless the
//! `defmt` feature asks for one. Its flash and RAM are the figures of a real firmware: CI
//! builds it in release and checks them with `.ci/firmware-size.sh`.
//!
//! It invokes the model twice on `input_0.bin` and compares the 12 scores of both with
//! TensorFlow Lite Micro's (`expected_tflm_0.bin`). It is built with kws_dscnn's operators
//! alone (the runtime's operator features, `Cargo.toml`), and without the runtime's NPU
//! machinery (its default features: the static-schedule planner, striping, the tuner, int16
//! operators, job plans, so that every invoke runs job by job: on the CPU alone a plan
//! saves a few hundred instructions per operator beside the kernels' millions; and the room
//! for eight execution units, where `CpuOnly` declares one). Its RAM is the statics and the
//! stack: the runtime's state (channel, server, graph) is built where it is kept and filled
//! there (`NpuServer::unset` and `setup`, `Graph::unprepared` and `prepare_in_place`),
//! since moving it would copy it on the stack. It checks
//! that a model with another operator (one ADD) is refused at prepare. It exits through semihosting with `EXIT_SUCCESS` (QEMU
//! exit status 0) only on a match, and with `EXIT_FAILURE` (status 1) on a mismatch, an error,
//! a panic or a hard fault. Before that it prints one line (semihosting stdout, no `core::fmt`):
//! the verdict, the class, and the stack the run used (the stack is painted at boot and the
//! untouched part found afterwards, [`stack`]). With the `defmt` feature it logs the same and
//! the runtime's RAM: the sizes of the server, channel and graph, and the memories' use.
//!
//! Run it from this folder with `cargo run --release` (the runner, `.ci/qemu-run.sh` at the
//! repository root, boots QEMU; `--features defmt` to decode a log).

#![no_std]
#![no_main]

mod memory;
mod report;
mod stack;

use cortex_m_rt::{entry, exception, ExceptionFrame};
use cortex_m_semihosting::debug::{self, EXIT_FAILURE, EXIT_SUCCESS};
// With `defmt`, the global logger: frames go to semihosting stdout.
#[cfg(feature = "defmt")]
use defmt_semihosting as _;

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, GraphError, Optimise};
use npu_compute::hal::CpuOnly;
use npu_compute::memory::{ChunkSliceMemory, MemoryConfig};
use npu_compute::model::BuiltinOp;
use npu_compute::server::NpuServer;

/// The model in flash, 16-byte aligned; its constants are read in place.
static MODEL: &[u8] = npu_compute::include_aligned!("../../models/kws_dscnn/model.tflite");
/// One input (49×10 MFCC features, int8).
static INPUT: &[u8; 490] = include_bytes!("../../models/kws_dscnn/input_0.bin");
/// TensorFlow Lite Micro's output for it (12 class scores, int8).
static EXPECTED: &[u8; 12] = include_bytes!("../../models/kws_dscnn/expected_tflm_0.bin");
/// A model of one ADD, an operator this build leaves out (see `Cargo.toml`): preparing it
/// must fail, naming the operator.
static LEFT_OUT: &[u8] = npu_compute::include_aligned!(
    "../../../tests/models/ops/add_int8_broadcast_rank1/model.tflite"
);

// The capacities, sized for this model on this HAL: a product declares what its models need
// rather than the defaults (64 operators, 128 tensors, 64 handles, 64 chunks, 16 staging
// blocks, 64 tuned shapes), which would put several kB more of tables on the stack. `npu-sim
// plan` gives them for the simulated NPU; on `CpuOnly` some are fewer, as the figures the
// `defmt` build logs after the run show (`ServerStats`, `MemoryStats`), and those are used.

/// Operators of the model (`Graph OPS`: 12).
const OPS: usize = 12;
/// Tensors of the model and of its job plan (`Graph TENSORS`: 43).
const TENSORS: usize = 43;
/// Tensors alive at once (`NpuServer HANDLES`: 44 on the simulated NPU, 33 here:
/// `ServerStats::handles_peak`), and the channel's deferred drops.
const HANDLES: usize = 33;
/// Chunk slots (`ChunkSliceMemory CHUNKS`: 24 on the simulated NPU, 14 here:
/// `MemoryStats::chunk_slots_peak`).
const CHUNKS: usize = 14;
/// Staging blocks in use at once (`NpuServer STAGING`: 12 on the simulated NPU; 1 here, where
/// the CPU fallback computes in the arena in place and only the input, the scores and the
/// constants prepared pass through staging, each transfer finished when submitted:
/// `ServerStats::staging_blocks_peak`).
const STAGING: usize = 1;
/// Tuned layer shapes: nothing is tuned on this HAL (there is no NPU variant to choose), so
/// the smallest table the cache allows (a power of two above 1).
const TUNE: usize = 2;

/// The server of this firmware.
pub(crate) type Server =
    NpuServer<CpuOnly<'static>, ChunkSliceMemory<CHUNKS>, HANDLES, STAGING, TUNE>;
/// Its channel.
type Channel = RefCellChannel<Server, HANDLES>;
/// The prepared model.
type Kws<'c> = Graph<'c, Channel, OPS, TENSORS>;

#[entry]
fn main() -> ! {
    stack::paint();
    let verdict = run();
    let used = stack::used();
    match verdict {
        Ok(scores) if scores == *EXPECTED => {
            report::matched(&scores, used);
            debug::exit(EXIT_SUCCESS);
        }
        Ok(scores) => {
            report::mismatch(&scores, used);
            debug::exit(EXIT_FAILURE);
        }
        Err(failure) => {
            report::failure(&failure);
            debug::exit(EXIT_FAILURE);
        }
    }
    loop {
        cortex_m::asm::wfi();
    }
}

/// Why the firmware did not get scores.
#[derive(Clone, Copy)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Failure {
    /// The static memories were handed out before (a second call of [`run`]).
    MemoriesTaken,
    /// The second invoke gave other scores than the first.
    Replay,
    /// A model with an operator this build leaves out was not refused at prepare.
    LeftOutAccepted,
    /// The runtime refused or failed. (Read by the defmt log alone: a product build reports
    /// a failure by its exit status.)
    #[cfg_attr(not(feature = "defmt"), allow(dead_code))]
    Graph(GraphError),
}

impl From<GraphError> for Failure {
    fn from(e: GraphError) -> Self {
        Failure::Graph(e)
    }
}

impl From<npu_compute::Error> for Failure {
    fn from(e: npu_compute::Error) -> Self {
        Failure::Graph(e.into())
    }
}

/// Builds the stack over the static memories, runs kws_dscnn ([`kws`]), then checks that a
/// model with an operator this build leaves out is refused ([`refuses_left_out`]).
///
/// The channel (with the server inside) and a graph are kilobytes each: each is made where
/// it is kept and filled there, since moving one is a copy of it on the stack. The channel is
/// a local here; a graph is a local of the function that prepares and uses it
/// ([`Graph::unprepared`], then `prepare_in_place`), and the two such functions run one after
/// the other.
fn run() -> Result<[u8; 12], Failure> {
    let (arena, staging) = memory::take().ok_or(Failure::MemoriesTaken)?;
    let channel = channel(CpuOnly::new(arena, staging));
    channel.with(|server| server.setup(MemoryConfig::default()))??;
    let channel = &channel;
    let scores = kws(ComputeClient::new(channel))?;
    if !refuses_left_out(ComputeClient::new(channel)) {
        return Err(Failure::LeftOutAccepted);
    }
    Ok(scores)
}

/// Prepares kws_dscnn and invokes it twice, job by job (this build has no job plans): both
/// must give the same scores (compared with TFLM's by the caller).
#[inline(never)]
fn kws(client: ComputeClient<'_, Channel>) -> Result<[u8; 12], Failure> {
    // Made here and prepared in place: `Graph::prepare` would return it, a copy of its
    // tables on the stack.
    let mut kws: Kws<'_> = Graph::unprepared(client);
    kws.prepare_in_place(MODEL, Optimise::Cycles)?;
    let kws = &mut kws;
    let mut first = [0u8; 12];
    kws.invoke(&[INPUT], &mut [&mut first])?;
    let mut scores = [0u8; 12];
    kws.invoke(&[INPUT], &mut [&mut scores])?;
    report::runtime(&client, kws);
    if first != scores {
        return Err(Failure::Replay);
    }
    Ok(scores)
}

/// Whether preparing a model of one ADD fails at its operator: this build leaves ADD out.
/// (The same graph type as kws_dscnn's, so that no second copy of prepare is built.)
#[inline(never)]
fn refuses_left_out(client: ComputeClient<'_, Channel>) -> bool {
    let mut graph: Kws<'_> = Graph::unprepared(client);
    matches!(
        graph.prepare_in_place(LEFT_OUT, Optimise::Cycles),
        Err(GraphError::Unsupported {
            op: BuiltinOp::Add,
            ..
        })
    )
}

/// The channel, with a server over `npu` inside it not yet set up (`NpuServer::unset`, then
/// `NpuServer::setup` in place): `NpuServer::new` would return the server inside a `Result`,
/// and moving it from there into the channel copies its tables. Out of line and infallible, so
/// that the channel is written straight into the caller's frame and the temporaries of its
/// making stay in this frame, gone before a model is prepared.
#[inline(never)]
fn channel(npu: CpuOnly<'static>) -> Channel {
    RefCellChannel::new(NpuServer::unset(npu))
}

/// A panic exits with failure. The message is not formatted: that would link `core::fmt`'s
/// machinery into a firmware that otherwise avoids it.
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    debug::exit(EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}

/// A hard fault exits with failure too, so that CI sees a status rather than a hang.
#[exception]
unsafe fn HardFault(_frame: &ExceptionFrame) -> ! {
    debug::exit(EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
