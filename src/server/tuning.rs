//! Tuning: the server's cache of tuned choices, and the measuring that fills it.
//!
//! # Design
//!
//! The cache lives with the server, one per device, like Burn-Compute's per-device tuner: the
//! choices describe this NPU. How ops are tuned is fixed when the server is built
//! ([`NpuServer::with_tuning`], [`NpuServer::with_tuning_table`]), and `execute` follows it:
//!
//! - [`TuneMode::Off`] (the default): every op runs as the driver chooses; no key is built.
//! - [`TuneMode::CacheOnly`]: an op whose shape's key is in the cache (typically imported
//!   from a table made on a host) runs its choice; others run as the driver chooses. Never
//!   measures: what firmware runs.
//! - [`TuneMode::Tune`]: an op whose key is unknown is measured the first time its shape is
//!   met, then runs the winner.
//! - [`TuneMode::Fixed`]: one candidate wherever it applies (benchmarks, tests).
//!
//! **Measuring** a key (at most once: the key is *claimed* first, so whoever meets it
//! meanwhile, a later stripe of the same layer for one, runs `Auto` unmeasured). Each
//! candidate runs as an ordinary job, timed on the HAL's cycle source around a `sync`, so
//! that one sample is one job on an idle NPU:
//!
//! - everything submitted before is drained first: the op's inputs are ready and no other job
//!   shares the NPU with the samples;
//! - the candidates write a scratch tensor, never the real output (an op that runs in place
//!   would otherwise read its own result);
//! - constants in flash are copied to device memory first, so every sample costs what the layer
//!   costs inside a network whose weights the NPU prefetches, rather than a weight fetch the
//!   samples would overlap with themselves;
//! - `warmup` untimed runs, then `samples` timed ones, the fastest kept; a candidate whose
//!   sample is already twice the best so far stops early; the budget
//!   ([`TuneConfig::max_measurements`], [`TuneConfig::max_cycles`]) caps the whole key. `Auto`
//!   runs first, so it is always timed and wins ties;
//! - every candidate's output is checked against `Auto`'s after its first run: a CRC-32 of the
//!   scratch output, read back in [`VERIFY_CHUNK`]-byte pieces (no buffer of the output's
//!   size). A candidate that computes other bytes is dropped and counted
//!   ([`TuneStats::rejected`]), however fast it is, and the winner's
//!   [`Choice::verified`](crate::tune::Choice::verified) says its bytes were compared.
//!   Variants are meant to be bit-exact; this keeps a driver bug from becoming the tuned
//!   choice.
//!
//! A candidate that fails to run (no memory for its scratch, refused by the driver) is skipped;
//! one the arena had no room for is counted ([`TuneStats::starved`]), so that a tool making a
//! table can tell a short arena from a finished tuning.
//! Whatever happens, the claimed key is finished, with `Choice::FAILED` when nothing could be
//! timed, so it is never tuned again; a tuning that cannot measure is not the op's failure:
//! the op then runs as it would untuned.
//!
//! The measuring and the tables (the `measure` submodule) are NPU machinery, built with the
//! cargo feature `tuning` (on by default). A build without it runs every job as the driver
//! chooses: a server built to tune ([`NpuServer::with_tuning`] with another mode than
//! [`TuneMode::Off`]) refuses its jobs, and tables are refused, with
//! [`Error::NotBuilt`] naming the feature.

use super::NpuServer;
#[cfg(doc)]
use crate::error::Error;
use crate::hal::Npu;
use crate::memory::MemoryManagement;
use crate::ops::Op;
use crate::tune::{set_id, TuneCache, TuneConfig, TuneKey, TuneMode};

#[cfg(feature = "tuning")]
mod measure;

/// Bytes of output read back at a time to verify a candidate (a stack buffer).
pub const VERIFY_CHUNK: u32 = 256;

