//! The tensor access list of a measured invoke (behind the `std` feature): for every activation
//! of a model, when each operator read or wrote it on the simulator's virtual clock, and the
//! bytes of activations live over time. It is the measurement a swap-and-recompute policy in
//! the manner of Capuchin (ASPLOS '20) starts from: candidates at the memory peak, the idle
//! gaps between an access and the next where a transfer could hide.
//!
//! # Design
//!
//! The list is built from two things the simulator and the graph already give, and from
//! nothing else: the trace of one invoke, each job with the regions it read and wrote
//! ([`SimNpu::with_trace_regions`](crate::SimNpu::with_trace_regions)), and the prepared
//! graph's layout ([`GraphFacts`]: each activation's offset in the activation pool, each step's
//! operands, the order of its tasks, the pool's place in device memory). [`measure`] runs a
//! model as firmware does (prepare, a first invoke, a second) and lists the **second** invoke,
//! the one a deployed model repeats, as `npu-sim trace` draws it; [`AccessList::build`] does the
//! matching alone, for a caller with its own trace.
//!
//! Jobs are matched to the graph's steps, not regions to tensors: the arena plan gives one
//! region to several tensors (a RESHAPE's output is its input's memory, an ADD may write over
//! an input that dies there, a concatenation's inputs may lie inside its output), so a region
//! alone cannot say which tensor an access was of, while a step's operands can. A compute job
//! belongs to a step whose operator (kind and type) it ran, whose output region holds what the
//! job wrote and whose activation operands hold what it read, in operand order (a band of a
//! split step reads and writes rows inside its step's tensors). Where several steps fit (a
//! ping-pong pair of buffers reused by identical layers), jobs taken in time order go to steps
//! taken in task order: steps whose outputs overlap cannot run at once, so the earlier task
//! ran first. Operators on the CPU fallback leave entries without regions; once every job is
//! matched, the steps left are the CPU's, and they take the CPU entries in task order. The
//! simulator lends the CPU no device memory, so the fallback downloads a CPU step's operands
//! (constants included: one download each, the last ones submitted before it computes) and
//! uploads its output: those transfers belong to the step, whose accesses then span from its
//! first download to its upload. The remaining uploads into a model input and downloads of a
//! model output are the invoke's own transfers, accesses with no operator. A job or CPU entry
//! no step accounts for, or a step with jobs missing, is an error, not a guess.
//!
//! A step that runs nothing (a RESHAPE, a concatenation written in place) reads its inputs
//! and writes its output in an instant, when its last input is written: its output has a
//! producer and a first write like any other. A step split into bands is one operator: its
//! accesses span from its first band's start to its last band's end. Bands pipeline on
//! several units (a reader's first band may start once the rows it reads are written), so
//! there a read may start before its tensor's write has ended, never before it started; on
//! one unit every read starts after the write ends.
//!
//! # The memory curve
//!
//! A tensor is live from the start of its first access (its write) to the end of its last (a
//! variable, an operator's state, for the whole invoke). The curve counts the bytes of the
//! pool that live tensors cover, each tensor's region rounded up to the arena's alignment as
//! the plan lays it out, and each byte once: a tensor sharing memory with another (the aliases
//! above) adds nothing. The pool holds every region, so the peak is at most the plan's
//! `activation_bytes`; on one execution unit the tensors live at any cycle are among those
//! the plan counts live at one step, so the peak is also at most its whole-tensor lower bound
//! `lower_bound_bytes` (which counts in-place outputs apart), and equal to it where no alias
//! lies at the peak. A graph running tiled chains ([`Optimise::Memory`]) is refused: its
//! stripes are not whole tensors.
//!
//! [`Optimise::Memory`]: npu_compute::graph::Optimise::Memory

use std::collections::HashMap;

use npu_compute::graph::{Activation, ArenaReport, Optimise, StepTensors};
use npu_compute::hal::{Cycles, Region, Space};
use npu_compute::ops::{DType, OpKind};

use crate::runner::{self, RunError, RunOptions, TraceRun};
use crate::{TraceEntry, TraceKind, TraceRegions};

