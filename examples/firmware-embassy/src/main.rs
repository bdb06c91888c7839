//! Example firmware: the keyword-spotting model invoked with `Graph::invoke_async` under
//! embassy's executor, on an emulated Cortex-M4F (QEMU `mps2-an386`) with the software NPU.
//!
//! Run it from this folder with `cargo run --release` (the runner, `.ci/qemu-run.sh` at the
//! repository root, boots QEMU and decodes the defmt log). CI does exactly that.
//!
//! # What runs
//!
//! - The compute stack (client → [`CriticalSectionChannel`] → server → simulated NPU) lives in
//!   a `static` reached by the interrupt handlers.
//! - Task `kws`: prepares `kws_dscnn` (weights read in place from flash) and runs three
//!   inferences with `invoke_async`: job by job, then building the job plan, then replaying
//!   it; each output must equal TensorFlow Lite Micro's bytes.
//! - Task `other_work`: stands for the rest of a firmware, doing CPU work in small steps
//!   (yielding to the executor between them) while the NPU runs the model.
//!
//! It exits through semihosting with `EXIT_SUCCESS` (QEMU exit status 0) only when every
//! output matches TFLM's bytes, the CPU never slept inside the compute server during an
//! invoke (every wait was an `await`), the NPU's interrupt woke the inference, and the other
//! task ran while the inferences were in flight; `EXIT_FAILURE` (status 1) otherwise, on a
//! panic or on a hard fault.
//!
//! # What is simulated, and how the interrupt is raised
//!
//! QEMU models no NPU, and the software NPU (`npu-sim`) raises no interrupt: its clock moves
//! only when told to. This firmware plays the hardware's part with two real Cortex-M
//! interrupts:
//!
//! - **SysTick stands for the NPU's clock.** Every [`TICK_CYCLES`] CPU cycles (SysTick counts
//!   the board's 25 MHz CPU clock), its handler moves the simulated NPU's clock on by the same
//!   number of cycles, as an NPU clocked with the CPU would run meanwhile, and if a job has
//!   ended ([`SimNpu::irq_pending`]), pends [`NPU_IRQ`] in the NVIC: the NPU's interrupt
//!   line.
//! - **[`NPU_IRQ`] is the NPU's completion interrupt**, an external line of the NVIC that no
//!   device of the board drives here. Its handler is what a board's NPU driver would install:
//!   it calls [`ComputeChannel::on_interrupt`], which retires the finished jobs and wakes the
//!   tasks awaiting them; embassy's waker then pends the executor, which polls them.
//!
//! The one thing no hardware would do: the simulator computes a job's result when it retires
//! it, so the NPU's arithmetic runs on the CPU inside the interrupt handler (a real NPU has
//! written its output by the time it raises the interrupt). The NPU cycles reported are the
//! simulator's cost model's; the NPU clock advances in steps of [`TICK_CYCLES`], so an
//! inference measures up to a tick longer than the blocking `invoke`'s figure.

#![no_std]
#![no_main]

#[path = "../../firmware-common/shell.rs"]
mod shell;

use core::cell::{Cell, UnsafeCell};
use core::future::{poll_fn, Future};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use core::task::Poll;

use cortex_m::interrupt::{InterruptNumber, Mutex};
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::NVIC;
use cortex_m_rt::{entry, exception};
// The defmt global logger: frames go to semihosting stdout.
use defmt_semihosting as _;
use embassy_executor::Executor;
use shell::{exit, EXIT_FAILURE, EXIT_SUCCESS};

use npu_compute::graph::{Graph, GraphError};
use npu_compute::hal::Npu;
use npu_compute::prelude::*;
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

// ---------------------------------------------------------------------------------------------
// Memory and the stack in a static
// ---------------------------------------------------------------------------------------------

/// Bytes of the NPU arena: all of `NPU_SRAM` in `memory.x`.
const ARENA_BYTES: usize = 1024 * 1024;
/// Bytes of the host staging buffer: `npu-sim plan` says kws_dscnn needs 5,216.
const HOST_BYTES: usize = 8 * 1024;

/// A `static` whose bytes are handed out once as `&'static mut [u8]` (as in
/// `examples/firmware`): the arena's section is not initialised at reset.
struct StaticMemory<const N: usize>(UnsafeCell<MaybeUninit<AlignedMemory<N>>>);

