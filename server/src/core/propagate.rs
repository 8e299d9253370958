//! The propagation stream: what changed data, as the commands that replay
//! it (Redis's `alsoPropagate`).
//!
//! Every command runs between [`Stream::start`] and [`Stream::end`]
//! (`State::command_start`/`command_end` wire them to the dirty counter
//! and the consumers). A command that moved the dirty counter
//! propagates its own arguments, unless its handler said otherwise through
//! [`Stream::rewrite`] (a rewrite: `SET … PXAT` for a relative expiry,
//! `LPOP key` for a served `BLPOP`, …; called several times, several ops) or
//! [`Stream::decline`] (containers: EXEC and scripts propagate only what
//! the commands they run propagate). A rewrite counts only if the command
//! did change data. Deletions the server makes by itself (expired and
//! evicted keys) go out at once as `DEL`, a unit of their own ([`Stream::add`],
//! as `State::propagate_del`).
//!
//! Commands nested in one top-level command (EXEC, scripts, served
//! blocked clients are top-level) form one unit: the ops it collected,
//! each with its database, are handed to every [`Consumer`] when the
//! outermost command ends, or at once outside any command. Nothing is
//! collected (nor any op built) while no consumer wants the stream.

use bytes::Bytes;

/// One op: a command's arguments.
pub type Op = Vec<Bytes>;

/// A unit as the consumers get it: its ops in order, each with its
/// database, borrowed (a command on its own is fed its own arguments).
pub type Unit<'a> = [(usize, &'a [Bytes])];

/// Set in an op's database number: the op is for replicas only, not the
/// AOF (PUBLISH, as Redis's `forceCommandPropagation(PROPAGATE_REPL)`).
pub const REPL_ONLY: usize = 1 << (usize::BITS - 1);
/// The same, for the AOF only (a script's `redis.set_repl(REPL_AOF)`).
pub const AOF_ONLY: usize = 1 << (usize::BITS - 2);

/// The ops of `unit` not marked `exclude` (REPL_ONLY for the AOF,
/// AOF_ONLY for replicas), with their plain database numbers.
pub fn only<'a, 'b>(unit: &'b Unit<'a>, exclude: usize) -> std::borrow::Cow<'b, Unit<'a>> {
    const MARKS: usize = REPL_ONLY | AOF_ONLY;
    if unit.iter().all(|(db, _)| db & MARKS == 0) {
        return std::borrow::Cow::Borrowed(unit);
    }
    unit.iter()
        .filter(|(db, _)| db & exclude == 0)
        .map(|&(db, op)| (db & !MARKS, op))
        .collect()
}

/// A reader of the stream: the AOF, and the replication stream (`repl`).
pub trait Consumer {
    /// Whether ops are wanted now.
    fn wants(&self) -> bool;
    /// Takes a finished unit: its ops in order, each with its database.
    fn feed(&mut self, unit: &Unit);
}

/// The stream's readers, as `State` lends them for one call.
pub type Consumers<'a> = [&'a mut dyn Consumer];

fn wanted(cs: &Consumers) -> bool {
    cs.iter().any(|c| c.wants())
}

fn feed(cs: &mut Consumers, unit: &Unit) {
    for c in cs.iter_mut() {
        if c.wants() {
            c.feed(unit);
        }
    }
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
    /// The innermost running command propagates even if it changed
    /// nothing (FLUSHALL and FLUSHDB of empty databases, as Redis's
    /// `forceCommandPropagation`).
    forced: bool,
    /// The same, for replicas only (see [`REPL_ONLY`]).
    forced_repl: bool,
    /// Where ops go while a script said so (`redis.set_repl`): not to
    /// the AOF, not to replicas.
    skip_aof: bool,
    skip_repl: bool,
}

/// Where a command started: what [`Stream::end`] compares with.
pub struct Mark {
    dirty: u64,
    db: usize,
    rewrites: usize,
    outer_decided: bool,
}

