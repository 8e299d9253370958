//! Configuration: redis.conf files, `--name value` arguments, CONFIG GET/SET.
//!
//! Every option Redis 7.0 knows is in [`table::OPTIONS`] with its type,
//! range and default, so a user's existing redis.conf loads unchanged. All
//! values are kept in their canonical text form (what CONFIG GET shows:
//! memory in bytes, booleans as yes/no); typed getters parse on read. The
//! few values read on hot paths are cached by the server when they change.

mod table;

use protocol::split_args;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Bool,
    Int(i64, i64),
    /// A memory value held in a signed type: the range applies.
    Memory(i64, i64),
    /// A memory value held in an unsigned 64-bit type (maxmemory).
    UMemory,
    Enum(&'static [&'static str]),
    Str,
    /// A structured value with its own validation (save, bind, …).
    Special,
}

pub struct Opt {
    pub name: &'static str,
    pub kind: Kind,
    pub default: &'static str,
    pub mutable: bool,
}

/// Old names Redis 7.0 still accepts, each pointing to the option it shares
/// a value with; CONFIG GET lists both names.
const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("lua-time-limit", "busy-reply-threshold"),
    ("slaveof", "replicaof"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slave-read-only", "replica-read-only"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-priority", "replica-priority"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
];

/// Options that exist only in a config file (not shown by CONFIG GET).
const FILE_ONLY: &[&str] = &[
    "include",
    "rename-command",
    "user",
    "loadmodule",
    "sentinel",
];

/// Options CONFIG SET refuses unless `enable-protected-configs` allows it.
const PROTECTED: &[&str] = &["dir", "dbfilename"];

/// Options cinnabar accepts and shows but whose feature it does not have.
const NOT_IMPLEMENTED: &[&str] = &[
    "cluster-enabled",
    "replicaof",
    "tls-port",
    "unixsocket",
    "aclfile",
    "activedefrag",
    "syslog-enabled",
    "supervised",
    "daemonize",
];

fn canonical(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(a, _)| *a == name)
        .map_or(name, |(_, c)| c)
}

pub fn find(name: &str) -> Option<&'static Opt> {
    let name = canonical(name);
    table::OPTIONS.iter().find(|o| o.name == name)
}

/// `proc-title-template`: braces balanced, only known variables, and a
/// non-empty result.
fn valid_title_template(t: &str) -> bool {
    const VARS: &[&str] = &[
        "title",
        "listen-addr",
        "server-mode",
        "port",
        "tls-port",
        "unixsocket",
        "config-file",
    ];
    let mut rest = t;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return false;
        }
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return false;
        };
        if !VARS.contains(&&after[..close]) {
            return false;
        }
        rest = &after[close + 1..];
    }
    !t.is_empty()
}

#[derive(Clone)]
pub struct Config {
    values: HashMap<&'static str, String>,
    /// Absolute path of the config file, for CONFIG REWRITE.
    pub file: Option<std::path::PathBuf>,
    /// Warnings gathered while loading (logged once at start-up).
    pub warnings: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        let mut values = HashMap::new();
        for o in table::OPTIONS {
            if canonical(o.name) == o.name {
                values.insert(o.name, o.default.to_string());
            }
        }
        let cwd = std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        values.insert("dir", cwd);
        Config {
            values,
            file: None,
            warnings: Vec::new(),
        }
    }
}

/// The multiplier of a memory unit as Redis reads it (k=1000, kb=1024, …;
/// already lower-cased; empty or `b` is bytes).
fn unit_multiplier(unit: &str) -> Option<u64> {
    Some(match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    })
}

/// Parses a memory value as CONFIG SET does: digits and an optional unit,
/// no sign; the empty string is 0 and too many digits saturate, as C's
/// `strtoull` does.
pub fn parse_memory_u64(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let mul = unit_multiplier(unit)?;
    let mut n: u64 = 0;
    for d in num.bytes() {
        n = n.saturating_mul(10).saturating_add((d - b'0') as u64);
    }
    Some(n.saturating_mul(mul))
}

