//! The pieces a connection's event loop is made of: a future slot polled beside the others, a
//! timer that may be unset, and a spawned task that dies with its owner. Every waiting thing of
//! a connection is one of these, so a slow server never stops the loop from hearing another.

use std::pin::Pin;

use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

/// A future the loop may be waiting on, or none.
pub type Slot<T> = Option<Pin<Box<dyn Future<Output = T> + Send>>>;

/// Poll an optional future; pending forever when the slot is empty.
pub async fn poll_slot<T>(slot: &mut Slot<T>) -> T {
    match slot {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// Sleep until `at`; pending forever when unset.
pub async fn sleep_opt(at: Option<Instant>) {
    match at {
        Some(t) => sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// A spawned task that is aborted when its owner lets go of it: a session's stream reader must
/// not outlive the session.
pub struct OwnedTask<T>(JoinHandle<T>);

impl<T> Drop for OwnedTask<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T: Send + 'static> OwnedTask<T> {
    pub fn spawn(fut: impl Future<Output = T> + Send + 'static) -> Self {
        OwnedTask(tokio::spawn(fut))
    }

    /// Wait for the task to end (cancel-safe: the task keeps running if this is dropped).
    pub async fn join(&mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}
