//! Channels: how clients reach the one server.
//!
//! # Design
//!
//! Burn-Compute's channels move requests to a server that may live elsewhere (a thread, a
//! mutex). Here the server lives in a cell and a channel lends it out for one call at a time:
//!
//! - [`RefCellChannel`]: single-threaded, the default. Zero locking; not `Sync`, so it cannot be
//!   reached from an interrupt handler.
//! - [`CriticalSectionChannel`]: the server in a `critical_section::Mutex<RefCell<..>>`, so it
//!   can sit in a `static` shared with interrupt handlers (the NPU completion ISR calls
//!   [`ComputeChannel::on_interrupt`]).
//!
//! # Waiting for the NPU
//!
//! A call that may have to wait for the NPU (`read`, `sync`, reading a pinned block) has two
//! forms in the server: a blocking one, which waits inside the call, and a non-blocking one
//! (`try_read`, `try_sync`, `try_host_ref`), which answers `WouldBlock` instead. The channel
//! says which one the client runs ([`ComputeChannel::WAITS_BETWEEN_STEPS`]):
//!
//! - [`RefCellChannel`] lends the server once for the blocking form: nothing else can reach
//!   the server meanwhile, and it is the cheapest way.
//! - [`CriticalSectionChannel`] never waits while it holds the server: every call through it
//!   runs with interrupts masked, so waiting inside would leave a board's timers, UART and
//!   radio unserved for a whole inference. It runs the non-blocking form through
//!   [`ComputeChannel::wait_on`], one attempt per critical section, and sleeps between
//!   attempts; see its docs for why no completion can be missed.
//!
//! A tensor handle is dropped wherever its owner goes out of scope, possibly while the server is
//! lent out (inside a [`ComputeChannel::with`] closure, or in an ISR that interrupted one).
//! Dropping must not panic, so the channel keeps a per-handle-slot counter of deferred retains and
//! releases and applies them the next time it gets the server. A counter per slot,
//! rather than a queue of events, cannot overflow: it needs `N` slots for a server with `N`
//! handles, which the channel checks at compile time.
//!
//! A channel also keeps the [`Waker`]s of the futures waiting on the NPU (the client's `async`
//! forms): [`ComputeChannel::register_waker`] leaves one, and
//! [`ComputeChannel::on_interrupt`] wakes them all once it has retired the finished jobs. They
//! sit behind the channel's own lock, in a fixed [`WakerSet`] (see [`waker`]).

mod critical_section_channel;
mod deferred;
mod refcell;
pub mod waker;

pub use critical_section_channel::CriticalSectionChannel;
use deferred::Deferred;
pub use refcell::RefCellChannel;
pub use waker::{WakerSet, WAKERS};

use crate::error::Error;
use crate::handle::HandleId;
use crate::server::ComputeServer;
use core::task::Waker;

/// Lends the server to one caller at a time.
pub trait ComputeChannel {
    /// The server behind the channel.
    type Server: ComputeServer;

    /// Run `f` with exclusive access to the server. Fails with [`Error::ChannelBusy`] when the
    /// server is already lent out (a re-entrant call).
    fn with<R>(&self, f: impl FnOnce(&mut Self::Server) -> R) -> Result<R, Error>;

    /// Whether a call that waits for the NPU (`read`, `sync`, reading a pinned block) must
    /// wait between non-blocking steps ([`wait_on`](Self::wait_on)), `true`, rather than
    /// inside the server's blocking form in one [`with`](Self::with), `false` (the default:
    /// the cheapest way when nothing else needs the server meanwhile). See the
    /// [module docs](self).
    const WAITS_BETWEEN_STEPS: bool = false;

    /// Runs `step`, the non-blocking form of a call that may wait for the NPU (it answers
    /// `WouldBlock` until it can finish, and may be called again), until it finishes, waiting
    /// for the NPU ([`ComputeServer::wait_for_event`]) after each attempt that would block.
    /// The default lends the server once for every attempt and wait. Fails with
    /// [`Error::ChannelBusy`] when the server is already lent out.
    fn wait_on<R>(
        &self,
        mut step: impl FnMut(&mut Self::Server) -> nb::Result<R, Error>,
    ) -> Result<R, Error> {
        self.with(|s| loop {
            match step(s) {
                Ok(r) => return Ok(r),
                Err(nb::Error::Other(e)) => return Err(e),
                Err(nb::Error::WouldBlock) => s.wait_for_event()?,
            }
        })?
    }

    /// Add a reference to a tensor (a handle was cloned). Never fails: deferred if busy.
    fn retain(&self, id: HandleId);

    /// Drop a reference to a tensor (a handle was dropped). Never fails: deferred if busy.
    fn release(&self, id: HandleId);

    /// The NPU completion interrupt: retire finished jobs, then wake the futures waiting on
    /// the NPU ([`wake_all`](Self::wake_all)). Retires nothing if the server is busy (the busy
    /// caller will poll the NPU itself), but wakes all the same: the woken futures poll the
    /// NPU themselves.
    fn on_interrupt(&self) {
        let _ = self.with(|s| s.on_interrupt());
        self.wake_all();
    }

    /// Leaves `waker` to be woken at the next [`on_interrupt`](Self::on_interrupt): a future
    /// whose jobs are still running calls it before returning `Pending`. The default, for a
    /// channel with no room for wakers, wakes it at once, so its future is polled again
    /// straight away (busy polling: correct, but the CPU never sleeps).
    fn register_waker(&self, waker: &Waker) {
        waker.wake_by_ref();
    }

    /// Wakes every registered waker, emptying the set (the default holds none). Called by
    /// [`on_interrupt`](Self::on_interrupt); a driver whose interrupt handler does not go
    /// through it calls this after retiring jobs.
    fn wake_all(&self) {}
}
