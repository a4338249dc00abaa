//! Series found in their family once and kept by a small index, so that
//! recording a request costs atomic updates instead of hashing its labels and
//! taking the family's lock (four such lookups per request, in a profile of
//! the request path). A series is made on first use: the exposition shows
//! only series that have counted something.

use std::sync::OnceLock;

pub struct Kept<T> {
    slots: Box<[OnceLock<T>]>,
}

impl<T> Kept<T> {
    pub fn new(slots: usize) -> Self {
        Self { slots: (0..slots).map(|_| OnceLock::new()).collect() }
    }

    /// The series at `slot`, made by `make` the first time. A slot past the
    /// end is made every time (and not kept).
    pub fn get(&self, slot: usize, make: impl FnOnce() -> T) -> KeptRef<'_, T> {
        match self.slots.get(slot) {
            Some(kept) => KeptRef::Kept(kept.get_or_init(make)),
            None => KeptRef::Made(make()),
        }
    }
}

/// A kept series, or one made for a single use.
pub enum KeptRef<'a, T> {
    Kept(&'a T),
    Made(T),
}

impl<T> std::ops::Deref for KeptRef<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            Self::Kept(kept) => kept,
            Self::Made(made) => made,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn a_slot_is_made_once_and_one_past_the_end_every_time() {
        let kept = Kept::<u32>::new(2);
        let made = Cell::new(0);
        let make = || {
            made.set(made.get() + 1);
            made.get()
        };
        assert_eq!((*kept.get(1, make), *kept.get(1, make)), (1, 1));
        assert_eq!(*kept.get(0, make), 2);
        assert_eq!((*kept.get(2, make), *kept.get(2, make)), (3, 4));
    }
}
