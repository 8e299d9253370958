//! The real workspace keeps its shape.

use std::path::Path;

#[test]
fn workspace_keeps_its_shape() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let report = cinnabar_shape::check(&root);
    assert!(report.files > 0, "no files read under {}", root.display());
    if !report.is_clean() {
        let lines: Vec<String> = report.violations.iter().map(|v| v.to_string()).collect();
        panic!(
            "{} violations of the workspace's shape:\n{}\n{}",
            lines.len(),
            lines.join("\n"),
            report.summary()
        );
    }
}
