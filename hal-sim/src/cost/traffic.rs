//! Step 6, memory traffic: the bytes a pass moves on each memory port, and the cycles of its
//! first input-block read and last output-block write. Counted apart from the computation
//! because the memories run in parallel with the NPU and a pass costs the larger of the two;
//! Vela's burst penalty (a transfer shorter than a burst pays the whole burst) is what makes
//! the layers bound by their weights or shallow inputs cost what they do.

use core::cmp::{max, min};

use super::block::{BlockConfig, SUBKERNEL};
use super::pass::{div_ceil_shape, Fmt, NpuOp, Pass, Shp};
use super::U55Config;

/// A memory as the performance model sees it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mem {
    pub(super) bytes_per_cycle: u64,
    pub(super) read_latency: u64,
    pub(super) write_latency: u64,
    pub(super) burst: u64,
}

// The two memories as the traffic formulas read them. Beside `Mem` rather than with the
// configuration, which is public API: this view of it is private to the model.
impl U55Config {
    pub(super) fn sram(&self) -> Mem {
        Mem {
            bytes_per_cycle: u64::from(self.sram_bytes_per_cycle.max(1)),
            read_latency: u64::from(self.sram_latency),
            write_latency: u64::from(self.sram_latency),
            burst: u64::from(self.sram_burst_bytes.max(1)),
        }
    }

    pub(super) fn flash(&self) -> Mem {
        Mem {
            bytes_per_cycle: u64::from(self.flash_bytes_per_cycle.max(1)),
            read_latency: u64::from(self.flash_latency),
            write_latency: 0,
            burst: u64::from(self.flash_burst_bytes.max(1)),
        }
    }
}

/// Vela's `EstimateMemoryTransfer`: bytes charged for moving `elements` between the NPU and a
/// memory, scaled up when a transfer cannot fill the memory's burst.
fn memory_transfer(
    read: bool,
    mem: &Mem,
    fmt: Fmt,
    bits: u32,
    block: Shp,
    shape: Shp,
    elements: u64,
) -> u64 {
    // Burst length in bits; products of u32 values by at most 32 * 16 fit a u128 easily.
    let bits = u128::from(bits);
    let (bw, bc) = (u128::from(block.w), u128::from(block.c));
    let burst_bits: u128 = match fmt {
        Fmt::Brick => {
            let z_stride = u128::from(shape.w) * bits * 16 / 8;
            if z_stride == bc {
                bits * bw * bc
            } else {
                16 * bits * bw
            }
        }
        Fmt::Nhwc => {
            let x_stride = u128::from(shape.c) * bits / 8;
            if read {
                if x_stride == bc {
                    bits * bw * bc
                } else {
                    bits * bc
                }
            } else if bc <= 16 && x_stride == bc {
                bits * bw * bc
            } else {
                min(min(512, 16 * bits), bc * bits)
            }
        }
    };
    let bits64 = u64::try_from(bits).unwrap_or(u64::MAX);
    let bytes = elements.saturating_mul(bits64) / 8;
    let burst_bytes = min(mem.burst, u64::try_from(burst_bits / 8).unwrap_or(u64::MAX)).max(1);
    bytes.saturating_mul(mem.burst) / burst_bytes
}

fn ifm_mem(p: &Pass, second: bool, cfg: &U55Config) -> Mem {
    let in_flash = if second {
        p.ifm2_in_flash
    } else {
        p.ifm_in_flash
    };
    if in_flash {
        cfg.flash()
    } else {
        cfg.sram()
    }
}

/// Cycles to read the first IFM block (of each input): latency + bytes / bandwidth.
pub(super) fn ifm_block_cycles(p: &Pass, block: &BlockConfig, cfg: &U55Config) -> u64 {
    let mut worst = 0;
    let inputs = [(Some(p.ifm), p.ifm_fmt, false), (p.ifm2, p.ifm2_fmt, true)];
    for (shape, fmt, second) in inputs {
        let Some(shape) = shape else { continue };
        let mem = ifm_mem(p, second, cfg);
        let elements = shape.min(block.ifm).elems();
        let bytes = memory_transfer(true, &mem, fmt, p.ifm_bits, block.ifm, shape, elements);
        worst = max(
            worst,
            mem.read_latency.saturating_add(bytes / mem.bytes_per_cycle),
        );
    }
    worst
}

