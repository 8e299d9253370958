//! Client memory and client eviction (`maxmemory-clients`): what a client's
//! buffers and bookkeeping cost (CLIENT LIST's `tot-mem`), the limit the
//! option sets, and which clients go when the clients' total passes it.
//! A leaf: `State` (state.rs) feeds it the clients and evicts them.
//!
//! The costs per watched key, channel, pattern and prefix were measured on
//! Redis 7.0.15 (`tot-mem` before and after 1,000 of each).

/// The idle query buffer and reply buffer every client has, and the client
/// itself: `tot-mem` of an idle client.
const BASE: usize = 37632;
const PER_WATCHED_KEY: usize = 40;
const PER_CHANNEL: usize = 18;
const PER_PATTERN: usize = 10;
const PER_PREFIX: usize = 20;

/// The `maxmemory-clients` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Limit {
    #[default]
    Off,
    Bytes(u64),
    /// A percentage of `maxmemory`.
    Percent(u64),
}

impl Limit {
    /// From the option's canonical text (`0`, `<bytes>` or `<n>%`).
    pub fn parse(canon: &str) -> Limit {
        match canon.strip_suffix('%') {
            Some(p) => Limit::Percent(p.parse().unwrap_or(0)),
            None => match canon.parse().unwrap_or(0) {
                0 => Limit::Off,
                n => Limit::Bytes(n),
            },
        }
    }

    /// The limit in bytes under `maxmemory`; 0: none (a percentage of no
    /// `maxmemory` is none).
    pub fn bytes(self, maxmemory: u64) -> u64 {
        match self {
            Limit::Off => 0,
            Limit::Bytes(n) => n,
            Limit::Percent(p) => maxmemory * p / 100,
        }
    }
}

/// What one client holds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// Unparsed input (CLIENT LIST's `qbuf`).
    pub qbuf: usize,
    /// The room reserved for a large argument when its header arrived: it
    /// counts from then on, as in Redis.
    pub qbuf_alloc: usize,
    /// Arguments parsed and not yet freed (`argv-mem`).
    pub argv: usize,
    /// `multi-mem`.
    pub multi: usize,
    /// Output not yet taken by the socket (`omem`).
    pub omem: usize,
    pub watched: usize,
    /// Channels and shard channels.
    pub channels: usize,
    pub patterns: usize,
    /// CLIENT TRACKING BCAST prefixes.
    pub prefixes: usize,
}

impl Usage {
    /// `tot-mem`.
    pub fn total(&self) -> usize {
        BASE + self.qbuf.max(self.qbuf_alloc)
            + self.argv
            + self.multi
            + self.omem
            + self.watched * PER_WATCHED_KEY
            + self.channels * PER_CHANNEL
            + self.patterns * PER_PATTERN
            + self.prefixes * PER_PREFIX
    }
}

/// The clients to evict, largest first, until the others' total is within
/// `limit`: `clients` are the evictable ones, as (`tot-mem`, id).
pub fn victims(mut clients: Vec<(usize, u64)>, limit: u64) -> Vec<u64> {
    let mut total: u64 = clients.iter().map(|&(m, _)| m as u64).sum();
    if total <= limit {
        return Vec::new();
    }
    // Ties go to the older client (lower id), for a stable choice.
    clients.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out = Vec::new();
    for (m, id) in clients {
        if total <= limit {
            break;
        }
        total -= m as u64;
        out.push(id);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_parses_bytes_and_percent() {
        assert_eq!(Limit::parse("0"), Limit::Off);
        assert_eq!(Limit::parse("3000000"), Limit::Bytes(3_000_000));
        assert_eq!(Limit::parse("7%"), Limit::Percent(7));
        assert_eq!(Limit::Percent(7).bytes(6 << 20), (6 << 20) * 7 / 100);
        assert_eq!(Limit::Percent(7).bytes(0), 0);
    }

    #[test]
    fn victims_are_the_largest_until_under() {
        let c = vec![(100, 1), (300, 2), (200, 3), (300, 4)];
        assert_eq!(victims(c.clone(), 900), Vec::<u64>::new());
        assert_eq!(victims(c.clone(), 600), vec![2]);
        assert_eq!(victims(c.clone(), 599), vec![2, 4]);
        assert_eq!(victims(c, 0), vec![2, 4, 3, 1]);
    }
}
