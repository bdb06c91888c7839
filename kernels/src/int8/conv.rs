//! int8 CONV_2D and DEPTHWISE_CONV_2D with per-channel quantization.
//!
//! Arithmetic (TFLM `kernels/internal/reference/integer_ops/conv.h` and `depthwise_conv.h`,
//! parameters from `micro/kernels/conv_common.cc`, `depthwise_conv_common.cc` and
//! `kernels/kernel_util.cc`'s `PopulateConvolutionQuantizationParams`):
//!
//! ```text
//! acc  = Σ_taps inside the image  w[c][tap] · (x[tap] − input_zp)   (int32, wrapping)
//!        + bias[c]                                                  (if there is a bias)
//! out  = clamp(MultiplyByQuantizedMultiplier(acc, m[c], shift[c]) + output_zp, act_min, act_max)
//! ```
//!
//! - Weights are symmetric int8 (zero point 0), quantized per output channel: CONV_2D along
//!   dimension 0 of its OHWI filter, DEPTHWISE_CONV_2D along dimension 3 of its `[1][KH][KW][C·M]`
//!   filter. The bias is int32 in units of `input_scale · filter_scale[c]`.
//! - Each channel's real multiplier is `input_scale · filter_scale[c] / output_scale`, computed
//!   in `double` from the `float` scales and split by
//!   [`quantize_multiplier`](crate::fixed_point::quantize_multiplier) into a Q0.31 mantissa and
//!   a shift ([`ChannelMultiplier`]); it is applied with TFLM's double rounding (see
//!   [`fixed_point`](crate::fixed_point)). A single filter scale is broadcast to all channels.
//! - Taps in the padding are skipped, so a border output sums fewer products; the zero point
//!   never stands in for them.
//! - Grouped convolution: when the input depth is `groups` times the filter's depth, output
//!   channel `c` reads input channels `g · filter_depth ..` with `g = c / (out_channels /
//!   groups)`, as TFLM's reference kernel does.
//! - The fused activation range is TFLM's `CalculateActivationRangeQuantized`.
//!
//! The parameter structs hold the resolved geometry (output size, padding) and the buffer
//! lengths, so the kernels only compare lengths and then run loops without border tests: for
//! every output row and column the range of filter taps inside the image is computed once.

use super::mac::{Mac, Native};
use super::window::{elems, image_len, row_band, Axis, Nhwc, Window2d};
use super::{
    activation_range, activation_range_in, check_quant, check_scale, general_multiplier,
    requantized_to_i8,
};
use super::{Activation, Quant};
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::packed::{Int8Quant, Packed, WordReader, Words};
use crate::{check_len, KernelError};

mod blocked;
mod depthwise;
pub(crate) mod int16;
mod quads;
#[cfg(test)]
mod random_cases;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod x86;

pub use blocked::MAX_PATCH_TAPS;
pub(crate) use depthwise::depthwise_conv2d_with;
pub use depthwise::{depthwise_conv2d, DepthwiseParams, DepthwiseShape};

/// A per-channel requantization multiplier: the real number `multiplier · 2^(shift − 31)`
/// (TFLM's `per_channel_output_multiplier` / `per_channel_output_shift` pair).
// `repr(C)` and `Pod`: multipliers lie in device memory as little-endian (multiplier, shift)
// pairs, and a job's operand bytes are viewed as `&[ChannelMultiplier]` without a copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(C)]
pub struct ChannelMultiplier {
    multiplier: i32,
    shift: i32,
}

