//! The jobs the suite submits: transfers, and compute jobs of the one tiny operator it runs on
//! execution units.

use crate::hal::{Fence, Job, JobKind, Queue, Region, Variant, MAX_JOB_DEPS};
use crate::ops::{Op, ReluF32, Reshape};

/// The operators the suite runs on execution units: each copies the suite's data unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UnitOp {
    /// RESHAPE (int8): a byte copy.
    Reshape,
    /// RELU f32: a copy of non-negative data.
    ReluF32,
}

impl UnitOp {
    /// In order of preference: the byte copy first.
    pub(super) const ALL: [UnitOp; 2] = [UnitOp::Reshape, UnitOp::ReluF32];
}

/// The suite's only constructor of [`Op`]s: `which`, over `bytes` of input and of output
/// (`bytes` a multiple of 4). Kept in one place so that a change to `Op`'s form touches one
/// function.
pub(super) fn build_op(which: UnitOp, bytes: u32) -> Op {
    match which {
        UnitOp::Reshape => Op::Reshape(Reshape { len: bytes }),
        UnitOp::ReluF32 => Op::ReluF32(ReluF32 { len: bytes / 4 }),
    }
}

fn dep_list(deps: &[Fence]) -> heapless::Vec<Fence, MAX_JOB_DEPS> {
    let mut list = heapless::Vec::new();
    for dep in deps.iter().take(MAX_JOB_DEPS) {
        // Cannot fail: at most MAX_JOB_DEPS are taken.
        let _ = list.push(*dep);
    }
    list
}

pub(super) fn transfer(src: Region, dst: Region, deps: &[Fence]) -> Job<'static> {
    Job {
        kind: JobKind::Transfer { src, dst },
        queue: Queue::Dma,
        deps: dep_list(deps),
    }
}

pub(super) fn compute<'o>(
    op: &'o Op,
    input: Region,
    output: Region,
    queue: Queue,
    deps: &[Fence],
) -> Job<'o> {
    let mut inputs = heapless::Vec::new();
    // Cannot fail: one input, capacity MAX_JOB_INPUTS.
    let _ = inputs.push(input);
    Job {
        kind: JobKind::Compute {
            op,
            variant: Variant::Auto,
            inputs,
            output,
            scratch: None,
        },
        queue,
        deps: dep_list(deps),
    }
}
