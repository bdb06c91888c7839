//! The layout of a compiled model's bytes, and the writer the graph compiles into.
//!
//! All little-endian; every field a `u32` word unless said otherwise:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | magic `NPUC` |
//! | 4 | 2 | format, 1 |
//! | 6 | 2 | steps `S` |
//! | 8 | 4 | the operator registry's fingerprint ([`registry`]) |
//! | 12 | 4 | the image's length in bytes |
//! | 16 | 4 | arena bytes the offsets address |
//! | 20 | 4 | the arena's alignment (a power of two, at least 4) |
//! | 24 | 1 + 1 + 1 + 1 | inputs `I`, outputs `O`, variables `V`, 0 |
//! | 28 | 4 | where the constants start (a multiple of 16) |
//! | 32 | 8 | FNV-1a 64 of the source `.tflite` file (what the image was made from) |
//! | 40 | 4 | CRC-32 of every byte after the header |
//! | 44 | 4 | 0 |
//! | 48 | 8·(I + O) | each input, then each output: arena offset, bytes |
//! | | 12·V | each variable: arena offset, bytes, the byte it starts as |
//! | | | `S` steps, each: tag (u16, the [`Op`](crate::ops::Op) variant's index in [`OPERATORS`]), inputs `n` (u8), 0 (u8); the parameter words `p`; the output's arena offset and bytes; `n` inputs, each a location and bytes; `p` parameter words ([`npu_kernels::packed`]) |
//! | | | the constants, each at a multiple of 16 |
//!
//! An input's location is an arena offset, or with bit 31 set an offset into the image (a
//! constant). The fingerprint of the operator registry changes whenever an operator is added,
//! removed or renamed, so an image written by another version's registry is refused rather
//! than read with other tags.

use crate::ops::OPERATORS;
use crate::tune::crc_update;

/// The first four bytes of a compiled model.
pub const MAGIC: [u8; 4] = *b"NPUC";
/// The layout this crate reads and writes.
pub const FORMAT: u16 = 1;
/// Bytes of the header.
pub(super) const HEADER: usize = 48;
/// Bytes of an input's or output's entry.
pub(super) const IO_ENTRY: usize = 8;
/// Bytes of a variable's entry.
pub(super) const VARIABLE_ENTRY: usize = 12;
/// Bytes of a step's fixed part (tag and counts, parameter words, output).
pub const STEP_HEAD: usize = 16;
/// Bytes of a step input's entry.
pub const INPUT_ENTRY: usize = 8;
/// A location with this bit set is an offset into the image.
pub const IN_IMAGE: u32 = 1 << 31;
/// Constants start at multiples of it: any view of them (`i32` biases, multipliers) is then
/// aligned wherever the image is.
pub const CONSTANT_ALIGNMENT: usize = 16;

/// FNV-1a 32 of the operator registry: every [`Op`](crate::ops::Op) variant's name, in order.
pub const fn registry() -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let mut i = 0;
    while i < OPERATORS.len() {
        let name = OPERATORS[i].name.as_bytes();
        let mut j = 0;
        while j <= name.len() {
            // A zero byte after each name, so that names cannot run into each other.
            let b = if j < name.len() { name[j] } else { 0 };
            h = (h ^ b as u32).wrapping_mul(0x0100_0193);
            j += 1;
        }
        i += 1;
    }
    h
}

/// CRC-32 of an image's bytes after its header.
pub(super) fn checksum(image: &[u8]) -> u32 {
    !crc_update(!0, image.get(HEADER..).unwrap_or(&[]))
}

/// The word at `at`, if the bytes have it.
pub(super) fn word(bytes: &[u8], at: usize) -> Option<u32> {
    let w = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

/// Writes an image front to back into a byte buffer; each write is `None` when the buffer is
/// too small.
pub struct ImageWriter<'a> {
    out: &'a mut [u8],
    len: usize,
}

impl<'a> ImageWriter<'a> {
    /// Writes into `out`, after room left for the header ([`finish`](Self::finish) fills it).
    pub fn new(out: &'a mut [u8]) -> Option<Self> {
        out.get_mut(..HEADER)?.fill(0);
        Some(ImageWriter { out, len: HEADER })
    }

    /// Bytes written so far (the header's included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing but the header's room is written.
    pub fn is_empty(&self) -> bool {
        self.len == HEADER
    }

    /// Appends words.
    pub fn words(&mut self, words: &[u32]) -> Option<()> {
        for &w in words {
            self.out
                .get_mut(self.len..self.len + 4)?
                .copy_from_slice(&w.to_le_bytes());
            self.len += 4;
        }
        Some(())
    }

    /// Appends bytes (a whole number of words, to keep what follows aligned).
    pub fn bytes(&mut self, bytes: &[u8]) -> Option<()> {
        let end = self.len.checked_add(bytes.len())?;
        self.out.get_mut(self.len..end)?.copy_from_slice(bytes);
        self.len = end;
        Some(())
    }

    /// The unwritten rest of the buffer, for a caller that writes in place and then
    /// [`advance`](Self::advance)s.
    pub fn rest(&mut self) -> &mut [u8] {
        &mut self.out[self.len..]
    }

    /// Counts `bytes` written into [`rest`](Self::rest).
    pub fn advance(&mut self, bytes: usize) -> Option<()> {
        let end = self.len.checked_add(bytes)?;
        (end <= self.out.len()).then(|| self.len = end)
    }

    /// Zeros up to the next multiple of [`CONSTANT_ALIGNMENT`].
    pub fn align(&mut self) -> Option<()> {
        let end = self.len.next_multiple_of(CONSTANT_ALIGNMENT);
        self.out.get_mut(self.len..end)?.fill(0);
        self.len = end;
        Some(())
    }

    /// Fills the header and returns the image's length.
    pub fn finish(self, header: &Header) -> Option<usize> {
        let len = u32::try_from(self.len).ok()?;
        let h = &mut self.out[..HEADER];
        h[0..4].copy_from_slice(&MAGIC);
        h[4..6].copy_from_slice(&FORMAT.to_le_bytes());
        h[6..8].copy_from_slice(&header.steps.to_le_bytes());
        h[8..12].copy_from_slice(&registry().to_le_bytes());
        h[12..16].copy_from_slice(&len.to_le_bytes());
        h[16..20].copy_from_slice(&header.arena.to_le_bytes());
        h[20..24].copy_from_slice(&header.alignment.to_le_bytes());
        h[24..28].copy_from_slice(&[header.inputs, header.outputs, header.variables, 0]);
        h[28..32].copy_from_slice(&header.constants_at.to_le_bytes());
        h[32..40].copy_from_slice(&header.model.to_le_bytes());
        let crc = checksum(&self.out[..self.len]);
        self.out[40..44].copy_from_slice(&crc.to_le_bytes());
        Some(self.len)
    }
}

/// The header's fields a writer supplies (the rest it computes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Steps.
    pub steps: u16,
    /// Arena bytes.
    pub arena: u32,
    /// The arena's alignment.
    pub alignment: u32,
    /// Model inputs.
    pub inputs: u8,
    /// Model outputs.
    pub outputs: u8,
    /// Variables.
    pub variables: u8,
    /// Where the constants start.
    pub constants_at: u32,
    /// FNV-1a 64 of the source model.
    pub model: u64,
}
