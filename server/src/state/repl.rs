//! Replication, the master's side: the replication stream, its backlog and
//! offsets, and the replicas attached (their link state, what they
//! announced and acknowledged).
//!
//! [`Repl`] is the second consumer of the propagation stream
//! (`crate::core::propagate`), beside the AOF. Each finished unit is serialized
//! as Redis sends it to its replicas: `SELECT` when the database differs
//! from the last one sent, a unit of more than one op wrapped in
//! MULTI/EXEC. The bytes go to one buffer shared by the backlog and the
//! replicas, as Redis 7.0's: blocks of the stream, from the oldest byte
//! the backlog or a replica still needs. A replica is a position in it,
//! so N replicas cost one copy; its connection takes what follows its
//! position when woken (`State::repl_pull`), a write's worth at a time.
//! The backlog keeps at least `repl-backlog-size` bytes, and more while a
//! replica holds older ones (a slow one, or one waiting for its RDB); that
//! excess is the replicas' memory (INFO's `mem_clients_slaves`).
//!
//! A full sync is a BGSAVE (as Redis's disk-based sync): the replicas
//! waiting for it buffer the stream from its start, and get the file and
//! then their buffer when it ends. The stream exists only once a replica
//! has attached (Redis creates its backlog then), and nothing is collected
//! before.
//!
//! A writable replica's own keys with a TTL are here too: unlike its
//! master's keys, which expire through the master's DELs, they are its own
//! to expire.

use crate::core::command::keys::keys_for;
use crate::core::command::Meta;
use crate::core::propagate::Consumer;
use crate::state::State;
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

/// Where a replica's link is.
pub enum Link {
    /// Waits for a BGSAVE the snapshot engine cannot start yet.
    WaitBgsaveStart,
    /// Its BGSAVE runs (a diskless one streams to it meanwhile); the
    /// stream since its start waits in the buffer.
    WaitBgsaveEnd,
    /// The file of a disk-based sync is being sent.
    SendBulk(Bulk),
    /// A diskless RDB was sent: the stream waits for the replica's first
    /// REPLCONF ACK (it loaded the RDB from the socket meanwhile).
    WaitAck,
    /// It has its RDB and follows the stream.
    Online,
}

/// The file of a disk-based sync on its way to one replica. Its
/// connection reads the next piece each time it has written the last
/// (`State::repl_pull`), as it takes the stream: the transfer goes as fast
/// as the replica takes it, with one piece in memory.
pub struct Bulk {
    /// Shared by the replicas of one BGSAVE.
    pub file: std::sync::Arc<std::fs::File>,
    pub sent: u64,
    pub len: u64,
}

impl Bulk {
    /// The most of the file one pass of the connection sends.
    const PIECE: u64 = 64 * 1024;
    /// What is read when the socket is full, for the connection to wait
    /// on it with.
    const TAIL: u64 = 4 * 1024;

    /// Sends or queues the next piece; false once the file is all sent.
    /// With `sock` (a plain socket, nothing queued for it), the kernel
    /// copies the file to it as far as it takes it (sendfile), as a
    /// forked child's write would, and only when it takes less is a small
    /// piece more read into `out`. Else a piece is read into `out`: a
    /// whole one for TLS, which seals what it sends, a small one for a
    /// plain socket (the next pass finds nothing queued before the file).
    /// Either way the transfer holds at most that piece in memory.
    pub fn next(
        &mut self,
        out: &mut bytes::BytesMut,
        sock: Option<i32>,
        tls: bool,
    ) -> std::io::Result<bool> {
        use std::os::unix::fs::FileExt;
        let left = self.len - self.sent;
        if left == 0 {
            return Ok(false);
        }
        let mut want = left.min(if tls { Self::PIECE } else { Self::TAIL });
        if let Some(fd) = sock {
            let piece = left.min(Self::PIECE);
            let n = crate::core::os::sendfile_nowait(fd, &self.file, self.sent, piece as usize);
            self.sent += n as u64;
            if n as u64 == piece {
                return Ok(true);
            }
            want = (self.len - self.sent).min(Self::TAIL);
        }
        let start = out.len();
        out.resize(start + want as usize, 0);
        let n = self.file.read_at(&mut out[start..], self.sent);
        out.truncate(start + *n.as_ref().unwrap_or(&0));
        match n? {
            0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                self.sent += n as u64;
                Ok(true)
            }
        }
    }
}

