//! What runs while a script holds the state lock past
//! `busy-reply-threshold` (in Redis, `processCommand` while
//! `isInsideYieldingLongCommand`): the connections answer SCRIPT KILL,
//! FUNCTION KILL and FUNCTION STATS without the lock, hand the commands
//! flagged `allow_busy` over to the script's thread, keep a client's
//! MULTI/DISCARD/EXEC in a [`BusyTx`], and refuse the rest with -BUSY.

use super::flags::ALLOW_BUSY;
use super::{execute, is, resolve};
use crate::state::{Client, Shared, State};
use bytes::{Bytes, BytesMut};
use protocol::ReplyBuf;
use scripting::{FunctionCall, RunFlags};
use std::sync::atomic::Ordering::Relaxed;

pub const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

/// The -BUSY text for a script (`function` = an FCALL) past the threshold.
pub fn busy_error(function: bool) -> &'static str {
    if function {
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    } else {
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    }
}

/// SCRIPT KILL / FUNCTION KILL against the running script, answered
/// without the state lock (the script holds it): the reply's error text or
/// `None` for OK.
pub fn kill_running(run: &RunFlags, function_kill: bool) -> Result<(), &'static str> {
    if !run.running.load(Relaxed) {
        return Err(NOTBUSY);
    }
    if run.wrote.load(Relaxed) {
        return Err(UNKILLABLE);
    }
    if run.function.load(Relaxed) != function_kill {
        return Err(busy_error(run.function.load(Relaxed)));
    }
    run.kill.store(true, Relaxed);
    Ok(())
}

/// Whether `args` is a command Redis runs while a script is busy (flagged
/// `allow_busy`), for `busy_call`. SHUTDOWN waits for the script but with
/// NOSAVE (the connection exits at once) or ABORT: its other forms are
/// refused with -BUSY.
pub fn runs_while_busy(args: &[Bytes]) -> bool {
    if is(&args[0], "shutdown") {
        return args[1..].iter().any(|a| is(a, "abort"));
    }
    resolve(args).is_ok_and(|c| c.has(ALLOW_BUSY))
}

/// Runs the commands other connections handed over while the script runs
/// (see `busy_call`).
pub(super) fn serve_busy(st: &mut State) {
    let work = std::mem::take(&mut st.busy.lock().work);
    for w in work {
        w(st);
    }
}

/// Runs `args`, a command Redis allows while a script is busy (AUTH,
/// HELLO, WATCH, MULTI, ...), for client `id` and returns its reply: on
/// the script's thread between two steps of the script, or with the lock
/// once the script is over. `tx` is what the connection answered while
/// busy; it is applied first and follows the command.
pub async fn busy_call(shared: &Shared, id: u64, args: Vec<Bytes>, tx: &mut BusyTx) -> BytesMut {
    let (send, recv) = tokio::sync::oneshot::channel();
    let mut mine = std::mem::take(tx);
    let work = move |st: &mut State| {
        let _ = send.send(run_while_busy(st, id, &args, &mut mine).map(|out| (out, mine)));
    };
    shared.with_state(work).await;
    match recv.await {
        Ok(Some((out, back))) => {
            *tx = back;
            out
        }
        // The client is gone.
        _ => BytesMut::new(),
    }
}

/// Runs `args` for client `id` while a script may be halfway through: the
/// clients its writes unblocked wait for its end, and its own touches of
/// watched keys stay its own.
fn run_while_busy(st: &mut State, id: u64, args: &[Bytes], tx: &mut BusyTx) -> Option<BytesMut> {
    let mut cl = st.clients.remove(&id)?;
    tx.apply(st, &mut cl);
    let ready = std::mem::take(&mut st.shard.ready_keys);
    let cas = std::mem::take(&mut st.dirty_cas_running);
    let mut out = ReplyBuf::new(cl.resp3);
    st.tick(std::time::Instant::now());
    execute(st, &mut cl, &mut out, args);
    st.dirty_cas_running = cas;
    let mut ready_now = std::mem::replace(&mut st.shard.ready_keys, ready);
    st.shard.ready_keys.append(&mut ready_now);
    tx.in_multi = cl.multi.is_some();
    st.clients.insert(id, cl);
    Some(out.buf)
}

