//! The append-only file, in Redis 7.0's multi-part layout.
//!
//! `dir/appenddirname/` holds a base file (`<appendfilename>.<n>.base.rdb`,
//! an RDB snapshot), incremental files (`<appendfilename>.<n>.incr.aof`,
//! commands in RESP) and the manifest naming them
//! (`file <name> seq <n> type b|i` lines).
//!
//! # What is written
//! The dispatcher calls [`after_command`] once per command. A command that
//! moved the dirty counter is logged, in the form Redis 7.0 propagates:
//! relative expiry made absolute (`PEXPIREAT`, `SET … PXAT`), results of
//! float increments as SET/HSET, SPOP as SREM, blocking and multi-key pops
//! as their plain forms (the popped key read back from the reply), expired
//! keys as `DEL`. Commands nested in one top-level command (EXEC, scripts,
//! SPOP with a count) form one unit; a unit of more than one command is
//! wrapped in MULTI/EXEC. `SELECT` is written when the database differs
//! from the last one written.
//!
//! # Durability without holding the lock
//! Units are serialized into `Aof::buf` under the state lock; the logical
//! offset grows with it. At the end of a connection's batch the buffer is
//! handed to the writer thread ([`Aof::submit`]), which writes it and, for
//! `appendfsync always`, fsyncs and publishes the synced offset. A
//! connection whose batch wrote waits for `synced >= its offset` before it
//! sends its replies: one fsync covers every batch queued meanwhile (group
//! commit), and the lock is never held across a write or an fsync.
//! `everysec` fsyncs from the writer thread once a second; `no` never.

use crate::state::{now_ms, Client, State};
use bytes::{Bytes, BytesMut};
use protocol::{Decoder, Frame, ReplyBuf};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::{info, warn};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fsync {
    Always,
    #[default]
    Everysec,
    No,
}

impl Fsync {
    fn of(s: &str) -> Fsync {
        match s {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::Everysec,
        }
    }
}

/// The files the manifest lists.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Manifest {
    /// (name, seq); the base may be `.rdb` (preamble) or `.aof`.
    pub base: Option<(String, u64)>,
    pub incrs: Vec<(String, u64)>,
    /// History files (type h), listed only until they are deleted.
    pub history: Vec<(String, u64)>,
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || format!("Invalid AOF manifest file format (>>> '{line}')");
            let words: Vec<&str> = line.split_whitespace().collect();
            if !words.len().is_multiple_of(2) {
                return Err(bad());
            }
            let (mut name, mut seq, mut ty) = (None, None, None);
            for kv in words.chunks(2) {
                match kv[0] {
                    "file" => name = Some(kv[1].to_string()),
                    "seq" => seq = kv[1].parse::<u64>().ok(),
                    "type" => ty = Some(kv[1]),
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(ty)) = (name, seq, ty) else {
                return Err(bad());
            };
            match ty {
                "b" => {
                    if m.base.is_some() {
                        return Err("Found duplicate base file information".into());
                    }
                    m.base = Some((name, seq))
                }
                "i" => m.incrs.push((name, seq)),
                "h" => m.history.push((name, seq)),
                _ => return Err(bad()),
            }
        }
        if m.base.is_none() && m.incrs.is_empty() {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(m)
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        if let Some((n, q)) = &self.base {
            s.push_str(&format!("file {n} seq {q} type b\n"));
        }
        for (n, q) in &self.history {
            s.push_str(&format!("file {n} seq {q} type h\n"));
        }
        for (n, q) in &self.incrs {
            s.push_str(&format!("file {n} seq {q} type i\n"));
        }
        s
    }
}

/// What the writer thread is handed.
enum Item {
    /// Bytes and the logical offset at their end.
    Data(Vec<u8>, u64),
    /// Continue in this file (after a rewrite), fsyncing the old one first.
    Switch(File),
}

struct Queue {
    items: VecDeque<Item>,
    policy: Fsync,
    /// Skip fsyncs (no-appendfsync-on-rewrite while a rewrite runs).
    hold_fsync: bool,
    stop: bool,
}

