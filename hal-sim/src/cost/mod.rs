//! A calibrated Ethos-U55-128 cycle model: what one TFLite operator costs on the NPU.
//!
//! [`layer_cycles`] estimates the cycles of one operator (a [`LayerDesc`]: kind, shapes,
//! window, and where its constants live) the way Arm's Vela compiler estimates them, and
//! [`Pipeline`] chains layers the way a driver that prefetches weights from flash runs a
//! network: that is what gives the simulated cycles per inference. Everything is integer arithmetic on `u64`/`u128` with saturating operations, so the
//! same layer costs the same cycles on every machine, and no input makes it panic.
//!
//! # Where the model comes from
//!
//! Vela 5.2's default core (*Regor*) estimates each NPU operation from the hardware's block
//! structure. This module re-implements its formulas (`ethos_u55_performance.cpp` and
//! `ethos_u55.cpp`, summarised in the project's `ETHOS_U55_CYCLE_MODEL.md`). A prototype of
//! the same formulas, fed Vela's own lowered layers, reproduced Vela's compute cycles exactly
//! on 327 of their 335 NPU layers (the rest within 1%); from TFLite shapes alone, this module
//! gives exactly Vela's figure for 47 of the 77 `CONV_2D` / `DEPTHWISE_CONV_2D` operators of
//! the reference models.
//!
//! 1. **Block search.** The NPU computes the output (OFM) in blocks of at most 32 H x 64 W x
//!    128 C, built of 1 x 2 x 8 micro-blocks. The block is the candidate that fits the 24 KiB
//!    of SHRAM (double-buffered input and accumulators; two banks reserved for the output,
//!    two or more for the lookup table) and fetches the least input and weights per output
//!    element; elementwise operations take the block that needs the fewest blocks. Convolutions
//!    with shallow inputs use *part-kernel* traversal (4 kernel elements x 8 channels at a time)
//!    when it uses the MACs better than *depth-first* traversal (32 channels at a time).
//! 2. **MAC cycles per block**: for every kernel piece of at most 8 x 8 elements, 4 cycles per
//!    micro-block and kernel step (at least 32 per step: small blocks cannot hide the pipeline),
//!    repeated per 32-channel input pass for convolution, fully connected and reduce-sum;
//!    depthwise handles 4 kernel elements per step; pooling costs `max(4, k)` per micro-block
//!    and 8-bit step, times 4 for int8 (the 128-MAC part).
//! 3. **Output (AO) cycles per block**: output elements x the output stage's cost per element
//!    (0.5 for convolutions and pooling, 0.25 max-pool, 0.75 multiply, 1.5 add/subtract, 1.25
//!    for 32-bit elementwise, at least 1.0 with a lookup-table activation), and at least the
//!    per-channel scale/bias fetch `10 * C * latency / 256`.
//! 4. **Combination**: with `n` the (fractional) number of blocks and the command-issue limit
//!    `cmd = (|OFM write - IFM read| + MAC + AO) / 4`, MAC-bound layers take
//!    `n * max(MAC, cmd) + max(AO, cmd)` and AO-bound ones `n * max(AO, cmd) + max(MAC, cmd)`,
//!    plus one IFM-block read and one OFM-block write (each memory latency + bytes /
//!    bandwidth). These are the only fixed costs: there is no per-operation constant.
//! 5. **Elementwise**: `max(AO x elements, elements x (block I/O time per element + AO) / 4)`,
//!    with the depth rounded up to 16 for the brick format.
//! 6. **Memory traffic**, which runs in parallel with the computation: every OFM block re-reads
//!    its input block (halo included, once per 8 x 8 kernel piece and, for convolutions, per
//!    OFM-depth block); the OFM is written once; weights and 10 bytes of scales per output
//!    channel are read once per OFM block in H x W. Transfers that do not fill a memory burst
//!    (32 bytes on SRAM, 128 on flash) are charged the whole burst. Access cycles are bytes /
//!    bytes-per-cycle: SRAM 8, flash 1.
//! 7. **A layer costs `max(compute, SRAM access, flash access)`** ([`CostBreakdown::total`]).
//!    As Vela decides by default, weights in flash that several OFM blocks re-read are
//!    *buffered*: copied to SRAM by a DMA ([`CostBreakdown::weight_dma`]) that Vela overlaps
//!    with the previous layer, then read from SRAM; weights read once stream from flash during
//!    the layer, which then often costs exactly its weight bytes.
//!
//! TFLite operators that Vela lowers to several NPU operations are costed as that sequence:
//! `SOFTMAX` as Vela's 28 passes (max, subtract with an exponential lookup table, 32-bit
//! reduce-sum and a Newton-Raphson reciprocal on the row sums), `MEAN` as a depthwise sum plus
//! a 32-bit rescale, `BATCH_MATMUL` as an elementwise multiply plus a reduce-sum per output
//! column. `RESHAPE` and `CONCATENATION` cost nothing (Vela writes producers straight into the
//! concatenated tensor), `TRANSPOSE` costs one read and one write of the tensor.
//!
//! # Variants
//!
//! [`LayerDesc::variant`] says how the NPU runs the layer. Every variant computes the same
//! bytes; they differ in cycles because Vela's block choice is a traffic heuristic, not a
//! cycle minimum. `ETHOS_U55_CYCLE_MODEL.md` §1: *"Choice: the block with the least (IFM +
//! weight fetch) per OFM element."* [`variant_cycles`] costs a variant (`None`: it does not
//! apply), [`supports_variant`] says whether it applies, [`layer_cycles`] costs any.
//!
//! - **[`Variant::Auto`]**: the model above, unchanged, so every calibrated figure stays.
//! - **[`Variant::Block { h, w }`](Variant::Block)** (convolution, depthwise convolution,
//!   pooling, fully connected): the block search restricted to one OFM block H x W, with
//!   `H = min(h, OFM H, max H)` and `W = min(w, OFM W, max W)` rounded up to the micro-block's
//!   2 ([`U55Config::max_ofm_block`]: 32 x 64; the batch is folded into H, a fully connected
//!   layer's rows as Vela folds them). The depth is still searched with Vela's criterion and the same SHRAM fit: *"A
//!   candidate fits if 2 + IFM banks + accumulator banks ≤ 24 − LUT banks, with both areas
//!   double-buffered."* If no depth fits, the variant is unsupported; it never falls back to the
//!   micro-block. MAC, output, command, traffic, buffering and prefetch use the formulas above
//!   with that block. A block can win where the heuristic does not look:
//!   - below 16 output pixels a block pays the MAC floor (*"Blocks under 16 output pixels hit
//!     the 32-cycle floor; depthwise peaks at 1/8 of the MAC rate"*): on `mlperf_vww`'s 3 x 3
//!     depthwise on 6 x 6 x 128, Vela's 2 x 6 x 80 (6 micro-blocks: `4 * 6 < 32`) costs 5,512
//!     cycles, a forced 16 x 4 (clipped to 6 x 4 x 16) 3,832;
//!   - with the same MAC total, a block with a cheaper tail wins (the last block's output
//!     stage, and the first IFM-block read and last OFM-block write, *"the only fixed per-op
//!     overheads"*): the cycle-model document's worked example (`mlperf_kws` layer 2, a 1 x 1
//!     convolution 64 → 64 on 25 x 5) costs 5,944 with Vela's 9 x 6 x 32 and 5,744 with 4 x 16
//!     (clipped to 4 x 6 x 64): the same 4,800 MAC cycles, a cheaper last block;
//!   - a large block can stop fitting: on `mlperf_ic`'s 3 x 3 stride-2 convolution of 16 x 16 x
//!     32, 8 x 8 needs a 17 x 18 x 32 IFM block, 20 banks double-buffered, which with 8
//!     accumulator banks and the 2 reserved exceeds 22: unsupported.
//! - **[`Variant::Im2col`]** (convolution with a window above 1 x 1 or a stride above 1, not
//!   grouped): a DMA gathers every output pixel's receptive field into a matrix of
//!   `R = N * OH * OW` rows of `K = KH * KW * Cin` bytes (`S = R * K` bytes of scratch), then
//!   one vector-product pass multiplies it by the filter (an OHWI filter is the `Cout x K`
//!   matrix), exactly as a fully connected layer with `R` rows folded as Vela folds them, the
//!   matrix read as NHWC. The gather is an SRAM-to-SRAM copy costed with Vela's memory-to-memory
//!   rule (as [`U55Config::flash_to_sram_cycles`]), its reads scaled by the burst penalty
//!   (*"bytes are scaled by memory burst / effective burst"*): each patch row is KH segments of
//!   `seg = KW * Cin` contiguous bytes (`Cin` when dilated along W), so
//!
//!   ```text
//!   read   = S * 32 / min(32, seg)
//!   gather = max(read / 8 + 32, S / 8 + 32)
//!   total  = gather + product.total,  prefetched = gather + product.prefetched
//!   ```
//!
//!   and `prefetch` (the same weights and scales) is unchanged. It wins when the input is too
//!   shallow for the MAC array (a 1-deep IFM fills 1 of the micro-block's 8 channels; as a
//!   matrix it is K deep): `mlperf_kws`'s first convolution (10 x 4, stride 2, 49 x 10 x 1 →
//!   25 x 5 x 64) costs 25,001 cycles as Vela runs it, 11,884 as im2col (a 5,032-cycle gather
//!   of 5,000 bytes in 4-byte segments, and a 6,852-cycle product). It loses when the window
//!   is large against a deep input: `ic`'s 3 x 3 convolution of 32 x 32 x 16 costs 25,715
//!   cycles, 55,104 as im2col (the gather moves 9x the IFM through SRAM).
//!
//! (Figures with the weights resident in SRAM, as a tuner times them; the unit tests pin them.
//! Bump [`COST_MODEL_VERSION`] when any of them moves.)
//!
//! # Networks: [`Pipeline`]
//!
//! Vela's network total is the sum of its per-layer figures, with weight DMA hidden under the
//! previous layer only. It reaches its totals on networks with large weights because its
//! encoder compresses trained weights (20x on the last layers of `mlperf_vww`), which shapes
//! cannot predict: with raw weight sizes, the sum of [`layer_cycles`] is 1.5x Vela's total for
//! `mlperf_vww`. [`Pipeline`] models what a driver that prefetches weights does instead: one DMA
//! channel on the flash port copies every layer's weights and scales into SRAM
//! ([`CostBreakdown::prefetch`]), in layer order and as early as a weight buffer of
//! [`U55Config::weight_buffer_bytes`] allows; a layer starts when its copy has landed and the
//! previous layer has finished, and then runs for [`CostBreakdown::prefetched`]. A network then
//! costs at least all of its weight bytes at flash speed and at least the sum of its
//! computation. **Simulated cycles per inference come from a [`Pipeline`]; per-layer figures
//! from [`layer_cycles`].** For the simulator: a compute job whose weights a transfer job has
//! already copied to SRAM costs `prefetched`, and that transfer costs `prefetch`.
//!
//! # Calibration (`tests/cost_calibration.rs`)
//!
//! Against Vela 5.2 for an Ethos-U55-128 (default system configuration, `Shared_Sram`),
//! constant tensors in flash; "ours" is the [`Pipeline`] total, "sum" the sum of
//! [`layer_cycles`]:
//!
//! | model | ours | sum | Vela | ours / Vela |
//! |---|---|---|---|---|
//! | convnet | 53 157 | 57 989 | 62 759 | 0.85 |
//! | inception | 248 037 | 247 684 | 255 238 | 0.97 |
//! | kws_dscnn | 90 472 | 88 223 | 89 716 | 1.01 |
//! | tiny_transformer | 47 399 | 50 453 | 52 580 | 0.90 |
//! | mlperf_ad | 239 759 | 228 240 | 201 184 | 1.19 |
//! | mlperf_ic | 184 715 | 195 185 | 201 747 | 0.92 |
//! | mlperf_kws | 90 672 | 88 423 | 89 900 | 1.01 |
//! | mlperf_vww | 231 691 | 326 792 | 220 870 | 1.05 |
//! | mlperf_ww | 48 670 | 50 125 | 59 693 | 0.82 |
//!
//! Per layer, [`layer_cycles`] is within 25% of Vela's figure for 67 of the 77 `CONV_2D` and
//! `DEPTHWISE_CONV_2D` operators (87%; 47 exact). The misses: the last seven 1x1 convolutions
//! of `mlperf_vww` (Vela streams weights it compressed 2x to 30x; the model charges 4/5), the
//! first 1x1 convolution of `mlperf_ww` (weights that compress less than 4/5), and two
//! `inception` convolutions after which Vela adds a separate ReLU pass.
//!
//! # What is simplified
//!
//! - **Weight encoding.** Vela compresses weights losslessly; the model charges
//!   [`U55Config::weight_encoding`] (4/5) of the raw bytes plus a 16-byte stream header. The
//!   true ratio ranges from 0.03 (the pruned last layers of `mlperf_vww`) over 0.44-0.85
//!   (trained dense layers, `mlperf_ad`) to 1.0-1.5 (random or tiny weights, which the encoder
//!   pads); 4/5 is the value that keeps every reference network within 25%.
//! - **Tensor formats.** Vela stores feature maps in the 16-channel brick format (NHCWB16)
//!   except at graph inputs/outputs and around reshapes; the model uses bricks for every
//!   feature map of depth 8 or more and NHWC for shallower ones (network inputs such as images
//!   and audio features), which is where the format matters most.
//! - **Scheduling.** No cascading (Vela's default `--optimise Performance` does not cascade
//!   these models), no lookup-table DMA, and Vela's weight-buffering heuristics reduced to
//!   "buffer when re-read"; its one-layer DMA slack is replaced by [`Pipeline`].
//! - **Data types.** int8 feature maps and weights (the 32-bit intermediates of the lowered
//!   operators are modelled); int16 is not calibrated.
//! - **Lowering details** Vela sometimes adds (a separate ReLU pass for some concatenated
//!   outputs, a second pass for some transposes, fusing `RSQRT` into a preceding `ADD`) are not
//!   reproduced.
//!
//! Cost of the model itself: the block search tries at most a few thousand candidates (up to
//! 16 x 32 x 16 for the largest layers); cache [`layer_cycles`] per layer if it is called
//! often on a slow core.
//!
//! # Source layout
//!
//! One private submodule per stage, so that each formula sits next to the ones it feeds:
//! `lowering` (a TFLite operator as NPU passes, and the im2col variant), `pass` (the pass and
//! shape vocabulary every stage shares), `block` (step 1), `compute` (steps 2 to 5, and where
//! they meet the traffic in step 7), `traffic` (step 6) and `pipeline` (networks). This module
//! holds the public API.

