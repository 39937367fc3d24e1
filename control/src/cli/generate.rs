//! `fare generate man|completions DIR` (hidden): the manual pages and the bash, zsh and
//! fish completions, generated from the clap definitions so they never drift from the
//! command line. scripts/package ships them.
//!
//! The pages: fare(1) and one per subcommand (fare-show(1), fare-topo-check(1)...), the
//! agent's as fare-agent(8) (a daemon), each with what clap knows (NAME, SYNOPSIS,
//! DESCRIPTION, OPTIONS) and, for fare(1) and fare-agent(8), the sections written below
//! (FILES, SIGNALS, EXIT STATUS, ENVIRONMENT, SEE ALSO); and fare.yaml(5), the agent's
//! configuration file.

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to write.
    #[arg(value_enum)]
    pub what: What,
    /// Directory to write into (created when missing).
    pub dir: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum What {
    /// fare.1, fare-agent.8, fare.yaml.5 and one page per subcommand (fare-show.1...).
    Man,
    /// fare.bash, _fare (zsh) and fare.fish.
    Completions,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cmd = super::Cli::command();
    match args.what {
        What::Man => man_pages(cmd, dir),
        What::Completions => [Shell::Bash, Shell::Zsh, Shell::Fish]
            .into_iter()
            .try_for_each(|shell| {
                clap_complete::generate_to(shell, &mut cmd, "fare", dir).map(drop)
            }),
    }
    .with_context(|| format!("writing into {}", dir.display()))
}

/// Every page into `dir`.
fn man_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<()> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    page(cmd, dir)?;
    std::fs::write(dir.join("fare.yaml.5"), FARE_YAML_5)
}

/// The page of `cmd` and those of its subcommands.
fn page(cmd: clap::Command, dir: &Path) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        page(sub, dir)?;
    }
    let name = cmd
        .get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string();
    let (section, extra) = match name.as_str() {
        "fare" => ("1", FARE_1_EXTRA),
        "fare-agent" => ("8", FARE_AGENT_8_EXTRA),
        _ => ("1", SEE_ALSO),
    };
    let man = clap_mangen::Man::new(cmd)
        .section(section)
        .manual("fare manual");
    let mut text = Vec::new();
    man.render(&mut text)?;
    text.extend_from_slice(extra.as_bytes());
    std::fs::write(dir.join(man.get_filename()), text)
}

/// The SEE ALSO of a subcommand's page.
const SEE_ALSO: &str = r#".SH "SEE ALSO"
.BR fare (1),
.BR fare-agent (8),
.BR fare.yaml (5)
"#;

const FARE_1_EXTRA: &str = r#".SH "EXIT STATUS"
.TP
.B 0
Success. Also when standard output is a pipe that was closed early (as in
.BR "fare show routes | head -1" ):
the command stops quietly.
.TP
.B 1
A run-time failure: the agent cannot be reached, a request failed, a file cannot be
written, standard output is full. One line on standard error says why.
.TP
.B 2
Bad input: a topology or configuration file that does not load (the line names the
file, the line and the problem), a bad option or value, a refusal of the agent's that
names the user's input (unknown neighbor).
.SH ENVIRONMENT
.TP
.B FARE_SOCKET
The management socket of the agent to talk to (as
.BR \-\-socket ).
.TP
.B FARE_ADDRESS
The agent's TCP management address, HOST:PORT (as
.BR \-\-address ).
.TP
.B FARE_LOG
The log filter (as
.BR \-\-log ).
Log lines go to standard error, coloured only when it is a terminal.
.SH FILES
.TP
.I /run/fare/fare.sock
The default management socket.
.TP
.I /etc/fare/NAME.yaml
Agent configurations, see
.BR fare.yaml (5).
.TP
.I /usr/share/doc/fare/
The guides: install.md, agent.md, configuration.md.
.SH "SEE ALSO"
.BR fare-agent (8),
.BR fare.yaml (5),
.BR fare-show (1),
.BR fare-weights (1)
"#;

const FARE_AGENT_8_EXTRA: &str = r#".SH SIGNALS
.TP
.B SIGHUP
Re-read the configuration file (as
.B fare reload
does). Neighbors added, removed or changed (a changed session parameter resets that
session only), their bandwidths, the originated prefixes, the static groups, the session
timers, the group mode, the log filter and the ARN monitor's thresholds apply at once,
without resetting another session; other changed keys are
logged and listed by
.B fare show config
as needing a restart. A file that does not load is logged and the running configuration
stays.
.TP
.BR SIGTERM ", " SIGINT
Stop the agent. The data plane keeps forwarding with the groups last written.
.SH "EXIT STATUS"
.TP
.B 0
Stopped by SIGTERM or SIGINT; with
.BR \-\-check ,
the configuration is valid.
.TP
.B 1
A run-time failure: an address or socket already in use, a missing interface, a data
plane that cannot be set up. One line on standard error says why.
.TP
.B 2
A bad configuration or command line: one line names the file, the line and the problem.
.SH FILES
.TP
.I /etc/fare/NAME.yaml
The configuration of the agent NAME, see
.BR fare.yaml (5);
the unit fare-agent@NAME.service runs it.
.TP
.I /etc/fare/example.yaml
An example configuration.
.TP
.I /run/fare/fare.sock
The default management socket (mode 0600), set by
.BR management.socket .
.TP
.I /sys/fs/bpf/fare/NAME/
The XDP data plane's pinned programs and maps (dataplane kind xdp).
.TP
.I /usr/share/doc/fare/agent.md
The agent's guide: reloading, the management API, metrics, TLS.
.SH "SEE ALSO"
.BR fare (1),
.BR fare.yaml (5),
.BR fare-show (1),
.BR systemctl (1)
"#;

/// fare.yaml(5): the agent's configuration file.
const FARE_YAML_5: &str = include_str!("fare.yaml.5");

#[cfg(test)]
mod tests {
    use super::*;

    /// Every top-level key of the agent configuration is named in fare.yaml(5).
    #[test]
    fn fare_yaml_5_names_every_top_level_key() {
        let c = fare_agent::config::AgentConfig::new("n", [10, 0, 0, 1].into(), 65001);
        let v = serde_json::to_value(&c).expect("serializes");
        let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
        assert!(keys.len() >= 10, "{keys:?}");
        let missing: Vec<&&String> = keys
            .iter()
            .filter(|k| !FARE_YAML_5.contains(&format!("\n.B {k}\n")))
            .collect();
        assert!(missing.is_empty(), "not in fare.yaml.5: {missing:?}");
    }
}
