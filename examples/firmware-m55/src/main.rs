//! Example firmware for a Cortex-M55: kws_dscnn on the CPU fallback of QEMU's `mps3-an547`.
//!
//! Run it from this folder with `cargo run --release` (the runner, `.ci/qemu-run.sh
//! --machine mps3-an547` from the repository's `.cargo/config.toml`, boots QEMU with
//! `-icount shift=0` and decodes the defmt log). CI does exactly that. It is built for
//! `thumbv8m.main-none-eabihf` with `target-cpu=cortex-m55` (`.cargo/config.toml`), so the
//! compiler may use Helium (MVE) and the DSP extension, and kernels selected from the target's
//! features get them.
//!
//! The Cortex-M55 is the core an Ethos-U55 pairs with; QEMU models no NPU, and this firmware
//! runs none: its driver is [`CpuOnly`], which declares no operator, so the server runs every
//! layer of the keyword-spotting model (`kws_dscnn`, the MLPerf Tiny DS-CNN architecture) on the
//! CPU fallback kernels. The model is read in place from the code memory (the SRAM, see `memory.x`); the
//! arena and the staging are statics in the DTCM. [`cpu_layers`] (shared with
//! `examples/firmware`, the Cortex-M4F one) invokes it through graph, client, channel and server,
//! checks every output against TensorFlow Lite Micro's bytes, and counts its instructions per
//! layer with SysTick ([`systick`]) on the first of its three inputs: the figures to put beside CMSIS-NN's for the same layers on
//! the same core (`../shared/CMSIS_NN_KWS.md`).
//!
//! Before the model, [`simd_check`] (shared with `examples/firmware`) runs the Helium kernels
//! (convolution, depthwise, average pool) and the portable ones on the same pseudo-random cases
//! and fails on any byte that differs.
//!
//! The log ends with `kws_dscnn on the CPU: N instructions`. The firmware exits through
//! semihosting with `EXIT_SUCCESS` (QEMU exit status 0) only when it runs on a Cortex-M55, the
//! Helium kernels give the portable kernels' bytes and every invoke gives TFLM's bytes, and with
//! `EXIT_FAILURE` (status 1) on a difference, an error, a panic or a hard fault.

#![no_std]
#![no_main]

#[path = "../../firmware-common/cpu_layers.rs"]
mod cpu_layers;
#[path = "../../firmware-common/memories.rs"]
mod memories;
#[path = "../../firmware-common/shell.rs"]
mod shell;
#[path = "../../firmware-common/simd_check.rs"]
mod simd_check;
#[path = "../../firmware-common/systick.rs"]
mod systick;

use cortex_m_rt::entry;
// The defmt global logger: frames go to semihosting stdout. (Never mix it with `hprintln!`.)
use defmt_semihosting as _;
use shell::{exit, EXIT_FAILURE, EXIT_SUCCESS};

use npu_compute::hal::CpuOnly;

use crate::cpu_layers::{LayerCounts, LayerError, Model};
use crate::memories::Memories;
use crate::systick::{ClockError, Ticks};

// ---------------------------------------------------------------------------------------------
// The model and the memories
// ---------------------------------------------------------------------------------------------

/// The keyword-spotting model, in flash, 16-byte aligned.
static KWS_MODEL: &[u8] = npu_compute::include_aligned!("../../models/kws_dscnn/model.tflite");
/// kws_dscnn compiled for the CPU (`npu-sim compile`), as the minimal firmware flashes it.
static KWS_COMPILED: &[u8] = npu_compute::include_aligned!("../../firmware-min/kws_dscnn.npuc");

/// Bytes of the arena (the driver's device memory): `npu-sim plan` gives 20,704 for this
/// model (activations, and the per-channel parameters the runtime prepares; the weights stay
/// in flash), rounded up.
const ARENA_BYTES: usize = 24 * 1024;
/// Bytes of the staging (the driver's host memory) the CPU fallback computes in: the largest
/// layer's inputs, weights and output at once, 20,864 bytes for this model (a 1×1
/// convolution of 25×5×64), rounded up.
const STAGING_BYTES: usize = 24 * 1024;