/// Parses a memory value as Redis does: bytes, or a number with a unit
/// (k=1000, kb=1024, m, mb, g, gb; any case).
pub fn parse_memory(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit() && c != '-')
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let mul = unit_multiplier(unit)? as i64;
    let n: i64 = storage::num::parse_i64(num.as_bytes())?;
    n.checked_mul(mul)
}

fn bool_of(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

/// Notification class letters and their bits, shared with the notifier.
pub const NOTIFY_CLASSES: &[(char, u32)] = &[
    ('g', 1 << 2),
    ('$', 1 << 3),
    ('l', 1 << 4),
    ('s', 1 << 5),
    ('h', 1 << 6),
    ('z', 1 << 7),
    ('x', 1 << 8),
    ('e', 1 << 9),
    ('t', 1 << 10),
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

/// A stored value as CONFIG GET shows it.
pub fn display_value(name: &str, v: &str) -> String {
    if name.eq_ignore_ascii_case("notify-keyspace-events") {
        if let Some(f) = notify_flags(v) {
            return notify_display(f);
        }
    }
    v.to_string()
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

impl Config {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(canonical(name)).map(String::as_str)
    }

    fn raw(&self, name: &str) -> &str {
        self.get(name)
            .unwrap_or_else(|| panic!("unknown option {name}"))
    }

    pub fn int(&self, name: &str) -> i64 {
        self.raw(name).parse().unwrap_or(0)
    }

    pub fn flag(&self, name: &str) -> bool {
        self.raw(name) == "yes"
    }

    pub fn str(&self, name: &str) -> &str {
        self.raw(name)
    }

    /// Save points as (seconds, changes) pairs.
    pub fn save_points(&self) -> Vec<(i64, i64)> {
        let v: Vec<i64> = self
            .raw("save")
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        v.chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (c[0], c[1]))
            .collect()
    }

    /// Validates `value` for option `name` and returns its canonical form.
    /// The error is the reason Redis gives after `… - `.
    pub fn check(&self, opt: &Opt, value: &str) -> Result<String, String> {
        let between =
            |lo: i64, hi: i64| format!("argument must be between {lo} and {hi} inclusive");
        match opt.kind {
            Kind::Bool => {
                let b =
                    bool_of(value).ok_or_else(|| "argument must be 'yes' or 'no'".to_string())?;
                if b {
                    match opt.name {
                        "activedefrag" => return Err("Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution".into()),
                        "tls-cluster" | "tls-replication" => return Err("Unable to update TLS configuration. Check server logs.".into()),
                        _ => {}
                    }
                }
                Ok(if b { "yes" } else { "no" }.to_string())
            }
            Kind::Int(lo, hi) => {
                let n: i64 = storage::num::parse_i64(value.as_bytes())
                    .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
                if n < lo || n > hi {
                    return Err(between(lo, hi));
                }
                // Redis keeps the configured hz within 1..=500.
                if opt.name == "hz" {
                    return Ok(n.clamp(1, 500).to_string());
                }
                Ok(n.to_string())
            }
            Kind::Memory(lo, hi) => {
                let n = parse_memory_u64(value)
                    .ok_or_else(|| "argument must be a memory value".to_string())?;
                match i64::try_from(n) {
                    Ok(n) if (lo..=hi).contains(&n) => {
                        // Redis raises a replication backlog below 16k to 16k.
                        if opt.name == "repl-backlog-size" {
                            return Ok(n.max(16 * 1024).to_string());
                        }
                        Ok(n.to_string())
                    }
                    _ => Err(between(lo, hi)),
                }
            }
            Kind::UMemory => parse_memory_u64(value)
                .map(|n| n.to_string())
                .ok_or_else(|| "argument must be a memory value".to_string()),
            Kind::Enum(choices) => {
                let l = value.to_ascii_lowercase();
                if choices.contains(&l.as_str()) {
                    Ok(l)
                } else {
                    Err(format!(
                        "argument(s) must be one of the following: {}",
                        choices.join(", ")
                    ))
                }
            }
            Kind::Str => match opt.name {
                "cluster-announce-hostname"
                    if !value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') =>
                {
                    Err(
                        "Hostnames may only contain alphanumeric characters, hyphens or dots"
                            .into(),
                    )
                }
                "proc-title-template" if !valid_title_template(value) => {
                    Err("template format is invalid or contains unknown variables".into())
                }
                _ => Ok(value.to_string()),
            },
            Kind::Special => self.check_special(opt.name, value),
        }
    }

    fn check_special(&self, name: &str, value: &str) -> Result<String, String> {
        let words: Vec<&str> = value.split_whitespace().collect();
        match name {
            "save" => {
                if !words.len().is_multiple_of(2)
                    || words
                        .iter()
                        .any(|w| w.parse::<i64>().map_or(true, |n| n < 0))
                {
                    return Err("Invalid save parameters".into());
                }
                Ok(words.join(" "))
            }
            "notify-keyspace-events" => notify_flags(value)
                .map(notify_string)
                .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
            "client-output-buffer-limit" => {
                if !words.len().is_multiple_of(4) {
                    return Err("Wrong number of arguments in buffer limit configuration.".into());
                }
                let mut cur: Vec<String> = self
                    .raw(name)
                    .split_whitespace()
                    .map(String::from)
                    .collect();
                for c in words.chunks(4) {
                    let class = match c[0].to_ascii_lowercase().as_str() {
                        "normal" => "normal",
                        "slave" | "replica" => "slave",
                        "pubsub" => "pubsub",
                        _ => {
                            return Err(
                                "Invalid client class specified in buffer limit configuration."
                                    .into(),
                            )
                        }
                    };
                    let hard = parse_memory(c[1]);
                    let soft = parse_memory(c[2]);
                    let secs = c[3].parse::<i64>().ok();
                    let (Some(h), Some(s), Some(t)) = (hard, soft, secs) else {
                        return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into());
                    };
                    if h < 0 || s < 0 || t < 0 {
                        return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into());
                    }
                    let i = cur.iter().position(|w| w == class).unwrap_or(0);
                    cur[i + 1] = h.to_string();
                    cur[i + 2] = s.to_string();
                    cur[i + 3] = t.to_string();
                }
                Ok(cur.join(" "))
            }
            "oom-score-adj-values" => {
                if words.len() != 3 {
                    return Err("wrong number of arguments".into());
                }
                let mut vals = Vec::new();
                for w in &words {
                    match w.parse::<i64>() {
                        Ok(n) if (-2000..=2000).contains(&n) => vals.push(n.to_string()),
                        _ => return Err("Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into()),
                    }
                }
                Ok(vals.join(" "))
            }
            "latency-tracking-info-percentiles" => {
                let mut vals = Vec::new();
                for w in &words {
                    let p = storage::num::parse_f64(w.as_bytes()).ok_or_else(|| {
                        "Invalid latency-tracking-info-percentiles parameters".to_string()
                    })?;
                    if !(0.0..=100.0).contains(&p) {
                        return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
                    }
                    vals.push(p.to_string());
                }
                Ok(vals.join(" "))
            }
            "maxmemory-clients" => {
                const WHY: &str = "argument must be a memory or percent value";
                if let Some(pct) = value.strip_suffix('%') {
                    if pct.is_empty() || !pct.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(WHY.into());
                    }
                    let n = parse_memory_u64(pct).ok_or_else(|| WHY.to_string())?;
                    if n > 100 {
                        return Err("percentage argument must be less or equal to 100".into());
                    }
                    return Ok(if n == 0 { "0".into() } else { format!("{n}%") });
                }
                let n = parse_memory_u64(value).ok_or_else(|| WHY.to_string())?;
                i64::try_from(n)
                    .map(|n| n.to_string())
                    .map_err(|_| WHY.to_string())
            }
            "bind" => {
                if words.len() > 16 {
                    return Err("Too many bind addresses specified.".into());
                }
                Ok(words.join(" "))
            }
            _ => Ok(value.to_string()),
        }
    }

    /// Sets an option after validation (no immutability check).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let opt =
            find(name).ok_or_else(|| "Bad directive or wrong number of arguments".to_string())?;
        let v = self.check(opt, value)?;
        self.values.insert(opt.name, v);
        Ok(())
    }

    /// Option names and values matching a glob, aliases included, each once.
    pub fn matching(&self, pattern: &[u8]) -> Vec<(&'static str, String)> {
        table::OPTIONS
            .iter()
            .filter(|o| storage::glob::matches(pattern, o.name.as_bytes(), true))
            .map(|o| (o.name, self.raw(o.name).to_string()))
            .collect()
    }

    /// CONFIG SET's immutability rule, as its error reason.
    pub fn settable(&self, opt: &Opt) -> Result<(), String> {
        if PROTECTED.contains(&opt.name) && self.str("enable-protected-configs") == "no" {
            return Err("can't set protected config".into());
        }
        if !opt.mutable {
            return Err("can't set immutable config".into());
        }
        Ok(())
    }

    /// Loads `redis-server`'s arguments: an optional config file (`-` for
    /// stdin) followed by `--name value…` overrides. The error is the whole
    /// fatal message Redis prints.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut cfg = Config::default();
        let mut text = String::new();
        let mut rest = args;
        if let Some(first) = args.first() {
            if !first.starts_with("--") {
                if first == "-" {
                    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                        .map_err(|e| e.to_string())?;
                } else {
                    let path = std::path::Path::new(first);
                    text = std::fs::read_to_string(path).map_err(|e| {
                        format!("Fatal error, can't open config file '{first}': {e}")
                    })?;
                    cfg.file =
                        Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
                }
                rest = &args[1..];
            }
        }
        // As redis-server: each `--name` starts a line, later words are its
        // arguments, quoted so spaces survive.
        let mut extra = String::new();
        for a in rest {
            if let Some(name) = a.strip_prefix("--") {
                if !extra.is_empty() {
                    extra.push('\n');
                }
                extra.push_str(name);
            } else {
                extra.push_str(&format!(
                    " \"{}\"",
                    a.replace('\\', "\\\\").replace('"', "\\\"")
                ));
            }
        }
        text.push('\n');
        text.push_str(&extra);
        let mut seen_save = false;
        cfg.load_text(&text, &mut seen_save, 0)?;
        Ok(cfg)
    }

    fn load_text(&mut self, text: &str, seen_save: &mut bool, depth: usize) -> Result<(), String> {
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let fatal = |why: &str| {
                format!(
                    "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line {}\n>>> '{}'\n{}",
                    i + 1,
                    trimmed,
                    why
                )
            };
            let Some(words) = split_args(trimmed.as_bytes()) else {
                return Err(fatal("Unbalanced quotes in configuration line"));
            };
            let words: Vec<String> = words
                .iter()
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            let name = words[0].to_ascii_lowercase();
            let args = &words[1..];
            if FILE_ONLY.contains(&name.as_str()) {
                if name == "include" {
                    if args.len() != 1 || depth > 10 {
                        return Err(fatal("wrong number of arguments"));
                    }
                    let inc = std::fs::read_to_string(&args[0]).map_err(|e| {
                        fatal(&format!(
                            "Fatal error, can't open config file '{}': {e}",
                            args[0]
                        ))
                    })?;
                    self.load_text(&inc, seen_save, depth + 1)?;
                } else {
                    self.warnings.push(format!(
                        "config directive '{name}' is not supported by cinnabar and was ignored"
                    ));
                }
                continue;
            }
            let Some(opt) = find(&name) else {
                return Err(fatal("Bad directive or wrong number of arguments"));
            };
            let value = match (opt.name, args.len()) {
                ("save", _) => {
                    // The first save line replaces the default, later ones add.
                    let v = args.join(" ");
                    let v = if !*seen_save || v.is_empty() {
                        v
                    } else {
                        format!("{} {}", self.raw("save"), v)
                    };
                    *seen_save = true;
                    v.trim().to_string()
                }
                (
                    "bind"
                    | "client-output-buffer-limit"
                    | "oom-score-adj-values"
                    | "latency-tracking-info-percentiles"
                    | "notify-keyspace-events",
                    n,
                ) if n >= 1 => args.join(" "),
                (_, 1) => args[0].clone(),
                _ => return Err(fatal("wrong number of arguments")),
            };
            let canon = self.check(opt, &value).map_err(|e| fatal(&e))?;
            if opt.name == "dir" {
                std::env::set_current_dir(&canon)
                    .map_err(|e| fatal(&format!("Can't chdir to '{canon}': {e}")))?;
                let abs = std::env::current_dir()
                    .map(|p| p.display().to_string())
                    .unwrap_or(canon);
                self.values.insert("dir", abs);
                continue;
            }
            if NOT_IMPLEMENTED.contains(&opt.name) && canon != opt.default {
                self.warnings.push(format!(
                    "option '{}' is accepted but its feature is not implemented in cinnabar",
                    opt.name
                ));
            }
            self.values.insert(opt.name, canon);
        }
        Ok(())
    }

    /// CONFIG REWRITE: rewrites the config file with the current values,
    /// keeping comments and unknown lines, replacing each option's lines,
    /// and appending options that differ from their default.
    pub fn rewrite(&self) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Err("ERR The server is running without a config file".into());
        };
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let mut out = Vec::new();
        let mut done = std::collections::HashSet::new();
        let render = |name: &'static str, v: &str| -> Vec<String> {
            if name == "save" {
                if v.is_empty() {
                    return vec!["save \"\"".into()];
                }
                let w: Vec<&str> = v.split_whitespace().collect();
                return w
                    .chunks(2)
                    .map(|c| format!("save {} {}", c[0], c[1]))
                    .collect();
            }
            if v.is_empty()
                || v.contains(' ')
                    && !matches!(
                        name,
                        "bind"
                            | "client-output-buffer-limit"
                            | "oom-score-adj-values"
                            | "latency-tracking-info-percentiles"
                    )
            {
                return vec![format!("{name} \"{v}\"")];
            }
            vec![format!("{name} {v}")]
        };
        for line in old.lines() {
            let t = line.trim();
            let first = t
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            match find(&first) {
                Some(opt) if !t.starts_with('#') => {
                    if done.insert(opt.name) {
                        out.extend(render(opt.name, self.raw(opt.name)));
                    }
                }
                _ => out.push(line.to_string()),
            }
        }
        let mut header = false;
        for o in table::OPTIONS {
            if canonical(o.name) != o.name
                || done.contains(o.name)
                || self.raw(o.name) == o.default
                || o.name == "dir"
            {
                continue;
            }
            if !header {
                out.push("# Generated by CONFIG REWRITE".into());
                header = true;
            }
            out.extend(render(o.name, self.raw(o.name)));
        }
        let tmp = path.with_extension("tmp-rewrite");
        std::fs::write(&tmp, out.join("\n") + "\n")
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|e| format!("ERR Rewriting config file: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_and_aliases() {
        let cfg = Config::from_args(&[
            "--port".into(),
            "7777".into(),
            "--save".into(),
            "".into(),
            "--hash-max-ziplist-entries".into(),
            "100".into(),
        ])
        .unwrap();
        assert_eq!(cfg.get("port"), Some("7777"));
        assert_eq!(cfg.get("save"), Some(""));
        assert_eq!(cfg.get("hash-max-listpack-entries"), Some("100"));
        let err = Config::from_args(&["--hz".into(), "abc".into()])
            .err()
            .unwrap();
        assert!(
            err.contains(">>> 'hz \"abc\"'\nargument couldn't be parsed into an integer"),
            "{err}"
        );
    }

    #[test]
    fn values_are_canonical() {
        let mut c = Config::default();
        c.set("maxmemory", "1mb").unwrap();
        assert_eq!(c.get("maxmemory"), Some("1048576"));
        c.set("notify-keyspace-events", "KEA").unwrap();
        assert_eq!(c.get("notify-keyspace-events"), Some("AKE"));
        c.set("save", "900 1 300 10").unwrap();
        assert_eq!(c.save_points(), vec![(900, 1), (300, 10)]);
        assert!(c.set("save", "1").is_err());
        c.set("client-output-buffer-limit", "pubsub 64mb 16mb 30")
            .unwrap();
        assert_eq!(
            c.get("client-output-buffer-limit"),
            Some("normal 0 0 0 slave 268435456 67108864 60 pubsub 67108864 16777216 30")
        );
    }
}