use core::cmp::max;

pub use npu_compute::hal::Variant;
pub use pipeline::{Pipeline, PIPELINE_SLOTS};

use compute::pass_cost;
use lowering::{im2col_cycles, lower};

mod block;
mod compute;
#[cfg(test)]
mod fixtures;
mod lowering;
mod pass;
mod pipeline;
mod traffic;

/// Version of the formulas in this module. Bump it whenever a change moves any figure (a
/// formula, a constant, the lowering of an operator, a variant's model): a tuning table
/// measured with another version is then recognised as foreign, through
/// [`SimNpu::tuning_fingerprint`](crate::SimNpu).
pub const COST_MODEL_VERSION: u32 = 1;

/// A TFLite operator's class in the cycle model: [`npu_compute::ops::LayerKind`], which each
/// operator's description gives ([`Op::layer`](npu_compute::ops::Op::layer)).
pub use npu_compute::ops::LayerKind;

/// One operator, as the cycle model sees it: everything here can be read from the operator's
/// tensor shapes, its options and the memory its constant operands live in.
///
/// Shapes are NHWC with 4 dimensions; lower-rank TFLite shapes are padded at the front
/// (`[16, 32]` is `[1, 1, 16, 32]`). A dimension of 0 makes the layer free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LayerDesc {
    /// The operator.
    pub kind: LayerKind,
    /// The (first) input feature map, NHWC.
    pub ifm: [u32; 4],
    /// The second input of binary operators (`Add`, `Sub`, `Mul`, `BatchMatmul`), NHWC,
    /// broadcast against `ifm`; `None` for the others.
    pub ifm2: Option<[u32; 4]>,
    /// The output feature map, NHWC.
    pub ofm: [u32; 4],
    /// Window height and width (convolution filter, pooling window); `(1, 1)` otherwise.
    pub kernel: (u32, u32),
    /// Vertical and horizontal stride.
    pub stride: (u32, u32),
    /// Vertical and horizontal dilation.
    pub dilation: (u32, u32),
    /// `Mean`: the reduced dimensions as a bit mask over NHWC (bit 1 = H, bit 2 = W, bit 3 =
    /// C). Ignored by the other kinds.
    pub axes: u8,
    /// Bytes of the constant weights (int8 filter or matrix), 0 if none.
    pub weight_bytes: u32,
    /// The weights (and the per-channel scales and biases) live in flash rather than in SRAM.
    pub weights_in_flash: bool,
    /// The second operand is a constant in flash (a scalar or a tensor).
    pub ifm2_in_flash: bool,
    /// How the NPU runs the layer: [`Variant::Auto`] (Vela's own block choice) unless a tuner
    /// forced a block or an im2col lowering (see [Variants](self#variants)).
    pub variant: Variant,
    /// Bits of each activation element: 8, or 16 for a 16x8 layer (`Conv2d`,
    /// `DepthwiseConv2d`, `FullyConnected`, `Add`, `Sub`, `Mul`: their passes then read and
    /// write 16-bit feature maps, with Vela's 16-bit block depths and MAC steps).
    pub element_bits: u8,
}

