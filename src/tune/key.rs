//! Tuning keys: which operators share one tuned choice.

use crate::ops::{KeyShape, Op, OpKind};

/// Bytes of a [`TuneKey`].
pub const KEY_BYTES: usize = 16;

/// The byte offset of the five size buckets in a key.
const SIZES: usize = 11;

/// Identifies the operators that share one tuned choice (see the [module docs](crate::tune)).
///
/// Keys order by their bytes, which is the order of a tuning table's entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TuneKey(pub [u8; KEY_BYTES]);

/// `⌈log2 max(x, 1)⌉`: 0 for 0 and 1, 5 for 17..=32, 32 for anything above 2³¹.
pub const fn bucket(x: u32) -> u8 {
    if x <= 1 {
        0
    } else {
        // x − 1 has its highest bit at ⌈log2 x⌉ − 1; at most 32, so the cast is exact.
        (u32::BITS - (x - 1).leading_zeros()) as u8
    }
}

/// A parameter kept exact in a key; anything above 255 (which no NPU window reaches) is 255.
fn exact(x: u32) -> u8 {
    u8::try_from(x).unwrap_or(u8::MAX)
}

fn size(x: u64) -> u8 {
    bucket(u32::try_from(x).unwrap_or(u32::MAX))
}

impl TuneKey {
    /// The key of `op` tuned over the candidate set `set_id` ([`set_id`](super::set_id)).
    pub fn of(op: &Op, set_id: u8) -> TuneKey {
        let mut k = [0u8; KEY_BYTES];
        let kind = op.kind();
        // The position in ALL, not the enum's discriminant: ALL is the published order (the
        // OpSet bits), so a key means the same as long as that list only grows at its end.
        let index = OpKind::ALL.iter().position(|&x| x == kind);
        k[0] = index.and_then(|i| u8::try_from(i).ok()).unwrap_or(u8::MAX);
        k[1] = op.dtype() as u8;
        k[2] = set_id;
        // Bytes 3..=10: flags and the exact window; 11..=15 the size buckets.
        let KeyShape { window, sizes } = op.key_shape();
        for (b, &x) in k[3..SIZES].iter_mut().zip(&window) {
            *b = exact(x);
        }
        for (b, &x) in k[SIZES..].iter_mut().zip(&sizes) {
            *b = size(x);
        }
        TuneKey(k)
    }

    /// The operator family's index in [`OpKind::ALL`] (byte 0).
    pub const fn op_index(&self) -> u8 {
        self.0[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{AveragePool2dI8, FullyConnectedF32, MaxPool2dI8};
    use crate::tune::candidate::tests::{conv, depthwise, fc, max_pool, relu, window};
    use npu_kernels::int8::Padding::{Same, Valid};
    use npu_kernels::FcShape;

    #[test]
    fn buckets_round_up_to_a_power_of_two() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(2), 1);
        assert_eq!(bucket(3), 2);
        assert_eq!(bucket(25), 5);
        assert_eq!(bucket(32), 5);
        assert_eq!(bucket(33), 6);
        assert_eq!(bucket(1 << 31), 31);
        assert_eq!(bucket((1 << 31) + 1), 32);
        assert_eq!(bucket(u32::MAX), 32);
    }

    fn c3(hw: u32, cin: u32, cout: u32) -> Op {
        conv((hw, hw, cin), cin, cout, window((3, 3), (1, 1), Same))
    }

    #[test]
    fn layout_of_a_convolution_key() {
        let k = TuneKey::of(&c3(25, 16, 32), 5);
        let conv_index = OpKind::ALL.iter().position(|&x| x == OpKind::Conv2d);
        assert_eq!(Some(usize::from(k.op_index())), conv_index);
        assert_eq!(k.0[1], 1, "int8");
        assert_eq!(k.0[2], 5);
        assert_eq!(k.0[3], 1, "SAME");
        assert_eq!(&k.0[4..11], &[3, 3, 1, 1, 1, 1, 1]);
        assert_eq!(&k.0[11..], &[0, 5, 5, 4, 5]);
    }

