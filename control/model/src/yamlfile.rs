//! Loading YAML files with errors that name the file, the line and the problem.
//!
//! Every configuration or topology error a user sees has the form
//! `FILE:LINE:COLUMN: problem` on one line, and the CLI exits with code 2.

use serde::de::DeserializeOwned;
use std::fmt;
use std::path::{Path, PathBuf};

/// A problem in an input file, with the position it was found at (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    pub path: PathBuf,
    /// 1-based line; `None` when the problem is not tied to one place (e.g. unreadable file).
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub problem: String,
}

impl FileError {
    pub fn new(path: &Path, line: Option<usize>, problem: impl Into<String>) -> Self {
        FileError {
            path: path.to_path_buf(),
            line,
            column: None,
            problem: problem.into(),
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        // One line, always: YAML errors may embed newlines.
        write!(f, ": {}", self.problem.replace('\n', " "))
    }
}

impl std::error::Error for FileError {}

/// Reads and deserializes a YAML file. Type errors (bad prefix, negative number,
/// unknown key) come back with the line and column serde reports.
pub fn load<T: DeserializeOwned>(path: &Path) -> Result<(T, String), FileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| FileError::new(path, None, format!("cannot read: {e}")))?;
    let value = parse(path, &text)?;
    Ok((value, text))
}

/// Deserializes YAML text that came from `path`.
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, FileError> {
    serde_norway::from_str(text).map_err(|e| {
        let loc = e.location();
        let msg = e.to_string();
        // serde's message ends with " at line L column C"; the position goes in front instead.
        let msg = match msg.find(" at line ") {
            Some(i) => msg[..i].to_string(),
            None => msg,
        };
        // serde reports a duplicate key where the mapping starts (often 1:1): point at
        // the second occurrence of the key instead.
        let duplicate = duplicated_field(&msg).and_then(|key| duplicate_key_at(text, key));
        let (line, column) = match duplicate {
            Some((line, column)) => (Some(line), Some(column)),
            None => (
                loc.as_ref().map(|l| l.line()),
                loc.as_ref().map(|l| l.column()),
            ),
        };
        FileError {
            path: path.to_path_buf(),
            line,
            column,
            problem: msg,
        }
    })
}

/// `name` of serde's "duplicate field `name`" message.
fn duplicated_field(msg: &str) -> Option<&str> {
    let rest = msg.split("duplicate field `").nth(1)?;
    rest.split('`').next()
}

/// The key of a block-mapping line (`key: value`, `key:`), its column (0-based) and
/// whether the line starts a sequence item (`- key: value`).
fn block_key(line: &str) -> Option<(&str, usize, bool)> {
    let trimmed = line.trim_start();
    let mut column = line.len() - trimmed.len();
    let mut rest = trimmed;
    let mut item = false;
    while let Some(after) = rest.strip_prefix("- ") {
        let after_trimmed = after.trim_start();
        column += rest.len() - after_trimmed.len();
        rest = after_trimmed;
        item = true;
    }
    if rest.starts_with('#') || rest.starts_with('{') || rest.starts_with('[') {
        return None;
    }
    let colon = rest
        .find(": ")
        .or_else(|| rest.ends_with(':').then(|| rest.len() - 1))?;
    let key = rest[..colon].trim_matches(|c| c == '"' || c == '\'');
    (!key.is_empty() && !key.contains(' ')).then_some((key, column, item))
}

/// Line and column (1-based) of the first repetition of `key` in one block mapping of
/// `text`: the place a "duplicate field" error is about.
pub fn duplicate_key_at(text: &str, key: &str) -> Option<(usize, usize)> {
    // The mappings open at this point: (column of their keys, keys seen).
    let mut open: Vec<(usize, Vec<&str>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some((k, column, item)) = block_key(line) else {
            continue;
        };
        while open
            .last()
            .is_some_and(|(c, _)| *c > column || (item && *c == column))
        {
            open.pop();
        }
        if open.last().is_none_or(|(c, _)| *c != column) {
            open.push((column, Vec::new()));
        }
        let keys = &mut open.last_mut()?.1;
        if keys.contains(&k) && k == key {
            return Some((i + 1, column + 1));
        }
        keys.push(k);
    }
    None
}