/// The Cortex-M55's part number in `CPUID` (the Cortex-M4's is 0xC24).
const CORTEX_M55_PART: u32 = 0xD22;

/// The arena and the staging.
static MEMORIES: Memories<ARENA_BYTES, STAGING_BYTES> = Memories::new();

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

/// Why the run failed.
#[derive(defmt::Format)]
enum Failure {
    /// The core peripherals or the memories were already taken.
    Taken,
    /// The CPU is not a Cortex-M55: this `CPUID` part number instead.
    NotCortexM55(u32),
    /// SysTick does not count instructions (QEMU without `-icount`?).
    Clock(ClockError),
    /// A Helium kernel gave other bytes than the portable one.
    SimdCheck(simd_check::SimdCheckError),
    /// The model gave other bytes than TFLM, or could not be run or counted.
    Layers(LayerError),
}

/// The whole firmware: kws_dscnn's counts when every invoke gave TFLM's bytes.
fn run() -> Result<LayerCounts, Failure> {
    let core = cortex_m::Peripherals::take().ok_or(Failure::Taken)?;
    let part = (core.CPUID.base.read() >> 4) & 0xFFF;
    defmt::info!("CPUID part number {=u32:#05x}", part);
    if part != CORTEX_M55_PART {
        return Err(Failure::NotCortexM55(part));
    }
    let ticks = Ticks::new(core.SYST);
    let calibration = systick::calibrate(&ticks).map_err(Failure::Clock)?;
    systick::log_calibration(&calibration);

    let (convs, depthwise) =
        simd_check::kernels(&simd_check::HELIUM).map_err(Failure::SimdCheck)?;
    let (pools, max_pools) = simd_check::pools(&simd_check::HELIUM).map_err(Failure::SimdCheck)?;
    let fcs = simd_check::fully_connected(&simd_check::HELIUM).map_err(Failure::SimdCheck)?;
    let (adds, muls) = simd_check::elementwise(&simd_check::HELIUM).map_err(Failure::SimdCheck)?;
    defmt::info!(
        "SIMD kernels (Helium unless NPU_KERNELS_MVE=0) give the portable kernels' bytes: {=u32} convolutions, {=u32} depthwise, {=u32} average pools, {=u32} max pools, {=u32} fully connected, {=u32} adds, {=u32} muls",
        convs,
        depthwise,
        pools,
        max_pools,
        fcs,
        adds,
        muls
    );

    let (arena, staging) = MEMORIES.take().ok_or(Failure::Taken)?;
    let model = Model {
        name: "kws_dscnn",
        tflite: KWS_MODEL,
        cases: &cpu_layers::KWS_CASES,
    };
    let npu = CpuOnly::new(&mut *arena, staging);
    let counts = cpu_layers::run(&ticks, &calibration, npu, model).map_err(Failure::Layers)?;
    // The same model compiled on the host: the kernels alone, over one arena.
    let kernels = counts.instructions();
    cpu_layers::run_compiled(&ticks, &calibration, KWS_COMPILED, model, arena, kernels)
        .map_err(Failure::Layers)?;
    Ok(counts)
}

// ---------------------------------------------------------------------------------------------
// Entry point, exit and fault handling
// ---------------------------------------------------------------------------------------------

#[entry]
fn main() -> ! {
    defmt::info!("npu-firmware-m55 on mps3-an547");
    let status = match run() {
        Ok(kws) => {
            defmt::info!(
                "PASS: kws_dscnn on the CPU fallback of the Cortex-M55 gives TFLM's bytes"
            );
            cpu_layers::print_total("kws_dscnn", &kws);
            EXIT_SUCCESS
        }
        Err(failure) => {
            defmt::error!("FAIL: {}", failure);
            EXIT_FAILURE
        }
    };
    exit(status)
}
