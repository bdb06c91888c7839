//! A model on the CPU fallback alone: its output checked, its instructions counted per layer.
//!
//! Shared by the example firmwares (`examples/firmware` on the Cortex-M4F of `mps2-an386`,
//! `examples/firmware-m55` on the Cortex-M55 of `mps3-an547`), each of which includes this file
//! as its `cpu_layers` module beside the [`systick`](crate::systick) one:
//!
//! ```ignore
//! #[path = "../../firmware-common/cpu_layers.rs"]
//! mod cpu_layers;
//! ```
//!
//! # Why
//!
//! Every board runs some operators on its CPU, and a board without an NPU runs all of them
//! there. What the CPU fallback kernels cost on a given core, layer by layer, is the figure to
//! put beside CMSIS-NN's for the same layers (`../shared/CMSIS_NN_KWS.md`, counted the same way:
//! instructions under QEMU's `-icount shift=0`), and it is only worth quoting for a run that
//! gives the right bytes. So the run measured is the real one: the model prepared and invoked
//! through graph, client, channel and server, on its real input, every invoke's output
//! compared with TensorFlow Lite Micro's bytes.
//!
//! # How
//!
//! The driver under the server declares no operator, so the server runs every layer on its
//! CPU fallback (`server::fallback`). The driver lends the CPU its device memory (as
//! [`CpuOnly`](npu_compute::hal::CpuOnly) does: the arena is plain SRAM), so the fallback
//! computes in place, as a product runs: it takes the device memory ([`Npu::device_memory`];
//! through host staging, [`Npu::host_memory`], on a driver that does not lend it), runs the
//! kernel (`Op::run`) on the operands where they lie, and reports the computation to the
//! driver ([`Npu::host_compute`]). [`TimedFallback`] wraps that driver and reads SysTick at
//! those calls: the last `device_memory` or `host_memory` before a `host_compute` starts a
//! layer, the `host_compute` ends it. Between the two readings are the kernel, its dispatch on
//! the operator and the views of its operands: what running the layer on the CPU costs, as
//! CMSIS-NN's figures include the call of the kernel and its argument setup. The waits and
//! bookkeeping around it are not in it; the whole invoke's count, logged beside the layers',
//! says what the runtime adds.
//!
//! A tick is 40 instructions on `mps2-an386` and 31.25 on `mps3-an547`. To get below it, the
//! model is invoked [`REPEATS`] times, each after a pseudo-random delay so that its layers
//! start at different phases of a tick, and each layer's ticks are summed over the invokes
//! and divided by their number. The fixed cost of the two readings themselves (measured alone,
//! [`STAMP_SAMPLES`] times at random phases) is subtracted from every layer.

use core::convert::Infallible;

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::compiled::{CompiledError, CompiledModel, Session};
use npu_compute::graph::{Graph, GraphError};
use npu_compute::hal::{
    Capabilities, Cycles, Estimate, ExecutionUnit, Fence, HalError, Job, Npu, Variant,
};
use npu_compute::memory::MemoryConfig;
use npu_compute::ops::{Op, OpKind};
use npu_compute::server::NpuServer;
use npu_compute::Error;

use crate::systick::{Calibration, Centi, ClockError, Ticks, TimeError};

/// Invokes counted: each layer's figure is its ticks summed over them, divided by them (to
/// 40 / 8 = 5 instructions on `mps2-an386`, 31.25 / 8 ≈ 4 on `mps3-an547`).
pub const REPEATS: u32 = 8;
/// Most layers (operators that run a kernel) a model may have here.
pub const MAX_LAYERS: usize = 16;
/// Most output bytes of the model.
pub const MAX_OUTPUT: usize = 64;
/// Pairs of SysTick readings timed alone to measure their fixed cost.
pub const STAMP_SAMPLES: u32 = 1000;

/// One input of a model and what TensorFlow Lite Micro outputs for it.
#[derive(Clone, Copy)]
pub struct Case {
    /// The model's one input.
    pub input: &'static [u8],
    /// TFLM's bytes for it: the model's one output.
    pub expected: &'static [u8],
}

/// A model and its cases.
#[derive(Clone, Copy)]
pub struct Model {
    /// Its name in the log (`kws_dscnn`).
    pub name: &'static str,
    /// The `.tflite` file, in flash, 16-byte aligned.
    pub tflite: &'static [u8],
    /// Inputs with TFLM's outputs; the first is the one counted.
    pub cases: &'static [Case],
}

