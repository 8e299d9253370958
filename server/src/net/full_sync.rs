//! The replica's full sync: receiving the master's RDB (to a temporary
//! file, or straight to the parser, as `repl-diskless-load` says), parsing
//! it apart from the dataset, and putting it in the dataset's place.

use super::link_state::current;
use super::link_wire::read_more;
use crate::core::clock::now_ms;
use crate::state::persist::{LoadOpts, LoadProgress, Loading};
use crate::state::repl::Received;
use crate::state::{Shared, State};
use bytes::{Buf, Bytes, BytesMut};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use storage::rdb::{Input, LoadError, LoadSummary};
use storage::Db;
use tokio::io::AsyncRead;
use tokio::sync::mpsc;
use tracing::{info, warn};

/// How this replica takes its master's RDB (`repl-diskless-load`).
#[derive(Clone, Copy, PartialEq)]
enum LoadInto {
    /// Saved as this server's RDB file first, then loaded, as Redis does
    /// (`disabled`, and `on-empty-db` over data).
    Disk,
    /// Loaded from the socket into the emptied databases (`on-empty-db`).
    Emptied,
    /// Loaded from the socket beside the old data, which stays until the
    /// load succeeds and is kept if it fails (`swapdb`). Asynchronous when
    /// the master continues this replica's own history: clients go on
    /// using the old data meanwhile (`async_loading`), as it is an earlier
    /// point of the same dataset.
    Swap { is_async: bool },
}

/// Receives and loads the master's RDB (after its header line, `head`),
/// replacing the dataset; false if a newer REPLICAOF took over meanwhile.
/// The image is parsed without the lock, into databases of its own, while
/// the state shows the load (`loading`, or `async_loading`). It is parsed
/// as it arrives, or written to the RDB file as it arrives and parsed
/// from there: never held whole in memory.
pub(super) async fn full_sync<S: AsyncRead + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    buf: &mut BytesMut,
    head: &str,
    master_replid: &str,
    gen: u64,
) -> io::Result<bool> {
    let size = rdb_size(head)?;
    let Some(plan) = plan(shared, size, master_replid, gen).await else {
        return Ok(false);
    };
    let into = plan.into;
    let loaded = if into == LoadInto::Disk {
        match to_disk(shared, sock, buf, head, gen, plan).await? {
            Some(loaded) => loaded,
            None => return Ok(false),
        }
    } else {
        from_socket(shared, sock, buf, head, plan).await?
    };
    install(shared, gen, into, loaded).await
}

/// How a full sync of `size` bytes (none: up to an end mark) goes, as
/// [`plan`] set it up.
struct Plan {
    into: LoadInto,
    size: Option<usize>,
    progress: Arc<LoadProgress>,
    received: Option<Arc<Received>>,
    opts: LoadOpts,
    /// The number of databases.
    n: usize,
    /// This server's RDB file.
    path: PathBuf,
}

/// Chooses where the RDB goes, says so, and shows the load in the state
/// (at once when it is parsed from the socket, over the emptied dataset
/// for `on-empty-db`); none if a newer REPLICAOF took over.
async fn plan(
    shared: &Arc<Shared>,
    size: Option<usize>,
    master_replid: &str,
    gen: u64,
) -> Option<Plan> {
    let mut st = shared.lock_eventually().await;
    if !current(&st, gen) {
        return None;
    }
    let into = match st.cfg.repl_diskless_load.as_str() {
        "swapdb" => LoadInto::Swap {
            is_async: st.replid == master_replid,
        },
        "on-empty-db" if st.shard.dbs.iter().all(|d| d.is_empty()) => LoadInto::Emptied,
        _ => LoadInto::Disk,
    };
    let to = if into == LoadInto::Disk {
        "disk"
    } else {
        "parser"
    };
    match size {
        Some(n) => info!("MASTER <-> REPLICA sync: receiving {n} bytes from master to {to}"),
        None => {
            info!("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to {to}")
        }
    }
    let loading = Loading::new(size.unwrap_or(0) as u64);
    let progress = loading.progress.clone();
    if into != LoadInto::Disk {
        if into == LoadInto::Emptied {
            flush_old_data(&mut st);
        }
        info!("MASTER <-> REPLICA sync: Loading DB in memory");
        st.loading = Some(Loading {
            is_async: into == (LoadInto::Swap { is_async: true }),
            from_file: false,
            ..loading
        });
    }
    let received = st.repl.master.as_mut().and_then(|m| m.transfer.as_mut());
    let received = received.map(|t| {
        t.total = size.map_or(0, |n| n as i64);
        t.received.clone()
    });
    let opts = crate::state::persist::load_opts(&st, false).apart();
    let path = crate::state::persist::rdb_path(&st);
    Some(Plan {
        into,
        size,
        progress,
        received,
        opts,
        n: st.shard.dbs.len(),
        path,
    })
}