/// What a prepared graph says of its tensors and tasks: what [`AccessList::build`] matches a
/// trace against. [`measure`] reads it from the graph it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphFacts {
    /// Each step's operator (kind and element type), by step index; `None` for a RESHAPE.
    pub operators: Vec<Option<(OpKind, DType)>>,
    /// Each step's operator index in the model, by step index (an operator with several
    /// outputs is one step per output).
    pub model_ops: Vec<u16>,
    /// Each step's operands and output, by step index
    /// ([`Graph::step_tensors`](npu_compute::graph::Graph::step_tensors)).
    pub steps: Vec<StepTensors>,
    /// Every activation ([`Graph::activations`](npu_compute::graph::Graph::activations)).
    pub activations: Vec<Activation>,
    /// The step of each task, in the order an invoke hands them to the server
    /// ([`Graph::tasks`](npu_compute::graph::Graph::tasks)).
    pub tasks: Vec<u16>,
    /// The device offset of the activation pool (`None`: the graph has none).
    pub pool_base: Option<u32>,
    /// The graph's arena figures.
    pub arena: ArenaReport,
    /// The arena's alignment in bytes.
    pub alignment: u32,
}

/// Whether an access read or wrote its tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessKind {
    /// The tensor was read.
    Read,
    /// The tensor was written.
    Write,
}

impl AccessKind {
    /// `"read"` or `"write"`.
    pub fn name(self) -> &'static str {
        match self {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
        }
    }
}

/// What carried out an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Via {
    /// The operator's job (or band jobs) on the NPU.
    Npu,
    /// The operator on the CPU fallback, with the transfers it made.
    Cpu,
    /// A transfer of the invoke itself: a model input's upload or a model output's download
    /// (no operator).
    Transfer,
    /// A step that runs nothing (a RESHAPE, a concatenation written in place): an instant.
    Nothing,
}

impl Via {
    /// `"npu"`, `"cpu"`, `"transfer"` or `"none"`.
    pub fn name(self) -> &'static str {
        match self {
            Via::Npu => "npu",
            Via::Cpu => "cpu",
            Via::Transfer => "transfer",
            Via::Nothing => "none",
        }
    }
}

/// One access to a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// The step (index among the graph's operators) that made it; `None` for the invoke's
    /// upload of a model input or download of a model output.
    pub op: Option<u16>,
    /// Read or write.
    pub kind: AccessKind,
    /// The cycle the operator's first job (or CPU work, or transfer) started.
    pub start: Cycles,
    /// The cycle its last one ended.
    pub end: Cycles,
    /// What carried it out.
    pub via: Via,
}

/// The idle time between one access to a tensor and the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// The index (in [`TensorAccesses::accesses`]) of the access after the gap.
    pub before: usize,
    /// Cycles from the end of every earlier access to the start of that one (0 where they
    /// overlap): the free time a swap out and back in would have to fit in.
    pub cycles: Cycles,
}

/// One activation and its accesses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorAccesses {
    /// Its index in the model's tensors.
    pub tensor: u16,
    /// Its size in bytes.
    pub bytes: u32,
    /// Its offset in the activation pool (the whole-tensor arena plan).
    pub offset: u32,
    /// The bytes of the pool it covers: its size rounded up to the arena's alignment.
    pub len: u32,
    /// The step that produced it; `None` for a model input (and a variable no step outputs).
    pub producer: Option<u16>,
    /// A model input.
    pub input: bool,
    /// A model output.
    pub output: bool,
    /// A variable (an operator's state, held for the graph's lifetime).
    pub variable: bool,
    /// Every access, in time order (by start, then end).
    pub accesses: Vec<Access>,
}

impl TensorAccesses {
    /// The end of its first write: from then it holds its value.
    pub fn first_write_end(&self) -> Option<Cycles> {
        self.accesses
            .iter()
            .find(|a| a.kind == AccessKind::Write)
            .map(|a| a.end)
    }

    /// The end of its last read: after it, its memory is free.
    pub fn last_read_end(&self) -> Option<Cycles> {
        self.accesses
            .iter()
            .filter(|a| a.kind == AccessKind::Read)
            .map(|a| a.end)
            .max()
    }

