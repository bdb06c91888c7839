//! Interrupts served during an inference: kws_dscnn invoked over a
//! [`CriticalSectionChannel`] while a board timer interrupts every [`PERIOD_TICKS`] ticks.
//!
//! # Why
//!
//! A channel shared with interrupt handlers runs every call with interrupts masked. If it
//! waited for the NPU inside that critical section, an inference (about 90 000 NPU cycles for
//! kws_dscnn) would leave a board's timers, UART and radio unserved. The channel waits between
//! critical sections instead (see `npu_compute::channel`); this module shows it on QEMU: the
//! timer's interrupt is served during the invoke, and the longest stretch with interrupts
//! masked is measured, in instructions.
//!
//! # How
//!
//! - The timer is the board's CMSDK APB TIMER0 (interrupt 8 on `mps2-an386`), reloaded every
//!   [`PERIOD_TICKS`] ticks of its 25 MHz clock; its handler counts the interrupts.
//! - The firmware's critical-section implementation is this module's ([`MeasuredSection`]):
//!   the single-core one (`PRIMASK`), which also reads SysTick (free-running, one tick per 40
//!   instructions under `-icount shift=0`, see [`dispatch_cost`](crate::dispatch_cost)) when
//!   it masks interrupts and when it unmasks them, and keeps the longest interval between.
//! - The software NPU does on this CPU what a hardware NPU does on its own: its `submit` runs
//!   a cycle model, and each job's kernel runs when the job retires, inside the HAL call that
//!   retires it (a poll). A hardware driver's calls cost a few register accesses instead (the
//!   null NPU's `submit`, a model of one, costs about 110 instructions: see `dispatch`). The
//!   HAL is wrapped ([`Measured`]) so that the time spent in the software NPU is timed too,
//!   and each masked interval is reported twice: as measured, and without the software NPU's
//!   time (the runtime's own: client, channel, server). The bound ([`OWN_BOUND`]) is on the
//!   second. The first is dominated by one job's kernel (kws_dscnn's first convolution is
//!   about 15 million instructions on this CPU), during which timer interrupts are held back
//!   (and those of all but the last period lost): it is checked only to be under half the
//!   invoke, which a wait inside one critical section would exceed.
//! - The wrapper also counts the waits in each critical section: a blocking call through the
//!   channel waits at most once per critical section (its last act, `WFI` on hardware).
//!
//! Three invokes are measured: the first (job by job), the second (which builds the job plan
//! and runs it) and the third (from the job plan). Then, for comparison, a first invoke
//! through [`WaitingInside`]: the same channel waiting as it did before, inside one critical
//! section; the run fails unless the measurement sees that (one masked interval of half the
//! invoke or more, several waits in it), so a broken instrument cannot pass. Every invoke
//! must give TensorFlow Lite Micro's bytes.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

use cortex_m::interrupt::InterruptNumber;
use cortex_m::peripheral::{NVIC, SYST};
use cortex_m::register::primask;

use npu_compute::channel::{ComputeChannel, CriticalSectionChannel};
use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, GraphError};
use npu_compute::hal::{
    Capabilities, Cycles, Estimate, ExecutionUnit, Fence, HalError, Job, Npu, Variant,
};
use npu_compute::handle::HandleId;
use npu_compute::memory::MemoryConfig;
use npu_compute::ops::Op;
use npu_compute::server::{ComputeServer, NpuServer};
use npu_compute::Error;
use npu_sim::{SimConfig, SimNpu};

use crate::dispatch_cost::Calibration;

/// Timer ticks between two interrupts (the timer's reload value plus one): 10 000
/// instructions at 40 per tick, several times per layer of the model.
pub const PERIOD_TICKS: u32 = 250;
/// The longest interval, in instructions, the runtime may keep interrupts masked during an
/// invoke, without the time spent in the software NPU. Measured: see the report of the run;
/// the largest is one channel call of the invoke (the job plan's run submits every job in
/// one).
pub const OWN_BOUND: u64 = 20_000;
/// SysTick's range (it counts down from this, see [`dispatch_cost`](crate::dispatch_cost)).
const SYST_MASK: u32 = 0x00FF_FFFF;
/// Timer interrupts awaited to measure the timer's period against SysTick.
const PERIOD_SAMPLES: u32 = 16;