impl LayerDesc {
    /// A layer with unit window, stride and dilation, no weights, nothing in flash, run as
    /// [`Variant::Auto`].
    pub const fn new(kind: LayerKind, ifm: [u32; 4], ofm: [u32; 4]) -> Self {
        Self {
            kind,
            ifm,
            ifm2: None,
            ofm,
            kernel: (1, 1),
            stride: (1, 1),
            dilation: (1, 1),
            axes: 0,
            weight_bytes: 0,
            weights_in_flash: false,
            ifm2_in_flash: false,
            variant: Variant::Auto,
            element_bits: 8,
        }
    }
}

/// Parameters of the modelled NPU and its memory system. [`U55Config::ETHOS_U55_128`] is the
/// calibrated configuration (Vela's `ethos-u55-128`, default system configuration); the other
/// fields are exposed so that experiments can vary them, but only that configuration is
/// calibrated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct U55Config {
    /// Int8 multiply-accumulates per cycle: 128. The MAC-cycle formulas are those of the
    /// 128-MAC part; another value scales MAC cycles by `128 / macs_per_cycle`.
    pub macs_per_cycle: u32,
    /// Largest OFM block, H x W x C: 32 x 64 x 128.
    pub max_ofm_block: [u32; 3],
    /// SHRAM banks of 1 KiB: 24.
    pub shram_banks: u32,
    /// SRAM (AXI0) bytes per cycle: 8 (64-bit port at the NPU clock).
    pub sram_bytes_per_cycle: u32,
    /// SRAM read and write latency in cycles: 32 each.
    pub sram_latency: u32,
    /// SRAM burst length in bytes: 32.
    pub sram_burst_bytes: u32,
    /// Flash (AXI1) bytes per cycle: 1 (the 64-bit port at an eighth of the NPU clock).
    pub flash_bytes_per_cycle: u32,
    /// Flash read latency in cycles: 64.
    pub flash_latency: u32,
    /// Flash burst length in bytes: 128.
    pub flash_burst_bytes: u32,
    /// Encoded weight bytes per raw weight byte, as a fraction: 4/5. Vela's lossless weight
    /// codec; the measured ratio on the reference models ranges from 0.03 to 1.5 (see the
    /// module docs), 4/5 is the value that keeps every reference network within 25%.
    pub weight_encoding: (u32, u32),
    /// Bytes added to every encoded weight stream: 16 (header and padding).
    pub weight_stream_overhead: u32,
    /// Bytes of scale and bias per output channel: 10 (40-bit bias, 32-bit scale, 6-bit
    /// shift, packed).
    pub scale_bytes_per_channel: u32,
    /// SRAM set aside for prefetched weights by [`Pipeline`]: 128 KiB.
    pub weight_buffer_bytes: u32,
}

