//! This server as a replica: the state of its link to its master.

use crate::state::State;

impl State {
    /// A replica without its master that must not serve stale data.
    pub fn serving_stale_refused(&self) -> bool {
        !self.cfg.replica_serve_stale_data
            && self
                .repl
                .master
                .as_ref()
                .is_some_and(|m| m.state != crate::state::repl::MasterState::Connected)
    }
}