    /// When it occupies memory, `(start, end)`: from the start of its first access to the end
    /// of its last. `None` without accesses.
    pub fn live(&self) -> Option<(Cycles, Cycles)> {
        let start = self.accesses.first()?.start;
        let end = self.accesses.iter().map(|a| a.end).max()?;
        Some((start, end))
    }

    /// The idle gap before each access but the first: how long the tensor sits unused
    /// between consecutive accesses.
    pub fn gaps(&self) -> Vec<Gap> {
        let mut busy_until = match self.accesses.first() {
            Some(a) => a.end,
            None => return Vec::new(),
        };
        let mut gaps = Vec::with_capacity(self.accesses.len().saturating_sub(1));
        for (k, a) in self.accesses.iter().enumerate().skip(1) {
            gaps.push(Gap {
                before: k,
                cycles: a.start.saturating_sub(busy_until),
            });
            busy_until = busy_until.max(a.end);
        }
        gaps
    }
}

/// When one step ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperatorRun {
    /// The step (index among the graph's operators).
    pub op: u16,
    /// Where it ran ([`Via::Nothing`] for a step that runs nothing).
    pub via: Via,
    /// The cycle its first job (or CPU work, with the downloads before it) started.
    pub start: Cycles,
    /// The cycle its last job (or CPU work, with the upload after it) ended.
    pub end: Cycles,
    /// Jobs it ran: its bands on the NPU, 1 on the CPU, 0 for nothing.
    pub jobs: u16,
}

/// One point of the memory curve: from `cycle` until the next point, `bytes` of the pool are
/// live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CurvePoint {
    /// The cycle the figure starts at.
    pub cycle: Cycles,
    /// Bytes of live activations (see the [module docs](self)).
    pub bytes: u64,
}

/// The tensor access list of one invoke (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessList {
    /// Every activation, by tensor index.
    pub tensors: Vec<TensorAccesses>,
    /// When each step ran, by step index.
    pub operators: Vec<OperatorRun>,
    /// The first cycle of the invoke (its first job's start).
    pub start: Cycles,
    /// Its last cycle (its last job's end).
    pub end: Cycles,
    /// Live bytes over the invoke; starts at [`start`](Self::start), ends at 0.
    pub curve: Vec<CurvePoint>,
    /// The most bytes live at once.
    pub peak_bytes: u64,
    /// The first cycle at which they are.
    pub peak_cycle: Cycles,
    /// The tensors live at [`peak_cycle`](Self::peak_cycle), by index.
    pub live_at_peak: Vec<u16>,
    /// The arena figures of the graph measured (its pool size, `activation_bytes`, bounds the
    /// peak).
    pub arena: ArenaReport,
    /// The arena's alignment in bytes.
    pub alignment: u32,
    /// Whether the invoke replayed the graph's job plan (else it ran job by job).
    pub planned: bool,
    /// Transfers of the invoke that are no activation's access (none expected).
    pub other_transfers: usize,
}

/// Why an access list could not be made.
#[derive(Debug)]
pub enum AccessError {
    /// Running the model failed.
    Run(RunError),
    /// The graph runs tiled chains, whose stripes are not whole tensors: prepare it with
    /// `Optimise::Cycles`.
    Tiled {
        /// Its tiled chains.
        chains: u8,
    },
    /// The graph has activations but no pool was found in device memory.
    NoPool,
    /// A job of the invoke failed: its accesses cannot be trusted.
    Failed {
        /// Its fence number.
        fence: u64,
        /// Its failure code.
        code: u32,
    },
    /// A job or CPU entry that no step of the graph accounts for.
    Unmatched {
        /// Its fence number (`u64::MAX` for CPU work).
        fence: u64,
        /// The operator it ran.
        op: OpKind,
        /// The cycle it started.
        start: Cycles,
    },
    /// A step whose jobs were not all in the trace.
    Missing {
        /// The step.
        op: u16,
        /// Jobs it should have run.
        expected: u16,
        /// Jobs found.
        found: u16,
    },
}

