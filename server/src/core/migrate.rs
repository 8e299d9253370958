//! MIGRATE's connections to target servers, kept for reuse as Redis keeps
//! them: one per `host:port`, closed after 10 idle seconds, at most 64.

use std::collections::HashMap;
use std::net::TcpStream;

/// How long an unused connection is kept (ms).
const IDLE_MS: i64 = 10_000;
const MAX: usize = 64;

pub struct Link {
    pub sock: TcpStream,
    /// The database the last SELECT chose on the target.
    pub db: Option<i64>,
    pub last_use_ms: i64,
}

#[derive(Default)]
pub struct Links {
    map: HashMap<String, Link>,
}

impl Links {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn take(&mut self, target: &str) -> Option<Link> {
        self.map.remove(target)
    }

    /// Keeps `link` for the next MIGRATE to `target`; when the cache is
    /// full an arbitrary other link is closed for it.
    pub fn put(&mut self, target: String, link: Link) {
        if self.map.len() >= MAX {
            if let Some(k) = self.map.keys().next().cloned() {
                self.map.remove(&k);
            }
        }
        self.map.insert(target, link);
    }

    /// The cron's part: closes links unused for [`IDLE_MS`].
    pub fn close_idle(&mut self, now_ms: i64) {
        self.map.retain(|_, l| now_ms - l.last_use_ms <= IDLE_MS);
    }
}