/// The board's TIMER0 (CMSDK APB timer) on `mps2-an386`.
const TIMER0: usize = 0x4000_0000;
/// Its registers' offsets: control, current value, reload value, interrupt clear.
const CTRL: usize = 0x0;
const VALUE: usize = 0x4;
const RELOAD: usize = 0x8;
const INTCLEAR: usize = 0xC;
/// `CTRL` bits: count, and raise the interrupt at zero.
const CTRL_ENABLE: u32 = 1;
const CTRL_IRQ: u32 = 1 << 3;

/// TIMER0's interrupt number on `mps2-an386`.
const TIMER0_IRQ: u16 = 8;

/// [`TIMER0_IRQ`] for the NVIC.
#[derive(Clone, Copy)]
struct Timer0Irq;

// SAFETY: TIMER0_IRQ is TIMER0's interrupt on mps2-an386, a valid device interrupt number.
unsafe impl InterruptNumber for Timer0Irq {
    fn number(self) -> u16 {
        TIMER0_IRQ
    }
}

fn timer_write(offset: usize, value: u32) {
    // SAFETY: TIMER0's registers are at this address on mps2-an386 (device memory, always
    // mapped); only this module touches them, and a write has no effect beyond the timer.
    unsafe { core::ptr::write_volatile((TIMER0 + offset) as *mut u32, value) }
}

fn systick() -> u32 {
    SYST::get_current()
}

/// SysTick ticks from `start` to `end` (it counts down, and wraps within its 24 bits).
fn since(start: u32, end: u32) -> u32 {
    start.wrapping_sub(end) & SYST_MASK
}

// ---------------------------------------------------------------------------------------------
// The measurements' state: written with interrupts masked (critical sections, the timer's
// handler), read between invokes. Atomics, so that no access needs `unsafe`.
// ---------------------------------------------------------------------------------------------

/// Whether masked intervals are being recorded.
static RECORDING: AtomicBool = AtomicBool::new(false);
/// SysTick when the current outermost critical section began.
static SECTION_START: AtomicU32 = AtomicU32::new(0);
/// SysTick ticks spent in the software NPU inside the current critical section.
static SECTION_SIM: AtomicU32 = AtomicU32::new(0);
/// Waits inside the current critical section.
static SECTION_WAITS: AtomicU32 = AtomicU32::new(0);
/// The longest masked interval recorded, in SysTick ticks: as measured, and without the time
/// spent in the software NPU.
static LONGEST: AtomicU32 = AtomicU32::new(0);
static LONGEST_OWN: AtomicU32 = AtomicU32::new(0);
/// The most waits in one critical section.
static MOST_WAITS: AtomicU32 = AtomicU32::new(0);
/// Critical sections recorded, and SysTick ticks spent in the software NPU in all of them.
static SECTIONS: AtomicU32 = AtomicU32::new(0);
static SIM_TOTAL: AtomicU32 = AtomicU32::new(0);
/// Timer interrupts served.
static TIMER_TICKS: AtomicU32 = AtomicU32::new(0);

fn raise(max: &AtomicU32, value: u32) {
    if value > max.load(Relaxed) {
        max.store(value, Relaxed);
    }
}

fn add(total: &AtomicU32, value: u32) {
    total.store(total.load(Relaxed).saturating_add(value), Relaxed);
}

/// The firmware's critical sections: `PRIMASK` on one core, as `cortex-m`'s
/// `critical-section-single-core` does, timed from the masking to the unmasking.
struct MeasuredSection;
critical_section::set_impl!(MeasuredSection);

// SAFETY: one core; setting PRIMASK masks every interrupt (all but NMI and HardFault, which
// touch nothing a critical section guards), so nothing else runs until it is restored.
// Nested sections restore the state they found, so only the outermost one unmasks.
unsafe impl critical_section::Impl for MeasuredSection {
    unsafe fn acquire() -> u32 {
        let state = primask::read_raw();
        cortex_m::interrupt::disable();
        if state & 1 == 0 {
            // Interrupts were enabled: the outermost section begins.
            SECTION_START.store(systick(), Relaxed);
            SECTION_SIM.store(0, Relaxed);
            SECTION_WAITS.store(0, Relaxed);
        }
        state
    }

    unsafe fn release(state: u32) {
        if state & 1 == 0 && RECORDING.load(Relaxed) {
            let masked = since(SECTION_START.load(Relaxed), systick());
            let sim = SECTION_SIM.load(Relaxed);
            raise(&LONGEST, masked);
            raise(&LONGEST_OWN, masked.saturating_sub(sim));
            raise(&MOST_WAITS, SECTION_WAITS.load(Relaxed));
            add(&SECTIONS, 1);
            add(&SIM_TOTAL, sim);
        }
        // SAFETY: restores the PRIMASK `acquire` found (see the impl's SAFETY).
        unsafe { primask::write_raw(state) };
    }
}

