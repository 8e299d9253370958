//! The CLIENT PAUSE check connections make before they run a request: a
//! paused request waits, unread, until the pause ends. It looks the
//! request up in the command table (for EXEC, what its MULTI queued),
//! so it is the dispatcher's; the pause itself is `State::pause`.

use super::resolve;
use crate::state::{Client, State};
use bytes::Bytes;

/// Whether a request of `cl` must wait: for the current CLIENT PAUSE to
/// end, or for a load from a file to pass its first `loading-process-
/// events-interval-bytes` (see `Loading::from_file`).
pub fn must_pause(st: &State, cl: &Client, args: &[Bytes], now: i64) -> bool {
    // Replicas are never paused: their acknowledgements keep coming.
    if cl.peer.replica {
        return false;
    }
    if let Some(l) = st.loading.as_ref().filter(|l| l.from_file && !l.is_async) {
        let interval = st.cfg.loading_process_events_interval_bytes.max(1) as u64;
        if l.progress
            .loaded_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
            < interval
        {
            return true;
        }
    }
    let Some(p) = &st.pause else {
        return false;
    };
    if p.until_ms <= now {
        return false;
    }
    match resolve(args) {
        // Refused at once: the gatekeeper's arity check comes first.
        Ok(cmd) if !cmd.arity_ok(args.len()) => false,
        Ok(cmd) if p.writes_only => {
            super::gate::has_trait(st, cl, cmd, args, super::gate::traits::PAUSE_WRITE)
        }
        Ok(_) => true,
        Err(_) => false,
    }
}
