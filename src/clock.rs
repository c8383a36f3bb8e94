//! The producer's clocks: [`Instant`] for deadlines and timers, and
//! [`Mono`], monotonic time as plain nanoseconds, for the per-record
//! instants.
//!
//! Every record that owes a report carries the instant it was accepted,
//! and every report turns that into a latency. With `std::time::Instant`
//! that is a 16-byte value and a checked `timespec` subtraction per
//! record; here it is 8 bytes and one integer subtraction. It reads the
//! same clock as `Instant` on Linux (`CLOCK_MONOTONIC`), once per record.
//!
//! Both read tokio's clock where a test pauses it: `Instant` is tokio's
//! (std's, wrapped, in a normal build), and with the `fault-injection`
//! feature (which turns on tokio's `test-util`) `Mono` is derived from
//! it. On a runtime started paused, time then moves only when every task
//! waits, straight to the next timer: the seeded simulation
//! (`tests/simulation.rs`) runs the producer on such a runtime, so that
//! its schedule, not the wall clock, decides linger, timeouts and
//! backoffs. Application builds read the system clock as before.

use std::time::Duration;

/// The instant type of every deadline and timer in the producer: tokio's,
/// so that a paused test runtime moves it (see the module doc).
pub(crate) use tokio::time::Instant;

/// Nanoseconds on the monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Mono(u64);

impl Mono {
    /// Now.
    #[cfg(all(unix, not(feature = "fault-injection")))]
    #[inline]
    pub(crate) fn now() -> Mono {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is
        // always available on the unix systems Rust's std supports (std's
        // own `Instant` relies on it), so this cannot fail.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        Mono(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// Now.
    #[cfg(not(unix))]
    #[inline]
    pub(crate) fn now() -> Mono {
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let epoch = EPOCH.get_or_init(std::time::Instant::now);
        Mono(epoch.elapsed().as_nanos() as u64)
    }

    /// Now, on tokio's clock (paused in the simulation): the monotonic
    /// clock's reading at a first call, moved by how far tokio's clock
    /// is from its reading then, so that both agree where tokio's clock
    /// is not paused.
    #[cfg(all(unix, feature = "fault-injection"))]
    pub(crate) fn now() -> Mono {
        static ANCHOR: std::sync::OnceLock<(std::time::Instant, u64)> = std::sync::OnceLock::new();
        let (at, mono) = *ANCHOR.get_or_init(|| {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: as in the build without the feature.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
            (
                std::time::Instant::now(),
                ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64,
            )
        });
        let now = Instant::now().into_std();
        match now.checked_duration_since(at) {
            Some(d) => Mono(mono.saturating_add(d.as_nanos() as u64)),
            None => Mono(mono.saturating_sub(at.duration_since(now).as_nanos() as u64)),
        }
    }

    /// Time from `earlier` to `self`; zero if `earlier` is later.
    /// `d` later.
    #[inline]
    pub(crate) fn plus(self, d: Duration) -> Mono {
        Mono(
            self.0
                .saturating_add(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }

    /// Nanoseconds on the clock: for an atomic that holds an instant.
    #[inline]
    pub(crate) fn nanos(self) -> u64 {
        self.0
    }

    #[inline]
    pub(crate) fn since(self, earlier: Mono) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// Whole microseconds from `earlier` to `self`; zero if `earlier` is
    /// later. (`since(earlier).as_micros()` without the `Duration`: a
    /// division by a constant instead of a split into seconds and
    /// nanoseconds and back.)
    #[inline]
    pub(crate) fn micros_since(self, earlier: Mono) -> u64 {
        self.0.saturating_sub(earlier.0) / 1_000
    }

    /// Whole milliseconds from `earlier` to `self`; zero if `earlier` is later.
    #[inline]
    pub(crate) fn millis_since(self, earlier: Mono) -> i64 {
        (self.0.saturating_sub(earlier.0) / 1_000_000) as i64
    }
}

/// The wait before retry number `attempt` (0 for the first retry):
/// exponential from `base`, capped at `max`, with up to 20 % jitter either
/// way as the Java client (`ExponentialBackoff`).
pub(crate) fn backoff(base: Duration, max: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.min(16));
    let capped = exp.min(max).max(base);
    let jitter = 0.8 + fastrand::f64() * 0.4;
    capped.mul_f64(jitter).min(max.max(base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_with_std_instant() {
        let (a, i) = (Mono::now(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (b, j) = (Mono::now(), std::time::Instant::now());
        let ours = b.since(a);
        let std = j - i;
        assert!(ours >= Duration::from_millis(20), "{ours:?}");
        // Both read the same clock: they agree to well under a millisecond
        // of slack, whatever the scheduler did in between.
        let diff = ours.abs_diff(std);
        assert!(diff < Duration::from_millis(2), "{ours:?} vs {std:?}");
        assert_eq!(a.since(b), Duration::ZERO);
        assert_eq!(b.millis_since(a), ours.as_millis() as i64);
    }
}