impl ChannelMultiplier {
    /// The multiplier of one output channel, as TFLM's `PopulateConvolutionQuantizationParams`:
    /// `(double)input_scale · (double)filter_scale / (double)output_scale`, then
    /// `QuantizeMultiplier`.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when the input or output scale is not
    /// finite and positive, the filter scale is not finite and non-negative (a zero scale, as
    /// converters emit for all-zero channels, gives a zero multiplier), or the multiplier is
    /// `2^31` or more.
    pub fn new(
        input_scale: f32,
        filter_scale: f32,
        output_scale: f32,
    ) -> Result<Self, KernelError> {
        check_scale(input_scale, "input scale")?;
        check_scale(output_scale, "output scale")?;
        if !(filter_scale.is_finite() && filter_scale >= 0.0) {
            return Err(KernelError::InvalidQuantization {
                what: "filter scale",
            });
        }
        let real = f64::from(input_scale) * f64::from(filter_scale) / f64::from(output_scale);
        let (multiplier, shift) = general_multiplier(real, "filter scale")?;
        Ok(Self { multiplier, shift })
    }

    /// A multiplier from an already quantized pair (for example TFLM's own), unchecked: any
    /// pair is applied without panicking, but only `quantize_multiplier`'s results are
    /// meaningful.
    #[must_use]
    pub const fn from_raw(multiplier: i32, shift: i32) -> Self {
        Self { multiplier, shift }
    }

    /// The Q0.31 mantissa.
    #[must_use]
    pub const fn multiplier(&self) -> i32 {
        self.multiplier
    }

    /// The power-of-two exponent (positive: left shift, negative: rounding right shift).
    #[must_use]
    pub const fn shift(&self) -> i32 {
        self.shift
    }

    #[inline(always)]
    fn apply(self, acc: i32) -> i32 {
        multiply_by_quantized_multiplier(acc, self.multiplier, self.shift)
    }
}

/// Fills `out` with the per-channel multipliers of a convolution (one per output channel):
/// `filter_scales` has one scale per channel, or a single per-tensor scale that is broadcast.
///
/// Errors: [`KernelError::LengthMismatch`] (operand `"filter scales"`) when `filter_scales`
/// has neither 1 nor `out.len()` elements; otherwise as [`ChannelMultiplier::new`].
pub fn channel_multipliers(
    input_scale: f32,
    filter_scales: &[f32],
    output_scale: f32,
    out: &mut [ChannelMultiplier],
) -> Result<(), KernelError> {
    match filter_scales {
        [single] => {
            let m = ChannelMultiplier::new(input_scale, *single, output_scale)?;
            out.fill(m);
        }
        scales => {
            check_len("filter scales", out.len(), scales.len())?;
            for (o, &s) in out.iter_mut().zip(scales) {
                *o = ChannelMultiplier::new(input_scale, s, output_scale)?;
            }
        }
    }
    Ok(())
}

/// Shape of a CONV_2D: input, filter depth, output channels and window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Conv2dShape {
    /// Input tensor dimensions (NHWC).
    pub input: Nhwc,
    /// Output channels: the filter's dimension 0.
    pub out_channels: u32,
    /// Input channels each filter reads: the filter's dimension 3. Equal to
    /// `input.channels` for an ordinary convolution; a divisor of it for a grouped one.
    pub filter_depth: u32,
    /// Filter size, strides, dilations and padding.
    pub window: Window2d,
}

/// Quantization, offsets and activation range shared by both convolutions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
struct ConvQuant {
    input_offset: i32,
    output_offset: i32,
    activation_min: i32,
    activation_max: i32,
}

impl ConvQuant {
    fn new(input: Quant, output: Quant, act: Activation) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let (activation_min, activation_max) = activation_range(act, output)?;
        Ok(Self {
            input_offset: -input.zero_point,
            output_offset: output.zero_point,
            activation_min,
            activation_max,
        })
    }

    /// TFLM's 16x8 convolutions: they apply neither zero point (the scheme makes int16
    /// activations symmetric), but the activation range is still computed with the output's
    /// zero point, within int16.
    fn int16(input: Quant, output: Quant, act: Activation) -> Result<Self, KernelError> {
        check_scale(input.scale, "input scale")?;
        check_scale(output.scale, "output scale")?;
        let range = (i64::from(i16::MIN), i64::from(i16::MAX));
        let (activation_min, activation_max) = activation_range_in(act, output, range.0, range.1)?;
        Ok(Self {
            input_offset: 0,
            output_offset: 0,
            activation_min,
            activation_max,
        })
    }

    // Always inlined: once per output, in the kernels' inner loops.
    #[inline(always)]
    fn finish(&self, acc: i32, m: ChannelMultiplier) -> i8 {
        requantized_to_i8(
            m.apply(acc),
            self.output_offset,
            self.activation_min,
            self.activation_max,
        )
    }
}

