//! How a test firmware's run ends under QEMU, the same for every firmware that logs with
//! `defmt`: through semihosting, with `EXIT_SUCCESS` (QEMU's status 0) or `EXIT_FAILURE`
//! (status 1), and a panic or a hard fault ends it at once as a failure (logged) instead of
//! hanging until the runner's timeout. Included by each firmware with `#[path]`.

use core::sync::atomic::{AtomicBool, Ordering};

use cortex_m_rt::{exception, ExceptionFrame};
use cortex_m_semihosting::debug::{self, ExitStatus};
pub use cortex_m_semihosting::debug::{EXIT_FAILURE, EXIT_SUCCESS};

/// Ends the program: QEMU exits with status 0 for `EXIT_SUCCESS`, 1 for `EXIT_FAILURE`.
pub fn exit(status: ExitStatus) -> ! {
    debug::exit(status);
    // Only reached when no semihosting host handled the exit.
    loop {
        cortex_m::asm::wfi();
    }
}

/// Panics log their message and fail the run.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    static PANICKING: AtomicBool = AtomicBool::new(false);
    // A panic inside the logger (or while logging this one) must not recurse.
    if !PANICKING.swap(true, Ordering::Relaxed) {
        defmt::error!("panic: {}", defmt::Display2Format(info));
    }
    exit(EXIT_FAILURE)
}

/// A hard fault fails the run at once.
#[exception]
unsafe fn HardFault(frame: &ExceptionFrame) -> ! {
    defmt::error!("hard fault, pc = {=u32:#010x}", frame.pc());
    exit(EXIT_FAILURE)
}
