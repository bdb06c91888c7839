//! Step 1, the block search: the OFM block (and the IFM block feeding it) a pass runs in.
//! Every later figure follows from this choice (MAC cycles per block, the number of blocks,
//! the input re-read per block), so it reproduces Vela's `FindBlockConfig` exactly, SHRAM fit
//! and tie-breaks included. A forced block (the block variant) goes through the same search
//! narrowed to one H x W, so that it fits or fails under the same rules.

use core::cmp::{max, min};

use super::pass::{div_ceil_shape, round_up, NpuOp, Pass, Shp};
use super::U55Config;

/// Micro-block (H, W, C) of the 128-MAC part.
pub(super) const UBLOCK: Shp = Shp::new(1, 2, 8);
/// Largest kernel piece the hardware processes at once, H and W.
pub(super) const SUBKERNEL: u32 = 8;
/// SHRAM bank size in bytes.
const BANK_BYTES: u32 = 1024;
/// SHRAM banks reserved at the bottom for the output.
const RESERVED_OUTPUT_BANKS: u32 = 2;
/// OFM depth granule of the block search.
const OFM_SPLIT_DEPTH: u32 = 16;

/// The chosen block configuration of a pass.
#[derive(Clone, Copy, Debug)]
pub(super) struct BlockConfig {
    pub(super) ofm: Shp,
    pub(super) ifm: Shp,
    pub(super) part_kernel: bool,
}

/// A non-negative rational for exact comparisons of the block search's costs.
#[derive(Clone, Copy, Debug)]
struct Ratio {
    pub(super) num: u128,
    pub(super) den: u128,
}

impl Ratio {
    fn le(self, o: Ratio) -> bool {
        self.num.saturating_mul(o.den) <= o.num.saturating_mul(self.den)
    }

    fn eq(self, o: Ratio) -> bool {
        self.num.saturating_mul(o.den) == o.num.saturating_mul(self.den)
    }
}

/// Part-kernel traversal when the input is shallow or it uses the MACs better than
/// depth-first (Vela's `ChooseKernelMethod`).
fn choose_part_kernel(ifm_depth: u32, ifm_bits: u32, kernel: (u32, u32)) -> bool {
    if ifm_depth <= 8 {
        return true;
    }
    let k = u64::from(kernel.0) * u64::from(kernel.1);
    let d = u64::from(ifm_depth);
    let depth_round = u64::from(round_up(ifm_depth, if ifm_bits == 8 { 32 } else { 16 }));
    let d8 = u64::from(round_up(ifm_depth, 8));
    let k_round = k.div_ceil(if ifm_bits == 8 { 4 } else { 2 }) * if ifm_bits == 8 { 4 } else { 2 };
    // part = d/d8 * k/k_round  >=  depth = d/depth_round
    let part = u128::from(d) * u128::from(k) * u128::from(depth_round);
    let depth = u128::from(d) * u128::from(d8) * u128::from(k_round);
    part >= depth
}

fn dilated(k: u32, d: u32) -> u32 {
    k.saturating_sub(1)
        .saturating_mul(d.max(1))
        .saturating_add(1)
}

/// Vela's `FindBlockConfig`: the OFM block (and the IFM block feeding it) that fits SHRAM and
/// fetches the least per output element; one micro-block if nothing fits.
pub(super) fn find_block(p: &Pass, cfg: &U55Config) -> BlockConfig {
    match search_block(p, cfg, None) {
        Ok(block) | Err(block) => block,
    }
}

