//! Candidates: the ways of running one operator that a tuner times against each other.

use crate::hal::Variant;
use crate::ops::Op;

/// Most candidates [`candidates`] lists: `Auto`, five blocks, `Im2col` and `Cpu`.
pub const MAX_CANDIDATES: usize = 8;

/// Output blocks (height, width) offered for the operators [`Variant::Block`] applies to. All
/// are 64 pixels, so they differ only in shape: they keep their meaning on NPUs with another
/// micro-block or buffer size.
pub const BLOCKS: [(u8, u8); 5] = [(8, 8), (16, 4), (4, 16), (2, 32), (32, 2)];

/// Bytes of an encoded [`Candidate`].
pub const CANDIDATE_BYTES: usize = 4;

const TAG_AUTO: u8 = 0x00;
const TAG_BLOCK: u8 = 0x01;
const TAG_IM2COL: u8 = 0x02;
const TAG_CPU: u8 = 0xC0;

/// One way of running an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Candidate {
    /// A compute job on the NPU running this variant.
    Npu(Variant),
    /// The CPU fallback kernels (inputs downloaded to host staging, the result uploaded).
    Cpu,
}

impl Default for Candidate {
    /// `Npu(Auto)`: what an untuned job runs.
    fn default() -> Self {
        Candidate::Npu(Variant::Auto)
    }
}

impl Candidate {
    /// The 4-byte table encoding `[tag, a, b, 0]`: `00 00 00 00` Auto, `01 h w 00`
    /// Block, `02 00 00 00` Im2col, `C0 00 00 00` Cpu. Unused bytes are zero, so one candidate
    /// has exactly one encoding and a re-exported table is byte-identical.
    pub const fn encode(self) -> [u8; CANDIDATE_BYTES] {
        match self {
            Candidate::Npu(Variant::Auto) => [TAG_AUTO, 0, 0, 0],
            Candidate::Npu(Variant::Block { h, w }) => [TAG_BLOCK, h, w, 0],
            Candidate::Npu(Variant::Im2col) => [TAG_IM2COL, 0, 0, 0],
            Candidate::Cpu => [TAG_CPU, 0, 0, 0],
        }
    }

    /// The candidate [`encode`](Self::encode) made, or `None` for an unknown tag, a non-zero
    /// unused byte or an empty block (0 rows or columns): a table from a newer schema or a
    /// corrupted one is refused rather than guessed at.
    pub const fn decode(bytes: [u8; CANDIDATE_BYTES]) -> Option<Candidate> {
        match bytes {
            [TAG_AUTO, 0, 0, 0] => Some(Candidate::Npu(Variant::Auto)),
            [TAG_BLOCK, h, w, 0] if h != 0 && w != 0 => {
                Some(Candidate::Npu(Variant::Block { h, w }))
            }
            [TAG_IM2COL, 0, 0, 0] => Some(Candidate::Npu(Variant::Im2col)),
            [TAG_CPU, 0, 0, 0] => Some(Candidate::Cpu),
            _ => None,
        }
    }
}

/// The candidate-set id of a [`TuneKey`](super::TuneKey): bit 0 blocks, bit 1 im2col, bit 2
/// CPU, as passed to [`candidates`]. `cpu` is whether the CPU was offered for this op (the
/// clock counts CPU time and the op is within the config's bound), so a shape tuned with the
/// CPU and one tuned without it are different keys.
pub const fn set_id(blocks: bool, im2col: bool, cpu: bool) -> u8 {
    (blocks as u8) | (im2col as u8) << 1 | (cpu as u8) << 2
}