impl U55Config {
    /// Ethos-U55 with 128 MACs/cycle, SRAM at 8 bytes/cycle and flash at 1 byte/cycle (Vela's
    /// `Ethos_U55_High_End_Embedded`, `Shared_Sram`).
    pub const ETHOS_U55_128: U55Config = U55Config {
        macs_per_cycle: 128,
        max_ofm_block: [32, 64, 128],
        shram_banks: 24,
        sram_bytes_per_cycle: 8,
        sram_latency: 32,
        sram_burst_bytes: 32,
        flash_bytes_per_cycle: 1,
        flash_latency: 64,
        flash_burst_bytes: 128,
        weight_encoding: (4, 5),
        weight_stream_overhead: 16,
        scale_bytes_per_channel: 10,
        weight_buffer_bytes: 128 * 1024,
    };

    /// Ethos-U55 with 256 MACs/cycle in the same memory system as
    /// [`ETHOS_U55_128`](Self::ETHOS_U55_128): that configuration
    /// [with the MAC array](Self::with_mac_array) of 256. **Scaled, not calibrated.** Vela's
    /// `ethos-u55-256` (`architecture_features.py`, `accelerator_configs`) differs from
    /// `ethos-u55-128` in its MAC array (256 MACs, an OFM micro-block of 2 x 2 x 8 instead of
    /// 1 x 2 x 8), its SHRAM (48 banks instead of 24, with bank granules doubled), its output
    /// stage (8 elementwise units instead of 4: about 0.5x to 0.75x the cycles per output
    /// element) and nothing else (the system configuration, hence the memories, is the same).
    /// This model has the first two: MAC cycles halved (`macs_per_cycle` 256, the formulas'
    /// `128 / macs_per_cycle`) and 48 banks for the block search (with the 128's granules).
    /// The output stage keeps the 128's rates, so output-bound and elementwise layers cost as
    /// on a U55-128: an overestimate for them.
    pub const ETHOS_U55_256: U55Config = U55Config::ETHOS_U55_128.with_mac_array(256);

