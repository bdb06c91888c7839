//! `npu-sim bench WHICH`: the benchmarks, one module each.
//!
//! - [`memory`]: peak arena bytes of the chunk/slice strategy, and the guided rows.
//! - [`models`]: every model of a reference-model directory against TFLM and the peers, with
//!   LiteRT timed in the same run ([`litert`]).
//! - [`tune`]: tuned kernel variants against every fixed choice.
//! - [`schedule`]: static schedules against dynamic dispatch and one operator at a time.
//! - [`dispatch`]: host nanoseconds per `execute` of a tiny op.
//! - [`chain`]: a chain of dependent tiny jobs: virtual time, idle gaps, CPU waits.
//! - [`pipeline`]: a stream of frames one after another and pipelined: NPU busy fraction.
//! - [`faults`]: invokes under injected faults: reported, recovered, nothing wrong or leaked.
//!
//! Every benchmark but `faults` (one JSON object) prints Markdown tables on stdout. Figures on the simulator's virtual
//! clock are deterministic; host times (µs, ns) are wall-clock and vary.

pub mod chain;
pub mod dispatch;
pub mod faults;
pub mod litert;
pub mod memory;
pub mod models;
pub mod pipeline;
pub mod schedule;
pub mod tune;
