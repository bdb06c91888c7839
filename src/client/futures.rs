//! `async` forms of the client's waits, for the ecosystem's executors (embassy, RTIC 2, ...).
//!
//! # Design
//!
//! [`read`](ComputeClient::read) and [`sync`](ComputeClient::sync) wait by sleeping in the
//! HAL (`WFI`) until the jobs they need complete: nothing else runs on the CPU meanwhile. Their
//! `async` forms, [`read_async`](ComputeClient::read_async) and
//! [`sync_async`](ComputeClient::sync_async) (and a graph's
//! [`invoke_async`](crate::graph::Graph::invoke_async)), return futures that an executor
//! polls; other tasks run while the NPU works.
//!
//! A future polls the non-blocking form ([`try_read`](ComputeClient::try_read),
//! [`try_sync`](ComputeClient::try_sync)). While that answers `WouldBlock`, the future leaves
//! its task's waker with the channel ([`ComputeChannel::register_waker`]), tries once more (a
//! job that completed between the first try and the registration woke nobody, and would
//! otherwise be missed until the next interrupt), and returns `Pending`. The NPU's completion
//! interrupt handler calls [`ComputeChannel::on_interrupt`], which retires the finished jobs and
//! wakes the registered tasks (see [`channel::waker`](crate::channel::waker)). No heap: a
//! future is the state of an `async fn`, held wherever the executor keeps its task, and the
//! wakers are held in a fixed set in the channel.
//!
//! Dropping a future before it completes is safe: the jobs it waited for keep running, and the
//! tensors stay as they were. A read that was dropped forgets its download
//! ([`ComputeServer::cancel_read`]; its staging block is freed once the transfer ends), so
//! that a later read never returns those bytes after newer ones were written (a job plan's run
//! does not look for downloads of the tensors it writes).
//!
//! # Without an interrupt: the simulator
//!
//! A real NPU raises its interrupt on its own. The simulator does not: its clock moves only
//! when asked. A program (or a test) over `npu-sim` plays the part of the hardware: whenever
//! every task is pending, it runs the simulated NPU to its next event
//! ([`Npu::wait_for_event`](crate::hal::Npu::wait_for_event)) and calls the interrupt
//! handler. With a minimal executor of one future:
//!
//! ```
//! use core::future::Future;
//! use core::pin::pin;
//! use core::task::{Context, Poll, Waker};
//! use npu_compute::prelude::*;
//! use npu_compute::ops::AddF32;
//! use npu_sim::{AlignedMemory, SimConfig, SimNpu};
//!
//! let mut device = AlignedMemory::<4096>::new();
//! let mut host = AlignedMemory::<4096>::new();
//! let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
//! let channel: RefCellChannel<_> = RefCellChannel::new(NpuServer::<_>::new(npu, MemoryConfig::default()).unwrap());
//! let client = ComputeClient::new(&channel);
//! let a = client.create_f32(&[1.0, 2.0, 3.0, 4.0]).unwrap();
//! let sum = client.empty(16).unwrap();
//! client.execute(Op::AddF32(AddF32 { len: 4 }), &[&a, &a], &sum).unwrap();
//!
//! let mut out = [0u8; 16];
//! let mut cx = Context::from_waker(Waker::noop());
//! let result = {
//!     let mut read = pin!(client.read_async(&sum, &mut out));
//!     loop {
//!         if let Poll::Ready(result) = read.as_mut().poll(&mut cx) {
//!             break result;
//!         }
//!         // The task waits for the NPU: let the simulated NPU run to its next job's end,
//!         // and raise its interrupt.
//!         channel.with(|server| server.npu_mut().wait_for_event()).unwrap();
//!         channel.on_interrupt();
//!     }
//! };
//! result.unwrap();
//! assert_eq!(out[4..8], 4.0f32.to_le_bytes());
//! ```
//!
//! On a microcontroller with the simulator (`examples/firmware-embassy`), a timer interrupt
//! plays that part: it moves the simulated NPU's clock on and pends a spare interrupt line,
//! whose handler calls `on_interrupt`.

