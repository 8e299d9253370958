//! The lazy-free thread (Redis's bio lazy-free job): values and whole
//! databases too large to drop under the lock are freed there, and its
//! counters are what INFO memory reports.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

/// Objects handed to the lazy-free thread and not freed yet, and those it
/// has freed since CONFIG RESETSTAT (INFO memory's `lazyfree_pending_objects`
/// and `lazyfreed_objects`).
pub static LAZYFREE_PENDING: AtomicU64 = AtomicU64::new(0);
pub static LAZYFREED: AtomicU64 = AtomicU64::new(0);

/// Values whose freeing costs more than this many allocations go to the
/// lazy-free thread (Redis's `LAZYFREE_THRESHOLD`).
pub const LAZYFREE_THRESHOLD: usize = 64;

/// Drops a deleted value: in the background when `lazy` and it is large
/// (`Value::free_effort`), else here.
#[inline]
pub fn drop_value(v: storage::Value, lazy: bool) {
    if lazy && v.free_effort() > LAZYFREE_THRESHOLD {
        lazy_free(v, 1);
    }
}

/// Frees `x`, which holds `objects` keys or values, on the lazy-free thread
/// (as Redis's bio thread), so dropping a large database or value does not
/// stall the server under the lock.
pub fn lazy_free<T: Send + 'static>(x: T, objects: u64) {
    type Job = (Box<dyn Send>, u64);
    static TX: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    let tx = TX.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("lazyfree".into())
            .spawn(move || {
                crate::core::affinity::pin(crate::core::affinity::Role::Bio);
                for (job, n) in rx {
                    drop(job);
                    LAZYFREE_PENDING.fetch_sub(n, Relaxed);
                    LAZYFREED.fetch_add(n, Relaxed);
                }
            });
        if spawned.is_err() {
            tracing::warn!("cannot start the lazy-free thread; freeing inline");
        }
        Mutex::new(tx)
    });
    // If the thread could not start, the send fails and hands `x` back,
    // which is then dropped here.
    if let Ok(tx) = tx.lock() {
        LAZYFREE_PENDING.fetch_add(objects, Relaxed);
        if tx.send((Box::new(x), objects)).is_err() {
            LAZYFREE_PENDING.fetch_sub(objects, Relaxed);
        }
    }
}
