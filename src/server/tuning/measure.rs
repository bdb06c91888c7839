//! The tuner's measuring, and tuning tables in and out (see the [parent module](super)):
//! built with the cargo feature `tuning` alone.

use super::super::NpuServer;
use super::{Tuning, VERIFY_CHUNK};
use crate::error::Error;
use crate::hal::{Cycles, HalError, Npu, Variant, MAX_JOB_INPUTS};
use crate::handle::HandleId;
use crate::memory::MemoryManagement;
use crate::ops::Op;
use crate::tune::crc_update;
use crate::tune::{candidates, Candidate, Choice, Lookup, TuneKey, TuneMode, MAX_CANDIDATES};

/// What tuning one key cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct TuningCost {
    /// Jobs run to time candidates (warm-ups and samples).
    measurements: u32,
    /// HAL cycles spent measuring and verifying.
    cycles: u64,
    /// Candidates dropped because their output differed from `Auto`'s.
    rejected: u32,
}

impl<const N: usize> Tuning<N> {
    /// Records a measuring refused for `error`, if the arena had no room for it.
    fn note_starved(&mut self, error: &Error) {
        if let Error::OutOfMemory { requested, .. } = *error {
            self.stats.starved = self.stats.starved.saturating_add(1);
            self.stats.starved_bytes = self.stats.starved_bytes.max(requested);
        }
    }

    /// Records a finished tuning's cost.
    fn count(&mut self, choice: &Choice, cost: TuningCost) {
        if choice.measured {
            self.stats.tuning_runs += 1;
        }
        self.stats.measurements += cost.measurements;
        self.stats.tuning_cycles += cost.cycles;
        self.stats.rejected += cost.rejected;
    }
}

