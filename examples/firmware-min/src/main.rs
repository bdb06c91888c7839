//! A minimal product firmware: the keyword-spotting model (`kws_dscnn`) from flash, run on the
//! CPU alone, on QEMU's `mps2-an386` (Cortex-M4F).
//!
//! This is what a product built on npu-compute flashes on a part without an NPU (or that keeps
//! it for something else): the model compiled on the host ([`npu_compute::compiled`]; made by
//! `npu-sim compile ../models/kws_dscnn/model.tflite --output kws_dscnn.npuc` and kept in this
//! folder), in flash ([`npu_compute::include_aligned!`]), and one arena in RAM, a `static` of
//! the size the image says. The device reads no `.tflite` file, lowers nothing and holds no
//! graph, server or handle table: it checks the image ([`CompiledModel::new`]) and runs its
//! steps over the arena with the runtime's CPU operators, which are the CPU fallback's. No
//! simulator, no measuring harness, no logging framework unless the `defmt` feature asks for
//! one. Its flash and RAM are the figures of a real firmware: CI builds it in release and
//! checks them with `.ci/firmware-size.sh`.
//!
//! It invokes the model twice on `input_0.bin` and compares the 12 scores of both with
//! TensorFlow Lite Micro's (`expected_tflm_0.bin`). It is built with kws_dscnn's operators
//! alone (the runtime's operator features, `Cargo.toml`), and checks that a compiled model
//! with another operator (one ADD) is refused, naming the step. It exits through semihosting
//! with `EXIT_SUCCESS` (QEMU exit status 0) only on a match, and with `EXIT_FAILURE` (QEMU
//! exit status 1) on a mismatch, an error, a panic or a hard fault. Before that it prints one
//! line (semihosting stdout, no `core::fmt`): the verdict, the class, and the stack the run
//! used (the stack is painted at boot and the untouched part found afterwards, [`stack`]).
//! With the `defmt` feature it logs the same and the runtime's RAM.
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

use npu_compute::compiled::{CompiledError, CompiledModel};
use npu_compute::ops::OpError;

/// kws_dscnn compiled for the CPU (`npu-sim compile`), 16-byte aligned.
static IMAGE: &[u8] = npu_compute::include_aligned!("../kws_dscnn.npuc");
/// One input (49×10 MFCC features, int8).
static INPUT: &[u8; 490] = include_bytes!("../../models/kws_dscnn/input_0.bin");
/// TensorFlow Lite Micro's output for it (12 class scores, int8).
static EXPECTED: &[u8; 12] = include_bytes!("../../models/kws_dscnn/expected_tflm_0.bin");
/// A model of one ADD, compiled: an operator this build leaves out (see `Cargo.toml`), so the
/// image must be refused at its step.
static LEFT_OUT: &[u8] = npu_compute::include_aligned!("../add_int8.npuc");

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
    /// The arena was handed out before (a second call of [`run`]).
    ArenaTaken,
    /// The second invoke gave other scores than the first.
    Replay,
    /// A compiled model with an operator this build leaves out was not refused.
    LeftOutAccepted,
    /// The image has no input or output of the model's size.
    Io,
    /// The runtime refused the image or failed. (Read by the defmt log alone: a product build
    /// reports a failure by its exit status.)
    #[cfg_attr(not(feature = "defmt"), allow(dead_code))]
    Compiled(CompiledError),
}

impl From<CompiledError> for Failure {
    fn from(e: CompiledError) -> Self {
        Failure::Compiled(e)
    }
}

/// Checks the image, runs kws_dscnn twice in the static arena, then checks that an image with
/// an operator this build leaves out is refused.
fn run() -> Result<[u8; 12], Failure> {
    let arena = memory::take().ok_or(Failure::ArenaTaken)?;
    let model = CompiledModel::new(IMAGE)?;
    let mut session = model.session(arena)?;
    let mut first = [0u8; 12];
    let mut scores = [0u8; 12];
    for out in [&mut first, &mut scores] {
        session
            .input_mut(0)
            .ok_or(Failure::Io)?
            .copy_from_slice(INPUT);
        session.invoke()?;
        out.copy_from_slice(session.output(0).ok_or(Failure::Io)?);
    }
    report::runtime(&model);
    if first != scores {
        return Err(Failure::Replay);
    }
    let refused = matches!(
        CompiledModel::new(LEFT_OUT),
        Err(CompiledError::Op {
            step: 0,
            error: OpError::NotBuilt
        })
    );
    if !refused {
        return Err(Failure::LeftOutAccepted);
    }
    Ok(scores)
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
