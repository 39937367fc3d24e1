#![no_main]

//! The agent configuration, topology and `static_from` weights loaders on arbitrary text.
//! The first byte picks the loader; for a configuration, the part after the first NUL
//! byte stands for the weights file a `static_from:` block names. Invariants: nothing
//! panics; a refusal is one line that starts with the file's name and gives the problem,
//! with a line number (when there is one) inside the text.

use fare_agent::config::AgentConfig;
use fare_agent::statics;
use fare_model::topology;
use fare_model::yamlfile::FileError;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fn check(result: Result<impl Sized, FileError>, path: &Path, text: &str) {
    let Err(e) = result else {
        return;
    };
    let line = e.to_string();
    assert!(!line.contains('\n'), "error over several lines: {line:?}");
    assert!(line.starts_with(&path.display().to_string()), "{line}");
    assert!(!e.problem.trim().is_empty(), "no problem given: {line}");
    if let Some(n) = e.line {
        // Lines as YAML 1.1 counts them (libyaml's breaks: a bare CR, NEL, U+2028 and
        // U+2029 too); serde may point one line past the last (end of input).
        let lines = text
            .replace("\r\n", "\n")
            .replace(['\r', '\u{85}', '\u{2028}', '\u{2029}'], "\n")
            .lines()
            .count();
        assert!(
            n >= 1 && n <= lines + 1,
            "line {n} outside the text: {line}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match which % 3 {
        0 => {
            let path = Path::new("agent.yaml");
            let (config, weights) = text.split_once('\0').unwrap_or((text, "[]"));
            let weights_path = Path::new("weights.json");
            let result = AgentConfig::parse(path, config, |from| {
                let entries = statics::parse_weights(weights_path, weights)?;
                statics::convert(from, &entries)
                    .map_err(|(_, problem)| FileError::new(path, None, problem))
            });
            // A weights error names the weights file instead.
            if let Err(e) = &result {
                if e.path == weights_path {
                    return check(result, weights_path, weights);
                }
            }
            check(result, path, config);
        }
        1 => {
            let path = Path::new("fabric.yaml");
            check(topology::load::parse(path, text), path, text);
        }
        _ => {
            let path = Path::new("weights.json");
            check(statics::parse_weights(path, text), path, text);
        }
    }
});
