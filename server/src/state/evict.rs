//! Memory accounting, `maxmemory` eviction and the latency monitor.
//!
//! Accounting: the server binary installs [`CountingAlloc`] as its global
//! allocator, a wrapper around mimalloc that adds and subtracts each
//! block's usable size to one relaxed atomic, as Redis's zmalloc does. That
//! number is `used_memory` and what eviction compares with `maxmemory`;
//! reading it costs a load, so it is checked before every command. Without
//! the wrapper (unit tests of this crate) it reads 0 and the resident set
//! size stands in.
//!
//! Eviction follows Redis's approximated LRU/LFU: each round samples
//! `maxmemory-samples` keys per database (only keys with a TTL under the
//! volatile-* policies) into a pool of the 16 best candidates seen so far,
//! kept across rounds, and deletes the best that still exists. Scores are
//! "higher is evicted first": idle time (LRU), 255 minus the decayed
//! counter (LFU), or how soon the key expires (volatile-ttl). The loop
//! stops when enough memory was freed or when the `maxmemory-eviction-
//! tenacity` time budget is spent (the eviction timer and the next commands
//! continue).

use crate::state::State;
use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;
use storage::CBytes;

extern "C" {
    fn mi_malloc(size: usize) -> *mut c_void;
    fn mi_zalloc(size: usize) -> *mut c_void;
    fn mi_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn mi_usable_size(p: *const c_void) -> usize;
    fn mi_collect(force: bool);
    fn mi_process_info(
        elapsed_ms: *mut usize,
        user_ms: *mut usize,
        system_ms: *mut usize,
        current_rss: *mut usize,
        peak_rss: *mut usize,
        current_commit: *mut usize,
        peak_commit: *mut usize,
        page_faults: *mut usize,
    );
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    fn mi_stats_print_out(
        out: Option<unsafe extern "C" fn(msg: *const std::ffi::c_char, arg: *mut c_void)>,
        arg: *mut c_void,
    );
}

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

/// Alignment every mimalloc block has (its `MI_MAX_ALIGN_SIZE`, set in
/// `.cargo/config.toml`). Layouts up to it take plain `mi_malloc`: the
/// aligned entry points fall back, whenever the size class has no free
/// block at hand, to allocating size + alignment - 1 unless the class is a
/// power of two, so a 48-byte `Box<Quicklist>` often took a 64-byte block
/// (100,000 lists of 10 elements: 275 -> 267 bytes per key).
const PLAIN_ALIGN: usize = 8;

/// mimalloc, counting the usable size of every live block.
pub struct CountingAlloc;

// SAFETY: every call forwards to mimalloc with the same arguments; the
// counter is bookkeeping only. `mi_usable_size` accepts any pointer
// mimalloc returned.
unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = if layout.align() <= PLAIN_ALIGN {
            mi_malloc(layout.size()) as *mut u8
        } else {
            mimalloc::MiMalloc.alloc(layout)
        };
        if !p.is_null() {
            ALLOCATED.fetch_add(mi_usable_size(p as *const c_void), Relaxed);
        }
        p
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = if layout.align() <= PLAIN_ALIGN {
            mi_zalloc(layout.size()) as *mut u8
        } else {
            mimalloc::MiMalloc.alloc_zeroed(layout)
        };
        if !p.is_null() {
            ALLOCATED.fetch_add(mi_usable_size(p as *const c_void), Relaxed);
        }
        p
    }
    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        ALLOCATED.fetch_sub(mi_usable_size(p as *const c_void), Relaxed);
        mimalloc::MiMalloc.dealloc(p, layout)
    }
    #[inline]
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = mi_usable_size(p as *const c_void);
        let q = if layout.align() <= PLAIN_ALIGN {
            mi_realloc(p as *mut c_void, new_size) as *mut u8
        } else {
            mimalloc::MiMalloc.realloc(p, layout, new_size)
        };
        if !q.is_null() {
            let new = mi_usable_size(q as *const c_void);
            if new >= old {
                ALLOCATED.fetch_add(new - old, Relaxed);
            } else {
                ALLOCATED.fetch_sub(old - new, Relaxed);
            }
        }
        q
    }
}

/// What the Lua interpreter holds, left out of `used_memory`.
static VM_MEMORY: AtomicUsize = AtomicUsize::new(0);