/// [`LoadInto::Disk`]: the RDB is written to a temporary file as it
/// arrives, which becomes this server's RDB file, then parsed from there;
/// none if a newer REPLICAOF took over meanwhile.
async fn to_disk<S: AsyncRead + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    buf: &mut BytesMut,
    head: &str,
    gen: u64,
    plan: Plan,
) -> io::Result<Option<Parsed>> {
    let Plan {
        size,
        progress,
        received,
        opts,
        n,
        path,
        ..
    } = plan;
    let (tx, rx) = mpsc::channel(16);
    let tmp = path.with_file_name(format!(
        "temp-{}.{}.rdb",
        now_ms() / 1000,
        std::process::id()
    ));
    // Created here, so that the name is gone however this ends:
    // renamed, failed, or dropped by a newer REPLICAOF mid-transfer
    // (whose own file may take the same name while the writer still
    // writes to this one).
    let file = std::fs::File::create(&tmp).map_err(|e| {
        io::Error::other(format!(
            "Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}"
        ))
    })?;
    let _unlink = Unlink(&tmp);
    let writer = tokio::task::spawn_blocking(move || write_chunks(file, rx));
    let got = pass_rdb(sock, buf, head, size, tx, received.as_deref()).await;
    let written = writer.await.map_err(io::Error::other)?;
    // `rdb-del-sync-files`: a replica that keeps no files of its own does
    // not keep its master's either, once loaded.
    let remove = {
        let mut st = shared.lock_eventually().await;
        let res = got.and(written).and_then(|()| {
            if !current(&st, gen) {
                return Ok(false);
            }
            std::fs::rename(&tmp, &path).map(|()| true).map_err(|e| {
                let name = &st.cfg.dbfilename;
                io::Error::other(format!("Failed trying to rename the temp DB into {name} in MASTER <-> REPLICA synchronization: {e}"))
            })
        });
        if !matches!(res, Ok(true)) {
            return res.map(|_| None);
        }
        flush_old_data(&mut st);
        info!("MASTER <-> REPLICA sync: Loading DB in memory");
        let len = std::fs::metadata(&path).map_or(0, |m| m.len());
        st.loading = Some(Loading {
            progress: progress.clone(),
            ..Loading::new(len)
        });
        st.cfg.rdb_del_sync_files && st.cfg.save.is_empty() && !st.cfg.appendonly
    };
    let loaded = tokio::task::spawn_blocking(move || {
        let loaded = match std::fs::File::open(&path) {
            Ok(mut f) => load_apart(n, Input::file(&mut f), &opts, &progress),
            Err(e) => {
                let e = LoadError {
                    msg: e.to_string(),
                    offset: 0,
                };
                (Err(e), Vec::new(), None)
            }
        };
        if remove && loaded.0.is_ok() {
            info!("Removing the RDB file obtained from the master. This replica has persistence disabled");
            let _ = std::fs::remove_file(&path);
        }
        loaded
    })
    .await
    .map_err(io::Error::other)?;
    Ok(Some(loaded))
}