/// An integer argument.
pub fn int(n: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

impl Stream {
    /// A unit is open with ops in it (inside EXEC or a script): the AOF
    /// must not switch files in the middle of it.
    pub fn pending(&self) -> bool {
        !self.ops.is_empty()
    }

    /// Before a command's handler runs in database `db`; `dirty` is the
    /// server's dirty counter.
    pub fn start(&mut self, dirty: u64, db: usize) -> Mark {
        self.depth += 1;
        Mark {
            dirty,
            db,
            rewrites: self.rewrites.len(),
            outer_decided: std::mem::take(&mut self.decided),
        }
    }

    /// After the handler: the command's ops (its rewrites, else `args`)
    /// join the unit if it changed data (`dirty` moved); the unit ends at
    /// top level.
    pub fn end(&mut self, m: Mark, dirty: u64, args: &[Bytes], cs: &mut Consumers) {
        let forced = std::mem::take(&mut self.forced);
        let forced_repl = std::mem::take(&mut self.forced_repl);
        let changed = dirty > m.dirty || forced;
        let mut db = if changed { m.db } else { m.db | REPL_ONLY };
        if self.skip_aof {
            db |= REPL_ONLY;
        }
        if self.skip_repl {
            db |= AOF_ONLY;
        }
        let nowhere = db & REPL_ONLY != 0 && db & AOF_ONLY != 0;
        if (changed || forced_repl) && !nowhere && wanted(cs) {
            if self.decided {
                let own = self.rewrites.drain(m.rewrites..).map(|op| (db, op));
                self.ops.extend(own);
            } else if self.depth == 1 && self.ops.is_empty() {
                // A command on its own, the usual unit: its arguments go
                // as they are, not copied.
                feed(cs, &[(db, args)]);
            } else {
                self.ops.push((db, args.to_vec()));
            }
        }
        self.rewrites.truncate(m.rewrites);
        self.decided = m.outer_decided;
        self.depth -= 1;
        if self.depth == 0 {
            self.end_unit(cs);
        }
    }

    /// The running command propagates `op` instead of its arguments (one
    /// more op if called again), in its database at its start; `op` is
    /// built only if it is `wanted`.
    pub fn rewrite(&mut self, op: impl IntoIterator<Item = Bytes>, wanted: bool) {
        self.decided = true;
        if wanted {
            self.rewrites.push(op.into_iter().collect());
        }
    }

    /// The running command propagates nothing of its own.
    pub fn decline(&mut self) {
        self.decided = true;
    }

    /// The running command propagates whether or not it changed data.
    pub fn force(&mut self) {
        self.forced = true;
    }

    /// The running command propagates to replicas (not the AOF) even if
    /// it changed nothing.
    pub fn force_repl(&mut self) {
        self.forced_repl = true;
    }

    /// Where the ops of the commands that follow go (a script's
    /// `redis.set_repl`; both until said otherwise).
    pub fn set_targets(&mut self, aof: bool, repl: bool) {
        self.skip_aof = !aof;
        self.skip_repl = !repl;
    }

    /// Hands `op` to the consumers at once, as a unit of its own even
    /// inside a command: a key the server deletes by itself is never part
    /// of the command's MULTI/EXEC (Redis 7.0's `propagateNow` for
    /// deletions).
    pub fn add(&mut self, db: usize, op: Op, cs: &mut Consumers) {
        feed(cs, &[(db, &op)]);
    }

    fn end_unit(&mut self, cs: &mut Consumers) {
        if !self.ops.is_empty() {
            let unit: Vec<_> = self.ops.iter().map(|(db, op)| (*db, &op[..])).collect();
            feed(cs, &unit);
        }
        // The buffer is kept for the next unit.
        self.ops.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<Bytes> {
        s.split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    /// A consumer that keeps each unit as one line.
    #[derive(Default)]
    struct Log {
        on: bool,
        units: Vec<String>,
    }

    impl Consumer for Log {
        fn wants(&self) -> bool {
            self.on
        }
        fn feed(&mut self, unit: &Unit) {
            let ops: Vec<String> = unit
                .iter()
                .map(|(db, op)| {
                    let words: Vec<_> = op.iter().map(|a| String::from_utf8_lossy(a)).collect();
                    format!("{db}:{}", words.join(" "))
                })
                .collect();
            self.units.push(ops.join(" | "));
        }
    }

    /// Runs a command that moves the dirty counter by `dirty`, its handler
    /// being `body`.
    fn run(
        s: &mut Stream,
        log: &mut Log,
        dirty: &mut u64,
        cmd: &str,
        moved: u64,
        body: impl FnOnce(&mut Stream, &mut Log, &mut u64),
    ) {
        let m = s.start(*dirty, 0);
        *dirty += moved;
        body(s, log, dirty);
        s.end(m, *dirty, &args(cmd), &mut [log]);
    }

    #[test]
    fn own_args_rewrites_and_containers() {
        let (mut s, mut log, mut dirty) = (Stream::default(), Log::default(), 0);
        log.on = true;
        run(&mut s, &mut log, &mut dirty, "SET a 1", 1, |_, _, _| {});
        run(&mut s, &mut log, &mut dirty, "GET a", 0, |_, _, _| {});
        // A rewrite counts only if the command changed data.
        run(&mut s, &mut log, &mut dirty, "GETDEL x", 0, |s, _, _| {
            s.rewrite(args("DEL x"), true)
        });
        run(
            &mut s,
            &mut log,
            &mut dirty,
            "SETEX b 10 v",
            1,
            |s, _, _| s.rewrite(args("SET b v PXAT 5"), true),
        );
        // A container: what its commands propagate, as one unit; the
        // container's choice survives its nested commands'.
        run(&mut s, &mut log, &mut dirty, "EXEC", 0, |s, log, dirty| {
            s.decline();
            run(s, log, dirty, "SPOP s 2", 1, |s, _, _| {
                s.rewrite(args("SREM s m1"), true);
                s.rewrite(args("SREM s m2"), true);
            });
            run(s, log, dirty, "INCR n", 1, |_, _, _| {});
        });
        // Outside any command, an op is a unit of its own.
        s.add(0, args("DEL gone"), &mut [&mut log]);
        assert_eq!(
            log.units,
            [
                "0:SET a 1",
                "0:SET b v PXAT 5",
                "0:SREM s m1 | 0:SREM s m2 | 0:INCR n",
                "0:DEL gone"
            ]
        );
    }

    #[test]
    fn nothing_is_collected_while_no_consumer_reads() {
        let (mut s, mut log, mut dirty) = (Stream::default(), Log::default(), 0);
        run(&mut s, &mut log, &mut dirty, "SET a 1", 1, |s, log, _| {
            s.rewrite(args("SET a 2"), log.wants())
        });
        s.add(0, args("DEL gone"), &mut [&mut log]);
        assert!(s.ops.is_empty() && s.rewrites.is_empty());
        assert!(log.units.is_empty());
    }
}
