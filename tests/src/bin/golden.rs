//! `cinnabar-golden record [--bin redis-server] FILE.txt...` writes each
//! script's transcript from a fresh server to FILE.expected (used by
//! `tools/record_golden.sh` with the real Redis).
//! `cinnabar-golden run [--bin PATH | --port P] FILE.txt` prints it instead.

use cinnabar_tests::golden::{parse_script, run_script, run_script_on};
use std::path::PathBuf;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || !matches!(args[0].as_str(), "record" | "run") {
        eprintln!("usage: cinnabar-golden record|run [--bin PATH] [--port P] FILE.txt...");
        std::process::exit(2);
    }
    let mode = args.remove(0);
    let mut bin = PathBuf::from("redis-server");
    let mut port: Option<u16> = None;
    let mut files = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bin" => bin = PathBuf::from(it.next().expect("--bin PATH")),
            "--port" => port = Some(it.next().and_then(|p| p.parse().ok()).expect("--port P")),
            _ => files.push(PathBuf::from(a)),
        }
    }
    let mut failed = false;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let script = match parse_script(&text) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                failed = true;
                continue;
            }
        };
        let out = match port {
            Some(p) => run_script_on(p, &script),
            None => run_script(&bin, &script),
        };
        if mode == "record" {
            let dest = f.with_extension("expected");
            std::fs::write(&dest, out).expect("write .expected");
            eprintln!("recorded {}", dest.display());
        } else {
            print!("{out}");
        }
    }
    if failed {
        std::process::exit(1);
    }
}
