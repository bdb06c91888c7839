//! Steps 2 to 5 and 7: the NPU's own cycles for one pass (MAC array, output stage, command
//! issue), then the pass's cost with the memories, which run in parallel, set against them.
//! Vela estimates compute and traffic independently and only takes their maximum at the end;
//! [`pass_cost`] is where the two meet, with the weight-buffering and prefetch decisions that
//! change both sides.

use core::cmp::max;

use super::block::{find_block, search_block, BlockConfig, SUBKERNEL, UBLOCK};
use super::pass::{ao, div_ceil_shape, Fmt, NpuOp, Pass, Shp};
use super::traffic::{access, ifm_block_cycles, ofm_block_cycles, weight_refetches};
use super::{CostBreakdown, U55Config};

/// Cycles per output micro-block write-back: the floor of a MAC step.
const WRITE_BACK_CYCLES: u64 = 32;

/// The cost of one pass, with Vela's block choice (`forced` = `None`) or with the OFM block's
/// H x W forced (see [`search_block`]). `None` only when a forced block does not fit, or is
/// asked of a pass that has no MAC block to force (transpose, matrix multiply, elementwise).
pub(super) fn pass_cost(
    p: &Pass,
    cfg: &U55Config,
    forced: Option<(u32, u32)>,
) -> Option<CostBreakdown> {
    if p.ifm.elems() == 0 || p.ofm.elems() == 0 {
        return Some(CostBreakdown::default());
    }
    let sram = cfg.sram();
    let flash = cfg.flash();
    if forced.is_some() && matches!(p.op, NpuOp::Transpose | NpuOp::MatMul | NpuOp::Elementwise) {
        return None;
    }
    Some(match p.op {
        NpuOp::Transpose => {
            let read = p.ifm.elems().saturating_mul(u64::from(p.ifm_bits)) / 8;
            let write = p.ofm.elems().saturating_mul(u64::from(p.ofm_bits)) / 8;
            let compute = max(
                (read / sram.bytes_per_cycle).saturating_add(sram.read_latency),
                (write / sram.bytes_per_cycle).saturating_add(sram.write_latency),
            );
            let sram_cycles = read.saturating_add(write) / sram.bytes_per_cycle;
            finish(compute, sram_cycles, 0)
        }
        NpuOp::MatMul => matmul_cost(p, cfg),
        NpuOp::Elementwise => {
            let block = find_block(p, cfg);
            let compute = elementwise_cycles(p, &block, cfg);
            let traffic = access(p, &block, false, cfg);
            finish(
                compute,
                traffic.sram / sram.bytes_per_cycle,
                traffic.flash / flash.bytes_per_cycle,
            )
        }
        _ => {
            let block = match forced {
                None => find_block(p, cfg),
                // A forced block never falls back to the micro-block: that would be another
                // variant, and a tuner would time it under the wrong name.
                Some(hw) => search_block(p, cfg, Some(hw)).ok()?,
            };
            let has_weights = p.weights > 0 && p.consts_in_flash;
            let refetch = weight_refetches(p, &block);
            // Weights that several OFM blocks re-read are buffered in SRAM (Vela's weight
            // buffering); weights read once stream from flash.
            let buffered = has_weights && refetch > 1;
            let compute = mac_op_cycles(p, &block, buffered, cfg);
            let traffic = access(p, &block, buffered, cfg);
            let mut cost = finish(
                compute,
                traffic.sram / sram.bytes_per_cycle,
                traffic.flash / flash.bytes_per_cycle,
            );
            if buffered {
                cost.weight_dma = cfg.flash_to_sram_cycles(p.weights);
            }
            let constants = p.weights.saturating_add(p.scales);
            if p.consts_in_flash && constants > 0 {
                // Prefetched: weights and scales copied to SRAM before the layer, read there.
                let staged = Pass {
                    consts_in_flash: false,
                    ..*p
                };
                let traffic = access(&staged, &block, false, cfg);
                cost.prefetch = cfg.flash_to_sram_cycles(constants);
                cost.prefetched_sram = traffic.sram / sram.bytes_per_cycle;
                cost.prefetched_flash = traffic.flash / flash.bytes_per_cycle;
                cost.prefetched = max(
                    mac_op_cycles(&staged, &block, false, cfg),
                    max(cost.prefetched_sram, cost.prefetched_flash),
                );
            }
            cost
        }
    })
}

