//! Read and write events of client connections, INFO's
//! `total_reads_processed` and `total_writes_processed`: as Redis counts
//! them, one per read that took input and one per write of a client's
//! pending output (a pipeline of 100 requests is one read and one write);
//! and the bytes read (`total_net_input_bytes`), as they arrive, before
//! they make a whole request. Counted where the sockets are, outside the
//! lock.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static READS: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);
static INPUT: AtomicU64 = AtomicU64::new(0);

#[inline]
pub fn read_event(bytes: usize) {
    READS.fetch_add(1, Relaxed);
    INPUT.fetch_add(bytes as u64, Relaxed);
}

#[inline]
pub fn write_event() {
    WRITES.fetch_add(1, Relaxed);
}

/// (reads, writes) so far.
pub fn totals() -> (u64, u64) {
    (READS.load(Relaxed), WRITES.load(Relaxed))
}

/// Bytes read from clients so far.
pub fn input_bytes() -> u64 {
    INPUT.load(Relaxed)
}

/// CONFIG RESETSTAT.
pub fn reset() {
    READS.store(0, Relaxed);
    WRITES.store(0, Relaxed);
    INPUT.store(0, Relaxed);
}
