//! Autotuning: time the ways an NPU can run each operator shape, keep the fastest, ship the
//! result as a table.
//!
//! # Design
//!
//! An NPU driver picks how to run a layer (the output block it walks, whether a convolution
//! becomes a gather and a matrix product) by a heuristic, and the heuristic is not always the
//! fastest: Vela, for one, picks the block that fetches the fewest bytes. This module is the
//! pure part of a tuner that measures instead, like Burn-Compute's autotune, rebuilt for a
//! device without a heap or a disk:
//!
//! - **Candidates** ([`candidate`]): what is worth timing for one op, `Npu(Auto)` first so
//!   it wins ties, then forced blocks, im2col and the CPU, each dropped where it cannot apply
//!   or the driver refuses it.
//! - **Keys** ([`key`]): 16 bytes per operator shape. Parameters that decide what can run
//!   (kernel, stride, dilation, padding, op, dtype, the candidate set) are exact; sizes are
//!   rounded up to a power of two, so layers of similar size share one measurement, as Burn's
//!   "anchor" does with floats.
//! - **Cache** ([`cache`]): a fixed `heapless` index map of `N` keys in RAM, no heap, no
//!   eviction. A caller *claims* a key (marks it in progress) before measuring, so a second
//!   caller, an interrupt sharing the channel or a later stripe of the same tile, runs `Auto`
//!   instead of tuning the same key twice; a full cache means `Auto`, never an error for the
//!   inference.
//! - **Tables** ([`table`]): the measured choices as a versioned, checksummed byte table. A
//!   board has no disk to remember tuning in and cannot afford to tune at every boot, so the
//!   table is made once (on a host with the simulator, or on one board) and linked into the
//!   firmware. Import refuses anything it cannot vouch for: another format, key schema, crate
//!   version or NPU configuration ([`fingerprint`]), or a corrupted byte. It never panics and is
//!   all or nothing.
//!
//! Measuring itself (draining the queue, timing each candidate on scratch outputs, the budget)
//! and the modes below belong to the server and client; this module only holds what they share
//! and what firmware needs to use a table without ever measuring.
//!
//! ```
//! use npu_compute::tune::{self, TuneCache};
//!
//! // What a host tool does after tuning, and what firmware does with the bytes.
//! let tuned: TuneCache = TuneCache::new();
//! let mut bytes = [0u8; tune::table_bytes(64)];
//! let len = tune::export(&tuned, 0x1234, &mut bytes).unwrap();
//!
//! let mut cache: TuneCache = TuneCache::new();
//! assert_eq!(tune::import(&mut cache, 0x1234, &bytes[..len]), Ok(0));
//! // A table of another NPU is refused, and the cache is left as it was.
//! assert!(tune::import(&mut cache, 0x5678, &bytes[..len]).is_err());
//! ```

pub mod cache;
pub mod candidate;
pub mod key;
pub mod measure;
pub mod table;

pub use cache::{CacheError, Choice, Entry, Lookup, TuneCache, DEFAULT_TUNE_ENTRIES};
pub use candidate::{candidates, set_id, Candidate, BLOCKS, MAX_CANDIDATES};
pub use key::{bucket, TuneKey};
pub use table::{crc32, export, fingerprint, import, table_bytes, TableError};

/// How the server picks a candidate for each compute op.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TuneMode {
    /// No tuning: every op runs `Auto` (or the CPU where the NPU lacks the operator), and no
    /// key is even built. The default, so an untuned build behaves as before.
    #[default]
    Off,
    /// Use cached choices; measure keys not seen yet (the first invoke of a model is
    /// serialised while its keys are measured).
    Tune,
    /// Use cached (typically imported) choices; run `Auto` for unknown keys. Never measures:
    /// what firmware runs after importing a table.
    CacheOnly,
    /// Run this candidate wherever the op supports it, `Auto` elsewhere: for benchmarks and
    /// tests of one candidate across a model.
    Fixed(Candidate),
}

/// How much a tuning may measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TuneConfig {
    /// Untimed runs of each candidate before its samples (caches, first-use effects). Default 1.
    pub warmup: u8,
    /// Timed runs of each candidate; its best is kept. Default 3.
    pub samples: u8,
    /// Most job runs (warmups and samples, all candidates) one key may take. Default 32:
    /// eight candidates of one warmup and three samples.
    pub max_measurements: u16,
    /// Most cycles one key's measuring may take, or no limit. Default `None`.
    pub max_cycles: Option<u64>,
    /// Time the CPU fallback kernels too, for ops of at most this much work
    /// ([`Op::macs`](crate::hal::Op::macs)), where the HAL's clock counts CPU work
    /// ([`Npu::clock_counts_cpu`](crate::hal::Npu::clock_counts_cpu)); `None`: never.
    /// Default `Some(`[`CPU_MAX_WORK`]`)`.
    ///
    /// A candidate is timed by running it, and a running kernel cannot be stopped, so a
    /// CPU that is a thousand times slower than the NPU on a large layer would cost the tuning
    /// that factor before losing. This bounds that cost: where the CPU can win (small ops,
    /// whose NPU job is mostly fixed overhead) it is timed; elsewhere it is not offered.
    pub cpu_max_work: Option<u64>,
}

/// The default bound of [`TuneConfig::cpu_max_work`]: 4,096 MACs or elements. At the
/// simulator's Cortex-M4 rates that is about 4,000 to 10,000 CPU cycles, enough to cover every
/// op whose NPU job is dominated by its fixed cost, while a CPU run never costs more than a
/// fraction of an inference of the shared models.
pub const CPU_MAX_WORK: u64 = 4096;

impl TuneConfig {
    /// The defaults: 1 warmup, 3 samples, 32 measurements, no cycle limit, the CPU timed
    /// for ops of up to [`CPU_MAX_WORK`] where the clock counts it.
    pub const DEFAULT: TuneConfig = TuneConfig {
        warmup: 1,
        samples: 3,
        max_measurements: 32,
        max_cycles: None,
        cpu_max_work: Some(CPU_MAX_WORK),
    };
}

impl Default for TuneConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        assert_eq!(TuneMode::default(), TuneMode::Off);
        let c = TuneConfig::default();
        assert_eq!(
            (
                c.warmup,
                c.samples,
                c.max_measurements,
                c.max_cycles,
                c.cpu_max_work
            ),
            (1, 3, 32, None, Some(CPU_MAX_WORK))
        );
    }
}
