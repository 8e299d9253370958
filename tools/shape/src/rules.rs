//! The rules, applied to what was read.

use crate::graph::{self, Arrows};
use crate::read::FileFacts;
use crate::{
    Arrow, Report, Violation, CIRCLES_ALLOWED_IN, DISPATCH, FAMILIES_IN, FLOORS, GRAPH_ROOT,
    LARGEST_SHOWN, MAX_FILE_LINES, MAX_FN_LINES, ROOT_FILES, ROOT_FLOOR, TABLE,
};

/// A file's place under `server/src`, after the root.
fn under_src(rel: &str) -> &str {
    rel.strip_prefix(GRAPH_ROOT)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(rel)
}

/// `None`: outside the floors (R0).
pub(crate) fn floor(rel: &str) -> Option<u8> {
    let under = under_src(rel);
    match under.split_once('/') {
        None => ROOT_FILES.contains(&under).then_some(ROOT_FLOOR),
        Some((dir, _)) => FLOORS.iter().find(|(d, _)| *d == dir).map(|&(_, n)| n),
    }
}

#[derive(Debug, PartialEq)]
enum CmdPart<'a> {
    Dispatch(&'a str),
    Family(&'a str),
}

fn cmd_part(rel: &str) -> Option<CmdPart<'_>> {
    let rest = under_src(rel)
        .strip_prefix(FAMILIES_IN)?
        .strip_prefix('/')?;
    Some(match rest.split_once('/') {
        Some((folder, _)) => CmdPart::Family(folder),
        None if DISPATCH.contains(&rest) => CmdPart::Dispatch(rest),
        None => CmdPart::Family(rest.strip_suffix(".rs").unwrap_or(rest)),
    })
}

fn arrow(
    files: &[String],
    (a, b): (usize, usize),
    names: &std::collections::BTreeSet<String>,
) -> Arrow {
    Arrow {
        from: files[a].clone(),
        to: files[b].clone(),
        names: names.iter().cloned().collect(),
    }
}

pub(crate) fn judge(facts: &[FileFacts], methods: bool) -> Report {
    let mut v = Vec::new();
    for f in facts {
        if let Some(e) = &f.error {
            v.push(Violation::Unreadable {
                file: f.rel.clone(),
                error: e.clone(),
            });
        }
    }

    let in_graph: Vec<&FileFacts> = facts.iter().filter(|f| crate::in_graph(&f.rel)).collect();
    let g = graph::build(GRAPH_ROOT, &in_graph, methods);
    let files = &g.files;

    for f in files {
        if floor(f).is_none() {
            v.push(Violation::OutsideFloors { file: f.clone() });
        }
    }
    let mut arrows_up = 0;
    for (&(a, b), names) in &g.arrows {
        if let (Some(fa), Some(fb)) = (floor(&files[a]), floor(&files[b])) {
            if fa < fb {
                arrows_up += 1;
                v.push(Violation::ArrowUp {
                    arrow: arrow(files, (a, b), names),
                    from_floor: fa,
                    to_floor: fb,
                });
            }
        }
    }

    let circles = graph::circles(files.len(), &g.arrows);
    let allowed = format!("{GRAPH_ROOT}/{CIRCLES_ALLOWED_IN}/");
    for c in &circles {
        if c.iter().all(|&i| files[i].starts_with(&allowed)) {
            continue;
        }
        v.push(Violation::Circle {
            files: c.iter().map(|&i| files[i].clone()).collect(),
            arrows: tying(files, c, &g.arrows),
        });
    }

    for (&(a, b), names) in &g.arrows {
        match (cmd_part(&files[a]), cmd_part(&files[b])) {
            (Some(CmdPart::Family(fa)), Some(CmdPart::Family(fb))) if fa != fb => {
                v.push(Violation::FamilyImportsFamily {
                    arrow: arrow(files, (a, b), names),
                    from_family: fa.to_string(),
                    to_family: fb.to_string(),
                });
            }
            (Some(CmdPart::Dispatch(d)), Some(CmdPart::Family(fb))) if d != TABLE => {
                v.push(Violation::DispatchImportsFamily {
                    arrow: arrow(files, (a, b), names),
                    family: fb.to_string(),
                });
            }
            (None, Some(CmdPart::Family(fb))) => {
                v.push(Violation::DispatchImportsFamily {
                    arrow: arrow(files, (a, b), names),
                    family: fb.to_string(),
                });
            }
            _ => {}
        }
    }

    for f in facts.iter().filter(|f| !f.generated && f.error.is_none()) {
        if f.lines_before_tests > MAX_FILE_LINES {
            v.push(Violation::LongFile {
                file: f.rel.clone(),
                lines: f.lines_before_tests,
                limit: MAX_FILE_LINES,
            });
        }
        for p in &f.past_shard {
            v.push(Violation::PastShard {
                file: f.rel.clone(),
                line: p.line,
                what: p.what.clone(),
            });
        }
        for func in f.fns.iter().filter(|func| func.lines > MAX_FN_LINES) {
            v.push(Violation::LongFn {
                file: f.rel.clone(),
                line: func.line,
                name: func.name.clone(),
                lines: func.lines,
                limit: MAX_FN_LINES,
            });
        }
    }
    // Stable: by rule, then as the checks found them (files and arrows sorted).
    v.sort_by_key(|x| x.rule());

    let mut largest: Vec<(String, usize)> = facts
        .iter()
        .filter(|f| !f.generated && f.error.is_none())
        .map(|f| (f.rel.clone(), f.lines_before_tests))
        .collect();
    largest.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    largest.truncate(LARGEST_SHOWN);

    Report {
        files: files.len(),
        arrows: g
            .arrows
            .iter()
            .map(|(&k, names)| arrow(files, k, names))
            .collect(),
        arrows_up,
        circles: circles
            .iter()
            .map(|c| c.iter().map(|&i| files[i].clone()).collect())
            .collect(),
        largest,
        violations: v,
    }
}

