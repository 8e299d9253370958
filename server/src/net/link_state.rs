//! The replica link's record in the state: whether a link task still
//! serves the current REPLICAOF, and the state of the link to the master.

use crate::core::clock::now_ms;
use crate::state::repl::{MasterState, Received, Transfer};
use crate::state::State;
use std::sync::Arc;

/// Whether the link task of REPLICAOF number `gen` is still the current one.
pub(super) fn current(st: &State, gen: u64) -> bool {
    st.repl.master.as_ref().is_some_and(|m| m.gen == gen)
}

/// Sets the state of the link of REPLICAOF number `gen`, if it is still
/// the current one (a transfer's progress starts with `Sync`).
pub(super) fn set_state(st: &mut State, gen: u64, s: MasterState) {
    if let Some(m) = st.repl.master.as_mut().filter(|m| m.gen == gen) {
        let now_s = now_ms() / 1000;
        if s != MasterState::Connected && m.state == MasterState::Connected {
            m.down_since_s = now_s;
        }
        m.state = s;
        m.last_io_s = now_s;
        m.transfer = (s == MasterState::Sync).then(|| Transfer {
            total: -1,
            received: Arc::new(Received {
                last_io_s: now_s.into(),
                ..Received::default()
            }),
        });
    }
}
