//! `shape [--graph] [ROOT]`: checks the workspace at ROOT (by default the
//! current folder if it holds `server/src`, else the workspace this binary
//! was built from) and prints the figures and every violation; exits 1 if
//! there is any. `--graph` ignores the floors and prints every arrow and
//! every circle, to compare with what a grep shows; `--no-methods` leaves
//! method calls out of the graph.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut graph = false;
    let mut opts = cinnabar_shape::Options::default();
    let mut root = None;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--graph" => graph = true,
            "--no-methods" => opts.methods = false,
            "-h" | "--help" => {
                println!("usage: shape [--graph] [--no-methods] [ROOT]");
                return ExitCode::SUCCESS;
            }
            _ if root.is_none() && !a.starts_with('-') => root = Some(PathBuf::from(a)),
            _ => {
                eprintln!("shape: unexpected argument {a:?}\nusage: shape [--graph] [--no-methods] [ROOT]");
                return ExitCode::from(2);
            }
        }
    }
    let root = root.unwrap_or_else(|| {
        let here = PathBuf::from(".");
        if here.join(cinnabar_shape::GRAPH_ROOT).is_dir() {
            here
        } else {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        }
    });
    if !root.join(cinnabar_shape::GRAPH_ROOT).is_dir() {
        eprintln!(
            "shape: {} has no {}",
            root.display(),
            cinnabar_shape::GRAPH_ROOT
        );
        return ExitCode::from(2);
    }
    let report = cinnabar_shape::check_with(&root, opts);
    if graph {
        for a in &report.arrows {
            println!("{a}");
        }
        for c in &report.circles {
            println!("circle of {}: {}", c.len(), c.join(", "));
        }
        print!("{}", report.summary());
        return ExitCode::SUCCESS;
    }
    for v in &report.violations {
        println!("{v}");
    }
    print!("{}", report.summary());
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