/// A pass without constants to prefetch.
fn finish(compute: u64, sram: u64, flash: u64) -> CostBreakdown {
    let total = max(compute, max(sram, flash));
    CostBreakdown {
        compute,
        sram,
        flash,
        weight_dma: 0,
        total,
        prefetch: 0,
        prefetched: total,
        prefetched_sram: sram,
        prefetched_flash: flash,
    }
}

/// Vela's `EstimateMacCyclesPerBlock`.
fn mac_cycles_per_block(p: &Pass, block: &BlockConfig, cfg: &U55Config) -> u64 {
    let ifm_block = p.ifm.min(block.ifm);
    let ofm_block = p.ofm.min(block.ofm);
    let ublocks = div_ceil_shape(ofm_block, UBLOCK);
    let n_wh = ublocks.wh();
    let n_c = u64::from(ublocks.c);
    let ifm_block_passes = u64::from(ifm_block.c.div_ceil(8));
    let (kh, kw) = if p.op == NpuOp::VectorProduct {
        (1, 1)
    } else {
        (p.kernel.0.max(1), p.kernel.1.max(1))
    };
    // The kernel splits into pieces of at most 8 x 8: full pieces and the remainders along H
    // and W, each size costed once and multiplied by its count (a huge kernel stays cheap).
    let pieces = |k: u32| {
        [
            (u64::from(k / SUBKERNEL), SUBKERNEL),
            (u64::from(!k.is_multiple_of(SUBKERNEL)), k % SUBKERNEL),
        ]
    };
    let mut total: u64 = 0;
    for (count_w, sub_w) in pieces(kw) {
        for (count_h, sub_h) in pieces(kh) {
            let count = count_w.saturating_mul(count_h);
            if count == 0 {
                continue;
            }
            let sub = u64::from(sub_h) * u64::from(sub_w);
            let (steps, cycles) = match p.op {
                NpuOp::Pooling => (
                    1,
                    max(4, sub)
                        .saturating_mul(n_wh)
                        .saturating_mul(n_c)
                        .saturating_mul(u64::from(p.ifm_bits / 2)),
                ),
                NpuOp::Depthwise => {
                    let steps = sub.div_ceil(4);
                    let per = 4 * n_wh * u64::from(p.ifm_bits / 8).max(1);
                    (steps, max(WRITE_BACK_CYCLES, per) * steps * n_c)
                }
                NpuOp::Conv if block.part_kernel => {
                    let steps = sub.div_ceil(4);
                    (
                        steps,
                        max(WRITE_BACK_CYCLES, 4 * n_wh) * steps * n_c * ifm_block_passes,
                    )
                }
                _ => (sub, max(WRITE_BACK_CYCLES, 4 * n_wh) * sub * n_c),
            };
            // Single micro-block blocks stall 2 cycles per step.
            let mut delay = 0;
            if n_wh == 1 {
                if n_c == 1 {
                    delay = 2 * steps;
                } else if steps > 1 {
                    delay = 2 * (steps - 1) * n_c;
                }
            }
            if p.op == NpuOp::Conv && block.part_kernel {
                delay *= ifm_block_passes;
            }
            total = total.saturating_add(cycles.saturating_add(delay).saturating_mul(count));
        }
    }
    if matches!(p.op, NpuOp::Conv | NpuOp::VectorProduct | NpuOp::ReduceSum) {
        total = total.saturating_mul(u64::from(p.ifm.c.div_ceil(ifm_block.c.max(1))));
    }
    let macs = u64::from(cfg.macs_per_cycle.max(1));
    if macs == 128 {
        total
    } else {
        total.saturating_mul(128).div_ceil(macs)
    }
}