impl ConvQuant {
    /// Its words: the int8 offsets and activation range.
    fn pack(&self, w: &mut Words<'_>) {
        Int8Quant {
            input_offset: self.input_offset,
            output_offset: self.output_offset,
            activation_min: self.activation_min,
            activation_max: self.activation_max,
        }
        .pack(w);
    }

    /// Its words for 16x8: the activation range (the offsets are 0).
    fn pack_int16(&self, w: &mut Words<'_>) {
        w.put_i32(self.activation_min);
        w.put_i32(self.activation_max);
    }

    /// Reads 16x8 quantization back, checked as [`ConvQuant::int16`] would have made it: no
    /// offsets, the activation range inside int16.
    fn unpack_int16(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let (activation_min, activation_max) =
            r.take_range(i32::from(i16::MIN), i32::from(i16::MAX))?;
        Ok(Self {
            input_offset: 0,
            output_offset: 0,
            activation_min,
            activation_max,
        })
    }

    /// Reads int8 quantization back, checked as [`ConvQuant::new`] would have made it.
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let q = Int8Quant::unpack(r)?;
        Ok(Self {
            input_offset: q.input_offset,
            output_offset: q.output_offset,
            activation_min: q.activation_min,
            activation_max: q.activation_max,
        })
    }
}

impl Packed for Conv2dShape {
    fn pack(&self, w: &mut Words<'_>) {
        self.input.pack(w);
        w.put(self.out_channels);
        w.put(self.filter_depth);
        self.window.pack(w);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Conv2dShape {
            input: Nhwc::unpack(r)?,
            out_channels: r.take()?,
            filter_depth: r.take()?,
            window: Window2d::unpack(r)?,
        })
    }
}

/// Precomputed parameters of int8 CONV_2D (TFLM's `OpDataConv`, minus the per-channel
/// multipliers, which are a [`ChannelMultiplier`] slice so that no allocation is needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Conv2dParams {
    rows: Axis,
    cols: Axis,
    batches: usize,
    in_channels: usize,
    filter_depth: usize,
    out_channels: usize,
    filters_per_group: usize,
    input_len: usize,
    filter_len: usize,
    output_len: usize,
    quant: ConvQuant,
}

impl Conv2dParams {
    /// Resolves the geometry (output size and padding exactly as TFLM's
    /// `ComputePaddingHeightWidth`) and the quantization offsets and activation range.
    ///
    /// Errors: [`KernelError::Unsupported`] for zero filter sizes, strides or dilations, a
    /// zero filter depth or output channel count, an input depth that is not a multiple of the
    /// filter depth, or output channels that do not divide into the groups;
    /// [`KernelError::ShapeOverflow`] for sizes no buffer can have;
    /// [`KernelError::InvalidQuantization`] for bad scales or zero points.
    pub fn new(
        shape: Conv2dShape,
        input: Quant,
        output: Quant,
        act: Activation,
    ) -> Result<Self, KernelError> {
        Self::resolve(shape, || ConvQuant::new(input, output, act))
    }

    /// Parameters of a 16x8 CONV_2D (int16 input and output, int8 filter), for
    /// [`conv2d_int16`](crate::int16::conv2d): as [`new`](Self::new), but TFLM's 16x8 kernel
    /// applies no zero points and clamps within int16 (zero points are not checked).
    pub fn new_int16(
        shape: Conv2dShape,
        input: Quant,
        output: Quant,
        act: Activation,
    ) -> Result<Self, KernelError> {
        Self::resolve(shape, || ConvQuant::int16(input, output, act))
    }

    /// Writes the parameters' int8 quantization ([`packed`](crate::packed)); the geometry is
    /// its shape's, which the caller writes.
    pub fn pack(&self, w: &mut Words<'_>) {
        self.quant.pack(w);
    }

