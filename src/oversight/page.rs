//! The page's files, built into the binary: no Node, no files to install beside it.

/// `GET /`.
pub const INDEX_HTML: &str = include_str!("page/index.html");
/// Where the page's script is served.
pub const SCRIPT_PATH: &str = "/assets/page.js";
/// Where the page's style is served.
pub const STYLE_PATH: &str = "/assets/page.css";
/// The page's script: every task text set with `textContent`.
pub const SCRIPT: &str = include_str!("page/page.js");
/// The page's style.
pub const STYLE: &str = include_str!("page/page.css");

#[cfg(test)]
mod tests {
    use super::*;

    /// The CSP allows no inline script: the page must hold none, and the script must not
    /// write markup from strings.
    #[test]
    fn no_inline_script_and_no_markup_from_strings() {
        for (at, _) in INDEX_HTML.match_indices("<script") {
            let tag = &INDEX_HTML[at..];
            let end = tag.find('>').unwrap_or(tag.len());
            assert!(tag[..end].contains("src="), "inline script in index.html");
        }
        for (at, _) in INDEX_HTML.match_indices(" on") {
            let name: String = INDEX_HTML[at + 1..]
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .collect();
            let after = &INDEX_HTML[at + 1 + name.len()..];
            assert!(
                !after.starts_with('='),
                "inline event handler {name} in index.html"
            );
        }
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!SCRIPT.contains(sink), "page.js uses {sink}");
        }
    }
}