/// The candidates worth timing for `op`, `Npu(Auto)` first (see the [module docs](crate::tune)).
///
/// `blocks`, `im2col` and `cpu` enable the families; `supports` is the driver's
/// [`Npu::supports_variant`](crate::hal::Npu::supports_variant) for this op. It is not asked
/// about `Auto`, which every driver runs, nor about `Cpu`, which the driver does not run.
pub fn candidates(
    op: &Op,
    blocks: bool,
    im2col: bool,
    cpu: bool,
    supports: impl Fn(Variant) -> bool,
) -> heapless::Vec<Candidate, MAX_CANDIDATES> {
    let mut list = heapless::Vec::new();
    // At most 1 + 5 + 1 + 1 = MAX_CANDIDATES pushes, so none fails; ignoring the result keeps
    // the function panic-free without an unreachable branch.
    let _ = list.push(Candidate::Npu(Variant::Auto));
    if blocks {
        if let Some((out_h, out_w)) = op.block_extent() {
            // Clipped shapes already offered; a later block with the same one is a repeat.
            let mut seen = heapless::Vec::<(u32, u32), { BLOCKS.len() }>::new();
            for (h, w) in BLOCKS {
                let v = Variant::Block { h, w };
                let clipped = (u32::from(h).min(out_h), u32::from(w).min(out_w));
                if !v.applies_to(op) || seen.contains(&clipped) || !supports(v) {
                    continue;
                }
                let _ = seen.push(clipped);
                let _ = list.push(Candidate::Npu(v));
            }
        }
    }
    if im2col && op.im2col().is_some_and(|i| i.helps) && supports(Variant::Im2col) {
        let _ = list.push(Candidate::Npu(Variant::Im2col));
    }
    if cpu {
        let _ = list.push(Candidate::Cpu);
    }
    list
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::{Conv2dI8, DepthwiseConv2dI8, FullyConnectedI8, MaxPool2dI8, ReluI8};
    use npu_kernels::int8::{
        Activation, Conv2dParams, Conv2dShape, DepthwiseParams, DepthwiseShape, FcParams, Nhwc,
        Padding, PoolParams, PoolShape, Quant, ReluParams, Window2d,
    };
    use npu_kernels::FcShape;

    const Q: Quant = Quant {
        scale: 0.5,
        zero_point: 0,
    };

    pub(crate) fn window(k: (u32, u32), s: (u32, u32), padding: Padding) -> Window2d {
        Window2d {
            filter_height: k.0,
            filter_width: k.1,
            stride_height: s.0,
            stride_width: s.1,
            dilation_height: 1,
            dilation_width: 1,
            padding,
        }
    }

    /// A convolution on a `h × w × cin` input.
    pub(crate) fn conv(
        (h, w, cin): (u32, u32, u32),
        filter_depth: u32,
        cout: u32,
        window: Window2d,
    ) -> Op {
        let shape = Conv2dShape {
            input: Nhwc {
                batches: 1,
                height: h,
                width: w,
                channels: cin,
            },
            out_channels: cout,
            filter_depth,
            window,
        };
        let params = Conv2dParams::new(shape, Q, Q, Activation::None).unwrap();
        Op::Conv2dI8(Conv2dI8 { shape, params })
    }

    pub(crate) fn depthwise((h, w, c): (u32, u32, u32), mult: u32, window: Window2d) -> Op {
        let shape = DepthwiseShape {
            input: Nhwc {
                batches: 1,
                height: h,
                width: w,
                channels: c,
            },
            depth_multiplier: mult,
            window,
        };
        let params = DepthwiseParams::new(shape, Q, Q, Activation::None).unwrap();
        Op::DepthwiseConv2dI8(DepthwiseConv2dI8 { shape, params })
    }

    pub(crate) fn max_pool((h, w, c): (u32, u32, u32), k: u32, s: u32) -> Op {
        let shape = PoolShape {
            input: Nhwc {
                batches: 1,
                height: h,
                width: w,
                channels: c,
            },
            filter_height: k,
            filter_width: k,
            stride_height: s,
            stride_width: s,
            padding: Padding::Valid,
        };
        let params = PoolParams::new(shape, Q, Q, Activation::None).unwrap();
        Op::MaxPool2dI8(MaxPool2dI8 { shape, params })
    }

    pub(crate) fn fc(batches: u32, in_features: u32, out_features: u32) -> Op {
        Op::FullyConnectedI8(FullyConnectedI8 {
            shape: FcShape {
                batches,
                in_features,
                out_features,
            },
            params: FcParams::new(Q, 0.5, Q, Activation::None).unwrap(),
        })
    }

    pub(crate) fn relu(len: u32) -> Op {
        Op::ReluI8(ReluI8 {
            len,
            params: ReluParams::new(Q, Q).unwrap(),
        })
    }

    fn all(op: &Op) -> heapless::Vec<Candidate, MAX_CANDIDATES> {
        candidates(op, true, true, true, |_| true)
    }

    fn block(h: u8, w: u8) -> Candidate {
        Candidate::Npu(Variant::Block { h, w })
    }

    #[test]
    fn encoding_round_trips() {
        let each = [
            Candidate::Npu(Variant::Auto),
            block(8, 8),
            block(32, 2),
            block(255, 1),
            Candidate::Npu(Variant::Im2col),
            Candidate::Cpu,
        ];
        for c in each {
            assert_eq!(Candidate::decode(c.encode()), Some(c), "{c:?}");
        }
        assert_eq!(block(16, 4).encode(), [1, 16, 4, 0]);
        assert_eq!(Candidate::Cpu.encode(), [0xC0, 0, 0, 0]);
        assert_eq!(Candidate::default(), Candidate::Npu(Variant::Auto));
    }

    #[test]
    fn unknown_or_non_canonical_encodings_are_refused() {
        for tag in 0..=255u8 {
            if ![TAG_AUTO, TAG_BLOCK, TAG_IM2COL, TAG_CPU].contains(&tag) {
                assert_eq!(Candidate::decode([tag, 0, 0, 0]), None, "tag {tag:#x}");
            }
        }
        assert_eq!(Candidate::decode([0, 1, 0, 0]), None);
        assert_eq!(Candidate::decode([1, 8, 8, 1]), None);
        assert_eq!(Candidate::decode([1, 0, 8, 0]), None);
        assert_eq!(Candidate::decode([1, 8, 0, 0]), None);
        assert_eq!(Candidate::decode([2, 0, 0, 9]), None);
        assert_eq!(Candidate::decode([0xC0, 0, 1, 0]), None);
    }

    #[test]
    fn set_ids_are_distinct_bits() {
        assert_eq!(set_id(false, false, false), 0);
        assert_eq!(set_id(true, false, false), 1);
        assert_eq!(set_id(false, true, false), 2);
        assert_eq!(set_id(false, false, true), 4);
        assert_eq!(set_id(true, true, true), 7);
    }

    #[test]
    fn large_conv_gets_every_candidate_auto_first() {
        let op = conv((32, 32, 16), 16, 16, window((3, 3), (1, 1), Padding::Same));
        let list = all(&op);
        assert_eq!(list.len(), MAX_CANDIDATES);
        assert_eq!(list[0], Candidate::Npu(Variant::Auto));
        assert_eq!(list[1..6], BLOCKS.map(|(h, w)| block(h, w)));
        assert_eq!(list[6], Candidate::Npu(Variant::Im2col));
        assert_eq!(list[7], Candidate::Cpu);
    }

    #[test]
    fn families_can_be_switched_off() {
        let op = conv((32, 32, 16), 16, 16, window((3, 3), (1, 1), Padding::Same));
        let none = candidates(&op, false, false, false, |_| true);
        assert_eq!(&none[..], &[Candidate::Npu(Variant::Auto)]);
        let cpu_only = candidates(&op, false, false, true, |_| true);
        assert_eq!(
            &cpu_only[..],
            &[Candidate::Npu(Variant::Auto), Candidate::Cpu]
        );
    }

    #[test]
    fn im2col_rules() {
        let has = |op: &Op| all(op).contains(&Candidate::Npu(Variant::Im2col));
        let same = Padding::Same;
        // 1×1 stride 1: already a matrix product.
        assert!(!has(&conv((8, 8, 16), 16, 8, window((1, 1), (1, 1), same))));
        // A window, or a stride that skips input.
        assert!(has(&conv((8, 8, 16), 16, 8, window((3, 3), (1, 1), same))));
        assert!(has(&conv((8, 8, 16), 16, 8, window((1, 3), (1, 1), same))));
        assert!(has(&conv((8, 8, 16), 16, 8, window((1, 1), (2, 2), same))));
        assert!(has(&conv((8, 8, 16), 16, 8, window((1, 1), (1, 2), same))));
        // Grouped: the filter reads a part of the input channels.
        assert!(!has(&conv((8, 8, 16), 8, 8, window((3, 3), (1, 1), same))));
        // Never for depthwise or pools, even with a window.
        assert!(!has(&depthwise(
            (8, 8, 16),
            1,
            window((3, 3), (1, 1), same)
        )));
        assert!(!has(&max_pool((8, 8, 16), 2, 2)));
        // Not when the family is off or the driver refuses it.
        let op = conv((8, 8, 16), 16, 8, window((3, 3), (1, 1), same));
        let off = candidates(&op, true, false, false, |_| true);
        assert!(!off.contains(&Candidate::Npu(Variant::Im2col)));
        let refused = candidates(&op, true, true, false, |v| v != Variant::Im2col);
        assert!(!refused.contains(&Candidate::Npu(Variant::Im2col)));
        assert_eq!(refused.len(), 6);
    }

    #[test]
    fn blocks_that_clip_alike_are_offered_once() {
        // A batch-1 fully connected layer: one output pixel, every block is 1×1.
        let list = all(&fc(1, 64, 10));
        assert_eq!(
            &list[..],
            &[Candidate::Npu(Variant::Auto), block(8, 8), Candidate::Cpu]
        );
        // 4 rows (clipped to 4×4): 8×8, 16×4 and 4×16 become 4×4; 2×32 → 2×4 and 32×2 → 4×2.
        let list = all(&fc(4, 64, 10));
        assert_eq!(
            &list[..],
            &[
                Candidate::Npu(Variant::Auto),
                block(8, 8),
                block(2, 32),
                block(32, 2),
                Candidate::Cpu
            ]
        );
        // A 6×6 output: 8×8, 16×4 → 6×4, 4×16 → 4×6, 2×32 → 2×6, 32×2 → 6×2 all differ.
        let op = depthwise((6, 6, 128), 1, window((3, 3), (1, 1), Padding::Same));
        assert_eq!(all(&op).len(), 7);
        // A 2×2 output: 8×8, 16×4 and 4×16 all clip to 2×2; 2×32 too; 32×2 too.
        let op = max_pool((4, 4, 8), 2, 2);
        assert_eq!(
            &all(&op)[..],
            &[Candidate::Npu(Variant::Auto), block(8, 8), Candidate::Cpu]
        );
    }

    #[test]
    fn refused_blocks_do_not_hide_later_equal_ones() {
        // The driver refuses 8×8; 16×4 clips to the same 1×1 and is offered in its place.
        let list = candidates(&fc(1, 64, 10), true, false, false, |v| {
            v != Variant::Block { h: 8, w: 8 }
        });
        assert_eq!(&list[..], &[Candidate::Npu(Variant::Auto), block(16, 4)]);
        // Auto is kept even if `supports` says no to everything.
        let op = conv((32, 32, 16), 16, 16, window((3, 3), (1, 1), Padding::Same));
        let list = candidates(&op, true, true, false, |_| false);
        assert_eq!(&list[..], &[Candidate::Npu(Variant::Auto)]);
    }

    #[test]
    fn elementwise_ops_only_get_auto_and_cpu() {
        let list = all(&relu(1000));
        assert_eq!(&list[..], &[Candidate::Npu(Variant::Auto), Candidate::Cpu]);
    }
}
