//! # npu-compute
//!
//! A `#![no_std]`, heap-free compute backend that firmware links to drive a microcontroller's NPU
//! (Cortex-M55 + Ethos-U55 class parts and similar), with a software NPU (`npu-sim`) to test it
//! on the host and under QEMU.
//!
//! ## Design
//!
//! The layers follow Burn-Compute's split (client, channel, server, memory management,
//! storage), rebuilt for a machine without a heap, with a model runtime on top and the NPU
//! below a HAL trait. Each module imports only from the modules listed after it:
//!
//! ```text
//! graph      a .tflite model prepared once and invoked many times
//! client     what a program calls: tensors (RAII handles), execute, read, job plans
//! channel    lends the server to one caller at a time
//! server     NpuServer: tensors, transfers, residency, dispatch, job plans, tuning, release
//! memory     chunks and slices, access records, guided passes, arena plans
//! handle     reference-counted, generation-checked tensor ids
//! (error)    Error and Capacity, at the crate root
//! schedule   static schedules of tasks over execution units and the CPU, and their tables
//! tune       tuning keys, cache and tables
//! hal        the Npu trait, jobs, regions, fences, variants; driver guide; conformance
//! ops        every operator described once, with its computation over bytes
//! model      the zero-copy .tflite reader
//! storage    aligned blocks of one fixed arena
//! ```
//!
//! - **No heap.** Every table has a fixed capacity, given as a const generic with a documented
//!   default; running out is an [`Error::CapacityExceeded`] that names the knob.
//! - **The arena is the NPU's.** Firmware hands its NPU SRAM region to the HAL driver; the
//!   storage layer plans offsets in it and never aliases the bytes from the CPU. Data moves by
//!   DMA jobs through host staging memory.
//! - **Non-blocking.** Jobs carry their dependencies as fences; `execute` returns once a job is
//!   submitted, and the CPU waits only in `read`, `sync`, or when a fixed resource is full.
//! - **One way to run a model.** [`Graph::invoke`](graph::Graph::invoke) (blocking) and
//!   [`Graph::submit`](graph::Graph::submit) (pipelined) run it job by job the first time and
//!   replay a job plan after; how layers are tuned is set when the server is built.
//! - **Testable without hardware.** `npu-sim` implements the HAL with a deterministic virtual
//!   clock, so cycle counts and memory figures are the same on every machine.
//!
//! Start with [`graph::Graph`] to run a model, [`client::ComputeClient`] to run jobs by hand;
//! a board integrator starts with [`hal::Npu`] and [`hal::guide`]. [`prelude`] gathers the
//! names most programs need; it is the one second path to them.
//!
//! Cargo features: `defmt` (derive `defmt::Format` on the public types), `conformance` (the
//! HAL conformance suite), and `all-ops` (the default: every operator), which a firmware may
//! replace by the `op-` features of its models' TFLite operators to leave the others out of
//! its flash ([`ops`] explains).
//!
//! A program links one implementation of `critical-section` (on a single-core Cortex-M,
//! `cortex-m`'s `critical-section-single-core` feature; on the host, `npu-sim`'s `std`
//! feature); the README lists them, with the capacities and how to size them.

#![no_std]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod channel;
pub mod client;
pub mod compiled;
mod error;
pub mod graph;
pub mod hal;
pub mod handle;
pub mod memory;
pub mod model;
pub mod ops;
pub mod schedule;
pub mod server;
pub mod storage;
pub mod tune;

pub use error::{Capacity, Error, JobPlanError};
/// The `npu-kernels` crate: the parameter types of the operators ([`ops::Op`]) come from it
/// (`npu_compute::kernels::int8::AddParams`), so a program needs no dependency of its own on it.
pub use npu_kernels as kernels;

/// The names most programs need: `use npu_compute::prelude::*;`. Each is also at its own
/// path (the module that defines it).
pub mod prelude {
    pub use crate::channel::{ComputeChannel, CriticalSectionChannel, RefCellChannel};
    pub use crate::client::{ComputeClient, Tensor};
    pub use crate::error::Error;
    pub use crate::graph::{Graph, GraphError};
    pub use crate::hal::Npu;
    pub use crate::memory::{DeallocStrategy, MemoryConfig, MemoryStats, SliceStrategy};
    pub use crate::ops::Op;
    pub use crate::server::{ComputeServer, NpuServer};
}
