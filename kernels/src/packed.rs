//! Kernel parameters as words: the form a model compiled on a host carries them in, for a
//! device that runs it without preparing it.
//!
//! # Design
//!
//! Preparing a layer's parameters is work a small device can be spared: the quantization is
//! turned into fixed-point multipliers (with `f64` arithmetic) and the `.tflite` file has to
//! be read to get there. A host does it once and writes each layer's parameters as
//! little-endian 32-bit words ([`Words`]); the device reads them back ([`WordReader`]).
//!
//! What is written is the least the kernels need, and nothing is taken on trust when it is
//! read back:
//!
//! - **shapes** (an [`Nhwc`](crate::int8::Nhwc), a window, a fully connected shape) are
//!   written as they are, and the geometry a kernel runs on (output sizes, padding, buffer
//!   lengths) is derived from them again by the same code that derives it at prepare, with
//!   the same refusals;
//! - **what a constructor was given** is what is written where its parameters keep only what
//!   they derived (a slice's begin and strides, a transpose's permutation, a pad's paddings):
//!   lists of any rank go as their length then their words ([`Words::put_list`]), read back
//!   into a fixed capacity, and the parameters are made again by that constructor;
//! - **quantization** is written resolved (offsets, activation range, multipliers and
//!   shifts), so that no floating point runs on the device, and each field read back is
//!   checked against the range its constructor could have produced (an int8 zero point, an
//!   activation range inside int8 and not empty, a multiplier the arithmetic expects).
//!
//! So parameters read from damaged or hostile words are either refused
//! ([`KernelError::Unsupported`], [`KernelError::InvalidQuantization`],
//! [`KernelError::ShapeOverflow`]) or parameters a model could have had: a kernel given them
//! behaves as it does for any prepared layer. A type packs with [`Packed`]; parameters whose
//! geometry comes from a shape pack their quantization alone, and are read back given the
//! shape (their `unpack` functions).

use crate::KernelError;

/// Words being written: little-endian `u32`s into a byte buffer. Running out of room is
/// remembered rather than reported at each word ([`Words::len`] is then `None`), so that
/// writing a layer is a sequence of plain calls.
#[derive(Debug)]
pub struct Words<'a> {
    out: &'a mut [u8],
    len: usize,
    full: bool,
}

impl<'a> Words<'a> {
    /// Writes into `out`, from its start.
    pub fn new(out: &'a mut [u8]) -> Self {
        Words {
            out,
            len: 0,
            full: false,
        }
    }

    /// Appends one word.
    pub fn put(&mut self, word: u32) {
        match self.out.get_mut(self.len..self.len + 4) {
            Some(slot) if !self.full => {
                slot.copy_from_slice(&word.to_le_bytes());
                self.len += 4;
            }
            _ => self.full = true,
        }
    }

    /// Appends a signed word (two's complement).
    pub fn put_i32(&mut self, word: i32) {
        self.put(word as u32);
    }

    /// Bytes written, or `None` when the buffer was too small for them.
    pub fn len(&self) -> Option<usize> {
        (!self.full).then_some(self.len)
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0 && !self.full
    }
}

/// Words being read back, from the start of a byte slice.
#[derive(Clone, Debug)]
pub struct WordReader<'a> {
    bytes: &'a [u8],
}

impl<'a> WordReader<'a> {
    /// Reads `bytes` (a whole number of words).
    pub fn new(bytes: &'a [u8]) -> Self {
        WordReader { bytes }
    }

    /// The next word. Errors with [`KernelError::Unsupported`] when the words end first.
    pub fn take(&mut self) -> Result<u32, KernelError> {
        let (word, rest) = self
            .bytes
            .split_first_chunk::<4>()
            .ok_or(KernelError::Unsupported {
                what: "packed parameters that end early",
            })?;
        self.bytes = rest;
        Ok(u32::from_le_bytes(*word))
    }

    /// The next word, signed.
    pub fn take_i32(&mut self) -> Result<i32, KernelError> {
        self.take().map(|w| w as i32)
    }