/// kws_dscnn's three inputs (49×10 MFCC features, int8) and TFLM's 12 class scores for each.
pub static KWS_CASES: [Case; 3] = [
    Case {
        input: include_bytes!("../models/kws_dscnn/input_0.bin"),
        expected: include_bytes!("../models/kws_dscnn/expected_tflm_0.bin"),
    },
    Case {
        input: include_bytes!("../models/kws_dscnn/input_1.bin"),
        expected: include_bytes!("../models/kws_dscnn/expected_tflm_1.bin"),
    },
    Case {
        input: include_bytes!("../models/kws_dscnn/input_2.bin"),
        expected: include_bytes!("../models/kws_dscnn/expected_tflm_2.bin"),
    },
];

/// One layer of the model as run on the CPU.
#[derive(Clone, Copy, defmt::Format)]
pub struct Layer {
    /// The operator family.
    pub kind: OpKind,
    /// Its work: [`Op::macs`] (multiply-accumulates, or elements for the others).
    pub macs: u64,
    /// Instructions per invoke, in hundredths, the readings' own cost subtracted.
    pub centi: u64,
}

/// What [`run`] counted.
#[derive(Clone, defmt::Format)]
pub struct LayerCounts {
    /// The layers, in the order they ran.
    pub layers: heapless::Vec<Layer, MAX_LAYERS>,
    /// One whole invoke (input written, every layer, output read), in hundredths.
    pub invoke_centi: u64,
}

impl LayerCounts {
    /// The layers together, in whole instructions (rounded): the model on the CPU.
    pub fn instructions(&self) -> u64 {
        (self.layers.iter().map(|l| l.centi).sum::<u64>() + 50) / 100
    }
}

/// Why the model could not be run or counted.
#[derive(defmt::Format)]
pub enum LayerError {
    /// The compute stack refused the driver.
    Stack(Error),
    /// The model could not be prepared or run.
    Graph(GraphError),
    /// SysTick could not time a layer or the invoke.
    Clock(ClockError),
    /// Invoke `invoke` of case `case` gave `got` where TFLM gives `expected`, at output byte
    /// `index`.
    Mismatch {
        /// Which case of [`Model::cases`].
        case: usize,
        /// Which invoke of it (0 is the first).
        invoke: u32,
        /// The first byte that differs.
        index: usize,
        /// What the CPU fallback gave.
        got: i8,
        /// What TFLM gives.
        expected: i8,
    },
    /// The model's output is larger than [`MAX_OUTPUT`] bytes.
    OutputTooLarge(usize),
    /// The model has no case to run.
    NoCase,
    /// The model has more than [`MAX_LAYERS`] layers.
    TooManyLayers,
    /// This invoke ran other layers than the first one, or none.
    LayersDiffer(u32),
    /// The compiled model was refused or failed, or has no input or output of the model's.
    Compiled(Option<CompiledError>),
}

impl From<GraphError> for LayerError {
    fn from(e: GraphError) -> Self {
        LayerError::Graph(e)
    }
}

impl From<Error> for LayerError {
    fn from(e: Error) -> Self {
        LayerError::Stack(e)
    }
}

impl From<ClockError> for LayerError {
    fn from(e: ClockError) -> Self {
        LayerError::Clock(e)
    }
}

/// A layer's ticks summed over the invokes so far.
#[derive(Clone, Copy)]
struct LayerTicks {
    kind: OpKind,
    macs: u64,
    ticks: u64,
}

/// A driver that runs no operator, wrapped to time each layer the server runs on the CPU
/// fallback (see the module documentation). Everything else is the wrapped driver's.
pub struct TimedFallback<'t, H> {
    npu: H,
    ticks: &'t Ticks,
    /// The reading at the latest [`Npu::host_memory`].
    started: u32,
    /// Whether an invoke is being counted ([`begin_invoke`](Self::begin_invoke) to
    /// [`end_invoke`](Self::end_invoke)).
    counting: bool,
    /// The invoke being counted (0 is the first).
    invoke: u32,
    /// The next layer of the current invoke.
    next: usize,
    /// Each layer's kind, work and ticks over the invokes.
    layers: heapless::Vec<LayerTicks, MAX_LAYERS>,
    /// The first thing that went wrong while timing (reported after the invoke).
    failed: Option<LayerError>,
}

