//! The channel shared with interrupt handlers.

use super::{ComputeChannel, Deferred, WakerSet};
use crate::error::Error;
use crate::handle::HandleId;
use crate::server::{ComputeServer, DEFAULT_HANDLES};
use core::cell::RefCell;
use core::task::Waker;
use critical_section::Mutex;

/// The server in a `critical_section::Mutex<RefCell<..>>`: `Sync` when the server is `Send`, so
/// it can live in a `static` that the NPU's interrupt handler reaches too.
///
/// Every call runs inside a critical section, so an interrupt handler never sees the server
/// half-updated. A call that waits for the NPU (`read`, `sync`, a graph's `invoke`) waits
/// between critical sections, with interrupts enabled.
///
/// # Waiting for the NPU
///
/// A critical section masks interrupts (on a single-core microcontroller), so it must stay
/// short: while it lasts, a board's timers, UART and radio go unserved. So a call that waits
/// for the NPU never waits inside one ([`ComputeChannel::WAITS_BETWEEN_STEPS`] is `true`):
/// [`ComputeChannel::wait_on`] runs the call's non-blocking form, one attempt per critical
/// section; when it would block, the CPU sleeps ([`ComputeServer::wait_for_event`], a `WFI`
/// on hardware) at the end of that same critical section, and the next attempt comes in a new
/// one. Interrupts are served between the two: each critical section lasts one attempt (a
/// poll of a fence, a copy out of staging) and the sleep, however long the NPU takes.
///
/// Why the sleep belongs inside the critical section that polled: a completion interrupt
/// taken after the poll but before the `WFI` would be served, and the `WFI` would then sleep
/// for an event that has already happened, maybe forever. With interrupts masked from the
/// poll to the `WFI`, that interrupt stays pending instead, and a pending interrupt ends a
/// `WFI` even while masked (ARMv7-M: an exception that would preempt if `PRIMASK` were clear
/// wakes the core). The critical section then ends, the handler runs, and the next attempt
/// sees its effect. An interrupt taken before the critical section began was served already,
/// so the poll sees it. Sleeping with interrupts masked delays none of them: any interrupt
/// wakes the core, which leaves the critical section at once. (In the simulator the wait
/// moves the virtual clock to the next job's end and returns.)
///
/// Calls that find a fixed resource exhausted (a full job queue, full staging memory, an
/// arena whose free memory running jobs still read) still wait inside their critical section
/// until jobs in flight free it: size the capacities so that a model's invoke never does.
pub struct CriticalSectionChannel<S, const N: usize = DEFAULT_HANDLES> {
    server: Mutex<RefCell<S>>,
    deferred: Mutex<Deferred<N>>,
    wakers: Mutex<RefCell<WakerSet>>,
}

impl<S: ComputeServer, const N: usize> CriticalSectionChannel<S, N> {
    const FITS: () = assert!(
        N >= S::HANDLE_CAPACITY,
        "channel N must be >= the server's HANDLES"
    );

    /// A channel to `server`; `const` so it can initialise a `static`.
    pub const fn new(server: S) -> Self {
        let () = Self::FITS;
        CriticalSectionChannel {
            server: Mutex::new(RefCell::new(server)),
            deferred: Mutex::new(Deferred::new()),
            wakers: Mutex::new(RefCell::new(WakerSet::new())),
        }
    }
}

impl<S: ComputeServer, const N: usize> ComputeChannel for CriticalSectionChannel<S, N> {
    type Server = S;

    fn with<R>(&self, f: impl FnOnce(&mut S) -> R) -> Result<R, Error> {
        critical_section::with(|cs| {
            let mut server = self
                .server
                .borrow(cs)
                .try_borrow_mut()
                .map_err(|_| Error::ChannelBusy)?;
            let deferred = self.deferred.borrow(cs);
            deferred.apply(&mut *server);
            let r = f(&mut server);
            deferred.apply(&mut *server);
            Ok(r)
        })
    }

    const WAITS_BETWEEN_STEPS: bool = true;

    /// One attempt of `step` per critical section, and a sleep at the end of each that would
    /// block: see [`CriticalSectionChannel`] for why no completion is missed.
    fn wait_on<R>(&self, mut step: impl FnMut(&mut S) -> nb::Result<R, Error>) -> Result<R, Error> {
        loop {
            let attempt = self.with(|s| match step(s) {
                Err(nb::Error::WouldBlock) => match s.wait_for_event() {
                    Ok(()) => Err(nb::Error::WouldBlock),
                    Err(e) => Err(nb::Error::Other(e)),
                },
                attempt => attempt,
            })?;
            match attempt {
                Ok(r) => return Ok(r),
                Err(nb::Error::Other(e)) => return Err(e),
                // Interrupts are served here, between two critical sections.
                Err(nb::Error::WouldBlock) => {}
            }
        }
    }

    fn retain(&self, id: HandleId) {
        if self.with(|s| s.retain(id, 1)).is_err() {
            critical_section::with(|cs| self.deferred.borrow(cs).push(id, 1));
        }
    }

    fn release(&self, id: HandleId) {
        if self.with(|s| s.release(id, 1)).is_err() {
            critical_section::with(|cs| self.deferred.borrow(cs).push(id, -1));
        }
    }

    fn register_waker(&self, waker: &Waker) {
        // The set's critical sections are short and never call out, so its borrow cannot
        // fail; if it ever did, waking at once is the safe answer.
        let evicted = critical_section::with(|cs| match self.wakers.borrow(cs).try_borrow_mut() {
            Ok(mut set) => set.register(waker),
            Err(_) => Some(waker.clone()),
        });
        if let Some(w) = evicted {
            w.wake();
        }
    }

    fn wake_all(&self) {
        // Taken inside the critical section, woken outside it: waking runs the executor's
        // code, which need not run with interrupts masked.
        let taken = critical_section::with(|cs| {
            self.wakers
                .borrow(cs)
                .try_borrow_mut()
                .map(|mut s| s.take())
        });
        if let Ok(set) = taken {
            set.wake();
        }
    }
}