/// What a connection announced with REPLCONF (kept on its client, from
/// before it asks for a sync).
#[derive(Default, Clone)]
pub struct Peer {
    /// REPLCONF listening-port.
    pub port: i64,
    /// REPLCONF ip-address.
    pub ip: Option<String>,
    /// REPLCONF rdb-only 1: it wants the RDB and nothing after
    /// (`redis-cli --rdb`).
    pub rdb_only: bool,
    /// REPLCONF rdb-filter-only functions: the RDB without the keys
    /// (`redis-cli --functions-rdb`).
    pub functions_only: bool,
    /// REPLCONF capa psync2: `+CONTINUE` names the replication ID.
    pub psync2: bool,
    /// REPLCONF capa eof: it reads an RDB of unknown length (diskless).
    pub eof: bool,
    /// It asked for a sync: a replica from then on.
    pub replica: bool,
    /// It is this server's master (its stream is applied).
    pub master: bool,
}

/// Where the link to this server's master is (ROLE's words).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum MasterState {
    Connect,
    Connecting,
    /// Connected, exchanging PING, AUTH, REPLCONF and PSYNC.
    Handshake,
    Sync,
    Connected,
}

/// This server's master (REPLICAOF host port).
pub struct Master {
    pub host: String,
    pub port: u16,
    /// Which REPLICAOF this is: a link task of an older one stops.
    pub gen: u64,
    /// The link task was started (by the server's cron).
    pub started: bool,
    pub state: MasterState,
    /// When the master was last heard from, and when the link went down
    /// (unix s; the latter 0 while the link has never been up).
    pub last_io_s: i64,
    pub down_since_s: i64,
    /// The database the master's stream last selected: a partial resync
    /// goes on without a SELECT (Redis keeps its cached master client).
    pub db: usize,
    /// Bytes of the master's stream read but not applied yet (a partial
    /// command, or the rest held back by CLIENT PAUSE WRITE).
    pub unapplied: u64,
    /// A full sync's RDB on its way (INFO's `master_sync_*` fields).
    pub transfer: Option<Transfer>,
    /// Dropped with this master: its link task, even while it waits on
    /// the socket (handshake, transfer), stops at once, as Redis cancels
    /// the handshake on REPLICAOF.
    pub ended: tokio::sync::watch::Sender<()>,
}

/// A full sync's RDB as INFO shows it, as Redis counts it: its size (-1
/// before the header line, 0 for the EOF-mark form), and the bytes written
/// to disk so far (none are counted while a load parses the socket).
pub struct Transfer {
    pub total: i64,
    pub received: Arc<Received>,
}

#[derive(Default)]
pub struct Received {
    pub bytes: AtomicU64,
    /// When the last of them came (unix s).
    pub last_io_s: AtomicI64,
}

impl MasterState {
    pub fn role_name(self) -> &'static str {
        match self {
            MasterState::Connect => "connect",
            MasterState::Connecting => "connecting",
            MasterState::Handshake => "handshake",
            MasterState::Sync => "sync",
            MasterState::Connected => "connected",
        }
    }
}

/// Where a FAILOVER is (INFO's `master_failover_state`).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub enum FailoverState {
    #[default]
    None,
    /// Writes are paused until a replica has the whole stream.
    WaitForSync,
    /// This server is becoming a replica of the target, which promotes
    /// itself on the PSYNC that says FAILOVER.
    InProgress,
}

impl FailoverState {
    pub fn name(self) -> &'static str {
        match self {
            FailoverState::None => "no-failover",
            FailoverState::WaitForSync => "waiting-for-sync",
            FailoverState::InProgress => "failover-in-progress",
        }
    }
}

/// A FAILOVER in progress.
#[derive(Default)]
pub struct Failover {
    pub state: FailoverState,
    /// TO host port; any replica otherwise.
    pub target: Option<(String, u16)>,
    /// TIMEOUT's end (unix ms), 0 without one.
    pub end_ms: i64,
    pub force: bool,
}