/// The 1-based line of the first line of `text` at or after `from_line` that contains
/// `needle`: used to point cross-reference errors (unknown node in a link) at a line.
pub fn find_line(text: &str, needle: &str, from_line: usize) -> Option<usize> {
    text.lines()
        .enumerate()
        .skip(from_line.saturating_sub(1))
        .find(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
}

/// The 1-based start lines of the items of the top-level block sequence under `key:`
/// (`key:` at column 0, then `- ...` items). Empty when the key is absent or holds a flow
/// sequence; used to point validation errors (duplicate name, unknown node) at an item.
pub fn sequence_item_lines(text: &str, key: &str) -> Vec<usize> {
    let mut lines = text.lines().enumerate();
    let header = lines.find(|(_, l)| {
        l.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix(':'))
            .is_some_and(|rest| {
                let rest = rest.trim();
                rest.is_empty() || rest.starts_with('#')
            })
    });
    if header.is_none() {
        return Vec::new();
    }
    let mut items = Vec::new();
    let mut indent = None;
    for (i, line) in lines {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let this = line.len() - trimmed.len();
        let is_item = trimmed == "-" || trimmed.starts_with("- ");
        match indent {
            None if is_item => indent = Some(this),
            None => break,
            Some(ind) if this < ind || (this == ind && !is_item) => break,
            Some(_) => {}
        }
        if is_item && Some(this) == indent {
            items.push(i + 1);
        }
        if this == 0 && !is_item {
            break;
        }
    }
    items
}