/// Counters of the tuner, since the server started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TuneStats {
    /// Keys measured (tunings run): zero when every key came from an imported table.
    pub tuning_runs: u32,
    /// Jobs run to time candidates (warm-ups and samples).
    pub measurements: u32,
    /// HAL cycles spent measuring (copies of constants, warm-ups and samples included).
    pub tuning_cycles: u64,
    /// Ops that found their key tuned.
    pub hits: u32,
    /// Candidates dropped while tuning because their output differed from `Auto`'s: a
    /// driver variant that computes something else is never chosen.
    pub rejected: u32,
    /// Ops whose key was unknown (claimed for tuning, or run as `Auto` when not tuning).
    pub misses: u32,
    /// Ops that ran `Auto` instead of their choice: the key was being tuned, the cache was
    /// full, or the chosen variant could not run (no scratch memory, unsupported here).
    pub fallbacks: u32,
    /// Choices imported from a tuning table ([`NpuServer::with_tuning_table`]).
    pub imported: u32,
    /// Measurings the arena had no room for: a layer shape whose scratch output (or device
    /// copy of a weight in flash) did not fit, counted once, and each candidate whose own
    /// scratch did not fit. The choices were made without them, so a table made with any is
    /// poorer than one made in a larger arena: 0 means every measuring found room.
    pub starved: u32,
    /// The largest request among [`starved`](Self::starved)'s, in bytes (rounded up to the
    /// arena's alignment).
    pub starved_bytes: u32,
}

/// The tuner state a server keeps.
#[derive(Debug)]
pub(super) struct Tuning<const N: usize> {
    pub(super) cache: TuneCache<N>,
    pub(super) mode: TuneMode,
    pub(super) config: TuneConfig,
    pub(super) stats: TuneStats,
    /// Bumped at every change to the cached choices: a job plan built at another epoch may
    /// hold outdated choices.
    pub(super) epoch: u32,
}

impl<const N: usize> Tuning<N> {
    pub(super) fn new() -> Self {
        Tuning {
            cache: TuneCache::new(),
            mode: TuneMode::Off,
            config: TuneConfig::DEFAULT,
            stats: TuneStats::default(),
            epoch: 0,
        }
    }
}

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// This server with ops tuned the way `mode` says, measuring within `config` (the
    /// default is [`TuneMode::Off`] and [`TuneConfig::DEFAULT`]). Set when the server is
    /// built: `execute`, and every job plan, follows it from then on.
    pub fn with_tuning(mut self, mode: TuneMode, config: TuneConfig) -> Self {
        self.tuning.mode = mode;
        self.tuning.config = config;
        self.tuning.epoch = self.tuning.epoch.wrapping_add(1);
        self
    }

    /// The tuning key of `op`, and whether the CPU is among its candidates: output blocks
    /// and im2col always; the CPU fallback only where the HAL's clock sees CPU work (else its
    /// timing would be a free lunch) and the op is small enough for the config's bound.
    pub(super) fn tune_key(&self, op: &Op) -> (TuneKey, bool) {
        let cpu = self.npu.clock_counts_cpu()
            && self
                .tuning
                .config
                .cpu_max_work
                .is_some_and(|max| op.macs() <= max);
        (TuneKey::of(op, set_id(true, true, cpu)), cpu)
    }
}

/// The tuner in a build without it: tuning off is all it does.
#[cfg(not(feature = "tuning"))]
mod measure {
    use super::super::NpuServer;
    use crate::error::Error;
    use crate::hal::Npu;
    use crate::handle::HandleId;
    use crate::memory::MemoryManagement;
    use crate::ops::Op;

    /// What a server asked to tune gets.
    const NOT_BUILT: Error = Error::NotBuilt { feature: "tuning" };

    impl<
            H: Npu,
            M: MemoryManagement,
            const HANDLES: usize,
            const STAGING: usize,
            const TUNE: usize,
        > NpuServer<H, M, HANDLES, STAGING, TUNE>
    {
        /// This server with the choices of a tuning table: this build has no tuner.
        ///
        /// Errors: [`Error::NotBuilt`] naming `tuning`.
        pub fn with_tuning_table(self, _table: &[u8]) -> Result<Self, Error> {
            Err(NOT_BUILT)
        }

        /// `execute` with a tuning mode set: refused, this build has no tuner.
        #[inline(never)]
        pub(in crate::server) fn execute_tuned(
            &mut self,
            _op: &Op,
            _inputs: &[HandleId],
            _output: HandleId,
        ) -> Result<(), Error> {
            Err(NOT_BUILT)
        }

        /// No tuning table to export.
        pub(in crate::server) fn export_tuning(&self, _out: &mut [u8]) -> Result<usize, Error> {
            Err(NOT_BUILT)
        }
    }
}
