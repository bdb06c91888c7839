//! Kernel variants: interchangeable ways for an NPU to run one operator.
//!
//! # Design
//!
//! An operator has one result but, on a real NPU, several ways to get it: the output block the
//! engine walks the tensor in, or a convolution lowered to a gather (im2col) and a matrix
//! product. Which is fastest depends on the shape against the engine's MAC array and buffers,
//! and the driver's own heuristic does not always find it (Vela's picks the block that fetches
//! least, not the fastest). A [`Variant`] rides with each compute job so that a tuner can time
//! the alternatives and keep the winner; [`Variant::Auto`] is the driver's own choice and what
//! every job carries unless a tuner says otherwise.
//!
//! Every variant computes the same bytes. A driver declares which it runs with
//! [`Npu::supports_variant`](super::Npu::supports_variant); the default is `Auto` only.

use crate::ops::Op;

/// How the NPU runs a compute job's operator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Variant {
    /// The driver's own choice.
    #[default]
    Auto,
    /// The output walked in blocks of `h` × `w` pixels (clipped to the output); the driver
    /// still chooses the block's depth. Convolutions, depthwise convolutions, pools and fully
    /// connected layers.
    Block {
        /// Block height in output pixels.
        h: u8,
        /// Block width in output pixels.
        w: u8,
    },
    /// A convolution as a gather of each output pixel's input window into a scratch matrix
    /// (one row per output pixel), then one matrix product with the filter. Needs
    /// [`scratch_bytes`](Self::scratch_bytes) of device memory.
    Im2col,
}

impl core::fmt::Display for Variant {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Variant::Auto => f.write_str("the driver's own choice"),
            Variant::Block { h, w } => write!(f, "{h}x{w} output blocks"),
            Variant::Im2col => f.write_str("im2col"),
        }
    }
}

impl Variant {
    /// Bytes of scratch device memory the variant needs for `op`: the im2col matrix
    /// ([`Op::im2col`]) for [`Variant::Im2col`] on an operator that has one, else 0. `None` if
    /// the size overflows `u32`.
    pub fn scratch_bytes(self, op: &Op) -> Option<u32> {
        match (self, op.im2col()) {
            (Variant::Im2col, Some(im2col)) => im2col.bytes,
            _ => Some(0),
        }
    }

    /// Whether the variant can apply to `op` at all (a driver may support less): output blocks
    /// to operators an NPU walks in blocks ([`Op::block_extent`]), im2col to those that run as
    /// a gather and a matrix product ([`Op::im2col`]).
    pub fn applies_to(self, op: &Op) -> bool {
        match self {
            Variant::Auto => true,
            Variant::Block { .. } => op.block_extent().is_some(),
            Variant::Im2col => op.im2col().is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{AddI8, FullyConnectedF32};
    use npu_kernels::int8::{Activation, AddParams, Quant};
    use npu_kernels::FcShape;

    #[test]
    fn only_im2col_needs_scratch_and_only_where_it_applies() {
        let q = Quant {
            scale: 0.5,
            zero_point: 0,
        };
        let add = Op::from(AddI8 {
            len: 4,
            params: AddParams::new(q, q, q, Activation::None).unwrap(),
        });
        let fc = Op::from(FullyConnectedF32 {
            shape: FcShape {
                batches: 2,
                in_features: 4,
                out_features: 3,
            },
        });
        assert_eq!(Variant::Im2col.scratch_bytes(&add), Some(0));
        assert_eq!(Variant::Auto.scratch_bytes(&add), Some(0));
        assert!(Variant::Auto.applies_to(&add));
        assert!(!Variant::Block { h: 8, w: 8 }.applies_to(&add));
        assert!(!Variant::Im2col.applies_to(&fc));
        assert!(Variant::Block { h: 8, w: 8 }.applies_to(&fc));
    }
}
