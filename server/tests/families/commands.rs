//! The command table as clients see it, moved from the black-box protocol
//! tests: arity errors for everything COMMAND lists.

use cinnabar_server::testkit::*;

/// Every command COMMAND lists (and every subcommand) answers a wrong
/// argument count with Redis's arity error.
#[test]
fn wrong_arity_for_every_command() {
    let mut h = Harness::new();
    let Frame::Array(table) = h.run(&["COMMAND"]) else {
        panic!("COMMAND gives an array");
    };
    assert!(!table.is_empty());
    let mut checked = 0;
    let mut bad = Vec::new();
    let mut entries: Vec<(String, i64)> = Vec::new();
    for e in &table {
        let Frame::Array(f) = e else { continue };
        let (Some(Frame::Bulk(name)), Some(Frame::Integer(arity))) = (f.first(), f.get(1)) else {
            continue;
        };
        entries.push((String::from_utf8_lossy(name).into_owned(), *arity));
        if let Some(Frame::Array(subs)) = f.get(9) {
            for sub in subs {
                if let Frame::Array(sf) = sub {
                    if let (Some(Frame::Bulk(sn)), Some(Frame::Integer(sa))) =
                        (sf.first(), sf.get(1))
                    {
                        entries.push((String::from_utf8_lossy(sn).into_owned(), *sa));
                    }
                }
            }
        }
    }
    for (name, arity) in &entries {
        // Argument vectors whose length breaks the arity: one too many for
        // a fixed arity, one too few where the minimum allows it.
        let mut counts = Vec::new();
        if *arity > 0 {
            counts.push(*arity as usize + 1);
            if *arity >= 2 {
                counts.push(*arity as usize - 1);
            }
        } else if *arity <= -2 {
            counts.push((-*arity) as usize - 1);
        }
        let words: Vec<&str> = name.split('|').collect();
        for argc in counts {
            if argc < words.len() {
                continue;
            }
            let mut args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            while args.len() < argc {
                args.push("x".into());
            }
            let msg = format!("wrong number of arguments for '{name}' command");
            // Redis answers a rejected EXEC with EXECABORT, even outside MULTI.
            let want = if name == "exec" {
                err(&format!(
                    "EXECABORT Transaction discarded because of: {msg}"
                ))
            } else {
                err(&format!("ERR {msg}"))
            };
            // A fresh client each, so no state (MULTI, SUBSCRIBE) leaks.
            let c = h.connect();
            let got = h.run_on(c, &args);
            checked += 1;
            if got != want {
                bad.push(format!("{args:?}: {got:?}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {checked} arity checks wrong:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(checked > 300, "{checked}");
}