pub fn set_vm_memory(bytes: usize) {
    VM_MEMORY.store(bytes, Relaxed);
}

pub fn vm_memory() -> u64 {
    VM_MEMORY.load(Relaxed) as u64
}

/// Bytes allocated and not freed (`used_memory`), less the Lua
/// interpreter's: Redis's Lua allocates outside its counted allocator.
pub fn used_memory() -> u64 {
    match ALLOCATED.load(Relaxed) {
        0 => crate::core::os::rss_bytes(),
        n => n.saturating_sub(VM_MEMORY.load(Relaxed)) as u64,
    }
}

/// The bytes mimalloc holds committed from the OS, the nearest it has to
/// jemalloc's `active` (and `resident`: it cannot tell which committed
/// pages are resident); `used_memory` when it is not the allocator.
pub fn allocator_committed() -> u64 {
    if ALLOCATED.load(Relaxed) == 0 {
        return used_memory();
    }
    let mut v = [0usize; 8];
    let [a, b, c, d, e, commit, g, h] = &mut v;
    // SAFETY: mimalloc writes one usize through each pointer.
    unsafe { mi_process_info(a, b, c, d, e, commit, g, h) };
    v[5] as u64
}

/// mimalloc's `mi_option_purge_delay` (the same position in its v2 and
/// v3 option enums).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// Milliseconds a freed page stays resident before mimalloc gives it back
/// to the OS (its default: 1000). Under a long pipeline a connection's
/// buffers grow and shrink through medium (512 KB) pages of several size
/// classes, freed and allocated again many times a second; with a second's
/// delay that kept 0.3-0.9 MB more resident during and right after the
/// pipeline (a 1,000,000-entry stream loaded by `redis-cli --pipe`: VmRSS
/// up to 3% above Redis's with used_memory below it; at 100 ms, 0.6-1%
/// below). A page reused within the delay is not purged at all.
const PURGE_DELAY_MS: std::ffi::c_long = 100;

/// Sets the allocator's options, and makes it the Lua interpreter's
/// allocator; first thing in `main`, once [`CountingAlloc`] is the global
/// allocator.
pub fn init_allocator() {
    // SAFETY: an option index and value; mimalloc reads options at use.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
    // SAFETY: `lua_alloc` frees and resizes any mimalloc block, so any
    // block of the global allocator; that frees any of its blocks.
    unsafe { scripting::use_allocator(lua_alloc) }
}

/// The Lua interpreter's allocator: [`CountingAlloc`] with an 8-byte
/// alignment, all Lua needs, so its plain mimalloc path (the interpreter's
/// share is taken out of `used_memory` by [`set_vm_memory`]).
unsafe extern "C-unwind" fn lua_alloc(
    _: *mut c_void,
    p: *mut c_void,
    osize: usize,
    nsize: usize,
) -> *mut c_void {
    // SAFETY: PLAIN_ALIGN is a power of two; sizes come from Lua.
    let layout = |n| Layout::from_size_align_unchecked(n, PLAIN_ALIGN);
    let p = p as *mut u8;
    let q = match (p.is_null(), nsize) {
        (true, 0) => std::ptr::null_mut(),
        (false, 0) => {
            CountingAlloc.dealloc(p, layout(osize));
            std::ptr::null_mut()
        }
        (true, n) => CountingAlloc.alloc(layout(n)),
        (false, n) => CountingAlloc.realloc(p, layout(osize), n),
    };
    q as *mut c_void
}

/// MEMORY PURGE: returns freed pages to the OS.
pub fn purge() {
    // SAFETY: no arguments beyond a flag; safe to call at any time.
    unsafe { mi_collect(true) }
}

/// Hands pages freed long enough ago back to the OS. mimalloc only does
/// this when the thread that freed them allocates again, so a big reply
/// buffer freed by a connection that then went idle would stay resident.
pub fn release_idle() {
    // SAFETY: as `purge`.
    unsafe { mi_collect(false) }
}

/// MEMORY MALLOC-STATS: mimalloc's statistics report.
pub fn malloc_stats() -> String {
    unsafe extern "C" fn collect(msg: *const std::ffi::c_char, arg: *mut c_void) {
        // SAFETY: `arg` is the String passed below, `msg` a C string.
        let out = &mut *(arg as *mut String);
        if !msg.is_null() {
            out.push_str(&std::ffi::CStr::from_ptr(msg).to_string_lossy());
        }
    }
    let mut s = String::new();
    // SAFETY: the callback only runs during this call, with `s` alive.
    unsafe { mi_stats_print_out(Some(collect), &mut s as *mut String as *mut c_void) };
    s
}