impl<'t, H: Npu> TimedFallback<'t, H> {
    /// Wraps `npu`, which should run no operator (else those it runs are not counted).
    pub fn new(npu: H, ticks: &'t Ticks) -> Self {
        TimedFallback {
            npu,
            ticks,
            started: 0,
            counting: false,
            invoke: 0,
            next: 0,
            layers: heapless::Vec::new(),
            failed: None,
        }
    }

    /// Starts a layer: SysTick now.
    #[inline(never)]
    fn start(&mut self) {
        self.started = self.ticks.now();
    }

    /// Ends the layer [`start`](Self::start) began: its ticks.
    #[inline(never)]
    fn stop(&mut self) -> Result<u32, ClockError> {
        Ticks::between(self.started, self.ticks.now())
    }

    /// Adds `ticks` to the next layer of this invoke, which must be `op`'s kind.
    fn record(&mut self, op: &Op, ticks: u32) -> Result<(), LayerError> {
        let index = self.next;
        self.next += 1;
        match self.layers.get_mut(index) {
            Some(layer) if layer.kind == op.kind() => {
                layer.ticks += u64::from(ticks);
                Ok(())
            }
            Some(_) => Err(LayerError::LayersDiffer(self.invoke)),
            None => self
                .layers
                .push(LayerTicks {
                    kind: op.kind(),
                    macs: op.macs(),
                    ticks: u64::from(ticks),
                })
                .map_err(|_| LayerError::TooManyLayers),
        }
    }

    /// Before invoke `invoke` (0 is the first), to count: its first layer is the model's first.
    fn begin_invoke(&mut self, invoke: u32) {
        self.invoke = invoke;
        self.next = 0;
        self.counting = true;
    }

    /// After the invoke: what went wrong while timing it, or a different number of layers than
    /// the first invoke ran.
    fn end_invoke(&mut self) -> Result<(), LayerError> {
        self.counting = false;
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if self.next != self.layers.len() || self.next == 0 {
            return Err(LayerError::LayersDiffer(self.invoke));
        }
        Ok(())
    }

    /// The fixed cost of [`start`](Self::start) and [`stop`](Self::stop), in hundredths of an
    /// instruction: timed alone, each pair after a pseudo-random delay of 2 to 80 instructions
    /// so that the pairs start at every phase of a tick and their ticks average to the cost.
    fn stamp_cost(&mut self, cal: &Calibration) -> Result<u64, ClockError> {
        let mut ticks = 0u64;
        let mut state = 1u32;
        for _ in 0..STAMP_SAMPLES {
            state = next_random(state);
            cortex_m::asm::delay((state >> 24) % 40);
            self.start();
            ticks += u64::from(self.stop()?);
        }
        Ok(cal.centi_per_call(ticks, STAMP_SAMPLES))
    }
}

/// The next state of a linear congruential generator (Numerical Recipes' constants).
fn next_random(state: u32) -> u32 {
    state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223)
}

impl<H: Npu> Npu for TimedFallback<'_, H> {
    fn capabilities(&self) -> Capabilities {
        self.npu.capabilities()
    }
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError> {
        self.npu.submit(job)
    }
    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError> {
        self.npu.poll(fence)
    }
    fn wait_for_event(&mut self) {
        self.npu.wait_for_event()
    }
    fn on_interrupt(&mut self) {
        self.npu.on_interrupt()
    }
    fn now(&self) -> Cycles {
        self.npu.now()
    }
    /// Starts a layer (the server takes the host memory right before a kernel runs; the last
    /// call before [`host_compute`](Npu::host_compute) is that one).
    fn host_memory(&mut self) -> &mut [u8] {
        if self.counting {
            self.start();
        }
        self.npu.host_memory()
    }
    /// Starts a layer, as [`host_memory`](Npu::host_memory) does: in place, the server takes
    /// the device memory right before a kernel runs.
    fn device_memory(&mut self) -> Option<&mut [u8]> {
        if self.counting {
            self.start();
        }
        self.npu.device_memory()
    }
    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, HalError> {
        self.npu.map_flash(bytes)
    }
    fn unmap_flash(&mut self, segment: u8) {
        self.npu.unmap_flash(segment)
    }
    fn supports_variant(&self, op: &Op, variant: Variant) -> bool {
        self.npu.supports_variant(op, variant)
    }
    fn tuning_fingerprint(&self) -> u64 {
        self.npu.tuning_fingerprint()
    }
    /// Ends the layer, then tells the wrapped driver.
    fn host_compute(&mut self, op: &Op) {
        if self.counting {
            let timed = self.stop().map_err(LayerError::Clock);
            if let Err(e) = timed.and_then(|ticks| self.record(op, ticks)) {
                self.failed.get_or_insert(e);
            }
        }
        self.npu.host_compute(op)
    }
    fn execution_unit(&self, unit: u8) -> ExecutionUnit {
        self.npu.execution_unit(unit)
    }
    fn estimate(&mut self, job: &Job<'_>) -> Option<Estimate> {
        self.npu.estimate(job)
    }
    fn estimate_host_compute(&self, op: &Op) -> Option<Cycles> {
        self.npu.estimate_host_compute(op)
    }
    fn clock_counts_cpu(&self) -> bool {
        self.npu.clock_counts_cpu()
    }
    fn reset(&mut self) -> Result<(), HalError> {
        self.npu.reset()
    }
}