/// The line of `field:` within the item that starts at `items[index]` (items as from
/// `sequence_item_lines`), else the item's own line.
pub fn item_field_line(text: &str, items: &[usize], index: usize, field: &str) -> Option<usize> {
    let start = *items.get(index)?;
    let end = items.get(index + 1).copied().unwrap_or(usize::MAX);
    let needle = format!("{field}:");
    text.lines()
        .enumerate()
        .skip(start - 1)
        .take_while(|(i, _)| i + 1 < end)
        .find(|(_, l)| {
            l.match_indices(&needle).any(|(pos, _)| {
                pos == 0
                    || !l.as_bytes()[pos - 1].is_ascii_alphanumeric()
                        && l.as_bytes()[pos - 1] != b'_'
            })
        })
        .map(|(i, _)| i + 1)
        .or(Some(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct T {
        a: u32,
    }

    #[test]
    fn error_names_file_line_and_problem() {
        let err = parse::<T>(Path::new("x.yaml"), "a: 1\nb: 2\n").unwrap_err();
        let s = err.to_string();
        assert!(s.starts_with("x.yaml:2:"), "{s}");
        assert!(s.contains("unknown field `b`"), "{s}");
        assert!(!s.contains('\n'));
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        items: Vec<Item>,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        a: u32,
        #[serde(default)]
        b: u32,
    }

    /// A repeated key is reported at its second occurrence, not where its mapping starts.
    #[test]
    fn duplicate_key_at_its_own_line() {
        let err = parse::<T>(Path::new("x.yaml"), "# c\na: 1\n\na: 2\n").unwrap_err();
        assert_eq!((err.line, err.column), (Some(4), Some(1)), "{err}");
        assert!(err.problem.contains("duplicate field `a`"), "{err}");
        // In the second item of a sequence; `a` in the first item is not a repeat.
        let text = "name: x\nitems:\n  - a: 1\n    b: 2\n  - a: 3\n    b: 4\n    a: 5\n";
        let err = parse::<Outer>(Path::new("x.yaml"), text).unwrap_err();
        assert_eq!((err.line, err.column), (Some(7), Some(5)), "{err}");
        assert_eq!(err.to_string().split(':').nth(1), Some("7"), "{err}");
        // At the top level after a nested mapping with the same key.
        let text = "items:\n- a: 1\nname: x\nname: y\n";
        let err = parse::<Outer>(Path::new("x.yaml"), text).unwrap_err();
        assert_eq!((err.line, err.column), (Some(4), Some(1)), "{err}");
    }

    /// A block-mapping line's key, column and item flag, read by hand from the line.
    #[test]
    fn block_key_by_hand() {
        assert_eq!(block_key("  key: value"), Some(("key", 2, false)));
        assert_eq!(block_key("- - name: x"), Some(("name", 4, true)));
        assert_eq!(block_key("   -   key:"), Some(("key", 7, true)));
        assert_eq!(block_key("\"quoted\": 1"), Some(("quoted", 0, false)));
        assert_eq!(block_key("'single': 1"), Some(("single", 0, false)));
        // Comments and flow collections hold no block key, nor does a key with a space,
        // an empty key or a colon without a space after it.
        for line in [
            "#c: x",
            "{a: 1}",
            "[a: 1]",
            "a b: c",
            ": x",
            "key:value",
            "",
        ] {
            assert_eq!(block_key(line), None, "{line:?}");
        }
    }

    /// The same key in two sibling mappings is no repetition; in one it is.
    #[test]
    fn duplicate_key_in_sibling_mappings_by_hand() {
        let siblings = "a:\n  b: 1\nc:\n  b: 2\n";
        assert_eq!(duplicate_key_at(siblings, "b"), None);
        let repeated = "a:\n  b: 1\n  x: 0\n  b: 2\nc: 3\n";
        assert_eq!(duplicate_key_at(repeated, "b"), Some((4, 3)));
    }

    #[test]
    fn find_line_from_a_line_by_hand() {
        let text = "a\nb x\nc x\n";
        assert_eq!(find_line(text, "x", 1), Some(2));
        assert_eq!(find_line(text, "x", 0), Some(2));
        assert_eq!(find_line(text, "x", 3), Some(3));
        assert_eq!(find_line(text, "a", 1), Some(1));
        assert_eq!(find_line(text, "x", 4), None);
        assert_eq!(find_line(text, "y", 1), None);
    }

    /// Items of a block sequence and the line of a field in each, by hand.
    #[test]
    fn sequence_items_and_their_fields_by_hand() {
        let text = "name: x\nnodes:\n  # comment\n  - name: a\n    max_asn: 9\n    xasn: 8\n    \
                    asn: 1\n\n  - kind: b\n    name: b\n    sub:\n      - z\n  -\n    name: c\n\
                    links:\n  - a\n";
        let items = sequence_item_lines(text, "nodes");
        assert_eq!(items, vec![4, 9, 13]);
        assert_eq!(sequence_item_lines(text, "links"), vec![16]);
        let field = |index, name| item_field_line(text, &items, index, name);
        // `max_asn:` and `xasn:` are other fields.
        assert_eq!(field(0, "asn"), Some(7));
        // The next item's first line is not this item's.
        assert_eq!(field(0, "kind"), Some(4));
        assert_eq!(field(1, "kind"), Some(9));
        assert_eq!((field(1, "name"), field(1, "sub")), (Some(10), Some(11)));
        assert_eq!((field(2, "name"), field(2, "asn")), (Some(14), Some(13)));
        assert_eq!(field(3, "name"), None);
        // A field at the start of a line.
        assert_eq!(item_field_line("x:\nasn: 1\n", &[1], 0, "asn"), Some(2));
        // A mapping, a flow sequence or no such key: no items; items at column 0 end at
        // the next key.
        assert!(sequence_item_lines("nodes:\n  a: 1\n  - b\n", "nodes").is_empty());
        assert!(sequence_item_lines("nodes: [a, b]\n", "nodes").is_empty());
        assert!(sequence_item_lines(text, "edges").is_empty());
        let flush = "nodes: # all\n- a\n- b\nother: 1\n- c\n";
        assert_eq!(sequence_item_lines(flush, "nodes"), vec![2, 3]);
        // Indented items end at a key of their indentation too.
        let indented = "nodes:\n  - a\n  x: 1\n  - b\n";
        assert_eq!(sequence_item_lines(indented, "nodes"), vec![2]);
    }

    #[test]
    fn sequence_items_block_and_flow_styles() {
        let text = "name: x\nnodes:\n  - {name: a}\n  # comment\n  - name: b\n    role: leaf\nlinks:\n- {a: a, b: b}\n- a: b\n  b: a\n";
        assert_eq!(sequence_item_lines(text, "nodes"), [3, 5]);
        assert_eq!(sequence_item_lines(text, "links"), [8, 9]);
        assert_eq!(sequence_item_lines(text, "other"), Vec::<usize>::new());
        let links = sequence_item_lines(text, "links");
        assert_eq!(item_field_line(text, &links, 1, "b"), Some(10));
        assert_eq!(item_field_line(text, &links, 0, "b"), Some(8));
        assert_eq!(
            sequence_item_lines("nodes: [{name: a}]\n", "nodes"),
            Vec::<usize>::new()
        );
    }
}
