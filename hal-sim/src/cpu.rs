//! The host CPU's cost model: what running an operator on the CPU fallback kernels costs.
//!
//! # Why
//!
//! The simulator's clock moves with jobs and with [`SimNpu::advance`](crate::SimNpu::advance);
//! without this model a CPU fallback would cost nothing, and a tuner timing "CPU vs NPU" would
//! find a free lunch. With [`SimConfig::cpu`](crate::SimConfig::cpu) set, the server's call
//! to [`Npu::host_compute`](npu_compute::hal::Npu::host_compute) after each fallback kernel
//! advances the clock by [`CpuModel::cycles`], as the CPU's own cycle counter would on a
//! board, and [`Npu::clock_counts_cpu`](npu_compute::hal::Npu::clock_counts_cpu) says so.
//!
//! # Model
//!
//! ```text
//! cycles = r.call + ceil((work × r.work + taps × r.taps + outputs × r.outputs) / 16)
//! ```
//!
//! with `r` the [`Rates`] of the op's fallback kernel ([`CpuKernel`]), `work` =
//! [`Op::macs`] (multiply-accumulates for convolutions and matrix products, window taps for
//! depthwise convolution and pooling, elements for the rest), `taps` the filter positions a
//! convolution visits (`outputs × kh × kw`: each costs the padding test and index arithmetic
//! around its channel loop; for a depthwise one, output pixels × kh × kw) or the rows a strided copy copies, and `outputs` the output
//! elements (bias, requantisation, store).
//! `call` is the fixed cost of a call (dispatch, parameter checks, slice views; softmax's
//! table set-up). Rates are in sixteenths of a cycle so that a cost below one cycle stays
//! exact in integers.
//!
//! # Calibration
//!
//! [`CpuModel::CORTEX_M4_SCALAR`] comes from the example firmware (`examples/firmware`,
//! module `cpu_cost`), which times the fallback of every kws_dscnn layer and of synthetic
//! layers of every kernel on QEMU's Cortex-M4 (`-icount shift=0`, so SysTick counts
//! instructions), built as firmware builds them (`opt-level = "s"`, LTO), and checks this
//! model against the measurement at every run (each op within 20%, the kws_dscnn total
//! within 5%): a kernel change that moves a figure fails CI until the model follows. The
//! model counts *instructions* and charges one cycle each (CPI 1): on a Cortex-M4 or a
//! Cortex-M55 running these scalar loops the true figure is higher (loads and taken branches
//! take two cycles), so the model favours the CPU, never the NPU. The CPU is assumed to run
//! on the NPU's clock, as on Corstone-300 and -310.

use npu_compute::ops::{CpuKernel, Op};

/// What one kernel costs: `call` in cycles, the rest in sixteenths of a cycle per unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Rates {
    /// Cycles of every call.
    pub call: u32,
    /// Per unit of [`Op::macs`].
    pub work: u32,
    /// Per filter position a convolution visits, or row a strided copy copies ([`Op::taps`];
    /// 0 for other kernels).
    pub taps: u32,
    /// Per output element.
    pub outputs: u32,
}

impl Rates {
    /// Rates from their four fields, in order.
    pub const fn new(call: u32, work: u32, taps: u32, outputs: u32) -> Self {
        Rates {
            call,
            work,
            taps,
            outputs,
        }
    }
}

/// Cycles the CPU takes to run operators on the fallback kernels (see the [module
/// docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CpuModel {
    /// The rates of each kernel, indexed by [`CpuKernel`] as `u8`.
    pub rates: [Rates; CpuKernel::COUNT],
}

/// The call cost of a kernel without set-up of its own: what `run_op` costs around a loop.
const CALL: u32 = 300;