/// Vela's `EstimateMacOpCycles`, for a pass that is both first and last in its cascade.
fn mac_op_cycles(p: &Pass, block: &BlockConfig, buffered: bool, cfg: &U55Config) -> u64 {
    let ofm_block = p.ofm.min(block.ofm);
    let per_block = div_ceil_shape(ofm_block, UBLOCK).elems().max(1);
    let all = div_ceil_shape(p.ofm, UBLOCK).elems();
    // Everything per block is kept in 1/1024 cycles: AO has quarters, the scale fetch /256,
    // the command limit /4.
    const UNIT: u128 = 1024;
    let ao_compute = u128::from(
        u64::from(p.ao_quarters)
            .saturating_mul(ofm_block.elems())
            .div_ceil(4),
    );
    let mut ao = ao_compute * UNIT;
    let has_scales =
        matches!(p.op, NpuOp::Conv | NpuOp::Depthwise | NpuOp::VectorProduct) && p.scales > 0;
    if has_scales {
        let latency = if buffered || !p.consts_in_flash {
            cfg.sram().read_latency
        } else {
            cfg.flash().read_latency
        };
        // 10 * C * latency / 256 cycles
        let bias = 10 * u128::from(ofm_block.c) * u128::from(latency) * (UNIT / 256);
        ao = max(ao, bias);
    }
    let mac = u128::from(mac_cycles_per_block(p, block, cfg)) * UNIT;
    let ifm_cycles = ifm_block_cycles(p, block, cfg);
    let ofm_cycles = ofm_block_cycles(p, block, cfg);
    let min_mem = if all > per_block {
        u128::from(ofm_cycles.abs_diff(ifm_cycles)) * UNIT
    } else {
        0
    };
    let cmd = min_mem.saturating_add(mac).saturating_add(ao) / 4;
    let mac_b = max(mac, cmd);
    let ao_b = max(ao, cmd);
    let all = u128::from(all);
    let per_block = u128::from(per_block);
    let body = if mac_b > ao_b {
        (mac_b.saturating_mul(all) / (per_block * UNIT)).saturating_add(ao_b / UNIT)
    } else {
        ao_b.saturating_mul(all)
            .saturating_add(mac_b.saturating_mul(per_block))
            / (per_block * UNIT)
    };
    u64::try_from(body)
        .unwrap_or(u64::MAX)
        .saturating_add(ofm_cycles)
        .saturating_add(ifm_cycles)
}

/// Vela's `EstimateElementwiseCycles`.
fn elementwise_cycles(p: &Pass, block: &BlockConfig, cfg: &U55Config) -> u64 {
    let elements = u128::from(p.ofm.stored(p.ofm_fmt).elems());
    let q = u128::from(p.ao_quarters);
    let ao = (q * elements).div_ceil(4);
    let block_elems = u128::from(block.ofm.elems().max(1));
    let io = u128::from(max(
        ofm_block_cycles(p, block, cfg),
        ifm_block_cycles(p, block, cfg),
    ));
    // cmd = ceil(elements * (io / block_elems + q / 4) / 4)
    let cmd = elements
        .saturating_mul(io.saturating_mul(4).saturating_add(q * block_elems))
        .div_ceil(16 * block_elems);
    u64::try_from(max(ao, cmd)).unwrap_or(u64::MAX)
}

