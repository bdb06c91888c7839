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
