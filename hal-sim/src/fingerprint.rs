//! The tuning fingerprint: a hash of every setting that changes a job's cycles, so that tuned
//! choices measured under one configuration are not reused under another.

use crate::{cost, CpuModel, Rates, SimConfig};

/// FNV-1a-64 over little-endian words (the hash the tuning table format names).
struct Fnv1a(u64);

impl Fnv1a {
    const fn new() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    fn word(&mut self, v: u32) {
        for b in v.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// See [`SimNpu::tuning_fingerprint`](npu_compute::hal::Npu::tuning_fingerprint).
pub(crate) fn fingerprint(config: &SimConfig) -> u64 {
    // Destructured without `..`: a field added to either struct fails to compile here until
    // someone decides whether it changes cycles (and so belongs in the hash).
    let SimConfig {
        macs_per_cycle,
        // The count is in `Capabilities`; the units' MAC arrays are hashed below.
        execution_units: _,
        units: _,
        sram_bytes_per_cycle,
        dma_bytes_per_cycle,
        slow,
        job_overhead_cycles,
        dma_overhead_cycles,
        // In `Capabilities`, which the tuner hashes itself.
        alignment: _,
        ops: _,
        reads_flash: _,
        flash_alignment: _,
        layers,
        cpu,
        // Faults are not the part's timing, and the tick moves no job.
        faults: _,
        idle_tick_cycles: _,
    } = *config;
    let mut h = Fnv1a::new();
    h.word(cost::COST_MODEL_VERSION);
    for v in [
        macs_per_cycle,
        sram_bytes_per_cycle,
        dma_bytes_per_cycle,
        job_overhead_cycles,
        dma_overhead_cycles,
    ] {
        h.word(v);
    }
    // Only a slow tier that differs from the default, so that tables made before the tier
    // existed keep their fingerprint.
    if slow != SimConfig::ETHOS_U55_128.slow {
        h.word(0x736c_6f77); // "slow"
        for v in [slow.bytes, slow.cycles, slow.latency] {
            h.word(v);
        }
    }
    // Only units that differ from the reference, so that every configuration of 128-MAC
    // units keeps the fingerprint it had before units had kinds.
    for (n, unit) in (0u32..).zip(config.active_units()) {
        if unit.macs_per_cycle != cost::REFERENCE_MACS_PER_CYCLE {
            h.word(0x756e_6974); // "unit"
            h.word(n);
            h.word(unit.macs_per_cycle);
        }
    }
    match layers {
        None => h.word(0),
        Some(cost::U55Config {
            macs_per_cycle,
            max_ofm_block,
            shram_banks,
            sram_bytes_per_cycle,
            sram_latency,
            sram_burst_bytes,
            flash_bytes_per_cycle,
            flash_latency,
            flash_burst_bytes,
            weight_encoding,
            weight_stream_overhead,
            scale_bytes_per_channel,
            weight_buffer_bytes,
        }) => {
            h.word(1);
            for v in [
                macs_per_cycle,
                shram_banks,
                sram_bytes_per_cycle,
                sram_latency,
            ]
            .into_iter()
            .chain(max_ofm_block)
            .chain([
                sram_burst_bytes,
                flash_bytes_per_cycle,
                flash_latency,
                flash_burst_bytes,
                weight_encoding.0,
                weight_encoding.1,
                weight_stream_overhead,
                scale_bytes_per_channel,
                weight_buffer_bytes,
            ]) {
                h.word(v);
            }
        }
    }
    match cpu {
        None => h.word(0),
        Some(CpuModel { rates }) => {
            h.word(1);
            for Rates {
                call,
                work,
                taps,
                outputs,
            } in rates
            {
                for v in [call, work, taps, outputs] {
                    h.word(v);
                }
            }
        }
    }
    h.0
}