/// The RDB parsed from the socket as it arrives; on a transfer's failure
/// the load ends and the parsed databases are discarded.
async fn from_socket<S: AsyncRead + Unpin>(
    shared: &Arc<Shared>,
    sock: &mut S,
    buf: &mut BytesMut,
    head: &str,
    plan: Plan,
) -> io::Result<Parsed> {
    let Plan {
        into,
        size,
        progress,
        opts,
        n,
        ..
    } = plan;
    let (tx, rx) = mpsc::channel(16);
    let prog = progress.clone();
    let parser = tokio::task::spawn_blocking(move || {
        let mut src = Chunks {
            rx,
            cur: Bytes::new(),
        };
        load_apart(n, Input::stream(&mut src, size), &opts, &prog)
    });
    let got = pass_rdb(sock, buf, head, size, tx, None).await;
    let loaded = parser.await.map_err(io::Error::other)?;
    if let Err(e) = got {
        let mut st = shared.lock_eventually().await;
        st.loading = None;
        warn!("Internal error in RDB reading offset {}, function at rdbLoad -> Unexpected EOF reading RDB file. Failure loading rdb format from socket, assuming connection error, resuming operation.", progress.loaded_bytes.load(Relaxed));
        warn!("Failed trying to load the MASTER synchronization DB from socket: {e}");
        if matches!(into, LoadInto::Swap { .. }) {
            info!("MASTER <-> REPLICA sync: Discarding temporary DB in background");
        }
        free_dbs(loaded.1);
        return Err(e);
    }
    Ok(loaded)
}

/// Ends the load: the parsed databases replace the dataset if they loaded
/// whole and this link is still the current REPLICAOF's.
async fn install(
    shared: &Arc<Shared>,
    gen: u64,
    into: LoadInto,
    loaded: Parsed,
) -> io::Result<bool> {
    let (res, dbs, engine) = loaded;
    let mut st = shared.lock_eventually().await;
    st.loading = None;
    if !current(&st, gen) {
        free_dbs(dbs);
        return Ok(false);
    }
    let sum = match res {
        Ok(sum) => sum,
        Err(e) => {
            warn!(
                "Internal error in RDB reading offset {}, function at rdbLoad -> {}",
                e.offset, e.msg
            );
            let from = if into == LoadInto::Disk {
                "disk"
            } else {
                "socket"
            };
            warn!("Failed trying to load the MASTER synchronization DB from {from}, check server logs.");
            if matches!(into, LoadInto::Swap { .. }) {
                info!("MASTER <-> REPLICA sync: Discarding temporary DB in background");
            }
            free_dbs(dbs);
            return Err(io::Error::other(format!("loading the master's RDB: {e}")));
        }
    };
    crate::cmd::replay::log_done(&sum);
    st.rdb.last_load_keys_loaded = sum.keys as u64;
    st.rdb.last_load_keys_expired = sum.expired as u64;
    if matches!(into, LoadInto::Swap { .. }) {
        info!("MASTER <-> REPLICA sync: Swapping active DB with loaded DB");
    }
    let old = replace_dataset(&mut st, dbs, engine);
    if matches!(into, LoadInto::Swap { .. }) {
        info!("MASTER <-> REPLICA sync: Discarding old DB in background");
    }
    free_dbs(old);
    Ok(true)
}

type Parsed = (
    Result<LoadSummary, LoadError>,
    Vec<Db>,
    Option<scripting::Engine>,
);

/// Parses `input` into `n` databases of their own (and an interpreter,
/// if it holds function libraries).
fn load_apart(n: usize, input: Input, opts: &LoadOpts, progress: &LoadProgress) -> Parsed {
    let mut dbs: Vec<Db> = (0..n).map(|_| Db::default()).collect();
    let mut engine = None;
    let res = crate::state::persist::load_dbs(&mut dbs, &mut engine, input, opts, Some(progress));
    (res, dbs, engine)
}

/// `repl-diskless-load disabled`: the master's RDB is written to a
/// temporary file as it arrives, then synced, to become this server's RDB
/// file, as Redis does.
fn write_chunks(mut f: std::fs::File, mut rx: mpsc::Receiver<Bytes>) -> io::Result<()> {
    while let Some(b) = rx.blocking_recv() {
        f.write_all(&b)?;
    }
    f.sync_all()
}

struct Unlink<'a>(&'a Path);

impl Drop for Unlink<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// The parser's side of the chunks `pass_rdb` sends: the end of the
/// channel is the end of the input.
struct Chunks {
    rx: mpsc::Receiver<Bytes>,
    cur: Bytes,
}

impl Read for Chunks {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(b) => self.cur = b,
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.cur.len());
        out[..n].copy_from_slice(&self.cur[..n]);
        self.cur.advance(n);
        Ok(n)
    }
}

