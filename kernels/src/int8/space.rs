//! SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND: spatial blocks moved to and from the batch
//! dimension (int8 here; any element type, they copy pixels).
//!
//! TFLM (`micro/kernels/space_to_batch_nd.cc`, `batch_to_space_nd.cc`,
//! `kernels/internal/reference/space_to_batch_nd.h`, `batch_to_space_nd.h`) takes NHWC inputs,
//! or NHC ones seen as NH1C (one block dimension, width 1):
//!
//! - SPACE_TO_BATCH_ND pads the image by `paddings`, then output batch
//!   `b = (shift_h · block_w + shift_w) · in_batches + in_b` holds the pixels at
//!   `(shift_h, shift_w)` of each block. Padded positions get the caller's `pad`: TensorFlow
//!   Lite pads with the output's zero point (real zero). TFLM means to (its reference kernel
//!   memsets `SpaceToBatchParams::output_offset`) but never fills that field in, so its padding
//!   is whatever its arena held there (bytes of 9 in the `tflite-micro` Python package, 0 on a
//!   zeroed arena): no fixed value to be bit-exact with; the caller passes the zero point.
//! - BATCH_TO_SPACE_ND is the inverse, with `crops` taken off the top and left (the bottom and
//!   right crops only shorten the output).
//!
//! [`SpaceBatchParams`] computes the output's shape as TensorFlow Lite does, so every output
//! pixel is written exactly once.

use super::dims::us;
use super::window::Nhwc;
use crate::{check_len, KernelError};

/// Precomputed SPACE_TO_BATCH_ND or BATCH_TO_SPACE_ND.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SpaceBatchParams {
    input: Nhwc,
    output: Nhwc,
    block_h: u32,
    block_w: u32,
    /// Padding (space to batch) or crop (batch to space) at the top and the left.
    top: u32,
    left: u32,
}

/// `[top, bottom, left, right]` padding or crops, and `[height, width]` blocks.
fn checked(block: [i32; 2], edges: [i32; 4]) -> Result<([u32; 2], [u32; 4]), KernelError> {
    let unsupported = |what| KernelError::Unsupported { what };
    let mut b = [0; 2];
    for (o, &v) in b.iter_mut().zip(&block) {
        *o = u32::try_from(v)
            .ok()
            .filter(|&v| v > 0)
            .ok_or(unsupported("block size below 1"))?;
    }
    let mut e = [0; 4];
    for (o, &v) in e.iter_mut().zip(&edges) {
        *o = u32::try_from(v).map_err(|_| unsupported("negative padding or crop"))?;
    }
    Ok((b, e))
}

impl SpaceBatchParams {
    /// SPACE_TO_BATCH_ND of `input` by blocks `[height, width]` after padding it by
    /// `[top, bottom, left, right]` (an NHC input: width 1, block width 1, no left or right
    /// padding).
    ///
    /// Errors: [`KernelError::Unsupported`] for a block below 1, a negative padding, or a
    /// padded size the block does not divide; [`KernelError::ShapeOverflow`] for counts no
    /// slice can have.
    pub fn space_to_batch(
        input: Nhwc,
        block: [i32; 2],
        paddings: [i32; 4],
    ) -> Result<Self, KernelError> {
        let ([bh, bw], [top, bottom, left, right]) = checked(block, paddings)?;
        let padded = |size: u32, a: u32, b: u32, block: u32| {
            let total = u64::from(size) + u64::from(a) + u64::from(b);
            if total % u64::from(block) != 0 {
                return Err(KernelError::Unsupported {
                    what: "padded size the block does not divide",
                });
            }
            u32::try_from(total / u64::from(block)).map_err(|_| KernelError::ShapeOverflow)
        };
        let output = Nhwc {
            batches: input
                .batches
                .checked_mul(bh)
                .and_then(|n| n.checked_mul(bw))
                .ok_or(KernelError::ShapeOverflow)?,
            height: padded(input.height, top, bottom, bh)?,
            width: padded(input.width, left, right, bw)?,
            channels: input.channels,
        };
        Self::checked_new(input, output, bh, bw, top, left)
    }

    /// BATCH_TO_SPACE_ND of `input` by blocks `[height, width]`, cropping
    /// `[top, bottom, left, right]` off the result (an NHC input: width 1, block width 1, no
    /// left or right crop).
    ///
    /// Errors: [`KernelError::Unsupported`] for a block below 1, a negative crop, a batch the
    /// blocks do not divide, or crops larger than the image; [`KernelError::ShapeOverflow`]
    /// for counts no slice can have.
    pub fn batch_to_space(
        input: Nhwc,
        block: [i32; 2],
        crops: [i32; 4],
    ) -> Result<Self, KernelError> {
        let ([bh, bw], [top, bottom, left, right]) = checked(block, crops)?;
        let blocks = u64::from(bh) * u64::from(bw);
        if u64::from(input.batches) % blocks != 0 {
            return Err(KernelError::Unsupported {
                what: "batch the blocks do not divide",
            });
        }
        let cropped = |size: u32, block: u32, a: u32, b: u32| {
            let full = u64::from(size) * u64::from(block);
            full.checked_sub(u64::from(a) + u64::from(b))
                .ok_or(KernelError::Unsupported {
                    what: "crops larger than the image",
                })
                .and_then(|n| u32::try_from(n).map_err(|_| KernelError::ShapeOverflow))
        };
        let output = Nhwc {
            batches: (u64::from(input.batches) / blocks) as u32,
            height: cropped(input.height, bh, top, bottom)?,
            width: cropped(input.width, bw, left, right)?,
            channels: input.channels,
        };
        Self::checked_new(input, output, bh, bw, top, left)
    }

