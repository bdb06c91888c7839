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
/// half-updated. A blocking call (`read`, `sync`) keeps interrupts masked while it waits: the
/// HAL's `poll` must then read completion from the hardware itself, as the Ethos-U status
/// register allows. Firmware that needs interrupts served during long waits uses `try_read`.
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