    /// The next word, which must lie in `lo..=hi`; `what` names it in the error
    /// ([`KernelError::InvalidQuantization`]).
    pub fn take_in(&mut self, lo: i32, hi: i32, what: &'static str) -> Result<i32, KernelError> {
        let v = self.take_i32()?;
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(KernelError::InvalidQuantization { what })
        }
    }

    /// An activation range: two words, `lo <= min <= max <= hi`.
    pub fn take_range(&mut self, lo: i32, hi: i32) -> Result<(i32, i32), KernelError> {
        let min = self.take_in(lo, hi, "activation minimum")?;
        let max = self.take_in(min, hi, "activation maximum")?;
        Ok((min, max))
    }

    /// Words not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() / 4
    }
}

impl Words<'_> {
    /// Appends a list of words: its length, then each word (shapes of any rank, per-axis
    /// paddings, permutations).
    pub fn put_list(&mut self, list: &[u32]) {
        self.put(u32::try_from(list.len()).unwrap_or(u32::MAX));
        for &word in list {
            self.put(word);
        }
    }

    /// Appends a list of signed words ([`put_list`](Self::put_list)).
    pub fn put_list_i32(&mut self, list: &[i32]) {
        self.put(u32::try_from(list.len()).unwrap_or(u32::MAX));
        for &word in list {
            self.put_i32(word);
        }
    }
}

impl WordReader<'_> {
    /// A list [`Words::put_list`] wrote, of at most `N` words: the words (zeros after them)
    /// and how many there are.
    ///
    /// Errors: [`KernelError::Unsupported`] for a list longer than `N`, or words that end
    /// first.
    pub fn take_list<const N: usize>(&mut self) -> Result<([u32; N], usize), KernelError> {
        let len = usize::try_from(self.take()?)
            .ok()
            .filter(|&n| n <= N)
            .ok_or(KernelError::Unsupported {
                what: "packed list longer than its kind can be",
            })?;
        let mut list = [0; N];
        for word in &mut list[..len] {
            *word = self.take()?;
        }
        Ok((list, len))
    }

    /// A list [`Words::put_list_i32`] wrote ([`take_list`](Self::take_list)).
    pub fn take_list_i32<const N: usize>(&mut self) -> Result<([i32; N], usize), KernelError> {
        let (words, len) = self.take_list::<N>()?;
        Ok((words.map(|w| w as i32), len))
    }
}

/// A value that packs into words on its own.
pub trait Packed: Sized {
    /// Writes it.
    fn pack(&self, w: &mut Words<'_>);
    /// Reads one back, checking it as its constructor would.
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError>;
}

impl Packed for u32 {
    fn pack(&self, w: &mut Words<'_>) {
        w.put(*self);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        r.take()
    }
}

impl Packed for bool {
    fn pack(&self, w: &mut Words<'_>) {
        w.put(u32::from(*self));
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        match r.take()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(KernelError::Unsupported {
                what: "packed flag other than 0 or 1",
            }),
        }
    }
}

impl Packed for crate::FcShape {
    fn pack(&self, w: &mut Words<'_>) {
        w.put(self.batches);
        w.put(self.in_features);
        w.put(self.out_features);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let shape = crate::FcShape {
            batches: r.take()?,
            in_features: r.take()?,
            out_features: r.take()?,
        };
        shape.lens(1)?;
        Ok(shape)
    }
}

/// The int8 offsets and activation range most int8 kernels requantize with: `input_offset`
/// (the input's zero point negated, in `−127..=128`), `output_offset` (`−128..=127`), and the
/// activation range inside int8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Int8Quant {
    pub(crate) input_offset: i32,
    pub(crate) output_offset: i32,
    pub(crate) activation_min: i32,
    pub(crate) activation_max: i32,
}

impl Int8Quant {
    /// Writes the four fields, in their order.
    pub(crate) fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.input_offset);
        w.put_i32(self.output_offset);
        w.put_i32(self.activation_min);
        w.put_i32(self.activation_max);
    }

    /// Reads them back, checked.
    pub(crate) fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input_offset = r.take_input_offset("input zero point")?;
        let output_offset = r.take_zero_point("output zero point")?;
        let (activation_min, activation_max) = r.take_range(i8::MIN.into(), i8::MAX.into())?;
        Ok(Int8Quant {
            input_offset,
            output_offset,
            activation_min,
            activation_max,
        })
    }
}