/// The block search. `forced`: only OFM blocks of that H x W, clipped to the search space
/// (`H = min(h, OFM H, max H)`, `W = min(w, OFM W, max W)` rounded up to the micro-block's 2),
/// with the depth still searched; `None` searches every H x W, which is exactly Vela's search.
/// `Err` when no candidate fits SHRAM, with the micro-block Vela then falls back to.
pub(super) fn search_block(
    p: &Pass,
    cfg: &U55Config,
    forced: Option<(u32, u32)>,
) -> Result<BlockConfig, BlockConfig> {
    let ifm = match p.ifm2 {
        Some(i2) if i2.elems() > p.ifm.elems() => i2,
        _ => p.ifm,
    };
    let op = match p.op {
        NpuOp::MatMul => NpuOp::ReduceSum,
        other => other,
    };
    let ew = op == NpuOp::Elementwise;
    let uses_scalar = p.ifm.is_scalar() || p.ifm2.is_some_and(Shp::is_scalar);
    let ew_full = ew && !(uses_scalar && p.ifm_bits <= 16);
    let is_pool = matches!(op, NpuOp::Pooling | NpuOp::ReduceSum);
    let is_rsum = op == NpuOp::ReduceSum;
    let is_dw = op == NpuOp::Depthwise;
    let equal_depth = ew || (is_pool && !is_rsum) || is_dw;
    let part_kernel = op == NpuOp::Conv && choose_part_kernel(ifm.c, p.ifm_bits, p.kernel);

    let acc_bits = 32u32;
    let acc_granule = 8u32;
    let ifm_granule = if p.ifm_bits == 32 { 8 } else { 4 };
    let lut_banks = max(p.lut_bytes.div_ceil(BANK_BYTES), 2);
    let total_banks = cfg.shram_banks;

    let dkh = dilated(p.kernel.0, p.dilation.0);
    let dkw = dilated(p.kernel.1, p.dilation.1);
    let ifm_repeats = u64::from(dkw.div_ceil(SUBKERNEL)) * u64::from(dkh.div_ceil(SUBKERNEL));
    let ifm_block_depth = if p.ifm_bits == 16 {
        round_up(min(ifm.c, 16), 4)
    } else {
        round_up(min(ifm.c, if part_kernel { 16 } else { 32 }), UBLOCK.c)
    };
    let has_weights = matches!(op, NpuOp::Conv | NpuOp::Depthwise);
    let weight_fetch_wh = if has_weights {
        u64::from(p.kernel.0) * u64::from(p.kernel.1)
    } else {
        0
    };

    // The search space, bounded so that the "won't fit" set is a fixed bitmap.
    let max_h = cfg.max_ofm_block[0].clamp(1, 64);
    let max_w = cfg.max_ofm_block[1].clamp(2, 128);
    let max_c = cfg.max_ofm_block[2].clamp(8, 1024);
    let ofm = p.ofm;
    let space = Shp::new(
        min(ofm.h, max_h),
        round_up(min(ofm.w, max_w), UBLOCK.w),
        round_up(min(ofm.c, max_c), UBLOCK.c),
    );
    // Inclusive ranges of the candidate heights and widths. A forced block narrows both to
    // one value; a zero request leaves them empty (nothing fits).
    let ((h_lo, h_hi), (w_lo, w_hi)) = match forced {
        None => ((1, space.h), (UBLOCK.w, space.w)),
        Some((h, w)) => {
            let h = min(h, space.h);
            let w = round_up(min(w, space.w), UBLOCK.w);
            if h == 0 || w == 0 {
                ((1, 0), (UBLOCK.w, 0))
            } else {
                ((h, h), (w, w))
            }
        }
    };
    let mut wont_fit = [0u64; 64];
    let ofm_elems = u128::from(ofm.elems());
    let ifm_elems = u128::from(ifm.elems());

    let mut best: Option<(Ratio, Option<Ratio>, BlockConfig)> = None;
    let mut depth = space.c.clamp(UBLOCK.c, OFM_SPLIT_DEPTH);
    if depth < ofm.c {
        depth = round_up(depth, OFM_SPLIT_DEPTH);
    }
    while depth <= space.c {
        for height in h_lo..=h_hi {
            for width in (w_lo..=w_hi).step_by(UBLOCK.w as usize) {
                let bit = 1u64 << ((width / UBLOCK.w - 1) % 64);
                let row = ((height - 1) % 64) as usize;
                if wont_fit[row] & bit != 0 {
                    continue;
                }
                let ofm_block = Shp::new(height, width, depth);
                let ih = (height - 1)
                    .saturating_mul(p.stride.0.max(1))
                    .saturating_add(min(dkh, SUBKERNEL));
                let iw = round_up(
                    (width - 1)
                        .saturating_mul(p.stride.1.max(1))
                        .saturating_add(min(dkw, SUBKERNEL)),
                    UBLOCK.w,
                );
                let ifm_block = Shp::new(ih, iw, if equal_depth { depth } else { ifm_block_depth });

                // SHRAM: reserved output banks, double-buffered IFM, then accumulators (or a
                // second IFM for elementwise) below the lookup table.
                let ifm_bytes = ifm_block.wh().saturating_mul(u64::from(round_up(
                    ifm_block.c.saturating_mul(p.ifm_bits / 8),
                    8,
                )));
                let ifm_banks = round_up(
                    u32::try_from(ifm_bytes.div_ceil(u64::from(BANK_BYTES)))
                        .unwrap_or(u32::MAX)
                        .saturating_mul(2),
                    ifm_granule,
                );
                let lut_start = total_banks.saturating_sub(lut_banks);
                let mut ifm_end = RESERVED_OUTPUT_BANKS.saturating_add(ifm_banks);
                let mut acc_start = lut_start;
                let mut fits = true;
                if ew {
                    let ifm2_banks = if ew_full { ifm_banks } else { 0 };
                    if ifm_end.saturating_add(ifm2_banks) > acc_start {
                        fits = false;
                    }
                    ifm_end = acc_start;
                } else {
                    let acc_bytes =
                        ofm_block.wh() * u64::from(round_up(depth, 8)) * u64::from(acc_bits) / 8;
                    let acc_banks = round_up(
                        u32::try_from(acc_bytes.div_ceil(u64::from(BANK_BYTES)))
                            .unwrap_or(u32::MAX)
                            .saturating_mul(2),
                        acc_granule,
                    );
                    acc_start = acc_start.saturating_sub(acc_banks);
                    if acc_banks > lut_start {
                        fits = false;
                    }
                }
                if !fits || ifm_end > acc_start {
                    wont_fit[row] |= bit;
                    continue;
                }

                // Relative cost (input and weight fetch per output element), as a rational.
                let full = div_ceil_shape(ofm, ofm_block);
                let mut cost = if ew {
                    Ratio {
                        num: ofm_elems,
                        den: u128::from(height) * u128::from(width) * u128::from(depth),
                    }
                } else {
                    // Saturating: only absurd shapes get near the limits, and then any
                    // choice will do.
                    let product = |factors: &[u64]| {
                        factors
                            .iter()
                            .fold(1u128, |acc, &f| acc.saturating_mul(u128::from(f)))
                    };
                    let mut weight_fetch = product(&[
                        weight_fetch_wh,
                        u64::from(ifm.c),
                        u64::from(full.h),
                        u64::from(full.w),
                    ]);
                    if !is_dw {
                        weight_fetch = weight_fetch.saturating_mul(u128::from(ofm.c));
                    }
                    let mut ifm_fetch = product(&[
                        ifm_block.wh(),
                        u64::from(ifm.c),
                        ifm_repeats,
                        u64::from(ofm.h),
                        u64::from(ofm.w),
                    ]);
                    if !equal_depth {
                        ifm_fetch = ifm_fetch.saturating_mul(u128::from(full.c));
                    }
                    let hw = u128::from(height) * u128::from(width);
                    Ratio {
                        num: ifm_fetch.saturating_add(weight_fetch.saturating_mul(hw)),
                        den: hw.saturating_mul(ofm_elems.max(1)),
                    }
                };
                if ifm_elems < u128::from(ifm_block.elems()) * 2 {
                    cost.den = cost.den.saturating_mul(2);
                }

                let block = BlockConfig {
                    ofm: ofm_block,
                    ifm: ifm_block,
                    part_kernel,
                };
                match best {
                    None => best = Some((cost, None, block)),
                    Some((best_cost, best_cov, _)) if cost.le(best_cost) => {
                        if cost.eq(best_cost) {
                            // Equal cost: prefer the larger IFM coverage, for small blocks only.
                            let cov_shape = ifm.min(ifm_block);
                            let coverage = Ratio {
                                num: u128::from(ifm.wh()),
                                den: u128::from(cov_shape.wh().max(1)),
                            };
                            let better = best_cov.is_none_or(|b| coverage.le(b));
                            if better && height <= 4 && width <= 4 {
                                best = Some((cost, Some(coverage), block));
                            }
                        } else {
                            best = Some((cost, None, block));
                        }
                    }
                    Some(_) => {}
                }
            }
        }
        depth = depth.saturating_add(UBLOCK.c);
        if depth < ofm.c {
            depth = round_up(depth, OFM_SPLIT_DEPTH);
        }
        if depth == u32::MAX {
            break;
        }
    }
    best.map(|b| b.2).ok_or(BlockConfig {
        // Nothing fits (only possible with a custom configuration or a forced block): one
        // micro-block.
        ofm: UBLOCK,
        ifm: Shp::new(
            min(dkh, SUBKERNEL),
            round_up(min(dkw, SUBKERNEL), UBLOCK.w),
            if equal_depth {
                UBLOCK.c
            } else {
                ifm_block_depth
            },
        ),
        part_kernel,
    })
}

#[cfg(test)]
mod tests {
    use crate::cost::fixtures::{as_variant, resident, CFG, KWS_PW};
    use crate::cost::{layer_cycles, LayerDesc, LayerKind, Variant};

    #[test]
    fn forcing_autos_own_block_changes_nothing() {
        // Vela's block for the worked example is 9 x 6 x 32.
        let d = resident(LayerKind::Conv2d, KWS_PW.0, KWS_PW.1, (1, 1), 1);
        let forced = as_variant(d, Variant::Block { h: 9, w: 6 });
        assert_eq!(layer_cycles(&forced, &CFG), layer_cycles(&d, &CFG));
        let in_flash = LayerDesc {
            weights_in_flash: true,
            ..d
        };
        let forced = as_variant(in_flash, Variant::Block { h: 9, w: 6 });
        assert_eq!(layer_cycles(&forced, &CFG), layer_cycles(&in_flash, &CFG));
    }
}