    /// This configuration with a MAC array of `macs` multiply-accumulates per cycle instead of
    /// [`REFERENCE_MACS_PER_CYCLE`] (128): `macs_per_cycle` and `shram_banks` scaled by
    /// `macs / 128` (rounded up, at least 1), everything else (memories, block limits, weight
    /// encoding) unchanged. `with_mac_array(128)` is `self`. Only 256 corresponds to a real
    /// part ([`ETHOS_U55_256`](Self::ETHOS_U55_256)); other sizes are extrapolations.
    pub const fn with_mac_array(self, macs: u32) -> U55Config {
        if macs == REFERENCE_MACS_PER_CYCLE {
            return self;
        }
        U55Config {
            macs_per_cycle: scale_by_mac_array(self.macs_per_cycle, macs),
            shram_banks: scale_by_mac_array(self.shram_banks, macs),
            ..self
        }
    }

    /// Cycles to copy `bytes` from flash to SRAM by DMA: the slower of reading flash and
    /// writing SRAM, each with its latency (Vela's `MemToMemCycles`).
    pub fn flash_to_sram_cycles(&self, bytes: u64) -> u64 {
        let read = (bytes / u64::from(self.flash_bytes_per_cycle.max(1)))
            .saturating_add(u64::from(self.flash_latency));
        let write = (bytes / u64::from(self.sram_bytes_per_cycle.max(1)))
            .saturating_add(u64::from(self.sram_latency));
        max(read, write)
    }

    /// Bytes of the encoded stream of `raw` weight bytes (0 stays 0).
    pub fn encoded_weight_bytes(&self, raw: u32) -> u64 {
        if raw == 0 {
            return 0;
        }
        let (num, den) = self.weight_encoding;
        u64::from(raw)
            .saturating_mul(u64::from(num))
            .div_ceil(u64::from(den.max(1)))
            .saturating_add(u64::from(self.weight_stream_overhead))
    }
}

/// The MAC array the calibrated figures are for (Ethos-U55-128): a unit of another size is
/// costed as this one scaled by `its MACs / 128` ([`U55Config::with_mac_array`]).
pub const REFERENCE_MACS_PER_CYCLE: u32 = 128;

