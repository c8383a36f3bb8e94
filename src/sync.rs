//! The one lock helper every layer uses.
//!
//! Courier's mutexes guard short, single-step updates (a push, a pop, a
//! counter), so the data under them is consistent even if a thread
//! panicked while holding one. Recovering from poisoning keeps one panic
//! (in a connection actor, say) from turning every later produce call into
//! a panic too.
//!
//! The partition queues' mutexes, taken once per produced record, are
//! `parking_lot`'s, which have no poisoning: a lock and an unlock without
//! the two checks of the thread's panic count that `std`'s make, once per
//! record. [`lock`] takes either.

use std::ops::DerefMut;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A mutex [`lock`] can take.
pub(crate) trait Lockable {
    /// What it guards.
    type Target;
    /// Its guard.
    type Guard<'a>: DerefMut<Target = Self::Target>
    where
        Self: 'a;
    /// Locks it, recovering from poisoning.
    fn locked(&self) -> Self::Guard<'_>;
}

impl<T> Lockable for Mutex<T> {
    type Target = T;
    type Guard<'a>
        = MutexGuard<'a, T>
    where
        T: 'a;
    #[inline]
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T> Lockable for parking_lot::Mutex<T> {
    type Target = T;
    type Guard<'a>
        = parking_lot::MutexGuard<'a, T>
    where
        T: 'a;
    #[inline]
    fn locked(&self) -> parking_lot::MutexGuard<'_, T> {
        self.lock()
    }
}

/// Locks `m`, recovering from poisoning (see the module docs for why that
/// is sound here).
#[inline]
pub(crate) fn lock<L: Lockable>(m: &L) -> L::Guard<'_> {
    m.locked()
}