use crate::core::config::Policy;

impl Policy {
    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }
    fn random(self) -> bool {
        matches!(self, Policy::AllkeysRandom | Policy::VolatileRandom)
    }
}

/// Redis's eviction pool size.
const POOL_SIZE: usize = 16;
/// Samples kept per latency event (Redis's `LATENCY_TS_LEN`).
const LATENCY_TS_LEN: usize = 160;

/// The best eviction candidates seen so far, worst first (Redis's pool).
pub struct EvictPool {
    cands: Vec<Candidate>,
    /// The policy its scores were computed for.
    policy: Policy,
}

impl Default for EvictPool {
    fn default() -> Self {
        EvictPool {
            cands: Vec::with_capacity(POOL_SIZE),
            policy: Policy::NoEviction,
        }
    }
}

struct Candidate {
    score: u64,
    db: usize,
    key: CBytes,
}

#[derive(Clone, Copy, Debug)]
pub struct LatencySample {
    pub time: i64,
    pub ms: u64,
}

#[derive(Default, Debug)]
pub struct LatencyEvent {
    pub samples: std::collections::VecDeque<LatencySample>,
    pub max: u64,
}

/// Eviction settings and state, and the latency monitor's events.
pub struct Memory {
    pub maxmemory: u64,
    pub policy: Policy,
    pub samples: usize,
    pub tenacity: i64,
    pub latency_threshold_ms: u64,
    next_random_db: usize,
    pub latency: BTreeMap<String, LatencyEvent>,
    /// When memory first stayed over the limit after an eviction round
    /// (INFO's `current_eviction_exceeded_time`), and the accumulated total.
    pub exceeded_since: Option<Instant>,
    pub exceeded_total_ms: u64,
    /// The eviction timer runs (`State::start_eviction_proc`).
    proc_running: bool,
    /// While a round evicts: the clients its messages (tracking
    /// invalidations, keyspace events) were queued for, written out when
    /// it ends (see `State::write_round_output`).
    pub round_output: Option<Vec<u64>>,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            maxmemory: 0,
            policy: Policy::NoEviction,
            samples: 5,
            tenacity: 10,
            latency_threshold_ms: 0,
            next_random_db: 0,
            latency: BTreeMap::new(),
            exceeded_since: None,
            exceeded_total_ms: 0,
            proc_running: false,
            round_output: None,
        }
    }
}

/// `maxmemory`, for the keyspace tables' growth check, which has no
/// state at hand.
static MAXMEMORY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Whether a keyspace table may take `bytes` more for its next size: not
/// if that puts memory past `maxmemory`, as Redis, so that a table's
/// growth does not evict keys (the table stays fuller until a cron or a
/// bigger limit lets it grow).
fn table_may_grow(bytes: usize) -> bool {
    let max = MAXMEMORY.load(Relaxed);
    max == 0 || used_memory() + bytes as u64 <= max
}

impl Memory {
    /// Refreshes the settings from the configuration.
    pub fn configure(&mut self, cfg: &crate::core::config::Config) {
        self.maxmemory = cfg.maxmemory;
        MAXMEMORY.store(cfg.maxmemory, Relaxed);
        storage::set_grow_guard(table_may_grow);
        self.policy = cfg.maxmemory_policy;
        self.samples = cfg.maxmemory_samples.clamp(1, 64) as usize;
        self.tenacity = cfg.maxmemory_eviction_tenacity;
        self.latency_threshold_ms = cfg.latency_monitor_threshold.max(0) as u64;
    }

    /// Records `ms` for `event` if it reaches `latency-monitor-threshold`.
    pub fn latency_sample_if_needed(&mut self, event: &str, ms: u64) {
        if self.latency_threshold_ms > 0 && ms >= self.latency_threshold_ms {
            self.add_latency_sample(event, ms, crate::core::clock::now_ms() / 1000);
        }
    }

