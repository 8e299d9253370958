//! A connection's wake-up call: output another client produced for it, its
//! blocking command served, a kill. One task waits on it (the connection's
//! own), and a call made while it is not waiting is kept for its next wait,
//! as with tokio's `Notify::notify_one`. `Notify` keeps a list of waiters
//! under a lock that each wait joins and leaves: with a wait per request,
//! that was ~300 instructions per request; this one stores one waker.

use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Wake {
    permit: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Wake {
    pub fn new() -> Self {
        Self::default()
    }

    /// Wakes the waiting task, or the next wait if none waits now.
    pub fn notify_one(&self) {
        self.permit.store(true, Ordering::Release);
        if let Some(w) = self.waker.lock().take() {
            w.wake();
        }
    }

    /// A call is waiting to be taken: the next wait returns at once.
    pub fn is_set(&self) -> bool {
        self.permit.load(Ordering::Relaxed)
    }

    /// Resolves once a call is made (or was made since the last wait).
    pub fn notified(&self) -> Notified<'_> {
        Notified(self)
    }

    fn take_permit(&self) -> bool {
        self.permit.load(Ordering::Relaxed) && self.permit.swap(false, Ordering::Acquire)
    }
}

pub struct Notified<'a>(&'a Wake);

impl Future for Notified<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let wake = self.0;
        if wake.take_permit() {
            return Poll::Ready(());
        }
        {
            let mut w = wake.waker.lock();
            if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *w = Some(cx.waker().clone());
            }
        }
        // A call between the first look and storing the waker found no
        // waker to wake: its permit is seen here.
        if wake.take_permit() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_call_wakes_the_waiter_or_is_kept_for_the_next_wait() {
        let w = Arc::new(Wake::new());
        // Kept: the next wait returns at once, and only that one.
        w.notify_one();
        w.notified().await;
        let pending = tokio::time::timeout(std::time::Duration::from_millis(20), w.notified());
        assert!(pending.await.is_err());
        // Woken while waiting, from another task.
        let w2 = w.clone();
        let waiter = tokio::spawn(async move { w2.notified().await });
        tokio::task::yield_now().await;
        w.notify_one();
        waiter.await.unwrap();
    }
}
