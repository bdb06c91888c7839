//! The operators of the small chains the job-plan tests build (`plan.rs`, `cpu_plan.rs`,
//! `cpu_in_place.rs`): an int8 ADD and a ReLU over [`LEN`] elements with fixed quantisations,
//! an NPU that lacks the ReLU, and seeded operand bytes.

use npu_compute::ops::{AddI8, DType, Op, OpKind, OpSet, ReluI8};
use npu_kernels::int8::{Activation, AddParams, Quant, ReluParams};
use npu_sim::{workloads, SimConfig};

/// Elements of every tensor of a chain.
pub const LEN: u32 = 64;

/// A quantisation.
pub fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

/// `a + b`, three different quantisations.
pub fn add() -> Op {
    let p = AddParams::new(q(0.05, 1), q(0.04, -2), q(0.08, 3), Activation::None).unwrap();
    Op::AddI8(AddI8 {
        len: LEN,
        params: p,
    })
}

/// ReLU, in and out in ADD's output quantisation.
pub fn relu() -> Op {
    let p = ReluParams::new(q(0.08, 3), q(0.08, 3)).unwrap();
    Op::ReluI8(ReluI8 {
        len: LEN,
        params: p,
    })
}

/// `LEN` pseudo-random bytes from `seed`.
pub fn bytes(seed: u32) -> Vec<u8> {
    workloads::pseudo_random_i8(seed, LEN as usize)
        .iter()
        .map(|&v| v as u8)
        .collect()
}

/// A simulated NPU of `units` execution units that runs ADD only: ReLU takes the CPU fallback.
pub fn relu_on_cpu(units: u8) -> SimConfig {
    SimConfig {
        ops: OpSet::EMPTY.with(OpKind::Add, DType::I8),
        execution_units: units,
        ..SimConfig::default()
    }
}