/// A replica attached to this master.
pub struct Replica {
    pub id: u64,
    pub link: Link,
    /// The address INFO and ROLE show: its announced IP, else its peer's.
    pub ip: String,
    pub port: i64,
    pub rdb_only: bool,
    /// It reads an RDB ended by a mark (`Peer::eof`).
    pub eof: bool,
    /// When it asked for its sync (unix s), for `repl-diskless-sync-delay`.
    pub since_s: i64,
    /// Asked with PSYNC: told `+FULLRESYNC` when its BGSAVE starts.
    pub psync: bool,
    /// The offset its RDB corresponds to.
    pub sync_offset: u64,
    /// The offset it acknowledged (REPLCONF ACK), and when (unix s).
    pub ack_offset: u64,
    pub ack_time_s: i64,
    /// Bytes other than the stream (the RDB, keep-alive newlines) for it
    /// while its connection was running (not in the client map); sent
    /// with the next bytes.
    pub held: Vec<u8>,
    /// The master offset of the stream it was given so far: its RDB's,
    /// or the one before its PSYNC's; it holds the buffer after it. `None` before its sync starts, and for `rdb_only`.
    pub cursor: Option<u64>,
    /// Its connection was woken for stream bytes and has not taken them
    /// yet: more bytes need no other wake-up.
    pub woken: bool,
}

impl Replica {
    pub fn state_name(&self) -> &'static str {
        match self.link {
            Link::WaitBgsaveStart | Link::WaitBgsaveEnd => "wait_bgsave",
            Link::SendBulk(_) => "send_bulk",
            Link::WaitAck | Link::Online => "online",
        }
    }
}

/// A client blocked in WAIT.
pub struct Waiter {
    pub id: u64,
    /// The master offset its writes reached.
    pub offset: u64,
    pub replicas: i64,
}

/// The limits in force: a replica's hard limit below `repl-backlog-size`
/// counts as that size, as Redis 7.0 has it: the bytes it holds are the
/// backlog's anyway, and a partial resync must not close it at once.
pub fn replica_limit_floor(
    mut limits: crate::state::pubsub::ObufLimits,
    backlog_size: i64,
) -> crate::state::pubsub::ObufLimits {
    let backlog = backlog_size.max(0) as u64;
    if limits.replica.hard > 0 && limits.replica.hard < backlog {
        limits.replica.hard = backlog;
    }
    limits
}

/// Bytes per block of the replication buffer (Redis's reply chunk).
const BLOCK: usize = 16 * 1024;
/// Room `Repl::fresh` keeps between units.
const FRESH_KEEP: usize = 64 * 1024;

/// Bytes held beyond the backlog's size for replicas being synced before
/// the oldest go to disk (`Repl::spill`): a write load's, not a few
/// commands'.
const SPILL_AT: u64 = 8 << 20;

/// The stream as the backlog and the replicas share it: full blocks but
/// the last, from master offset `start` (the byte after it is the first
/// held), and before them, the part moved to disk, if any.
struct ReplBuf {
    blocks: VecDeque<Vec<u8>>,
    start: u64,
    disk: Option<DiskPart>,
    /// The last block freed, for the next one: a steady stream then
    /// allocates nothing (a block made and freed every 16 KB kept the
    /// allocator emptying and refilling pages).
    spare: Option<Vec<u8>>,
}

/// The oldest part of the buffer, in an unlinked file: the stream from
/// master offset `start` to the buffer's.
struct DiskPart {
    file: std::fs::File,
    start: u64,
}

impl DiskPart {
    /// A file in the working directory (where the RDB and AOF go),
    /// unlinked at once: nothing is left behind if the server dies.
    fn create(start: u64) -> std::io::Result<DiskPart> {
        let name = format!("temp-repl-stream-{}.tmp", std::process::id());
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&name)?;
        std::fs::remove_file(&name)?;
        Ok(DiskPart { file, start })
    }
}

impl ReplBuf {
    fn new(offset: u64) -> ReplBuf {
        ReplBuf {
            blocks: VecDeque::new(),
            start: offset,
            disk: None,
            spare: None,
        }
    }

    /// The offset before the first byte held, on disk or in memory.
    fn first(&self) -> u64 {
        self.disk.as_ref().map_or(self.start, |d| d.start)
    }

    fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match self.blocks.back_mut().filter(|b| b.len() < BLOCK) {
                Some(b) => {
                    let n = bytes.len().min(BLOCK - b.len());
                    b.extend_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                }
                None => {
                    let block = self
                        .spare
                        .take()
                        .unwrap_or_else(|| Vec::with_capacity(BLOCK));
                    self.blocks.push_back(block);
                }
            }
        }
    }

    /// Drops the first block (the buffer starts after it), kept as the
    /// spare.
    fn recycle(&mut self) {
        if let Some(mut block) = self.blocks.pop_front() {
            self.start += block.len() as u64;
            block.clear();
            self.spare = Some(block);
        }
    }

    fn memory(&self) -> usize {
        let list = self.blocks.capacity() * std::mem::size_of::<Vec<u8>>();
        let spare = self.spare.as_ref().map_or(0, |b| b.capacity());
        list + spare + self.blocks.iter().map(|b| b.capacity()).sum::<usize>()
    }

    /// See `Repl::copy_stream`; `from` must be within the buffer. What is
    /// on disk comes up to where the memory starts (a read error copies
    /// nothing).
    fn copy(&self, from: u64, max: usize, out: &mut bytes::BytesMut) -> usize {
        if let (Some(d), true) = (&self.disk, from < self.start) {
            use std::os::unix::fs::FileExt;
            let Some(at) = from.checked_sub(d.start) else {
                return 0;
            };
            let n = ((self.start - from) as usize).min(max);
            let old = out.len();
            out.resize(old + n, 0);
            let read = d.file.read_exact_at(&mut out[old..], at);
            out.truncate(if read.is_ok() { old + n } else { old });
            return out.len() - old;
        }
        let Some(skip) = from.checked_sub(self.start).map(|d| d as usize) else {
            return 0;
        };
        let (mut copied, mut at) = (0, skip % BLOCK);
        for b in self.blocks.iter().skip(skip / BLOCK) {
            let part = b.get(at..).unwrap_or_default();
            let n = part.len().min(max - copied);
            out.extend_from_slice(&part[..n]);
            copied += n;
            at = 0;
            if copied == max {
                break;
            }
        }
        copied
    }
}

/// The replication state of this server as a master.
pub struct Repl {
    /// `master_repl_offset`: stream bytes produced since start.
    pub offset: u64,
    /// The buffer of the backlog and the replicas; `None` until a replica
    /// first attaches.
    backlog: Option<ReplBuf>,
    backlog_size: usize,
    /// The offset the replicas were last told about (`State::repl_deliver`).
    pub delivered: u64,
    /// The database the stream last selected; `None` makes the next op
    /// select again (after a full sync starts).
    pub sel_db: Option<usize>,
    /// The unit being serialized, before it joins the buffer.
    fresh: Vec<u8>,
    pub replicas: Vec<Replica>,
    /// The running BGSAVE was started for replicas: to disk, or streamed
    /// to their sockets (diskless).
    pub bgsave_for_replicas: bool,
    pub bgsave_diskless: bool,
    /// The RDB file was written to feed replicas (`rdb-del-sync-files`).
    pub rdb_for_replicas: bool,
    /// The stream held for replicas may go to disk (`Repl::spill`): set by
    /// a full sync, until its replicas have caught up.
    pub spill: bool,
    pub waiters: Vec<Waiter>,
    /// This server's master, when it is a replica.
    pub master: Option<Master>,
    pub failover: Failover,
    /// PSYNC2: the replication ID this server had before its last change
    /// of history (a promotion), valid up to `second_offset`.
    pub replid2: Option<String>,
    pub second_offset: i64,
    /// The master's stream is being applied (its commands see expired
    /// keys as present).
    pub applying: bool,
    /// REPLICAOF calls so far (`Master::gen`).
    pub gens: u64,
    /// `replicaof` from the config was acted on (at the first cron).
    pub configured: bool,
    /// The database the master's stream had selected, from the RDB loaded
    /// at start-up: the configured master's link resumes in it.
    pub resume_db: Option<usize>,
    /// Since when (unix s) no replica is attached, for `repl-backlog-ttl`.
    pub no_replicas_since_s: i64,
    /// Seconds counted by the cron (PING period), and the second it last
    /// ran in.
    pub cron_loops: u64,
    pub cron_second: i64,
    /// INFO stats: full syncs served, partial ones served and refused.
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
}

impl Default for Repl {
    fn default() -> Self {
        Repl {
            offset: 0,
            backlog: None,
            backlog_size: 1 << 20,
            delivered: 0,
            sel_db: None,
            fresh: Vec::new(),
            replicas: Vec::new(),
            bgsave_for_replicas: false,
            rdb_for_replicas: false,
            bgsave_diskless: false,
            spill: false,
            waiters: Vec::new(),
            master: None,
            failover: Failover::default(),
            replid2: None,
            second_offset: -1,
            applying: false,
            gens: 0,
            configured: false,
            resume_db: None,
            no_replicas_since_s: 0,
            cron_loops: 0,
            cron_second: 0,
            sync_full: 0,
            sync_partial_ok: 0,
            sync_partial_err: 0,
        }
    }
}

