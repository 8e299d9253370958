//! Keyspace event classes: their bits, the letters of
//! `notify-keyspace-events`, and the forms Redis stores and shows.

/// The keyspace event classes a command's events belong to.
pub mod class {
    /// DEL, EXPIRE, RENAME, … of any type.
    pub const GENERIC: u32 = 1 << 2;
    pub const STRING: u32 = 1 << 3;
    pub const LIST: u32 = 1 << 4;
    pub const SET: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const ZSET: u32 = 1 << 7;
    pub const EXPIRED: u32 = 1 << 8;
    pub const EVICTED: u32 = 1 << 9;
    pub const STREAM: u32 = 1 << 10;
}

/// Notification class letters and their bits, shared with the notifier.
pub const NOTIFY_CLASSES: &[(char, u32)] = &[
    ('g', class::GENERIC),
    ('$', class::STRING),
    ('l', class::LIST),
    ('s', class::SET),
    ('h', class::HASH),
    ('z', class::ZSET),
    ('x', class::EXPIRED),
    ('e', class::EVICTED),
    ('t', class::STREAM),
    ('m', 1 << 12),
    ('d', 1 << 13),
    ('n', 1 << 14),
];
pub const NOTIFY_KEYSPACE: u32 = 1;
pub const NOTIFY_KEYEVENT: u32 = 2;
/// 'A': every class but key-miss and new-key.
pub const NOTIFY_ALL: u32 = (1 << 2)
    | (1 << 3)
    | (1 << 4)
    | (1 << 5)
    | (1 << 6)
    | (1 << 7)
    | (1 << 8)
    | (1 << 9)
    | (1 << 10)
    | (1 << 13);

pub fn notify_flags(s: &str) -> Option<u32> {
    let mut f = 0;
    for c in s.chars() {
        f |= match c {
            'A' => NOTIFY_ALL,
            'K' => NOTIFY_KEYSPACE,
            'E' => NOTIFY_KEYEVENT,
            _ => NOTIFY_CLASSES.iter().find(|(l, _)| *l == c)?.1,
        };
    }
    Some(f)
}

/// The stored form: as Redis 7.0 prints it (`m` last), except that `n`
/// is kept next to `A` (see [`notify_display`]).
pub fn notify_string(f: u32) -> String {
    let mut s = notify_display(f);
    let new = NOTIFY_CLASSES[11].1;
    if f & NOTIFY_ALL == NOTIFY_ALL && f & new != 0 {
        s.insert(1, 'n');
    }
    s
}

/// As CONFIG GET shows it: Redis 7.0 writes `A` for its classes and then
/// omits `n` too (a quirk kept for identical replies); `m` comes last.
pub fn notify_display(f: u32) -> String {
    let miss = NOTIFY_CLASSES[9].1;
    let mut s = String::new();
    if f & NOTIFY_ALL == NOTIFY_ALL {
        s.push('A');
    } else {
        for &(c, bit) in NOTIFY_CLASSES {
            if f & bit != 0 && bit != miss {
                s.push(c);
            }
        }
    }
    if f & NOTIFY_KEYSPACE != 0 {
        s.push('K');
    }
    if f & NOTIFY_KEYEVENT != 0 {
        s.push('E');
    }
    if f & miss != 0 {
        s.push('m');
    }
    s
}