/// Cycles to write the last OFM block: latency + bytes / bandwidth.
pub(super) fn ofm_block_cycles(p: &Pass, block: &BlockConfig, cfg: &U55Config) -> u64 {
    let mem = cfg.sram();
    let elements = p.ofm.min(block.ofm).elems();
    let bytes = memory_transfer(
        false, &mem, p.ofm_fmt, p.ofm_bits, block.ofm, p.ofm, elements,
    );
    mem.write_latency
        .saturating_add(bytes / mem.bytes_per_cycle)
}

/// Times the weights are read: once per OFM block in H x W.
pub(super) fn weight_refetches(p: &Pass, block: &BlockConfig) -> u64 {
    let blocks = div_ceil_shape(p.ofm, p.ofm.min(block.ofm));
    blocks.wh()
}

/// Bytes a pass moves, per memory.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Traffic {
    pub(super) sram: u64,
    pub(super) flash: u64,
}

impl Traffic {
    fn charge(&mut self, in_flash: bool, bytes: u64) {
        if in_flash {
            self.flash = self.flash.saturating_add(bytes);
        } else {
            self.sram = self.sram.saturating_add(bytes);
        }
    }
}

/// Vela's `MeasureElementAccess` + `ElementTransferToBytes` + `MeasureAccessCycles`.
pub(super) fn access(p: &Pass, block: &BlockConfig, buffered: bool, cfg: &U55Config) -> Traffic {
    let mut t = Traffic::default();
    let ifm_round = |s: Shp| s.stored(p.ifm_fmt);
    let (ifm_read, ifm2_read, refetch) = if p.op == NpuOp::Elementwise {
        let mut first = 0;
        let mut second = 0;
        if p.ifm.is_scalar() {
            if p.ifm_bits > 8 {
                first = ifm_round(p.ifm).elems();
            } else if p.ifm2.is_some() {
                second = ifm_round(p.ofm).elems();
            }
        } else {
            first = ifm_round(p.ofm).elems();
            if let Some(i2) = p.ifm2 {
                if i2.elems() > 1 {
                    second = first;
                } else if p.ifm2_bits > 8 {
                    second = ifm_round(i2).elems();
                }
            }
        }
        (first, second, 0)
    } else {
        let ifm_block = p.ifm.min(block.ifm);
        let ofm_block = p.ofm.min(block.ofm);
        let mut blocks = div_ceil_shape(p.ofm, ofm_block);
        if matches!(p.op, NpuOp::Depthwise | NpuOp::Pooling) {
            blocks.c = 1;
        }
        let (kh, kw) = if p.op == NpuOp::VectorProduct {
            (1, 1)
        } else {
            p.kernel
        };
        let subkernels = u64::from(kw.div_ceil(SUBKERNEL)) * u64::from(kh.div_ceil(SUBKERNEL));
        let fetch = ifm_block.wh().saturating_mul(u64::from(ifm_round(p.ifm).c));
        let read = fetch
            .saturating_mul(subkernels)
            .saturating_mul(blocks.elems());
        (read, 0, blocks.wh())
    };
    let bytes = memory_transfer(
        true,
        &ifm_mem(p, false, cfg),
        p.ifm_fmt,
        p.ifm_bits,
        block.ifm,
        p.ifm,
        ifm_read,
    );
    t.charge(p.ifm_in_flash, bytes);
    if let Some(i2) = p.ifm2 {
        let bytes = memory_transfer(
            true,
            &ifm_mem(p, true, cfg),
            p.ifm2_fmt,
            p.ifm2_bits,
            block.ifm,
            i2,
            ifm2_read,
        );
        t.charge(p.ifm2_in_flash, bytes);
    }
    let written = p.ofm.stored(p.ofm_fmt).elems();
    t.charge(
        false,
        memory_transfer(
            false,
            &cfg.sram(),
            p.ofm_fmt,
            p.ofm_bits,
            block.ofm,
            p.ofm,
            written,
        ),
    );
    if matches!(p.op, NpuOp::Conv | NpuOp::Depthwise | NpuOp::VectorProduct) {
        let weights = p.weights.saturating_mul(refetch);
        let scales = p.scales.saturating_mul(refetch);
        // Buffered weights are read from SRAM; scales always come from where they live.
        t.charge(p.consts_in_flash && !buffered, weights);
        t.charge(p.consts_in_flash, scales);
    }
    t
}
