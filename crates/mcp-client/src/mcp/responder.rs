//! The server's requests (`ping`; anything else is "method not found"), answered inside the
//! owner's event loop rather than by a task of their own.
//!
//! Servers rarely send requests, yet every connection of a fleet must be ready for one. A task
//! per connection waiting on the queue costs its cell and its future on the heap for the life of
//! the session, ten thousand times over; a [`Responder`] polled beside the connection's other
//! waits costs the queue's receiver and an empty slot, and the answer's future exists only while
//! an answer is being sent. One request is answered at a time, in the order received; the queue
//! in front of it is bounded (see [`super::Inbox`]).

use std::sync::Arc;

use super::client::Client;
use super::inbox::Requests;
use crate::task::{Slot, poll_slot};

/// Answers a session's server requests when polled; see the module docs.
pub struct Responder {
    requests: Requests,
    answering: Slot<()>,
}

impl Responder {
    /// The responder of the session whose inbox made `requests`.
    pub fn new(requests: Requests) -> Self {
        Responder {
            requests,
            answering: None,
        }
    }

    /// Wait for the next request and answer it with `client`. `Some` once an answer was sent
    /// (or failed: an answer is best effort); `None` when the queue is closed (the session's
    /// inbox is gone) and nothing more will come. Cancel-safe: an answer being sent lives in
    /// `self` and is resumed by the next call.
    pub async fn next(&mut self, client: &Arc<Client>) -> Option<()> {
        if self.answering.is_none() {
            let req = self.requests.recv().await?;
            let client = client.clone();
            self.answering = Some(Box::pin(async move {
                let _ = client.answer(&req.id, &req.method).await;
            }));
        }
        poll_slot(&mut self.answering).await;
        self.answering = None;
        Some(())
    }

    /// Answer every request until the queue closes: for an owner with no loop of its own
    /// (`check`), run as a task.
    pub async fn run(mut self, client: Arc<Client>) {
        while self.next(&client).await.is_some() {}
    }
}
