//! Users and permissions, as Redis 7.0's ACL: the user table, the rule
//! language (`ACL SETUSER`, `user` lines), the rules written back (`ACL
//! LIST`, `ACL GETUSER`), the permission check, and the ACL log.
//!
//! A leaf: what a command is comes as a [`Catalog`] (ids and categories,
//! built from the metadata by [`catalog`]) and, for its keys and channels,
//! as [`Request`]s from the dispatcher.

pub mod catalog;
mod selector;
mod sha256;

pub use catalog::{category, Catalog, CmdDesc, CATEGORIES};
pub use selector::{Denied, Request, READ, WRITE};
use selector::{Selector, SYNTAX};

use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Clone)]
pub struct User {
    pub name: Arc<str>,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` / `skip-sanitize-payload`.
    pub sanitize: Option<bool>,
    passwords: Vec<String>,
    root: Selector,
    selectors: Vec<Selector>,
    /// Everything allowed: the check is skipped.
    pub unrestricted: bool,
}

impl User {
    fn new(name: &str, pubsub_all: bool) -> Self {
        User {
            name: name.into(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            root: Selector::new(pubsub_all),
            selectors: Vec::new(),
            unrestricted: false,
        }
    }

    /// Applies one rule; the error is the reason Redis gives.
    pub fn apply(
        &mut self,
        cat: &Catalog,
        rule: &[u8],
        pubsub_all: bool,
    ) -> Result<(), &'static str> {
        let res = self.apply_rule(cat, rule, pubsub_all);
        self.unrestricted = self.root.unrestricted();
        res
    }

    fn apply_rule(
        &mut self,
        cat: &Catalog,
        rule: &[u8],
        pubsub_all: bool,
    ) -> Result<(), &'static str> {
        if rule.is_empty() {
            return Err(SYNTAX);
        }
        let lower = rule.to_ascii_lowercase();
        match &lower[..] {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"skip-sanitize-payload" => self.sanitize = Some(false),
            b"sanitize-payload" => self.sanitize = Some(true),
            b"clearselectors" => self.selectors.clear(),
            b"reset" => {
                for r in [
                    &b"resetpass"[..],
                    b"resetkeys",
                    b"resetchannels",
                    b"off",
                    b"clearselectors",
                    b"-@all",
                    b"sanitize-payload",
                ] {
                    self.apply_rule(cat, r, pubsub_all)?;
                }
                if pubsub_all {
                    self.apply_rule(cat, b"allchannels", pubsub_all)?;
                }
            }
            _ => match rule[0] {
                b'>' => {
                    let h = sha256::hex(&rule[1..]);
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                b'#' => {
                    let h = &rule[1..];
                    if h.len() != 64 || !h.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                        return Err("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters");
                    }
                    let h = String::from_utf8_lossy(h).into_owned();
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                b'<' | b'!' => {
                    let h = if rule[0] == b'<' {
                        sha256::hex(&rule[1..])
                    } else {
                        String::from_utf8_lossy(&rule[1..]).into_owned()
                    };
                    let before = self.passwords.len();
                    self.passwords.retain(|p| *p != h);
                    if self.passwords.len() == before {
                        return Err(
                            "The password you are trying to remove from the user does not exist",
                        );
                    }
                }
                b'(' if rule.ends_with(b")") && rule.len() >= 2 => {
                    let mut s = Selector::new(pubsub_all);
                    for r in rule[1..rule.len() - 1]
                        .split(|b| *b == b' ')
                        .filter(|r| !r.is_empty())
                    {
                        s.apply(cat, r, pubsub_all)?;
                    }
                    self.selectors.push(s);
                }
                _ => self.root.apply(cat, rule, pubsub_all)?,
            },
        }
        Ok(())
    }

    /// Whether `pass` authenticates this user.
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        self.enabled && (self.nopass || self.passwords.contains(&sha256::hex(pass)))
    }

    /// The flags ACL GETUSER lists.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut v = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            v.push("nopass");
        }
        match self.sanitize {
            Some(false) => v.push("skip-sanitize-payload"),
            Some(true) => v.push("sanitize-payload"),
            None => {}
        }
        v
    }

    pub fn passwords(&self) -> &[String] {
        &self.passwords
    }

    /// The user as an ACL LIST line (and an aclfile line).
    pub fn describe(&self, cat: &Catalog) -> String {
        let mut v = vec![format!("user {}", self.name)];
        v.extend(self.flags().iter().map(|f| f.to_string()));
        v.extend(self.passwords.iter().map(|p| format!("#{p}")));
        v.push(self.root.describe(cat));
        for s in &self.selectors {
            v.push(format!("({})", s.describe(cat)));
        }
        v.join(" ")
    }

    /// GETUSER's commands, keys, channels of the root permissions then of
    /// each selector.
    pub fn permission_sets(&self, cat: &Catalog) -> Vec<[String; 3]> {
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .map(|s| [s.commands_rule(cat), s.keys_rule(), s.channels_list()])
            .collect()
    }

    /// Checks a request against the root permissions, then each selector.
    pub fn check(&self, req: &Request) -> Result<(), Denied> {
        let mut worst = match self.root.check(req) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        for s in &self.selectors {
            match s.check(req) {
                Ok(()) => return Ok(()),
                Err(e) if e > worst => worst = e,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    /// Whether a selector lets the user access `key` as `need` says.
    pub fn key_ok(&self, key: &[u8], need: u8) -> bool {
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .any(|s| s.key_ok(key, need))
    }

    /// Whether the user may use `ch` (a pattern if `pattern`), by its
    /// root permissions or a selector: what PUBLISH/SUBSCRIBE check, and
    /// what decides whether a changed user's subscriptions survive.
    pub fn channel_ok(&self, ch: &[u8], pattern: bool) -> bool {
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .any(|s| s.channel_ok(ch, pattern))
    }
}

/// Which user a client is authenticated as: a slot in the user table
/// (never reused, so a deleted user's clients find nothing) and its name.
#[derive(Clone, Debug)]
pub struct Login {
    pub slot: usize,
    pub name: Arc<str>,
}

impl Default for Login {
    fn default() -> Self {
        Login {
            slot: 0,
            name: "default".into(),
        }
    }
}

/// One ACL LOG entry.
pub struct LogEntry {
    pub count: u64,
    pub reason: &'static str,
    pub context: &'static str,
    pub object: String,
    pub username: String,
    pub ctime_ms: i64,
    pub client_info: String,
}

/// The user table and the ACL log.
pub struct Acl {
    slots: Vec<Option<User>>,
    /// Names to slots, sorted (ACL USERS, ACL LIST).
    names: std::collections::BTreeMap<String, usize>,
    pub log: VecDeque<LogEntry>,
}

impl Default for Acl {
    fn default() -> Self {
        let mut acl = Acl {
            slots: Vec::new(),
            names: Default::default(),
            log: VecDeque::new(),
        };
        acl.insert(Self::default_user());
        acl
    }
}

impl Acl {
    /// `default`: on, no password, everything allowed.
    fn default_user() -> User {
        let mut u = User::new("default", true);
        u.enabled = true;
        u.nopass = true;
        u.root.set_all(true);
        u.root.allkeys = true;
        u.root.allchannels = true;
        u.unrestricted = true;
        u
    }

    fn insert(&mut self, u: User) -> usize {
        let slot = self.slots.len();
        self.names.insert(u.name.to_string(), slot);
        self.slots.push(Some(u));
        slot
    }

    /// The user a client is logged in as; `None` once deleted.
    pub fn user(&self, slot: usize) -> Option<&User> {
        self.slots.get(slot).and_then(|u| u.as_ref())
    }

    pub fn slot(&self, name: &[u8]) -> Option<usize> {
        std::str::from_utf8(name)
            .ok()
            .and_then(|n| self.names.get(n).copied())
    }

    pub fn get(&self, name: &[u8]) -> Option<&User> {
        self.slot(name).and_then(|s| self.user(s))
    }

    pub fn default_slot(&self) -> usize {
        0
    }

    /// `requirepass` set or cleared: the `default` user's only password.
    pub fn set_requirepass(&mut self, pass: Option<&[u8]>) {
        let s = self.default_slot();
        if let Some(u) = self.slots[s].as_mut() {
            u.passwords.clear();
            u.nopass = pass.is_none();
            u.passwords.extend(pass.map(sha256::hex));
        }
    }

    /// Clients must authenticate: `default` has a password or is off.
    pub fn auth_required(&self) -> bool {
        self.user(self.default_slot())
            .is_none_or(|u| !u.nopass || !u.enabled)
    }

    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.names.values().filter_map(|&s| self.user(s))
    }

    /// ACL SETUSER: the rules applied together, or none of them. The
    /// error is Redis's whole message.
    pub fn set_user(
        &mut self,
        cat: &Catalog,
        name: &[u8],
        rules: &[&[u8]],
        pubsub_all: bool,
    ) -> Result<(), String> {
        let mut u = match self.get(name) {
            Some(u) => u.clone(),
            None => User::new(&String::from_utf8_lossy(name), pubsub_all),
        };
        for r in merge_selectors(rules)? {
            u.apply(cat, &r, pubsub_all).map_err(|e| {
                format!(
                    "Error in ACL SETUSER modifier '{}': {e}",
                    String::from_utf8_lossy(&r)
                )
            })?;
        }
        match self.slot(name) {
            Some(s) => self.slots[s] = Some(u),
            None => {
                self.insert(u);
            }
        }
        Ok(())
    }

    /// Removes a user; its slot, for its clients to be disconnected.
    pub fn delete(&mut self, name: &[u8]) -> Option<usize> {
        let s = self.slot(name)?;
        self.names.remove(&*String::from_utf8_lossy(name));
        self.slots[s] = None;
        Some(s)
    }

    /// Replaces every user (ACL LOAD, start-up); the slots dropped.
    /// `default` keeps slot 0, where new connections start.
    pub fn replace(&mut self, users: Vec<User>) -> Vec<usize> {
        let old: Vec<usize> = self.names.values().copied().collect();
        for &s in &old {
            self.slots[s] = None;
        }
        self.names.clear();
        let (default, others): (Vec<User>, Vec<User>) =
            users.into_iter().partition(|u| &*u.name == "default");
        let default = default
            .into_iter()
            .next()
            .unwrap_or_else(Self::default_user);
        self.names.insert("default".into(), 0);
        self.slots[0] = Some(default);
        for u in others {
            self.insert(u);
        }
        old
    }

    /// Adds an event to the log (grouped with a like one of the last
    /// minute), keeping at most `max` entries.
    pub fn log_event(&mut self, mut e: LogEntry, max: usize) {
        let same = self.log.iter().position(|x| {
            x.reason == e.reason
                && x.context == e.context
                && x.object == e.object
                && x.username == e.username
                && e.ctime_ms - x.ctime_ms < 60_000
        });
        if let Some(i) = same {
            let old = self.log.remove(i).expect("found");
            e.count = old.count + 1;
        }
        self.log.push_front(e);
        self.log.truncate(max);
    }
}

/// Parses a list of users from `user` lines or an aclfile: each line's
/// words after `user`. The error is what went wrong and where.
pub fn parse_users(
    cat: &Catalog,
    lines: &[Vec<Vec<u8>>],
    pubsub_all: bool,
) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    for (n, words) in lines.iter().enumerate() {
        let name = String::from_utf8_lossy(&words[0]).into_owned();
        if users.iter().any(|u| *u.name == *name) {
            return Err(format!("line {}: Duplicate user '{name}' found", n + 1));
        }
        let mut u = User::new(&name, pubsub_all);
        let rules: Vec<&[u8]> = words[1..].iter().map(|w| &w[..]).collect();
        for r in merge_selectors(&rules).map_err(|e| format!("line {}: {e}", n + 1))? {
            u.apply(cat, &r, pubsub_all)
                .map_err(|e| format!("line {}: Error in user declaration '{name}': {e}", n + 1))?;
        }
        users.push(u);
    }
    Ok(users)
}

/// Joins a selector written across several arguments (`(~a` `+get)`)
/// into one rule.
fn merge_selectors(rules: &[&[u8]]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut open: Option<Vec<u8>> = None;
    for r in rules {
        match &mut open {
            Some(s) => {
                s.push(b' ');
                s.extend_from_slice(r);
                if r.ends_with(b")") {
                    out.push(open.take().expect("open"));
                }
            }
            None if r.starts_with(b"(") && !r.ends_with(b")") => open = Some(r.to_vec()),
            None => out.push(r.to_vec()),
        }
    }
    if let Some(s) = open {
        let first = s.split(|b| *b == b' ').next().unwrap_or(&[]);
        return Err(format!(
            "Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(first)
        ));
    }
    Ok(out)
}

/// ACL GENPASS: `bits` random bits as hex.
pub fn genpass(bits: usize) -> String {
    use rand::RngCore;
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    hex[..chars].to_string()
}
