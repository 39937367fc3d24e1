//! Helpers for the `fare lab` tests: run the CLI, list a lab's namespaces.

use crate::{fare_bin, run};
use anyhow::Result;
use std::process::{Command, Output};

/// `fare ARGS...`, its output collected.
pub fn fare(args: &[&str]) -> Result<Output> {
    Ok(Command::new(fare_bin()?).args(args).output()?)
}

/// Network namespaces whose name starts with `prefix` (`farelab-<lab>-`).
pub fn namespaces(prefix: &str) -> Vec<String> {
    run("ip", &["netns", "list"])
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| n.starts_with(prefix))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
