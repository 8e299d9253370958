//! Finding Redis's rows: by name, by their place in one list (where the
//! commands' statistics are counted), and after `rename-command`.

use super::meta::META;
use super::Meta;

/// Redis's row of a command or subcommand by full name.
pub fn find(name: &str) -> Option<&'static Meta> {
    let (top, sub) = match name.split_once('|') {
        Some((p, s)) => (p, Some(s)),
        None => (name, None),
    };
    let i = META.binary_search_by(|m| m.name.cmp(top)).ok()?;
    let m = &META[i];
    match sub {
        None => Some(m),
        Some(_) => m.subs.iter().find(|s| s.name == name),
    }
}

/// `rename-command` lines applied in order to `names`, as Redis applies them
/// at start-up: the old name must be there at that point, the new one must
/// not be; an empty new name removes the command.
pub fn apply_renames<T>(
    names: &mut Vec<(String, T)>,
    renames: &[(String, String)],
) -> Result<(), &'static str> {
    for (old, new) in renames {
        let i = names
            .iter()
            .position(|(n, _)| n.eq_ignore_ascii_case(old))
            .ok_or("No such command in rename-command")?;
        let (_, what) = names.swap_remove(i);
        if new.is_empty() {
            continue;
        }
        if names.iter().any(|(n, _)| n.eq_ignore_ascii_case(new)) {
            return Err("Target command name already exists");
        }
        names.push((new.to_ascii_lowercase(), what));
    }
    Ok(())
}

/// Whether `renames` apply to Redis's commands: the check made as each
/// `rename-command` line is read.
pub fn check_renames(renames: &[(String, String)]) -> Result<(), &'static str> {
    let mut names: Vec<(String, ())> = META.iter().map(|m| (m.name.to_string(), ())).collect();
    apply_renames(&mut names, renames)
}

/// Every command and subcommand of Redis's, in one list: a command's place
/// in it is where its statistics are counted (`Stats::cmd`), so that the
/// statistics know their names without the handler table.
pub fn rows() -> &'static [&'static Meta] {
    static ROWS: std::sync::OnceLock<Vec<&'static Meta>> = std::sync::OnceLock::new();
    ROWS.get_or_init(|| {
        META.iter()
            .flat_map(|m| std::iter::once(m).chain(m.subs.iter()))
            .collect()
    })
}

/// The place of `m` in [`rows`].
pub fn slot_of(m: &'static Meta) -> usize {
    rows()
        .iter()
        .position(|r| std::ptr::eq(*r, m))
        .expect("a row of META")
}
