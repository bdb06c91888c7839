//! Tensor handles without `Arc`: a fixed table of reference-counted, generation-checked slots.
//!
//! # Design
//!
//! Burn-Compute shares tensors through `Arc`s. Without a heap, the server instead owns a table of
//! `N` slots (the `HANDLES` const generic); a [`HandleId`] names a slot, the slot's generation at
//! the time the handle was made, and the server instance that made it. Each slot counts the
//! handles that share it. When the count drops to zero the slot's memory is released and its
//! generation advances, so an old id for that slot is recognised as stale, and an id from another
//! server is recognised as foreign: both are errors, never undefined behaviour.
//!
//! The RAII side lives in the client's [`Tensor`](crate::client::Tensor): cloning it retains the
//! slot, dropping it releases the slot.

use crate::error::{Capacity, Error};

/// Names a tensor slot of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HandleId {
    index: u16,
    server: u16,
    generation: u32,
}

impl HandleId {
    /// The slot index (below the table's capacity).
    pub const fn index(&self) -> u16 {
        self.index
    }

    /// The slot generation this id was made at.
    pub const fn generation(&self) -> u32 {
        self.generation
    }

    /// Make an id by hand (for tests of stale and foreign handles, and for tools that store ids).
    pub const fn from_parts(index: u16, server: u16, generation: u32) -> Self {
        HandleId {
            index,
            server,
            generation,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot<T> {
    generation: u32,
    refs: u32,
    value: Option<T>,
}

impl<T> Slot<T> {
    /// Whether `id`'s generation is this slot's and it holds a value.
    fn holds(&self, id: HandleId) -> bool {
        self.generation == id.generation && self.value.is_some()
    }
}

/// A fixed table of `N` reference-counted slots holding `T`.
#[derive(Debug)]
pub(crate) struct HandleTable<T, const N: usize> {
    slots: [Slot<T>; N],
    server: u16,
    live: u16,
    /// Most slots ever in use at once: what `N` must be for the run so far.
    peak: u16,
}

impl<T: Copy, const N: usize> HandleTable<T, N> {
    /// An empty table whose ids carry the server tag `server`.
    pub fn new(server: u16) -> Self {
        HandleTable {
            slots: [Slot {
                generation: 0,
                refs: 0,
                value: None,
            }; N],
            server,
            live: 0,
            peak: 0,
        }
    }

    /// Slots in use.
    pub fn live(&self) -> usize {
        self.live as usize
    }

    /// Most slots ever in use at once.
    pub fn peak(&self) -> usize {
        self.peak as usize
    }

    /// Put `value` in a free slot with one reference.
    pub fn insert(&mut self, value: T) -> Result<HandleId, Error> {
        let limit = N.min(u16::MAX as usize);
        let index = self.slots[..limit]
            .iter()
            .position(|s| s.value.is_none())
            .ok_or(Error::CapacityExceeded {
                capacity: Capacity::Handles,
                limit: limit as u32,
            })?;
        let slot = &mut self.slots[index];
        slot.value = Some(value);
        slot.refs = 1;
        self.live += 1;
        self.peak = self.peak.max(self.live);
        Ok(HandleId {
            index: index as u16,
            server: self.server,
            generation: slot.generation,
        })
    }

    fn slot(&self, id: HandleId) -> Result<&Slot<T>, Error> {
        match self.slots.get(id.index as usize) {
            Some(s) if s.holds(id) && id.server == self.server => Ok(s),
            _ => Err(self.refusal(id)),
        }
    }

    /// Why `id` names no live value here.
    #[cold]
    fn refusal(&self, id: HandleId) -> Error {
        if id.server != self.server {
            Error::ForeignHandle
        } else {
            Error::StaleHandle { index: id.index }
        }
    }

    /// The value behind a live id.
    pub fn get(&self, id: HandleId) -> Result<T, Error> {
        self.slot(id)?
            .value
            .ok_or(Error::StaleHandle { index: id.index })
    }

    /// The value behind a live id, by reference (no copy). Every job submission calls it for
    /// each operand, so it is one match.
    pub fn get_ref(&self, id: HandleId) -> Result<&T, Error> {
        match self.slots.get(id.index as usize) {
            Some(Slot {
                generation,
                value: Some(v),
                ..
            }) if *generation == id.generation && id.server == self.server => Ok(v),
            _ => Err(self.refusal(id)),
        }
    }

    /// Mutable access to the value behind a live id.
    #[inline(always)]
    pub fn get_mut(&mut self, id: HandleId) -> Result<&mut T, Error> {
        self.slot(id)?;
        self.slots[id.index as usize]
            .value
            .as_mut()
            .ok_or(Error::StaleHandle { index: id.index })
    }

    /// Add `n` references (a clone, or several deferred ones).
    pub fn retain(&mut self, id: HandleId, n: u32) -> Result<(), Error> {
        self.slot(id)?;
        let slot = &mut self.slots[id.index as usize];
        slot.refs = slot.refs.saturating_add(n);
        Ok(())
    }

    /// Drop `n` references; returns the value when the last one goes (the slot is then free and
    /// its generation advanced).
    pub fn release(&mut self, id: HandleId, n: u32) -> Result<Option<T>, Error> {
        self.slot(id)?;
        let slot = &mut self.slots[id.index as usize];
        slot.refs = slot.refs.saturating_sub(n);
        if slot.refs > 0 {
            return Ok(None);
        }
        slot.generation = slot.generation.wrapping_add(1);
        self.live -= 1;
        Ok(slot.value.take())
    }

    /// Every live slot: its id, its reference count and its value, lowest index first.
    pub fn iter(&self) -> impl Iterator<Item = (HandleId, u32, &T)> + '_ {
        let server = self.server;
        self.slots.iter().enumerate().filter_map(move |(index, s)| {
            let value = s.value.as_ref()?;
            let id = HandleId {
                index: index as u16,
                server,
                generation: s.generation,
            };
            Some((id, s.refs, value))
        })
    }

    /// Every live value, to update them all (a recovery from a hardware fault).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().filter_map(|s| s.value.as_mut())
    }

    /// References held on a live id.
    pub fn refs(&self, id: HandleId) -> Result<u32, Error> {
        self.slot(id).map(|s| s.refs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refcount_generation_and_errors() {
        let mut t = HandleTable::<u32, 2>::new(7);
        let a = t.insert(10).unwrap();
        let b = t.insert(20).unwrap();
        assert_eq!(
            t.insert(30),
            Err(Error::CapacityExceeded {
                capacity: Capacity::Handles,
                limit: 2
            })
        );
        t.retain(a, 1).unwrap();
        assert_eq!(t.release(a, 1), Ok(None));
        assert_eq!(t.release(a, 1), Ok(Some(10)));
        assert_eq!(t.get(a), Err(Error::StaleHandle { index: a.index() }));
        let c = t.insert(40).unwrap();
        assert_eq!(c.index(), a.index());
        assert_ne!(c.generation(), a.generation());
        assert_eq!(t.get(a), Err(Error::StaleHandle { index: a.index() }));
        assert_eq!(t.get(c), Ok(40));
        let foreign = HandleId::from_parts(b.index(), 8, b.generation());
        assert_eq!(t.get(foreign), Err(Error::ForeignHandle));
        assert_eq!(t.live(), 2);
    }
}