    /// One sample per second per event: a second sample within the same
    /// second keeps the larger latency.
    pub fn add_latency_sample(&mut self, event: &str, ms: u64, time: i64) {
        let e = self.latency.entry(event.to_string()).or_default();
        e.max = e.max.max(ms);
        if let Some(last) = e.samples.back_mut() {
            if last.time == time {
                last.ms = last.ms.max(ms);
                return;
            }
        }
        if e.samples.len() == LATENCY_TS_LEN {
            e.samples.pop_front();
        }
        e.samples.push_back(LatencySample { time, ms });
    }

    /// Microseconds one eviction round may take (`maxmemory-eviction-tenacity`):
    /// 50us per step up to 10, then 15% more per step, unlimited at 100.
    fn time_limit_us(&self) -> u64 {
        let t = self.tenacity.clamp(0, 100);
        if t <= 10 {
            50 * t as u64
        } else if t < 100 {
            (500.0 * 1.15f64.powi(t as i32 - 10)) as u64
        } else {
            u64::MAX
        }
    }
}

/// What the pre-command memory check concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evict {
    /// Under the limit, or freed enough.
    Ok,
    /// Still over the limit but the round ran out of time; commands go on.
    Running,
    /// Over the limit and nothing left to evict: deny-OOM commands fail.
    Fail,
}

impl State {
    /// Frees memory down to `maxmemory` by evicting keys under the policy,
    /// as Redis does before each command.
    pub fn perform_evictions(&mut self) -> Evict {
        let max = self.memory.maxmemory;
        if max == 0 || !self.may_evict() {
            return Evict::Ok;
        }
        let mut used = used_memory();
        if used > max {
            // Evicting keys would not shrink the replicas' output.
            used = used.saturating_sub(self.not_counted_memory());
        }
        if used <= max {
            if let Some(t) = self.memory.exceeded_since.take() {
                self.memory.exceeded_total_ms += t.elapsed().as_millis() as u64;
            }
            return Evict::Ok;
        }
        if self.memory.policy == Policy::NoEviction {
            return Evict::Fail;
        }
        let to_free = used - max;
        // The clock is read only when a round runs long enough to need it,
        // or for the latency monitor: at one eviction per SET, two clock
        // reads were 3% of the command.
        let mut start = (self.memory.latency_threshold_ms > 0).then(Instant::now);
        let limit = self.memory.time_limit_us();
        let mut freed = 0u64;
        let mut keys_freed = 0u64;
        let mut result = Evict::Ok;
        self.memory.round_output = Some(Vec::new());
        while freed < to_free {
            let Some((db, key)) = self.pick_victim() else {
                result = Evict::Fail;
                break;
            };
            let deleted = if self.memory.latency_threshold_ms > 0 {
                let del_start = Instant::now();
                let deleted = self.evict_key(db, &key);
                let del_ms = del_start.elapsed().as_millis() as u64;
                self.memory.latency_sample_if_needed("eviction-del", del_ms);
                deleted
            } else {
                self.evict_key(db, &key)
            };
            let Some(bytes) = deleted else {
                continue;
            };
            freed += bytes;
            keys_freed += 1;
            if keys_freed.is_multiple_of(16)
                && self.cfg.lazyfree_lazy_eviction
                && used_memory() <= max
            {
                break;
            }
            // A budget of 0 is spent by any 16 evictions: no clock needed.
            if keys_freed.is_multiple_of(16)
                && (limit == 0
                    || start.get_or_insert_with(Instant::now).elapsed().as_micros() as u64 > limit)
            {
                result = Evict::Running;
                break;
            }
        }
        self.write_round_output();
        if let Some(start) = start {
            let ms = start.elapsed().as_millis() as u64;
            self.memory.latency_sample_if_needed("eviction-cycle", ms);
        }

        if result == Evict::Running {
            self.start_eviction_proc();
        }
        if result != Evict::Ok && self.memory.exceeded_since.is_none() {
            self.memory.exceeded_since = Some(start.unwrap_or_else(Instant::now));
        } else if result == Evict::Ok {
            if let Some(t) = self.memory.exceeded_since.take() {
                self.memory.exceeded_total_ms += t.elapsed().as_millis() as u64;
            }
        }
        result
    }

