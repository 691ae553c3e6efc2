//! Where server-initiated messages land, from whichever stream carried them.
//!
//! A `notifications/tools/list_changed` (or a prompts or resources one) can arrive on the GET
//! stream or interleaved in the SSE answer to any POST (fastmcp does the latter). Both readers
//! put it here, counted by the notification. The inbox coalesces:
//! a flood of notifications costs one atomic add each and wakes the connection task once, so a
//! hostile server cannot grow a queue. Server requests wait in a [`Requests`] queue of at most
//! [`SERVER_REQUEST_QUEUE`]; it allocates nothing until one arrives, because servers rarely send
//! any and every connection of a fleet has an inbox (two, with the legacy watch): a tokio channel
//! cost 2.3 KB each before its first message.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::Notify;

use super::jsonrpc::Incoming;
use crate::listing::list::List;

/// How many server requests may wait for an answer before further ones are dropped.
const SERVER_REQUEST_QUEUE: usize = 16;

/// Where a list's notification is counted: one counter per notification method.
fn notification_index(list: List) -> usize {
    match list {
        List::Tools => 0,
        List::Prompts => 1,
        List::Resources | List::ResourceTemplates => 2,
    }
}

/// A request the server sent us; the connection answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerRequest {
    pub id: Value,
    pub method: String,
}

/// Shared between the stream readers (writers) and the connection task (reader).
#[derive(Debug)]
pub struct Inbox {
    /// `list_changed` received, by notification (see [`notification_index`]).
    list_changed: [AtomicU64; 3],
    other_notifications: AtomicU64,
    dropped_requests: AtomicU64,
    wake: Notify,
    requests: Arc<Queue>,
}

/// The server requests waiting for an answer, shared by the inbox (which fills it and closes it
/// when dropped) and its [`Requests`] end.
#[derive(Debug, Default)]
struct Queue {
    waiting: Mutex<VecDeque<ServerRequest>>,
    closed: AtomicBool,
    arrived: Notify,
}

impl Queue {
    /// Queue `r` and wake the receiver; `false` (not queued) when [`SERVER_REQUEST_QUEUE`]
    /// requests already wait.
    fn offer(&self, r: ServerRequest) -> bool {
        let mut waiting = self.waiting.lock().expect("inbox lock");
        if waiting.len() >= SERVER_REQUEST_QUEUE {
            return false;
        }
        waiting.push_back(r);
        drop(waiting);
        self.arrived.notify_one();
        true
    }

    fn take(&self) -> Option<ServerRequest> {
        self.waiting.lock().expect("inbox lock").pop_front()
    }

    /// Nothing more will be offered: a waiting receiver wakes to find the end.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.arrived.notify_one();
    }
}

/// The receiving end of an inbox's server requests (see [`crate::mcp::Responder`]).
#[derive(Debug)]
pub struct Requests(Arc<Queue>);

impl Requests {
    /// The next request, oldest first; `None` once the inbox is gone and the queue is empty.
    /// Cancel-safe: a request is taken only when returned.
    pub async fn recv(&mut self) -> Option<ServerRequest> {
        loop {
            if let Some(r) = self.try_recv() {
                return Some(r);
            }
            if self.0.closed.load(Ordering::Acquire) {
                return self.try_recv();
            }
            // A request filed between the check and this wait left a permit: no wake is lost.
            self.0.arrived.notified().await;
        }
    }

    /// The next request if one waits.
    pub fn try_recv(&mut self) -> Option<ServerRequest> {
        self.0.take()
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.requests.close();
    }
}

impl Inbox {
    /// A new inbox and the receiving end of its server-request queue.
    pub fn new() -> (Inbox, Requests) {
        let queue = Arc::new(Queue::default());
        (
            Inbox {
                list_changed: Default::default(),
                other_notifications: AtomicU64::new(0),
                dropped_requests: AtomicU64::new(0),
                wake: Notify::new(),
                requests: queue.clone(),
            },
            Requests(queue),
        )
    }

    /// File one server message that was not the response we were waiting for.
    pub fn deliver(&self, msg: Incoming) {
        if self.file(msg) {
            self.wake.notify_one();
        }
    }