/// `value * macs / 128`, rounded up, at least 1, saturating: a per-unit figure scaled to a
/// MAC array of `macs` from the reference's.
pub(crate) const fn scale_by_mac_array(value: u32, macs: u32) -> u32 {
    let scaled = (value as u64 * macs as u64).div_ceil(REFERENCE_MACS_PER_CYCLE as u64);
    if scaled == 0 {
        1
    } else if scaled > u32::MAX as u64 {
        u32::MAX
    } else {
        scaled as u32
    }
}

impl Default for U55Config {
    /// [`U55Config::ETHOS_U55_128`].
    fn default() -> Self {
        Self::ETHOS_U55_128
    }
}

/// The cycles of a layer and what bounds them. The memories run in parallel with the NPU, so
/// `total = max(compute, sram, flash)`; for a multi-pass layer every field is the sum over its
/// passes (and `total` the sum of the passes' maxima).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CostBreakdown {
    /// NPU cycles: MAC array, output stage and command issue, with the first input-block read
    /// and the last output-block write.
    pub compute: u64,
    /// SRAM port cycles: feature-map reads and writes, buffered-weight reads.
    pub sram: u64,
    /// Flash port cycles while the layer runs: streamed weights, scales, constant operands.
    pub flash: u64,
    /// Flash-to-SRAM DMA cycles of the weights buffered for re-reading. Not part of `total`:
    /// Vela overlaps this copy with the previous layer.
    pub weight_dma: u64,
    /// The layer's cycles: `max(compute, sram, flash)` (summed over passes).
    pub total: u64,
    /// DMA cycles to copy all of the layer's weights and scales from flash to SRAM ahead of
    /// time (0 if they are in SRAM already). What [`Pipeline`] schedules on the flash port.
    pub prefetch: u64,
    /// The layer's cycles once `prefetch` has been done: weights and scales read from SRAM.
    pub prefetched: u64,
    /// SRAM port cycles of the layer once `prefetch` has been done (the prefetched weights
    /// and scales read from SRAM, with the feature maps). Equals `sram` when nothing is
    /// prefetched.
    pub prefetched_sram: u64,
    /// Flash port cycles of the layer once `prefetch` has been done (constant operands left
    /// in flash). Equals `flash` when nothing is prefetched.
    pub prefetched_flash: u64,
}

impl CostBreakdown {
    fn add(&mut self, other: &CostBreakdown) {
        self.compute = self.compute.saturating_add(other.compute);
        self.sram = self.sram.saturating_add(other.sram);
        self.flash = self.flash.saturating_add(other.flash);
        self.weight_dma = self.weight_dma.saturating_add(other.weight_dma);
        self.total = self.total.saturating_add(other.total);
        self.prefetch = self.prefetch.saturating_add(other.prefetch);
        self.prefetched = self.prefetched.saturating_add(other.prefetched);
        self.prefetched_sram = self.prefetched_sram.saturating_add(other.prefetched_sram);
        self.prefetched_flash = self.prefetched_flash.saturating_add(other.prefetched_flash);
    }
}

/// Estimated cycles of one layer on its own, run as its [`LayerDesc::variant`] (see the
/// [module docs](self) for the model).
///
/// Total: any description gives a result (degenerate shapes cost 0, huge ones saturate). A
/// variant the layer does not support ([`variant_cycles`] answers `None`) is costed as
/// [`Variant::Auto`], so that [`Pipeline::push`] stays total too; the simulator refuses such
/// jobs at submit and never costs them.
pub fn layer_cycles(desc: &LayerDesc, cfg: &U55Config) -> CostBreakdown {
    match desc.variant {
        Variant::Auto => auto_cycles(desc, cfg),
        _ => variant_cycles(desc, cfg).unwrap_or_else(|| auto_cycles(desc, cfg)),
    }
}

/// The cycles of `desc` run as its [`LayerDesc::variant`], or `None` when the variant does not
/// apply to the layer (see [Variants](self#variants)): a block on a kind other than
/// convolution, depthwise convolution, pooling and fully connected, or a forced block whose
/// input and accumulators do not fit SHRAM at any depth; im2col on anything but a grouped-free
/// convolution with a window larger than 1 x 1 or a stride above 1. [`Variant::Auto`] is
/// always `Some`.
pub fn variant_cycles(desc: &LayerDesc, cfg: &U55Config) -> Option<CostBreakdown> {
    match desc.variant {
        Variant::Auto => Some(auto_cycles(desc, cfg)),
        Variant::Block { h, w } => block_cycles(desc, cfg, u32::from(h), u32::from(w)),
        Variant::Im2col => im2col_cycles(desc, cfg),
    }
}

/// Whether the NPU can run `desc` as its [`LayerDesc::variant`] ([`variant_cycles`] is
/// `Some`): what the simulator's
/// [`supports_variant`](npu_compute::hal::Npu::supports_variant) asks.
pub fn supports_variant(desc: &LayerDesc, cfg: &U55Config) -> bool {
    variant_cycles(desc, cfg).is_some()
}

/// [`Variant::Auto`]: every pass with Vela's own block choice. These are the calibrated
/// figures, which no variant may move.
fn auto_cycles(desc: &LayerDesc, cfg: &U55Config) -> CostBreakdown {
    let mut cost = CostBreakdown::default();
    lower(desc, cfg, &mut |pass| {
        cost.add(&pass_cost(pass, cfg, None).unwrap_or_default())
    });
    cost
}