    #[test]
    fn sizes_within_a_bucket_share_a_key() {
        let set = 7;
        assert_eq!(
            TuneKey::of(&c3(25, 16, 32), set),
            TuneKey::of(&c3(32, 16, 32), set)
        );
        assert_eq!(
            TuneKey::of(&c3(17, 9, 17), set),
            TuneKey::of(&c3(32, 16, 32), set)
        );
        assert_eq!(
            TuneKey::of(&fc(1, 100, 10), set),
            TuneKey::of(&fc(1, 128, 16), set)
        );
        assert_eq!(TuneKey::of(&relu(1000), 0), TuneKey::of(&relu(1024), 0));
    }

    #[test]
    fn what_changes_a_key() {
        let base = TuneKey::of(&c3(32, 16, 32), 7);
        let differ = |op: &Op, set: u8, what: &str| {
            assert_ne!(TuneKey::of(op, set), base, "{what}");
        };
        differ(&c3(33, 16, 32), 7, "height bucket");
        differ(&c3(32, 17, 32), 7, "input channels bucket");
        differ(&c3(32, 16, 33), 7, "output channels bucket");
        differ(&c3(32, 16, 32), 3, "candidate set");
        let k = |f: (u32, u32), s: (u32, u32), p| conv((32, 32, 16), 16, 32, window(f, s, p));
        differ(&k((1, 1), (1, 1), Same), 7, "kernel");
        differ(&k((3, 1), (1, 1), Same), 7, "kernel width");
        differ(&k((3, 3), (2, 2), Same), 7, "stride");
        differ(&k((3, 3), (1, 2), Same), 7, "stride width");
        differ(&k((3, 3), (1, 1), Valid), 7, "padding");
        let mut dilated = window((3, 3), (1, 1), Same);
        dilated.dilation_width = 2;
        differ(&conv((32, 32, 16), 16, 32, dilated), 7, "dilation");
        differ(
            &conv((32, 32, 16), 8, 32, window((3, 3), (1, 1), Same)),
            7,
            "groups",
        );
        differ(
            &depthwise((32, 32, 16), 2, window((3, 3), (1, 1), Same)),
            7,
            "op (depthwise)",
        );
        // dtype: the same fully connected shape in f32 and int8.
        let shape = FcShape {
            batches: 1,
            in_features: 64,
            out_features: 10,
        };
        assert_ne!(
            TuneKey::of(&Op::FullyConnectedF32(FullyConnectedF32 { shape }), 0),
            TuneKey::of(&fc(1, 64, 10), 0),
            "dtype"
        );
        // Same sizes and window, other family.
        let Op::MaxPool2dI8(MaxPool2dI8 { shape, params }) = max_pool((32, 32, 16), 3, 1) else {
            unreachable!()
        };
        assert_ne!(
            TuneKey::of(&Op::MaxPool2dI8(MaxPool2dI8 { shape, params }), 0),
            TuneKey::of(&Op::AveragePool2dI8(AveragePool2dI8 { shape, params }), 0),
            "op (pool)"
        );
    }

    #[test]
    fn exact_parameters_saturate() {
        let dw = |mult| depthwise((4, 4, 1), mult, window((1, 1), (1, 1), Valid));
        let k = TuneKey::of(&dw(300), 0);
        assert_eq!(k.0[10], 255);
        assert_eq!(TuneKey::of(&dw(255), 0).0[10], 255);
        assert_eq!(TuneKey::of(&dw(254), 0).0[10], 254);
        // 300 and 400 output channels share a bucket, and both multipliers saturate.
        assert_eq!(TuneKey::of(&dw(400), 0), k);
    }

    #[test]
    fn other_operators_use_their_sizes() {
        let k = TuneKey::of(&fc(3, 64, 10), 0);
        assert_eq!(&k.0[3..11], &[0; 8]);
        assert_eq!(&k.0[11..], &[2, 0, 0, 6, 4]);
        let k = TuneKey::of(&relu(1000), 0);
        assert_eq!(&k.0[11..], &[10, 0, 0, 0, 0]);
        assert_ne!(TuneKey::of(&relu(1025), 0), k);
    }
}