impl Repl {
    /// Creates the backlog if there is none; true when it did (the
    /// replication ID then changes, as Redis's).
    pub fn ensure_backlog(&mut self, size: i64) -> bool {
        self.backlog_size = size.max(1) as usize;
        if self.backlog.is_some() {
            return false;
        }
        self.backlog = Some(ReplBuf::new(self.offset));
        true
    }

    /// A new, empty backlog (a replica's full sync): the stream goes on
    /// from the master's offset.
    pub fn reset_backlog(&mut self, size: i64, offset: u64) {
        self.backlog_size = size.max(1) as usize;
        self.backlog = Some(ReplBuf::new(offset));
        self.offset = offset;
        self.delivered = offset;
        self.replid2 = None;
        self.second_offset = -1;
    }

    /// A replica relays its master's stream as it applies it: into its
    /// backlog and to its own replicas.
    pub fn proxy(&mut self, bytes: &[u8]) {
        self.fresh.extend_from_slice(bytes);
        self.account();
    }

    /// The history changes ID (a promotion, or a master that did): the
    /// old one stays valid for PSYNC up to the current offset.
    pub fn shift_id(&mut self, old: String) {
        self.replid2 = Some(old);
        self.second_offset = self.offset as i64 + 1;
    }

    /// Whether PSYNC's `replid` at `offset` is this server's history.
    pub fn knows(&self, ours: &str, replid: &[u8], offset: i64) -> bool {
        replid == ours.as_bytes()
            || (self
                .replid2
                .as_ref()
                .is_some_and(|r| replid == r.as_bytes())
                && offset <= self.second_offset)
    }

    /// What a snapshot records of the replication position (Redis's
    /// `rdbPopulateSaveInfo`): a master with a backlog, or a replica that
    /// has synced with its master, at the database its stream selected.
    pub fn save_info(&self, replid: &str) -> Option<storage::rdb::ReplAux> {
        self.backlog.as_ref()?;
        let db = match &self.master {
            Some(m) => m.db,
            None => self.sel_db.unwrap_or(0),
        };
        Some(storage::rdb::ReplAux {
            db,
            id: replid.as_bytes().try_into().ok()?,
            offset: self.offset,
        })
    }

    /// Takes the position an RDB file recorded (its `repl-*` aux fields),
    /// if they are all there and valid.
    pub fn loaded_info(aux: &[(Vec<u8>, Vec<u8>)]) -> Option<storage::rdb::ReplAux> {
        let field = |name: &str| {
            aux.iter()
                .rev()
                .find(|(k, _)| k == name.as_bytes())
                .map(|(_, v)| v.as_slice())
        };
        let num =
            |name: &str| -> Option<i64> { std::str::from_utf8(field(name)?).ok()?.parse().ok() };
        Some(storage::rdb::ReplAux {
            db: num("repl-stream-db")?.try_into().ok()?,
            id: field("repl-id")?.try_into().ok()?,
            offset: num("repl-offset")?.try_into().ok()?,
        })
    }

    /// `repl-backlog-size` changed.
    pub fn resize_backlog(&mut self, size: i64) {
        self.backlog_size = size.max(1) as usize;
        self.trim();
    }

    pub fn backlog_active(&self) -> bool {
        self.backlog.is_some()
    }

    /// The backlog's last `n` bytes (what a replica logs of the stream
    /// when a command from its master failed).
    pub fn backlog_tail(&self, n: usize) -> Vec<u8> {
        let mut out = bytes::BytesMut::new();
        if let Some(b) = &self.backlog {
            b.copy(
                self.offset.saturating_sub(n as u64).max(b.start),
                n,
                &mut out,
            );
        }
        out.to_vec()
    }

    /// Frees the backlog (`repl-backlog-ttl` passed without replicas).
    pub fn free_backlog(&mut self) {
        self.backlog = None;
    }

    /// Whether the backlog holds the stream from PSYNC's `offset` on (the
    /// next byte the replica wants, counted from 1).
    pub fn holds(&self, offset: u64) -> bool {
        self.backlog
            .as_ref()
            .is_some_and(|b| offset > b.first() && offset <= self.offset + 1)
    }