/// [`Variant::Block`]: the layer's one pass with its OFM block forced to `h` x `w` (clipped
/// to the OFM), the depth still chosen by Vela's criterion. `None` if nothing fits.
fn block_cycles(desc: &LayerDesc, cfg: &U55Config, h: u32, w: u32) -> Option<CostBreakdown> {
    if !matches!(
        desc.kind,
        LayerKind::Conv2d
            | LayerKind::DepthwiseConv2d
            | LayerKind::FullyConnected
            | LayerKind::AveragePool
            | LayerKind::MaxPool
    ) {
        return None;
    }
    let mut cost = CostBreakdown::default();
    let mut fits = true;
    lower(
        desc,
        cfg,
        &mut |pass| match pass_cost(pass, cfg, Some((h, w))) {
            Some(c) => cost.add(&c),
            None => fits = false,
        },
    );
    fits.then_some(cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::fixtures::{as_variant, conv, resident, CFG, KWS_PW};

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s under miri, which interprets every step (thousands of random cases)"
    )]
    fn degenerate_and_huge_layers_do_not_panic() {
        let zero = conv([1, 0, 5, 64], [1, 25, 5, 64], 1, 4096);
        assert_eq!(layer_cycles(&zero, &CFG), CostBreakdown::default());
        let huge = LayerDesc {
            stride: (u32::MAX, u32::MAX),
            dilation: (u32::MAX, 0),
            ..conv([u32::MAX; 4], [u32::MAX; 4], u32::MAX, u32::MAX)
        };
        let c = layer_cycles(&huge, &CFG);
        assert!(c.total > 0);
        let weird = U55Config {
            shram_banks: 0,
            sram_bytes_per_cycle: 0,
            flash_bytes_per_cycle: 0,
            max_ofm_block: [0, 0, 0],
            weight_encoding: (1, 0),
            macs_per_cycle: 0,
            ..CFG
        };
        let _ = layer_cycles(&conv([1, 8, 8, 8], [1, 8, 8, 8], 3, 576), &weird);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s under miri, which interprets every step (thousands of random cases)"
    )]
    fn random_layers_never_panic() {
        // xorshift64: deterministic, and covers zero, one, huge and ordinary dimensions.
        fn next(state: &mut u64) -> u64 {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            *state
        }
        fn dim(state: &mut u64) -> u32 {
            match next(state) % 16 {
                0 => 0,
                1 => u32::MAX,
                2 => 1 << 20,
                r => (r as u32) * 7 % 61 + 1,
            }
        }
        fn shape(state: &mut u64) -> [u32; 4] {
            [dim(state), dim(state), dim(state), dim(state)]
        }
        let kinds = [
            LayerKind::Conv2d,
            LayerKind::DepthwiseConv2d,
            LayerKind::FullyConnected,
            LayerKind::AveragePool,
            LayerKind::MaxPool,
            LayerKind::Add,
            LayerKind::Sub,
            LayerKind::Mul,
            LayerKind::Softmax,
            LayerKind::Mean,
            LayerKind::Rsqrt,
            LayerKind::Logistic,
            LayerKind::Tanh,
            LayerKind::Relu,
            LayerKind::Transpose,
            LayerKind::Concatenation,
            LayerKind::Reshape,
            LayerKind::BatchMatmul,
            LayerKind::Quantize,
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let s = &mut state;
        let mut pipe = Pipeline::new(CFG);
        for _ in 0..2000 {
            let kind = kinds[(next(s) % kinds.len() as u64) as usize];
            let desc = LayerDesc {
                ifm2: next(s).is_multiple_of(2).then(|| shape(s)),
                kernel: (dim(s), dim(s)),
                stride: (dim(s), dim(s)),
                dilation: (dim(s), dim(s)),
                axes: next(s) as u8,
                weight_bytes: dim(s),
                weights_in_flash: next(s).is_multiple_of(2),
                ifm2_in_flash: next(s).is_multiple_of(2),
                ..LayerDesc::new(kind, shape(s), shape(s))
            };
            let alone = layer_cycles(&desc, &CFG);
            assert!(alone.total >= alone.compute);
            pipe.push(&desc);
            // Every variant, supported or not, is total too.
            let variants = [
                Variant::Block { h: 8, w: 8 },
                Variant::Block { h: 2, w: 32 },
                Variant::Block { h: 0, w: 255 },
                Variant::Im2col,
            ];
            let variant = variants[(next(s) % variants.len() as u64) as usize];
            let forced = LayerDesc { variant, ..desc };
            let _ = variant_cycles(&forced, &CFG);
            pipe.push(&forced);
        }
    }

    #[test]
    fn auto_variant_is_the_calibrated_model() {
        let d = resident(LayerKind::Conv2d, KWS_PW.0, KWS_PW.1, (1, 1), 1);
        assert_eq!(variant_cycles(&d, &CFG), Some(auto_cycles(&d, &CFG)));
        assert_eq!(layer_cycles(&d, &CFG).total, 5944);
    }

    #[test]
    fn unsupported_variants() {
        // mlperf_ic op 8: a 17 x 18 x 32 IFM block for 8 x 8 does not fit SHRAM.
        let d = resident(LayerKind::Conv2d, [1, 16, 16, 32], [1, 8, 8, 64], (3, 3), 2);
        let forced = as_variant(d, Variant::Block { h: 8, w: 8 });
        assert_eq!(variant_cycles(&forced, &CFG), None);
        assert!(!supports_variant(&forced, &CFG));
        // ... and an unsupported variant is costed as Auto.
        assert_eq!(layer_cycles(&forced, &CFG), layer_cycles(&d, &CFG));
        assert!(supports_variant(
            &as_variant(d, Variant::Block { h: 4, w: 4 }),
            &CFG
        ));
        // A zero-sized block never fits.
        for (h, w) in [(0, 8), (8, 0)] {
            assert!(!supports_variant(
                &as_variant(d, Variant::Block { h, w }),
                &CFG
            ));
        }
        // Im2col: not for 1 x 1 stride 1 (nothing to gather), depthwise or grouped.
        let pw = resident(LayerKind::Conv2d, KWS_PW.0, KWS_PW.1, (1, 1), 1);
        assert!(!supports_variant(&as_variant(pw, Variant::Im2col), &CFG));
        let strided = resident(LayerKind::Conv2d, [1, 8, 8, 16], [1, 4, 4, 16], (1, 1), 2);
        assert!(supports_variant(
            &as_variant(strided, Variant::Im2col),
            &CFG
        ));
        let dw = resident(
            LayerKind::DepthwiseConv2d,
            [1, 6, 6, 8],
            [1, 6, 6, 8],
            (3, 3),
            1,
        );
        assert!(!supports_variant(&as_variant(dw, Variant::Im2col), &CFG));
        let grouped = LayerDesc {
            weight_bytes: 3 * 3 * 8 * 16,
            ..resident(LayerKind::Conv2d, [1, 8, 8, 16], [1, 8, 8, 16], (3, 3), 1)
        };
        assert!(!supports_variant(
            &as_variant(grouped, Variant::Im2col),
            &CFG
        ));
        // Blocks: not for elementwise or multi-pass kinds.
        let add = LayerDesc {
            ifm2: Some([1, 4, 4, 8]),
            variant: Variant::Block { h: 2, w: 2 },
            ..LayerDesc::new(LayerKind::Add, [1, 4, 4, 8], [1, 4, 4, 8])
        };
        assert!(!supports_variant(&add, &CFG));
        // A batch-1 fully connected layer clips every block to 1 x 2: all equal Auto.
        let fc = resident(
            LayerKind::FullyConnected,
            [1, 1, 1, 128],
            [1, 1, 1, 64],
            (1, 1),
            1,
        );
        let fc = LayerDesc {
            weight_bytes: 128 * 64,
            ..fc
        };
        for (h, w) in [(8, 8), (2, 32), (32, 2)] {
            let c = variant_cycles(&as_variant(fc, Variant::Block { h, w }), &CFG);
            assert_eq!(c, Some(layer_cycles(&fc, &CFG)));
        }
    }
}