// SAFETY: the bytes are reached only through the single `&'static mut [u8]` that
// `take_npu_arena` hands out; the static itself is never read.
unsafe impl<const N: usize> Sync for StaticMemory<N> {}

/// The NPU arena, in the NPU-reachable SRAM (NOLOAD: zeroed by `take_npu_arena`).
#[link_section = ".npu_arena"]
static NPU_ARENA: StaticMemory<ARENA_BYTES> = StaticMemory(UnsafeCell::new(MaybeUninit::uninit()));
/// Whether [`NPU_ARENA`] has been handed out.
static NPU_ARENA_TAKEN: AtomicBool = AtomicBool::new(false);

/// The NPU arena as a zeroed `&'static mut [u8]`; `None` after the first call.
fn take_npu_arena() -> Option<&'static mut [u8]> {
    if NPU_ARENA_TAKEN.swap(true, Ordering::AcqRel) {
        return None;
    }
    let base = NPU_ARENA.0.get().cast::<u8>();
    // SAFETY: the swap above lets exactly one caller through, once, so this is the only
    // reference to the arena that ever exists, and the static lives for 'static. The memory is
    // uninitialised (NOLOAD section), so it is zeroed before the slice is formed.
    unsafe {
        core::ptr::write_bytes(base, 0, ARENA_BYTES);
        Some(core::slice::from_raw_parts_mut(base, ARENA_BYTES))
    }
}

/// The server over the simulated NPU, with the default capacities.
type Server = NpuServer<SimNpu<'static>>;
/// The channel the tasks and the interrupt handlers share.
type Channel = CriticalSectionChannel<Server>;

/// The channel, once built: the interrupt handlers reach it through this.
static CHANNEL: Mutex<Cell<Option<&'static Channel>>> = Mutex::new(Cell::new(None));

fn channel() -> Option<&'static Channel> {
    cortex_m::interrupt::free(|cs| CHANNEL.borrow(cs).get())
}

// ---------------------------------------------------------------------------------------------
// The NPU's interrupt, modelled
// ---------------------------------------------------------------------------------------------

/// The NVIC line that plays the NPU's completion interrupt: one of the board's external
/// interrupts, with nothing else enabled on it in this firmware.
const NPU_IRQ: u16 = 30;
/// CPU cycles between SysTick interrupts, and NPU cycles the simulated NPU runs in each.
const TICK_CYCLES: u32 = 1_000;

/// [`NPU_IRQ`] as the NVIC API names interrupts.
#[derive(Clone, Copy)]
struct NpuIrq;

// SAFETY: `number` returns a valid external interrupt number of the Cortex-M4's NVIC (below
// the 32 lines QEMU's mps2-an386 wires), always the same.
unsafe impl InterruptNumber for NpuIrq {
    fn number(self) -> u16 {
        NPU_IRQ
    }
}

/// SysTick interrupts taken.
static TICKS: AtomicU32 = AtomicU32::new(0);
/// NPU completion interrupts taken.
static NPU_INTERRUPTS: AtomicU32 = AtomicU32::new(0);

/// The NPU runs beside the CPU: [`TICK_CYCLES`] of its clock have passed. A job that ended
/// raises its interrupt line.
#[exception]
fn SysTick() {
    TICKS.fetch_add(1, Ordering::Relaxed);
    let Some(channel) = channel() else {
        return;
    };
    let ended = channel.with(|server| {
        let npu = server.npu_mut();
        npu.advance(u64::from(TICK_CYCLES));
        npu.irq_pending()
    });
    if let Ok(true) = ended {
        NVIC::pend(NpuIrq);
    }
}

/// External interrupts: [`NPU_IRQ`] is the NPU driver's completion handler; no other is
/// enabled, so any other fails the run.
#[exception]
unsafe fn DefaultHandler(irqn: i16) {
    if irqn == NPU_IRQ as i16 {
        NPU_INTERRUPTS.fetch_add(1, Ordering::Relaxed);
        if let Some(channel) = channel() {
            // Retires the finished jobs and wakes the tasks awaiting them.
            channel.on_interrupt();
        }
    } else {
        defmt::error!("unexpected interrupt {=i16}", irqn);
        exit(EXIT_FAILURE);
    }
}

// ---------------------------------------------------------------------------------------------
// The tasks
// ---------------------------------------------------------------------------------------------

