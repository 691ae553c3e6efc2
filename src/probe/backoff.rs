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
        let exp = BASE.saturating_mul(1u32 << self.attempts.min(16));
        self.attempts = self.attempts.saturating_add(1);
        let capped = exp.min(MAX);
        capped.mul_f64(rand::rng().random_range(0.5..1.0))
    }

    pub fn reset(&mut self) {
        self.attempts = 0;
    }

    pub fn attempts(&self) -> u32 {
        self.attempts
    }
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