#[cfg(test)]
mod sixteen_bit {
    use super::*;
    use crate::cost::fixtures::{resident, CFG};

    /// A 16x8 layer costs more than the same int8 layer: twice the feature-map bytes through
    /// the SRAM port and, in the MAC array, Vela's 16-bit block depths and MAC steps (about
    /// twice the cycles). An elementwise pass is output-stage bound in both widths: only its
    /// traffic grows.
    #[test]
    fn int16_layers_cost_more_than_int8() {
        let wide = |d: LayerDesc| LayerDesc {
            element_bits: 16,
            ..d
        };
        let layers = [
            resident(
                LayerKind::Conv2d,
                [1, 16, 16, 32],
                [1, 16, 16, 32],
                (3, 3),
                1,
            ),
            resident(
                LayerKind::DepthwiseConv2d,
                [1, 16, 16, 64],
                [1, 16, 16, 64],
                (3, 3),
                1,
            ),
            resident(
                LayerKind::FullyConnected,
                [1, 1, 4, 256],
                [1, 1, 4, 64],
                (1, 1),
                1,
            ),
            LayerDesc {
                ifm2: Some([1, 16, 16, 32]),
                ..LayerDesc::new(LayerKind::Add, [1, 16, 16, 32], [1, 16, 16, 32])
            },
        ];
        for d in layers {
            let (c8, c16) = (layer_cycles(&d, &CFG), layer_cycles(&wide(d), &CFG));
            if d.kind == LayerKind::Add {
                assert_eq!(c16.compute, c8.compute);
            } else {
                assert!(c16.compute > c8.compute * 19 / 10, "{:?}", d.kind);
            }
            assert!(c16.sram > c8.sram * 3 / 2, "{:?}", d.kind);
        }
    }
}