/// The server over the timed driver, with the default capacities.
type Server<'t, H> = NpuServer<TimedFallback<'t, H>>;

/// Runs `model` on `npu`, which must run no operator, through the whole stack: [`REPEATS`]
/// invokes of its first case, each checked against TFLM's bytes and timed layer by layer, one
/// more timed whole, then every other case once, checked. Logs each layer and the total, and
/// returns the figures.
pub fn run<H: Npu>(
    ticks: &Ticks,
    cal: &Calibration,
    npu: H,
    model: Model,
) -> Result<LayerCounts, LayerError> {
    let mut timed = TimedFallback::new(npu, ticks);
    let stamps = timed.stamp_cost(cal)?;
    let server: Server<'_, H> = NpuServer::new(timed, MemoryConfig::default())?;
    let channel: RefCellChannel<Server<'_, H>> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let mut graph: Graph<'_, _, 16, 64> = Graph::prepare(client, model.tflite)?;

    let counted = model.cases.first().ok_or(LayerError::NoCase)?;
    let mut buffer = [0u8; MAX_OUTPUT];
    let output = buffer
        .get_mut(..counted.expected.len())
        .ok_or(LayerError::OutputTooLarge(counted.expected.len()))?;
    let mut state = 1u32;
    for invoke in 0..REPEATS {
        state = next_random(state);
        cortex_m::asm::delay((state >> 24) % 40);
        channel.with(|s| s.npu_mut().begin_invoke(invoke))?;
        graph.invoke(&[counted.input], &mut [&mut *output])?;
        channel.with(|s| s.npu_mut().end_invoke())??;
        check((0, invoke), output, counted.expected)?;
    }

    // One more, whole and not counted layer by layer: what the runtime adds to the layers
    // (transfers, waits, dispatch).
    let mut result = Ok(());
    let whole = ticks.time(1, &mut || {
        result = graph.invoke(&[counted.input], &mut [&mut *output]);
        Ok::<(), Infallible>(())
    });
    result?;
    let whole = whole.map_err(|e| match e {
        TimeError::Clock(e) => e,
        TimeError::Call(never) => match never {},
    })?;
    check((0, REPEATS), output, counted.expected)?;
    for (case, c) in model.cases.iter().enumerate().skip(1) {
        let output = buffer
            .get_mut(..c.expected.len())
            .ok_or(LayerError::OutputTooLarge(c.expected.len()))?;
        graph.invoke(&[c.input], &mut [&mut *output])?;
        check((case, 0), output, c.expected)?;
    }

    let layers = channel.with(|s| {
        s.npu()
            .layers
            .iter()
            .map(|l| Layer {
                kind: l.kind,
                macs: l.macs,
                centi: cal.centi_per_call(l.ticks, REPEATS).saturating_sub(stamps),
            })
            .collect()
    })?;
    let counts = LayerCounts {
        layers,
        invoke_centi: cal.centi_per_call(u64::from(whole), 1),
    };
    log(model, &counts, stamps);
    Ok(counts)
}