/// The keyword-spotting model, in flash, 16-byte aligned so the NPU reads its weights in place.
static KWS_MODEL: &[u8] = npu_compute::include_aligned!("../../models/kws_dscnn/model.tflite");
/// Three inputs of the model (49×10 MFCC features, int8)...
static KWS_INPUTS: [&[u8]; 3] = [
    include_bytes!("../../models/kws_dscnn/input_0.bin"),
    include_bytes!("../../models/kws_dscnn/input_1.bin"),
    include_bytes!("../../models/kws_dscnn/input_2.bin"),
];
/// ... and what TensorFlow Lite Micro outputs for each (12 class scores, int8).
static KWS_EXPECTED: [&[u8; 12]; 3] = [
    include_bytes!("../../models/kws_dscnn/expected_tflm_0.bin"),
    include_bytes!("../../models/kws_dscnn/expected_tflm_1.bin"),
    include_bytes!("../../models/kws_dscnn/expected_tflm_2.bin"),
];

/// Set once the inferences are over: `other_work` stops.
static KWS_DONE: AtomicBool = AtomicBool::new(false);
/// Whether an inference is in flight (between its first poll and its completion).
static KWS_IN_FLIGHT: AtomicBool = AtomicBool::new(false);
/// Steps of `other_work` taken while an inference was in flight.
static STEPS_DURING_INFERENCE: AtomicU32 = AtomicU32::new(0);

/// Why the run failed.
#[derive(defmt::Format)]
enum Failure {
    /// The arena, the host buffer, the peripherals or the executor were already taken.
    Taken,
    /// The simulator refused its configuration.
    Simulator,
    /// The compute stack returned an error.
    Stack(npu_compute::Error),
    /// The model could not be prepared or run.
    Graph(GraphError),
    /// Inference `k`'s scores differ from TFLM's in this many places.
    Mismatch { inference: usize, wrong: usize },
    /// The CPU slept inside the server during an inference (a blocking wait).
    BlockingWait { inference: usize, waits: u32 },
    /// Inference `k` completed without an NPU interrupt.
    NoInterrupt { inference: usize },
    /// The other task never ran while an inference was in flight.
    NoOtherWork,
}

impl From<GraphError> for Failure {
    fn from(e: GraphError) -> Self {
        Failure::Graph(e)
    }
}

impl From<npu_compute::Error> for Failure {
    fn from(e: npu_compute::Error) -> Self {
        Failure::Stack(e)
    }
}

/// Runs the three inferences, then exits.
#[embassy_executor::task]
async fn kws(channel: &'static Channel) {
    let status = match classify(channel).await {
        Ok(()) => {
            defmt::info!("PASS: invoke_async under embassy gives TFLM's bytes, woken by the NPU interrupt, while another task ran");
            EXIT_SUCCESS
        }
        Err(failure) => {
            defmt::error!("FAIL: {}", failure);
            EXIT_FAILURE
        }
    };
    KWS_DONE.store(true, Ordering::Relaxed);
    exit(status)
}

async fn classify(channel: &'static Channel) -> Result<(), Failure> {
    let client = ComputeClient::new(channel);
    let now = || channel.with(|s| s.npu().now());
    let mut kws: Graph<'static, Channel, 16, 64> = Graph::prepare(client, KWS_MODEL)?;
    defmt::info!(
        "kws_dscnn prepared; weights in flash: {=bool}",
        kws.weights_in_flash()
    );
    for (k, (input, expected)) in KWS_INPUTS.iter().zip(KWS_EXPECTED).enumerate() {
        let (start, waits) = (now()?, client.stats()?.waits);
        let (ticks, interrupts) = (
            TICKS.load(Ordering::Relaxed),
            NPU_INTERRUPTS.load(Ordering::Relaxed),
        );
        let steps = STEPS_DURING_INFERENCE.load(Ordering::Relaxed);
        let mut scores = [0u8; 12];
        KWS_IN_FLIGHT.store(true, Ordering::Relaxed);
        let result = kws.invoke_async(&[input], &mut [&mut scores]).await;
        KWS_IN_FLIGHT.store(false, Ordering::Relaxed);
        result?;
        let cycles = now()? - start;
        let interrupts = NPU_INTERRUPTS.load(Ordering::Relaxed) - interrupts;
        let path = if kws.job_plan().is_some() {
            "job plan"
        } else {
            "job by job"
        };
        defmt::info!(
            "inference {=usize} ({=str}): scores {=[u8]:?}; {=u64} NPU cycles, {=u32} SysTick ticks, {=u32} NPU interrupts, {=u32} steps of the other task",
            k,
            path,
            scores,
            cycles,
            TICKS.load(Ordering::Relaxed) - ticks,
            interrupts,
            STEPS_DURING_INFERENCE.load(Ordering::Relaxed) - steps
        );
        let wrong = scores.iter().zip(expected).filter(|(g, w)| g != w).count();
        if wrong != 0 {
            return Err(Failure::Mismatch {
                inference: k,
                wrong,
            });
        }
        let waits = client.stats()?.waits - waits;
        if waits != 0 {
            return Err(Failure::BlockingWait {
                inference: k,
                waits,
            });
        }
        if interrupts == 0 {
            return Err(Failure::NoInterrupt { inference: k });
        }
    }
    if STEPS_DURING_INFERENCE.load(Ordering::Relaxed) == 0 {
        return Err(Failure::NoOtherWork);
    }
    defmt::info!("server: {}", client.stats()?);
    Ok(())
}