/// The winner of one key and what finding it cost.
struct Outcome {
    choice: Choice,
    measurements: u32,
    rejected: u32,
}

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// This server with the choices of a tuning table (made by
    /// [`export_tuning`](crate::server::ComputeServer::export_tuning), or `npu-sim tune`) in its
    /// cache; [`TuneStats::imported`](super::TuneStats::imported) counts them. The table is checked against this crate
    /// and this NPU's configuration, all or nothing. Pair it with [`TuneMode::CacheOnly`] to
    /// run from the table and never measure.
    ///
    /// Errors: [`Error::Table`] naming what was wrong
    /// ([`TableError::OtherHal`](crate::tune::TableError::OtherHal) for a table made on
    /// another configuration).
    pub fn with_tuning_table(mut self, table: &[u8]) -> Result<Self, Error> {
        let fingerprint = self.tuning_fingerprint();
        self.tuning.epoch = self.tuning.epoch.wrapping_add(1);
        let imported = crate::tune::import(&mut self.tuning.cache, fingerprint, table)?;
        self.tuning.stats.imported += u32::from(imported);
        Ok(self)
    }

    /// What a tuning table made here must match: the capabilities that change cycles and the
    /// HAL's own fingerprint.
    fn tuning_fingerprint(&self) -> u64 {
        crate::tune::fingerprint(&self.caps, self.npu.tuning_fingerprint())
    }

    /// The driver's own way on the NPU, or the CPU fallback where the NPU lacks the op (what
    /// `execute` does untuned, written out there).
    fn execute_untuned(
        &mut self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        self.dispatch(op, inputs, output, |s, operands, out| {
            if s.caps.ops.runs(op) {
                s.execute_on_npu(op, Variant::Auto, operands, out)
            } else {
                s.execute_on_cpu(op, operands, out)
            }
        })
    }

    /// `execute` with tuning on: the op's cached (or fixed) candidate, `Auto` for a key being
    /// tuned or unknown in [`TuneMode::CacheOnly`], and for an unknown key in
    /// [`TuneMode::Tune`], a measurement first. Out of line: see `execute`.
    #[inline(never)]
    pub(in crate::server) fn execute_tuned(
        &mut self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        let fixed = match self.tuning.mode {
            TuneMode::Off => None,
            TuneMode::Fixed(c) => Some(c),
            // The CPU fallback is the only way: nothing to look up.
            _ if !self.caps.ops.runs(op) => None,
            mode => {
                let (key, cpu) = self.tune_key(op);
                match self.tuning.cache.lookup(key) {
                    Lookup::Hit(choice) => {
                        self.tuning.stats.hits += 1;
                        Some(choice.candidate)
                    }
                    Lookup::InProgress => {
                        self.tuning.stats.fallbacks += 1;
                        None
                    }
                    Lookup::Miss => {
                        // Listed on a miss only: asking the driver about each variant may cost
                        // it a search per candidate, which a hit must not pay every invoke.
                        let npu = &self.npu;
                        let list = candidates(op, true, true, cpu, |v| npu.supports_variant(op, v));
                        if list.len() < 2 {
                            // Nothing to choose between: never claimed, not counted.
                            None
                        } else {
                            self.tuning.stats.misses += 1;
                            if mode == TuneMode::Tune && self.tuning.cache.claim(key).is_ok() {
                                return self.tune(op, inputs, output, key, &list);
                            }
                            None
                        }
                    }
                }
            }
        };
        match fixed {
            Some(how) if how != Candidate::Npu(Variant::Auto) => {
                match self.execute_with(op, how, inputs, output) {
                    // The choice cannot run here (a variant this op or NPU lacks, no room for
                    // its scratch): the default computes the same bytes.
                    Err(Error::Hal(HalError::VariantUnsupported { .. }))
                    | Err(Error::Hal(HalError::Unsupported { .. }))
                    | Err(Error::OutOfMemory { .. }) => {
                        self.tuning.stats.fallbacks += 1;
                        self.execute_untuned(op, inputs, output)
                    }
                    other => other,
                }
            }
            _ => self.execute_untuned(op, inputs, output),
        }
    }

    /// Measures the claimed `key`'s `candidates` for `op`, stores the winner, and runs it.
    fn tune(
        &mut self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
        key: TuneKey,
        candidates: &heapless::Vec<Candidate, MAX_CANDIDATES>,
    ) -> Result<(), Error> {
        let start = self.npu.now();
        let outcome = self.measure(op, inputs, output, candidates);
        let cycles = self.npu.now().saturating_sub(start);
        let (choice, measurements, rejected) = match &outcome {
            Ok(o) => (o.choice, o.measurements, o.rejected),
            Err(_) => (Choice::FAILED, 0, 0),
        };
        let cost = TuningCost {
            measurements,
            cycles,
            rejected,
        };
        self.tuning.count(&choice, cost);
        self.tuning.epoch = self.tuning.epoch.wrapping_add(1);
        self.tuning.cache.finish(key, choice).map_err(Error::Tune)?;
        // A tuning that failed (no memory for the scratch output, say) is not the op's
        // failure: it runs as it would untuned, and that run reports any real error.
        self.execute_with(op, choice.candidate, inputs, output)
    }

    /// Times `candidates` for `op` (see the module docs), on a scratch output and on device
    /// copies of the inputs in flash, which are released afterwards whatever happens.
    fn measure(
        &mut self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
        candidates: &[Candidate],
    ) -> Result<Outcome, Error> {
        let bytes = self.handles.get_ref(output)?.bytes;
        let scratch = self
            .empty(bytes)
            .inspect_err(|e| self.tuning.note_starved(e))?;
        let mut resident: heapless::Vec<HandleId, MAX_JOB_INPUTS> = heapless::Vec::new();
        let outcome = self.measure_into(op, inputs, scratch, &mut resident, candidates);
        // In the order the client-side tuner of earlier versions dropped them: the copies,
        // then the scratch, so memory is reused exactly as before.
        for id in resident {
            let _ = self.release(id, 1);
        }
        let _ = self.release(scratch, 1);
        outcome
    }

    fn measure_into(
        &mut self,
        op: &Op,
        inputs: &[HandleId],
        scratch: HandleId,
        resident: &mut heapless::Vec<HandleId, MAX_JOB_INPUTS>,
        candidates: &[Candidate],
    ) -> Result<Outcome, Error> {
        let config = self.tuning.config;
        let mut ids: heapless::Vec<HandleId, MAX_JOB_INPUTS> = heapless::Vec::new();
        for &t in inputs {
            let entry = self.handles.get_ref(t)?;
            let id = if matches!(entry.binding, crate::server::tensors::Binding::Flash(_)) {
                let copy = self
                    .empty(entry.bytes)
                    .inspect_err(|e| self.tuning.note_starved(e))?;
                // At most MAX_JOB_INPUTS inputs: checked by the operands before.
                let _ = resident.push(copy);
                self.copy(t, copy)?;
                copy
            } else {
                t
            };
            let _ = ids.push(id);
        }
        self.sync()?;
        let per_candidate = u32::from(config.warmup) + u32::from(config.samples.max(1));
        let mut measurements = 0u32;
        let mut spent: Cycles = 0;
        let mut best: Option<(Candidate, Cycles)> = None;
        let mut auto = None;
        let mut timed = 0u8;
        let mut refusal = None;
        // `Auto`'s output digest, the reference every other candidate must match.
        let mut reference = None;
        let mut rejected = 0u32;
        for &how in candidates {
            let over_budget = measurements + per_candidate > u32::from(config.max_measurements)
                || config.max_cycles.is_some_and(|max| spent >= max);
            if over_budget && best.is_some() {
                break;
            }
            let mut fastest = Cycles::MAX;
            let mut failed = false;
            for sample in 0..per_candidate {
                match self.time(op, how, &ids, scratch) {
                    Ok(t) => {
                        measurements += 1;
                        spent = spent.saturating_add(t);
                        if sample >= u32::from(config.warmup) {
                            fastest = fastest.min(t);
                        }
                    }
                    Err(e) => {
                        self.tuning.note_starved(&e);
                        refusal = Some(e);
                        failed = true;
                        break;
                    }
                }
                if sample == 0 {
                    let digest = self.digest(scratch)?;
                    match reference {
                        None if how == Candidate::Npu(Variant::Auto) => reference = Some(digest),
                        Some(r) if r != digest => {
                            rejected += 1;
                            failed = true;
                            break;
                        }
                        _ => {}
                    }
                }
                // Already twice the best: it cannot win (`fastest` is MAX until a timed sample).
                if fastest != Cycles::MAX
                    && best.is_some_and(|(_, b)| fastest > b.saturating_mul(2))
                {
                    break;
                }
            }
            if failed || fastest == Cycles::MAX {
                continue;
            }
            timed = timed.saturating_add(1);
            if how == Candidate::Npu(Variant::Auto) {
                auto = Some(fastest);
            }
            if best.is_none_or(|(_, b)| fastest < b) {
                best = Some((how, fastest));
            }
        }
        let (candidate, cycles) = match (best, refusal) {
            (Some(best), _) => best,
            // Not even `Auto` ran: its error is the op's.
            (None, Some(e)) => return Err(e),
            (None, None) => {
                return Ok(Outcome {
                    choice: Choice::FAILED,
                    measurements,
                    rejected,
                })
            }
        };
        let saturate = |c: Cycles| u32::try_from(c).unwrap_or(u32::MAX);
        Ok(Outcome {
            choice: Choice {
                candidate,
                cycles: saturate(cycles),
                auto_cycles: saturate(auto.unwrap_or(cycles)),
                timed,
                samples: config.samples.max(1),
                // Every candidate kept matched `Auto`'s bytes, if `Auto` gave any.
                verified: reference.is_some(),
                measured: true,
            },
            measurements,
            rejected,
        })
    }

    /// One timed run of candidate `how`: its job alone on the NPU, from submit to completion.
    fn time(
        &mut self,
        op: &Op,
        how: Candidate,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<Cycles, Error> {
        let t0 = self.npu.now();
        self.execute_with(op, how, inputs, output)?;
        self.sync()?;
        Ok(self.npu.now().saturating_sub(t0))
    }

    /// CRC-32 of `t`'s bytes, read back [`VERIFY_CHUNK`] bytes at a time through views of it.
    fn digest(&mut self, t: HandleId) -> Result<u32, Error> {
        let bytes = self.handles.get_ref(t)?.bytes;
        let mut buf = [0u8; VERIFY_CHUNK as usize];
        let mut crc = !0;
        let mut at = 0;
        while at < bytes {
            let len = VERIFY_CHUNK.min(bytes - at);
            let chunk = &mut buf[..len as usize];
            let view = self.place(t, at, len)?;
            let read = self.read(view, chunk);
            self.release(view, 1)?;
            read?;
            crc = crc_update(crc, chunk);
            at += len;
        }
        Ok(!crc)
    }

    pub(in crate::server) fn export_tuning(&self, out: &mut [u8]) -> Result<usize, Error> {
        crate::tune::export(&self.tuning.cache, self.tuning_fingerprint(), out)
            .map_err(Error::Table)
    }
}