/// Rescalings and int8 zero points, the quantization most parameters are made of.
impl Words<'_> {
    /// Appends a rescaling `(multiplier, shift)`: two words.
    pub fn put_multiplier(&mut self, (multiplier, shift): (i32, i32)) {
        self.put_i32(multiplier);
        self.put_i32(shift);
    }
}

impl WordReader<'_> {
    /// A rescaling `(multiplier, shift)` as TFLM's `QuantizeMultiplier` makes one for a
    /// non-negative real ([`quantize_multiplier`](crate::fixed_point::quantize_multiplier)):
    /// `(0, 0)`, or a Q0.31 mantissa in `[2^30, 2^31)` with a shift in `−31..=max_shift`
    /// (`0` for a multiplier below one, `31` the most any constructor takes). `what` names it
    /// in the error ([`KernelError::InvalidQuantization`]).
    pub fn take_multiplier(
        &mut self,
        max_shift: i32,
        what: &'static str,
    ) -> Result<(i32, i32), KernelError> {
        let (multiplier, shift) = (self.take_i32()?, self.take_i32()?);
        let normal = multiplier >= 1 << 30 && (-31..=max_shift).contains(&shift);
        if normal || (multiplier, shift) == (0, 0) {
            Ok((multiplier, shift))
        } else {
            Err(KernelError::InvalidQuantization { what })
        }
    }

    /// An int8 zero point, `−128..=127` (an output offset is one).
    pub fn take_zero_point(&mut self, what: &'static str) -> Result<i32, KernelError> {
        self.take_in(i8::MIN.into(), i8::MAX.into(), what)
    }

    /// An int8 input offset: a zero point negated, `−127..=128`.
    pub fn take_input_offset(&mut self, what: &'static str) -> Result<i32, KernelError> {
        self.take_in(-i32::from(i8::MAX), -i32::from(i8::MIN), what)
    }

    /// An element count and the length of the rows it is made of (softmax's, a reduction's):
    /// two words, the row length not zero and dividing the count.
    pub fn take_rows(&mut self) -> Result<(u32, u32), KernelError> {
        let (len, row) = (self.take()?, self.take()?);
        if row == 0 || len % row != 0 {
            return Err(KernelError::Unsupported {
                what: "rows that do not divide the elements",
            });
        }
        Ok((len, row))
    }
}

/// The quantization of a two-input operator that brings both inputs to a common scale before
/// combining them (ADD, SUB, SQUARED_DIFFERENCE): the inputs' offsets (zero points negated),
/// the output's zero point, and three rescalings, the inputs' below one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommonScale {
    pub(crate) input1_offset: i32,
    pub(crate) input2_offset: i32,
    pub(crate) output_offset: i32,
    pub(crate) input1: (i32, i32),
    pub(crate) input2: (i32, i32),
    pub(crate) output: (i32, i32),
}

impl CommonScale {
    /// Writes the fields, in their order.
    pub(crate) fn pack(&self, w: &mut Words<'_>) {
        for offset in [self.input1_offset, self.input2_offset, self.output_offset] {
            w.put_i32(offset);
        }
        for m in [self.input1, self.input2, self.output] {
            w.put_multiplier(m);
        }
    }

    /// Reads them back, checked: zero points in `zero_points` (int8's or int16's; the input
    /// offsets their negations), the output rescaling's shift at most `output_max_shift` (0
    /// where it is below one too, as ADD's and SUB's).
    pub(crate) fn unpack(
        r: &mut WordReader<'_>,
        (zp_min, zp_max): (i32, i32),
        output_max_shift: i32,
    ) -> Result<Self, KernelError> {
        Ok(CommonScale {
            input1_offset: r.take_in(-zp_max, -zp_min, "a zero point")?,
            input2_offset: r.take_in(-zp_max, -zp_min, "b zero point")?,
            output_offset: r.take_in(zp_min, zp_max, "output zero point")?,
            input1: r.take_multiplier(0, "a scale")?,
            input2: r.take_multiplier(0, "b scale")?,
            output: r.take_multiplier(output_max_shift, "output scale")?,
        })
    }
}