use super::{ComputeClient, Tensor};
use crate::channel::ComputeChannel;
use crate::error::Error;
use crate::handle::HandleId;
use crate::server::ComputeServer;
use core::task::{Context, Poll};

impl<'c, C: ComputeChannel> ComputeClient<'c, C> {
    /// [`read`](Self::read) as a future: copies the tensor's bytes into `out` once the jobs
    /// that produce them complete, woken by the NPU's interrupt (see the
    /// [module docs](self)). Errors: those of `read`.
    pub async fn read_async(&self, t: &Tensor<'c, C>, out: &mut [u8]) -> Result<(), Error> {
        let id = self.own(t)?;
        let mut unfinished = Unfinished {
            channel: self.channel,
            id,
            armed: true,
        };
        let result = core::future::poll_fn(|cx| self.poll_nb(cx, |s| s.try_read(id, out))).await;
        unfinished.armed = false;
        result
    }

    /// [`read_f32`](Self::read_f32) as a future (see [`read_async`](Self::read_async)).
    pub async fn read_f32_async(&self, t: &Tensor<'c, C>, out: &mut [f32]) -> Result<(), Error> {
        self.read_async(t, bytemuck::cast_slice_mut(out)).await
    }

    /// [`sync`](Self::sync) as a future: ready once no submitted job is running, woken by the
    /// NPU's interrupt (see the [module docs](self)). Jobs submitted while it is pending are
    /// waited for too.
    pub async fn sync_async(&self) -> Result<(), Error> {
        core::future::poll_fn(|cx| self.poll_nb(cx, |s| s.try_sync())).await
    }

    /// Like [`sync`](Self::sync) but never waits: `WouldBlock` while a job submitted so far
    /// is still running. See [`ComputeServer::try_sync`].
    pub fn try_sync(&self) -> nb::Result<(), Error> {
        self.channel.with(|s| s.try_sync())?
    }

    /// One poll of a future that waits for the NPU: `f` (a non-blocking call on the server),
    /// and while it would block, the task's waker left with the channel and `f` tried once
    /// more, so that a completion between the two tries is not missed. For a wait of one's
    /// own over a `try_` form of the server (see the [module docs](self)).
    pub fn poll_nb<R>(
        &self,
        cx: &mut Context<'_>,
        mut f: impl FnMut(&mut C::Server) -> nb::Result<R, Error>,
    ) -> Poll<Result<R, Error>> {
        match self.channel.with(&mut f)? {
            Ok(r) => return Poll::Ready(Ok(r)),
            Err(nb::Error::Other(e)) => return Poll::Ready(Err(e)),
            Err(nb::Error::WouldBlock) => {}
        }
        self.channel.register_waker(cx.waker());
        match self.channel.with(f)? {
            Ok(r) => Poll::Ready(Ok(r)),
            Err(nb::Error::Other(e)) => Poll::Ready(Err(e)),
            Err(nb::Error::WouldBlock) => Poll::Pending,
        }
    }
}

/// A read whose future may be dropped before it completes: dropped while armed, it tells the
/// server to forget the read's download ([`ComputeServer::cancel_read`]), so that no later
/// read of the tensor returns those bytes after newer ones were written.
struct Unfinished<'c, C: ComputeChannel> {
    channel: &'c C,
    id: HandleId,
    armed: bool,
}

impl<C: ComputeChannel> Drop for Unfinished<'_, C> {
    fn drop(&mut self) {
        if self.armed {
            // Busy only when dropped inside a channel call; the download then stays, to be
            // reused by the next read of the tensor, or dropped when its bytes change through
            // `write`, `copy` or `execute` or the tensor goes.
            let _ = self.channel.with(|s| s.cancel_read(self.id));
        }
    }
}
