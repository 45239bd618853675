//! Reading files back in tests: a folder's names, a file's mode, an audit log's lines. What the
//! sink's tests and the integration tests (as `tests/support/files.rs`, by `#[path]`) both
//! check; each includer uses a part.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The names of the files in `dir`, sorted (lossily: a hostile name still compares unequal).
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The permission bits of `path`.
pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The `id` of every line of `files`, in order; each line is checked to be one whole JSON
/// record, and `check`ed.
pub fn ids_in(files: &[PathBuf], check: impl Fn(&Value)) -> Vec<i64> {
    let mut ids = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "{path:?} ends mid-line"
        );
        for line in text.lines() {
            let record: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{path:?}: a split or broken line ({e}): {line}"));
            check(&record);
            ids.push(record["id"].as_i64().expect("a numbered line"));
        }
    }
    ids
}