    /// (first byte offset, bytes held) as INFO shows them.
    pub fn backlog_span(&self) -> (u64, u64) {
        match &self.backlog {
            Some(b) => (b.first() + 1, self.offset - b.first()),
            None => (0, 0),
        }
    }

    /// Bytes the buffer takes (`mem_total_replication_buffers`).
    pub fn buffer_memory(&self) -> usize {
        self.backlog.as_ref().map_or(0, |b| b.memory())
    }

    /// The part of the buffer beyond `repl-backlog-size`: held for
    /// replicas only. Redis counts it as theirs (`mem_clients_slaves`) and
    /// leaves it out of what eviction weighs (`mem_not_counted_for_evict`).
    pub fn replicas_memory(&self) -> usize {
        self.buffer_memory().saturating_sub(self.backlog_size)
    }

    /// The buffer's memory as Redis reports it: (the backlog's, the
    /// replicas'); the part beyond `repl-backlog-size` is the replicas'
    /// while there are some.
    pub fn memory_split(&self) -> (usize, usize) {
        let replicas = if self.replicas.is_empty() {
            0
        } else {
            self.replicas_memory()
        };
        (self.buffer_memory() - replicas, replicas)
    }

    /// Copies the stream from `from` (a master offset) into `out`, at
    /// most `max` bytes; how many it copied.
    pub fn copy_stream(&self, from: u64, max: usize, out: &mut bytes::BytesMut) -> usize {
        self.backlog.as_ref().map_or(0, |b| b.copy(from, max, out))
    }

    /// There are stream bytes the replicas were not told about.
    pub fn undelivered(&self) -> bool {
        self.delivered != self.offset
    }

    /// Frees the blocks neither the backlog nor a replica needs: the
    /// backlog keeps more than `repl-backlog-size` bytes, and each
    /// replica what follows its cursor.
    pub fn trim(&mut self) {
        let Some(b) = &mut self.backlog else {
            return;
        };
        let needed = self
            .replicas
            .iter()
            .filter_map(|r| r.cursor)
            .min()
            .unwrap_or(u64::MAX);
        if needed >= b.start {
            b.disk = None;
        }
        let syncing = |r: &Replica| !matches!(r.link, Link::WaitAck | Link::Online);
        if b.disk.is_none() && !self.replicas.iter().any(syncing) {
            self.spill = false;
        }
        while b.blocks.len() > 1 {
            let first = b.blocks[0].len() as u64;
            if self.offset - b.start - first <= self.backlog_size as u64 || b.start + first > needed
            {
                break;
            }
            b.recycle();
        }
        // The list of a buffer that grew for a slow replica is given back
        // too.
        if b.blocks.capacity() > 4 * b.blocks.len().max(16) {
            b.blocks.shrink_to(2 * b.blocks.len());
        }
    }

    /// While replicas of a full sync (to disk or diskless) wait for their
    /// RDB and load it, the stream they buffer meanwhile goes to disk past
    /// [`SPILL_AT`] beyond the backlog's size, the oldest blocks first:
    /// they read it back in order. A master that forks holds it all in
    /// memory, on top of the pages its writes copy; this one, fork-less,
    /// would hold little else. The writes go to the page cache as the
    /// AOF's do; the backlog's own bytes stay in memory. If the file
    /// cannot be made or written, the bytes stay in memory too.
    fn spill(&mut self) {
        let Some(b) = &mut self.backlog else {
            return;
        };
        let window = self.backlog_size as u64;
        if !self.spill || self.offset - b.start < window + SPILL_AT {
            return;
        }
        while b.blocks.len() > 1 && self.offset - b.start - (b.blocks[0].len() as u64) >= window {
            if b.disk.is_none() {
                match DiskPart::create(b.start) {
                    Ok(d) => b.disk = Some(d),
                    Err(e) => {
                        tracing::warn!("Replication buffer kept in memory: {e}");
                        self.spill = false;
                        return;
                    }
                }
            }
            let d = b.disk.as_ref().expect("made above");
            let at = b.start - d.start;
            if let Err(e) = std::os::unix::fs::FileExt::write_all_at(&d.file, &b.blocks[0], at) {
                tracing::warn!("Replication buffer kept in memory: {e}");
                self.spill = false;
                return;
            }
            b.recycle();
        }
    }

