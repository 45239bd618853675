//! A rename left half done, read from the task's own changes and the request's names, not its
//! words: where a file the task changed lost a name and gained another, both named by the
//! request (`calc_total`, `compute_total`), another text file of the workspace that still uses
//! the old name is not done yet. Whatever language the request is in, the names are code.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::path::PathBuf;

use crate::agent::steering::Unmet;
use crate::agent::tools::Toolbox;

/// Largest file read; most files looked at.
const MAX_FILE_BYTES: u64 = 256 * 1024;
const MAX_FILES: usize = 500;

/// The names of `text`: runs of letters, digits and `_` that do not start with a digit.
fn names(text: &str) -> HashSet<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| !c.is_ascii_digit()))
        .collect()
}

/// The renames the task made (old name, new name, the file) that the request names both of.
fn renames(toolbox: &Toolbox, request: &str) -> Vec<(String, String, String)> {
    let ws = toolbox.workspace();
    let mut found = Vec::new();
    for (path, before) in toolbox.ledger().changed_texts() {
        let Ok(after) = std::fs::read_to_string(&path) else {
            continue;
        };
        let (was, now) = (names(&before), names(&after));
        let named = |w: &&str| crate::agent::steering::text::request_names(request, w);
        let gone: Vec<&str> = was.difference(&now).copied().filter(named).collect();
        let new: Vec<&str> = now.difference(&was).copied().filter(named).collect();
        // One name for another: more would leave which became which a guess.
        if let ([old], [new]) = (gone.as_slice(), new.as_slice()) {
            found.push((old.to_string(), new.to_string(), ws.display(&path)));
        }
    }
    found
}

/// The text files of the workspace, with their text.
fn texts(toolbox: &Toolbox) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    toolbox
        .workspace()
        .walk_files(&crate::agent::tools::NOT_THE_PROJECTS, |path| {
            if out.len() >= MAX_FILES {
                return ControlFlow::Break(());
            }
            let small = std::fs::metadata(&path).is_ok_and(|m| m.len() <= MAX_FILE_BYTES);
            if small && let Ok(text) = std::fs::read_to_string(&path) {
                out.push((path, text));
            }
            ControlFlow::Continue(())
        });
    out
}

/// Each file that still uses a name the task renamed elsewhere (see the module's comment).
pub(crate) fn unfinished(toolbox: &Toolbox, request: &str) -> Vec<Unmet> {
    let renames = renames(toolbox, request);
    if renames.is_empty() {
        return Vec::new();
    }
    let ws = toolbox.workspace();
    let mut unmet: Vec<Unmet> = Vec::new();
    for (path, text) in texts(toolbox) {
        let shown = ws.display(&path);
        let words = names(&text);
        for (old, new, renamed_in) in &renames {
            if words.contains(old.as_str()) && !unmet.iter().any(|u| u.files == [shown.as_str()]) {
                // Not the file renamed in: that one no longer has the old name.
                let line = format!(
                    "`{old}` is renamed to `{new}` in {renamed_in}, and {shown} still has `{old}`"
                );
                unmet.push(Unmet {
                    line,
                    files: vec![shown.clone()],
                });
            }
        }
    }
    unmet
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::steering::text::call;
    use crate::agent::tools::ToolSettings;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn a_name_renamed_in_one_file_and_still_used_in_another_is_not_done() {
        let dir = tempfile::tempdir().unwrap();
        let cart = "def calc_total(p):\n    return sum(p)\n";
        std::fs::write(dir.path().join("cart.py"), cart).unwrap();
        std::fs::write(dir.path().join("main.py"), "from cart import calc_total\n").unwrap();
        let mut settings = ToolSettings::from_config(&Default::default());
        settings.workspace = dir.path().to_path_buf();
        let toolbox = Toolbox::open(&settings).unwrap();
        let cancel = CancellationToken::new();
        let read = call("read_file", json!({"path": "cart.py"}));
        assert!(toolbox.execute(&read, &cancel).await.is_ok());
        let renamed = cart.replace("calc_total", "compute_total");
        let write = call("write_file", json!({"path": "cart.py", "content": renamed}));
        assert!(toolbox.execute(&write, &cancel).await.is_ok());
        for request in [
            "Rename calc_total to compute_total.",
            "calc_total fonksiyonunun adını compute_total yap.",
            "calc_totalをcompute_totalに名前変更して",
        ] {
            let unmet = unfinished(&toolbox, request);
            assert_eq!(unmet.len(), 1, "{request}");
            assert_eq!(unmet[0].files, ["main.py"]);
            assert_eq!(
                unmet[0].line,
                "`calc_total` is renamed to `compute_total` in cart.py, and main.py still has \
                 `calc_total`"
            );
        }
        // A request that does not name both: no rename it asked for.
        assert!(unfinished(&toolbox, "Tidy up cart.py.").is_empty());
        assert!(unfinished(&toolbox, "Make compute_total faster.").is_empty());
    }
}