    fn checked_new(
        input: Nhwc,
        output: Nhwc,
        block_h: u32,
        block_w: u32,
        top: u32,
        left: u32,
    ) -> Result<Self, KernelError> {
        input.len()?;
        output.len()?;
        // Positions in the padded or uncropped image stay within i32, as TFLM computes them.
        for (size, block, edge) in [
            (output.height, block_h, top),
            (output.width, block_w, left),
            (input.height, block_h, top),
            (input.width, block_w, left),
        ] {
            let span = u64::from(size) * u64::from(block) + u64::from(edge) + u64::from(block);
            if i32::try_from(span).is_err() {
                return Err(KernelError::ShapeOverflow);
            }
        }
        Ok(Self {
            input,
            output,
            block_h,
            block_w,
            top,
            left,
        })
    }

    /// Writes the parameters ([`packed`](crate::packed)) as what made them: the input's
    /// shape, the blocks, and the `[top, bottom, left, right]` padding (`to_batch`, of a
    /// [`space_to_batch`](Self::space_to_batch)) or crops (of a
    /// [`batch_to_space`](Self::batch_to_space)).
    pub fn pack(&self, to_batch: bool, w: &mut crate::packed::Words<'_>) {
        use crate::packed::Packed;
        // The image the blocks tile, and the part of it that is the smaller side; `new`
        // checked that their difference (and every size here) fits an i32.
        let (big, small) = if to_batch {
            (self.output, self.input)
        } else {
            (self.input, self.output)
        };
        let rest = |size: u32, block: u32, small: u32, edge: u32| {
            (i64::from(size) * i64::from(block) - i64::from(small) - i64::from(edge)) as i32
        };
        self.input.pack(w);
        w.put(self.block_h);
        w.put(self.block_w);
        for edge in [
            self.top as i32,
            rest(big.height, self.block_h, small.height, self.top),
            self.left as i32,
            rest(big.width, self.block_w, small.width, self.left),
        ] {
            w.put_i32(edge);
        }
    }

    /// Reads what [`pack`](Self::pack) wrote, through the constructor of its direction.
    ///
    /// Errors as that constructor.
    pub fn unpack(
        to_batch: bool,
        r: &mut crate::packed::WordReader<'_>,
    ) -> Result<Self, KernelError> {
        use crate::packed::Packed;
        let input = Nhwc::unpack(r)?;
        let block = [r.take_i32()?, r.take_i32()?];
        let edges = [r.take_i32()?, r.take_i32()?, r.take_i32()?, r.take_i32()?];
        if to_batch {
            Self::space_to_batch(input, block, edges)
        } else {
            Self::batch_to_space(input, block, edges)
        }
    }

    /// The input's shape (NHWC; NHC inputs have width 1).
    #[must_use]
    pub const fn input_shape(&self) -> Nhwc {
        self.input
    }

    /// The output's shape.
    #[must_use]
    pub const fn output_shape(&self) -> Nhwc {
        self.output
    }
}

/// SPACE_TO_BATCH_ND (see the [module docs](self)): padded positions get `pad`.
/// `input` and `output` must have the shapes' element counts
/// ([`KernelError::LengthMismatch`]).
pub fn space_to_batch<T: Copy>(
    p: &SpaceBatchParams,
    input: &[T],
    output: &mut [T],
    pad: T,
) -> Result<(), KernelError> {
    let (i, o) = (p.input, p.output);
    check_len("input", i.len()?, input.len())?;
    check_len("output", o.len()?, output.len())?;
    let depth = us(i.channels);
    if output.is_empty() || depth == 0 {
        return Ok(());
    }
    let (bh, bw, top, left) = (us(p.block_h), us(p.block_w), us(p.top), us(p.left));
    let (in_h, in_w) = (us(i.height), us(i.width));
    let in_batches = us(i.batches);
    let mut out = output.chunks_exact_mut(depth);
    for out_b in 0..us(o.batches) {
        let in_b = out_b % in_batches;
        let shift_w = (out_b / in_batches) % bw;
        let shift_h = (out_b / in_batches) / bw;
        for out_h in 0..us(o.height) {
            let h = out_h * bh + shift_h;
            for out_w in 0..us(o.width) {
                let w = out_w * bw + shift_w;
                let Some(pixel) = out.next() else {
                    return Ok(());
                };
                if h < top || h >= top + in_h || w < left || w >= left + in_w {
                    pixel.fill(pad);
                } else {
                    let at = ((in_b * in_h + (h - top)) * in_w + (w - left)) * depth;
                    pixel.copy_from_slice(&input[at..at + depth]);
                }
            }
        }
    }
    Ok(())
}