impl CpuModel {
    /// The scalar `npu-kernels` on a Cortex-M4 class core at one cycle per instruction,
    /// fitted to the firmware's measurement (see [Calibration](self#calibration)).
    pub const CORTEX_M4_SCALAR: CpuModel = CpuModel {
        rates: [
            // Conv (the blocked matrix product on the DSP extension): 2.06 per MAC, 0.875 per
            // filter position (the gather), 31.5 per output (requantization, the pixels'
            // widening). Fitted to kws_dscnn's first convolution (1,164,443 instructions) and
            // pointwise ones (1,273,865 each) within 3.3%, and the synthetic 3x3 and 1x1 ones
            // (945,918 and 248,344) within 19%: a gather per pixel row, which this model charges
            // per filter position, makes shallow-channel windows dearer than it says. The scalar
            // direct loop before it: 6.96, 37.9 and 142.5.
            Rates::new(CALL, 33, 14, 504),
            // Depthwise (four channels at a time on SMLABB/SMLATT, a run of channels
            // requantized in one loop): 4 per tap and channel (the inner loop), 38.9 per
            // output, 72.6 per filter position of an output pixel (listing its taps, the
            // pixel's loop). Fitted to kws_dscnn's 3x3 layers (681,300 instructions each) and
            // the synthetic 16-channel one (474,340), both within 0.1%. The kernel before it
            // (per-channel requantization beside the accumulators): 8 per tap, 47 per output.
            Rates::new(CALL, 64, 1161, 622),
            // FullyConnected (two weight rows per pass over the input on SXTB16/SADD16/SMLAD,
            // requantized in blocks): 2.16 per MAC, 105 per output. Fitted to the synthetic
            // 256 -> 32 (21,382 instructions) and 1024 -> 10 (23,502) ones; kws_dscnn's
            // 64 -> 12 (3,622) within 12%. The scalar loop before it: 6.06 per MAC, 60 per output.
            Rates::new(CALL, 35, 0, 1680),
            // BatchMatmul: 6.06 per MAC, 162.5 per output.
            Rates::new(CALL, 97, 0, 2600),
            // AveragePool (sixteen channels per window pixel in 16-bit lanes on SXTAB16, the
            // channels past the last sixteen in the scalar loop): 1.19 per tap and channel,
            // 8.56 more per tap of a scalar channel ([`Op::taps`]), 37.4 per output. Fitted to
            // kws_dscnn's (64 channels, 11,940 instructions) and the synthetic 16-channel 3x3
            // (197,780) and 8-channel (226,060) ones, each within 1.1%. The scalar loop alone
            // before it: 6.46 per tap, 49.8 per output.
            Rates::new(CALL, 19, 137, 598),
            // MaxPool (sixteen channels per window pixel on SSUB8/SEL, the channels past the
            // last sixteen in the scalar loop): 1.19 per tap and channel (the average pool's
            // rate: the two synthetic shapes alone cannot split it from the next), 10.2 more per
            // tap of a scalar channel, 21.1 per output. The synthetic 16-channel 2x2 (26,822
            // instructions) and 8-channel 3x3 (222,422) within 0.1%. The scalar loop alone
            // before it: 12.9 per tap, 4.7 per output.
            Rates::new(CALL, 19, 163, 338),
            // Mean: 7.5 per input element.
            Rates::new(CALL, 120, 0, 0),
            // Add (DSP loops over blocks of 64 through an int32 buffer, also for each
            // innermost run of a broadcast): 20.7 per element, 179 per run of a broadcast
            // ([`Op::taps`]: the loop nest's step and the loops' set-up). Fitted to the
            // firmware's 1024 same-shape elements (21,459 instructions) and 1x8x8x16 + [16]
            // (32,939), each within 0.2%. The portable kernel before it (tables of the
            // rescaled inputs from 1024 outputs on): 74 per element.
            Rates::new(CALL, 331, 2864, 0),
            // Sub: 70 (measured 79.7, and 62.8 for SQUARED_DIFFERENCE since the inlined
            // requantization; 77.2 before it).
            Rates::new(CALL, 1120, 0, 0),
            // Mul (DSP loops as Add's): 12.9 per element, 155.5 per run of a broadcast. Fitted to
            // the firmware's 1024 same-shape elements (13,579 instructions) and 1x8x8x16 * [16]
            // (23,499), each within 0.3%. The portable kernel before it: 44.1 per element
            // (int8 measured 42.1 same-shape, 51.5 broadcasting), now MulScalar's.
            Rates::new(CALL, 207, 2488, 0),
            // Relu: 37 (RELU 37.1, LEAKY_RELU 35.6, ABS 35.1 since the requantization is
            // inlined; 51.9 before it).
            Rates::new(CALL, 592, 0, 0),
            // Rsqrt: 97.9.
            Rates::new(CALL, 1566, 0, 0),
            // Requantize: 28.8 (29.1 measured, int8, int16 and int32 inputs, since the
            // requantization is inlined; 46.9 before it).
            Rates::new(CALL, 461, 0, 0),
            // Quantize (f32): 24.7.
            Rates::new(CALL, 394, 0, 0),
            // Dequantize (f64 arithmetic in software): 136.6.
            Rates::new(CALL, 2185, 0, 0),
            // Softmax: 2,950 to set up, 107 per element.
            Rates::new(2950, 1711, 0, 0),
            // Transpose: 11.1.
            Rates::new(CALL, 178, 0, 0),
            // Concatenation: 4.8.
            Rates::new(CALL, 77, 0, 0),
            // Reshape: a bare copy, 1 per byte.
            Rates::new(200, 16, 0, 0),
            // AddF32 (the FPU's): 13.8.
            Rates::new(CALL, 221, 0, 0),
            // MulF32: 13.8.
            Rates::new(CALL, 221, 0, 0),
            // ReluF32: 7.8.
            Rates::new(CALL, 125, 0, 0),
            // FullyConnectedF32: 5.23 per MAC.
            Rates::new(CALL, 84, 0, 0),
            // NegF32: 4.8 per element (the firmware's 1024-element NEG, 5,220 instructions).
            Rates::new(CALL, 77, 0, 0),
            // Compare: 9.4 per element, between the firmware's MINIMUM over 1024 equal-shape
            // elements (7.9 net) and MAXIMUM of 1x8x8x16 with [16] (11.6 net); its RELU6 over
            // 1024 elements is 10.8.
            Rates::new(CALL, 150, 0, 0),
            // AddI16: 109.5 per element (measured 103.4 same-shape, 115.7 broadcasting a
            // 16-channel vector: int8's tables do not exist for int16).
            Rates::new(CALL, 1752, 0, 0),
            // The copies below were measured by the firmware's synthetic slices, pads, packs
            // and mirror pads (int8 and int16) and fitted to them, each within 15%; work is
            // bytes copied, taps rows. CopyRows (`memcpy` per row): 1 per byte, 174 per row,
            // 0.25 per output element (a pad's fill).
            Rates::new(CALL, 16, 2777, 4),
            // CopyShortRows (the kernel's loop): 3 per byte, 33 per row, 0.5 per output.
            Rates::new(CALL, 48, 533, 8),
            // CopyElements: 6 per byte, 3.25 per row, 6 per output element.
            Rates::new(CALL, 97, 52, 97),
            // MirrorPad: 0.5 per element, 225 per row (the outer axes' reflection and three
            // runs), 0.5 per output element.
            Rates::new(CALL, 8, 3606, 8),
            // ArgMinMax: 11.5 per input element (measured 13.9 along the innermost axis, 9.7
            // along an outer one: one rate for both, within 20% of each).
            Rates::new(CALL, 184, 0, 0),
            // TransposeConv: 4.7 per MAC, 30.7 per (tap, output channel) pair, 182.6 per
            // output (solved from three synthetic shapes: input depth 4, 8 and 32).
            Rates::new(CALL, 75, 491, 2921),
            // L2Norm: 29.9 per element, 311 per row (rows of 16, 64 and 512 measured 49.6, 35.0
            // and 30.8 per element; 44 and 100 before the requantization was inlined).
            Rates::new(CALL, 478, 4976, 0),
            // LogSoftmax: 259.2 per element, 452 per row (its logarithm).
            Rates::new(CALL, 4147, 7232, 0),
            // Logistic (int8, gemmlowp exp and Newton-Raphson division): 346.7.
            Rates::new(CALL, 5547, 0, 0),
            // Tanh (int8, likewise): 359.7.
            Rates::new(CALL, 5755, 0, 0),
            // SigmoidTable16 (int16 logistic 26.1 and tanh 23.1): 24.4.
            Rates::new(CALL, 390, 0, 0),
            // Softmax16: 250 per row of 16 beyond 78 per element (rows of 16 and of 1,000).
            Rates::new(250, 1248, 0, 0),
            // Requantize16 (int16 and int8 to int16): 29.4.
            Rates::new(CALL, 470, 0, 0),
            // Svdf: 10.06 per MAC (feature and time weights together, the state's shift and
            // the per-filter requantization folded in), fitted to the firmware's one
            // synthetic shape (32 inputs, 64 filters of rank 2, memory 8: 26,099 instructions
            // with an int8 state, 26,859 with an int16 one).
            Rates::new(CALL, 161, 0, 0),
            // Lstm: FullyConnected's 6.06 per MAC, and 1,286 per output element (one unit of
            // one step: eight requantized products, four LUT activations, three requantized
            // multiplies), fitted to the firmware's one synthetic shape (8 steps, 16 inputs,
            // 16 units: 264,259 instructions in int8, 265,379 in 16x8).
            Rates::new(CALL, 97, 0, 20576),
            // ResizeNearest: 1.0 per element, 55.7 per output pixel (the firmware's two
            // synthetic resizes, depths 16 and 2).
            Rates::new(CALL, 16, 891, 0),
            // ResizeBilinear: 72 per element, 86 per output pixel (likewise).
            Rates::new(CALL, 1152, 1378, 0),
            // SpaceDepth: 1.0 per element, 67 per run (two DEPTH_TO_SPACE, runs of 32 and 4).
            Rates::new(CALL, 16, 1074, 0),
            // Conv16 (16x8 convolution, the direct loop): the int8 convolution's rates before it
            // was blocked, 6.96 per MAC, 37.9 per filter position, 142.5 per output (the
            // firmware's synthetic 16x8 3x3 convolution is within 1%).
            Rates::new(CALL, 111, 606, 2280),
            // Depthwise16: likewise 14 per tap, 42 per output (its synthetic one within 13%).
            Rates::new(CALL, 224, 0, 672),
            // FullyConnected16 (16x8, the scalar loop): 6.06 per MAC, 60 per output.
            Rates::new(CALL, 97, 0, 960),
            // Cast: 3.8 per element, 14 more per float-to-integer one (int32 and f32 to int8).
            Rates::new(CALL, 61, 223, 0),
            // MulScalar: 44.1 (measured 37.2 for 16x8 MUL, 55.3 for PRELU, both within 20%).
            Rates::new(CALL, 706, 0, 0),
        ],
    };

