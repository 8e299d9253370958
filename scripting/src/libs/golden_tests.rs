//! Runs every case recorded from Redis 7.0.15 (see gen_golden.py) in an mlua
//! Lua 5.1 with these libraries and compares the rendered results.

use super::golden::{CASES, PRELUDE};
use mlua::Lua;

/// Runs one case body the way gen_golden.py ran it through EVAL.
pub(super) fn run_case(body: &str) -> String {
    let lua = Lua::new();
    super::register_all(&lua).expect("register");
    let script = PRELUDE.replacen(" %s ", &format!(" {body} "), 1);
    match lua
        .load(&script)
        .set_name("@user_script")
        .eval::<mlua::String>()
    {
        Ok(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        Err(e) => format!("<script error: {e}>"),
    }
}

#[test]
fn golden_cases_match_redis() {
    // Deep cases recurse a few thousand levels; give them Redis's 8 MiB.
    let failures = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| {
            let mut failures = Vec::new();
            for (body, expected) in CASES {
                if std::env::var_os("GOLDEN_TRACE").is_some() {
                    eprintln!("running: {body}");
                }
                let got = run_case(body);
                if got != *expected {
                    failures.push(format!("case: {body}\n  redis: {expected}\n  ours:  {got}"));
                }
            }
            failures
        })
        .expect("spawn")
        .join()
        .expect("join");
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

#[test]
fn deepest_nesting_fits_a_2mib_stack() {
    // Tokio workers and test threads get 2 MiB; the deepest inputs Lua's
    // stack limit lets through must not overflow it.
    let cases = [
        "local c = cjson.new() c.encode_max_depth(100000) return #c.encode(nest(7997, 1))",
        "local c = cjson.new() c.decode_max_depth(100000) return type(c.decode(string.rep('[', 7998) .. string.rep(']', 7998)))",
        "return type(cmsgpack.unpack(string.rep('\\145', 3999) .. '\\1'))",
        "return type(cmsgpack.unpack(string.rep('\\129\\1', 3999) .. '\\1'))",
    ];
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            for body in cases {
                let got = run_case(body);
                assert!(got.starts_with("ok | "), "{body}: {got}");
            }
        })
        .expect("spawn")
        .join()
        .expect("join");
}
