//! What the firmware says: one line through semihosting stdout without the `defmt` feature,
//! a defmt log with it (then the runner decodes it).
//!
//! Without defmt nothing here formats with `core::fmt`: numbers are written with
//! [`decimal`], so that the flash measured is the runtime's and not a formatter's.

#[cfg(not(feature = "defmt"))]
use cortex_m_semihosting::hio;

use crate::{Channel, Failure, Kws};
use npu_compute::client::ComputeClient;

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

/// The runtime's RAM, with defmt: the state's sizes on this target and the memories' use.
pub fn runtime(client: &ComputeClient<'_, Channel>, kws: &Kws<'_>) {
    #[cfg(not(feature = "defmt"))]
    let _ = (client, kws);
    #[cfg(feature = "defmt")]
    {
        use core::mem::size_of;
        use npu_compute::memory::ChunkSliceMemory;
        use npu_compute::tune::TuneCache;
        defmt::info!(
            "runtime state: channel {=usize} B = server {=usize} B (HAL {=usize}, chunks {=usize}, tuning cache {=usize}, the rest: handle table, staging blocks, fences, stats) + deferred drops; graph {=usize} B (no job plan: this build leaves job plans out)",
            size_of::<Channel>(),
            size_of::<crate::Server>(),
            size_of::<npu_compute::hal::CpuOnly<'static>>(),
            size_of::<ChunkSliceMemory<{ crate::CHUNKS }>>(),
            size_of::<TuneCache<{ crate::TUNE }>>(),
            size_of::<Kws<'static>>()
        );
        type Defaults = npu_compute::server::NpuServer<npu_compute::hal::CpuOnly<'static>>;
        type DefaultGraph =
            npu_compute::graph::Graph<'static, npu_compute::channel::RefCellChannel<Defaults>>;
        defmt::info!(
            "with the default capacities: channel {=usize} B (server {=usize} B), graph {=usize} B",
            size_of::<npu_compute::channel::RefCellChannel<Defaults>>(),
            size_of::<Defaults>(),
            size_of::<DefaultGraph>()
        );
        let arena = kws.arena();
        defmt::info!(
            "memories: arena {=usize} B ({=u32} of activations, {=u32} of constants planned), staging {=usize} B",
            crate::memory::ARENA_BYTES,
            arena.activation_bytes,
            arena.constant_bytes,
            crate::memory::STAGING_BYTES
        );
        defmt::info!("{}", kws.job_plan());
        if let (Ok(stats), Ok(memory)) = (client.stats(), client.memory_stats()) {
            defmt::info!("{}", stats);
            defmt::info!("{}", memory);
        }
    }
}