/// The RDB's size from its header line: `$<len>` (disk-based sync), or
/// none for `$EOF:<40-byte mark>` (diskless), the image then ending with
/// the mark.
fn rdb_size(head: &str) -> io::Result<Option<usize>> {
    let bad = || {
        io::Error::other(format!("Bad protocol from MASTER, the first byte is not '$' (we received '{head}'), are you sure the host and port are right?"))
    };
    let spec = head.strip_prefix('$').ok_or_else(bad)?;
    match spec.strip_prefix("EOF:") {
        Some(mark) if mark.len() == 40 => Ok(None),
        Some(_) => Err(bad()),
        None => spec.parse().map(Some).map_err(|_| bad()),
    }
}

/// Empties the dataset before a load into it: the keys (freed in the
/// background with `replica-lazy-flush`, else here, as Redis) and the
/// function libraries.
fn flush_old_data(st: &mut State) {
    info!("MASTER <-> REPLICA sync: Flushing old data");
    let old = replace_dataset(st, Vec::new(), None);
    if st.cfg.replica_lazy_flush {
        free_dbs(old);
    }
}

/// Frees databases in the background (counted by their keys).
fn free_dbs(dbs: Vec<Db>) {
    let keys = dbs.iter().map(|d| d.len() as u64).sum();
    crate::state::lazyfree::lazy_free(dbs, keys);
}

/// Puts `dbs` (empty ones if there are fewer) and the libraries of
/// `engine` in place of the dataset, returning the old databases. WATCHed
/// keys there before or after count as changed, and clients tracking keys
/// are told to drop them all, as for a FLUSHALL.
fn replace_dataset(st: &mut State, dbs: Vec<Db>, engine: Option<scripting::Engine>) -> Vec<Db> {
    let mut new = dbs.into_iter();
    let mut old = Vec::with_capacity(st.shard.dbs.len());
    for i in 0..st.shard.dbs.len() {
        st.touch_all_watched(i, None);
        old.push(st.shard.dbs[i].take());
        st.shard.dbs[i].restore(new.next().unwrap_or_default());
        st.touch_all_watched(i, None);
    }
    st.invalidate_all();
    // The master's libraries replace ours, compiled again in the
    // interpreter clients use.
    let codes: Vec<Bytes> = engine
        .iter()
        .flat_map(|e| e.libraries.values().map(|l| l.code.clone()))
        .collect();
    if st.engine.is_none() && !codes.is_empty() {
        match scripting::Engine::new(st.script_run.clone()) {
            Ok(e) => st.engine = Some(e),
            Err(e) => warn!("Lua initialization failed: {e}"),
        }
    }
    if let Some(e) = st.engine.as_mut() {
        e.flush_functions();
        for code in &codes {
            if let Err(err) = e.load_library(code, true) {
                warn!("Failed loading the master's function library: {err}");
            }
        }
        crate::state::evict::set_vm_memory(e.vm_memory());
    }
    old
}

/// Passes the master's RDB to `tx` as it arrives: `size` bytes, or up to
/// the end mark the header line (`head`) gave, which comes last as the
/// master sends nothing more before this replica's first ACK (so the last
/// 40 bytes received are held back until more come). Stops early when the
/// receiver is gone: it failed, and says why. `received`, if given, counts
/// the bytes passed.
async fn pass_rdb<S: AsyncRead + Unpin>(
    sock: &mut S,
    buf: &mut BytesMut,
    head: &str,
    size: Option<usize>,
    tx: mpsc::Sender<Bytes>,
    received: Option<&Received>,
) -> io::Result<()> {
    const MARK: usize = 40;
    let mut sent = 0;
    loop {
        let (ready, done) = match size {
            Some(n) => {
                let ready = (n - sent).min(buf.len());
                (ready, sent + ready == n)
            }
            None if buf.ends_with(&head.as_bytes()[5..]) => (buf.len() - MARK, true),
            None => (buf.len().saturating_sub(MARK), false),
        };
        if ready > 0 {
            sent += ready;
            if tx.send(buf.split_to(ready).freeze()).await.is_err() {
                return Ok(());
            }
            if let Some(r) = received {
                r.bytes.store(sent as u64, Relaxed);
                r.last_io_s.store(now_ms() / 1000, Relaxed);
            }
        }
        if done {
            if size.is_none() {
                buf.advance(MARK);
            }
            break;
        }
        read_more(sock, buf).await?;
    }
    // What follows the image gets a buffer of its own: sharing the image's
    // last allocation would keep it for as long as the link lasts.
    *buf = BytesMut::from(&buf[..]);
    Ok(())
}
