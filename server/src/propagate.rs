//! The propagation stream: what changed data, as the commands that replay
//! it (Redis's `alsoPropagate`).
//!
//! Every command runs between [`State::command_start`] and
//! [`State::command_end`]. A command that moved the dirty counter
//! propagates its own arguments, unless its handler said otherwise through
//! [`State::propagate_as`] (a rewrite: `SET … PXAT` for a relative expiry,
//! `LPOP key` for a served `BLPOP`, …; called several times, several ops) or
//! [`State::no_propagate`] (containers: EXEC and scripts propagate only what
//! the commands they run propagate). A rewrite counts only if the command
//! did change data. Deletions the server makes by itself (expired and
//! evicted keys) go in as `DEL` ([`State::propagate_del`]).
//!
//! Commands nested in one top-level command (EXEC, scripts, served
//! blocked clients are top-level) form one unit: the ops it collected,
//! each with its database, are handed to every [`Consumer`] when the
//! outermost command ends, or at once outside any command. Nothing is
//! collected (nor any op built) while no consumer wants the stream.

use crate::state::State;
use bytes::Bytes;

/// One op: a command's arguments.
pub type Op = Vec<Bytes>;

/// A reader of the stream: the AOF (replicas would be a second one).
pub trait Consumer {
    /// Whether ops are wanted now.
    fn wants(&self) -> bool;
    /// Takes a finished unit: its ops in order, each with its database.
    fn feed(&mut self, unit: &[(usize, Op)]);
}

/// Every consumer of the stream.
fn consumers(st: &mut State) -> [&mut dyn Consumer; 1] {
    [&mut st.aof]
}

/// The running unit.
#[derive(Default)]
pub struct Stream {
    /// Ops of the unit so far, with their database.
    ops: Vec<(usize, Op)>,
    /// Nesting of running commands: the unit ends at depth 0.
    depth: u32,
    /// The running commands' rewrites, innermost last; each command's
    /// start in it is in its [`Mark`].
    rewrites: Vec<Op>,
    /// The innermost running command replaced its own arguments.
    decided: bool,
}

/// Where a command started: what [`State::command_end`] compares with.
pub struct Mark {
    dirty: u64,
    db: usize,
    rewrites: usize,
    outer_decided: bool,
}

impl Stream {
    /// A unit is open with ops in it (inside EXEC or a script): the AOF
    /// must not switch files in the middle of it.
    pub fn pending(&self) -> bool {
        !self.ops.is_empty()
    }
}

/// An integer argument.
pub fn int(n: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

impl State {
    /// Whether the stream is read: a handler builds a rewrite only then.
    pub fn propagating(&mut self) -> bool {
        consumers(self).iter().any(|c| c.wants())
    }

    /// Before a command's handler runs in database `db`.
    pub fn command_start(&mut self, db: usize) -> Mark {
        let p = &mut self.prop;
        p.depth += 1;
        Mark {
            dirty: self.dirty,
            db,
            rewrites: p.rewrites.len(),
            outer_decided: std::mem::take(&mut p.decided),
        }
    }

    /// After the handler: the command's ops (its rewrites, else `args`)
    /// join the unit if it changed data; the unit ends at top level.
    pub fn command_end(&mut self, m: Mark, args: &[Bytes]) {
        let changed = self.dirty > m.dirty;
        if changed && self.propagating() {
            let p = &mut self.prop;
            if p.decided {
                let own = p.rewrites.drain(m.rewrites..).map(|op| (m.db, op));
                p.ops.extend(own);
            } else {
                p.ops.push((m.db, args.to_vec()));
            }
        }
        let p = &mut self.prop;
        p.rewrites.truncate(m.rewrites);
        p.decided = m.outer_decided;
        p.depth -= 1;
        if p.depth == 0 {
            self.end_unit();
        }
    }

    /// The running command propagates `op` instead of its arguments (one
    /// more op if called again), in its database at its start.
    pub fn propagate_as(&mut self, op: impl IntoIterator<Item = Bytes>) {
        self.prop.decided = true;
        if self.propagating() {
            self.prop.rewrites.push(op.into_iter().collect());
        }
    }

    /// The running command propagates nothing of its own.
    pub fn no_propagate(&mut self) {
        self.prop.decided = true;
    }

    /// Adds `op` to the running unit (or as a unit of its own outside any
    /// command).
    pub fn propagate(&mut self, db: usize, op: Op) {
        if !self.propagating() {
            return;
        }
        self.prop.ops.push((db, op));
        if self.prop.depth == 0 {
            self.end_unit();
        }
    }

    /// A key the server deleted by itself (expired, evicted), as `DEL`.
    pub fn propagate_del(&mut self, db: usize, key: &[u8]) {
        if self.propagating() {
            let op = vec![Bytes::from_static(b"DEL"), Bytes::copy_from_slice(key)];
            self.propagate(db, op);
        }
    }

    fn end_unit(&mut self) {
        let ops = std::mem::take(&mut self.prop.ops);
        if !ops.is_empty() {
            for c in consumers(self) {
                if c.wants() {
                    c.feed(&ops);
                }
            }
        }
        // The buffer is kept for the next unit.
        self.prop.ops = ops;
        self.prop.ops.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn args(s: &str) -> Vec<Bytes> {
        s.split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    /// What the AOF was fed, its RESP framing dropped.
    fn logged(st: &State) -> String {
        let text = String::from_utf8_lossy(&st.aof.buf);
        let words: Vec<&str> = text
            .split("\r\n")
            .filter(|w| !w.is_empty() && !w.starts_with(['*', '$']))
            .collect();
        words.join(" ")
    }

    /// Runs a command that moves the dirty counter by `dirty`, its handler
    /// being `body`.
    fn run(st: &mut State, cmd: &str, dirty: u64, body: impl FnOnce(&mut State)) {
        let m = st.command_start(0);
        st.dirty += dirty;
        body(st);
        st.command_end(m, &args(cmd));
    }

    #[test]
    fn own_args_rewrites_and_containers() {
        let mut st = State::new(Config::default());
        st.aof.on = true;
        run(&mut st, "SET a 1", 1, |_| {});
        run(&mut st, "GET a", 0, |_| {});
        // A rewrite counts only if the command changed data.
        run(&mut st, "GETDEL x", 0, |st| st.propagate_as(args("DEL x")));
        run(&mut st, "SETEX b 10 v", 1, |st| {
            st.propagate_as(args("SET b v PXAT 5"))
        });
        assert_eq!(logged(&st), "SELECT 0 SET a 1 SET b v PXAT 5");
        st.aof.buf.clear();
        // A container: what its commands propagate, as one unit; the
        // container's choice survives its nested commands'.
        run(&mut st, "EXEC", 0, |st| {
            st.no_propagate();
            run(st, "SPOP s 2", 1, |st| {
                st.propagate_as(args("SREM s m1"));
                st.propagate_as(args("SREM s m2"));
            });
            run(st, "INCR n", 1, |_| {});
        });
        assert_eq!(logged(&st), "MULTI SREM s m1 SREM s m2 INCR n EXEC");
        st.aof.buf.clear();
        // Outside any command, an op is a unit of its own.
        st.propagate_del(0, b"gone");
        assert_eq!(logged(&st), "DEL gone");
    }

    #[test]
    fn nothing_is_collected_while_no_consumer_reads() {
        let mut st = State::new(Config::default());
        run(&mut st, "SET a 1", 1, |st| st.propagate_as(args("SET a 2")));
        st.propagate_del(0, b"gone");
        assert!(st.prop.ops.is_empty() && st.prop.rewrites.is_empty());
        assert!(st.aof.buf.is_empty());
    }
}
