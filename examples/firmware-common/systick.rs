//! SysTick as an instruction counter on QEMU's Cortex-M boards.
//!
//! Shared by the example firmwares (`examples/firmware` on `mps2-an386`, `examples/firmware-m55`
//! on `mps3-an547`), each of which includes this file as its `systick` module:
//!
//! ```ignore
//! #[path = "../../firmware-common/systick.rs"]
//! mod systick;
//! ```
//!
//! # Why SysTick counts instructions
//!
//! QEMU does not emulate the DWT cycle counter, but with `-icount shift=0` (which
//! `.ci/qemu-run.sh` passes) its virtual clock advances by exactly one nanosecond per guest
//! instruction, and SysTick (processor clock source) counts down on that clock. So SysTick
//! ticks are proportional to instructions executed, whatever each instruction would cost on
//! silicon. The ratio is the board's: 40 instructions per tick on `mps2-an386` (25 MHz), 31.25 on
//! `mps3-an547` (32 MHz). It is not assumed: [`calibrate`] times [`cortex_m::asm::delay`] (a
//! `subs`/`bne` loop: two instructions per iteration) at two lengths and takes the slope, which
//! cancels the fixed cost of the call and of reading the counter (measured on `mps2-an386`:
//! 2 000 000 instructions in 50 000 ticks; on `mps3-an547`: in 64 000). It also times one length
//! twice: without `-icount` the counter follows wall-clock time and the two differ, which fails
//! the run rather than reporting noise. (A QEMU `-singlestep -d exec` trace of a timed loop
//! counted the same instructions, to the tick.)
//!
//! A figure is exact to one tick either way; to get below that, a measurement times a call many
//! times (starting at varied phases of a tick) and divides.

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;

/// SysTick's reload value: its whole 24-bit range.
pub const RELOAD: u32 = 0x00FF_FFFF;
/// Iterations of the two calibration delays; their difference is 2 × 1 000 000 instructions.
const CALIBRATION_SHORT: u32 = 100_000;
/// See [`CALIBRATION_SHORT`].
const CALIBRATION_LONG: u32 = 1_100_000;

/// Why SysTick could not count.
#[derive(Clone, Copy, defmt::Format)]
pub enum ClockError {
    /// SysTick does not count instructions deterministically (QEMU without `-icount`?):
    /// the same delay took these two tick counts.
    NotDeterministic(u32, u32),
    /// The calibration delay did not advance SysTick.
    NoTicks,
    /// A timed stretch ran longer than half of SysTick's range (these ticks at least), so
    /// wraps cannot be told apart.
    TooLong(u32),
}

/// What [`Ticks::time`] stopped on: the timed call's own error, or the clock's.
pub enum TimeError<E> {
    /// The call returned this error (the loop stopped there).
    Call(E),
    /// The loop ran too long to be timed.
    Clock(ClockError),
}

/// SysTick as a free-running down counter of (a fixed multiple of) instructions.
pub struct Ticks {
    /// Owned so that nothing else reconfigures it.
    _syst: SYST,
}

impl Ticks {
    /// Starts SysTick on the processor clock over its full range, without its interrupt.
    pub fn new(mut syst: SYST) -> Self {
        syst.disable_counter();
        syst.disable_interrupt();
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(RELOAD);
        syst.clear_current();
        syst.enable_counter();
        Ticks { _syst: syst }
    }

    /// The counter now: a reading to pass to [`Ticks::between`]. One load from SysTick.
    #[inline(always)]
    pub fn now(&self) -> u32 {
        SYST::get_current()
    }

    /// Ticks from reading `start` to reading `end` of [`Ticks::now`]. The counter counts down
    /// and wraps from 0 to [`RELOAD`]: one wrap is undone by the mask, and a stretch longer than
    /// half the range is refused so that a second wrap cannot pass unnoticed.
    pub fn between(start: u32, end: u32) -> Result<u32, ClockError> {
        let ticks = start.wrapping_sub(end) & RELOAD;
        if ticks > RELOAD / 2 {
            return Err(ClockError::TooLong(ticks));
        }
        Ok(ticks)
    }

    /// Ticks elapsed while `f` runs `n` times; stops at the first error.
    #[inline(never)]
    pub fn time<E>(
        &self,
        n: u32,
        f: &mut dyn FnMut() -> Result<(), E>,
    ) -> Result<u32, TimeError<E>> {
        let start = self.now();
        for _ in 0..n {
            f().map_err(TimeError::Call)?;
        }
        Self::between(start, self.now()).map_err(TimeError::Clock)
    }
}

/// Instructions per SysTick tick, as a fraction, measured.
#[derive(Clone, Copy, defmt::Format)]
pub struct Calibration {
    /// Instructions the long delay runs beyond the short one.
    pub instructions: u32,
    /// Ticks the long delay takes beyond the short one.
    pub ticks: u32,
    /// Ticks of the short delay.
    pub short_ticks: u32,
    /// Ticks of the long delay, first and second time.
    pub long_ticks: (u32, u32),
}

impl Calibration {
    /// `ticks` ticks in hundredths of an instruction, per call of `calls`.
    pub fn centi_per_call(&self, ticks: u64, calls: u32) -> u64 {
        ticks * u64::from(self.instructions) * 100
            / (u64::from(self.ticks).max(1) * u64::from(calls.max(1)))
    }
}

/// Measures instructions per tick: `delay(k)` runs `2 (k + 1)` instructions in its loop plus a
/// fixed few around it, so two lengths differ by exactly `2 Δk` instructions.
pub fn calibrate(t: &Ticks) -> Result<Calibration, ClockError> {
    let delay = |k: u32| {
        let start = t.now();
        cortex_m::asm::delay(k);
        Ticks::between(start, t.now())
    };
    let short_ticks = delay(CALIBRATION_SHORT)?;
    let long = delay(CALIBRATION_LONG)?;
    let again = delay(CALIBRATION_LONG)?;
    // One tick of rounding either way: the two runs start at a different phase of a tick.
    if long.abs_diff(again) > 1 {
        return Err(ClockError::NotDeterministic(long, again));
    }
    let ticks = long.checked_sub(short_ticks).filter(|&t| t > 0);
    Ok(Calibration {
        instructions: 2 * (CALIBRATION_LONG - CALIBRATION_SHORT),
        ticks: ticks.ok_or(ClockError::NoTicks)?,
        short_ticks,
        long_ticks: (long, again),
    })
}

/// Hundredths as `integer.fraction` for the log.
pub struct Centi(pub u64);

impl defmt::Format for Centi {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "{=u64}.{=u64:02}", self.0 / 100, self.0 % 100);
    }
}

/// Logs the calibration.
pub fn log_calibration(cal: &Calibration) {
    defmt::info!(
        "SysTick calibration: delay({=u32}) {=u32} ticks, delay({=u32}) {=u32} and {=u32} ticks: {=u32} instructions in {=u32} ticks = {} instructions per tick",
        CALIBRATION_SHORT,
        cal.short_ticks,
        CALIBRATION_LONG,
        cal.long_ticks.0,
        cal.long_ticks.1,
        cal.instructions,
        cal.ticks,
        Centi(u64::from(cal.instructions) * 100 / u64::from(cal.ticks))
    );
}
