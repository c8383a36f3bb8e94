//! The one lock helper every layer uses.
//!
//! Courier's mutexes guard short, single-step updates (a push, a pop, a
//! counter), so the data under them is consistent even if a thread
//! panicked while holding one. Recovering from poisoning keeps one panic
//! (in a connection actor, say) from turning every later produce call into
//! a panic too.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, recovering from poisoning (see the module docs for why that
/// is sound here).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