/// Runs `image`, `model` compiled for the CPU ([`npu_compute::compiled`]), in `arena`: one
/// whole invoke of its first case timed, then every case checked against TFLM's bytes. Logs
/// the invoke beside the layers' `kernels` instructions (from [`run`]): what a compiled model
/// adds to the kernels, where the graph adds transfers, waits and dispatch. Returns the
/// invoke's instructions.
pub fn run_compiled(
    ticks: &Ticks,
    cal: &Calibration,
    image: &'static [u8],
    model: Model,
    arena: &mut [u8],
    kernels: u64,
) -> Result<u64, LayerError> {
    let compiled = CompiledModel::new(image).map_err(|e| LayerError::Compiled(Some(e)))?;
    let mut session = compiled
        .session(arena)
        .map_err(|e| LayerError::Compiled(Some(e)))?;
    let counted = model.cases.first().ok_or(LayerError::NoCase)?;
    let mut result = Ok(());
    let whole = ticks.time(1, &mut || {
        result = invoke(&mut session, counted.input);
        Ok::<(), Infallible>(())
    });
    result?;
    let whole = whole.map_err(|e| match e {
        TimeError::Clock(e) => e,
        TimeError::Call(never) => match never {},
    })?;
    let instructions = (cal.centi_per_call(u64::from(whole), 1) + 50) / 100;
    for (case, c) in model.cases.iter().enumerate() {
        if case > 0 {
            invoke(&mut session, c.input)?;
        }
        let got = session.output(0).ok_or(LayerError::Compiled(None))?;
        check((case, 0), got, c.expected)?;
    }
    defmt::info!(
        "{=str} compiled, on the CPU: one whole invoke {=u64} instructions, {=u64} of them outside its layers' kernels ({=u64}); image {=usize} bytes, arena {=u32} bytes; every input gives TFLM's bytes",
        model.name,
        instructions,
        instructions.saturating_sub(kernels),
        kernels,
        image.len(),
        compiled.arena_bytes()
    );
    Ok(instructions)
}

/// Writes `input` as the compiled model's input and invokes it.
fn invoke(session: &mut Session<'_, '_>, input: &[u8]) -> Result<(), LayerError> {
    session
        .input_mut(0)
        .filter(|i| i.len() == input.len())
        .ok_or(LayerError::Compiled(None))?
        .copy_from_slice(input);
    session.invoke().map_err(|e| LayerError::Compiled(Some(e)))
}

/// `Ok` when `got` (from invoke `invoke` of case `case`) is `expected`, else the first
/// difference.
fn check((case, invoke): (usize, u32), got: &[u8], expected: &[u8]) -> Result<(), LayerError> {
    let mut pairs = got.iter().zip(expected).enumerate();
    match pairs.find(|(_, (g, e))| g != e) {
        None => Ok(()),
        Some((index, (&got, &expected))) => Err(LayerError::Mismatch {
            case,
            invoke,
            index,
            got: got as i8,
            expected: expected as i8,
        }),
    }
}

/// Logs each layer, the total and the whole invoke.
fn log(model: Model, counts: &LayerCounts, stamps: u64) {
    let name = model.name;
    let total = counts.instructions();
    for (i, layer) in counts.layers.iter().enumerate() {
        defmt::info!(
            "{=str} on the CPU, layer {=usize} {}: {=u64} MACs, {} instructions, {} per MAC",
            name,
            i + 1,
            layer.kind,
            layer.macs,
            Centi(layer.centi),
            Centi(layer.centi / layer.macs.max(1))
        );
    }
    let macs: u64 = counts.layers.iter().map(|l| l.macs).sum();
    let whole = (counts.invoke_centi + 50) / 100;
    defmt::info!(
        "{=str} on the CPU: {=usize} layers, {=u64} MACs, {=u64} instructions ({} per MAC; mean of {=u32} invokes of its first input, each giving TFLM's bytes, as do its {=usize} other inputs; readings' own {} instructions subtracted per layer); one whole invoke {=u64} instructions, {=u64} of them the runtime's (transfers, waits, dispatch)",
        name,
        counts.layers.len(),
        macs,
        total,
        Centi(total * 100 / macs.max(1)),
        REPEATS,
        model.cases.len().saturating_sub(1),
        Centi(stamps),
        whole,
        whole.saturating_sub(total)
    );
}

/// The line a firmware ends with: `<name> on the CPU: N instructions`, without a level, so
/// that the decoded log's last line is exactly that.
pub fn print_total(name: &str, counts: &LayerCounts) {
    defmt::println!(
        "{=str} on the CPU: {=u64} instructions",
        name,
        counts.instructions()
    );
}