/// The arrows between the files of one circle.
fn tying(files: &[String], circle: &[usize], arrows: &Arrows) -> Vec<Arrow> {
    arrows
        .iter()
        .filter(|((a, b), _)| circle.binary_search(a).is_ok() && circle.binary_search(b).is_ok())
        .map(|(&k, names)| arrow(files, k, names))
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::testtree::Tree;
    use crate::{Report, Rule, Violation};

    fn check(files: &[(&str, &str)]) -> Report {
        let files: Vec<(String, &str)> = files
            .iter()
            .map(|(p, t)| {
                let p = if p.contains("/src/") || p.starts_with("tools/") {
                    p.to_string()
                } else {
                    format!("server/src/{p}")
                };
                (p, *t)
            })
            .collect();
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        Tree::new(&refs).check()
    }

    fn of(r: &Report, rule: Rule) -> Vec<String> {
        r.violations
            .iter()
            .filter(|v| v.rule() == rule)
            .map(|v| v.to_string().replace("server/src/", ""))
            .collect()
    }

    /// A function `name` of `lines` lines, signature to closing brace.
    fn fn_of(name: &str, lines: usize) -> String {
        format!(
            "fn {name}() {{\n{}}}\n",
            "    let _ = 0;\n".repeat(lines - 2)
        )
    }

    #[test]
    fn r0_a_file_outside_the_floors() {
        let r = check(&[
            ("lib.rs", ""),
            ("main.rs", ""),
            ("testkit.rs", ""),
            ("core/clock.rs", ""),
            ("state.rs", ""),
            ("misc/x.rs", ""),
        ]);
        assert_eq!(
            of(&r, Rule::R0),
            [
                "R0: misc/x.rs is outside the floors (a file of server/src lives in core/, state/, cmd/, net/ or is one of lib.rs, main.rs, testkit.rs)",
                "R0: state.rs is outside the floors (a file of server/src lives in core/, state/, cmd/, net/ or is one of lib.rs, main.rs, testkit.rs)",
            ]
        );
    }

    #[test]
    fn r1_an_arrow_up_a_floor() {
        let r = check(&[
            ("lib.rs", "use crate::net::serve;"),
            ("core/clock.rs", "use crate::state::{State, Client};"),
            ("core/log.rs", "fn f() { crate::testkit::rig(); }"),
            (
                "state/mod.rs",
                "pub struct State; pub struct Client;\nuse crate::core::clock::now;",
            ),
            ("net/mod.rs", "pub fn serve() { crate::cmd::run(); }"),
            ("cmd/mod.rs", "pub fn run() {}"),
            ("testkit.rs", "pub fn rig() {}"),
        ]);
        assert_eq!(
            of(&r, Rule::R1),
            [
                "R1: core/clock.rs -> state/mod.rs: Client, State: floor 1 may not import floor 2 (arrows point down only)",
                "R1: core/log.rs -> testkit.rs: rig: floor 1 may not import floor 5 (arrows point down only)",
            ]
        );
        assert_eq!(r.arrows_up, 2);
        assert!(of(&r, Rule::R0).is_empty());
    }

    #[test]
    fn r1_quiet_when_every_arrow_points_down() {
        let r = check(&[
            ("main.rs", "fn main() { cinnabar_server::net::serve(); }"),
            ("net/mod.rs", "pub fn serve() { crate::cmd::run(); }"),
            ("cmd/mod.rs", "pub fn run() { crate::state::go(); }"),
            ("state/mod.rs", "pub fn go() { crate::core::tick(); }"),
            ("core/mod.rs", "pub fn tick() {}"),
        ]);
        assert!(r.is_clean(), "{:?}", r.violations);
        assert_eq!((r.files, r.arrows.len(), r.arrows_up), (5, 4, 0));
    }

    #[test]
    fn r2_a_circle_outside_state() {
        let r = check(&[
            ("core/a.rs", "pub fn fa() { crate::core::b::fb(); }"),
            ("core/b.rs", "pub fn fb() { crate::core::a::fa(); }"),
        ]);
        assert_eq!(
            of(&r, Rule::R2),
            ["R2: a circle of 2 files outside state/ (circles only inside state/): core/a.rs, core/b.rs; tied by [core/a.rs -> core/b.rs: fb] [core/b.rs -> core/a.rs: fa]"]
        );
        assert_eq!(r.circles.len(), 1);
    }

    #[test]
    fn r2_quiet_for_a_circle_inside_state_but_not_one_that_leaves_it() {
        let r = check(&[
            (
                "state/mod.rs",
                "mod db;\npub struct State;\nfn f() { db::get(); }",
            ),
            ("state/db.rs", "use super::State;\npub fn get() {}"),
        ]);
        assert!(r.is_clean(), "{:?}", r.violations);
        assert_eq!(
            r.circles,
            [["server/src/state/db.rs", "server/src/state/mod.rs"]]
        );
        let r = check(&[
            ("state/mod.rs", "pub fn f() { crate::cmd::touch(); }"),
            ("cmd/mod.rs", "pub fn touch() { crate::state::f(); }"),
        ]);
        assert_eq!(of(&r, Rule::R2).len(), 1);
        assert_eq!(of(&r, Rule::R1).len(), 1);
    }

    #[test]
    fn r3_a_family_importing_another_family() {
        let r = check(&[
            ("cmd/mod.rs", "pub mod string; pub mod bitmap; pub mod geo;"),
            ("cmd/string.rs", "pub fn clamp() {}"),
            ("cmd/bitmap.rs", "use super::string::clamp;"),
            ("cmd/zset.rs", "pub fn store() {}"),
            ("cmd/geo/mod.rs", "mod hash;"),
            ("cmd/geo/hash.rs", "fn f() { crate::cmd::zset::store(); }"),
        ]);
        assert_eq!(
            of(&r, Rule::R3),
            [
                "R3: cmd/bitmap.rs -> cmd/string.rs: clamp: family bitmap may not import family string (a family imports only the dispatch, state/, core/ and its own folder)",
                "R3: cmd/geo/hash.rs -> cmd/zset.rs: store: family geo may not import family zset (a family imports only the dispatch, state/, core/ and its own folder)",
            ]
        );
    }

    #[test]
    fn r3_quiet_for_dispatch_lower_floors_and_the_own_folder() {
        let r = check(&[
            ("cmd/mod.rs", "pub struct Ctx;"),
            ("cmd/gate.rs", "pub fn reject() {}"),
            ("cmd/geo/mod.rs", "mod hash;\nuse super::Ctx;\nfn f() { hash::enc(); crate::cmd::gate::reject(); crate::state::go(); crate::core::tick(); }"),
            ("cmd/geo/hash.rs", "pub fn enc() { super::super::Ctx; }"),
            ("state/mod.rs", "pub fn go() {}"),
            ("core/mod.rs", "pub fn tick() {}"),
        ]);
        assert!(r.is_clean(), "{:?}", r.violations);
    }

    #[test]
    fn r3b_only_the_table_names_the_families() {
        let r = check(&[
            ("cmd/families.rs", "fn t() { crate::cmd::string::get(); }"),
            (
                "cmd/gate.rs",
                "fn g() { crate::cmd::acl::check(); crate::cmd::call::run(); }",
            ),
            ("cmd/call.rs", "pub fn run() {}"),
            ("cmd/string.rs", "pub fn get() {}"),
            ("cmd/acl.rs", "pub fn check() {}"),
            (
                "net/conn.rs",
                "fn n() { crate::cmd::string::get(); crate::cmd::call::run(); }",
            ),
        ]);
        assert_eq!(
            of(&r, Rule::R3b),
            [
                "R3b: cmd/gate.rs -> cmd/acl.rs: check: only families.rs names a family (acl): dispatch and the other floors reach commands through the table",
                "R3b: net/conn.rs -> cmd/string.rs: get: only families.rs names a family (string): dispatch and the other floors reach commands through the table",
            ]
        );
        assert!(of(&r, Rule::R3).is_empty());
    }

    #[test]
    fn r4_a_long_file() {
        let long = "// x\n".repeat(901);
        let fits = "// x\n".repeat(900);
        let tested = format!(
            "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
            "// x\n".repeat(500),
            "// t\n".repeat(600)
        );
        let generated = format!("// Generated by tools/gen.py. Do not edit.\n{long}");
        let r = check(&[
            ("core/long.rs", &long),
            ("core/fits.rs", &fits),
            ("core/tested.rs", &tested),
            ("core/generated.rs", &generated),
            ("storage/src/big.rs", &long),
            ("tools/shape/src/big.rs", &long),
            ("tools/shape/target/debug/big.rs", &long),
            ("elsewhere/src/big.rs", &long),
        ]);
        assert_eq!(
            of(&r, Rule::R4),
            [
                "R4: core/long.rs has 901 lines before its tests (limit 900)",
                "R4: storage/src/big.rs has 901 lines before its tests (limit 900)",
                "R4: tools/shape/src/big.rs has 901 lines before its tests (limit 900)",
            ]
        );
        assert_eq!(r.largest[0].1, 901);
        assert!(r.largest.iter().all(|(f, _)| !f.contains("generated")));
    }

    #[test]
    fn r5_a_long_function() {
        // Built piece by piece, each piece's first line noted.
        let mut text = String::new();
        let at = |text: &mut String, piece: &str| {
            let line = text.lines().count() + 1;
            text.push_str(piece);
            line
        };
        let free = at(&mut text, &fn_of("free", 151));
        at(&mut text, &fn_of("fits", 150));
        at(&mut text, "struct S;\nimpl S {\n");
        let method = at(&mut text, &format!("pub(crate) {}", fn_of("method", 151)));
        at(&mut text, "}\ntrait T {\n");
        let default = at(&mut text, &fn_of("default", 160));
        at(
            &mut text,
            "}\n/// Doc lines are no part of it.\n#[inline]\n",
        );
        let outer = at(&mut text, "fn outer() {\n");
        at(&mut text, &fn_of("inner", 152));
        at(&mut text, "}\n#[cfg(test)]\nmod tests {\n");
        at(&mut text, &fn_of("test_only", 200));
        at(&mut text, "}\n");
        let generated = format!("// generated from a table\n{}", fn_of("big", 300));
        let r = check(&[("core/x.rs", &text), ("core/gen.rs", &generated)]);
        assert_eq!(
            of(&r, Rule::R5),
            [
                format!("R5: core/x.rs:{free}: fn free has 151 lines (limit 150)"),
                format!("R5: core/x.rs:{method}: fn S::method has 151 lines (limit 150)"),
                format!("R5: core/x.rs:{default}: fn T::default has 160 lines (limit 150)"),
                format!("R5: core/x.rs:{outer}: fn outer has 154 lines (limit 150)"),
                format!(
                    "R5: core/x.rs:{}: fn outer::inner has 152 lines (limit 150)",
                    outer + 1
                ),
            ]
        );
    }

    #[test]
    fn an_unparsable_file_is_reported() {
        let r = check(&[("core/bad.rs", "fn {")]);
        assert_eq!(r.violations.len(), 1);
        assert!(
            matches!(&r.violations[0], Violation::Unreadable { file, .. } if file == "server/src/core/bad.rs")
        );
    }

    #[test]
    fn the_summary_names_the_figures() {
        let r = check(&[
            ("core/a.rs", "pub fn fa() { crate::core::b::fb(); }"),
            ("core/b.rs", "pub fn fb() { crate::core::a::fa(); }"),
            ("state/mod.rs", "fn f() { crate::core::a::fa(); }"),
        ]);
        let s = r.summary();
        assert!(s.contains("files: 3\n"), "{s}");
        assert!(s.contains("arrows: 3\n"), "{s}");
        assert!(s.contains("arrows up: 0\n"), "{s}");
        assert!(s.contains("circles: 1 (sizes: 2)\n"), "{s}");
        assert!(s.contains("violations: 1 (R2 1)\n"), "{s}");
    }

    #[test]
    fn r6_a_data_family_past_the_shard() {
        let hash = "\
fn op_hset(k: &mut Keys, c: &mut Ctx) {}
fn hget(c: &mut Ctx) {
    c.st.read(0, b\"k\", 0);
    let d = &c.st.shard.dbs[0];
}
";
        let r = check(&[
            ("cmd/hash.rs", hash),
            ("cmd/zset/ops.rs", "fn op_zadd(st: &mut State) {}"),
            // Not a data family: the rule leaves it alone.
            (
                "cmd/keys.rs",
                "fn del(c: &mut Ctx) { c.st.shard.dbs[0].remove(); }",
            ),
        ]);
        assert_eq!(
            of(&r, Rule::R6),
            [
                "R6: cmd/hash.rs:1: operation op_hset names Ctx: an operation takes the shard's Keys, not the server",
                "R6: cmd/hash.rs:3: looks a key up through the server (`st.read`), not the shard's Keys",
                "R6: cmd/hash.rs:4: reaches the databases (`.dbs`) past the shard's Keys",
                "R6: cmd/zset/ops.rs:1: operation op_zadd names State: an operation takes the shard's Keys, not the server",
            ]
        );
    }

    #[test]
    fn r6_quiet_for_operations_on_keys_and_handlers_that_record_changes() {
        let hash = "\
fn op_hset(k: &mut Keys, key: &[u8]) -> usize { k.db().len() }
fn hset(c: &mut Ctx) {
    let n = op_hset(&mut c.keys(), b\"k\");
    c.st.changed(0, \"hset\", 0, b\"k\");
}
#[cfg(test)]
mod tests {
    fn op_x(st: &mut State) { st.shard.dbs.clear(); }
}
";
        let r = check(&[("cmd/hash.rs", hash)]);
        assert!(of(&r, Rule::R6).is_empty(), "{:?}", r.violations);
    }
}
