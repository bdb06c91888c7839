//! The server's side of autotuning: the cache of tuned choices and what to do with each op.
//!
//! # Design
//!
//! The cache lives with the server, one per device, like Burn-Compute's per-device tuner: the
//! choices describe this NPU. The server never measures by itself. For an op whose key is
//! unknown it *claims* the key ([`Entry::InProgress`](crate::tune::Entry)) and answers
//! [`Dispatch::Tune`] without running anything; the client then times the candidates through
//! ordinary channel calls and stores the winner with
//! [`ComputeServer::finish_tuning`](super::ComputeServer::finish_tuning). A claimed key is
//! never claimed again, so whoever else meets it meanwhile (an interrupt-shared channel, a
//! later tile of the same layer) runs `Auto` unmeasured: a key is tuned once.

use crate::tune::{Candidate, Choice, TuneCache, TuneConfig, TuneKey, TuneMode, MAX_CANDIDATES};

/// What [`ComputeServer::execute_tuned`](super::ComputeServer::execute_tuned) did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Dispatch {
    /// The op was submitted (a cached, fixed or default choice).
    Submitted,
    /// Nothing was submitted: the key is claimed for the caller, who times `candidates`
    /// (`Npu(Auto)` first), then calls `finish_tuning(key, ..)` and runs the winner.
    Tune {
        /// The claimed key.
        key: TuneKey,
        /// What to time.
        candidates: heapless::Vec<Candidate, MAX_CANDIDATES>,
    },
}

/// What tuning one key cost, reported with its outcome
/// ([`ComputeServer::finish_tuning`](super::ComputeServer::finish_tuning)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TuningCost {
    /// Jobs run to time candidates (warm-ups and samples).
    pub measurements: u32,
    /// HAL cycles spent measuring and verifying.
    pub cycles: u64,
    /// Candidates dropped because their output differed from `Auto`'s.
    pub rejected: u32,
}

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
}

/// The tuner state a server keeps.
#[derive(Debug)]
pub(crate) struct Tuning<const N: usize> {
    pub(crate) cache: TuneCache<N>,
    pub(crate) mode: TuneMode,
    pub(crate) config: TuneConfig,
    pub(crate) stats: TuneStats,
    /// Bumped at every change to the mode, the config or the cached choices: a
    /// [`JobPlan`](super::JobPlan) built at another epoch may hold outdated choices.
    pub(crate) epoch: u32,
}

impl<const N: usize> Tuning<N> {
    pub(crate) fn new() -> Self {
        Tuning {
            cache: TuneCache::new(),
            mode: TuneMode::Off,
            config: TuneConfig::DEFAULT,
            stats: TuneStats::default(),
            epoch: 0,
        }
    }

    /// Records a finished tuning's cost.
    pub(crate) fn count(&mut self, choice: &Choice, cost: TuningCost) {
        if choice.measured {
            self.stats.tuning_runs += 1;
        }
        self.stats.measurements += cost.measurements;
        self.stats.tuning_cycles += cost.cycles;
        self.stats.rejected += cost.rejected;
    }
}