/// The writer thread's side, shared with the state.
pub struct Io {
    q: Mutex<Queue>,
    cv: Condvar,
    /// The offset known to be on disk (published after each fsync).
    synced: watch::Sender<u64>,
    /// The offset handed to the kernel (survives a crash of the process).
    written: watch::Sender<u64>,
    pub write_ok: AtomicBool,
    pub delayed_fsync: std::sync::atomic::AtomicU64,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Io {
    fn start(file: File, policy: Fsync, offset: u64) -> Arc<Io> {
        let io = Arc::new(Io {
            q: Mutex::new(Queue {
                items: VecDeque::new(),
                policy,
                hold_fsync: false,
                stop: false,
            }),
            cv: Condvar::new(),
            synced: watch::channel(offset).0,
            written: watch::channel(offset).0,
            write_ok: AtomicBool::new(true),
            delayed_fsync: Default::default(),
            thread: Mutex::new(None),
        });
        let me = io.clone();
        let h = std::thread::Builder::new()
            .name("aof-writer".into())
            .spawn(move || me.run(file, offset))
            .expect("spawn the AOF writer thread");
        *io.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
        io
    }

    fn push(&self, item: Item) {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        match (q.items.back_mut(), item) {
            (Some(Item::Data(d, end)), Item::Data(more, e)) => {
                d.extend_from_slice(&more);
                *end = e;
            }
            (_, item) => q.items.push_back(item),
        }
        drop(q);
        self.cv.notify_one();
    }

    fn set_policy(&self, p: Fsync, hold: bool) {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        q.policy = p;
        q.hold_fsync = hold;
    }

    /// Writes what is queued, fsyncs, and ends the thread.
    fn stop(&self) {
        self.q.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        self.cv.notify_one();
        if let Some(h) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }

    fn run(&self, mut file: File, start: u64) {
        let mut written = start;
        let mut synced = start;
        let mut last_sync = Instant::now();
        loop {
            let (items, policy, hold, stop) = {
                let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if !q.items.is_empty() || q.stop {
                        break;
                    }
                    let wait = if written > synced && q.policy == Fsync::Everysec {
                        let due = Duration::from_secs(1).saturating_sub(last_sync.elapsed());
                        if due.is_zero() {
                            break;
                        }
                        due
                    } else {
                        Duration::from_secs(1)
                    };
                    q = self
                        .cv
                        .wait_timeout(q, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                (std::mem::take(&mut q.items), q.policy, q.hold_fsync, q.stop)
            };
            for item in items {
                match item {
                    Item::Data(d, end) => {
                        // A failed write is retried: an acknowledged
                        // `always` write must never be skipped.
                        while let Err(e) = file.write_all(&d) {
                            if self.write_ok.swap(false, Ordering::Relaxed) {
                                warn!("Error writing to the AOF file: {e}");
                            }
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        if !self.write_ok.swap(true, Ordering::Relaxed) {
                            info!("AOF write error looks solved, Redis can write again.");
                        }
                        written = end;
                    }
                    Item::Switch(f) => {
                        let _ = file.sync_data();
                        file = f;
                        synced = written;
                        self.synced.send_replace(synced);
                    }
                }
            }
            let due = match policy {
                Fsync::Always => written > synced,
                Fsync::Everysec => {
                    written > synced && last_sync.elapsed() >= Duration::from_secs(1)
                }
                Fsync::No => false,
            };
            if (due && !hold) || stop {
                if let Err(e) = file.sync_data() {
                    warn!("Can't persist AOF for fsync error when the AOF fsync policy is 'always': {e}");
                } else {
                    synced = written;
                    last_sync = Instant::now();
                }
            }
            self.written.send_replace(written);
            self.synced.send_replace(synced);
            if stop {
                break;
            }
        }
    }
}

/// The AOF state under the lock.
#[derive(Default)]
pub struct Aof {
    /// Appending (appendonly yes and the files are open).
    pub on: bool,
    /// Start-up loading is over; config changes may start or stop the AOF.
    pub ready: bool,
    pub loading: bool,
    pub policy: Fsync,
    /// Serialized units not yet handed to the writer.
    pub buf: Vec<u8>,
    /// Bytes ever appended (the writer's offsets).
    pub offset: u64,
    /// The database the last written command ran in.
    pub sel_db: Option<usize>,
    /// Nesting of `execute` calls: a unit ends at depth 0.
    pub depth: u32,
    /// Commands of the running unit, with their database.
    pub ops: Vec<(usize, Vec<Bytes>)>,
    pub io: Option<Arc<Io>>,
    pub manifest: Manifest,
    pub base_size: u64,
    pub incr_size: u64,
    /// Size at the last rewrite (auto-aof-rewrite-percentage's reference).
    pub rewrite_base_size: u64,
    pub rewrites: u64,
    pub last_rewrite_ms: i64,
    pub last_rewrite_ok: bool,
    pub rewrite_failures: u64,
}

/// Where a command started: what `after_command` compares against.
#[derive(Clone, Copy)]
pub struct Mark {
    pub dirty: u64,
    pub db: usize,
    pub reply: usize,
}

fn resp(buf: &mut Vec<u8>, args: &[Bytes]) {
    let mut ib = itoa::Buffer::new();
    buf.push(b'*');
    buf.extend_from_slice(ib.format(args.len()).as_bytes());
    buf.extend_from_slice(b"\r\n");
    for a in args {
        buf.push(b'$');
        buf.extend_from_slice(ib.format(a.len()).as_bytes());
        buf.extend_from_slice(b"\r\n");
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn num(n: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

impl Aof {
    fn emit(&mut self, db: usize, args: &[Bytes]) {
        let before = self.buf.len();
        if self.sel_db != Some(db) {
            resp(&mut self.buf, &[b("SELECT"), num(db as i64)]);
            self.sel_db = Some(db);
        }
        resp(&mut self.buf, args);
        let n = (self.buf.len() - before) as u64;
        self.offset += n;
        self.incr_size += n;
    }

    /// Writes the finished unit, wrapped in MULTI/EXEC if it has more than
    /// one command.
    fn end_unit(&mut self) {
        let ops = std::mem::take(&mut self.ops);
        if ops.len() > 1 {
            self.emit(ops[0].0, &[b("MULTI")]);
            for (db, a) in &ops {
                self.emit(*db, a);
            }
            let db = self.sel_db.unwrap_or(0);
            self.emit(db, &[b("EXEC")]);
        } else if let Some((db, a)) = ops.first() {
            self.emit(*db, a);
        }
        self.ops = ops;
        self.ops.clear();
    }

    /// Hands the buffered bytes to the writer thread.
    pub fn submit(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        match &self.io {
            Some(io) => io.push(Item::Data(std::mem::take(&mut self.buf), self.offset)),
            None => self.buf.clear(),
        }
    }

    /// Ends a connection's batch: submits its writes and says what to wait
    /// for before replying: under `appendfsync always` the fsync, otherwise
    /// the write(2), so that, as in Redis, a crash of the process never
    /// loses an acknowledged write (only a crash of the machine can).
    pub fn commit(&mut self, mark: u64, had_pending: bool) -> Option<(watch::Receiver<u64>, u64)> {
        self.submit();
        if self.offset == mark && !had_pending {
            return None;
        }
        let io = self.io.as_ref()?;
        let rx = if self.policy == Fsync::Always {
            io.synced.subscribe()
        } else {
            io.written.subscribe()
        };
        Some((rx, self.offset))
    }
}

/// Waits until the AOF is on disk up to `offset`.
pub async fn wait_synced(mut rx: watch::Receiver<u64>, offset: u64) {
    let _ = rx.wait_for(|&v| v >= offset).await;
}

impl State {
    /// Logs a command in the running unit (or alone, outside any command:
    /// active expiry).
    pub fn propagate(&mut self, db: usize, args: Vec<Bytes>) {
        if !self.aof.on || self.aof.loading {
            return;
        }
        self.aof.ops.push((db, args));
        if self.aof.depth == 0 {
            self.aof.end_unit();
        }
    }

    /// An expired key is logged as its deletion.
    pub fn propagate_expired(&mut self, db: usize, key: &[u8]) {
        if self.aof.on {
            self.propagate(db, vec![b("DEL"), Bytes::copy_from_slice(key)]);
        }
    }
}

/// Called by the dispatcher before the handler.
pub fn before_command(st: &mut State, cl: &Client, reply: usize) -> Mark {
    st.aof.depth += 1;
    Mark {
        dirty: st.dirty,
        db: cl.db,
        reply,
    }
}

/// Commands whose effect is logged by the commands they run.
fn is_container(name: &str) -> bool {
    matches!(
        name,
        "exec" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// Called by the dispatcher after the handler: logs the command (or its
/// rewritten form) if it changed data, and ends the unit at top level.
pub fn after_command(st: &mut State, name: &str, args: &[Bytes], m: Mark, out: &ReplyBuf) {
    st.aof.depth = st.aof.depth.saturating_sub(1);
    if !st.aof.on || st.aof.loading {
        return;
    }
    if st.dirty > m.dirty && !is_container(name) {
        let reply = out.buf.get(m.reply..).unwrap_or(&[]);
        let ops = propagated_form(st, name, args, m.db, reply);
        for a in ops {
            st.aof.ops.push((m.db, a));
        }
    }
    if st.aof.depth == 0 {
        st.aof.end_unit();
    }
}

fn upper_eq(a: &[u8], w: &str) -> bool {
    a.eq_ignore_ascii_case(w.as_bytes())
}

fn frame_bytes(f: &Frame) -> Option<Bytes> {
    match f {
        Frame::Bulk(b) | Frame::Simple(b) => Some(b.clone()),
        Frame::Integer(i) => Some(num(*i)),
        _ => None,
    }
}

fn frame_items(f: &Frame) -> Option<&[Frame]> {
    match f {
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => Some(v),
        _ => None,
    }
}

/// The absolute-expiry form of a key's TTL, or its deletion when gone.
fn expiry_or_del(st: &State, db: usize, key: &Bytes, extra: &[Bytes]) -> Vec<Bytes> {
    let d = &st.dbs[db];
    if !d.contains(key) {
        return vec![b("DEL"), key.clone()];
    }
    match d.expire_at(key) {
        Some(t) => {
            let mut v = vec![b("PEXPIREAT"), key.clone(), num(t)];
            v.extend_from_slice(extra);
            v
        }
        None => vec![b("PERSIST"), key.clone()],
    }
}

/// Redis 7.0's propagated form of a command that changed data.
fn propagated_form(
    st: &State,
    name: &str,
    a: &[Bytes],
    db: usize,
    reply: &[u8],
) -> Vec<Vec<Bytes>> {
    let parsed = || protocol::parse_reply(reply).map(|(f, _)| f);
    let one = |v: Vec<Bytes>| vec![v];
    match name {
        "expire" | "pexpire" | "expireat" | "pexpireat" if a.len() >= 3 => {
            one(expiry_or_del(st, db, &a[1], &a[3..]))
        }
        "getex" if a.len() >= 3 => {
            let v = expiry_or_del(st, db, &a[1], &[]);
            one(v)
        }
        "getdel" => one(vec![b("DEL"), a[1].clone()]),
        "getset" => one(vec![b("SET"), a[1].clone(), a[2].clone()]),
        "setex" | "psetex" if a.len() == 4 => one(set_pxat(st, db, &a[1], &a[3])),
        "set"
            if a.len() > 3
                && a[3..]
                    .iter()
                    .any(|o| ["ex", "px", "exat", "pxat"].iter().any(|w| upper_eq(o, w))) =>
        {
            one(set_pxat(st, db, &a[1], &a[2]))
        }
        "set" if a.len() > 3 && a[3..].iter().any(|o| upper_eq(o, "get")) => {
            let mut v: Vec<Bytes> = a.to_vec();
            v.retain(|o| !upper_eq(o, "get"));
            one(v)
        }
        "incrbyfloat" => match parsed().as_ref().and_then(frame_bytes) {
            Some(v) => one(vec![b("SET"), a[1].clone(), v, b("KEEPTTL")]),
            None => one(a.to_vec()),
        },
        "hincrbyfloat" => match parsed().as_ref().and_then(frame_bytes) {
            Some(v) => one(vec![b("HSET"), a[1].clone(), a[2].clone(), v]),
            None => one(a.to_vec()),
        },
        "spop" => {
            if !st.dbs[db].contains(&a[1]) {
                return one(vec![b("DEL"), a[1].clone()]);
            }
            let f = parsed();
            match f.as_ref() {
                Some(Frame::Bulk(m)) => one(vec![b("SREM"), a[1].clone(), m.clone()]),
                Some(f) => frame_items(f)
                    .unwrap_or(&[])
                    .iter()
                    .filter_map(frame_bytes)
                    .map(|m| vec![b("SREM"), a[1].clone(), m])
                    .collect(),
                None => vec![],
            }
        }
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => {
            let key = parsed()
                .as_ref()
                .and_then(frame_items)
                .and_then(|v| v.first().and_then(frame_bytes));
            let cmd = match name {
                "blpop" => "LPOP",
                "brpop" => "RPOP",
                "bzpopmin" => "ZPOPMIN",
                _ => "ZPOPMAX",
            };
            match key {
                Some(k) => one(vec![b(cmd), k]),
                None => vec![],
            }
        }
        "blmove" if a.len() == 6 => one(vec![
            b("LMOVE"),
            a[1].clone(),
            a[2].clone(),
            a[3].clone(),
            a[4].clone(),
        ]),
        "brpoplpush" if a.len() == 4 => one(vec![b("RPOPLPUSH"), a[1].clone(), a[2].clone()]),
        "lmpop" | "blmpop" | "zmpop" | "bzmpop" => {
            let f = parsed();
            let items = f.as_ref().and_then(frame_items);
            let (Some(key), Some(n)) = (
                items.and_then(|v| v.first().and_then(frame_bytes)),
                items
                    .and_then(|v| v.get(1).and_then(frame_items))
                    .map(|v| v.len()),
            ) else {
                return vec![];
            };
            // The direction word is the first argument after the keys.
            let first = if name.starts_with('b') { 2 } else { 1 };
            let nkeys = a
                .get(first)
                .and_then(|n| storage::num::parse_i64(n))
                .unwrap_or(0)
                .max(0) as usize;
            let dir = a.get(first + 1 + nkeys).cloned().unwrap_or_default();
            let cmd = if name.ends_with("zmpop") {
                if upper_eq(&dir, "max") {
                    "ZPOPMAX"
                } else {
                    "ZPOPMIN"
                }
            } else if upper_eq(&dir, "right") {
                "RPOP"
            } else {
                "LPOP"
            };
            one(vec![b(cmd), key, num(n as i64)])
        }
        "restore" if a.len() >= 4 => {
            let absttl = a[4..].iter().any(|o| upper_eq(o, "absttl"));
            if absttl || storage::num::parse_i64(&a[2]) == Some(0) {
                return one(a.to_vec());
            }
            match st.dbs[db].expire_at(&a[1]) {
                Some(t) => {
                    let mut v = a.to_vec();
                    v[2] = num(t);
                    v.push(b("ABSTTL"));
                    one(v)
                }
                None => one(a.to_vec()),
            }
        }
        _ => one(a.to_vec()),
    }
}

fn set_pxat(st: &State, db: usize, key: &Bytes, val: &Bytes) -> Vec<Bytes> {
    match st.dbs[db].expire_at(key) {
        Some(t) => vec![b("SET"), key.clone(), val.clone(), b("PXAT"), num(t)],
        None => vec![b("SET"), key.clone(), val.clone()],
    }
}

// ---------------------------------------------------------------- files

pub fn aof_dir(st: &State) -> PathBuf {
    PathBuf::from(st.cfg.str("dir")).join(st.cfg.str("appenddirname"))
}

fn fname(st: &State) -> String {
    st.cfg.str("appendfilename").to_string()
}

fn fsync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

fn write_manifest(dir: &Path, name: &str, m: &Manifest) -> io::Result<()> {
    let tmp = dir.join(format!("temp-{name}.manifest"));
    let mut f = File::create(&tmp)?;
    f.write_all(m.render().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(format!("{name}.manifest")))?;
    fsync_dir(dir);
    Ok(())
}

fn open_append(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Writes a new base file from the current dataset and starts a new incr
/// file; the old files are deleted once the manifest names the new ones.
///
/// The base is written under the state lock: clients pause for the
/// duration of the snapshot.
pub fn rewrite(st: &mut State) -> io::Result<()> {
    let start = Instant::now();
    let dir = aof_dir(st);
    std::fs::create_dir_all(&dir)?;
    let name = fname(st);
    let old = st.aof.manifest.clone();
    let base_seq = old.base.as_ref().map_or(0, |b| b.1) + 1;
    let incr_seq = old.incrs.iter().map(|i| i.1).max().unwrap_or(0) + 1;
    let base_name = format!("{name}.{base_seq}.base.rdb");
    let incr_name = format!("{name}.{incr_seq}.incr.aof");
    let tmp = dir.join(format!("temp-rewriteaof-{}.aof", std::process::id()));
    let res = (|| {
        let f = File::create(&tmp)?;
        let f = crate::persist::write_snapshot(st, io::BufWriter::with_capacity(1 << 16, f))?;
        let f = f.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(&base_name))?;
        let incr = File::create(dir.join(&incr_name))?;
        fsync_dir(&dir);
        let m = Manifest {
            base: Some((base_name.clone(), base_seq)),
            incrs: vec![(incr_name.clone(), incr_seq)],
            history: vec![],
        };
        // What is buffered predates the new base: it goes to the old file.
        st.aof.submit();
        write_manifest(&dir, &name, &m)?;
        Ok((m, incr))
    })();
    let (m, incr) = match res {
        Ok(x) => x,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            st.aof.last_rewrite_ok = false;
            st.aof.rewrite_failures += 1;
            warn!("Error rewriting the append only file: {e}");
            return Err(e);
        }
    };
    let incr = {
        // Append mode for the writer.
        drop(incr);
        open_append(&dir.join(&incr_name))?
    };
    match &st.aof.io {
        Some(io) => io.push(Item::Switch(incr)),
        None if st.aof.ready && st.cfg.flag("appendonly") => {
            st.aof.io = Some(Io::start(incr, st.aof.policy, st.aof.offset));
            st.aof.on = true;
        }
        None => {}
    }
    // The new incr file must say which database it starts in.
    st.aof.sel_db = None;
    for (n, _) in old.base.iter().chain(&old.incrs).chain(&old.history) {
        if *n != base_name && *n != incr_name {
            let _ = std::fs::remove_file(dir.join(n));
        }
    }
    st.aof.manifest = m;
    st.aof.base_size = std::fs::metadata(dir.join(&base_name)).map_or(0, |m| m.len());
    st.aof.incr_size = 0;
    st.aof.rewrite_base_size = st.aof.base_size;
    st.aof.rewrites += 1;
    st.aof.last_rewrite_ms = start.elapsed().as_millis() as i64;
    st.aof.last_rewrite_ok = true;
    st.aof.rewrite_failures = 0;
    info!("Background AOF rewrite finished successfully");
    Ok(())
}

/// Stops appending: what is queued is written and fsynced.
pub fn stop(st: &mut State) {
    st.aof.submit();
    if let Some(io) = st.aof.io.take() {
        io.stop();
    }
    st.aof.on = false;
    st.aof.sel_db = None;
}

/// Shutdown: the AOF is fsynced before exiting.
pub fn shutdown(st: &mut State) {
    if st.aof.on {
        info!("Calling fsync() on the AOF file.");
        stop(st);
    }
}

/// Follows `appendonly`/`appendfsync` after a configuration change.
pub fn config_changed(st: &mut State) {
    st.aof.policy = Fsync::of(st.cfg.str("appendfsync"));
    if !st.aof.ready {
        return;
    }
    if let Some(io) = &st.aof.io {
        io.set_policy(st.aof.policy, false);
    }
    let want = st.cfg.flag("appendonly");
    if want && !st.aof.on {
        // As Redis: a rewrite writes the base, then appending starts.
        info!("Background append only file rewriting started");
        if rewrite(st).is_err() {
            warn!("Redis needs to enable the AOF but can't trigger a background AOF rewrite operation.");
        }
    } else if !want && st.aof.on {
        stop(st);
    }
}

/// From the cron: hands over what active expiry logged and checks the
/// automatic rewrite.
pub fn cron(st: &mut State) {
    if !st.aof.on {
        return;
    }
    st.aof.submit();
    let pct = st.cfg.int("auto-aof-rewrite-percentage");
    let min = st.cfg.int("auto-aof-rewrite-min-size").max(0) as u64;
    let size = st.aof.base_size + st.aof.incr_size;
    if pct > 0 && size > min {
        let base = st.aof.rewrite_base_size.max(1);
        let growth = (size.saturating_sub(base)) * 100 / base;
        if growth >= pct as u64 {
            info!("Starting automatic rewriting of AOF on {}% growth", growth);
            let _ = rewrite(st);
        }
    }
}

// ---------------------------------------------------------------- loading

/// Replays RESP commands through the dispatcher. Returns the offset after
/// the last complete command (before an unfinished MULTI) and whether the
/// data ended in the middle of a command.
fn replay(st: &mut State, data: &[u8]) -> Result<(usize, bool), String> {
    let mut dec = Decoder::new(i64::MAX);
    let mut buf = BytesMut::from(data);
    let total = data.len();
    let mut cl = Client::new(0, String::new(), String::new(), -1, true);
    cl.deny_blocking = true;
    let mut out = ReplyBuf::new(false);
    let mut valid = 0;
    let mut before_multi = None;
    loop {
        if buf.first().is_some_and(|&c| c != b'*') {
            return Err(format!(
                "Bad file format reading the append only file (offset {})",
                total - buf.len()
            ));
        }
        match dec.decode(&mut buf) {
            Ok(Some(args)) => {
                if args.is_empty() {
                    continue;
                }
                let at = total - buf.len();
                if crate::cmd::resolve(&args).is_err() {
                    return Err(format!(
                        "Unknown command '{}' reading the append only file",
                        String::from_utf8_lossy(&args[0])
                    ));
                }
                let is_multi = upper_eq(&args[0], "multi");
                let is_exec = upper_eq(&args[0], "exec");
                if is_multi {
                    before_multi = Some(valid);
                }
                st.last_tick = Instant::now();
                crate::cmd::execute(st, &mut cl, &mut out, &args);
                out.buf.clear();
                if is_exec {
                    before_multi = None;
                }
                valid = at;
            }
            Ok(None) => break,
            Err(e) => return Err(format!("Bad file format reading the append only file: {e}")),
        }
    }
    // The decoder keeps a partial command's bytes itself: what was not
    // consumed by a complete command is the cut tail.
    let truncated = valid != total;
    if cl.multi.is_some() {
        // An unfinished transaction is dropped with the cut tail.
        return Ok((before_multi.unwrap_or(0), true));
    }
    Ok((valid, truncated))
}

fn load_file(st: &mut State, dir: &Path, name: &str, last: bool) -> Result<(), String> {
    let path = dir.join(name);
    let data = std::fs::read(&path).map_err(|e| {
        format!(
            "Unable to obtain the AOF file {name} length. stat: {}",
            io_msg(&e)
        )
    })?;
    let start = Instant::now();
    let kind = if name.contains(".base.") {
        "base"
    } else {
        "incr"
    };
    if data.starts_with(b"REDIS") {
        info!("Reading RDB base file on AOF loading...");
        let sum = crate::persist::load_bytes(st, &data).map_err(|e| {
            format!(
                "Bad file format reading the append only file {name}: {}",
                crate::persist::describe(&e, &data)
            )
        })?;
        info!("RDB is base AOF");
        info!(
            "Done loading RDB, keys loaded: {}, keys expired: {}.",
            sum.keys, sum.expired
        );
    } else {
        let (valid, truncated) = replay(st, &data)?;
        if truncated {
            if !last || !st.cfg.flag("aof-load-truncated") {
                return Err(format!("Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."));
            }
            warn!("!!! Warning: short read while loading the AOF file {name}!!!");
            warn!("!!! Truncating the AOF {name} at offset {valid} !!!");
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| e.to_string())?;
            f.set_len(valid as u64).map_err(|e| e.to_string())?;
            let _ = f.sync_all();
            warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
        }
    }
    info!(
        "DB loaded from {kind} file {name}: {:.3} seconds",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn io_msg(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "No such file or directory".into(),
        _ => e.to_string(),
    }
}

/// Start-up with `appendonly yes`: the AOF is the dataset (the RDB file is
/// not read). Without a manifest the server starts empty and creates a
/// base and an incr file, as Redis does.
pub fn load_at_startup(st: &mut State) -> Result<(), String> {
    st.aof.policy = Fsync::of(st.cfg.str("appendfsync"));
    let dir = aof_dir(st);
    let name = fname(st);
    let mpath = dir.join(format!("{name}.manifest"));
    let text = match std::fs::read_to_string(&mpath) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("Can't open the AOF manifest {name}.manifest: {e}")),
    };
    let start = Instant::now();
    let res = match text {
        None => {
            st.aof.ready = true;
            let r = rewrite_at_start(st);
            st.aof.rewrites = 0;
            r
        }
        Some(t) => {
            let m = Manifest::parse(&t)?;
            let files: Vec<String> = m
                .base
                .iter()
                .chain(&m.incrs)
                .map(|(n, _)| n.clone())
                .collect();
            // Every file must be there before anything is loaded.
            for f in &files {
                std::fs::metadata(dir.join(f)).map_err(|e| {
                    format!(
                        "Unable to obtain the AOF file {f} length. stat: {}",
                        io_msg(&e)
                    )
                })?;
            }
            st.aof.loading = true;
            let n = files.len();
            for (i, f) in files.iter().enumerate() {
                load_file(st, &dir, f, i + 1 == n)?;
            }
            st.aof.loading = false;
            info!(
                "DB loaded from append only file: {:.3} seconds",
                start.elapsed().as_secs_f64()
            );
            st.aof.base_size = m
                .base
                .as_ref()
                .and_then(|b| std::fs::metadata(dir.join(&b.0)).ok())
                .map_or(0, |x| x.len());
            st.aof.manifest = m;
            open_last_incr(st, &dir, &name)
        }
    };
    st.aof.ready = true;
    res
}

fn rewrite_at_start(st: &mut State) -> Result<(), String> {
    let name = fname(st);
    let seq = 1;
    info!("Creating AOF base file {name}.{seq}.base.rdb on server start");
    info!("Creating AOF incr file {name}.{seq}.incr.aof on server start");
    rewrite(st).map_err(|e| format!("Can't create the AOF files: {e}"))
}

fn open_last_incr(st: &mut State, dir: &Path, name: &str) -> Result<(), String> {
    let mut m = st.aof.manifest.clone();
    let (incr, new) = match m.incrs.last() {
        Some((n, _)) => {
            info!("Opening AOF incr file {n} on server start");
            (n.clone(), false)
        }
        None => {
            let seq = m.incrs.iter().map(|i| i.1).max().unwrap_or(0) + 1;
            let n = format!("{name}.{seq}.incr.aof");
            info!("Creating AOF incr file {n} on server start");
            m.incrs.push((n.clone(), seq));
            (n, true)
        }
    };
    let path = dir.join(&incr);
    let f =
        open_append(&path).map_err(|e| format!("Can't open the append-only file {incr}: {e}"))?;
    if new {
        write_manifest(dir, name, &m).map_err(|e| e.to_string())?;
        st.aof.manifest = m;
    }
    st.aof.incr_size = f.metadata().map_or(0, |x| x.len());
    st.aof.rewrite_base_size = st.aof.base_size + st.aof.incr_size;
    st.aof.io = Some(Io::start(f, st.aof.policy, st.aof.offset));
    st.aof.on = true;
    st.aof.sel_db = None;
    Ok(())
}

/// INFO persistence's aof_* fields.
pub fn info(st: &State) -> Vec<String> {
    let a = &st.aof;
    let mut v = vec![
        format!("aof_enabled:{}", a.on as u8),
        "aof_rewrite_in_progress:0".to_string(),
        "aof_rewrite_scheduled:0".to_string(),
        format!(
            "aof_last_rewrite_time_sec:{}",
            if a.rewrites > 0 {
                a.last_rewrite_ms / 1000
            } else {
                -1
            }
        ),
        "aof_current_rewrite_time_sec:-1".to_string(),
        format!(
            "aof_last_bgrewrite_status:{}",
            if a.last_rewrite_ok || a.rewrites == 0 && a.rewrite_failures == 0 {
                "ok"
            } else {
                "err"
            }
        ),
        format!("aof_rewrites:{}", a.rewrites),
        format!("aof_rewrites_consecutive_failures:{}", a.rewrite_failures),
        format!(
            "aof_last_write_status:{}",
            if a.io
                .as_ref()
                .is_none_or(|io| io.write_ok.load(Ordering::Relaxed))
            {
                "ok"
            } else {
                "err"
            }
        ),
        "aof_last_cow_size:0".to_string(),
    ];
    if a.on {
        v.push(format!("aof_current_size:{}", a.base_size + a.incr_size));
        v.push(format!("aof_base_size:{}", a.base_size));
        v.push("aof_pending_rewrite:0".to_string());
        v.push(format!("aof_buffer_length:{}", a.buf.len()));
        v.push("aof_pending_bio_fsync:0".to_string());
        v.push(format!(
            "aof_delayed_fsync:{}",
            a.io.as_ref()
                .map_or(0, |io| io.delayed_fsync.load(Ordering::Relaxed))
        ));
    }
    v
}

/// The current time, for callers without a command clock.
pub fn wall_now() -> i64 {
    now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.render(), text);
        assert!(Manifest::parse("garbage line").is_err());
        assert!(Manifest::parse("").is_err());
    }

    #[test]
    fn resp_form() {
        let mut v = Vec::new();
        resp(&mut v, &[b("SET"), b("k"), b("")]);
        assert_eq!(v, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }
}