    fn emit(&mut self, db: Option<usize>, args: &[Bytes]) {
        if let Some(db) = db.filter(|&d| self.sel_db != Some(d)) {
            let n = Bytes::copy_from_slice(itoa::Buffer::new().format(db).as_bytes());
            protocol::write_command(&mut self.fresh, &[Bytes::from_static(b"SELECT"), n]);
            self.sel_db = Some(db);
        }
        protocol::write_command(&mut self.fresh, args);
    }

    /// Moves the unit serialized in `fresh` to the buffer.
    fn account(&mut self) {
        self.offset += self.fresh.len() as u64;
        if let Some(b) = &mut self.backlog {
            b.push(&self.fresh);
            self.trim();
            self.spill();
        }
        self.fresh.clear();
        // A large write's room is given back: kept, a 32 MB SET held 64 MB
        // here for good (the backlog has its copy).
        if self.fresh.capacity() > FRESH_KEEP {
            self.fresh = Vec::new();
        }
    }

    /// An op outside any database (PING, REPLCONF GETACK): no SELECT.
    pub fn feed_plain(&mut self, args: &[Bytes]) {
        if !self.wants() {
            return;
        }
        self.emit(None, args);
        self.account();
    }

    pub fn replica_mut(&mut self, id: u64) -> Option<&mut Replica> {
        self.replicas.iter_mut().find(|r| r.id == id)
    }

    /// Online replicas heard from within `max_lag` seconds
    /// (`min-replicas-max-lag`). One that has its diskless RDB and has not
    /// acknowledged it yet counts, as in Redis, where it is online already
    /// (a write right after the sync must not get -NOREPLICAS).
    pub fn good_replicas(&self, now_s: i64, max_lag: i64) -> i64 {
        self.replicas
            .iter()
            .filter(|r| {
                matches!(r.link, Link::WaitAck | Link::Online) && now_s - r.ack_time_s <= max_lag
            })
            .count() as i64
    }

    /// Replicas that acknowledged `offset`.
    pub fn acked(&self, offset: u64) -> i64 {
        self.replicas
            .iter()
            .filter(|r| matches!(r.link, Link::Online) && r.ack_offset >= offset)
            .count() as i64
    }

    /// A closed connection: no longer a replica, nor waiting.
    pub fn forget(&mut self, id: u64) {
        self.replicas.retain(|r| r.id != id);
        self.waiters.retain(|w| w.id != id);
        self.trim();
    }

    /// The WAIT of client `id` ends (timeout): the replicas that acked.
    pub fn end_wait(&mut self, id: u64) -> i64 {
        let Some(i) = self.waiters.iter().position(|w| w.id == id) else {
            return 0;
        };
        let w = self.waiters.remove(i);
        self.acked(w.offset)
    }
}

impl Consumer for Repl {
    /// A replica sends its replicas nothing of its own (as Redis, whose
    /// replicas only relay their master's stream).
    fn wants(&self) -> bool {
        self.backlog.is_some() && self.master.is_none()
    }

    fn feed(&mut self, unit: &crate::core::propagate::Unit) {
        let unit = crate::core::propagate::only(unit, crate::core::propagate::AOF_ONLY);
        if unit.len() > 1 {
            self.emit(Some(unit[0].0), &[Bytes::from_static(b"MULTI")]);
            for (db, a) in unit.iter() {
                self.emit(Some(*db), a);
            }
            self.emit(None, &[Bytes::from_static(b"EXEC")]);
        } else if let Some((db, a)) = unit.first() {
            self.emit(Some(*db), a);
        }
        self.account();
    }
}

/// After a write of a client other than the master on a writable replica:
/// its keys that now have a TTL are this replica's to expire. As in Redis,
/// only the first 64 databases are tracked (a bit each).
pub fn remember_own_expires(st: &mut State, db: usize, cmd: &'static Meta, args: &[Bytes]) {
    if db >= 64 {
        return;
    }
    let Ok(keys) = keys_for(cmd, args) else {
        return;
    };
    for (i, _) in keys {
        let key = &args[i];
        if st.shard.dbs[db].expire_at(key).is_some() {
            *st.shard
                .replica_keys_with_expire
                .get_or_insert_with(key, || 0) |= 1 << db;
        }
    }
}

