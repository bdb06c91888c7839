//! # npu-compute
//!
//! A `#![no_std]`, heap-free compute backend that firmware links to drive a microcontroller's NPU
//! (Cortex-M55 + Ethos-U55 class parts and similar), with a software NPU (`npu-sim`) to test it
//! on the host and under QEMU.
//!
//! ## Design
//!
//! The layers follow Burn-Compute's split, rebuilt for a machine without a heap:
//!
//! ```text
//! ComputeClient ── Tensor handles (RAII, no Arc)                 client.rs
//!    │
//! ComputeChannel ── RefCellChannel | CriticalSectionChannel      channel/
//!    │
//! ComputeServer ── NpuServer<H: Npu, M: MemoryManagement>        server/
//!    ├─ MemoryManagement ── chunks + slices (Burn's strategy)    memory/
//!    │     └─ ArenaStorage ── aligned blocks of one fixed arena  storage/
//!    ├─ HandleTable ── reference counts + generations            handle.rs
//!    └─ CPU fallback ── npu-kernels over host staging            fallback.rs
//!    │
//! Npu (HAL trait) ── submit / poll / fences / interrupt          hal/
//! ```
//!
//! - **No heap.** Every table has a fixed capacity, given as a const generic with a documented
//!   default; running out is an [`Error::CapacityExceeded`] that names the knob.
//! - **The arena is the NPU's.** Firmware hands its NPU SRAM region to the HAL driver; the
//!   storage layer plans offsets in it and never aliases the bytes from the CPU. Data moves by
//!   DMA jobs through host staging memory.
//! - **Non-blocking.** Jobs carry their dependencies as fences; `execute` returns once a job is
//!   submitted, and the CPU waits only in `read`, `sync`, or when a fixed resource is full.
//! - **Testable without hardware.** `npu-sim` implements the HAL with a deterministic virtual
//!   clock, so cycle counts and memory figures are the same on every machine.
//!
//! Start with [`client::ComputeClient`]; a board integrator starts with [`hal::Npu`].

#![no_std]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod channel;
pub mod client;
mod error;
pub mod graph;
pub mod hal;
pub mod handle;
pub mod memory;
pub mod model;
pub mod ops;
pub mod server;
pub mod storage;
pub mod tune;

pub use error::{Capacity, Error, JobPlanError};
/// The `npu-kernels` crate: the parameter types of the operators ([`ops::Op`]) come from it
/// (`npu_compute::kernels::int8::AddParams`), so a program needs no dependency of its own on it.
pub use npu_kernels as kernels;

/// The names most firmware needs.
pub mod prelude {
    pub use crate::channel::{ComputeChannel, CriticalSectionChannel, RefCellChannel};
    pub use crate::client::{ComputeClient, Tensor};
    pub use crate::error::Error;
    pub use crate::hal::Npu;
    pub use crate::memory::{DeallocStrategy, MemoryConfig, MemoryStats, SliceStrategy};
    pub use crate::ops::Op;
    pub use crate::server::{ComputeServer, NpuServer};
}
