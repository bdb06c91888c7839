//! Writing a board driver: implementing [`Npu`] for an NPU, and checking it with the
//! conformance suite.
//!
//! This module holds documentation only.
//!
//! # Why a driver is small, and why its rules are strict
//!
//! Everything above the HAL (memory planning, staging, dependencies, CPU fallback, tuning) is
//! the compute server's, the same on every board. A driver only turns [`Job`]s into work for
//! its hardware and reports when they are done. The server then relies on a few rules it
//! cannot check, because it never sees the hardware: jobs on one queue complete in order, a job
//! never starts before its dependencies, fences increase, invalid regions are refused. When one
//! of them breaks, nothing fails at once; the server reads stale or overwritten bytes and a
//! model gives a wrong answer now and then. So the rules are written down on [`Npu`], and the
//! [`conformance`](super::conformance) suite (cargo feature `conformance`) checks each of them
//! against your driver, on the host or on the board.
//!
//! The steps below follow the trait. `examples/firmware/src/null_npu.rs` is a complete
//! driver that does the bookkeeping of a real one and moves no bytes; `npu-sim`'s `SimNpu` is
//! one that moves bytes and models the timing; [`CpuOnly`](super::CpuOnly), the driver of a
//! part without an NPU, moves bytes with the CPU and runs no operator.
//!
//! # 1. Declare what the NPU can do: [`Capabilities`]
//!
//! [`Npu::capabilities`] is read once by the server and must not change afterwards.
//!
//! - `device_memory_bytes`: the arena the firmware gave the driver (the NPU-reachable SRAM
//!   section of `memory.x`, handed over once as `&'static mut [u8]`). [`Space::Device`]
//!   offsets are relative to its start. The CPU never reads or writes it: the server moves
//!   data in and out with transfer jobs, so the NPU owns the arena and no cache aliases it.
//! - `host_memory_bytes`: the DMA-capable staging memory [`Npu::host_memory`] lends to the CPU
//!   ([`Space::Host`]). It must be exactly that long and start on `alignment`: region offsets
//!   are relative to its address, so an unaligned base makes every aligned offset unaligned
//!   on the bus.
//! - `slow_memory_bytes`: a second, slower memory the NPU's bus reaches (PSRAM or HyperRAM
//!   behind an AXI port), [`Space::Slow`], or 0 when the board has none. Like the arena it
//!   is the NPU's: offsets are relative to the start of the section the firmware gave the
//!   driver, and the CPU does not touch it. Declare its rate with [`Npu::bandwidth`] so
//!   that a planner can weigh a byte there against one in the arena.
//! - `alignment`: what the DMA engine and the NPU's base pointers need of a region's offset,
//!   a power of two (16 on Ethos-U). On a core with a data cache, consider the cache line
//!   instead (32 bytes on Cortex-M55 and M7; see step 8): then a cache invalidation over one
//!   staging region never discards a neighbour's bytes.
//! - `execution_units`: independent compute queues ([`Queue::Unit`]`(0..n)`), 1 to
//!   [`MAX_EXECUTION_UNITS`]. An Ethos-U55 has one; the DMA queue ([`Queue::Dma`]) comes on
//!   top.
//! - `max_in_flight`: the size of the driver's job table. One job more is refused with
//!   [`HalError::QueueFull`] carrying this capacity; the server then waits and retries.
//! - `ops`: the (operator, dtype) pairs the NPU runs ([`OpSet`]); every other operator runs on
//!   the CPU fallback kernels, so declare only what the command stream compiler handles.
//! - `reads_flash`, `flash_alignment`: whether the NPU's bus reaches flash, so that weights are
//!   read in place (step 6).
//!
//! # 2. Accept work: [`Npu::submit`], fences and [`Npu::poll`]
//!
//! `submit` validates the job completely, queues it and returns its [`Fence`] at once; it
//! never waits for the hardware. Keep in-flight jobs in a fixed ring (no heap), oldest first.
//!
//! - **Validate first, refuse with the contract's error, change nothing when refusing.** The
//!   queue exists ([`HalError::NoSuchUnit`]); a compute job runs on a unit and its operator
//!   is declared ([`HalError::Unsupported`]); every region is in its space
//!   ([`HalError::OutOfBounds`]: compute `offset + len` in `u64`, a `u32` sum wraps) and
//!   aligned ([`HalError::Misaligned`]); a transfer runs between any two of host, device
//!   and slow memory (not host→host) or from flash to one of them, with equal lengths, and a
//!   compute job reads device memory, slow memory or mapped flash and writes device or slow
//!   memory ([`HalError::WrongSpace`]); flash segments are mapped
//!   ([`HalError::FlashNotMapped`]); outputs do not overlap inputs ([`HalError::Overlap`],
//!   except an op that [runs in place](Op::runs_in_place) on exactly its input's region);
//!   lengths match [`Op::operands`] ([`HalError::BadLength`]). A refused job takes no fence
//!   and leaves the driver as it was.
//! - **Fences increase and are never reused.** A 64-bit counter does it.
//! - **Jobs on one queue complete in submission order.** The server relies on it to carry one
//!   dependency per queue instead of one per job.
//! - **`poll(fence)`** answers `Ok` once the job and everything it depends on has taken effect
//!   in memory (for a device→host transfer: the CPU can read the bytes), `WouldBlock` before,
//!   the job's error if it failed ([`HalError::JobFailed`] with a driver-specific code), and
//!   [`HalError::UnknownFence`] for a fence this driver never issued. A completed fence stays
//!   completed. Comparing the fence with the newest retired one is enough when each queue
//!   retires in order; remember the last few failures (the simulator keeps 16).
//!
//! # 3. Honour dependencies: [`Job::deps`]
//!
//! A job starts only after every fence in `deps` has completed, and after the earlier jobs of
//! its queue. One NPU core executes its command streams in order, so dependencies on the same
//! queue are free. A dependency on another queue (a unit job waiting for a DMA upload, unit 1
//! waiting for unit 0) means keeping the job queued until that fence's completion interrupt,
//! then starting it from the interrupt handler. A job whose dependency failed does not run and
//! fails too, so that polling the last fence of a chain reports a failure anywhere in it.
//!
//! # 4. Complete work: interrupts, [`Npu::on_interrupt`] and [`Npu::wait_for_event`]
//!
//! - `on_interrupt` is the completion interrupt's body: read the status, acknowledge it, do
//!   the cache maintenance of the finished job (step 8), mark its fence done, start the next
//!   queued job whose dependencies are now met. It must not block, and it must be harmless
//!   when nothing is pending (a shared or spurious interrupt).
//! - `wait_for_event` puts the CPU to sleep until a job may have completed: `WFI`. It must
//!   return at once when nothing is in flight, or the CPU sleeps forever. Check "anything in
//!   flight?" and execute `WFI` with interrupts masked (`cortex_m::interrupt::free`): a
//!   pending interrupt still ends the `WFI`, and the completion cannot slip in between the
//!   check and the sleep.
//! - A board that takes the completion interrupt puts the server in a
//!   [`CriticalSectionChannel`](crate::channel::CriticalSectionChannel) in a `static`, and
//!   the ISR calls [`ComputeChannel::on_interrupt`](crate::channel::ComputeChannel::on_interrupt).
//!   Every call through that channel runs in a critical section; a blocking call (`read`,
//!   `sync`) polls in one critical section at a time and calls `wait_for_event` at the end of
//!   one that found its fence still running, with interrupts masked: the `WFI` then ends on
//!   the pending completion interrupt, which runs as soon as the critical section ends (see
//!   the channel's docs). `wait_for_event` must therefore sleep as `WFI` does, woken by an
//!   interrupt even while interrupts are masked, and never unmask them itself.
//! - [`Npu::now`] is a free-running cycle counter (DWT `CYCCNT`); with such a counter
//!   [`Npu::clock_counts_cpu`] is `true` and [`Npu::host_compute`] has nothing to do.
//!
//! # 5. Memory the CPU touches: host memory and alignment
//!
//! [`Npu::host_memory`] returns the staging memory as a slice; the server writes inputs into
//! it before a host→device transfer and reads outputs after a device→host transfer's fence
//! completes. Give it a static in DMA-reachable RAM, aligned (`npu_sim::AlignedMemory`
//! aligns to 16; align to the cache line on a cached core), and declare its exact length.
//!
//! # 6. Weights in place: [`Npu::map_flash`] and [`Npu::unmap_flash`]
//!
//! On an NPU whose bus reaches flash (an Ethos-U's AXI port to the flash controller),
//! `map_flash` makes a model's bytes readable by jobs as [`Space::Flash`]`(segment)`, with no
//! copy and no arena bytes: store the slice, return a free segment index below
//! [`MAX_FLASH_SEGMENTS`] ([`HalError::FlashSegmentsFull`] when none is free). A job's
//! [`Space::Flash`] region becomes a base pointer at the slice's address plus the offset.
//! `unmap_flash` forgets the segment; afterwards a region in it is refused with
//! [`HalError::FlashNotMapped`]. An NPU that cannot read flash answers
//! [`HalError::FlashUnreadable`] from `map_flash`, and the server copies constants into the
//! arena instead. Nothing ever writes flash: a transfer into it is [`HalError::WrongSpace`].
//!
//! # 7. Kernel variants: [`Npu::supports_variant`]
//!
//! Every compute job carries a [`Variant`]; [`Variant::Auto`] (the default) is the driver's
//! own choice and the only one the default `supports_variant` accepts. A driver that can force
//! an output block shape or lower a convolution to im2col says so per op in
//! `supports_variant`, accepts those jobs in `submit` (an im2col job brings a scratch region
//! of [`Variant::scratch_bytes`], validated like any other), and returns a
//! [`Npu::tuning_fingerprint`] that changes whenever its timings could, so that a tuning table
//! measured on another configuration is not trusted. Every variant must compute the same bytes.
//!
//! # 8. Cache maintenance on Ethos-U (Cortex-M55/M85 and other cached cores)
//!
//! The NPU does not snoop the CPU's data cache. Only host memory is shared between the two
//! (the CPU never touches the arena), so the rules are about staging regions:
//!
//! - in `submit` of a host→device transfer: **clean** (write back) the D-cache over the host
//!   source region, so the DMA reads what the CPU wrote;
//! - in `on_interrupt` (or `poll`) when a device→host transfer completes, before its fence
//!   reads as done: **invalidate** the D-cache over the host destination region, so the CPU
//!   reads what the DMA wrote and not a stale line;
//! - an invalidation works on whole lines: a region that shares a line with other data loses
//!   the CPU's writes to that data. Declare an `alignment` of at least the line size, or
//!   clean-and-invalidate the partial lines at both ends.
//!
//! The table in the [`hal`](super) module documentation maps each HAL call to its Ethos-U
//! driver counterpart (base pointers, `CMD`, `STATUS`, IRQ chaining).
//!
//! # 9. Run the conformance suite
//!
//! Build with the `conformance` feature (`npu-compute = { ..., features = ["conformance"] }`,
//! in `[dev-dependencies]` for host tests) and call
//! [`conformance::run`](super::conformance::run) on an idle driver. It submits a few dozen
//! small jobs, checks every rule above that can be observed from outside, waits for all of its
//! jobs, and returns a [`Report`](super::conformance::Report): one outcome per check, and for
//! a failure a sentence saying what the suite did, what it expected and what the driver did.
//! It needs little memory ([`requirements`](super::conformance::requirements): 608 bytes of
//! device memory and 512 of host memory at alignment 16) and one tiny operator the driver
//! declares (RESHAPE int8 or RELU f32) for the jobs on execution units.
//!
//! Say what your driver does in [`Options`](super::conformance::Options): a driver that only
//! does the bookkeeping sets `moves_bytes: false`, and the data checks are reported as
//! skipped, never as passed. Skipped checks say why; treat an unexpected skip as a gap in your
//! test, not a pass.
//!
//! From a host test, with the simulator standing in for your driver:
//!
//! ```
//! #[cfg(feature = "conformance")]
//! {
//! use npu_compute::hal::conformance::{self, Check, Options, Outcome};
//! use npu_sim::{AlignedMemory, SimConfig, SimNpu};
//!
//! let mut device = AlignedMemory::<4096>::new();
//! let mut host = AlignedMemory::<1024>::new();
//! let mut driver: SimNpu =
//!     SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
//!
//! let report = conformance::run(&mut driver, &Options::new());
//! assert!(report.is_ok(), "{report}");
//! // The default simulator has one execution unit, so the unit-to-unit check cannot run.
//! assert!(report.outcome(Check::DependencyUnitToUnit).is_skipped());
//! assert_eq!(report.outcome(Check::QueueFull), Outcome::Passed);
//! // The driver is idle again: hand it to the server.
//! assert_eq!(driver.in_flight(), 0);
//! }
//! ```
//!
//! From firmware, after boot and before the server takes the driver (see
//! `examples/firmware/src/conformance.rs`, which runs it against the null NPU under QEMU and
//! logs each outcome with `defmt`):
//!
//! ```
//! #[cfg(feature = "conformance")]
//! {
//! use npu_compute::hal::conformance::{self, Failure, Options};
//! use npu_compute::hal::Npu;
//!
//! /// Checks `driver` against the HAL contract: the first rule it breaks, if any.
//! fn check_driver<N: Npu>(driver: &mut N) -> Result<(), Failure> {
//!     let report = conformance::run(driver, &Options::new());
//!     match report.first_failure() {
//!         Some(failure) => Err(*failure),
//!         None => Ok(()),
//!     }
//! }
//! }
//! ```
//!
//! Not everything can be checked from outside: a job that starts early but happens to finish
//! after its dependency, or cache maintenance that is wrong only under cache pressure, passes.
//! The suite keeps queues busy ahead of dependencies to make early starts show, but a passing
//! report is evidence, not proof.

#[allow(unused_imports)] // for the documentation's links
use super::{
    Capabilities, Fence, HalError, Job, Npu, Op, OpSet, Queue, Space, Variant, MAX_EXECUTION_UNITS,
    MAX_FLASH_SEGMENTS,
};
