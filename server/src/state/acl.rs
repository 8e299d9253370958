//! The users in `State::acl`: read from redis.conf's `user` lines or the
//! aclfile, at start and by ACL LOAD.

use crate::core::acl::catalog::catalog;
use crate::core::command::is;
use crate::state::State;

/// Users from `user` lines or the aclfile, before clients connect. Both
/// at once are refused, as Redis refuses them.
pub fn at_startup(st: &mut State) -> Result<(), String> {
    let file = st.cfg.aclfile.clone();
    if !file.is_empty() && !st.cfg.users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    let users = if file.is_empty() {
        if st.cfg.users.is_empty() {
            return Ok(());
        }
        crate::core::acl::parse_users(catalog(), &st.cfg.users, pubsub_all(st))?
    } else {
        read_aclfile(st, &file)?
    };
    install(st, users);
    Ok(())
}

/// The users of the aclfile; the error as ACL LOAD reports it.
pub fn read_aclfile(st: &State, file: &str) -> Result<Vec<crate::core::acl::User>, String> {
    let text = std::fs::read(file).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{file}': {}",
            crate::core::os::strerror(&e)
        )
    })?;
    let mut lines = Vec::new();
    let mut numbers = Vec::new();
    for (n, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() || line.starts_with(b"#") {
            continue;
        }
        let words = protocol::split_args(line).unwrap_or_default();
        if words.len() < 2 || !is(&words[0], "user") {
            return Err(format!(
                "{file}:{} should start with user keyword followed by the username. ",
                n + 1
            ));
        }
        lines.push(
            words[1..]
                .iter()
                .map(|w| w.to_vec())
                .collect::<Vec<Vec<u8>>>(),
        );
        numbers.push(n + 1);
    }
    let cat = catalog();
    let all = pubsub_all(st);
    let mut users: Vec<crate::core::acl::User> = Vec::new();
    for (words, n) in lines.iter().zip(numbers) {
        let name = String::from_utf8_lossy(&words[0]).into_owned();
        if users.iter().any(|u| *u.name == *name) {
            return Err(format!(
                "WARNING: Duplicate user '{name}' found on line {n}. "
            ));
        }
        let mut one = crate::core::acl::parse_users(cat, std::slice::from_ref(words), all)
            .map_err(|e| {
                let why = e.rsplit(": ").next().unwrap_or(&e).to_string();
                format!("{file}:{n}: {why}. ")
            })?;
        users.append(&mut one);
    }
    Ok(users)
}

/// Replaces the users; the slots whose clients must be disconnected: all
/// but `default`'s, whose clients keep it with its new rules (Redis 7.0).
pub fn install(st: &mut State, users: Vec<crate::core::acl::User>) -> Vec<usize> {
    let mut dropped = st.acl.replace(users);
    dropped.retain(|&s| s != st.acl.default_slot());
    dropped
}

pub fn pubsub_all(st: &State) -> bool {
    st.cfg.acl_pubsub_default == "allchannels"
}