/// BATCH_TO_SPACE_ND (see the [module docs](self)): `input` and `output` must have the
/// shapes' element counts ([`KernelError::LengthMismatch`]).
pub fn batch_to_space<T: Copy>(
    p: &SpaceBatchParams,
    input: &[T],
    output: &mut [T],
) -> Result<(), KernelError> {
    let (i, o) = (p.input, p.output);
    check_len("input", i.len()?, input.len())?;
    check_len("output", o.len()?, output.len())?;
    let depth = us(i.channels);
    if output.is_empty() || depth == 0 {
        return Ok(());
    }
    let (bh, bw, top, left) = (us(p.block_h), us(p.block_w), us(p.top), us(p.left));
    let (out_h, out_w, out_batches) = (us(o.height), us(o.width), us(o.batches));
    let mut pixels = input.chunks_exact(depth);
    for in_b in 0..us(i.batches) {
        let out_b = in_b % out_batches;
        let offset = in_b / out_batches;
        for in_h in 0..us(i.height) {
            // Positions before the top crop are below zero in TFLM's int arithmetic.
            let h = (in_h * bh + offset / bw).checked_sub(top);
            for in_w in 0..us(i.width) {
                let w = (in_w * bw + offset % bw).checked_sub(left);
                let Some(pixel) = pixels.next() else {
                    return Ok(());
                };
                if let (Some(h), Some(w)) = (h, w) {
                    if h < out_h && w < out_w {
                        let at = ((out_b * out_h + h) * out_w + w) * depth;
                        output[at..at + depth].copy_from_slice(pixel);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nhwc(batches: u32, height: u32, width: u32, channels: u32) -> Nhwc {
        Nhwc {
            batches,
            height,
            width,
            channels,
        }
    }

    #[test]
    fn round_trip() {
        let input: [i8; 2 * 3 * 4 * 2] = core::array::from_fn(|k| k as i8);
        let s2b = SpaceBatchParams::space_to_batch(nhwc(2, 3, 4, 2), [2, 2], [1, 0, 0, 2]).unwrap();
        assert_eq!(s2b.output_shape(), nhwc(8, 2, 3, 2));
        let mut batched = [0_i8; 8 * 2 * 3 * 2];
        space_to_batch(&s2b, &input, &mut batched, -7).unwrap();
        // Batch 0 is shift (0, 0) of image 0: padded row 0 is padding.
        assert_eq!(&batched[..6], &[-7; 6]);
        // Its second row is input row 1, columns 0 and 2.
        assert_eq!(&batched[6..12], &[8, 9, 12, 13, -7, -7]);
        let b2s =
            SpaceBatchParams::batch_to_space(s2b.output_shape(), [2, 2], [1, 0, 0, 2]).unwrap();
        assert_eq!(b2s.output_shape(), nhwc(2, 3, 4, 2));
        let mut back = [0_i8; 48];
        batch_to_space(&b2s, &batched, &mut back).unwrap();
        assert_eq!(back, input);
    }

    #[test]
    fn refusals() {
        let unsupported = |what| Err(KernelError::Unsupported { what });
        let n = nhwc(1, 4, 4, 1);
        assert_eq!(
            SpaceBatchParams::space_to_batch(n, [0, 2], [0; 4]),
            unsupported("block size below 1")
        );
        assert_eq!(
            SpaceBatchParams::space_to_batch(n, [2, 2], [0, -1, 0, 0]),
            unsupported("negative padding or crop")
        );
        assert_eq!(
            SpaceBatchParams::space_to_batch(n, [3, 2], [0; 4]),
            unsupported("padded size the block does not divide")
        );
        assert_eq!(
            SpaceBatchParams::batch_to_space(n, [2, 2], [0; 4]),
            unsupported("batch the blocks do not divide")
        );
        assert_eq!(
            SpaceBatchParams::batch_to_space(nhwc(4, 1, 1, 1), [2, 2], [1, 2, 0, 0]),
            unsupported("crops larger than the image")
        );
        assert_eq!(
            SpaceBatchParams::space_to_batch(nhwc(1, 1, 1, 1), [1 << 16, 1 << 16], [0; 4]),
            Err(KernelError::ShapeOverflow)
        );
        let p = SpaceBatchParams::space_to_batch(n, [2, 2], [0; 4]).unwrap();
        let mut out = [0_i8; 16];
        assert!(space_to_batch(&p, &[0_i8; 15], &mut out, 0).is_err());
        assert!(batch_to_space(&p, &[0_i8; 16], &mut out[..15]).is_err());
    }
}