    /// Deliver messages already read together (one read of a stream), waking the connection
    /// once, after the last: a server that changes its list in two steps sends two
    /// `list_changed` back to back, and the walk they wake must count both, not start between
    /// them and leave the second to wake a walk of its own.
    pub fn burst(&self) -> Burst<'_> {
        Burst {
            inbox: self,
            woken: false,
        }
    }

    /// Count or queue `msg`; whether it was a `list_changed` (the connection wants waking).
    fn file(&self, msg: Incoming) -> bool {
        match msg {
            Incoming::Notification { method, .. } => match List::announced_by(&method).first() {
                Some(list) => {
                    self.list_changed[notification_index(*list)].fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                None => {
                    self.other_notifications.fetch_add(1, Ordering::Relaxed);
                }
            },
            Incoming::Request { id, method, .. } => {
                if !self.requests.offer(ServerRequest { id, method }) {
                    self.dropped_requests.fetch_add(1, Ordering::Relaxed);
                }
            }
            // A response nobody waits for (late, or for a cancelled request): ignored, as the
            // spec asks of late responses.
            Incoming::Response { .. } => {}
        }
        false
    }

    /// Total `notifications/tools/list_changed` received so far.
    pub fn list_changed_count(&self) -> u64 {
        self.changed_count(List::Tools)
    }

    /// Total notifications so far that announced a change to `list` (the resources one counts
    /// for both resource lists).
    pub fn changed_count(&self, list: List) -> u64 {
        self.list_changed[notification_index(list)].load(Ordering::Relaxed)
    }

    /// Total other notifications received (logging, progress …).
    pub fn other_notification_count(&self) -> u64 {
        self.other_notifications.load(Ordering::Relaxed)
    }

    /// Wait until a list_changed notification of any list arrives (returns at once if one came
    /// since the last wait).
    pub async fn list_changed(&self) {
        self.wake.notified().await
    }
}

/// Messages delivered together; the connection is woken when the burst is flushed or dropped.
pub struct Burst<'a> {
    inbox: &'a Inbox,
    woken: bool,
}

impl Burst<'_> {
    /// A `list_changed` was delivered and waits for the wake.
    pub fn waking(&self) -> bool {
        self.woken
    }

    pub fn deliver(&mut self, msg: Incoming) {
        self.woken |= self.inbox.file(msg);
    }

    /// Wake the connection for what was delivered so far (before waiting for more).
    pub fn flush(&mut self) {
        if std::mem::take(&mut self.woken) {
            self.inbox.wake.notify_one();
        }
    }
}

impl Drop for Burst<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_flood_coalesces_into_one_wake_and_an_exact_count() {
        let (inbox, _rx) = Inbox::new();
        for _ in 0..10_000 {
            inbox.deliver(Incoming::Notification {
                method: "notifications/tools/list_changed".into(),
                params: None,
            });
        }
        inbox.list_changed().await; // the stored permit
        assert_eq!(inbox.list_changed_count(), 10_000);
    }

    #[tokio::test]
    async fn each_list_is_counted_by_its_notification_and_wakes() {
        let (inbox, _rx) = Inbox::new();
        for method in [
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed",
            "notifications/resources/list_changed",
            "notifications/message",
        ] {
            inbox.deliver(Incoming::Notification {
                method: method.into(),
                params: None,
            });
        }
        inbox.list_changed().await;
        let counts = List::ALL.map(|l| inbox.changed_count(l));
        assert_eq!(
            counts,
            [0, 1, 2, 2],
            "templates are announced by resources'"
        );
        assert_eq!(inbox.other_notification_count(), 1);
    }

    #[tokio::test]
    async fn a_burst_wakes_once_after_its_last_message() {
        let (inbox, _rx) = Inbox::new();
        let changed = || Incoming::Notification {
            method: "notifications/tools/list_changed".into(),
            params: None,
        };
        let mut burst = inbox.burst();
        burst.deliver(changed());
        assert!(
            tokio::time::timeout(std::time::Duration::ZERO, inbox.list_changed())
                .await
                .is_err(),
            "no wake before the burst ends"
        );
        burst.deliver(changed());
        drop(burst);
        inbox.list_changed().await;
        assert_eq!(inbox.list_changed_count(), 2, "both counted at the wake");
    }

    #[tokio::test]
    async fn server_requests_are_bounded() {
        let (inbox, mut rx) = Inbox::new();
        for i in 0..100 {
            inbox.deliver(Incoming::Request {
                id: json!(i),
                method: "ping".into(),
                params: None,
            });
        }
        let mut n = 0;
        while rx.try_recv().is_some() {
            n += 1;
        }
        assert_eq!(n, SERVER_REQUEST_QUEUE);
        assert_eq!(inbox.dropped_requests.load(Ordering::Relaxed), 84);
    }

    #[tokio::test]
    async fn requests_wake_the_receiver_in_order_and_end_with_the_inbox() {
        let (inbox, mut rx) = Inbox::new();
        let waiter = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(r) = rx.recv().await {
                got.push(r.method);
            }
            got
        });
        tokio::task::yield_now().await;
        for method in ["ping", "roots/list"] {
            inbox.deliver(Incoming::Request {
                id: json!(1),
                method: method.into(),
                params: None,
            });
        }
        drop(inbox);
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
            .await
            .expect("the receiver ends once the inbox is gone")
            .unwrap();
        assert_eq!(
            got,
            ["ping", "roots/list"],
            "both, in order, before the end"
        );
    }
}
