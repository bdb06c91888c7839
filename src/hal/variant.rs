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

use super::op::{Op, OpKind};

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
    /// (`batches · out_h · out_w` rows of `filter_h · filter_w · in_channels` bytes) for
    /// [`Variant::Im2col`] on a convolution, else 0. `None` if the size overflows `u32`.
    pub fn scratch_bytes(self, op: &Op) -> Option<u32> {
        match (self, op) {
            (Variant::Im2col, Op::Conv2dI8 { shape, params }) => {
                let out = params.output_shape();
                let rows = u64::from(out.batches) * u64::from(out.height) * u64::from(out.width);
                let row = u64::from(shape.window.filter_height)
                    * u64::from(shape.window.filter_width)
                    * u64::from(shape.filter_depth);
                u32::try_from(rows.checked_mul(row)?).ok()
            }
            _ => Some(0),
        }
    }

    /// Whether the variant can apply to an operator of kind `kind` at all (a driver may
    /// support less).
    pub fn applies_to(self, kind: OpKind) -> bool {
        match self {
            Variant::Auto => true,
            Variant::Block { .. } => matches!(
                kind,
                OpKind::Conv2d
                    | OpKind::DepthwiseConv2d
                    | OpKind::AveragePool2d
                    | OpKind::MaxPool2d
                    | OpKind::FullyConnected
            ),
            Variant::Im2col => kind == OpKind::Conv2d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use npu_kernels::int8::{Activation, AddParams, Quant};

    #[test]
    fn only_im2col_needs_scratch_and_only_where_it_applies() {
        let q = Quant {
            scale: 0.5,
            zero_point: 0,
        };
        let add = Op::AddI8 {
            len: 4,
            params: AddParams::new(q, q, q, Activation::None).unwrap(),
        };
        assert_eq!(Variant::Im2col.scratch_bytes(&add), Some(0));
        assert_eq!(Variant::Auto.scratch_bytes(&add), Some(0));
        assert!(Variant::Auto.applies_to(OpKind::Add));
        assert!(!Variant::Im2col.applies_to(OpKind::DepthwiseConv2d));
        assert!(Variant::Block { h: 8, w: 8 }.applies_to(OpKind::FullyConnected));
        assert!(!Variant::Block { h: 8, w: 8 }.applies_to(OpKind::Softmax));
    }
}