    /// Parameters of int8 `shape` with the quantization [`pack`](Self::pack) wrote, the
    /// geometry resolved as [`new`](Self::new) resolves it.
    ///
    /// Errors as [`new`](Self::new), and for quantization no int8 layer has.
    pub fn unpack(shape: Conv2dShape, r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let quant = ConvQuant::unpack(r)?;
        Self::resolve(shape, || Ok(quant))
    }

    /// Writes 16x8 parameters' activation range ([`packed`](crate::packed)); the geometry is
    /// its shape's, which the caller writes.
    pub fn pack_int16(&self, w: &mut Words<'_>) {
        self.quant.pack_int16(w);
    }

    /// 16x8 parameters of `shape` with the range [`pack_int16`](Self::pack_int16) wrote, the
    /// geometry resolved as [`new_int16`](Self::new_int16) resolves it.
    ///
    /// Errors as [`new_int16`](Self::new_int16), and for a range not inside int16.
    pub fn unpack_int16(shape: Conv2dShape, r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let quant = ConvQuant::unpack_int16(r)?;
        Self::resolve(shape, || Ok(quant))
    }

    /// The geometry of `shape`, then the quantization `quant` gives (its errors come last).
    fn resolve(
        shape: Conv2dShape,
        quant: impl FnOnce() -> Result<ConvQuant, KernelError>,
    ) -> Result<Self, KernelError> {
        let w = shape.window;
        let rows = Axis::new(
            w.padding,
            shape.input.height,
            w.filter_height,
            w.stride_height,
            w.dilation_height,
        )?;
        let cols = Axis::new(
            w.padding,
            shape.input.width,
            w.filter_width,
            w.stride_width,
            w.dilation_width,
        )?;
        if shape.filter_depth == 0 {
            return Err(KernelError::Unsupported {
                what: "filter depth 0",
            });
        }
        if shape.out_channels == 0 {
            return Err(KernelError::Unsupported {
                what: "output channels 0",
            });
        }
        if shape.input.channels == 0 || !shape.input.channels.is_multiple_of(shape.filter_depth) {
            return Err(KernelError::Unsupported {
                what: "input depth not a multiple of the filter depth",
            });
        }
        let groups = shape.input.channels / shape.filter_depth;
        if !shape.out_channels.is_multiple_of(groups) {
            return Err(KernelError::Unsupported {
                what: "output channels not a multiple of the groups",
            });
        }
        let input_len = shape.input.len()?;
        let filter_len = elems(&[
            shape.out_channels,
            w.filter_height,
            w.filter_width,
            shape.filter_depth,
        ])?;
        let out_dim = |v: usize| u32::try_from(v).map_err(|_| KernelError::ShapeOverflow);
        let output_len = elems(&[
            shape.input.batches,
            out_dim(rows.out_size)?,
            out_dim(cols.out_size)?,
            shape.out_channels,
        ])?;
        let us = |v: u32| usize::try_from(v).map_err(|_| KernelError::ShapeOverflow);
        Ok(Self {
            rows,
            cols,
            batches: us(shape.input.batches)?,
            in_channels: us(shape.input.channels)?,
            filter_depth: us(shape.filter_depth)?,
            out_channels: us(shape.out_channels)?,
            filters_per_group: us(shape.out_channels / groups)?,
            input_len,
            filter_len,
            output_len,
            quant: quant()?,
        })
    }

    /// Output tensor dimensions.
    #[must_use]
    pub fn output_shape(&self) -> Nhwc {
        // Every dimension was checked to fit a u32 in `new`.
        Nhwc {
            batches: self.batches as u32,
            height: self.rows.out_size as u32,
            width: self.cols.out_size as u32,
            channels: self.out_channels as u32,
        }
    }

    /// Leading `(height, width)` padding (TFLM's `padding_values`).
    #[must_use]
    pub fn padding(&self) -> (usize, usize) {
        (self.rows.pad, self.cols.pad)
    }

