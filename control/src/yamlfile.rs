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
        FileError {
            path: path.to_path_buf(),
            line: loc.as_ref().map(|l| l.line()),
            column: loc.as_ref().map(|l| l.column()),
            problem: msg,
        }
    })
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
}
