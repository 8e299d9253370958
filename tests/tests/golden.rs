//! Replays every `tests/golden/*.txt` against cinnabar (a fresh server per
//! file) and compares with the `.expected` transcript recorded from the real
//! Redis 7.0.15 by `tools/record_golden.sh`. `GOLDEN_ONLY=strings,keys`
//! limits the run to some families. Each family's full transcript is written
//! next to the temp dir so `diff -u` can show everything.

use cinnabar_tests::golden::{compare, parse_script, render_mismatches, run_script};
use cinnabar_tests::{server_bin, workspace_root};

#[test]
fn golden_replies_match_redis() {
    let dir = workspace_root().join("tests/golden");
    let only: Option<Vec<String>> = std::env::var("GOLDEN_ONLY")
        .ok()
        .map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/golden")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .filter(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            only.as_ref().is_none_or(|o| o.contains(&stem))
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no golden scripts in {}", dir.display());

    let out_dir = std::env::temp_dir().join("cinnabar-golden");
    let _ = std::fs::create_dir_all(&out_dir);
    let bin = server_bin();
    let mut report = String::new();
    let mut summary = Vec::new();
    let mut failures = 0;
    for f in &files {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        let script = parse_script(&std::fs::read_to_string(f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let expected_path = f.with_extension("expected");
        let Ok(expected) = std::fs::read_to_string(&expected_path) else {
            failures += 1;
            summary.push(format!(
                "{name}: not recorded (run tools/record_golden.sh {name})"
            ));
            continue;
        };
        let got = run_script(&bin, &script);
        let actual = out_dir.join(format!("{name}.actual"));
        let _ = std::fs::write(&actual, &got);
        let (total, bad) = compare(&expected, &got);
        summary.push(format!(
            "{name}: {}/{total} replies match",
            total - bad.len()
        ));
        if !bad.is_empty() {
            failures += 1;
            report.push_str(&render_mismatches(&name, &bad, 15));
            report.push_str(&format!(
                "    full diff: diff -u {} {}\n",
                expected_path.display(),
                actual.display()
            ));
        }
    }
    eprintln!("{report}");
    eprintln!("golden summary:\n  {}", summary.join("\n  "));
    assert_eq!(
        failures, 0,
        "{failures} golden families differ from Redis 7.0.15 (see above)"
    );
}
