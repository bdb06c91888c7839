//! Measuring candidates on the device: the client's half of autotuning.
//!
//! # Design
//!
//! Tuning happens at the first dispatch of an op whose key the server does not know
//! ([`ComputeServer::execute_tuned`] answers [`Dispatch::Tune`] and claims the key). Each
//! candidate then runs as an ordinary job, timed on the HAL's cycle source
//! ([`ComputeServer::now`]) around a `sync`, so that one sample is one job on an idle NPU:
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
//!   runs first, so it is always timed and wins ties.
//!
//! - every candidate's output is checked against `Auto`'s after its first run: a CRC-32 of the
//!   scratch output, read back in [`VERIFY_CHUNK`]-byte pieces (no buffer of the output's
//!   size). A candidate that computes other bytes is dropped and counted
//!   ([`TuneStats::rejected`](crate::server::TuneStats::rejected)), however fast it is, and the
//!   winner's [`Choice::verified`] says its bytes were compared. Variants are meant to be
//!   bit-exact; this keeps a driver bug from becoming the tuned choice.
//!
//! A candidate that fails to run (no memory for its scratch, refused by the driver) is skipped.
//! Whatever happens, the claimed key is finished, with [`Choice::FAILED`] when nothing could
//! be timed, so it is never tuned again.

use crate::channel::ComputeChannel;
use crate::client::{ComputeClient, Tensor};
use crate::error::Error;
use crate::hal::{Cycles, Op, Variant, MAX_JOB_INPUTS};
use crate::handle::HandleId;
use crate::server::{ComputeServer, Dispatch, TuningCost};

use super::table::crc_update;
use super::{Candidate, Choice, TuneConfig};

/// Bytes of output read back at a time to verify a candidate (a stack buffer).
pub const VERIFY_CHUNK: u32 = 256;

/// The winner of one key and what finding it cost.
struct Outcome {
    choice: Choice,
    measurements: u32,
    rejected: u32,
}

impl<'c, C: ComputeChannel> ComputeClient<'c, C> {
    /// Runs `op` like [`execute`](Self::execute), choosing how by the server's
    /// [`TuneMode`](super::TuneMode): with tuning off exactly `execute`; otherwise the cached
    /// choice for the op's shape, measured here the first time the shape is met (see the
    /// [module docs](self)). Returns once the op is submitted.
    pub fn execute_autotune(
        &self,
        op: impl core::borrow::Borrow<Op>,
        inputs: &[&Tensor<'c, C>],
        output: &Tensor<'c, C>,
    ) -> Result<(), Error> {
        let op = op.borrow();
        let ids = self.ids(op, inputs)?;
        let out = self.own(output)?;
        let Dispatch::Tune { key, candidates } = self.call(|s| s.execute_tuned(op, &ids, out))?
        else {
            return Ok(());
        };
        let start = self.call(|s| Ok(s.now()))?;
        let outcome = self.measure(op, inputs, output, &candidates);
        let cycles = self.call(|s| Ok(s.now()))?.saturating_sub(start);
        let (choice, measurements, rejected) = match &outcome {
            Ok(o) => (o.choice, o.measurements, o.rejected),
            Err(_) => (Choice::FAILED, 0, 0),
        };
        let cost = TuningCost {
            measurements,
            cycles,
            rejected,
        };
        self.call(|s| s.finish_tuning(key, choice, cost))?;
        // A tuning that failed (no memory for the scratch output, say) is not the op's
        // failure: it runs as it would untuned, and that run reports any real error.
        self.call(|s| s.execute_with(op, choice.candidate, &ids, out))
    }

    /// Times `candidates` for `op` (see the module docs).
    fn measure(
        &self,
        op: &Op,
        inputs: &[&Tensor<'c, C>],
        output: &Tensor<'c, C>,
        candidates: &[Candidate],
    ) -> Result<Outcome, Error> {
        let config: TuneConfig = self.call(|s| Ok(s.tune_config()))?;
        let scratch = self.empty(output.bytes())?;
        let mut resident: heapless::Vec<Tensor<'c, C>, MAX_JOB_INPUTS> = heapless::Vec::new();
        let mut ids: heapless::Vec<HandleId, MAX_JOB_INPUTS> = heapless::Vec::new();
        for t in inputs {
            let id = if self.is_in_flash(t)? {
                let copy = self.empty(t.bytes())?;
                self.copy(t, &copy)?;
                let id = copy.id();
                // At most MAX_JOB_INPUTS inputs: checked by `ids` before.
                let _ = resident.push(copy);
                id
            } else {
                t.id()
            };
            let _ = ids.push(id);
        }
        self.sync()?;
        let out = scratch.id();
        let run = |how: Candidate| -> Result<Cycles, Error> {
            let t0 = self.call(|s| Ok(s.now()))?;
            self.call(|s| s.execute_with(op, how, &ids, out))?;
            self.sync()?;
            Ok(self.call(|s| Ok(s.now()))?.saturating_sub(t0))
        };
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
                match run(how) {
                    Ok(t) => {
                        measurements += 1;
                        spent = spent.saturating_add(t);
                        if sample >= u32::from(config.warmup) {
                            fastest = fastest.min(t);
                        }
                    }
                    Err(e) => {
                        refusal = Some(e);
                        failed = true;
                        break;
                    }
                }
                if sample == 0 {
                    let digest = self.digest(&scratch)?;
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

    /// CRC-32 of `t`'s bytes, read back [`VERIFY_CHUNK`] bytes at a time through views of it.
    fn digest(&self, t: &Tensor<'c, C>) -> Result<u32, Error> {
        let mut buf = [0u8; VERIFY_CHUNK as usize];
        let mut crc = !0;
        let mut at = 0;
        while at < t.bytes() {
            let len = VERIFY_CHUNK.min(t.bytes() - at);
            let chunk = &mut buf[..len as usize];
            self.read(&self.place(t, at, len)?, chunk)?;
            crc = crc_update(crc, chunk);
            at += len;
        }
        Ok(!crc)
    }
}