    /// Writes the messages an eviction round queued for other clients to
    /// their sockets now, what each takes, as Redis's beforeSleep writes
    /// them before its next command. Left to the clients' tasks, which
    /// may wait for a core, they still counted at the next command's
    /// check, which evicted more keys and so queued more messages: 300
    /// tracked keys of 900 bytes and ten trackers lost 198 keys to a
    /// limit 40 KB under the memory in use (Redis 7.0.15: 37).
    fn write_round_output(&mut self) {
        for id in self.memory.round_output.take().unwrap_or_default() {
            let Some(cl) = self.clients.get_mut(&id) else {
                continue;
            };
            let queued = std::mem::take(&mut cl.pending);
            if queued.is_empty() || !cl.socket_is_next() {
                cl.pending = queued;
                continue;
            }
            let sent = crate::core::os::send_nowait(cl.fd, &queued);
            cl.pending = match sent == queued.len() {
                // Its room freed too: it counts in used_memory.
                true => bytes::BytesMut::new(),
                false => {
                    let mut rest = queued;
                    let _ = rest.split_to(sent);
                    rest
                }
            };
        }
    }

    /// Redis's eviction timer: a round that ran out of time goes on
    /// between commands, one round per round of the event loop, until
    /// memory is under the limit or nothing is left to evict.
    pub fn start_eviction_proc(&mut self) {
        if self.memory.proc_running {
            return;
        }
        let (Some(shared), Ok(rt)) = (self.shared.upgrade(), tokio::runtime::Handle::try_current())
        else {
            // No server around the state (unit tests): the next command evicts.
            return;
        };
        self.memory.proc_running = true;
        rt.spawn(async move {
            loop {
                crate::core::round::after().await;
                let mut st = shared.lock_eventually().await;
                if st.perform_evictions() != Evict::Running {
                    st.memory.proc_running = false;
                    return;
                }
            }
        });
    }

    /// Whether evicting is safe now, as in Redis: not while a dataset
    /// loads, not on a replica that ignores maxmemory (it holds exactly
    /// its master's keys, which deletes for it), not while clients are
    /// paused (the dataset stays as it is).
    fn may_evict(&self) -> bool {
        let loading = self.aof.loading || self.loading.as_ref().is_some_and(|l| !l.is_async);
        let follows_master = self.repl.master.is_some() && self.cfg.replica_ignore_maxmemory;
        !loading && !follows_master && self.pause.is_none()
    }

    /// Deletes an evicted key with the bookkeeping of any deletion: WATCH,
    /// client-side caching, the `evicted` event, the counter, and `DEL`
    /// propagated (as Redis 7.0: one unit per key). The value is freed
    /// here, so the memory it held is counted as freed at once, unless
    /// `lazyfree-lazy-eviction` sends a large one to the background (the
    /// loop then watches memory itself, as Redis's). Returns the bytes the deletion freed, measured before
    /// the bookkeeping, as Redis: the invalidation messages it queues for
    /// tracking clients must not count against it, or each eviction would
    /// call for more (a feedback loop emptying the keyspace).
    /// None if the key was deleted since it was sampled.
    fn evict_key(&mut self, db: usize, key: &[u8]) -> Option<u64> {
        let before = used_memory();
        let v = self.shard.dbs[db].remove(key)?;
        crate::state::lazyfree::drop_value(v, self.cfg.lazyfree_lazy_eviction);
        let freed = before.saturating_sub(used_memory());
        self.stats.evicted_keys += 1;
        self.server_deleted(db, key, crate::core::config::class::EVICTED, "evicted");
        Some(freed)
    }

