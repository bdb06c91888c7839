//! int8 DEPTHWISE_CONV_2D: its shape, its resolved parameters and the kernel (the arithmetic
//! is [`conv`](super)'s, shared with CONV_2D).

use super::{check_operands, ChannelMultiplier, ConvQuant, PixelTaps};
use crate::int8::mac::{self, Mac, Native};
use crate::int8::window::{elems, image_len, row_band, Axis, Nhwc, Window2d};
use crate::int8::{Activation, Quant};
use crate::packed::{Packed, WordReader, Words};
use crate::KernelError;

#[cfg(doc)]
use super::Conv2dParams;

/// Shape of a DEPTHWISE_CONV_2D: input, depth multiplier and window. Output channel
/// `ic · depth_multiplier + m` filters input channel `ic`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DepthwiseShape {
    /// Input tensor dimensions (NHWC).
    pub input: Nhwc,
    /// Output channels per input channel (M), at least 1.
    pub depth_multiplier: u32,
    /// Filter size, strides, dilations and padding.
    pub window: Window2d,
}

impl Packed for DepthwiseShape {
    fn pack(&self, w: &mut Words<'_>) {
        self.input.pack(w);
        w.put(self.depth_multiplier);
        self.window.pack(w);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(DepthwiseShape {
            input: Nhwc::unpack(r)?,
            depth_multiplier: r.take()?,
            window: Window2d::unpack(r)?,
        })
    }
}

/// Precomputed parameters of int8 DEPTHWISE_CONV_2D (TFLM's `OpDataConv` for depthwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
// Fields visible to `conv`'s modules: the 16x8 kernel (`conv::int16`) reads them.
pub struct DepthwiseParams {
    pub(super) rows: Axis,
    pub(super) cols: Axis,
    pub(super) batches: usize,
    pub(super) in_channels: usize,
    pub(super) depth_multiplier: usize,
    pub(super) out_channels: usize,
    pub(super) input_len: usize,
    pub(super) filter_len: usize,
    pub(super) output_len: usize,
    pub(super) quant: ConvQuant,
}

impl DepthwiseParams {
    /// Resolves the geometry and quantization like [`Conv2dParams::new`].
    ///
    /// Errors: [`KernelError::Unsupported`] for zero filter sizes, strides, dilations, input
    /// channels or depth multiplier; [`KernelError::ShapeOverflow`];
    /// [`KernelError::InvalidQuantization`].
    pub fn new(
        shape: DepthwiseShape,
        input: Quant,
        output: Quant,
        act: Activation,
    ) -> Result<Self, KernelError> {
        Self::resolve(shape, || ConvQuant::new(input, output, act))
    }

