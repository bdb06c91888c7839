//! Test fixtures: the layers and the configuration that the tests of several stages share,
//! defined once so that a figure pinned in one stage's tests is about the same layer as in
//! another's.

use super::{LayerDesc, LayerKind, U55Config, Variant};

pub(super) const CFG: U55Config = U55Config::ETHOS_U55_128;

pub(super) fn conv(ifm: [u32; 4], ofm: [u32; 4], k: u32, weights: u32) -> LayerDesc {
    LayerDesc {
        kernel: (k, k),
        weight_bytes: weights,
        weights_in_flash: true,
        ..LayerDesc::new(LayerKind::Conv2d, ifm, ofm)
    }
}

/// A convolution-like layer with its weights resident in SRAM (what a tuner times), run as
/// `variant`.
pub(super) fn resident(
    kind: LayerKind,
    ifm: [u32; 4],
    ofm: [u32; 4],
    k: (u32, u32),
    s: u32,
) -> LayerDesc {
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

pub(super) fn as_variant(desc: LayerDesc, variant: Variant) -> LayerDesc {
    LayerDesc { variant, ..desc }
}

pub(super) const KWS_PW: ([u32; 4], [u32; 4]) = ([1, 25, 5, 64], [1, 25, 5, 64]);