    /// Inclusive `(min, max)` the outputs are clamped to.
    #[must_use]
    pub const fn activation_range(&self) -> (i32, i32) {
        (self.quant.activation_min, self.quant.activation_max)
    }

    /// Element counts `(input, filter, output)` the buffers must have.
    #[must_use]
    pub const fn lens(&self) -> (usize, usize, usize) {
        (self.input_len, self.filter_len, self.output_len)
    }

    /// Input tensor dimensions (for [`row_band`](Self::row_band) parameters, the band's).
    #[must_use]
    pub fn input_shape(&self) -> Nhwc {
        // Every dimension was checked to fit a u32 in `new` (a band's are no larger).
        Nhwc {
            batches: self.batches as u32,
            height: self.rows.in_size as u32,
            width: self.cols.in_size as u32,
            channels: self.in_channels as u32,
        }
    }

    /// Parameters that compute output rows `out_rows` from the band of input rows they read,
    /// and that band (`input_rows`), for running a layer in horizontal stripes.
    ///
    /// Running [`conv2d`] with the returned parameters on rows `input_rows` of the original
    /// input (NHWC with one image, so the contiguous elements `i0 · W · C .. i1 · W · C`) writes
    /// exactly rows `out_rows` of the original output (`o0 · W' · C' .. o1 · W' · C'`), bit for
    /// bit; the filter, bias and multipliers are the original ones. `input_rows` runs from the
    /// lowest input row a tap of these output rows reads (padding excluded) to one past the
    /// highest; taps outside the band are exactly the taps outside the original image, which
    /// are skipped as before. The returned parameters' [`input_shape`](Self::input_shape),
    /// [`output_shape`](Self::output_shape), [`lens`](Self::lens) and
    /// [`padding`](Self::padding) describe the band (its leading row padding is
    /// `pad + i0 − o0 · stride`, at least 0). The parameters of a band can be banded again.
    ///
    /// If no output row in range reads any input row (a dilated filter whose taps all fall in
    /// the padding), `input_rows` is a single row that is then not read, since the kernel
    /// needs a non-empty input for a non-empty output.
    ///
    /// Errors: [`KernelError::Unsupported`] when the batch size is not 1, or `out_rows` is
    /// empty or reaches past the output's last row.
    ///
    /// ```
    /// use npu_kernels::int8::{Activation, Conv2dParams, Conv2dShape, Nhwc, Padding, Quant, Window2d};
    ///
    /// // 3x3 SAME convolution of an 8x5x2 image into 4 channels.
    /// let shape = Conv2dShape {
    ///     input: Nhwc { batches: 1, height: 8, width: 5, channels: 2 },
    ///     out_channels: 4,
    ///     filter_depth: 2,
    ///     window: Window2d {
    ///         filter_height: 3, filter_width: 3, stride_height: 1, stride_width: 1,
    ///         dilation_height: 1, dilation_width: 1, padding: Padding::Same,
    ///     },
    /// };
    /// let q = Quant { scale: 0.1, zero_point: 0 };
    /// let p = Conv2dParams::new(shape, q, q, Activation::None)?;
    /// // Output rows 3..6 read input rows 2..7 (one row of halo on each side).
    /// let (band, rows) = p.row_band(3..6)?;
    /// assert_eq!(rows, 2..7);
    /// assert_eq!(band.input_shape(), Nhwc { batches: 1, height: 5, width: 5, channels: 2 });
    /// assert_eq!(band.output_shape(), Nhwc { batches: 1, height: 3, width: 5, channels: 4 });
    /// assert_eq!(band.lens(), (5 * 5 * 2, 4 * 3 * 3 * 2, 3 * 5 * 4));
    /// // The top stripe is padded above, as the whole image is.
    /// let (band, rows) = p.row_band(0..2)?;
    /// assert_eq!((rows, band.padding()), (0..3, (1, 1)));
    /// Ok::<(), npu_kernels::KernelError>(())
    /// ```
    pub fn row_band(
        &self,
        out_rows: core::ops::Range<u32>,
    ) -> Result<(Self, core::ops::Range<u32>), KernelError> {
        let (rows, input_rows) = row_band(&self.rows, self.batches, out_rows)?;
        let band = Self {
            rows,
            input_len: image_len(rows.in_size, self.cols.in_size, self.in_channels)?,
            output_len: image_len(rows.out_size, self.cols.out_size, self.out_channels)?,
            ..*self
        };
        Ok((band, input_rows))
    }
}