/// The timer's interrupt, from the firmware's `DefaultHandler`; `false` for any other.
pub fn on_interrupt(irqn: i16) -> bool {
    if irqn != TIMER0_IRQ as i16 {
        return false;
    }
    timer_write(INTCLEAR, 1);
    add(&TIMER_TICKS, 1);
    true
}

/// The software NPU, with the time spent in it timed into the current critical section's
/// record, and its waits counted.
pub struct Measured<'a>(SimNpu<'a>);

/// Runs `f`, adding its SysTick ticks to the current critical section's time in the software
/// NPU.
fn in_simulator<R>(f: impl FnOnce() -> R) -> R {
    let start = systick();
    let r = f();
    add(&SECTION_SIM, since(start, systick()));
    r
}

impl Npu for Measured<'_> {
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError> {
        in_simulator(|| self.0.submit(job))
    }
    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError> {
        in_simulator(|| self.0.poll(fence))
    }
    fn wait_for_event(&mut self) {
        add(&SECTION_WAITS, 1);
        in_simulator(|| self.0.wait_for_event())
    }
    fn on_interrupt(&mut self) {
        in_simulator(|| self.0.on_interrupt())
    }
    fn now(&self) -> Cycles {
        self.0.now()
    }
    fn host_memory(&mut self) -> &mut [u8] {
        self.0.host_memory()
    }
    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, HalError> {
        self.0.map_flash(bytes)
    }
    fn unmap_flash(&mut self, segment: u8) {
        self.0.unmap_flash(segment)
    }
    fn supports_variant(&self, op: &Op, variant: Variant) -> bool {
        self.0.supports_variant(op, variant)
    }
    fn tuning_fingerprint(&self) -> u64 {
        self.0.tuning_fingerprint()
    }
    fn host_compute(&mut self, op: &Op) {
        self.0.host_compute(op)
    }
    fn execution_unit(&self, unit: u8) -> ExecutionUnit {
        self.0.execution_unit(unit)
    }
    fn estimate(&mut self, job: &Job<'_>) -> Option<Estimate> {
        self.0.estimate(job)
    }
    fn estimate_host_compute(&self, op: &Op) -> Option<Cycles> {
        self.0.estimate_host_compute(op)
    }
    fn clock_counts_cpu(&self) -> bool {
        self.0.clock_counts_cpu()
    }
    fn reset(&mut self) -> Result<(), HalError> {
        self.0.reset()
    }
}

/// The stack under test.
type Server<'a> = NpuServer<Measured<'a>>;
type Channel<'a> = CriticalSectionChannel<Server<'a>>;

/// Why the run failed.
#[derive(defmt::Format)]
pub enum IrqError {
    /// The compute stack returned an error.
    Stack(Error),
    /// The simulator refused its configuration.
    Simulator,
    /// The model could not be prepared or run.
    Graph(GraphError),
    /// An invoke's scores differ from TFLM's.
    Scores([u8; 12]),
    /// The timer's interrupt did not come (or SysTick did not move) while waiting for it.
    NoTimer,
    /// No timer interrupt was served during an invoke.
    NoTickServed,
    /// The runtime kept interrupts masked longer than [`OWN_BOUND`] (instructions).
    MaskedTooLong(u64),
    /// One masked interval took half the invoke or more (instructions): a wait inside a
    /// critical section.
    MaskedForTheInvoke(u64, u64),
    /// A critical section waited more than once: it waited inside.
    WaitedInside(u32),
    /// An invoke ran longer than half of SysTick's range, which cannot be timed.
    TooLong(u32),
    /// Waiting inside one critical section was not seen (its longest masked interval, in
    /// instructions, and its most waits in one critical section): the measurement is broken.
    NotSeen(u64, u32),
}

impl From<Error> for IrqError {
    fn from(e: Error) -> Self {
        IrqError::Stack(e)
    }
}

impl From<GraphError> for IrqError {
    fn from(e: GraphError) -> Self {
        IrqError::Graph(e)
    }
}