    /// The next key to evict, or `None` if no key qualifies.
    fn pick_victim(&mut self) -> Option<(usize, CBytes)> {
        let policy = self.memory.policy;
        let mut rng = rand::thread_rng();
        if policy.random() {
            // Round-robin over the databases, a random key from each.
            let n = self.shard.dbs.len();
            for i in 0..n {
                let db = (self.memory.next_random_db + i) % n;
                let d = &self.shard.dbs[db];
                let key = if policy.volatile() {
                    d.random_volatile_key(&mut rng)
                } else {
                    d.random_key(&mut rng)
                };
                if let Some(k) = key {
                    self.memory.next_random_db = db + 1;
                    return Some((db, k));
                }
            }
            return None;
        }
        // Scores of another policy do not compare with this one's.
        let pool = &mut self.shard.evict_pool;
        if pool.policy != policy {
            pool.cands.clear();
            pool.policy = policy;
        }
        loop {
            let mut any = false;
            for db in 0..self.shard.dbs.len() {
                let d = &self.shard.dbs[db];
                let pool_len = if policy.volatile() {
                    d.expires_len()
                } else {
                    d.len()
                };
                if pool_len == 0 {
                    continue;
                }
                any = true;
                let pool = &mut self.shard.evict_pool.cands;
                d.sample_for_eviction(self.memory.samples, policy.volatile(), &mut rng, |k, s| {
                    let score = match policy {
                        Policy::AllkeysLru | Policy::VolatileLru => s.idle_ms,
                        Policy::AllkeysLfu | Policy::VolatileLfu => 255 - s.freq as u64,
                        // Sooner expiry first.
                        _ => u64::MAX - s.expire.unwrap_or(i64::MAX).max(0) as u64,
                    };
                    pool_insert(pool, score, db, k);
                });
            }
            if !any {
                return None;
            }
            // Best candidates are at the end. Under volatile-*, skip keys
            // that lost their TTL; a key deleted meanwhile is skipped by
            // the caller (its removal fails).
            while let Some(c) = self.shard.evict_pool.cands.pop() {
                if !policy.volatile() || self.shard.dbs[c.db].has_expire(&c.key) {
                    return Some((c.db, c.key));
                }
            }
        }
    }
}

/// Inserts a candidate into the pool kept sorted by ascending score; when
/// full, a candidate worse than all is dropped, else the worst makes room.
fn pool_insert(pool: &mut Vec<Candidate>, score: u64, db: usize, key: &[u8]) {
    let pos = pool.partition_point(|c| c.score < score);
    let full = pool.len() == POOL_SIZE;
    if (full && pos == 0) || pool.iter().any(|c| c.db == db && *c.key == *key) {
        return;
    }
    let key = CBytes::new(key);
    if full {
        pool.remove(0);
        pool.insert(pos - 1, Candidate { score, db, key });
    } else {
        pool.insert(pos, Candidate { score, db, key });
    }
}

/// An object's refcount as Redis shows it: the integers 0..9999 are shared
/// (INT_MAX) unless maxmemory with an LRU/LFU policy needs per-key access
/// data; every other value has its one owner.
pub fn refcount(cfg: &crate::core::config::Config, v: &storage::Value) -> i64 {
    let policy = cfg.maxmemory_policy;
    let shared_ok = cfg.maxmemory == 0 || !(policy.lru() || policy.lfu());
    match v {
        storage::Value::Str(storage::StrValue::Int(n)) if shared_ok && (0..10000).contains(n) => {
            i32::MAX as i64
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keeps_the_best_sixteen() {
        let mut pool = Vec::new();
        for i in 0..40u64 {
            let score = (i * 7) % 40;
            pool_insert(
                &mut pool,
                score,
                0,
                &CBytes::new(format!("k{score}").as_bytes()),
            );
        }
        let scores: Vec<u64> = pool.iter().map(|c| c.score).collect();
        assert_eq!(scores, (24..40).collect::<Vec<_>>());
        // Duplicates are not added twice.
        pool_insert(&mut pool, 39, 0, &CBytes::new(b"k39"));
        assert_eq!(pool.len(), 16);
    }

    #[test]
    fn tenacity_time_limits() {
        let mut m = Memory::default();
        assert_eq!(m.time_limit_us(), 500);
        m.tenacity = 0;
        assert_eq!(m.time_limit_us(), 0);
        m.tenacity = 11;
        assert_eq!(m.time_limit_us(), 575);
        m.tenacity = 100;
        assert_eq!(m.time_limit_us(), u64::MAX);
    }

    #[test]
    fn latency_samples_merge_within_a_second() {
        let mut m = Memory::default();
        m.add_latency_sample("command", 5, 100);
        m.add_latency_sample("command", 3, 100);
        m.add_latency_sample("command", 2, 101);
        let e = &m.latency["command"];
        assert_eq!(e.samples.len(), 2);
        assert_eq!(e.samples[0].ms, 5);
        assert_eq!(e.max, 5);
        for t in 0..200 {
            m.add_latency_sample("x", 1, t);
        }
        assert_eq!(m.latency["x"].samples.len(), LATENCY_TS_LEN);
    }
}