// Accessors for the im2col formulation (`super::im2col`), which must reproduce this module's
// arithmetic exactly and so reads the resolved geometry and quantization rather than
// recomputing them.
impl Conv2dParams {
    /// The resolved `(rows, cols)` axes.
    pub(crate) const fn axes(&self) -> (Axis, Axis) {
        (self.rows, self.cols)
    }

    /// `(batches, in_channels, filter_depth, out_channels)`.
    pub(crate) const fn channel_dims(&self) -> (usize, usize, usize, usize) {
        (
            self.batches,
            self.in_channels,
            self.filter_depth,
            self.out_channels,
        )
    }

    /// TFLM's `input_offset`, the negated input zero point.
    pub(crate) const fn input_offset(&self) -> i32 {
        self.quant.input_offset
    }

    /// Requantizes one channel's accumulator (bias included) exactly as [`conv2d`] does.
    #[inline]
    pub(crate) fn requantize(&self, acc: i32, m: ChannelMultiplier) -> i8 {
        self.quant.finish(acc, m)
    }
}

/// Checks a convolution's operands against its parameters' `(input, filter, output)` lengths
/// and its `channels`, in the order the errors are reported.
fn check_operands(
    (input_len, filter_len, output_len): (usize, usize, usize),
    channels: usize,
    (input, filter, output): (&[i8], &[i8], &[i8]),
    multipliers: &[ChannelMultiplier],
    bias: Option<&[i32]>,
) -> Result<(), KernelError> {
    check_len("input", input_len, input.len())?;
    check_len("filter", filter_len, filter.len())?;
    check_len("output", output_len, output.len())?;
    check_channel_operands(channels, multipliers, bias)
}

fn check_channel_operands<B>(
    channels: usize,
    multipliers: &[ChannelMultiplier],
    bias: Option<&[B]>,
) -> Result<(), KernelError> {
    check_len("multipliers", channels, multipliers.len())?;
    if let Some(bias) = bias {
        check_len("bias", channels, bias.len())?;
    }
    Ok(())
}

/// int8 CONV_2D with per-channel quantization (TFLM's `reference_integer_ops::ConvPerChannel`).
///
/// Layouts: `input` NHWC, `filter` OHWI (`[out_channels][KH][KW][filter_depth]`), `bias`
/// `[out_channels]`, `multipliers` `[out_channels]` (see [`channel_multipliers`]), `output`
/// NHWC with [`Conv2dParams::output_shape`]. Errors with [`KernelError::LengthMismatch`] before
/// touching `output` when any buffer has the wrong length. Accumulation wraps on `int32`
/// overflow like TFLM's.
///
/// One-group convolutions whose window has at most [`MAX_PATCH_TAPS`] taps run as a blocked
/// matrix product (two pixels by two channels, on the DSP extension where the target has it;
/// four pixels by one channel on Helium); the others run the direct loop. All paths give the
/// same bytes.
pub fn conv2d(
    p: &Conv2dParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) -> Result<(), KernelError> {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        check_operands(
            p.lens(),
            p.out_channels,
            (input, filter, output),
            multipliers,
            bias,
        )?;
        if p.output_len == 0 || x86::conv2d(p, multipliers, input, filter, bias, output) {
            return Ok(());
        }
    }
    conv2d_with::<Native>(p, multipliers, input, filter, bias, output)
}

