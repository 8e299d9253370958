//! What belongs to the data rather than to the whole server: the
//! databases (their keys per hash slot in cluster mode, see `storage::Db`),
//! the clients blocked on their keys and the keys made ready, the WATCH
//! table, and a writable replica's own keys with a TTL. One shard for now;
//! the seam lets a later step serve several, each by itself.

use ahash::AHashMap as HashMap;
use bytes::Bytes;
use std::collections::VecDeque;
use storage::Db;

pub struct Shard {
    pub dbs: Vec<Db>,
    /// Blocked client ids per (db, key), first come first served.
    pub blocking: HashMap<(usize, Bytes), VecDeque<u64>>,
    /// Keys with blocked clients that a command may have made servable.
    pub ready_keys: Vec<(usize, Bytes)>,
    /// WATCHed keys and the clients watching them.
    pub watched: HashMap<(usize, Bytes), Vec<u64>>,
    /// A writable replica's own keys with a TTL (see `repl`).
    pub replica_keys_with_expire: storage::Dict<u64>,
}

impl Shard {
    /// `n` empty databases.
    pub fn new(n: usize) -> Shard {
        Shard {
            dbs: (0..n).map(|_| Db::default()).collect(),
            blocking: HashMap::new(),
            ready_keys: Vec::new(),
            watched: HashMap::new(),
            replica_keys_with_expire: storage::Dict::new(),
        }
    }
}
