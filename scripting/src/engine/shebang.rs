//! The `#!lua` first lines: EVAL's (`flags=`) and FUNCTION LOAD's
//! (`name=`), and the rule for library and function names.
//!
//! Apart because it is plain text parsing with no interpreter in it, which
//! the server also calls on its own (`parse_eval_shebang`, for a script's
//! flags before it runs).

use super::flags;

pub(super) fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && n.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

pub(super) const BAD_NAME: &str = "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// `#!lua [flags=a,b]` on the first line: the flags and the code to
/// compile (the shebang commented out, so line numbers stay).
pub fn parse_eval_shebang(body: &[u8]) -> Result<(u32, Vec<u8>), String> {
    if !body.starts_with(b"#!") {
        return Ok((flags::EVAL_COMPAT, body.to_vec()));
    }
    let end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    let mut fl = 0;
    for p in parts {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {p}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            fl |= flags::parse(f)
                .ok_or_else(|| format!("ERR Unexpected flag in script shebang: {f}"))?;
        }
    }
    Ok((fl, [b"--", body].concat()))
}

/// FUNCTION LOAD's `#!lua name=<lib>` header: the name and the code.
pub(super) fn parse_library_shebang(code: &[u8]) -> Result<(String, Vec<u8>), String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let end = code.iter().position(|&c| c == b'\n').unwrap_or(code.len());
    // Words as Redis splits the line: quotes group and are removed.
    let words = protocol::split_args(&code[..end]).ok_or("ERR Invalid library metadata")?;
    let mut parts = words.iter().map(|w| String::from_utf8_lossy(w));
    let first = parts.next().unwrap_or_default();
    let engine = first.trim_start_matches("#!");
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut name = None;
    for p in parts {
        match p.split_once('=') {
            Some(("name", _)) if name.is_some() => {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                )
            }
            Some(("name", v)) => name = Some(v.to_string()),
            _ => return Err(format!("ERR Invalid metadata value given: {p}")),
        }
    }
    let name = name.ok_or("ERR Library name was not given")?;
    if !valid_name(name.as_bytes()) {
        return Err(BAD_NAME.into());
    }
    Ok((name, [b"--", code].concat()))
}
