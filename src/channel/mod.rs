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
//! A call that may have to wait for the NPU (`read`, `sync`, reading a pinned block) goes
//! through [`ComputeChannel::wait_on`] as one closure that runs in either of two forms
//! ([`Wait`]): the server's blocking form, which waits inside the call, or its non-blocking
//! form, which answers `WouldBlock` instead. A channel chooses:
//!
//! - [`RefCellChannel`] lends the server once and lets it wait inside (the default of
//!   `wait_on`): nothing else can reach the server anyway, and it is the cheapest way.
//! - [`CriticalSectionChannel`] never waits while it holds the server: every call through it
//!   runs with interrupts masked, so waiting inside would leave a board's timers, UART and
//!   radio unserved for a whole inference. It runs one non-blocking step per critical
//!   section, and sleeps between steps; see its docs for why no completion can be missed.
//!
//! A tensor handle is dropped wherever its owner goes out of scope, possibly while the server is
//! lent out (inside a [`ComputeChannel::with`] closure, or in an ISR that interrupted one).
//! Dropping must not panic, so the channel keeps a per-handle-slot counter of deferred retains and
//! releases and applies them the next time it gets the server. A counter per slot,
//! rather than a queue of events, cannot overflow: it needs `N` slots for a server with `N`
//! handles, which the channel checks at compile time.

mod critical_section_channel;
mod deferred;
mod refcell;

pub use critical_section_channel::CriticalSectionChannel;
use deferred::Deferred;
pub use refcell::RefCellChannel;

use crate::error::Error;
use crate::handle::HandleId;
use crate::server::ComputeServer;

/// Lends the server to one caller at a time.
pub trait ComputeChannel {
    /// The server behind the channel.
    type Server: ComputeServer;

    /// Run `f` with exclusive access to the server. Fails with [`Error::ChannelBusy`] when the
    /// server is already lent out (a re-entrant call).
    fn with<R>(&self, f: impl FnOnce(&mut Self::Server) -> R) -> Result<R, Error>;

    /// Runs `call`, a request that may have to wait for the NPU, to its end; see the
    /// [module docs](self). `call` gets the server and the form to run in: with
    /// [`Wait::Inside`] it is the server's blocking form (it waits inside and never answers
    /// `WouldBlock`), with [`Wait::Outside`] its non-blocking form (it answers `WouldBlock`
    /// until it can finish, and may be called again).
    ///
    /// The default lends the server once and runs the blocking form; a `WouldBlock` all the
    /// same is waited out there ([`ComputeServer::wait_for_event`]) and the call retried.
    /// Fails with [`Error::ChannelBusy`] when the server is already lent out.
    fn wait_on<R>(
        &self,
        mut call: impl FnMut(&mut Self::Server, Wait) -> nb::Result<R, Error>,
    ) -> Result<R, Error> {
        self.with(|s| loop {
            match call(s, Wait::Inside) {
                Ok(r) => return Ok(r),
                Err(nb::Error::Other(e)) => return Err(e),
                Err(nb::Error::WouldBlock) => s.wait_for_event(),
            }
        })?
    }

    /// Add a reference to a tensor (a handle was cloned). Never fails: deferred if busy.
    fn retain(&self, id: HandleId);

    /// Drop a reference to a tensor (a handle was dropped). Never fails: deferred if busy.
    fn release(&self, id: HandleId);

    /// The NPU completion interrupt: retire finished jobs. Does nothing if the server is busy
    /// (the busy caller will poll the NPU itself).
    fn on_interrupt(&self) {
        let _ = self.with(|s| s.on_interrupt());
    }
}

/// The form a call given to [`ComputeChannel::wait_on`] runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Wait {
    /// Wait inside the call, holding the server, until it finishes: the server's blocking
    /// form (`read`, `sync`, `host_ref`).
    Inside,
    /// Never wait: answer `WouldBlock` while the NPU has not done what the call needs (the
    /// server's `try_` form); the channel waits between attempts.
    Outside,
}
