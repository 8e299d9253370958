//! A set of permissions (the user's root one, or one of its selectors):
//! the rule language applied to it, the rules written back, and the check
//! of a request against it.

use super::catalog::{category, Catalog, CATEGORIES, WORDS};

/// Key permissions of a pattern, and what a key access needs.
pub const READ: u8 = 1;
pub const WRITE: u8 = 2;

/// A set of permissions: the user's root one, or one of its selectors.
#[derive(Clone, Default)]
pub(super) struct Selector {
    pub(super) allowed: [u64; WORDS],
    /// `+@all` was given (and not undone by `-@all`): described from
    /// `+@all` down rather than from `-@all` up.
    pub(super) future: bool,
    /// Every command, nothing removed since `+@all`: the check is skipped.
    pub(super) allcommands: bool,
    /// Allowed first arguments of commands otherwise denied, in the order
    /// given.
    pub(super) firstargs: Vec<(usize, Vec<Vec<u8>>)>,
    pub(super) allkeys: bool,
    pub(super) keys: Vec<(Vec<u8>, u8)>,
    pub(super) allchannels: bool,
    pub(super) channels: Vec<Vec<u8>>,
}

const KEYS_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const CHANNELS_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";
const UNKNOWN: &str = "Unknown command or category name in ACL";
pub(super) const SYNTAX: &str = "Syntax error";

impl Selector {
    pub(super) fn new(pubsub_all: bool) -> Self {
        Selector {
            allchannels: pubsub_all,
            ..Default::default()
        }
    }

    pub(super) fn has(&self, id: usize) -> bool {
        self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    pub(super) fn set(&mut self, id: usize, on: bool) {
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
        }
        self.firstargs.retain(|(c, _)| *c != id);
    }

    /// A command with its subcommands.
    pub(super) fn set_command(&mut self, cat: &Catalog, id: usize, on: bool) {
        self.set(id, on);
        for &s in &cat.cmds[id].subs {
            self.set(s, on);
        }
        if !on {
            self.allcommands = false;
        }
    }

    pub(super) fn set_all(&mut self, on: bool) {
        self.allowed = if on { [!0; WORDS] } else { [0; WORDS] };
        self.firstargs.clear();
        self.future = on;
        self.allcommands = on;
    }

    pub(super) fn set_category(&mut self, cat: &Catalog, c: usize, on: bool) {
        let ids: Vec<usize> = cat.in_category(c).collect();
        for id in ids {
            self.set(id, on);
        }
        if !on {
            self.allcommands = false;
        }
    }

