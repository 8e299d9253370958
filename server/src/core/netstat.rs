//! Read and write events of client connections, INFO's
//! `total_reads_processed` and `total_writes_processed`: as Redis counts
//! them, one per read that took input and one per write of a client's
//! pending output (a pipeline of 100 requests is one read and one write);
//! and the bytes read (`total_net_input_bytes`), as they arrive, before
//! they make a whole request. Counted where the sockets are, outside the
//! lock.
//!
//! With `io-threads` above 1, Redis hands a round's reads (if
//! `io-threads-do-reads`) and writes to its I/O threads only while a round
//! has at least two pending writes per thread, and counts what they did in
//! `io_threaded_reads_processed` and `io_threaded_writes_processed`.
//! cinnabar's workers always do their own connections' I/O; the two
//! counters and `io_threads_active` model Redis's rule from the events of
//! each round (`core::round`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

static READS: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);
static INPUT: AtomicU64 = AtomicU64::new(0);

static IO_THREADS: AtomicU64 = AtomicU64::new(1);
static DO_READS: AtomicBool = AtomicBool::new(false);
/// The totals when the last round ended.
static MARK: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static THREADED: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static ACTIVE: AtomicBool = AtomicBool::new(false);

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

/// `io-threads` and `io-threads-do-reads`, both fixed at start-up.
pub fn configure(io_threads: i64, do_reads: bool) {
    IO_THREADS.store(io_threads.max(1) as u64, Relaxed);
    DO_READS.store(do_reads, Relaxed);
}

/// A round ended: its reads were threaded if the threads were active (and
/// read), its writes if there were enough of them to activate the threads.
pub fn round_end() {
    let threads = IO_THREADS.load(Relaxed);
    if threads <= 1 {
        return;
    }
    let (r, w) = totals();
    let reads = r.saturating_sub(MARK[0].swap(r, Relaxed));
    let writes = w.saturating_sub(MARK[1].swap(w, Relaxed));
    if ACTIVE.load(Relaxed) && DO_READS.load(Relaxed) {
        THREADED[0].fetch_add(reads, Relaxed);
    }
    let active = writes >= 2 * threads;
    if active {
        THREADED[1].fetch_add(writes, Relaxed);
    }
    ACTIVE.store(active, Relaxed);
}

/// (io_threaded_reads_processed, io_threaded_writes_processed,
/// io_threads_active).
pub fn threaded() -> (u64, u64, bool) {
    (
        THREADED[0].load(Relaxed),
        THREADED[1].load(Relaxed),
        ACTIVE.load(Relaxed),
    )
}

/// CONFIG RESETSTAT.
pub fn reset() {
    for c in [
        &READS,
        &WRITES,
        &INPUT,
        &MARK[0],
        &MARK[1],
        &THREADED[0],
        &THREADED[1],
    ] {
        c.store(0, Relaxed);
    }
}
