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
//! - **Candidates** (see [Candidates](#candidates)): what is worth timing for one op, `Npu(Auto)` first so
//!   it wins ties, then forced blocks, im2col and the CPU, each dropped where it cannot apply
//!   or the driver refuses it.
//! - **Keys** (see [Keys](#keys)): 16 bytes per operator shape. Parameters that decide what can run
//!   (kernel, stride, dilation, padding, op, dtype, the candidate set) are exact; sizes are
//!   rounded up to a power of two, so layers of similar size share one measurement, as Burn's
//!   "anchor" does with floats.
//! - **Cache** (see [The cache](#the-cache)): a fixed `heapless` index map of `N` keys in RAM, no heap, no
//!   eviction. A caller *claims* a key (marks it in progress) before measuring, so a second
//!   caller, an interrupt sharing the channel or a later stripe of the same tile, runs `Auto`
//!   instead of tuning the same key twice; a full cache means `Auto`, never an error for the
//!   inference.
//! - **Tables** (see [Tables](#tables)): the measured choices as a versioned, checksummed byte table. A
//!   board has no disk to remember tuning in and cannot afford to tune at every boot, so the
//!   table is made once (on a host with the simulator, or on one board) and linked into the
//!   firmware. Import refuses anything it cannot vouch for: another format, key schema, crate
//!   version or NPU configuration ([`fingerprint`]), or a corrupted byte. It never panics and is
//!   all or nothing.
//!
//! Measuring itself (draining the queue, timing each candidate on scratch outputs, the budget)
//! belongs to the server, which owns the cache and follows the [`TuneMode`] it was built with
//! ([`NpuServer::with_tuning`](crate::server::NpuServer::with_tuning)); this module only holds
//! what server and tables share, and what firmware needs to use a table without ever
//! measuring. It knows operators and the HAL, nothing of the server or the client.
//!
//!
//! ## Candidates
//!
//! A candidate is either a HAL [`Variant`](crate::hal::Variant) on the NPU or the CPU fallback kernels. The CPU is
//! not a HAL variant because the HAL never runs it: the server does, over host staging. Keeping
//! the two apart in one small `Copy` enum lets the tuner store a winner in 4 bytes and lets the
//! server dispatch on it with one match.
//!
//! [`candidates`] lists what is worth timing for one operator, always in the same order, so two
//! tunings of one model time the same things and a table made on a host means the same on a
//! board:
//!
//! 1. `Npu(Auto)`, the driver's own choice. It comes first because it is the fallback and wins
//!    ties (the tuner keeps the earliest of equal timings), so tuning never swaps a choice for
//!    an equally fast one.
//! 2. Forced output blocks, each 64 pixels: 8×8, 16×4, 4×16, 2×32, 32×2. A block larger than
//!    the output is clipped to it, so on a small output several blocks become the same block;
//!    only the first of those is kept, since timing it twice tells nothing new.
//! 3. `Im2col`, for an ordinary (ungrouped) convolution whose window is more than one tap or
//!    whose stride skips input: a 1×1 stride-1 convolution already is a matrix product, so the
//!    gather would only add a copy.
//! 4. `Cpu`, when the caller says so: the server offers it where the HAL's clock counts CPU
//!    work ([`Npu::clock_counts_cpu`](crate::hal::Npu::clock_counts_cpu)) and the op is
//!    within [`TuneConfig::cpu_max_work`](TuneConfig::cpu_max_work).
//!
//! Variants the driver refuses are dropped; `Auto` never is.
//!
//! The list depends on which families are enabled, so that choice is part of the
//! [`TuneKey`] as a candidate-set id ([`set_id`]): a table tuned with the CPU
//! candidate is not used where it is off.
//!
//! ## Keys
//!
//! A key must be small (the cache is a fixed table in RAM and a table entry on disk), exact
//! where a parameter changes which candidates can run, and coarse where it only scales the
//! work, so that one measurement serves the many layers of a model that differ a little in
//! size. [`TuneKey`] is 16 bytes:
//!
//! | byte | field |
//! |---|---|
//! | 0 | operator family: its index in [`OpKind::ALL`](crate::ops::OpKind::ALL) |
//! | 1 | element type: 0 f32, 1 int8 |
//! | 2 | candidate-set id ([`set_id`]): which candidate families were timed |
//! | 3 | flags: bit 0 padding SAME |
//! | 4–10 | filter height, width; stride height, width; dilation height, width; depth multiplier (depthwise) or group count (convolution). Exact, saturating at 255; 0 where the operator has none |
//! | 11–15 | five sizes as [`bucket`]s, per operator below |
//!
//! Sizes per operator: convolution, depthwise convolution and pools `N, H, W, Cin, Cout` (the
//! input's dimensions and the output's channels); fully connected `batches, 0, 0, in, out`;
//! batch matmul `B, M, K, N` (batch, rows, depth, columns); softmax `rows, depth`; every other
//! operator its element count ([`Op::macs`](crate::ops::Op::macs), which is the output's elements for them, the
//! input's for MEAN).
//!
//! This is Burn's autotune "anchor" (sizes rounded up to a power of two) without floats. The
//! small parameters stay exact because they decide whether a forced block fits the NPU's
//! buffers; bucketing them would let one layer's winner be forced on another where it does not
//! fit. When it happens anyway (two layers in one bucket support different candidates) the
//! server runs `Auto` for the one that cannot run the stored choice.
//!
//! ## The cache
//!
//! [`TuneCache`] maps a [`TuneKey`] to an [`Entry`] in a `heapless` index map of `N` slots,
//! in RAM, with no heap. A key goes through two states:
//!
//! - [`Entry::InProgress`]: someone [`claim`](TuneCache::claim)ed the key and is measuring it.
//!   The claim is made *before* any measuring, so a second caller (an interrupt sharing the
//!   channel, a later stripe of the same tile) finds the key taken and runs `Auto` instead of
//!   tuning the same key again, and a key is never tuned twice.
//! - [`Entry::Done`]: the winner and its timings ([`Choice`]). A tuning that failed (no scratch
//!   memory, every candidate refused) is stored too, as an unmeasured `Auto`, so it is not
//!   retried on every call; unmeasured choices are never exported.
//!
//! Nothing is ever evicted: a model has a bounded number of distinct keys, and evicting would
//! re-tune them in a loop. When the table is full a claim fails with [`CacheError::Full`],
//! naming the capacity, and the caller runs `Auto` unmeasured.
//!
//! ## Tables
//!
//! A board has no disk to keep tuning results in, and tuning on every boot would cost
//! inferences. So a table is made once (on the host with the simulator, or on one board), and
//! firmware links it (`include_bytes!`) and imports it before preparing a model. The table
//! must then refuse everything it cannot vouch for: a table of another NPU configuration or
//! of another key derivation would silently force the wrong kernels. Every field that
//! changes what a stored choice means is checked, and each refusal is its own
//! [`TableError`] saying what was found and what was expected.
//!
//! All integers are little-endian. A table is a 32-byte header and `n` 32-byte entries:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"NPUT"` |
//! | 4 | 2 | format = [`FORMAT`] (this header and entry layout) |
//! | 6 | 2 | schema = [`SCHEMA`] (key derivation, buckets, candidate encoding and lists) |
//! | 8 | 4 | npu-compute version `major << 20 \| minor << 10 \| patch` ([`CRATE_VERSION`]) |
//! | 12 | 8 | HAL fingerprint ([`fingerprint`]) |
//! | 20 | 2 | entry count `n` |
//! | 22 | 2 | entry size = 32 |
//! | 24 | 4 | reserved, 0 |
//! | 28 | 4 | CRC-32/IEEE of bytes 0..28 followed by all entries |
//! | 32 | 32·n | entries, keys strictly increasing |
//!
//! An entry is the key (16 bytes), the candidate (4, [`Candidate::encode`]), the winner's
//! cycles (u32), `Auto`'s cycles (u32), candidates timed (u8), samples (u8), flags (u8, bit 0
//! verified) and a reserved 0 byte. Only measured choices are exported, sorted by key, so two
//! identical tunings give identical bytes (tables can be diffed and checked into a repository).
//!
//! [`import`] checks in this order: length ≥ 32, magic, format, entry size, exact length, CRC;
//! then the reserved header word, schema, crate version and fingerprint; then each entry
//! (sorted, reserved bits zero, candidate known), the capacity and that no imported key is
//! being tuned. The CRC comes before the checks of meaning, so a corrupted byte reports
//! [`TableError::Checksum`] rather than, say, "another HAL". Only when everything passed are
//! entries inserted, so a refused table leaves the cache as it was. Every read is a checked
//! slice access: no input can make `import` panic.
//!
//! ## Example
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

mod cache;
mod candidate;
mod key;
mod table;

pub use cache::{CacheError, Choice, Entry, Lookup, TuneCache, DEFAULT_TUNE_ENTRIES};
pub use candidate::{candidates, set_id, Candidate, BLOCKS, CANDIDATE_BYTES, MAX_CANDIDATES};
pub use key::{bucket, TuneKey, KEY_BYTES};
pub(crate) use table::crc_update;
pub use table::{
    crc32, export, fingerprint, import, table_bytes, TableError, CRATE_VERSION, ENTRY_BYTES,
    FORMAT, HEADER_BYTES, MAGIC, SCHEMA,
};

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
    /// ([`Op::macs`](crate::ops::Op::macs)), where the HAL's clock counts CPU work
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