/// Checks the parameter types' tests share: a round trip, and damaged words.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// The words `pack` writes (at most 64).
    pub(crate) fn packed(pack: impl FnOnce(&mut Words<'_>)) -> ([u8; 256], usize) {
        let mut buf = [0u8; 256];
        let mut w = Words::new(&mut buf);
        pack(&mut w);
        let n = w.len().expect("parameters of at most 64 words");
        (buf, n)
    }

    /// `v` written by `pack` reads back as itself with `unpack`, using every word; no
    /// shorter words read back. The number of words.
    pub(crate) fn assert_round_trip_with<T: PartialEq + core::fmt::Debug>(
        v: &T,
        pack: impl Fn(&T, &mut Words<'_>),
        unpack: impl Fn(&mut WordReader<'_>) -> Result<T, KernelError>,
    ) -> usize {
        let (buf, n) = packed(|w| pack(v, w));
        let mut r = WordReader::new(&buf[..n]);
        assert_eq!(unpack(&mut r).as_ref(), Ok(v));
        assert_eq!(r.remaining(), 0, "{v:?}: words left over");
        for cut in (0..n).step_by(4) {
            assert!(
                unpack(&mut WordReader::new(&buf[..cut])).is_err(),
                "{cut} bytes"
            );
        }
        n / 4
    }

    /// [`assert_round_trip_with`] for a [`Packed`] type.
    pub(crate) fn assert_round_trip<T: Packed + PartialEq + core::fmt::Debug>(v: &T) -> usize {
        assert_round_trip_with(v, T::pack, T::unpack)
    }

    /// `v`'s words (written by `pack`) with word `at` replaced by `word`, read with `unpack`.
    pub(crate) fn with_word_with<T>(
        v: &T,
        at: usize,
        word: i32,
        pack: impl Fn(&T, &mut Words<'_>),
        unpack: impl Fn(&mut WordReader<'_>) -> Result<T, KernelError>,
    ) -> Result<T, KernelError> {
        let (mut buf, n) = packed(|w| pack(v, w));
        buf[4 * at..4 * at + 4].copy_from_slice(&word.to_le_bytes());
        unpack(&mut WordReader::new(&buf[..n]))
    }

    /// [`with_word_with`] for a [`Packed`] type.
    pub(crate) fn with_word<T: Packed>(v: &T, at: usize, word: i32) -> Result<T, KernelError> {
        with_word_with(v, at, word, T::pack, T::unpack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_a_full_buffer_is_remembered() {
        let mut buf = [0u8; 8];
        let mut w = Words::new(&mut buf);
        w.put(7);
        w.put_i32(-3);
        assert_eq!(w.len(), Some(8));
        w.put(1);
        assert_eq!(w.len(), None, "a third word does not fit eight bytes");
        let mut r = WordReader::new(&buf);
        assert_eq!(r.take(), Ok(7));
        assert_eq!(r.take_i32(), Ok(-3));
        assert!(r.take().is_err(), "the words end");
    }

    #[test]
    fn ranges_outside_their_bounds_are_refused() {
        let mut buf = [0u8; 8];
        let mut w = Words::new(&mut buf);
        w.put_i32(5);
        w.put_i32(4);
        let mut r = WordReader::new(&buf);
        assert!(r.take_range(-128, 127).is_err(), "maximum below minimum");
        let mut r = WordReader::new(&buf);
        assert_eq!(
            r.take_in(-128, 4, "x"),
            Err(KernelError::InvalidQuantization { what: "x" })
        );
    }

    #[test]
    fn lists_round_trip_and_a_long_one_is_refused() {
        let mut buf = [0u8; 32];
        let mut w = Words::new(&mut buf);
        w.put_list(&[4, 5, 6]);
        w.put_list_i32(&[-1, 2]);
        let mut r = WordReader::new(&buf);
        assert_eq!(r.take_list::<4>(), Ok(([4, 5, 6, 0], 3)));
        assert_eq!(r.take_list_i32::<2>(), Ok(([-1, 2], 2)));
        let mut r = WordReader::new(&buf);
        assert!(r.take_list::<2>().is_err(), "three words for a list of two");
    }

    #[test]
    fn a_flag_is_zero_or_one() {
        for (word, ok) in [(0u32, true), (1, true), (2, false)] {
            let bytes = word.to_le_bytes();
            assert_eq!(bool::unpack(&mut WordReader::new(&bytes)).is_ok(), ok);
        }
    }
}