    /// The rates of `kernel`.
    pub const fn rates(&self, kernel: CpuKernel) -> Rates {
        self.rates[kernel as usize]
    }

    /// Cycles of `op` on the CPU (saturating, never panics on unvalidated shapes).
    pub fn cycles(&self, op: &Op) -> u64 {
        let r = self.rates(op.cpu_kernel());
        let part = |units: u64, rate: u32| units.saturating_mul(u64::from(rate));
        let sixteenths = part(op.macs(), r.work)
            .saturating_add(part(op.taps(), r.taps))
            .saturating_add(part(op.output_elements(), r.outputs));
        u64::from(r.call).saturating_add(sixteenths.div_ceil(16))
    }
}

impl Default for CpuModel {
    /// [`CpuModel::CORTEX_M4_SCALAR`].
    fn default() -> Self {
        Self::CORTEX_M4_SCALAR
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use npu_compute::ops::Reshape;

    #[test]
    fn cost_grows_with_work_and_saturates() {
        let m = CpuModel::default();
        let r = m.rates(CpuKernel::Reshape);
        let small = m.cycles(&Op::Reshape(Reshape { len: 16 }));
        let large = m.cycles(&Op::Reshape(Reshape { len: 1600 }));
        assert_eq!(
            small,
            u64::from(r.call) + (16 * u64::from(r.work)).div_ceil(16)
        );
        assert_eq!(
            large,
            u64::from(r.call) + (1600 * u64::from(r.work)).div_ceil(16)
        );
        let mut max = m;
        max.rates[CpuKernel::Reshape as usize] = Rates::new(u32::MAX, u32::MAX, 0, 0);
        assert!(max.cycles(&Op::Reshape(Reshape { len: u32::MAX })) > u64::from(u32::MAX));
    }

    #[test]
    fn every_kernel_has_its_own_rates_slot() {
        // `COUNT` matches the enum: the last kernel indexes the last slot.
        assert_eq!(CpuKernel::MulScalar as usize + 1, CpuKernel::COUNT);
    }
}
