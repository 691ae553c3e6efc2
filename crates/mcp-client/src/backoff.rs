//! Exponential backoff with jitter, for re-opening sessions, streams and failed refreshes.

use std::time::Duration;

use rand::Rng;

/// First retry delay.
pub const BASE: Duration = Duration::from_millis(500);
/// Longest delay between retries.
pub const MAX: Duration = Duration::from_secs(60);

/// Attempt counter; `next()` gives the delay before the next attempt.
#[derive(Debug, Default, Clone)]
pub struct Backoff {
    attempts: u32,
}

impl Backoff {
    /// Delay for the next attempt: `BASE * 2^n` capped at `MAX`, scaled by a random factor in
    /// [0.5, 1.0) so that connections failing together do not retry together.
    pub fn next_delay(&mut self) -> Duration {
        self.attempts = self.attempts.saturating_add(1);
        delay_after(self.attempts, rand::rng().random_range(0.0..1.0))
    }

    pub fn reset(&mut self) {
        self.attempts = 0;
    }

    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

/// Delay after the `failures`-th failure in a row (1 for the first): `BASE * 2^(failures - 1)`
/// capped at `MAX`, then a point in its upper half chosen by `jitter` in [0, 1]. The one curve of
/// every retry in the exporter; [`Backoff`] keeps the count for callers that need none of
/// their own.
pub fn delay_after(failures: u32, jitter: f64) -> Duration {
    let full = BASE
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(MAX);
    full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_caps_with_jitter() {
        let mut b = Backoff::default();
        let first = b.next_delay();
        assert!(first >= BASE / 2 && first < BASE);
        for _ in 0..30 {
            assert!(b.next_delay() <= MAX);
        }
        assert!(b.next_delay() >= MAX / 2);
        b.reset();
        assert!(b.next_delay() < BASE);
    }
}