/// The rest of a firmware: CPU work in small steps, yielding to the executor between them.
#[embassy_executor::task]
async fn other_work() {
    let mut checksum = 0u32;
    while !KWS_DONE.load(Ordering::Relaxed) {
        // A step of work: whatever a firmware does besides inference.
        for i in 0..64u32 {
            checksum = checksum.rotate_left(5) ^ i;
        }
        if KWS_IN_FLIGHT.load(Ordering::Relaxed) {
            STEPS_DURING_INFERENCE.fetch_add(1, Ordering::Relaxed);
        }
        yield_now().await;
    }
    defmt::debug!("other work checksum {=u32:#x}", checksum);
}

/// Lets the executor run the other tasks once, then continues.
fn yield_now() -> impl Future<Output = ()> {
    let mut yielded = false;
    poll_fn(move |cx| {
        if core::mem::replace(&mut yielded, true) {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Entry point, exit and fault handling
// ---------------------------------------------------------------------------------------------

/// The stack over the arena and the host buffer, in a static the interrupt handlers reach;
/// SysTick and the NPU's line enabled.
fn setup() -> Result<&'static Channel, Failure> {
    let device = take_npu_arena().ok_or(Failure::Taken)?;
    let host = cortex_m::singleton!(: AlignedMemory<HOST_BYTES> = AlignedMemory::new())
        .ok_or(Failure::Taken)?
        .as_mut_slice();
    let npu: SimNpu<'static> = SimNpu::new(device, host, SimConfig::default()).map_err(|e| {
        defmt::error!("SimNpu::new: {}", e);
        Failure::Simulator
    })?;
    defmt::info!("NPU: {}", npu.capabilities());
    let server: Server = NpuServer::new(npu, MemoryConfig::default())?;
    let channel: &'static Channel =
        cortex_m::singleton!(: Channel = CriticalSectionChannel::new(server))
            .ok_or(Failure::Taken)?;
    cortex_m::interrupt::free(|cs| CHANNEL.borrow(cs).set(Some(channel)));

    let mut core = cortex_m::Peripherals::take().ok_or(Failure::Taken)?;
    core.SYST.set_clock_source(SystClkSource::Core);
    core.SYST.set_reload(TICK_CYCLES - 1);
    core.SYST.clear_current();
    core.SYST.enable_interrupt();
    core.SYST.enable_counter();
    // SAFETY: unmasking cannot break a critical section: the single-core `critical-section`
    // implementation masks with PRIMASK, not per line, and the handler reaches the channel
    // only through its critical sections.
    unsafe { NVIC::unmask(NpuIrq) };
    Ok(channel)
}

#[entry]
fn main() -> ! {
    defmt::info!("npu-firmware-embassy on mps2-an386");
    let channel = match setup() {
        Ok(channel) => channel,
        Err(failure) => {
            defmt::error!("FAIL: {}", failure);
            exit(EXIT_FAILURE)
        }
    };
    let Some(executor) = cortex_m::singleton!(: Executor = Executor::new()) else {
        defmt::error!("FAIL: {}", Failure::Taken);
        exit(EXIT_FAILURE)
    };
    executor.run(|spawner| {
        // A task's token is refused only when its one slot is taken (it is spawned once).
        match kws(channel) {
            Ok(token) => spawner.spawn(token),
            Err(_) => exit(EXIT_FAILURE),
        }
        match other_work() {
            Ok(token) => spawner.spawn(token),
            Err(_) => exit(EXIT_FAILURE),
        }
    })
}