    pub(super) fn apply(
        &mut self,
        cat: &Catalog,
        rule: &[u8],
        pubsub_all: bool,
    ) -> Result<(), &'static str> {
        let lower = rule.to_ascii_lowercase();
        match &lower[..] {
            b"allkeys" => {
                self.allkeys = true;
                self.keys.clear();
                return Ok(());
            }
            b"resetkeys" => {
                self.allkeys = false;
                self.keys.clear();
                return Ok(());
            }
            b"allchannels" => {
                self.allchannels = true;
                self.channels.clear();
                return Ok(());
            }
            b"resetchannels" => {
                self.allchannels = false;
                self.channels.clear();
                return Ok(());
            }
            b"allcommands" | b"+@all" => {
                self.set_all(true);
                return Ok(());
            }
            b"nocommands" | b"-@all" => {
                self.set_all(false);
                return Ok(());
            }
            _ => {}
        }
        let _ = pubsub_all;
        match rule[0] {
            b'~' => self.add_key(&rule[1..], READ | WRITE),
            b'%' => {
                let tilde = rule.iter().position(|&b| b == b'~').ok_or(SYNTAX)?;
                let mut flags = 0;
                for &f in &rule[1..tilde] {
                    flags |= match f.to_ascii_uppercase() {
                        b'R' => READ,
                        b'W' => WRITE,
                        _ => return Err(SYNTAX),
                    };
                }
                if flags == 0 {
                    return Err(SYNTAX);
                }
                self.add_key(&rule[tilde + 1..], flags)
            }
            b'&' => {
                let p = &rule[1..];
                if p == b"*" {
                    self.allchannels = true;
                    self.channels.clear();
                } else if self.allchannels {
                    return Err(CHANNELS_AFTER_ALL);
                } else if !self.channels.iter().any(|c| c == p) {
                    self.channels.push(p.to_vec());
                }
                Ok(())
            }
            b'+' | b'-' => {
                let on = rule[0] == b'+';
                let what = &rule[1..];
                if let Some(c) = what.strip_prefix(b"@") {
                    let c = category(c).ok_or(UNKNOWN)?;
                    self.set_category(cat, c, on);
                    return Ok(());
                }
                if let Some(id) = cat.id(what) {
                    self.set_command(cat, id, on);
                    return Ok(());
                }
                // `+cmd|arg`: a first argument of a command without
                // subcommands.
                let bar = what.iter().rposition(|&b| b == b'|').ok_or(UNKNOWN)?;
                if on
                    && cat
                        .id(&what[..bar])
                        .is_some_and(|p| cat.cmds[p].name.contains('|'))
                {
                    return Err("Allowing first-arg of a subcommand is not supported");
                }
                let bar = what.iter().position(|&b| b == b'|').ok_or(UNKNOWN)?;
                let id = cat.id(&what[..bar]).ok_or(UNKNOWN)?;
                let arg = &what[bar + 1..];
                if !on || !cat.cmds[id].subs.is_empty() || arg.contains(&b'|') {
                    return Err(UNKNOWN);
                }
                if arg.is_empty() {
                    return Err(SYNTAX);
                }
                if self.has(id) {
                    return Ok(());
                }
                let arg = arg.to_ascii_lowercase();
                match self.firstargs.iter_mut().find(|(c, _)| *c == id) {
                    Some((_, args)) => {
                        if !args.contains(&arg) {
                            args.push(arg);
                        }
                    }
                    None => self.firstargs.push((id, vec![arg])),
                }
                Ok(())
            }
            _ => Err(SYNTAX),
        }
    }

    pub(super) fn add_key(&mut self, p: &[u8], flags: u8) -> Result<(), &'static str> {
        if p == b"*" && flags == READ | WRITE {
            self.allkeys = true;
            self.keys.clear();
            return Ok(());
        }
        if self.allkeys {
            return Err(KEYS_AFTER_ALL);
        }
        match self.keys.iter_mut().find(|(k, _)| k == p) {
            Some((_, f)) => *f |= flags,
            None => self.keys.push((p.to_vec(), flags)),
        }
        Ok(())
    }

    pub(super) fn unrestricted(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }

    pub(super) fn keys_rule(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let mut v = Vec::new();
        for (p, f) in &self.keys {
            let p = String::from_utf8_lossy(p);
            v.push(match *f {
                READ => format!("%R~{p}"),
                WRITE => format!("%W~{p}"),
                _ => format!("~{p}"),
            });
        }
        v.join(" ")
    }

    pub(super) fn channels_list(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        let v: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        v.join(" ")
    }

    /// The command rules that rebuild this selector's commands: from
    /// `+@all` or `-@all`, the categories that fit best, then single
    /// commands and first arguments.
    pub(super) fn commands_rule(&self, cat: &Catalog) -> String {
        let n = cat.cmds.len();
        let mut fake = Selector::default();
        let mut rules = Vec::new();
        let additive = !self.future;
        if additive {
            rules.push("-@all".to_string());
        } else {
            rules.push("+@all".to_string());
            fake.set_all(true);
        }
        let mut used = vec![false; CATEGORIES.len()];
        loop {
            // The category with the fewest commands that would be wrong,
            // then the most it would set right.
            let mut best: Option<(usize, usize, usize)> = None;
            for (c, _) in CATEGORIES.iter().enumerate() {
                if used[c] {
                    continue;
                }
                let (mut right, mut wrong) = (0, 0);
                for id in cat.in_category(c) {
                    let want = self.has(id) == additive;
                    let done = fake.has(id) == additive;
                    if want && !done {
                        right += 1;
                    } else if !want && !done {
                        wrong += 1;
                    }
                }
                if right > wrong
                    && best.is_none_or(|(_, r, w)| wrong < w || (wrong == w && right > r))
                {
                    best = Some((c, right, wrong));
                }
            }
            let Some((c, _, _)) = best else { break };
            used[c] = true;
            fake.set_category(cat, c, additive);
            rules.push(format!(
                "{}@{}",
                if additive { '+' } else { '-' },
                CATEGORIES[c]
            ));
        }
        for id in 0..n {
            let want = self.has(id);
            if fake.has(id) != want {
                // A container's rule covers its subcommands, which are
                // then corrected one by one.
                fake.set_command(cat, id, want);
                rules.push(format!(
                    "{}{}",
                    if want { '+' } else { '-' },
                    cat.cmds[id].name
                ));
            }
            // A command's first arguments follow its own rule.
            for (_, args) in self.firstargs.iter().filter(|(c, _)| *c == id) {
                for a in args {
                    rules.push(format!(
                        "+{}|{}",
                        cat.cmds[id].name,
                        String::from_utf8_lossy(a)
                    ));
                }
            }
        }
        rules.join(" ")
    }

    /// The rule text of a selector in ACL LIST: keys, channels, commands.
    pub(super) fn describe(&self, cat: &Catalog) -> String {
        let mut v = Vec::new();
        let k = self.keys_rule();
        if !k.is_empty() {
            v.push(k);
        }
        if !self.allchannels {
            v.push("resetchannels".into());
        }
        let ch = self.channels_list();
        if !ch.is_empty() {
            v.push(ch);
        }
        v.push(self.commands_rule(cat));
        v.join(" ")
    }

    pub(super) fn check(&self, req: &Request) -> Result<(), Denied> {
        if !self.allcommands && !req.no_auth && !self.has(req.id) {
            let arg_ok = req.args.get(1).is_some_and(|a| {
                self.firstargs
                    .iter()
                    .find(|(c, _)| *c == req.id)
                    .is_some_and(|(_, v)| v.iter().any(|x| a.eq_ignore_ascii_case(x)))
            });
            if !arg_ok {
                return Err(Denied::Command);
            }
        }
        for &(i, need) in req.keys {
            if !self.key_ok(&req.args[i], need) {
                return Err(Denied::Key(i));
            }
        }
        if !self.allchannels {
            for &(i, pattern) in req.channels {
                if !self.channel_ok(&req.args[i], pattern) {
                    return Err(Denied::Channel(i));
                }
            }
        }
        Ok(())
    }

    pub(super) fn key_ok(&self, key: &[u8], need: u8) -> bool {
        self.allkeys
            || (self.keys.iter())
                .any(|(p, f)| f & need == need && storage::glob::matches(p, key, false))
    }

    /// A channel matches a pattern of the user's; a pattern (PSUBSCRIBE)
    /// must be one of them literally.
    pub(super) fn channel_ok(&self, ch: &[u8], pattern: bool) -> bool {
        self.allchannels
            || self.channels.iter().any(|p| {
                if pattern {
                    p == ch
                } else {
                    storage::glob::matches(p, ch, false)
                }
            })
    }
}

/// Why a request is refused. Of several selectors' refusals, Redis
/// reports the one that got furthest: the greatest in this order (a key or
/// channel further in the arguments is further).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command,
    /// The argument index of the key.
    Key(usize),
    /// The argument index of the channel.
    Channel(usize),
}

/// A request as the check needs it.
pub struct Request<'a> {
    pub id: usize,
    pub args: &'a [bytes::Bytes],
    /// Allowed to anyone (AUTH, HELLO, …).
    pub no_auth: bool,
    /// Keys by argument index, with what they need (`READ`, `WRITE`).
    pub keys: &'a [(usize, u8)],
    /// Channels by argument index, and whether each is a pattern.
    pub channels: &'a [(usize, bool)],
}