    /// Parameters of a 16x8 DEPTHWISE_CONV_2D (int16 input and output, int8 filter), for
    /// [`depthwise_conv2d_int16`](crate::int16::depthwise_conv2d): as [`new`](Self::new), but
    /// TFLM's 16x8 kernel applies no zero points and clamps within int16.
    pub fn new_int16(
        shape: DepthwiseShape,
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
    pub fn unpack(shape: DepthwiseShape, r: &mut WordReader<'_>) -> Result<Self, KernelError> {
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
    pub fn unpack_int16(
        shape: DepthwiseShape,
        r: &mut WordReader<'_>,
    ) -> Result<Self, KernelError> {
        let quant = ConvQuant::unpack_int16(r)?;
        Self::resolve(shape, || Ok(quant))
    }

    /// The geometry of `shape`, then the quantization `quant` gives (its errors come last).
    fn resolve(
        shape: DepthwiseShape,
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
        if shape.depth_multiplier == 0 {
            return Err(KernelError::Unsupported {
                what: "depth multiplier 0",
            });
        }
        if shape.input.channels == 0 {
            return Err(KernelError::Unsupported {
                what: "input channels 0",
            });
        }
        let out_channels = shape
            .input
            .channels
            .checked_mul(shape.depth_multiplier)
            .ok_or(KernelError::ShapeOverflow)?;
        let input_len = shape.input.len()?;
        let filter_len = elems(&[w.filter_height, w.filter_width, out_channels])?;
        let out_dim = |v: usize| u32::try_from(v).map_err(|_| KernelError::ShapeOverflow);
        let output_len = elems(&[
            shape.input.batches,
            out_dim(rows.out_size)?,
            out_dim(cols.out_size)?,
            out_channels,
        ])?;
        let us = |v: u32| usize::try_from(v).map_err(|_| KernelError::ShapeOverflow);
        Ok(Self {
            rows,
            cols,
            batches: us(shape.input.batches)?,
            in_channels: us(shape.input.channels)?,
            depth_multiplier: us(shape.depth_multiplier)?,
            out_channels: us(out_channels)?,
            input_len,
            filter_len,
            output_len,
            quant: quant()?,
        })
    }

    /// Output tensor dimensions.
    #[must_use]
    pub fn output_shape(&self) -> Nhwc {
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
    /// and that band (`input_rows`), for running a layer in horizontal stripes: as
    /// [`Conv2dParams::row_band`], for [`depthwise_conv2d`].
    ///
    /// Errors: [`KernelError::Unsupported`] when the batch size is not 1, or `out_rows` is
    /// empty or reaches past the output's last row.
    ///
    /// ```
    /// use npu_kernels::int8::{Activation, DepthwiseParams, DepthwiseShape, Nhwc, Padding, Quant, Window2d};
    ///
    /// // 3x3 VALID depthwise convolution with stride 2 of a 9x4x3 image: 4 output rows.
    /// let shape = DepthwiseShape {
    ///     input: Nhwc { batches: 1, height: 9, width: 4, channels: 3 },
    ///     depth_multiplier: 1,
    ///     window: Window2d {
    ///         filter_height: 3, filter_width: 3, stride_height: 2, stride_width: 1,
    ///         dilation_height: 1, dilation_width: 1, padding: Padding::Valid,
    ///     },
    /// };
    /// let q = Quant { scale: 0.1, zero_point: 0 };
    /// let p = DepthwiseParams::new(shape, q, q, Activation::None)?;
    /// // Output rows 1..3 read input rows 2..7 (row 2 · 2 + 2 is the last).
    /// let (band, rows) = p.row_band(1..3)?;
    /// assert_eq!(rows, 2..7);
    /// assert_eq!(band.input_shape().height, 5);
    /// assert_eq!(band.output_shape().height, 2);
    /// assert_eq!(band.lens(), (5 * 4 * 3, 3 * 3 * 3, 2 * 2 * 3));
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

/// int8 DEPTHWISE_CONV_2D with per-channel quantization (TFLM's
/// `reference_integer_ops::DepthwiseConvPerChannel`).
///
/// Layouts: `input` NHWC, `filter` `[1][KH][KW][in_channels · depth_multiplier]`, `bias` and
/// `multipliers` `[out_channels]`, `output` NHWC with [`DepthwiseParams::output_shape`].
/// Errors with [`KernelError::LengthMismatch`] before touching `output`.
///
/// With depth multiplier 1, channels are accumulated four at a time in registers (on the DSP
/// extension where the target has it: two 16-bit multiplies per channel pair and tap); the
/// arithmetic, and so every byte, is the same on every path.
pub fn depthwise_conv2d(
    p: &DepthwiseParams,
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
        if p.output_len == 0
            || super::x86::depthwise_conv2d(p, multipliers, input, filter, bias, output)
        {
            return Ok(());
        }
    }
    depthwise_conv2d_with::<Native>(p, multipliers, input, filter, bias, output)
}

/// [`depthwise_conv2d`] on the multiply-accumulate operations of `M`.
pub(crate) fn depthwise_conv2d_with<M: Mac>(
    p: &DepthwiseParams,
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
    let (rows, cols) = (p.rows, p.cols);
    let (ic, oc, mult) = (p.in_channels, p.out_channels, p.depth_multiplier);
    let in_row_len = cols.in_size * ic;
    let out_image_len = rows.out_size * cols.out_size * oc;
    let offset = p.quant.input_offset;
    let mut list = mac::TapList::new();
    let fast = M::fast_requantize(multipliers);
    let q = &p.quant;
    let requant = (q.output_offset, q.activation_min, q.activation_max);

    for (in_image, out_image) in input
        .chunks_exact(rows.in_size * in_row_len)
        .zip(output.chunks_exact_mut(out_image_len))
    {
        for (oy, out_row) in out_image.chunks_exact_mut(cols.out_size * oc).enumerate() {
            let ky = rows.taps(oy);
            for (ox, out_px) in out_row.chunks_exact_mut(oc).enumerate() {
                let taps = PixelTaps {
                    in_image,
                    in_row_len,
                    in_px_len: ic,
                    filter,
                    filter_row_len: cols.filter * oc,
                    filter_px_len: oc,
                    rows: (ky, rows.dilation),
                    cols: (cols.taps(ox), cols.dilation),
                };
                if mult == 1 {
                    // Four channels at a time, their accumulators in registers through the
                    // pixel's taps (listed once for all channels).
                    let quads = if taps_listed(&taps, &mut list, ic) {
                        ic / 4 * 4
                    } else {
                        0
                    };
                    let channels = mac::DepthwiseChannels {
                        list: &list,
                        input: in_image,
                        filter,
                        bias,
                        multipliers,
                        fast,
                        input_offset: offset,
                        requant,
                    };
                    M::depthwise_quads(&channels, &mut out_px[..quads]);
                    // The remaining channels in blocks: contiguous input and filter channels.
                    let mut c0 = quads;
                    while c0 < oc {
                        let n = mac::DW_BLOCK.min(oc - c0);
                        let mut acc = [0_i32; mac::DW_BLOCK];
                        taps.each(|x, w| {
                            for ((a, &x), &w) in
                                acc[..n].iter_mut().zip(&x[c0..c0 + n]).zip(&w[c0..c0 + n])
                            {
                                *a = a.wrapping_add(i32::from(w) * (i32::from(x) + offset));
                            }
                        });
                        for (k, (o, a)) in out_px[c0..c0 + n].iter_mut().zip(&acc).enumerate() {
                            let c = c0 + k;
                            let b = bias.map_or(0, |b| b[c]);
                            *o = p.quant.finish(a.wrapping_add(b), multipliers[c]);
                        }
                        c0 += n;
                    }
                } else {
                    for (c, (o, &m)) in out_px.iter_mut().zip(multipliers).enumerate() {
                        let in_c = c / mult;
                        let mut acc = 0_i32;
                        taps.each(|x, w| {
                            acc = acc.wrapping_add(i32::from(w[c]) * (i32::from(x[in_c]) + offset));
                        });
                        let b = bias.map_or(0, |b| b[c]);
                        *o = p.quant.finish(acc.wrapping_add(b), m);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Lists the taps of one output pixel (depth multiplier 1, so input and filter pixels have
/// `channels` bytes each) into `list`; `false` when they do not fit it.
fn taps_listed(taps: &PixelTaps<'_>, list: &mut mac::TapList, channels: usize) -> bool {
    let ((ky0, ky1, iy0), dy) = taps.rows;
    let ((kx0, kx1, ix0), dx) = taps.cols;
    list.set_window(
        (
            iy0 * taps.in_row_len + ix0 * channels,
            ky0 * taps.filter_row_len + kx0 * channels,
        ),
        (
            ky1.saturating_sub(ky0),
            (dy * taps.in_row_len, taps.filter_row_len),
        ),
        (kx1.saturating_sub(kx0), (dx * channels, channels)),
    )
}