/// Vela's `EstimateMatMulCycles`: an elementwise multiply into 32 bits and a reduce-sum, per
/// output column.
fn matmul_cost(p: &Pass, cfg: &U55Config) -> CostBreakdown {
    let lhs = p.ifm;
    let rhs = p.ifm2.unwrap_or(p.ifm);
    let batches = p.ofm.h;
    let columns = u64::from(rhs.w);
    let fitted = matmul_dependency_fit(lhs, cfg);
    let rhs_row = Shp::new(batches, 1, rhs.c);

    let mul_search = Pass::new(NpuOp::Elementwise, fitted, fitted)
        .with_ifm2(rhs_row, Fmt::Nhwc)
        .bits(p.ifm_bits, p.ifm_bits, 32)
        .formats(Fmt::Nhwc, Fmt::Nhwc)
        .ao(ao::MUL);
    let mul_block = find_block(&mul_search, cfg);
    let sum_ofm = matmul_dependency_fit(Shp::new(batches, lhs.w, 1), cfg);
    let sum_search = Pass {
        ofm: sum_ofm,
        op: NpuOp::ReduceSum,
        ..mul_search.bits(32, 32, p.ofm_bits)
    };
    let sum_block = find_block(&sum_search, cfg);

    let mul = Pass::new(NpuOp::Elementwise, lhs, lhs)
        .with_ifm2(lhs, Fmt::Nhwc)
        .bits(p.ifm_bits, p.ifm_bits, 32)
        .formats(Fmt::Nhwc, Fmt::Nhwc)
        .ao(ao::MUL);
    let mul_cycles = elementwise_cycles(&mul, &mul_block, cfg);
    let sum = Pass::new(NpuOp::ReduceSum, lhs, Shp::new(lhs.h, lhs.w, 1))
        .bits(p.ifm_bits, p.ifm_bits, p.ofm_bits)
        .formats(Fmt::Nhwc, Fmt::Nhwc);
    let sum_cycles = mac_op_cycles(&sum, &sum_block, false, cfg);
    let compute = mul_cycles
        .saturating_add(sum_cycles)
        .saturating_mul(columns);

    // Traffic: the left operand once per column, the right one once, a 32-bit temporary
    // written and read back, the output written.
    let lhs_bytes = lhs.elems().saturating_mul(columns);
    let tmp_bytes = lhs_bytes.saturating_mul(4);
    let sram_bytes = lhs_bytes
        .saturating_add(rhs.elems())
        .saturating_add(tmp_bytes.saturating_mul(2))
        .saturating_add(p.ofm.elems());
    finish(compute, sram_bytes / cfg.sram().bytes_per_cycle, 0)
}

/// Vela's `MatMulDependencyFit`: split H (or W) into 2 or 3 blocks to reduce stalls.
fn matmul_dependency_fit(s: Shp, cfg: &U55Config) -> Shp {
    let tall = s.h > cfg.max_ofm_block[0];
    let (value, limit) = if tall {
        (s.h, cfg.max_ofm_block[0])
    } else {
        (s.w, cfg.max_ofm_block[1])
    };
    if value > limit {
        return s;
    }
    for divider in [3u32, 2] {
        if value >= 4 * divider {
            let v = value.div_ceil(divider);
            return if tall {
                Shp::new(v, s.w, s.c)
            } else {
                Shp::new(s.h, v, s.c)
            };
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use crate::cost::fixtures::{as_variant, conv, resident, CFG, KWS_PW};
    use crate::cost::{layer_cycles, LayerKind, Variant};

    #[test]
    fn worked_example_compute_matches_vela() {
        // ETHOS_U55_CYCLE_MODEL.md section 4: mlperf_kws layer 2, 1x1 conv 64 -> 64 on 25x5.
        let c = layer_cycles(&conv([1, 25, 5, 64], [1, 25, 5, 64], 1, 4096), &CFG);
        assert_eq!(c.compute, 5944);
        assert_eq!(c.total, 5944);
    }

    #[test]
    fn kws_pointwise_4x16_beats_vela_by_its_tail() {
        let d = resident(LayerKind::Conv2d, KWS_PW.0, KWS_PW.1, (1, 1), 1);
        let c = layer_cycles(&as_variant(d, Variant::Block { h: 4, w: 16 }), &CFG);
        assert_eq!(c.total, 5744);
    }

    #[test]
    fn vww_depthwise_16x4_leaves_the_32_cycle_floor() {
        let d = resident(
            LayerKind::DepthwiseConv2d,
            [1, 6, 6, 128],
            [1, 6, 6, 128],
            (3, 3),
            1,
        );
        assert_eq!(layer_cycles(&d, &CFG).total, 5512);
        let c = layer_cycles(&as_variant(d, Variant::Block { h: 16, w: 4 }), &CFG);
        assert_eq!(c.total, 3832);
    }
}