impl std::fmt::Display for AccessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccessError::Run(e) => write!(f, "{e}"),
            AccessError::Tiled { chains } => write!(
                f,
                "the graph runs {chains} tiled chain(s), whose stripes are not whole tensors: \
                 an access list needs the whole-tensor plan (optimise for cycles)"
            ),
            AccessError::NoPool => f.write_str(
                "the graph's activation pool was not found in device memory after the invoke",
            ),
            AccessError::Failed { fence, code } => write!(
                f,
                "job {fence} of the measured invoke failed with code {code}: its accesses \
                 cannot be listed"
            ),
            AccessError::Unmatched { fence, op, start } => write!(
                f,
                "a {op:?} job (fence {fence}) starting at cycle {start} matches no step of the \
                 graph: the trace does not belong to this graph"
            ),
            AccessError::Missing {
                op,
                expected,
                found,
            } => write!(
                f,
                "step {op} should have run {expected} job(s) but the trace holds {found}: the \
                 trace is incomplete"
            ),
        }
    }
}

impl std::error::Error for AccessError {}

impl From<RunError> for AccessError {
    fn from(e: RunError) -> Self {
        AccessError::Run(e)
    }
}

/// Prepares `model`, invokes it twice on `inputs` as firmware does (see [`runner::trace`]) and
/// lists the second invoke's accesses. `opts.optimise` must be `Optimise::Cycles` (the
/// default), or the model must have no chain worth tiling ([`AccessError::Tiled`]).
pub fn measure(
    model: &'static [u8],
    inputs: &[&[u8]],
    opts: &RunOptions,
) -> Result<AccessList, AccessError> {
    measure_traced(model, inputs, opts).map(|m| m.list)
}

/// [`measure_traced`] in the memories the model's whole-tensor plan needs on `config`'s part
/// (its arena and host staging, as [`runner::planned_memory`] sizes them): the unconstrained
/// run a tier plan starts from.
///
/// # Errors
/// As [`measure_traced`], and [`AccessError::Run`] when the model cannot be planned.
pub fn measure_unconstrained(
    model: &'static [u8],
    inputs: &[&[u8]],
    config: crate::SimConfig,
) -> Result<Measurement, AccessError> {
    let (arena, host) = runner::planned_memory(model, config, Optimise::Cycles)?;
    let opts = RunOptions {
        arena_bytes: arena,
        host_bytes: host.max(RunOptions::default().host_bytes),
        config,
        ..RunOptions::default()
    };
    measure_traced(model, inputs, &opts)
}

/// What [`measure_traced`] gives: the access list and what it was built from.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// The access list.
    pub list: AccessList,
    /// The second invoke's trace (what `npu-sim trace` draws).
    pub trace: TraceRun,
    /// The graph's facts the trace was matched against.
    pub facts: GraphFacts,
}

/// [`measure`], with the trace and the graph facts the list was built from.
pub fn measure_traced(
    model: &'static [u8],
    inputs: &[&[u8]],
    opts: &RunOptions,
) -> Result<Measurement, AccessError> {
    let (trace, facts) = runner::trace_with_facts(model, inputs, opts)?;
    let list = AccessList::build(&facts, &trace.jobs, trace.planned)?;
    Ok(Measurement { list, trace, facts })
}

/// Whether `r` lies in device memory inside `[at, at + len)`.
fn inside(r: &Region, (at, len): (u64, u64)) -> bool {
    let (start, end) = (u64::from(r.offset), u64::from(r.offset) + u64::from(r.len));
    r.space == Space::Device && start >= at && end <= at + len
}

/// The first cycle of `jobs` (0 for none).
fn start_of(jobs: &[(TraceEntry, TraceRegions)]) -> Cycles {
    jobs.iter().map(|(e, _)| e.start).min().unwrap_or(0)
}

/// A step's span as the matching builds it.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: Cycles,
    end: Cycles,
    via: Via,
    jobs: u16,
}

impl Span {
    fn widen(&mut self, start: Cycles, end: Cycles) {
        self.start = self.start.min(start);
        self.end = self.end.max(end);
    }
}