/// FUNCTION STATS from another connection while a script is busy, answered
/// without the state lock; during an EVAL it is -BUSY, as in Redis.
pub fn busy_function_stats(run: &RunFlags, out: &mut ReplyBuf) -> Result<(), &'static str> {
    let call = run.function_call.lock().unwrap_or_else(|e| e.into_inner());
    match &*call {
        Some(f) if run.running.load(Relaxed) && run.function.load(Relaxed) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let ran = now - run.start_ms.load(Relaxed);
            write_function_stats(out, Some((f, ran)), f.libraries, f.functions);
            Ok(())
        }
        _ => Err(busy_error(run.function.load(Relaxed))),
    }
}

pub(super) fn write_function_stats(
    out: &mut ReplyBuf,
    running: Option<(&FunctionCall, i64)>,
    libs: usize,
    funcs: usize,
) {
    out.map(2);
    out.bulk(b"running_script");
    match running {
        Some((f, ran)) => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(f.name.as_bytes());
            out.bulk(b"command");
            out.array(f.command.len());
            for a in &f.command {
                out.bulk(a);
            }
            out.bulk(b"duration_ms");
            out.int(ran);
        }
        None => out.null(),
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(libs as i64);
    out.bulk(b"functions_count");
    out.int(funcs as i64);
}

/// A client's transaction while a busy script holds the state lock. As in
/// Redis, MULTI and DISCARD are allowed then, any other request is refused
/// with -BUSY and marks an open transaction, and a refused EXEC discards
/// it (`-EXECABORT ... because of: BUSY ...`). The connection answers
/// these without the client record; `apply` hands the outcome over once
/// the lock is back.
#[derive(Default)]
pub struct BusyTx {
    /// Whether the client is in MULTI: as seen when the lock was last
    /// held, then as changed while busy.
    pub in_multi: bool,
    /// The transaction open before was ended (DISCARD, refused EXEC).
    ended: bool,
    /// A request was refused inside the transaction: EXEC aborts.
    refused: bool,
}

impl BusyTx {
    /// The reply to `args`, refused with `busy` unless allowed while busy.
    pub fn answer(&mut self, args: &[Bytes], busy: &str) -> Result<(), String> {
        let name = match args {
            [name] => name.to_ascii_lowercase(),
            _ => Vec::new(),
        };
        match &name[..] {
            b"multi" if self.in_multi => Err("ERR MULTI calls can not be nested".into()),
            b"multi" => {
                self.in_multi = true;
                Ok(())
            }
            b"discard" if !self.in_multi => Err("ERR DISCARD without MULTI".into()),
            b"discard" | b"exec" => {
                let was_in = std::mem::replace(&mut self.in_multi, false);
                self.ended = true;
                self.refused = false;
                match (was_in, &name[..]) {
                    (true, b"discard") => Ok(()),
                    _ => Err(format!(
                        "EXECABORT Transaction discarded because of: {busy}"
                    )),
                }
            }
            _ => {
                self.refused |= self.in_multi;
                Err(busy.into())
            }
        }
    }

    /// Applies what happened while busy to the client.
    pub fn apply(&mut self, st: &mut State, cl: &mut Client) {
        if std::mem::take(&mut self.ended) {
            cl.multi = None;
            cl.multi_error = false;
            st.unwatch_all(cl);
        }
        if self.in_multi && cl.multi.is_none() {
            cl.multi = Some(Vec::new());
            cl.multi_traits = 0;
        }
        if std::mem::take(&mut self.refused) {
            cl.multi_error = true;
        }
    }
}