/// One invoke's figures, in instructions where not said otherwise.
#[derive(Clone, Copy, defmt::Format)]
pub struct InvokeIrq {
    /// The invoke, end to end.
    pub instructions: u64,
    /// Of which in the software NPU's `submit`, `poll` and `wait_for_event` (its cycle model,
    /// and the kernels it runs as jobs retire).
    pub simulator: u64,
    /// Timer interrupts served during it.
    pub timer_ticks: u32,
    /// Timer periods it lasted.
    pub periods: u32,
    /// The longest interval with interrupts masked, as measured.
    pub longest_masked: u64,
    /// The same without the time spent in the software NPU: the runtime's own.
    pub longest_masked_own: u64,
    /// Critical sections during the invoke.
    pub sections: u32,
    /// The most waits in one of them.
    pub most_waits: u32,
}

/// Runs the measurement over the software NPU on `device` and `host`: kws_dscnn (`model`,
/// `input`, and TFLM's `expected` scores) invoked three times over a
/// [`CriticalSectionChannel`] with TIMER0 interrupting, then once through [`WaitingInside`]
/// for comparison; logs and checks them (see the module docs). Returns the three invokes'
/// figures and the comparison's.
pub fn run(
    cal: &Calibration,
    device: &mut [u8],
    host: &mut [u8],
    (model, input, expected): (&'static [u8], &[u8], &[u8; 12]),
) -> Result<([InvokeIrq; 3], InvokeIrq), IrqError> {
    let sim = SimNpu::new(device, host, SimConfig::default()).map_err(|e| {
        defmt::error!("SimNpu::new: {}", e);
        IrqError::Simulator
    })?;
    let server: Server<'_> = NpuServer::new(Measured(sim), MemoryConfig::default())?;
    let channel: Channel<'_> = CriticalSectionChannel::new(server);
    let io = (input, expected);

    let period = start_timer(cal)?;
    let all = || -> Result<([InvokeIrq; 3], InvokeIrq), IrqError> {
        let mut graph: Graph<'_, _, 16, 64> = Graph::prepare(ComputeClient::new(&channel), model)?;
        let figures = [
            invoke(&mut graph, cal, period, io)?,
            invoke(&mut graph, cal, period, io)?,
            invoke(&mut graph, cal, period, io)?,
        ];
        drop(graph);
        let inside = WaitingInside(&channel);
        let mut graph: Graph<'_, _, 16, 64> = Graph::prepare(ComputeClient::new(&inside), model)?;
        Ok((figures, invoke(&mut graph, cal, period, io)?))
    };
    let result = all();
    // Stopped whatever happened: the runs after this one count instructions undisturbed.
    stop_timer();
    let (figures, before) = result?;
    let waits = channel.with(|s| s.stats().waits)?;
    let names = [
        "job by job",
        "building the job plan",
        "from the job plan",
        "job by job, waiting inside one critical section as the channel did before",
    ];
    for (f, name) in figures.iter().chain([&before]).zip(names) {
        defmt::info!(
            "irq: kws_dscnn invoke over a CriticalSectionChannel, {=str}: {=u64} instructions, of which {=u64} in the software NPU; timer every {=u64} instructions served {=u32} times in {=u32} periods; {=u32} critical sections, at most {=u32} waits in one; longest masked {=u64} instructions, {=u64} without the software NPU's (bound {=u64})",
            name,
            f.instructions,
            f.simulator,
            period,
            f.timer_ticks,
            f.periods,
            f.sections,
            f.most_waits,
            f.longest_masked,
            f.longest_masked_own,
            OWN_BOUND
        );
    }
    defmt::info!("irq: the server waited {=u32} times", waits);
    for f in &figures {
        check(f)?;
    }
    // The measurement sees a long wait inside a critical section when there is one.
    if before.longest_masked.saturating_mul(2) < before.instructions || before.most_waits < 2 {
        return Err(IrqError::NotSeen(before.longest_masked, before.most_waits));
    }
    Ok((figures, before))
}

/// The channel as it was before it waited outside its critical sections: the same channel,
/// with [`ComputeChannel::WAITS_BETWEEN_STEPS`]'s default, so that the client runs a whole
/// wait in one call (one critical section).
struct WaitingInside<'c, 'a>(&'c Channel<'a>);

impl<'a> ComputeChannel for WaitingInside<'_, 'a> {
    type Server = Server<'a>;

    fn with<R>(&self, f: impl FnOnce(&mut Server<'a>) -> R) -> Result<R, Error> {
        self.0.with(f)
    }

    fn retain(&self, id: HandleId) {
        self.0.retain(id)
    }

    fn release(&self, id: HandleId) {
        self.0.release(id)
    }
}

/// Fails on the conditions of the module docs.
fn check(f: &InvokeIrq) -> Result<(), IrqError> {
    if f.timer_ticks == 0 {
        return Err(IrqError::NoTickServed);
    }
    if f.most_waits > 1 {
        return Err(IrqError::WaitedInside(f.most_waits));
    }
    if f.longest_masked_own > OWN_BOUND {
        return Err(IrqError::MaskedTooLong(f.longest_masked_own));
    }
    if f.longest_masked.saturating_mul(2) >= f.instructions {
        return Err(IrqError::MaskedForTheInvoke(
            f.longest_masked,
            f.instructions,
        ));
    }
    Ok(())
}

/// `ticks` SysTick ticks in instructions.
fn instructions(cal: &Calibration, ticks: u32) -> u64 {
    u64::from(ticks) * u64::from(cal.instructions) / u64::from(cal.ticks.max(1))
}

/// One invoke of `input`, timed, with the records restarted before it; its scores must be
/// `expected`.
fn invoke<C: ComputeChannel>(
    graph: &mut Graph<'_, C, 16, 64>,
    cal: &Calibration,
    period: u64,
    (input, expected): (&[u8], &[u8; 12]),
) -> Result<InvokeIrq, IrqError> {
    for record in [&LONGEST, &LONGEST_OWN, &MOST_WAITS, &SECTIONS, &SIM_TOTAL] {
        record.store(0, Relaxed);
    }
    let mut scores = [0u8; 12];
    let ticks_before = TIMER_TICKS.load(Relaxed);
    RECORDING.store(true, Relaxed);
    let start = systick();
    let result = graph.invoke(&[input], &mut [&mut scores]);
    let elapsed = since(start, systick());
    RECORDING.store(false, Relaxed);
    let timer_ticks = TIMER_TICKS.load(Relaxed).wrapping_sub(ticks_before);
    result?;
    if &scores != expected {
        return Err(IrqError::Scores(scores));
    }
    if elapsed > SYST_MASK / 2 {
        return Err(IrqError::TooLong(elapsed));
    }
    let total = instructions(cal, elapsed);
    Ok(InvokeIrq {
        instructions: total,
        simulator: instructions(cal, SIM_TOTAL.load(Relaxed)),
        timer_ticks,
        periods: (total / period.max(1)) as u32,
        longest_masked: instructions(cal, LONGEST.load(Relaxed)),
        longest_masked_own: instructions(cal, LONGEST_OWN.load(Relaxed)),
        sections: SECTIONS.load(Relaxed),
        most_waits: MOST_WAITS.load(Relaxed),
    })
}

/// Starts TIMER0 interrupting every [`PERIOD_TICKS`] of its clock; returns its period in
/// instructions, measured against SysTick over [`PERIOD_SAMPLES`] interrupts.
fn start_timer(cal: &Calibration) -> Result<u64, IrqError> {
    timer_write(CTRL, 0);
    timer_write(INTCLEAR, 1);
    timer_write(RELOAD, PERIOD_TICKS - 1);
    timer_write(VALUE, PERIOD_TICKS - 1);
    timer_write(CTRL, CTRL_ENABLE | CTRL_IRQ);
    // SAFETY: the handler (`on_interrupt`) touches only atomics and the timer; unmasking it
    // breaks no critical section (none is held here).
    unsafe { NVIC::unmask(Timer0Irq) };
    // Wait for one interrupt, then time the next PERIOD_SAMPLES.
    let first = TIMER_TICKS.load(Relaxed).wrapping_add(1);
    let deadline = |from: u32| {
        let start = systick();
        while TIMER_TICKS.load(Relaxed).wrapping_sub(from) > u32::MAX / 2 {
            if since(start, systick()) > PERIOD_TICKS * (PERIOD_SAMPLES + 2) * 4 {
                return Err(IrqError::NoTimer);
            }
        }
        Ok(())
    };
    deadline(first)?;
    let start = systick();
    deadline(first.wrapping_add(PERIOD_SAMPLES))?;
    let period = instructions(cal, since(start, systick())) / u64::from(PERIOD_SAMPLES);
    if period == 0 {
        return Err(IrqError::NoTimer);
    }
    Ok(period)
}

/// Stops TIMER0 and masks its interrupt.
fn stop_timer() {
    NVIC::mask(Timer0Irq);
    timer_write(CTRL, 0);
    timer_write(INTCLEAR, 1);
}