impl AccessList {
    /// Matches `jobs` (one invoke's trace, each entry with its regions, as
    /// [`runner::trace`] returns it) against the graph `facts` describe (see the
    /// [module docs](self)). `planned` says whether the invoke replayed a job plan, and is
    /// only reported.
    ///
    /// Errors: [`AccessError::Tiled`], [`AccessError::NoPool`], [`AccessError::Failed`],
    /// [`AccessError::Unmatched`] and [`AccessError::Missing`].
    pub fn build(
        facts: &GraphFacts,
        jobs: &[(TraceEntry, TraceRegions)],
        planned: bool,
    ) -> Result<AccessList, AccessError> {
        if facts.arena.tiled_chains > 0 {
            return Err(AccessError::Tiled {
                chains: facts.arena.tiled_chains,
            });
        }
        if let Some((e, _)) = jobs.iter().find(|(e, _)| e.failure.is_some()) {
            return Err(AccessError::Failed {
                fence: e.fence.0,
                code: e.failure.unwrap_or_default(),
            });
        }
        let align = u64::from(facts.alignment.max(1));
        let base = match facts.pool_base {
            Some(b) => u64::from(b),
            None if facts.activations.is_empty() || facts.arena.activation_bytes == 0 => 0,
            None => return Err(AccessError::NoPool),
        };
        let act: HashMap<u16, &Activation> =
            facts.activations.iter().map(|a| (a.tensor, a)).collect();
        let region = |t: u16| {
            act.get(&t)
                .map(|a| (base + u64::from(a.offset), u64::from(a.bytes)))
        };
        let n = facts.steps.len();
        let mut remaining = vec![0u16; n];
        let mut rank = vec![usize::MAX; n];
        for (k, &s) in facts.tasks.iter().enumerate() {
            if let Some(r) = remaining.get_mut(usize::from(s)) {
                *r = r.saturating_add(1);
                rank[usize::from(s)] = rank[usize::from(s)].min(k);
            }
        }
        let expected = remaining.clone();
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&k| (jobs[k].0.start, jobs[k].0.fence.0));
        let mut spans: Vec<Option<Span>> = vec![None; n];
        let mut take = |s: usize, e: &TraceEntry, via: Via, remaining: &mut [u16]| {
            remaining[s] -= 1;
            let span = spans[s].get_or_insert(Span {
                start: e.start,
                end: e.end,
                via,
                jobs: 0,
            });
            span.widen(e.start, e.end);
            span.jobs += 1;
        };
        // The NPU's jobs first: their regions say which step they ran.
        for &k in &order {
            let (e, r) = &jobs[k];
            let TraceKind::Compute { op, dtype } = e.kind else {
                continue;
            };
            let fits =
                |s: usize| {
                    let step = &facts.steps[s];
                    remaining[s] > 0
                        && facts.operators[s] == Some((op, dtype))
                        && r.write
                            .zip(region(step.output))
                            .is_some_and(|(w, out)| inside(&w, out))
                        && step.operands.iter().enumerate().all(|(i, o)| {
                            match o.and_then(&region) {
                                Some(at) => r.reads.get(i).is_some_and(|read| inside(read, at)),
                                None => true,
                            }
                        })
                };
            let s = (0..n).filter(|&s| fits(s)).min_by_key(|&s| rank[s]).ok_or(
                AccessError::Unmatched {
                    fence: e.fence.0,
                    op,
                    start: e.start,
                },
            )?;
            take(s, e, Via::Npu, &mut remaining);
        }
        // The steps left are the CPU's, computed in task order.
        let mut cpu: Vec<(usize, TraceEntry)> = Vec::new();
        for &k in &order {
            let (e, _) = &jobs[k];
            let TraceKind::Cpu { op, dtype } = e.kind else {
                continue;
            };
            let s = (0..n)
                .filter(|&s| remaining[s] > 0 && facts.operators[s] == Some((op, dtype)))
                .min_by_key(|&s| rank[s])
                .ok_or(AccessError::Unmatched {
                    fence: e.fence.0,
                    op,
                    start: e.start,
                })?;
            take(s, e, Via::Cpu, &mut remaining);
            cpu.push((s, *e));
        }
        if let Some(s) = (0..n).find(|&s| remaining[s] > 0) {
            return Err(AccessError::Missing {
                op: s as u16,
                expected: expected[s],
                found: expected[s] - remaining[s],
            });
        }
        // Transfers: a CPU step's downloads and upload, then the invoke's own.
        let transfers: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&k| matches!(jobs[k].0.kind, TraceKind::Transfer { .. }))
            .collect();
        let direction = |k: usize| match jobs[k].0.kind {
            TraceKind::Transfer { from, to, .. } => Some((from, to)),
            _ => None,
        };
        let down = Some((Space::Device, Space::Host));
        let up = Some((Space::Host, Space::Device));
        let mut used = vec![false; jobs.len()];
        let mut previous_end = start_of(jobs);
        for &(s, e) in &cpu {
            let step = &facts.steps[s];
            let mut span = spans[s].unwrap_or(Span {
                start: e.start,
                end: e.end,
                via: Via::Cpu,
                jobs: 1,
            });
            // The fallback downloads every operand (constants from flash or the arena too)
            // just before it computes, after the CPU's previous work: the last downloads
            // submitted before its entry are its own.
            let mut downloads: Vec<usize> = transfers
                .iter()
                .copied()
                .filter(|&k| !used[k] && matches!(direction(k), Some((_, Space::Host))))
                .filter(|&k| jobs[k].0.start >= previous_end && jobs[k].0.end <= e.start)
                .collect();
            downloads.sort_by_key(|&k| std::cmp::Reverse(jobs[k].0.fence.0));
            downloads.truncate(step.operands.len());
            for k in downloads {
                used[k] = true;
                span.widen(jobs[k].0.start, jobs[k].0.end);
            }
            previous_end = e.end;
            if let Some(at) = region(step.output) {
                let found = transfers
                    .iter()
                    .copied()
                    .filter(|&k| !used[k] && direction(k) == up && jobs[k].0.start >= e.end)
                    .find(|&k| jobs[k].1.write.is_some_and(|w| inside(&w, at)));
                if let Some(k) = found {
                    used[k] = true;
                    span.widen(jobs[k].0.start, jobs[k].0.end);
                }
            }
            spans[s] = Some(span);
        }
        let mut tensors: Vec<TensorAccesses> = facts
            .activations
            .iter()
            .map(|a| TensorAccesses {
                tensor: a.tensor,
                bytes: a.bytes,
                offset: a.offset,
                len: (u64::from(a.bytes).div_ceil(align) * align).min(u64::from(u32::MAX)) as u32,
                producer: a.producer,
                input: a.input,
                output: a.output,
                variable: a.variable,
                accesses: Vec::new(),
            })
            .collect();
        tensors.sort_by_key(|t| t.tensor);
        let index: HashMap<u16, usize> = tensors
            .iter()
            .enumerate()
            .map(|(k, t)| (t.tensor, k))
            .collect();
        let push = |tensors: &mut Vec<TensorAccesses>, t: u16, access: Access| {
            if let Some(&k) = index.get(&t) {
                tensors[k].accesses.push(access);
            }
        };
        for t in tensors.clone().iter() {
            let (want, kind) = match (t.input, t.output) {
                (true, _) => (up, AccessKind::Write),
                (false, true) => (down, AccessKind::Read),
                _ => continue,
            };
            let Some(at) = region(t.tensor) else { continue };
            for &k in &transfers {
                let r = &jobs[k].1;
                let hit = match kind {
                    AccessKind::Write => r.write.is_some_and(|w| inside(&w, at)),
                    AccessKind::Read => r.reads.first().is_some_and(|x| inside(x, at)),
                };
                if !used[k] && direction(k) == want && hit {
                    used[k] = true;
                    push(&mut tensors, t.tensor, by_transfer(kind, &jobs[k].0));
                }
            }
        }
        // A model output that is also an input has both, uploads first; the downloads of the
        // others are found above.
        for t in tensors.clone().iter().filter(|t| t.input && t.output) {
            let Some(at) = region(t.tensor) else { continue };
            for &k in &transfers {
                if !used[k]
                    && direction(k) == down
                    && jobs[k].1.reads.first().is_some_and(|x| inside(x, at))
                {
                    used[k] = true;
                    push(
                        &mut tensors,
                        t.tensor,
                        by_transfer(AccessKind::Read, &jobs[k].0),
                    );
                }
            }
        }
        let start = start_of(jobs);
        let end = jobs.iter().map(|(e, _)| e.end).max().unwrap_or(start);
        // Steps in model order, which is topological: a step that runs nothing finds its
        // inputs' writes already listed.
        let mut operators = Vec::with_capacity(n);
        for (s, step) in facts.steps.iter().enumerate() {
            let span = match spans[s] {
                Some(span) => span,
                None => {
                    let ready = step
                        .operands
                        .iter()
                        .flatten()
                        .filter_map(|t| index.get(t))
                        .filter_map(|&k| tensors[k].first_write_end())
                        .max()
                        .unwrap_or(start);
                    Span {
                        start: ready,
                        end: ready,
                        via: Via::Nothing,
                        jobs: 0,
                    }
                }
            };
            let op = Some(s as u16);
            let mut read: Vec<u16> = step.operands.iter().flatten().copied().collect();
            read.sort_unstable();
            read.dedup();
            for t in read {
                let access = |kind| Access {
                    op,
                    kind,
                    start: span.start,
                    end: span.end,
                    via: span.via,
                };
                push(&mut tensors, t, access(AccessKind::Read));
            }
            push(
                &mut tensors,
                step.output,
                Access {
                    op,
                    kind: AccessKind::Write,
                    start: span.start,
                    end: span.end,
                    via: span.via,
                },
            );
            operators.push(OperatorRun {
                op: s as u16,
                via: span.via,
                start: span.start,
                end: span.end,
                jobs: span.jobs,
            });
        }
        for t in &mut tensors {
            // At one instant a write comes before the reads it feeds.
            t.accesses
                .sort_by_key(|a| (a.start, a.end, a.kind == AccessKind::Read, a.op));
        }
        let (curve, peak_bytes, peak_cycle, live_at_peak) = memory_curve(&tensors, (start, end));
        let other_transfers = transfers.iter().filter(|&&k| !used[k]).count();
        Ok(AccessList {
            tensors,
            operators,
            start,
            end,
            curve,
            peak_bytes,
            peak_cycle,
            live_at_peak,
            arena: facts.arena,
            alignment: facts.alignment,
            planned,
            other_transfers,
        })
    }

    /// The tensors live at the peak that no access is using then, by index: what a swap
    /// could take out of memory there. Those live at the peak and absent here are being read
    /// or written at that cycle (an operator's operands and output), which a swap cannot
    /// move and only a smaller operator (stripes) or reading them in the slow tier reduces.
    pub fn idle_at_peak(&self) -> Vec<u16> {
        let at = self.peak_cycle;
        self.tensors
            .iter()
            .filter(|t| self.live_at_peak.contains(&t.tensor))
            .filter(|t| !t.accesses.iter().any(|a| a.start <= at && at < a.end))
            .map(|t| t.tensor)
            .collect()
    }

    /// Bytes of the pool the [`idle_at_peak`](Self::idle_at_peak) tensors cover (their
    /// aligned lengths; a tensor sharing another's bytes counted once per tensor).
    pub fn idle_at_peak_bytes(&self) -> u64 {
        let idle = self.idle_at_peak();
        self.tensors
            .iter()
            .filter(|t| idle.contains(&t.tensor))
            .map(|t| u64::from(t.len))
            .sum()
    }

    /// The list as a JSON document: the invoke's window and arena figures, `peak_bytes`,
    /// `peak_cycle`, `live_at_peak`, `idle_at_peak` and `idle_at_peak_bytes`; `operators`
    /// (each `op`, `via`, `start`, `end`, `jobs`); `tensors` (each `tensor`, `bytes`,
    /// `offset`, `len`, `producer`, `input`, `output`, `variable`, `accesses` [{`op`, `kind`:
    /// "read" | "write", `start`, `end`, `via`}], `first_write_end`, `last_read_end`, `live`
    /// [start, end] and `gaps`, the idle cycles before each access but the first); `curve`
    /// [{`cycle`, `bytes`}].
    pub fn to_json(&self) -> String {
        use serde_json::json;
        let tensors: Vec<serde_json::Value> = self
            .tensors
            .iter()
            .map(|t| {
                let accesses: Vec<serde_json::Value> = t
                    .accesses
                    .iter()
                    .map(|a| {
                        json!({
                            "op": a.op,
                            "kind": a.kind.name(),
                            "start": a.start,
                            "end": a.end,
                            "via": a.via.name(),
                        })
                    })
                    .collect();
                let gaps: Vec<Cycles> = t.gaps().iter().map(|g| g.cycles).collect();
                json!({
                    "tensor": t.tensor,
                    "bytes": t.bytes,
                    "offset": t.offset,
                    "len": t.len,
                    "producer": t.producer,
                    "input": t.input,
                    "output": t.output,
                    "variable": t.variable,
                    "first_write_end": t.first_write_end(),
                    "last_read_end": t.last_read_end(),
                    "live": t.live().map(|(s, e)| [s, e]),
                    "accesses": accesses,
                    "gaps": gaps,
                })
            })
            .collect();
        let operators: Vec<serde_json::Value> = self
            .operators
            .iter()
            .map(|o| {
                json!({
                    "op": o.op,
                    "via": o.via.name(),
                    "start": o.start,
                    "end": o.end,
                    "jobs": o.jobs,
                })
            })
            .collect();
        let curve: Vec<serde_json::Value> = self
            .curve
            .iter()
            .map(|p| json!({ "cycle": p.cycle, "bytes": p.bytes }))
            .collect();
        let doc = json!({
            "invoke": "second",
            "planned": self.planned,
            "start": self.start,
            "end": self.end,
            "alignment": self.alignment,
            "activation_bytes": self.arena.activation_bytes,
            "lower_bound_bytes": self.arena.lower_bound_bytes,
            "peak_bytes": self.peak_bytes,
            "peak_cycle": self.peak_cycle,
            "live_at_peak": self.live_at_peak,
            "idle_at_peak": self.idle_at_peak(),
            "idle_at_peak_bytes": self.idle_at_peak_bytes(),
            "other_transfers": self.other_transfers,
            "operators": operators,
            "tensors": tensors,
            "curve": curve,
        });
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    }
}

