//! What the firmware says: one line through semihosting stdout without the `defmt` feature,
//! a defmt log with it (then the runner decodes it).
//!
//! Without defmt nothing here formats with `core::fmt`: numbers are written with
//! [`decimal`], so that the flash measured is the runtime's and not a formatter's.

#[cfg(not(feature = "defmt"))]
use cortex_m_semihosting::hio;

use crate::Failure;
use npu_compute::compiled::CompiledModel;

/// The predicted class: the highest score, the lowest index among equals.
fn class(scores: &[u8; 12]) -> usize {
    (0..scores.len())
        .max_by_key(|&i| (scores[i] as i8, core::cmp::Reverse(i)))
        .unwrap_or(0)
}

/// `n` in decimal into `buf`; the digits' slice.
#[cfg(not(feature = "defmt"))]
fn decimal(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
    }
    &buf[at..]
}

/// Writes `parts` to semihosting stdout; a host without it is ignored.
#[cfg(not(feature = "defmt"))]
fn print(parts: &[&[u8]]) {
    if let Ok(mut out) = hio::hstdout() {
        for part in parts {
            let _ = out.write_all(part);
        }
    }
}

/// The scores are TensorFlow Lite Micro's.
pub fn matched(scores: &[u8; 12], stack: usize) {
    #[cfg(not(feature = "defmt"))]
    {
        let (mut a, mut b) = ([0; 20], [0; 20]);
        print(&[
            b"kws_dscnn on the CPU: TFLM's bytes, class ",
            decimal(class(scores), &mut a),
            b", stack ",
            decimal(stack, &mut b),
            b" bytes\n",
        ]);
    }
    #[cfg(feature = "defmt")]
    defmt::info!(
        "kws_dscnn on the CPU: TFLM's bytes, class {=usize}, stack {=usize} bytes",
        class(scores),
        stack
    );
}

/// The scores differ from TensorFlow Lite Micro's.
pub fn mismatch(scores: &[u8; 12], stack: usize) {
    #[cfg(not(feature = "defmt"))]
    {
        let _ = (scores, stack);
        print(&[b"kws_dscnn on the CPU: MISMATCH with TFLM's bytes\n"]);
    }
    #[cfg(feature = "defmt")]
    defmt::error!(
        "kws_dscnn on the CPU: MISMATCH: {=[u8]} against TFLM's {=[u8]} (stack {=usize} bytes)",
        scores[..],
        crate::EXPECTED[..],
        stack
    );
}

/// No scores.
pub fn failure(failure: &Failure) {
    #[cfg(not(feature = "defmt"))]
    {
        let _ = failure;
        print(&[b"kws_dscnn on the CPU: FAILED\n"]);
    }
    #[cfg(feature = "defmt")]
    defmt::error!("kws_dscnn on the CPU: FAILED: {}", failure);
}

/// The runtime's RAM, with defmt: the model's and the session's sizes on this target, and the
/// arena.
pub fn runtime(model: &CompiledModel<'_>) {
    #[cfg(not(feature = "defmt"))]
    let _ = model;
    #[cfg(feature = "defmt")]
    {
        use core::mem::size_of;
        defmt::info!(
            "runtime state: compiled model {=usize} B, session {=usize} B; arena {=usize} B ({=u32} planned), {=u16} steps",
            size_of::<CompiledModel<'static>>(),
            size_of::<npu_compute::compiled::Session<'static, 'static>>(),
            crate::memory::ARENA_BYTES,
            model.arena_bytes(),
            model.steps()
        );
    }
}
