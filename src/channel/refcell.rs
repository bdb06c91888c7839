//! The single-threaded channel.

use super::{ComputeChannel, Deferred, WakerSet};
use crate::error::Error;
use crate::handle::HandleId;
use crate::server::{ComputeServer, DEFAULT_HANDLES};
use core::cell::RefCell;
use core::task::Waker;

/// Single-threaded channel: the server in a `RefCell`. `N` (default 64) deferred-release
/// counters, at least the server's handle capacity (checked at compile time).
///
/// ```
/// use npu_compute::channel::{ComputeChannel, RefCellChannel};
/// fn demo<S: npu_compute::server::ComputeServer>(server: S) {
/// let channel: RefCellChannel<S> = RefCellChannel::new(server);
/// let stats = channel.with(|s| s.memory_stats()).unwrap();
/// }
/// ```
pub struct RefCellChannel<S, const N: usize = DEFAULT_HANDLES> {
    server: RefCell<S>,
    deferred: Deferred<N>,
    wakers: RefCell<WakerSet>,
}

impl<S: ComputeServer, const N: usize> RefCellChannel<S, N> {
    const FITS: () = assert!(
        N >= S::HANDLE_CAPACITY,
        "channel N must be >= the server's HANDLES"
    );

    /// A channel to `server`.
    pub fn new(server: S) -> Self {
        let () = Self::FITS;
        RefCellChannel {
            server: RefCell::new(server),
            deferred: Deferred::new(),
            wakers: RefCell::new(WakerSet::new()),
        }
    }

    /// Take the server back.
    pub fn into_inner(self) -> S {
        let mut server = self.server.into_inner();
        self.deferred.apply(&mut server);
        server
    }
}

impl<S: ComputeServer, const N: usize> ComputeChannel for RefCellChannel<S, N> {
    type Server = S;

    fn with<R>(&self, f: impl FnOnce(&mut S) -> R) -> Result<R, Error> {
        let mut server = self
            .server
            .try_borrow_mut()
            .map_err(|_| Error::ChannelBusy)?;
        self.deferred.apply(&mut *server);
        let r = f(&mut server);
        self.deferred.apply(&mut *server);
        Ok(r)
    }

    fn retain(&self, id: HandleId) {
        if self.with(|s| s.retain(id, 1)).is_err() {
            self.deferred.push(id, 1);
        }
    }

    fn release(&self, id: HandleId) {
        if self.with(|s| s.release(id, 1)).is_err() {
            self.deferred.push(id, -1);
        }
    }

    fn register_waker(&self, waker: &Waker) {
        // The set is borrowed only here and in `wake_all`, never across a call out, so the
        // borrow cannot fail; if it ever did, waking at once is the safe answer.
        let evicted = match self.wakers.try_borrow_mut() {
            Ok(mut set) => set.register(waker),
            Err(_) => Some(waker.clone()),
        };
        if let Some(w) = evicted {
            w.wake();
        }
    }

    fn wake_all(&self) {
        let taken = self.wakers.try_borrow_mut().map(|mut set| set.take());
        if let Ok(set) = taken {
            set.wake();
        }
    }
}