/// The access a transfer of the invoke's own (an input's upload, an output's download) makes.
fn by_transfer(kind: AccessKind, e: &TraceEntry) -> Access {
    Access {
        op: None,
        kind,
        start: e.start,
        end: e.end,
        via: Via::Transfer,
    }
}

/// The memory curve of `tensors` over `window`, with its peak, the peak's first cycle and the
/// tensors live then (see the [module docs](self)).
fn memory_curve(
    tensors: &[TensorAccesses],
    window: (Cycles, Cycles),
) -> (Vec<CurvePoint>, u64, Cycles, Vec<u16>) {
    let live: Vec<(Cycles, Cycles, &TensorAccesses)> = tensors
        .iter()
        .filter_map(|t| {
            let (s, e) = if t.variable { window } else { t.live()? };
            (s < e).then_some((s, e, t))
        })
        .collect();
    let live_at = |c: Cycles| live.iter().filter(move |(s, e, _)| *s <= c && c < *e);
    let bytes_at = |c: Cycles| {
        let mut spans: Vec<(u64, u64)> = live_at(c)
            .map(|(_, _, t)| (u64::from(t.offset), u64::from(t.offset) + u64::from(t.len)))
            .collect();
        spans.sort_unstable();
        let (mut total, mut reached) = (0u64, 0u64);
        for (a, b) in spans {
            let a = a.max(reached);
            if b > a {
                total += b - a;
            }
            reached = reached.max(b);
        }
        total
    };
    let mut cycles: Vec<Cycles> = live.iter().flat_map(|&(s, e, _)| [s, e]).collect();
    cycles.push(window.0);
    cycles.sort_unstable();
    cycles.dedup();
    let mut curve: Vec<CurvePoint> = Vec::new();
    for c in cycles {
        let bytes = bytes_at(c);
        if curve.last().is_none_or(|p| p.bytes != bytes) {
            curve.push(CurvePoint { cycle: c, bytes });
        }
    }
    let peak = curve
        .iter()
        .fold(None::<CurvePoint>, |best, &p| match best {
            Some(b) if b.bytes >= p.bytes => Some(b),
            _ => Some(p),
        })
        .unwrap_or(CurvePoint {
            cycle: window.0,
            bytes: 0,
        });
    let mut at_peak: Vec<u16> = live_at(peak.cycle).map(|(_, _, t)| t.tensor).collect();
    at_peak.sort_unstable();
    (curve, peak.bytes, peak.cycle, at_peak)
}