/// The replica's active expiry, of its own keys only (the master's expire
/// through its DELs): random tracked keys are checked, the expired
/// deleted, and those no longer having a TTL forgotten, for about a
/// millisecond per cron tick, as Redis's `expireSlaveKeys`.
pub fn expire_own_keys(st: &mut State, now: i64) {
    let start = std::time::Instant::now();
    let mut rng = rand::thread_rng();
    let mut cycles = 0u32;
    while let Some((key, &dbs)) = st.shard.replica_keys_with_expire.random(&mut rng) {
        let key = key.to_vec();
        let mut keep = 0u64;
        for db in (0..st.shard.dbs.len().min(64)).filter(|d| dbs >> d & 1 == 1) {
            if let Some(v) = st.shard.dbs[db].expire_if_needed(&key, now) {
                crate::state::lazyfree::drop_value(v, st.cfg.lazyfree_lazy_expire);
                st.expired(db, &key);
            } else if st.shard.dbs[db].expire_at(&key).is_some() {
                keep |= 1 << db;
            }
        }
        if keep == 0 {
            st.shard.replica_keys_with_expire.remove(&key);
        } else if let Some(bits) = st.shard.replica_keys_with_expire.get_mut(&key) {
            *bits = keep;
        }
        cycles += 1;
        if cycles.is_multiple_of(64) && start.elapsed() > Duration::from_millis(1) {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(s: &str) -> crate::core::propagate::Op {
        s.split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn units_as_redis_sends_them() {
        let mut r = Repl::default();
        assert!(!r.wants(), "nothing before a replica attaches");
        r.ensure_backlog(1 << 20);
        r.feed(&[(0, &op("set a 1")[..])]);
        r.feed(&[(3, &op("set x 1")[..]), (0, &op("set y 2")[..])]);
        r.feed_plain(&[Bytes::from_static(b"PING")]);
        let mut all = bytes::BytesMut::new();
        assert_eq!(r.copy_stream(0, usize::MAX, &mut all), r.offset as usize);
        let s = String::from_utf8(all.to_vec())
            .unwrap()
            .replace("\r\n", " ");
        assert_eq!(
            s,
            "*2 $6 SELECT $1 0 *3 $3 set $1 a $1 1 *2 $6 SELECT $1 3 *1 $5 MULTI \
             *3 $3 set $1 x $1 1 *2 $6 SELECT $1 0 *3 $3 set $1 y $1 2 *1 $4 EXEC *1 $4 PING "
        );
        assert_eq!(r.backlog_span(), (1, r.offset));
        assert_eq!(r.backlog_tail(6), b"PING\r\n");
    }

    /// The backlog keeps `repl-backlog-size` bytes and whole blocks; a
    /// replica's cursor keeps what follows it, and only one copy.
    #[test]
    fn one_buffer_for_the_backlog_and_the_replicas() {
        let mut r = Repl::default();
        r.ensure_backlog(BLOCK as i64);
        let value = Bytes::from(vec![b'x'; 1000]);
        let set = |r: &mut Repl| r.feed(&[(0, &[Bytes::from_static(b"SET"), value.clone()])]);
        for _ in 0..100 {
            set(&mut r);
        }
        let (first, hist) = r.backlog_span();
        assert!(hist > BLOCK as u64 && hist <= 2 * BLOCK as u64, "{hist}");
        assert_eq!(first + hist, r.offset + 1);
        assert_eq!(r.replicas_memory(), r.buffer_memory() - BLOCK);
        // A replica stopped at the current offset holds everything after.
        let at = r.offset;
        r.replicas.push(Replica {
            id: 1,
            link: Link::Online,
            ip: String::new(),
            port: 0,
            rdb_only: false,
            eof: false,
            since_s: 0,
            psync: true,
            sync_offset: at,
            ack_offset: 0,
            ack_time_s: 0,
            held: Vec::new(),
            cursor: Some(at),
            woken: false,
        });
        for _ in 0..200 {
            set(&mut r);
        }
        assert!(r.holds(at + 1) && r.backlog_span().0 <= at + 1);
        assert!(r.buffer_memory() >= (r.offset - at) as usize);
        let mut out = bytes::BytesMut::new();
        assert_eq!(r.copy_stream(at, 5, &mut out), 5);
        assert_eq!(&out[..], b"*2\r\n$");
        // Gone: back to about the backlog's size.
        r.forget(1);
        assert!(r.backlog_span().1 <= 2 * BLOCK as u64);
        assert!(!r.holds(at + 1));
        r.resize_backlog(10);
        assert!(r.backlog_span().1 <= BLOCK as u64);
    }
}