/// [`conv2d`] on the multiply-accumulate operations of `M`.
pub(crate) fn conv2d_with<M: Mac>(
    p: &Conv2dParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) -> Result<(), KernelError> {
    check_operands(
        p.lens(),
        p.out_channels,
        (input, filter, output),
        multipliers,
        bias,
    )?;
    if p.output_len == 0 {
        return Ok(());
    }
    if M::QUAD_CONV && quads::fits(p) {
        quads::conv2d::<M>(p, multipliers, input, filter, bias, output);
    } else if blocked::fits(p) {
        blocked::conv2d::<M>(p, multipliers, input, filter, bias, output);
    } else {
        conv2d_direct(p, multipliers, input, filter, bias, output);
    }
    Ok(())
}

/// The direct loop (TFLM's reference order), on checked operands and a non-empty output: for
/// grouped convolutions and windows too deep for the blocked path, and as the reference the
/// blocked path is tested against.
pub(crate) fn conv2d_direct(
    p: &Conv2dParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) {
    // Non-empty output: every dimension is at least 1, so no chunk size below is 0.
    let (rows, cols) = (p.rows, p.cols);
    let in_row_len = cols.in_size * p.in_channels;
    let out_image_len = rows.out_size * cols.out_size * p.out_channels;
    let fd = p.filter_depth;
    let per_filter = rows.filter * cols.filter * fd;
    let offset = p.quant.input_offset;

    for (in_image, out_image) in input
        .chunks_exact(rows.in_size * in_row_len)
        .zip(output.chunks_exact_mut(out_image_len))
    {
        for (oy, out_row) in out_image
            .chunks_exact_mut(cols.out_size * p.out_channels)
            .enumerate()
        {
            let ky = rows.taps(oy);
            for (ox, out_px) in out_row.chunks_exact_mut(p.out_channels).enumerate() {
                let kx = cols.taps(ox);
                for (c, ((o, f), &m)) in out_px
                    .iter_mut()
                    .zip(filter.chunks_exact(per_filter))
                    .zip(multipliers)
                    .enumerate()
                {
                    let group_start = (c / p.filters_per_group) * fd;
                    let taps = PixelTaps {
                        in_image,
                        in_row_len,
                        in_px_len: p.in_channels,
                        filter: f,
                        filter_row_len: cols.filter * fd,
                        filter_px_len: fd,
                        rows: (ky, rows.dilation),
                        cols: (kx, cols.dilation),
                    };
                    let mut acc = 0_i32;
                    taps.each(|x, w| {
                        let x = &x[group_start..][..fd];
                        acc = x.iter().zip(w).fold(acc, |a, (&x, &w)| {
                            a.wrapping_add(i32::from(w) * (i32::from(x) + offset))
                        });
                    });
                    let b = bias.map_or(0, |b| b[c]);
                    *o = p.quant.finish(acc.wrapping_add(b), m);
                }
            }
        }
    }
}

/// The valid taps of one output pixel: for each, the input pixel's channels and the filter
/// pixel's weights.
struct PixelTaps<'a, X = i8> {
    in_image: &'a [X],
    in_row_len: usize,
    in_px_len: usize,
    filter: &'a [i8],
    filter_row_len: usize,
    filter_px_len: usize,
    /// `((first tap, end tap, input position of the first tap), dilation)` per axis.
    rows: ((usize, usize, usize), usize),
    cols: ((usize, usize, usize), usize),
}

impl<X> PixelTaps<'_, X> {
    #[inline(always)]
    fn each(&self, mut f: impl FnMut(&[X], &[i8])) {
        let ((ky0, ky1, iy0), dy) = self.rows;
        let ((kx0, kx1, ix0), dx) = self.cols;
        for (j, ky) in (ky0..ky1).enumerate() {
            let iy = iy0 + j * dy;
            let in_row = &self.in_image[iy * self.in_row_len..][..self.in_row_len];
            let f_row = &self.filter[ky * self.filter_row_len..][..self.filter_row_len];
            for (i, kx) in (kx0..kx1).enumerate() {
                let ix = ix0 + i * dx;
                f(
                    &in_row[ix * self.in_px_len..][..self.in_px_len],
                    &f_row[kx * self.filter_px_len..][..self.filter_px_len],
                );
            }
        }
    }
}
