//! bench/RESULTS.md is shared by every suite: each owns the text between
//! `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` and rewrites only that.

use std::path::Path;

/// Replaces suite `name`'s section of the results file at `path` with `body` (Markdown),
/// or appends the section when the file has none yet. Other sections stay untouched.
pub fn write_section(path: &Path, name: &str, body: &str) -> std::io::Result<()> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::from("# Benchmark results\n"),
        Err(e) => return Err(e),
    };
    std::fs::write(path, replace_section(&text, name, body))
}

/// `text` with suite `name`'s section replaced by (or extended with) `body`.
pub fn replace_section(text: &str, name: &str, body: &str) -> String {
    let open = format!("<!-- bench:{name} -->");
    let close = format!("<!-- /bench:{name} -->");
    let section = format!("{open}\n{}\n{close}", body.trim_end());
    match (text.find(&open), text.find(&close)) {
        (Some(start), Some(end)) if end > start => {
            format!("{}{section}{}", &text[..start], &text[end + close.len()..])
        }
        _ => {
            let mut out = text.trim_end().to_string();
            out.push_str("\n\n");
            out.push_str(&section);
            out.push('\n');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_replaced_in_place_or_appended() {
        let t = replace_section("# R\n", "a", "one");
        assert_eq!(t, "# R\n\n<!-- bench:a -->\none\n<!-- /bench:a -->\n");
        let t = replace_section(&t, "b", "two\n");
        let t = replace_section(&t, "a", "uno");
        assert_eq!(
            t,
            "# R\n\n<!-- bench:a -->\nuno\n<!-- /bench:a -->\n\n<!-- bench:b -->\ntwo\n<!-- /bench:b -->\n"
        );
    }
}
