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

use core::cmp::{max, min};

pub use npu_compute::hal::Variant;

/// Version of the formulas in this module. Bump it whenever a change moves any figure (a
/// formula, a constant, the lowering of an operator, a variant's model): a tuning table
/// measured with another version is then recognised as foreign, through
/// [`SimNpu::tuning_fingerprint`](crate::SimNpu).
pub const COST_MODEL_VERSION: u32 = 1;

/// A TFLite operator kind, as the cycle model distinguishes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LayerKind {
    /// `CONV_2D`: `kernel`, `stride`, `dilation`, `weight_bytes` (`OHWI` filter).
    Conv2d,
    /// `DEPTHWISE_CONV_2D`: `kernel`, `stride`, `dilation`, `weight_bytes`.
    DepthwiseConv2d,
    /// `FULLY_CONNECTED`: input features are `ifm[3]`, every other input dimension is a batch
    /// row; `weight_bytes`.
    FullyConnected,
    /// `AVERAGE_POOL_2D`: `kernel` is the window, `stride`.
    AveragePool,
    /// `MAX_POOL_2D`: `kernel` is the window, `stride`.
    MaxPool,
    /// `ADD` (`ifm2` the second operand, broadcast as in TFLite).
    Add,
    /// `SUB`.
    Sub,
    /// `MUL`.
    Mul,
    /// `SOFTMAX` over the innermost dimension (28 NPU passes).
    Softmax,
    /// `MEAN` over the dimensions in `axes` (a depthwise sum and a rescale).
    Mean,
    /// `RSQRT` (a lookup table).
    Rsqrt,
    /// `LOGISTIC` (a lookup table).
    Logistic,
    /// `TANH` (a lookup table).
    Tanh,
    /// A standalone `RELU`, `RELU6` or `RELU_N1_TO_1` (one pass through the output stage).
    Relu,
    /// `TRANSPOSE`: one read and one write of the tensor.
    Transpose,
    /// `CONCATENATION`: free (producers write into the concatenated tensor).
    Concatenation,
    /// `RESHAPE`, `SQUEEZE`, `EXPAND_DIMS`: free.
    Reshape,
    /// `BATCH_MATMUL`: `ifm` is the left operand `[1, B, M, K]`, `ifm2` the right operand
    /// `[1, B, K, N]`, `ofm` `[1, B, M, N]`.
    BatchMatmul,
    /// `QUANTIZE` / `REQUANTIZE` between int8 scales (one pass through the output stage).
    Quantize,
}

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

    fn sram(&self) -> Mem {
        Mem {
            bytes_per_cycle: u64::from(self.sram_bytes_per_cycle.max(1)),
            read_latency: u64::from(self.sram_latency),
            write_latency: u64::from(self.sram_latency),
            burst: u64::from(self.sram_burst_bytes.max(1)),
        }
    }

    fn flash(&self) -> Mem {
        Mem {
            bytes_per_cycle: u64::from(self.flash_bytes_per_cycle.max(1)),
            read_latency: u64::from(self.flash_latency),
            write_latency: 0,
            burst: u64::from(self.flash_burst_bytes.max(1)),
        }
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

/// [`Variant::Im2col`]: a DMA gathers every output pixel's receptive field into a
/// `rows x K` int8 matrix in SRAM (`rows = N * OH * OW`, `K = KH * KW * Cin`), then one
/// vector-product pass multiplies it by the OHWI filter, which is already the `Cout x K`
/// matrix. Both run in series within the job.
fn im2col_cycles(desc: &LayerDesc, cfg: &U55Config) -> Option<CostBreakdown> {
    if desc.kind != LayerKind::Conv2d {
        return None;
    }
    let (kh, kw) = desc.kernel;
    let window = u64::from(kh).saturating_mul(u64::from(kw));
    // A 1 x 1, stride-1 convolution already is a matrix product: there is nothing to gather.
    if window <= 1 && desc.stride.0 <= 1 && desc.stride.1 <= 1 {
        return None;
    }
    if desc.ifm.contains(&0) || desc.ofm.contains(&0) {
        return Some(CostBreakdown::default());
    }
    let [n, oh, ow, cout] = desc.ofm;
    let cin = desc.ifm[3];
    let k = window.saturating_mul(u64::from(cin));
    // Grouped convolutions (a filter shallower than the input) are not one matrix product.
    if u64::from(desc.weight_bytes) != k.saturating_mul(u64::from(cout)) {
        return None;
    }
    let k = u32::try_from(k).ok()?;
    let rows = u64::from(n)
        .saturating_mul(u64::from(oh))
        .saturating_mul(u64::from(ow));
    let matrix = rows.saturating_mul(u64::from(k));
    // Each patch row is KH segments of KW * Cin contiguous input bytes (Cin bytes when the
    // window is dilated along W); a segment shorter than a burst is charged the whole burst.
    let segment = u64::from(if desc.dilation.1 <= 1 {
        kw.saturating_mul(cin)
    } else {
        cin
    });
    let sram = cfg.sram();
    let read = matrix.saturating_mul(sram.burst) / min(sram.burst, segment.max(1));
    // SRAM to SRAM: Vela's MemToMem rule, the slower of the (burst-scaled) read and the write.
    let gather = max(
        (read / sram.bytes_per_cycle).saturating_add(sram.read_latency),
        (matrix / sram.bytes_per_cycle).saturating_add(sram.write_latency),
    );
    // The product: the FC lowering, rows folded into H x W, the matrix read as NHWC.
    let (h, w) = fc_rows(rows);
    let mut product = Pass::new(
        NpuOp::VectorProduct,
        Shp::new(h, w, k),
        Shp::new(h, w, cout),
    );
    product.ifm_fmt = Fmt::Nhwc;
    product.weights = cfg.encoded_weight_bytes(desc.weight_bytes);
    product.scales = u64::from(cfg.scale_bytes_per_channel).saturating_mul(u64::from(cout));
    product.consts_in_flash = desc.weights_in_flash;
    let mut cost = pass_cost(&product, cfg, None)?;
    cost.compute = cost.compute.saturating_add(gather);
    cost.sram = cost
        .sram
        .saturating_add(read.saturating_add(matrix) / sram.bytes_per_cycle);
    cost.total = cost.total.saturating_add(gather);
    cost.prefetched = cost.prefetched.saturating_add(gather);
    Some(cost)
}

/// Chains layers the way a driver that prefetches weights runs a network (see the
/// [module docs](self)): one DMA channel on the flash port copies each layer's weights and
/// scales ([`CostBreakdown::prefetch`]) into a weight buffer of
/// [`U55Config::weight_buffer_bytes`], in layer order and as early as the buffer has room; a
/// layer starts when the previous one has finished and its copy has landed, and then runs for
/// [`CostBreakdown::prefetched`].
///
/// Deterministic and allocation-free: the buffer remembers at most [`PIPELINE_SLOTS`] layers
/// in flight (more stall the prefetch until the oldest finishes).
#[derive(Clone, Copy, Debug)]
pub struct Pipeline {
    cfg: U55Config,
    npu_end: u64,
    dma_end: u64,
    /// `(end cycle of the consuming layer, bytes held)` of prefetched, not yet consumed layers.
    slots: [(u64, u64); PIPELINE_SLOTS],
    used: usize,
}

/// Layers whose prefetched weights a [`Pipeline`] keeps track of at once.
pub const PIPELINE_SLOTS: usize = 16;

impl Pipeline {
    /// An empty pipeline at cycle 0.
    pub const fn new(cfg: U55Config) -> Self {
        Self {
            cfg,
            npu_end: 0,
            dma_end: 0,
            slots: [(0, 0); PIPELINE_SLOTS],
            used: 0,
        }
    }

    /// Runs `desc` after the layers pushed so far. Returns [`layer_cycles`] of the layer with
    /// `total` replaced by the cycles the layer adds to the inference (its run time plus any
    /// wait for its weights).
    pub fn push(&mut self, desc: &LayerDesc) -> CostBreakdown {
        let cost = layer_cycles(desc, &self.cfg);
        self.push_cost(cost)
    }

    /// [`push`](Self::push) for a cost computed already.
    pub fn push_cost(&mut self, cost: CostBreakdown) -> CostBreakdown {
        let staged_cycles = cost.prefetch;
        // The buffer holds about what the flash port moved (its latency counts as a few bytes).
        let staged_bytes =
            staged_cycles.saturating_mul(u64::from(self.cfg.flash_bytes_per_cycle.max(1)));
        let budget = u64::from(self.cfg.weight_buffer_bytes);
        let mut dma_start = self.dma_end;
        if staged_cycles > 0 {
            loop {
                self.retire(dma_start);
                let live = self.slots[..self.used]
                    .iter()
                    .fold(0u64, |acc, s| acc.saturating_add(s.1));
                let full = self.used == PIPELINE_SLOTS;
                if self.used == 0 || (!full && live.saturating_add(staged_bytes) <= budget) {
                    break;
                }
                // Wait until the earliest layer holding buffer space has finished.
                let earliest = self.slots[..self.used]
                    .iter()
                    .map(|s| s.0)
                    .min()
                    .unwrap_or(dma_start);
                dma_start = max(dma_start, earliest);
            }
            self.dma_end = dma_start.saturating_add(staged_cycles);
        }
        let start = max(
            self.npu_end,
            if staged_cycles > 0 { self.dma_end } else { 0 },
        );
        let end = start.saturating_add(cost.prefetched);
        if staged_cycles > 0 && self.used < PIPELINE_SLOTS {
            self.slots[self.used] = (end, staged_bytes);
            self.used += 1;
        }
        let charged = end.saturating_sub(self.npu_end);
        self.npu_end = end;
        CostBreakdown {
            total: charged,
            ..cost
        }
    }

    /// Cycles from the start of the first layer to the end of the last one pushed.
    pub fn total(&self) -> u64 {
        self.npu_end
    }

    /// Frees the buffer space of layers that have finished by `now`.
    fn retire(&mut self, now: u64) {
        let mut i = 0;
        while i < self.used {
            if self.slots[i].0 <= now {
                self.used -= 1;
                self.slots[i] = self.slots[self.used];
            } else {
                i += 1;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lowering: a TFLite operator as the NPU passes Vela generates for it.
// ---------------------------------------------------------------------------------------------

/// The NPU's operation types, as the performance model distinguishes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NpuOp {
    Conv,
    Depthwise,
    VectorProduct,
    Pooling,
    ReduceSum,
    Elementwise,
    MatMul,
    Transpose,
}

/// Feature-map storage format: NHWC, or Ethos-U bricks of 16 channels (NHCWB16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fmt {
    Nhwc,
    Brick,
}

/// A feature-map (or block) shape with the batch folded into the height.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shp {
    h: u32,
    w: u32,
    c: u32,
}

impl Shp {
    const fn new(h: u32, w: u32, c: u32) -> Self {
        Self { h, w, c }
    }

    /// NHWC to `Shp`, the batch folded into H.
    fn nhwc(s: [u32; 4]) -> Self {
        Self::new(s[0].saturating_mul(s[1]), s[2], s[3])
    }

    fn elems(self) -> u64 {
        self.wh().saturating_mul(u64::from(self.c))
    }

    fn wh(self) -> u64 {
        u64::from(self.h) * u64::from(self.w)
    }

    fn min(self, o: Shp) -> Shp {
        Shp::new(min(self.h, o.h), min(self.w, o.w), min(self.c, o.c))
    }

    /// The shape as stored: the depth rounded up to 16 in the brick format.
    fn stored(self, fmt: Fmt) -> Shp {
        match fmt {
            Fmt::Brick => Shp::new(self.h, self.w, round_up(self.c, 16)),
            Fmt::Nhwc => self,
        }
    }

    fn is_scalar(self) -> bool {
        self.elems() == 1
    }
}

/// The format Vela would most likely pick: bricks, except for maps shallower than one
/// micro-block (8 channels), where bricks would be mostly padding.
fn fmt_for(depth: u32) -> Fmt {
    if depth >= 8 {
        Fmt::Brick
    } else {
        Fmt::Nhwc
    }
}

/// Output-stage cost per element, in quarter cycles (Vela's `s_EthosU55PerfInfo` for the
/// 128-MAC part).
mod ao {
    /// 32-bit unary elementwise (0.75).
    pub const EW32_UNARY: u32 = 3;
    /// 32-bit binary elementwise (1.25).
    pub const EW32_BINARY: u32 = 5;
    /// Multiply, any width (0.75).
    pub const MUL: u32 = 3;
    /// 8-bit add and subtract (1.5: rescaling both operands).
    pub const ADD_SUB: u32 = 6;
    /// Max pooling (0.25).
    pub const MAX_POOL: u32 = 1;
    /// Everything else: convolutions, average pooling, rescales (0.5).
    pub const OTHER: u32 = 2;
    /// Activation through the lookup table (sigmoid, tanh, LUT).
    pub const LUT: u32 = 4;
}

/// One NPU pass.
#[derive(Clone, Copy, Debug)]
struct Pass {
    op: NpuOp,
    ifm: Shp,
    ifm2: Option<Shp>,
    ofm: Shp,
    kernel: (u32, u32),
    stride: (u32, u32),
    dilation: (u32, u32),
    ifm_bits: u32,
    ifm2_bits: u32,
    ofm_bits: u32,
    /// Output-stage quarter cycles per element (already the max with the activation's).
    ao_quarters: u32,
    lut_bytes: u32,
    /// Encoded weight-stream bytes and scale bytes.
    weights: u64,
    scales: u64,
    /// Weights and scales live in flash.
    consts_in_flash: bool,
    ifm_in_flash: bool,
    ifm2_in_flash: bool,
    ifm_fmt: Fmt,
    ifm2_fmt: Fmt,
    ofm_fmt: Fmt,
}

impl Pass {
    fn new(op: NpuOp, ifm: Shp, ofm: Shp) -> Self {
        Self {
            op,
            ifm,
            ifm2: None,
            ofm,
            kernel: (1, 1),
            stride: (1, 1),
            dilation: (1, 1),
            ifm_bits: 8,
            ifm2_bits: 8,
            ofm_bits: 8,
            ao_quarters: ao::OTHER,
            lut_bytes: 0,
            weights: 0,
            scales: 0,
            consts_in_flash: false,
            ifm_in_flash: false,
            ifm2_in_flash: false,
            ifm_fmt: fmt_for(ifm.c),
            ifm2_fmt: Fmt::Nhwc,
            ofm_fmt: fmt_for(ofm.c),
        }
    }

    fn with_ifm2(mut self, ifm2: Shp, fmt: Fmt) -> Self {
        self.ifm2 = Some(ifm2);
        self.ifm2_fmt = fmt;
        self
    }

    fn bits(mut self, ifm: u32, ifm2: u32, ofm: u32) -> Self {
        self.ifm_bits = ifm;
        self.ifm2_bits = ifm2;
        self.ofm_bits = ofm;
        self
    }

    fn formats(mut self, ifm: Fmt, ofm: Fmt) -> Self {
        self.ifm_fmt = ifm;
        self.ofm_fmt = ofm;
        self
    }

    fn ao(mut self, quarters: u32) -> Self {
        self.ao_quarters = quarters;
        self
    }
}

/// Calls `emit` with every NPU pass of `desc`.
fn lower(desc: &LayerDesc, cfg: &U55Config, emit: &mut dyn FnMut(&Pass)) {
    let shapes_empty =
        desc.ifm.contains(&0) || desc.ofm.contains(&0) || desc.ifm2.is_some_and(|s| s.contains(&0));
    if shapes_empty {
        return;
    }
    let ifm = Shp::nhwc(desc.ifm);
    let ofm = Shp::nhwc(desc.ofm);
    let ifm2 = desc.ifm2.map(Shp::nhwc);
    let weights = cfg.encoded_weight_bytes(desc.weight_bytes);
    let scales = u64::from(cfg.scale_bytes_per_channel).saturating_mul(u64::from(ofm.c));
    let with_weights = |mut p: Pass| {
        p.weights = weights;
        p.scales = scales;
        p.consts_in_flash = desc.weights_in_flash;
        p.kernel = desc.kernel;
        p.stride = desc.stride;
        p.dilation = desc.dilation;
        p
    };
    match desc.kind {
        LayerKind::Conv2d => emit(&with_weights(Pass::new(NpuOp::Conv, ifm, ofm))),
        LayerKind::DepthwiseConv2d => emit(&with_weights(Pass::new(NpuOp::Depthwise, ifm, ofm))),
        LayerKind::FullyConnected => {
            // Vela folds the batch rows into a roughly square H x W.
            let cin = desc.ifm[3];
            let rows = (ifm.elems() / u64::from(cin.max(1))).max(1);
            let (h, w) = fc_rows(rows);
            let mut p = with_weights(Pass::new(
                NpuOp::VectorProduct,
                Shp::new(h, w, cin),
                Shp::new(h, w, ofm.c),
            ));
            p.kernel = (1, 1);
            p.stride = (1, 1);
            p.dilation = (1, 1);
            emit(&p);
        }
        LayerKind::AveragePool | LayerKind::MaxPool => {
            let mut p = Pass::new(NpuOp::Pooling, ifm, ofm);
            p.kernel = desc.kernel;
            p.stride = desc.stride;
            if desc.kind == LayerKind::MaxPool {
                p.ao_quarters = ao::MAX_POOL;
            }
            emit(&p);
        }
        LayerKind::Add | LayerKind::Sub | LayerKind::Mul => {
            let quarters = if desc.kind == LayerKind::Mul {
                ao::MUL
            } else {
                ao::ADD_SUB
            };
            let second = ifm2.unwrap_or(ifm);
            let mut p = Pass::new(NpuOp::Elementwise, ifm, ofm)
                .with_ifm2(second, fmt_for(second.c))
                .ao(quarters);
            p.ifm2_in_flash = desc.ifm2_in_flash;
            emit(&p);
        }
        LayerKind::Rsqrt | LayerKind::Logistic | LayerKind::Tanh => {
            // An output-stage pass (Vela's AvgPool "nop") through a 256-entry lookup table.
            let mut p = Pass::new(NpuOp::Pooling, ifm, ofm).ao(ao::LUT);
            p.lut_bytes = 256;
            emit(&p);
        }
        LayerKind::Relu | LayerKind::Quantize => emit(&Pass::new(NpuOp::Pooling, ifm, ofm)),
        LayerKind::Softmax => lower_softmax(desc.ofm, emit),
        LayerKind::Mean => lower_mean(desc, cfg, emit),
        LayerKind::Transpose => emit(&Pass::new(NpuOp::Transpose, ifm, ofm)),
        LayerKind::BatchMatmul => {
            // The right operand as Vela reads it (pre-transposed): B x N x K.
            let rhs = ifm2.unwrap_or(ifm);
            let transposed = Shp::new(rhs.h, ofm.c, ifm.c);
            emit(&Pass::new(NpuOp::MatMul, ifm, ofm).with_ifm2(transposed, Fmt::Nhwc));
        }
        LayerKind::Concatenation | LayerKind::Reshape => {}
    }
}

/// Vela's reshape of `rows` fully-connected rows into H x W: W about the square root.
fn fc_rows(rows: u64) -> (u32, u32) {
    if rows <= 1 {
        return (1, 1);
    }
    // The first divisor from about the square root up; bounded, since a large prime would take
    // as many steps as its size (Vela then ends at W = rows).
    let first = max(rows / 16, isqrt_ceil(rows));
    let w = (first..first.saturating_add(4096))
        .find(|w| rows % w == 0)
        .unwrap_or(rows);
    let h = rows / w;
    (
        u32::try_from(h).unwrap_or(u32::MAX),
        u32::try_from(w).unwrap_or(u32::MAX),
    )
}

fn isqrt_ceil(n: u64) -> u64 {
    // Newton's method on integers; n > 1 here.
    let mut x = n;
    let mut y = x.div_ceil(2);
    while y < x {
        x = y;
        y = x.saturating_add(n / x) / 2;
    }
    // x = floor(sqrt(n))
    if x.saturating_mul(x) < n {
        x + 1
    } else {
        x
    }
}

/// `MEAN`: a depthwise sum over the reduced extent (into 32-bit accumulators) and a 32-bit
/// multiply by the reciprocal of the count, read from flash.
fn lower_mean(desc: &LayerDesc, cfg: &U55Config, emit: &mut dyn FnMut(&Pass)) {
    let [n, h, w, c] = desc.ifm;
    let (rh, rw, rc) = (
        desc.axes & 0b0010 != 0,
        desc.axes & 0b0100 != 0,
        desc.axes & 0b1000 != 0,
    );
    let (input, kernel, output) = if rc {
        // Reduce the depth: Vela views the tensor as rows x C x 1 and sums along W.
        let mut rows = u64::from(n);
        let mut len = u64::from(c);
        for (dim, reduced) in [(h, rh), (w, rw)] {
            if reduced {
                len = len.saturating_mul(u64::from(dim));
            } else {
                rows = rows.saturating_mul(u64::from(dim));
            }
        }
        let rows = u32::try_from(rows).unwrap_or(u32::MAX);
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        (Shp::new(rows, len, 1), (1, len), Shp::new(rows, 1, 1))
    } else {
        let kh = if rh { h } else { 1 };
        let kw = if rw { w } else { 1 };
        (
            Shp::new(n.saturating_mul(h), w, c),
            (kh, kw),
            Shp::new(
                n.saturating_mul(if rh { 1 } else { h }),
                if rw { 1 } else { w },
                c,
            ),
        )
    };
    // The summing weights are generated ones, which the encoder compresses to almost nothing;
    // the scales are per output channel.
    let scales = u64::from(cfg.scale_bytes_per_channel).saturating_mul(u64::from(output.c));
    let mut sum = Pass::new(NpuOp::Depthwise, input, output).bits(8, 8, 32);
    sum.kernel = kernel;
    sum.scales = scales;
    sum.consts_in_flash = true;
    sum.ofm_fmt = Fmt::Brick;
    emit(&sum);
    let rescale = Pass::new(NpuOp::Elementwise, output, output)
        .with_ifm2(Shp::new(1, 1, 1), Fmt::Nhwc)
        .bits(32, 32, 8)
        .formats(Fmt::Brick, fmt_for(output.c))
        .ao(ao::EW32_BINARY);
    emit(&Pass {
        ifm2_in_flash: true,
        ..rescale
    });
}

/// `SOFTMAX` (int8) as Vela lowers it: the row maximum, `exp(x - max)` through a lookup table
/// into 32 bits, the row sums, a reciprocal of each sum by Newton-Raphson iterations on the
/// row vector (20 small 32-bit passes, 10 of them reading a constant from flash), and the
/// scaling of every element.
fn lower_softmax(ofm: [u32; 4], emit: &mut dyn FnMut(&Pass)) {
    let [n, h, w, c] = ofm;
    let nh = n.saturating_mul(h);
    let rows = nh.saturating_mul(w);
    let all = Shp::new(nh, w, c);
    let row_sums = Shp::new(nh, w, 1);
    let row_vec = Shp::new(nh, 1, w);
    let scalar = Shp::new(1, 1, 1);
    let ew = |ifm: Shp, ofm: Shp| Pass::new(NpuOp::Elementwise, ifm, ofm);

    let mut max_pass = Pass::new(NpuOp::Pooling, Shp::new(rows, c, 1), Shp::new(rows, 1, 1))
        .formats(Fmt::Nhwc, Fmt::Nhwc)
        .ao(ao::MAX_POOL);
    max_pass.kernel = (1, c);
    emit(&max_pass);
    let mut exp = ew(all, all)
        .with_ifm2(row_sums, Fmt::Nhwc)
        .bits(8, 8, 32)
        .formats(Fmt::Nhwc, Fmt::Brick)
        .ao(max(ao::ADD_SUB, ao::LUT));
    exp.lut_bytes = 1024;
    emit(&exp);
    let shift = ew(all, all)
        .with_ifm2(scalar, Fmt::Nhwc)
        .bits(32, 32, 32)
        .formats(Fmt::Brick, Fmt::Nhwc)
        .ao(ao::EW32_BINARY);
    emit(&Pass {
        ifm2_in_flash: true,
        ..shift
    });
    emit(
        &Pass::new(NpuOp::ReduceSum, all, row_sums)
            .bits(32, 32, 32)
            .formats(Fmt::Nhwc, Fmt::Nhwc),
    );
    emit(
        &ew(row_vec, row_vec)
            .bits(32, 32, 32)
            .formats(Fmt::Nhwc, Fmt::Brick)
            .ao(ao::EW32_UNARY),
    );
    // The reciprocal: which of the 20 passes read a constant from flash, as the first or the
    // second operand.
    const CONST_FIRST: [usize; 4] = [0, 6, 11, 16];
    const CONST_SECOND: [usize; 6] = [1, 3, 4, 8, 13, 18];
    for i in 0..20 {
        let base = ew(row_vec, row_vec)
            .bits(32, 32, 32)
            .formats(Fmt::Brick, Fmt::Brick)
            .ao(ao::EW32_BINARY);
        let pass = if CONST_FIRST.contains(&i) {
            Pass {
                ifm: scalar,
                ifm_fmt: Fmt::Nhwc,
                ifm_in_flash: true,
                ..base.with_ifm2(row_vec, Fmt::Brick)
            }
        } else if CONST_SECOND.contains(&i) {
            Pass {
                ifm2_in_flash: true,
                ..base.with_ifm2(scalar, Fmt::Nhwc)
            }
        } else {
            base.with_ifm2(row_vec, Fmt::Brick)
        };
        emit(&pass);
    }
    emit(
        &ew(all, all)
            .with_ifm2(row_sums, Fmt::Nhwc)
            .bits(32, 32, 32)
            .formats(Fmt::Brick, Fmt::Brick)
            .ao(ao::EW32_BINARY),
    );
    let add = ew(all, all)
        .with_ifm2(all, Fmt::Brick)
        .bits(32, 32, 32)
        .formats(Fmt::Nhwc, Fmt::Brick)
        .ao(ao::EW32_BINARY);
    emit(&Pass {
        ifm_in_flash: true,
        ..add
    });
    emit(
        &ew(all, all)
            .with_ifm2(row_sums, Fmt::Nhwc)
            .bits(32, 32, 8)
            .formats(Fmt::Brick, Fmt::Nhwc)
            .ao(ao::EW32_BINARY),
    );
}

// ---------------------------------------------------------------------------------------------
// One pass: block configuration, compute cycles, memory traffic.
// ---------------------------------------------------------------------------------------------

/// Micro-block (H, W, C) of the 128-MAC part.
const UBLOCK: Shp = Shp::new(1, 2, 8);
/// Largest kernel piece the hardware processes at once, H and W.
const SUBKERNEL: u32 = 8;
/// SHRAM bank size in bytes.
const BANK_BYTES: u32 = 1024;
/// SHRAM banks reserved at the bottom for the output.
const RESERVED_OUTPUT_BANKS: u32 = 2;
/// OFM depth granule of the block search.
const OFM_SPLIT_DEPTH: u32 = 16;
/// Cycles per output micro-block write-back: the floor of a MAC step.
const WRITE_BACK_CYCLES: u64 = 32;

/// A memory as the performance model sees it.
#[derive(Clone, Copy, Debug)]
struct Mem {
    bytes_per_cycle: u64,
    read_latency: u64,
    write_latency: u64,
    burst: u64,
}

/// The chosen block configuration of a pass.
#[derive(Clone, Copy, Debug)]
struct BlockConfig {
    ofm: Shp,
    ifm: Shp,
    part_kernel: bool,
}

/// The cost of one pass, with Vela's block choice (`forced` = `None`) or with the OFM block's
/// H x W forced (see [`search_block`]). `None` only when a forced block does not fit, or is
/// asked of a pass that has no MAC block to force (transpose, matrix multiply, elementwise).
fn pass_cost(p: &Pass, cfg: &U55Config, forced: Option<(u32, u32)>) -> Option<CostBreakdown> {
    if p.ifm.elems() == 0 || p.ofm.elems() == 0 {
        return Some(CostBreakdown::default());
    }
    let sram = cfg.sram();
    let flash = cfg.flash();
    if forced.is_some() && matches!(p.op, NpuOp::Transpose | NpuOp::MatMul | NpuOp::Elementwise) {
        return None;
    }
    Some(match p.op {
        NpuOp::Transpose => {
            let read = p.ifm.elems().saturating_mul(u64::from(p.ifm_bits)) / 8;
            let write = p.ofm.elems().saturating_mul(u64::from(p.ofm_bits)) / 8;
            let compute = max(
                (read / sram.bytes_per_cycle).saturating_add(sram.read_latency),
                (write / sram.bytes_per_cycle).saturating_add(sram.write_latency),
            );
            let sram_cycles = read.saturating_add(write) / sram.bytes_per_cycle;
            finish(compute, sram_cycles, 0)
        }
        NpuOp::MatMul => matmul_cost(p, cfg),
        NpuOp::Elementwise => {
            let block = find_block(p, cfg);
            let compute = elementwise_cycles(p, &block, cfg);
            let traffic = access(p, &block, false, cfg);
            finish(
                compute,
                traffic.sram / sram.bytes_per_cycle,
                traffic.flash / flash.bytes_per_cycle,
            )
        }
        _ => {
            let block = match forced {
                None => find_block(p, cfg),
                // A forced block never falls back to the micro-block: that would be another
                // variant, and a tuner would time it under the wrong name.
                Some(hw) => search_block(p, cfg, Some(hw)).ok()?,
            };
            let has_weights = p.weights > 0 && p.consts_in_flash;
            let refetch = weight_refetches(p, &block);
            // Weights that several OFM blocks re-read are buffered in SRAM (Vela's weight
            // buffering); weights read once stream from flash.
            let buffered = has_weights && refetch > 1;
            let compute = mac_op_cycles(p, &block, buffered, cfg);
            let traffic = access(p, &block, buffered, cfg);
            let mut cost = finish(
                compute,
                traffic.sram / sram.bytes_per_cycle,
                traffic.flash / flash.bytes_per_cycle,
            );
            if buffered {
                cost.weight_dma = cfg.flash_to_sram_cycles(p.weights);
            }
            let constants = p.weights.saturating_add(p.scales);
            if p.consts_in_flash && constants > 0 {
                // Prefetched: weights and scales copied to SRAM before the layer, read there.
                let staged = Pass {
                    consts_in_flash: false,
                    ..*p
                };
                let traffic = access(&staged, &block, false, cfg);
                cost.prefetch = cfg.flash_to_sram_cycles(constants);
                cost.prefetched = max(
                    mac_op_cycles(&staged, &block, false, cfg),
                    max(
                        traffic.sram / sram.bytes_per_cycle,
                        traffic.flash / flash.bytes_per_cycle,
                    ),
                );
            }
            cost
        }
    })
}

/// A pass without constants to prefetch.
fn finish(compute: u64, sram: u64, flash: u64) -> CostBreakdown {
    let total = max(compute, max(sram, flash));
    CostBreakdown {
        compute,
        sram,
        flash,
        weight_dma: 0,
        total,
        prefetch: 0,
        prefetched: total,
    }
}

fn round_up(v: u32, to: u32) -> u32 {
    v.div_ceil(to.max(1)).saturating_mul(to.max(1))
}

fn div_ceil_shape(a: Shp, b: Shp) -> Shp {
    Shp::new(
        a.h.div_ceil(b.h.max(1)),
        a.w.div_ceil(b.w.max(1)),
        a.c.div_ceil(b.c.max(1)),
    )
}

/// A non-negative rational for exact comparisons of the block search's costs.
#[derive(Clone, Copy, Debug)]
struct Ratio {
    num: u128,
    den: u128,
}

impl Ratio {
    fn le(self, o: Ratio) -> bool {
        self.num.saturating_mul(o.den) <= o.num.saturating_mul(self.den)
    }

    fn eq(self, o: Ratio) -> bool {
        self.num.saturating_mul(o.den) == o.num.saturating_mul(self.den)
    }
}

/// Part-kernel traversal when the input is shallow or it uses the MACs better than
/// depth-first (Vela's `ChooseKernelMethod`).
fn choose_part_kernel(ifm_depth: u32, ifm_bits: u32, kernel: (u32, u32)) -> bool {
    if ifm_depth <= 8 {
        return true;
    }
    let k = u64::from(kernel.0) * u64::from(kernel.1);
    let d = u64::from(ifm_depth);
    let depth_round = u64::from(round_up(ifm_depth, if ifm_bits == 8 { 32 } else { 16 }));
    let d8 = u64::from(round_up(ifm_depth, 8));
    let k_round = k.div_ceil(if ifm_bits == 8 { 4 } else { 2 }) * if ifm_bits == 8 { 4 } else { 2 };
    // part = d/d8 * k/k_round  >=  depth = d/depth_round
    let part = u128::from(d) * u128::from(k) * u128::from(depth_round);
    let depth = u128::from(d) * u128::from(d8) * u128::from(k_round);
    part >= depth
}

fn dilated(k: u32, d: u32) -> u32 {
    k.saturating_sub(1)
        .saturating_mul(d.max(1))
        .saturating_add(1)
}

/// Vela's `FindBlockConfig`: the OFM block (and the IFM block feeding it) that fits SHRAM and
/// fetches the least per output element; one micro-block if nothing fits.
fn find_block(p: &Pass, cfg: &U55Config) -> BlockConfig {
    match search_block(p, cfg, None) {
        Ok(block) | Err(block) => block,
    }
}

/// The block search. `forced`: only OFM blocks of that H x W, clipped to the search space
/// (`H = min(h, OFM H, max H)`, `W = min(w, OFM W, max W)` rounded up to the micro-block's 2),
/// with the depth still searched; `None` searches every H x W, which is exactly Vela's search.
/// `Err` when no candidate fits SHRAM, with the micro-block Vela then falls back to.
fn search_block(
    p: &Pass,
    cfg: &U55Config,
    forced: Option<(u32, u32)>,
) -> Result<BlockConfig, BlockConfig> {
    let ifm = match p.ifm2 {
        Some(i2) if i2.elems() > p.ifm.elems() => i2,
        _ => p.ifm,
    };
    let op = match p.op {
        NpuOp::MatMul => NpuOp::ReduceSum,
        other => other,
    };
    let ew = op == NpuOp::Elementwise;
    let uses_scalar = p.ifm.is_scalar() || p.ifm2.is_some_and(Shp::is_scalar);
    let ew_full = ew && !(uses_scalar && p.ifm_bits <= 16);
    let is_pool = matches!(op, NpuOp::Pooling | NpuOp::ReduceSum);
    let is_rsum = op == NpuOp::ReduceSum;
    let is_dw = op == NpuOp::Depthwise;
    let equal_depth = ew || (is_pool && !is_rsum) || is_dw;
    let part_kernel = op == NpuOp::Conv && choose_part_kernel(ifm.c, p.ifm_bits, p.kernel);

    let acc_bits = 32u32;
    let acc_granule = 8u32;
    let ifm_granule = if p.ifm_bits == 32 { 8 } else { 4 };
    let lut_banks = max(p.lut_bytes.div_ceil(BANK_BYTES), 2);
    let total_banks = cfg.shram_banks;

    let dkh = dilated(p.kernel.0, p.dilation.0);
    let dkw = dilated(p.kernel.1, p.dilation.1);
    let ifm_repeats = u64::from(dkw.div_ceil(SUBKERNEL)) * u64::from(dkh.div_ceil(SUBKERNEL));
    let ifm_block_depth = if p.ifm_bits == 16 {
        round_up(min(ifm.c, 16), 4)
    } else {
        round_up(min(ifm.c, if part_kernel { 16 } else { 32 }), UBLOCK.c)
    };
    let has_weights = matches!(op, NpuOp::Conv | NpuOp::Depthwise);
    let weight_fetch_wh = if has_weights {
        u64::from(p.kernel.0) * u64::from(p.kernel.1)
    } else {
        0
    };

    // The search space, bounded so that the "won't fit" set is a fixed bitmap.
    let max_h = cfg.max_ofm_block[0].clamp(1, 64);
    let max_w = cfg.max_ofm_block[1].clamp(2, 128);
    let max_c = cfg.max_ofm_block[2].clamp(8, 1024);
    let ofm = p.ofm;
    let space = Shp::new(
        min(ofm.h, max_h),
        round_up(min(ofm.w, max_w), UBLOCK.w),
        round_up(min(ofm.c, max_c), UBLOCK.c),
    );
    // Inclusive ranges of the candidate heights and widths. A forced block narrows both to
    // one value; a zero request leaves them empty (nothing fits).
    let ((h_lo, h_hi), (w_lo, w_hi)) = match forced {
        None => ((1, space.h), (UBLOCK.w, space.w)),
        Some((h, w)) => {
            let h = min(h, space.h);
            let w = round_up(min(w, space.w), UBLOCK.w);
            if h == 0 || w == 0 {
                ((1, 0), (UBLOCK.w, 0))
            } else {
                ((h, h), (w, w))
            }
        }
    };
    let mut wont_fit = [0u64; 64];
    let ofm_elems = u128::from(ofm.elems());
    let ifm_elems = u128::from(ifm.elems());

    let mut best: Option<(Ratio, Option<Ratio>, BlockConfig)> = None;
    let mut depth = space.c.clamp(UBLOCK.c, OFM_SPLIT_DEPTH);
    if depth < ofm.c {
        depth = round_up(depth, OFM_SPLIT_DEPTH);
    }
    while depth <= space.c {
        for height in h_lo..=h_hi {
            for width in (w_lo..=w_hi).step_by(UBLOCK.w as usize) {
                let bit = 1u64 << ((width / UBLOCK.w - 1) % 64);
                let row = ((height - 1) % 64) as usize;
                if wont_fit[row] & bit != 0 {
                    continue;
                }
                let ofm_block = Shp::new(height, width, depth);
                let ih = (height - 1)
                    .saturating_mul(p.stride.0.max(1))
                    .saturating_add(min(dkh, SUBKERNEL));
                let iw = round_up(
                    (width - 1)
                        .saturating_mul(p.stride.1.max(1))
                        .saturating_add(min(dkw, SUBKERNEL)),
                    UBLOCK.w,
                );
                let ifm_block = Shp::new(ih, iw, if equal_depth { depth } else { ifm_block_depth });

                // SHRAM: reserved output banks, double-buffered IFM, then accumulators (or a
                // second IFM for elementwise) below the lookup table.
                let ifm_bytes = ifm_block.wh().saturating_mul(u64::from(round_up(
                    ifm_block.c.saturating_mul(p.ifm_bits / 8),
                    8,
                )));
                let ifm_banks = round_up(
                    u32::try_from(ifm_bytes.div_ceil(u64::from(BANK_BYTES)))
                        .unwrap_or(u32::MAX)
                        .saturating_mul(2),
                    ifm_granule,
                );
                let lut_start = total_banks.saturating_sub(lut_banks);
                let mut ifm_end = RESERVED_OUTPUT_BANKS.saturating_add(ifm_banks);
                let mut acc_start = lut_start;
                let mut fits = true;
                if ew {
                    let ifm2_banks = if ew_full { ifm_banks } else { 0 };
                    if ifm_end.saturating_add(ifm2_banks) > acc_start {
                        fits = false;
                    }
                    ifm_end = acc_start;
                } else {
                    let acc_bytes =
                        ofm_block.wh() * u64::from(round_up(depth, 8)) * u64::from(acc_bits) / 8;
                    let acc_banks = round_up(
                        u32::try_from(acc_bytes.div_ceil(u64::from(BANK_BYTES)))
                            .unwrap_or(u32::MAX)
                            .saturating_mul(2),
                        acc_granule,
                    );
                    acc_start = acc_start.saturating_sub(acc_banks);
                    if acc_banks > lut_start {
                        fits = false;
                    }
                }
                if !fits || ifm_end > acc_start {
                    wont_fit[row] |= bit;
                    continue;
                }

                // Relative cost (input and weight fetch per output element), as a rational.
                let full = div_ceil_shape(ofm, ofm_block);
                let mut cost = if ew {
                    Ratio {
                        num: ofm_elems,
                        den: u128::from(height) * u128::from(width) * u128::from(depth),
                    }
                } else {
                    // Saturating: only absurd shapes get near the limits, and then any
                    // choice will do.
                    let product = |factors: &[u64]| {
                        factors
                            .iter()
                            .fold(1u128, |acc, &f| acc.saturating_mul(u128::from(f)))
                    };
                    let mut weight_fetch = product(&[
                        weight_fetch_wh,
                        u64::from(ifm.c),
                        u64::from(full.h),
                        u64::from(full.w),
                    ]);
                    if !is_dw {
                        weight_fetch = weight_fetch.saturating_mul(u128::from(ofm.c));
                    }
                    let mut ifm_fetch = product(&[
                        ifm_block.wh(),
                        u64::from(ifm.c),
                        ifm_repeats,
                        u64::from(ofm.h),
                        u64::from(ofm.w),
                    ]);
                    if !equal_depth {
                        ifm_fetch = ifm_fetch.saturating_mul(u128::from(full.c));
                    }
                    let hw = u128::from(height) * u128::from(width);
                    Ratio {
                        num: ifm_fetch.saturating_add(weight_fetch.saturating_mul(hw)),
                        den: hw.saturating_mul(ofm_elems.max(1)),
                    }
                };
                if ifm_elems < u128::from(ifm_block.elems()) * 2 {
                    cost.den = cost.den.saturating_mul(2);
                }

                let block = BlockConfig {
                    ofm: ofm_block,
                    ifm: ifm_block,
                    part_kernel,
                };
                match best {
                    None => best = Some((cost, None, block)),
                    Some((best_cost, best_cov, _)) if cost.le(best_cost) => {
                        if cost.eq(best_cost) {
                            // Equal cost: prefer the larger IFM coverage, for small blocks only.
                            let cov_shape = ifm.min(ifm_block);
                            let coverage = Ratio {
                                num: u128::from(ifm.wh()),
                                den: u128::from(cov_shape.wh().max(1)),
                            };
                            let better = best_cov.is_none_or(|b| coverage.le(b));
                            if better && height <= 4 && width <= 4 {
                                best = Some((cost, Some(coverage), block));
                            }
                        } else {
                            best = Some((cost, None, block));
                        }
                    }
                    Some(_) => {}
                }
            }
        }
        depth = depth.saturating_add(UBLOCK.c);
        if depth < ofm.c {
            depth = round_up(depth, OFM_SPLIT_DEPTH);
        }
        if depth == u32::MAX {
            break;
        }
    }
    best.map(|b| b.2).ok_or(BlockConfig {
        // Nothing fits (only possible with a custom configuration or a forced block): one
        // micro-block.
        ofm: UBLOCK,
        ifm: Shp::new(
            min(dkh, SUBKERNEL),
            round_up(min(dkw, SUBKERNEL), UBLOCK.w),
            if equal_depth {
                UBLOCK.c
            } else {
                ifm_block_depth
            },
        ),
        part_kernel,
    })
}

/// Vela's `EstimateMemoryTransfer`: bytes charged for moving `elements` between the NPU and a
/// memory, scaled up when a transfer cannot fill the memory's burst.
fn memory_transfer(
    read: bool,
    mem: &Mem,
    fmt: Fmt,
    bits: u32,
    block: Shp,
    shape: Shp,
    elements: u64,
) -> u64 {
    // Burst length in bits; products of u32 values by at most 32 * 16 fit a u128 easily.
    let bits = u128::from(bits);
    let (bw, bc) = (u128::from(block.w), u128::from(block.c));
    let burst_bits: u128 = match fmt {
        Fmt::Brick => {
            let z_stride = u128::from(shape.w) * bits * 16 / 8;
            if z_stride == bc {
                bits * bw * bc
            } else {
                16 * bits * bw
            }
        }
        Fmt::Nhwc => {
            let x_stride = u128::from(shape.c) * bits / 8;
            if read {
                if x_stride == bc {
                    bits * bw * bc
                } else {
                    bits * bc
                }
            } else if bc <= 16 && x_stride == bc {
                bits * bw * bc
            } else {
                min(min(512, 16 * bits), bc * bits)
            }
        }
    };
    let bits64 = u64::try_from(bits).unwrap_or(u64::MAX);
    let bytes = elements.saturating_mul(bits64) / 8;
    let burst_bytes = min(mem.burst, u64::try_from(burst_bits / 8).unwrap_or(u64::MAX)).max(1);
    bytes.saturating_mul(mem.burst) / burst_bytes
}

fn ifm_mem(p: &Pass, second: bool, cfg: &U55Config) -> Mem {
    let in_flash = if second {
        p.ifm2_in_flash
    } else {
        p.ifm_in_flash
    };
    if in_flash {
        cfg.flash()
    } else {
        cfg.sram()
    }
}

/// Cycles to read the first IFM block (of each input): latency + bytes / bandwidth.
fn ifm_block_cycles(p: &Pass, block: &BlockConfig, cfg: &U55Config) -> u64 {
    let mut worst = 0;
    let inputs = [(Some(p.ifm), p.ifm_fmt, false), (p.ifm2, p.ifm2_fmt, true)];
    for (shape, fmt, second) in inputs {
        let Some(shape) = shape else { continue };
        let mem = ifm_mem(p, second, cfg);
        let elements = shape.min(block.ifm).elems();
        let bytes = memory_transfer(true, &mem, fmt, p.ifm_bits, block.ifm, shape, elements);
        worst = max(
            worst,
            mem.read_latency.saturating_add(bytes / mem.bytes_per_cycle),
        );
    }
    worst
}

/// Cycles to write the last OFM block: latency + bytes / bandwidth.
fn ofm_block_cycles(p: &Pass, block: &BlockConfig, cfg: &U55Config) -> u64 {
    let mem = cfg.sram();
    let elements = p.ofm.min(block.ofm).elems();
    let bytes = memory_transfer(
        false, &mem, p.ofm_fmt, p.ofm_bits, block.ofm, p.ofm, elements,
    );
    mem.write_latency
        .saturating_add(bytes / mem.bytes_per_cycle)
}

/// Vela's `EstimateMacCyclesPerBlock`.
fn mac_cycles_per_block(p: &Pass, block: &BlockConfig, cfg: &U55Config) -> u64 {
    let ifm_block = p.ifm.min(block.ifm);
    let ofm_block = p.ofm.min(block.ofm);
    let ublocks = div_ceil_shape(ofm_block, UBLOCK);
    let n_wh = ublocks.wh();
    let n_c = u64::from(ublocks.c);
    let ifm_block_passes = u64::from(ifm_block.c.div_ceil(8));
    let (kh, kw) = if p.op == NpuOp::VectorProduct {
        (1, 1)
    } else {
        (p.kernel.0.max(1), p.kernel.1.max(1))
    };
    // The kernel splits into pieces of at most 8 x 8: full pieces and the remainders along H
    // and W, each size costed once and multiplied by its count (a huge kernel stays cheap).
    let pieces = |k: u32| {
        [
            (u64::from(k / SUBKERNEL), SUBKERNEL),
            (u64::from(k % SUBKERNEL != 0), k % SUBKERNEL),
        ]
    };
    let mut total: u64 = 0;
    for (count_w, sub_w) in pieces(kw) {
        for (count_h, sub_h) in pieces(kh) {
            let count = count_w.saturating_mul(count_h);
            if count == 0 {
                continue;
            }
            let sub = u64::from(sub_h) * u64::from(sub_w);
            let (steps, cycles) = match p.op {
                NpuOp::Pooling => (
                    1,
                    max(4, sub)
                        .saturating_mul(n_wh)
                        .saturating_mul(n_c)
                        .saturating_mul(u64::from(p.ifm_bits / 2)),
                ),
                NpuOp::Depthwise => {
                    let steps = sub.div_ceil(4);
                    let per = 4 * n_wh * u64::from(p.ifm_bits / 8).max(1);
                    (steps, max(WRITE_BACK_CYCLES, per) * steps * n_c)
                }
                NpuOp::Conv if block.part_kernel => {
                    let steps = sub.div_ceil(4);
                    (
                        steps,
                        max(WRITE_BACK_CYCLES, 4 * n_wh) * steps * n_c * ifm_block_passes,
                    )
                }
                _ => (sub, max(WRITE_BACK_CYCLES, 4 * n_wh) * sub * n_c),
            };
            // Single micro-block blocks stall 2 cycles per step.
            let mut delay = 0;
            if n_wh == 1 {
                if n_c == 1 {
                    delay = 2 * steps;
                } else if steps > 1 {
                    delay = 2 * (steps - 1) * n_c;
                }
            }
            if p.op == NpuOp::Conv && block.part_kernel {
                delay *= ifm_block_passes;
            }
            total = total.saturating_add(cycles.saturating_add(delay).saturating_mul(count));
        }
    }
    if matches!(p.op, NpuOp::Conv | NpuOp::VectorProduct | NpuOp::ReduceSum) {
        total = total.saturating_mul(u64::from(p.ifm.c.div_ceil(ifm_block.c.max(1))));
    }
    let macs = u64::from(cfg.macs_per_cycle.max(1));
    if macs == 128 {
        total
    } else {
        total.saturating_mul(128).div_ceil(macs)
    }
}

/// Vela's `EstimateMacOpCycles`, for a pass that is both first and last in its cascade.
fn mac_op_cycles(p: &Pass, block: &BlockConfig, buffered: bool, cfg: &U55Config) -> u64 {
    let ofm_block = p.ofm.min(block.ofm);
    let per_block = div_ceil_shape(ofm_block, UBLOCK).elems().max(1);
    let all = div_ceil_shape(p.ofm, UBLOCK).elems();
    // Everything per block is kept in 1/1024 cycles: AO has quarters, the scale fetch /256,
    // the command limit /4.
    const UNIT: u128 = 1024;
    let ao_compute = u128::from(
        u64::from(p.ao_quarters)
            .saturating_mul(ofm_block.elems())
            .div_ceil(4),
    );
    let mut ao = ao_compute * UNIT;
    let has_scales =
        matches!(p.op, NpuOp::Conv | NpuOp::Depthwise | NpuOp::VectorProduct) && p.scales > 0;
    if has_scales {
        let latency = if buffered || !p.consts_in_flash {
            cfg.sram().read_latency
        } else {
            cfg.flash().read_latency
        };
        // 10 * C * latency / 256 cycles
        let bias = 10 * u128::from(ofm_block.c) * u128::from(latency) * (UNIT / 256);
        ao = max(ao, bias);
    }
    let mac = u128::from(mac_cycles_per_block(p, block, cfg)) * UNIT;
    let ifm_cycles = ifm_block_cycles(p, block, cfg);
    let ofm_cycles = ofm_block_cycles(p, block, cfg);
    let min_mem = if all > per_block {
        u128::from(ofm_cycles.abs_diff(ifm_cycles)) * UNIT
    } else {
        0
    };
    let cmd = min_mem.saturating_add(mac).saturating_add(ao) / 4;
    let mac_b = max(mac, cmd);
    let ao_b = max(ao, cmd);
    let all = u128::from(all);
    let per_block = u128::from(per_block);
    let body = if mac_b > ao_b {
        (mac_b.saturating_mul(all) / (per_block * UNIT)).saturating_add(ao_b / UNIT)
    } else {
        ao_b.saturating_mul(all)
            .saturating_add(mac_b.saturating_mul(per_block))
            / (per_block * UNIT)
    };
    u64::try_from(body)
        .unwrap_or(u64::MAX)
        .saturating_add(ofm_cycles)
        .saturating_add(ifm_cycles)
}

/// Vela's `EstimateElementwiseCycles`.
fn elementwise_cycles(p: &Pass, block: &BlockConfig, cfg: &U55Config) -> u64 {
    let elements = u128::from(p.ofm.stored(p.ofm_fmt).elems());
    let q = u128::from(p.ao_quarters);
    let ao = (q * elements).div_ceil(4);
    let block_elems = u128::from(block.ofm.elems().max(1));
    let io = u128::from(max(
        ofm_block_cycles(p, block, cfg),
        ifm_block_cycles(p, block, cfg),
    ));
    // cmd = ceil(elements * (io / block_elems + q / 4) / 4)
    let cmd = elements
        .saturating_mul(io.saturating_mul(4).saturating_add(q * block_elems))
        .div_ceil(16 * block_elems);
    u64::try_from(max(ao, cmd)).unwrap_or(u64::MAX)
}

/// Times the weights are read: once per OFM block in H x W.
fn weight_refetches(p: &Pass, block: &BlockConfig) -> u64 {
    let blocks = div_ceil_shape(p.ofm, p.ofm.min(block.ofm));
    blocks.wh()
}

/// Bytes a pass moves, per memory.
#[derive(Clone, Copy, Debug, Default)]
struct Traffic {
    sram: u64,
    flash: u64,
}

impl Traffic {
    fn charge(&mut self, in_flash: bool, bytes: u64) {
        if in_flash {
            self.flash = self.flash.saturating_add(bytes);
        } else {
            self.sram = self.sram.saturating_add(bytes);
        }
    }
}

/// Vela's `MeasureElementAccess` + `ElementTransferToBytes` + `MeasureAccessCycles`.
fn access(p: &Pass, block: &BlockConfig, buffered: bool, cfg: &U55Config) -> Traffic {
    let mut t = Traffic::default();
    let ifm_round = |s: Shp| s.stored(p.ifm_fmt);
    let (ifm_read, ifm2_read, refetch) = if p.op == NpuOp::Elementwise {
        let mut first = 0;
        let mut second = 0;
        if p.ifm.is_scalar() {
            if p.ifm_bits > 8 {
                first = ifm_round(p.ifm).elems();
            } else if p.ifm2.is_some() {
                second = ifm_round(p.ofm).elems();
            }
        } else {
            first = ifm_round(p.ofm).elems();
            if let Some(i2) = p.ifm2 {
                if i2.elems() > 1 {
                    second = first;
                } else if p.ifm2_bits > 8 {
                    second = ifm_round(i2).elems();
                }
            }
        }
        (first, second, 0)
    } else {
        let ifm_block = p.ifm.min(block.ifm);
        let ofm_block = p.ofm.min(block.ofm);
        let mut blocks = div_ceil_shape(p.ofm, ofm_block);
        if matches!(p.op, NpuOp::Depthwise | NpuOp::Pooling) {
            blocks.c = 1;
        }
        let (kh, kw) = if p.op == NpuOp::VectorProduct {
            (1, 1)
        } else {
            p.kernel
        };
        let subkernels = u64::from(kw.div_ceil(SUBKERNEL)) * u64::from(kh.div_ceil(SUBKERNEL));
        let fetch = ifm_block.wh().saturating_mul(u64::from(ifm_round(p.ifm).c));
        let read = fetch
            .saturating_mul(subkernels)
            .saturating_mul(blocks.elems());
        (read, 0, blocks.wh())
    };
    let bytes = memory_transfer(
        true,
        &ifm_mem(p, false, cfg),
        p.ifm_fmt,
        p.ifm_bits,
        block.ifm,
        p.ifm,
        ifm_read,
    );
    t.charge(p.ifm_in_flash, bytes);
    if let Some(i2) = p.ifm2 {
        let bytes = memory_transfer(
            true,
            &ifm_mem(p, true, cfg),
            p.ifm2_fmt,
            p.ifm2_bits,
            block.ifm,
            i2,
            ifm2_read,
        );
        t.charge(p.ifm2_in_flash, bytes);
    }
    let written = p.ofm.stored(p.ofm_fmt).elems();
    t.charge(
        false,
        memory_transfer(
            false,
            &cfg.sram(),
            p.ofm_fmt,
            p.ofm_bits,
            block.ofm,
            p.ofm,
            written,
        ),
    );
    if matches!(p.op, NpuOp::Conv | NpuOp::Depthwise | NpuOp::VectorProduct) {
        let weights = p.weights.saturating_mul(refetch);
        let scales = p.scales.saturating_mul(refetch);
        // Buffered weights are read from SRAM; scales always come from where they live.
        t.charge(p.consts_in_flash && !buffered, weights);
        t.charge(p.consts_in_flash, scales);
    }
    t
}

/// Vela's `EstimateMatMulCycles`: an elementwise multiply into 32 bits and a reduce-sum, per
/// output column.
fn matmul_cost(p: &Pass, cfg: &U55Config) -> CostBreakdown {
    let lhs = p.ifm;
    let rhs = p.ifm2.unwrap_or(p.ifm);
    let batches = p.ofm.h;
    let columns = u64::from(rhs.w);
    let fitted = matmul_dependency_fit(lhs, cfg);
    let rhs_row = Shp::new(batches, 1, rhs.c);

    let mul_search = Pass::new(NpuOp::Elementwise, fitted, fitted)
        .with_ifm2(rhs_row, Fmt::Nhwc)
        .bits(p.ifm_bits, p.ifm_bits, 32)
        .formats(Fmt::Nhwc, Fmt::Nhwc)
        .ao(ao::MUL);
    let mul_block = find_block(&mul_search, cfg);
    let sum_ofm = matmul_dependency_fit(Shp::new(batches, lhs.w, 1), cfg);
    let sum_search = Pass {
        ofm: sum_ofm,
        op: NpuOp::ReduceSum,
        ..mul_search.bits(32, 32, p.ofm_bits)
    };
    let sum_block = find_block(&sum_search, cfg);

    let mul = Pass::new(NpuOp::Elementwise, lhs, lhs)
        .with_ifm2(lhs, Fmt::Nhwc)
        .bits(p.ifm_bits, p.ifm_bits, 32)
        .formats(Fmt::Nhwc, Fmt::Nhwc)
        .ao(ao::MUL);
    let mul_cycles = elementwise_cycles(&mul, &mul_block, cfg);
    let sum = Pass::new(NpuOp::ReduceSum, lhs, Shp::new(lhs.h, lhs.w, 1))
        .bits(p.ifm_bits, p.ifm_bits, p.ofm_bits)
        .formats(Fmt::Nhwc, Fmt::Nhwc);
    let sum_cycles = mac_op_cycles(&sum, &sum_block, false, cfg);
    let compute = mul_cycles
        .saturating_add(sum_cycles)
        .saturating_mul(columns);

    // Traffic: the left operand once per column, the right one once, a 32-bit temporary
    // written and read back, the output written.
    let lhs_bytes = lhs.elems().saturating_mul(columns);
    let tmp_bytes = lhs_bytes.saturating_mul(4);
    let sram_bytes = lhs_bytes
        .saturating_add(rhs.elems())
        .saturating_add(tmp_bytes.saturating_mul(2))
        .saturating_add(p.ofm.elems());
    finish(compute, sram_bytes / cfg.sram().bytes_per_cycle, 0)
}

/// Vela's `MatMulDependencyFit`: split H (or W) into 2 or 3 blocks to reduce stalls.
fn matmul_dependency_fit(s: Shp, cfg: &U55Config) -> Shp {
    let tall = s.h > cfg.max_ofm_block[0];
    let (value, limit) = if tall {
        (s.h, cfg.max_ofm_block[0])
    } else {
        (s.w, cfg.max_ofm_block[1])
    };
    if value > limit {
        return s;
    }
    for divider in [3u32, 2] {
        if value >= 4 * divider {
            let v = value.div_ceil(divider);
            return if tall {
                Shp::new(v, s.w, s.c)
            } else {
                Shp::new(s.h, v, s.c)
            };
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: U55Config = U55Config::ETHOS_U55_128;

    fn conv(ifm: [u32; 4], ofm: [u32; 4], k: u32, weights: u32) -> LayerDesc {
        LayerDesc {
            kernel: (k, k),
            weight_bytes: weights,
            weights_in_flash: true,
            ..LayerDesc::new(LayerKind::Conv2d, ifm, ofm)
        }
    }

    #[test]
    fn worked_example_compute_matches_vela() {
        // ETHOS_U55_CYCLE_MODEL.md section 4: mlperf_kws layer 2, 1x1 conv 64 -> 64 on 25x5.
        let c = layer_cycles(&conv([1, 25, 5, 64], [1, 25, 5, 64], 1, 4096), &CFG);
        assert_eq!(c.compute, 5944);
        assert_eq!(c.total, 5944);
    }

    #[test]
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
                ifm2: (next(s) % 2 == 0).then(|| shape(s)),
                kernel: (dim(s), dim(s)),
                stride: (dim(s), dim(s)),
                dilation: (dim(s), dim(s)),
                axes: next(s) as u8,
                weight_bytes: dim(s),
                weights_in_flash: next(s) % 2 == 0,
                ifm2_in_flash: next(s) % 2 == 0,
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
    fn free_kinds_cost_nothing() {
        for kind in [LayerKind::Reshape, LayerKind::Concatenation] {
            let d = LayerDesc::new(kind, [1, 4, 4, 4], [1, 4, 4, 4]);
            assert_eq!(layer_cycles(&d, &CFG).total, 0);
        }
    }

    #[test]
    fn pipeline_hides_weights_under_compute() {
        let big = conv([1, 32, 32, 32], [1, 32, 32, 32], 3, 9216);
        let fc = LayerDesc {
            weight_bytes: 16384,
            weights_in_flash: true,
            ..LayerDesc::new(LayerKind::FullyConnected, [1, 1, 1, 128], [1, 1, 1, 128])
        };
        let (a, b) = (layer_cycles(&big, &CFG), layer_cycles(&fc, &CFG));
        // Nothing overlapped: every copy, then every layer.
        let serial = a.prefetch + a.prefetched + b.prefetch + b.prefetched;
        let mut pipe = Pipeline::new(CFG);
        let charged = pipe.push(&big).total + pipe.push(&fc).total;
        assert_eq!(charged, pipe.total());
        assert!(pipe.total() < serial);
        // Never faster than the NPU's work or the flash port's.
        assert!(pipe.total() >= a.compute + b.compute);
        assert!(pipe.total() >= a.prefetch + b.prefetch);
    }

    /// A convolution-like layer with its weights resident in SRAM (what a tuner times), run as
    /// `variant`.
    fn resident(kind: LayerKind, ifm: [u32; 4], ofm: [u32; 4], k: (u32, u32), s: u32) -> LayerDesc {
        let (cin, cout) = (ifm[3], ofm[3]);
        let weights = k.0
            * k.1
            * if kind == LayerKind::Conv2d {
                cin * cout
            } else {
                cout
            };
        LayerDesc {
            kernel: k,
            stride: (s, s),
            weight_bytes: weights,
            ..LayerDesc::new(kind, ifm, ofm)
        }
    }

    fn as_variant(desc: LayerDesc, variant: Variant) -> LayerDesc {
        LayerDesc { variant, ..desc }
    }

    const KWS_PW: ([u32; 4], [u32; 4]) = ([1, 25, 5, 64], [1, 25, 5, 64]);

    #[test]
    fn auto_variant_is_the_calibrated_model() {
        let d = resident(LayerKind::Conv2d, KWS_PW.0, KWS_PW.1, (1, 1), 1);
        assert_eq!(variant_cycles(&d, &CFG), Some(auto_cycles(&d, &CFG)));
        assert_eq!(layer_cycles(&d, &CFG).total, 5944);
    }

    #[test]
    fn forcing_autos_own_block_changes_nothing() {
        // Vela's block for the worked example is 9 x 6 x 32.
        let d = resident(LayerKind::Conv2d, KWS_PW.0, KWS_PW.1, (1, 1), 1);
        let forced = as_variant(d, Variant::Block { h: 9, w: 6 });
        assert_eq!(layer_cycles(&forced, &CFG), layer_cycles(&d, &CFG));
        let in_flash = LayerDesc {
            weights_in_flash: true,
            ..d
        };
        let forced = as_variant(in_flash, Variant::Block { h: 9, w: 6 });
        assert_eq!(layer_cycles(&forced, &CFG), layer_cycles(&in_flash, &CFG));
    }

    #[test]
    fn kws_pointwise_4x16_beats_vela_by_its_tail() {
        let d = resident(LayerKind::Conv2d, KWS_PW.0, KWS_PW.1, (1, 1), 1);
        let c = layer_cycles(&as_variant(d, Variant::Block { h: 4, w: 16 }), &CFG);
        assert_eq!(c.total, 5744);
    }

    #[test]
    fn vww_depthwise_16x4_leaves_the_32_cycle_floor() {
        let d = resident(
            LayerKind::DepthwiseConv2d,
            [1, 6, 6, 128],
            [1, 6, 6, 128],
            (3, 3),
            1,
        );
        assert_eq!(layer_cycles(&d, &CFG).total, 5512);
        let c = layer_cycles(&as_variant(d, Variant::Block { h: 16, w: 4 }), &CFG);
        assert_eq!(c.total, 3832);
    }

    #[test]
    fn kws_conv0_im2col_is_a_gather_and_a_product() {
        let d = resident(
            LayerKind::Conv2d,
            [1, 49, 10, 1],
            [1, 25, 5, 64],
            (10, 4),
            2,
        );
        assert_eq!(layer_cycles(&d, &CFG).total, 25001);
        let c = layer_cycles(&as_variant(d, Variant::Im2col), &CFG);
        assert_eq!(c.total, 11884);
        // The product alone: 125 rows of K = 40 (folded into 5 x 25), read as NHWC.
        let mut product = Pass::new(
            NpuOp::VectorProduct,
            Shp::new(5, 25, 40),
            Shp::new(5, 25, 64),
        );
        product.ifm_fmt = Fmt::Nhwc;
        product.weights = CFG.encoded_weight_bytes(2560);
        product.scales = 640;
        let product = pass_cost(&product, &CFG, None).unwrap_or_default();
        assert_eq!(product.total, 6852);
        // The gather: S = 125 x 40 = 5,000 bytes in 4-byte segments (KW x Cin), each charged
        // a 32-byte burst: max(40,000 / 8 + 32, 5,000 / 8 + 32).
        assert_eq!(c.total - product.total, 5032);
        // Weights in flash: the same gather on top of the product's prefetched figure.
        let flash = LayerDesc {
            weights_in_flash: true,
            ..as_variant(d, Variant::Im2col)
        };
        let c = layer_cycles(&flash, &CFG);
        assert!(c.prefetch > 0);
        assert_eq!(c.prefetched, 11884);
    }

    #[test]
    fn ic_conv_im2col_loses_to_its_gather() {
        let d = resident(
            LayerKind::Conv2d,
            [1, 32, 32, 16],
            [1, 32, 32, 16],
            (3, 3),
            1,
        );
        assert_eq!(layer_cycles(&d, &CFG).total, 25715);
        let block = layer_cycles(&as_variant(d, Variant::Block { h: 8, w: 8 }), &CFG);
        assert_eq!(block.total, 25498);
        let im2col = layer_cycles(&as_variant(d, Variant::Im2col), &CFG);
        assert_eq!(im2col.total, 55104);
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

    #[test]
    fn fc_rows_follow_vela() {
        assert_eq!(fc_rows(16), (4, 4));
        assert_eq!(fc_rows(1), (1, 1));
        assert_eq!(fc_rows(7), (1, 7));
        assert_eq!(isqrt_ceil(17), 5);
    }
}
