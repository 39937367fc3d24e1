//! The `fare` command line. One module per subcommand; this file only dispatches.
//!
//! Exit codes: 0 success, 1 runtime failure, 2 bad input (file, line and problem on
//! one line of stderr).

pub mod agent;
pub mod analyze;
mod analyze_html;
mod analyze_summary;
pub mod arn;
pub mod conn;
pub mod explain;
pub mod generate;
pub mod lab;
pub mod model_args;
pub mod neighbor;
pub mod reload;
pub mod set;
pub mod show;
pub mod show_explain;
pub mod topo;
pub mod watch;
pub mod weights;
pub mod xdp;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "fare",
    version = VERSION.as_str(),
    about = "Fully Adaptive Routing Ethernet: path bandwidth -> WCMP groups -> XDP/P4 data planes",
    long_about = "fare learns end-to-end path bandwidth (BGP Path Bandwidth extended community), \
turns it into weighted ECMP groups and programs an XDP or P4Runtime data plane. \
Run `fare COMMAND --help` for each command."
)]
pub struct Cli {
    /// Log filter (tracing env-filter syntax), e.g. `info`, `fare=debug`.
    #[arg(long, global = true, env = "FARE_LOG", default_value = agent::DEFAULT_LOG)]
    pub log: String,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true)]
    pub log_json: bool,
    #[command(flatten)]
    pub conn: conn::Conn,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Compute the WCMP group of every (node, prefix) of a topology offline.
    #[command(long_about = weights::LONG_ABOUT)]
    Weights(weights::Args),
    /// What if this fails: every link, node and plane failure and what it does to the groups.
    #[command(long_about = analyze::LONG_ABOUT)]
    Analyze(analyze::Args),
    /// Explain one group of the model: paths, per-hop rules, wire values, reductions.
    #[command(long_about = explain::LONG_ABOUT)]
    Explain(explain::Args),
    /// Check or generate topology files.
    #[command(subcommand)]
    Topo(topo::Command),
    /// Run the per-node agent (BGP speaker + data plane programming).
    #[command(long_about = agent::LONG_ABOUT)]
    Agent(agent::Args),
    /// Show the state of a running agent through its management API.
    Show(show::Args),
    /// Follow a running agent: a snapshot, then every session, route, group, bandwidth
    /// and ARN change in order.
    Watch(watch::Args),
    /// Change a running agent through its management API (link bandwidth).
    #[command(subcommand)]
    Set(set::Command),
    /// Shut a BGP neighbor down (RFC 8203 message), enable it again, or soft-reset it.
    #[command(subcommand)]
    Neighbor(neighbor::Command),
    /// Drain a link before maintenance (RFC 8326 GRACEFUL_SHUTDOWN toward the peer, its
    /// paths used only as the last ones here), or undrain it with --undo.
    Drain(neighbor::DrainArgs),
    /// Have a running agent read its configuration file again and apply what changed
    /// (as SIGHUP does): prints whether it changed and the keys that wait for a restart;
    /// a file that does not load changes nothing and exits 2.
    Reload(reload::Args),
    /// Decode or send Adaptive Routing Notifications.
    #[command(subcommand)]
    Arn(arn::Command),
    /// Emulated fabrics on this machine (network namespaces).
    #[command(subcommand)]
    Lab(lab::Command),
    /// The XDP data plane on this host: does the kernel take the program?
    #[command(subcommand)]
    Xdp(xdp::Command),
    /// Run benchmarks and write bench/RESULTS.md.
    #[cfg(feature = "bench")]
    Bench(fare_bench::Args),
    /// Write the manual pages or the shell completions (for packaging).
    #[command(hide = true)]
    Generate(generate::Args),
}

/// `fare --version`: the version, the git commit built and the cargo features enabled.
pub static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} (commit {}, features: {})",
        env!("CARGO_PKG_VERSION"),
        fare_agent::BUILD_COMMIT,
        env!("FARE_FEATURES")
    )
});

/// An error caused by the user's input: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// A write to standard output failed: a closed pipe (`fare show routes | head -1`),
/// a full disk, `> /dev/full`. `main` exits 0 without a word on a closed pipe, as the
/// coreutils do, and prints one line and exits 1 on anything else.
#[derive(Debug)]
pub struct OutputError(pub std::io::Error);

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // "No space left on device", without io::Error's " (os error 28)".
        let text = self.0.to_string();
        let text = match self.0.raw_os_error() {
            Some(n) => text
                .strip_suffix(&format!(" (os error {n})"))
                .map(str::to_string)
                .unwrap_or(text),
            None => text,
        };
        write!(f, "writing output: {text}")
    }
}

impl std::error::Error for OutputError {}

impl From<serde_json::Error> for OutputError {
    fn from(e: serde_json::Error) -> Self {
        OutputError(e.into())
    }
}

/// Writes `text` to standard output (the one place the commands print their results).
pub fn write_out(text: &[u8]) -> Result<(), OutputError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text)
        .and_then(|()| out.flush())
        .map_err(OutputError)
}

/// `println!` that returns an [`OutputError`] instead of panicking.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::write_out(format!("{}\n", format_args!($($arg)*)).as_bytes())
    };
}

/// `print!` that returns an [`OutputError`] instead of panicking.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_out(format!($($arg)*).as_bytes())
    };
}

/// The exit of a command that failed: `fare: CAUSE` on stderr, 2 for the user's input,
/// 1 for the rest; a closed standard output ends the command quietly with 0.
fn failure(e: &anyhow::Error) -> ExitCode {
    let output = e.chain().find_map(|c| c.downcast_ref::<OutputError>());
    if output.is_some_and(|o| o.0.kind() == std::io::ErrorKind::BrokenPipe) {
        return ExitCode::SUCCESS;
    }
    let input = e.downcast_ref::<InputError>().is_some()
        || e.downcast_ref::<fare_model::yamlfile::FileError>()
            .is_some();
    eprintln!("fare: {}", error_line(e));
    if input {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}

/// The error and its causes on one line, `: `-separated, each cause once: a cause whose
/// text its wrapper already shows (`#[error("binding: {0}")]` with the same error as
/// its source) is not repeated.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.ends_with(&text) || line.contains(&format!("{text}: ")) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// The running log filter, replaceable while the process runs (the agent's SIGHUP).
static LOG_FILTER: std::sync::OnceLock<
    tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>,
> = std::sync::OnceLock::new();

/// Installs the log subscriber; a filter that does not parse is the user's error (a
/// typo must not quietly log at another level).
pub fn init_logging(filter: &str, json: bool) -> Result<(), InputError> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::builder()
        .parse(filter)
        .map_err(|e| InputError(format!("--log (or FARE_LOG) `{filter}`: {e}")))?;
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    // Colour only for a terminal: a log written to a file or a pipe is plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let text = (!json).then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
    });
    let lines = json.then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
    });
    // A second init (tests) is harmless: keep the first subscriber.
    if tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(lines)
        .try_init()
        .is_ok()
    {
        let _ = LOG_FILTER.set(handle);
    }
    Ok(())
}

/// Replaces the running log filter (`filter` in env-filter syntax).
pub fn set_log_filter(filter: &str) -> Result<(), String> {
    let parsed = tracing_subscriber::EnvFilter::builder()
        .parse(filter)
        .map_err(|e| e.to_string())?;
    let handle = LOG_FILTER
        .get()
        .ok_or("no log subscriber of this process to change")?;
    handle.reload(parsed).map_err(|e| e.to_string())
}

pub fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Err(e) = init_logging(&cli.log, cli.log_json) {
        eprintln!("fare: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Weights(a) => weights::run(a),
        Command::Analyze(a) => analyze::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Topo(c) => topo::run(c),
        Command::Agent(a) => agent::flags(&matches, &cli.conn).and_then(|f| agent::run(a, f)),
        Command::Show(a) => show::run(a, &cli.conn),
        Command::Watch(a) => watch::run(a, &cli.conn),
        Command::Set(c) => set::run(c, &cli.conn),
        Command::Neighbor(c) => neighbor::run(c, &cli.conn),
        Command::Drain(a) => neighbor::drain(a, &cli.conn),
        Command::Reload(a) => reload::run(a, &cli.conn),
        Command::Arn(c) => arn::run(c),
        Command::Lab(c) => lab::run(c),
        Command::Xdp(c) => xdp::run(c),
        #[cfg(feature = "bench")]
        Command::Bench(a) => fare_bench::run(a),
        Command::Generate(a) => generate::run(a),
    };
    // Output still buffered (a last line without its newline) fails here, not unseen
    // at exit.
    let result = result.and_then(|()| {
        use std::io::Write;
        std::io::stdout().flush().map_err(|e| OutputError(e).into())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failure(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every argument and every subcommand of the whole tree says what it is for.
    #[test]
    fn every_flag_and_command_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if a.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for s in cmd.get_subcommands() {
                let sub = format!("{path} {}", s.get_name());
                if !s.is_hide_set() && s.get_about().is_none() && s.get_long_about().is_none() {
                    missing.push(sub.clone());
                }
                if !s.is_hide_set() {
                    walk(s, &sub, missing);
                }
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "fare", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:#?}");
    }

    /// No subcommand has its own argument with the id or long name of a global one: clap
    /// would hand the global's value to it and panic at parse (`arn listen --address` did).
    #[test]
    fn no_subcommand_shadows_a_global_option() {
        fn walk(
            cmd: &clap::Command,
            path: &str,
            globals: &[(String, String)],
            bad: &mut Vec<String>,
        ) {
            for a in cmd.get_arguments().filter(|a| !a.is_global_set()) {
                let (id, long) = (a.get_id().as_str(), a.get_long().unwrap_or(""));
                if globals
                    .iter()
                    .any(|(gid, glong)| gid == id || (!long.is_empty() && glong == long))
                {
                    bad.push(format!("{path}: {id} (--{long})"));
                }
            }
            for s in cmd.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), globals, bad);
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        let globals: Vec<(String, String)> = cmd
            .get_arguments()
            .filter(|a| a.is_global_set())
            .map(|a| {
                (
                    a.get_id().to_string(),
                    a.get_long().unwrap_or("").to_string(),
                )
            })
            .collect();
        assert!(globals.iter().any(|(id, _)| id == "address"), "{globals:?}");
        let mut bad = Vec::new();
        for s in cmd.get_subcommands() {
            walk(s, &format!("fare {}", s.get_name()), &globals, &mut bad);
        }
        assert!(
            bad.is_empty(),
            "subcommand options shadowing global ones: {bad:#?}"
        );
        // And the case that shipped broken parses.
        let cli = Cli::try_parse_from(["fare", "arn", "listen", "--bind", "::", "--json"]);
        assert!(cli.is_ok(), "{cli:?}");
    }

    /// The connection options are global: accepted before or after any subcommand.
    #[test]
    fn socket_and_address_anywhere() {
        for args in [
            &["fare", "--socket", "/x.sock", "show", "groups"][..],
            &["fare", "show", "groups", "--socket", "/x.sock"],
            &["fare", "show", "--socket", "/x.sock", "groups", "--json"],
            &[
                "fare",
                "set",
                "bandwidth",
                "--neighbor",
                "10.0.0.1",
                "5",
                "--socket",
                "/x.sock",
            ],
            &[
                "fare", "neighbor", "shutdown", "10.0.0.1", "--socket", "/x.sock",
            ],
            &["fare", "drain", "eth1", "--undo", "--socket", "/x.sock"],
            &["fare", "watch", "--socket", "/x.sock", "--count", "1"],
        ] {
            let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert_eq!(
                cli.conn.socket,
                std::path::PathBuf::from("/x.sock"),
                "{args:?}"
            );
        }
        let cli = Cli::try_parse_from([
            "fare",
            "show",
            "neighbors",
            "--address",
            "10.0.0.1:50051",
            "--tls-ca",
            "ca.pem",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
        ])
        .expect("tcp options");
        assert_eq!(cli.conn.address.as_deref(), Some("10.0.0.1:50051"));
        assert!(Cli::try_parse_from(["fare", "show", "info", "--tls-cert", "c.pem"]).is_err());
        // `lab down NAME` (older spelling) and `lab down --name NAME` both name the lab.
        for args in [
            &["fare", "lab", "down", "x1"][..],
            &["fare", "lab", "down", "--name", "x1"],
        ] {
            let Command::Lab(lab::Command::Down(d)) =
                Cli::try_parse_from(args).expect("down").command
            else {
                panic!("not lab down")
            };
            assert_eq!(d.name.or(d.lab).as_deref(), Some("x1"));
        }
    }
}

/// docs/configuration.md's JSON examples (`<!-- contract: NAME -->` blocks) against what
/// the code emits for fully populated values: the same keys at every level.
#[cfg(test)]
mod contracts {
    use fare_agent::mgmt::json::{
        arn_json, color_json, group_json, neighbor_json, route_detail_json, route_json,
        watch_event_json,
    };
    use fare_agent::mgmt::pb;
    use serde_json::Value;
    use std::collections::BTreeSet;

    /// Every key path of `v` (`a.b[].c`), array elements merged.
    fn keys(v: &Value, path: &str, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let p = format!("{path}.{k}");
                    out.insert(p.clone());
                    keys(x, &p, out);
                }
            }
            Value::Array(a) => {
                for x in a {
                    keys(x, &format!("{path}[]"), out);
                }
            }
            _ => {}
        }
    }

    fn key_set(v: &Value) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        keys(v, "", &mut out);
        out
    }

    /// The JSON block after `<!-- contract: name -->`.
    fn documented(doc: &str, name: &str) -> Value {
        let marker = format!("<!-- contract: {name} -->");
        let at = doc
            .find(&marker)
            .unwrap_or_else(|| panic!("no contract `{name}`"));
        let rest = &doc[at..];
        let start = rest.find("```json\n").expect("json block") + 8;
        let end = rest[start..].find("```").expect("block end") + start;
        serde_json::from_str(&rest[start..end]).unwrap_or_else(|e| panic!("contract `{name}`: {e}"))
    }

    fn member(packets: u64, active: bool) -> pb::Member {
        pb::Member {
            via: "10.1.0.2".into(),
            interface: "eth1".into(),
            weight: 3,
            bandwidth_gbps: 100.0,
            packets,
            active,
            ..Default::default()
        }
    }

    fn neighbor() -> pb::Neighbor {
        pb::Neighbor {
            address: "10.1.0.2".into(),
            color: Some(100),
            ..Default::default()
        }
    }

    fn route() -> pb::Route {
        pb::Route {
            prefix: "198.51.100.0/24".into(),
            source: "bgp".into(),
            paths: vec![pb::RoutePath {
                as_path: vec![65100],
                ..Default::default()
            }],
        }
    }

    fn group(colors: bool) -> pb::Group {
        pb::Group {
            prefix: "198.51.100.0/24".into(),
            mode: "spray".into(),
            members: vec![member(7, !colors)],
            colors: if colors {
                vec![pb::ColorGroup {
                    color: 100,
                    members: vec![member(5, true)],
                    fit: None,
                }]
            } else {
                vec![]
            },
            fit: None,
            buckets: None,
        }
    }

    /// A flow-mode group with a resilient bucket table.
    fn flow_group() -> pb::Group {
        pb::Group {
            prefix: "198.51.100.0/24".into(),
            mode: "flow".into(),
            members: vec![member(7, true)],
            buckets: Some(pb::BucketTable {
                size: 256,
                per_member: vec![256],
                moved: Some(0),
                assigned_by: "fare".into(),
            }),
            ..Default::default()
        }
    }

    fn code(name: &str) -> Value {
        use pb::watch_event::Event;
        match name {
            "weights" => super::weights::groups_json(&[fare_model::sim::RouteGroup {
                node: "L2".into(),
                prefix: "192.0.2.0/24".parse().expect("prefix"),
                members: vec![fare_model::sim::Member {
                    via: "S1".into(),
                    link: "S1-L2".into(),
                    bandwidth_gbps: 75.0,
                    weight: 3,
                }],
                delta: 1.0,
                ecmp: false,
                frr: false,
            }])
            .expect("json"),
            "show neighbor" => neighbor_json(&neighbor()),
            "show routes" => Value::Array(vec![route_json(&route())]),
            "show groups" => {
                Value::Array(vec![group_json(&group(true)), group_json(&flow_group())])
            }
            "show route" => route_detail_json(&pb::RouteDetail {
                prefix: "198.51.100.0/24".into(),
                routes: vec![route()],
                group: Some(group(false)),
            }),
            "show color" => color_json(&pb::ColorView {
                color: 100,
                neighbors: vec![neighbor()],
                routes: vec![pb::ColorRoute {
                    prefix: "198.51.100.0/24".into(),
                    members: vec![member(0, true)],
                    fit: None,
                }],
            }),
            "show arn" => arn_json(&pb::ArnState {
                enabled: true,
                udp_port: 9961,
                counters: [("received".to_string(), 1)].into(),
                sent: [(1, 0)].into(),
                removed: vec![pb::ArnRemoval::default()],
                monitored: vec!["eth1".into()],
            }),
            "watch snapshot" => watch_event_json(&pb::WatchEvent {
                seq: 7,
                event: Some(Event::Snapshot(pb::Snapshot {
                    resync: false,
                    sessions: vec![pb::SessionChange::default()],
                    routes: vec![pb::RouteChange {
                        route: Some(route()),
                        withdrawn: false,
                    }],
                    groups: vec![pb::GroupChange {
                        group: Some(group(false)),
                        removed: false,
                    }],
                    bandwidths: vec![pb::BandwidthChange::default()],
                    arn: vec![pb::ArnChange::default()],
                })),
            }),
            "watch session" => watch_event_json(&pb::WatchEvent {
                seq: 8,
                event: Some(Event::Session(pb::SessionChange::default())),
            }),
            other => panic!("no code for contract `{other}`"),
        }
    }

    #[test]
    fn documented_json_matches_the_code() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/configuration.md"
        ))
        .expect("docs/configuration.md");
        let names: Vec<&str> = doc
            .match_indices("<!-- contract: ")
            .filter_map(|(i, _)| doc[i + 15..].split(" -->").next())
            .collect();
        assert!(names.len() >= 9, "contracts found: {names:?}");
        for name in names {
            let (doc_keys, code_keys) = (key_set(&documented(&doc, name)), key_set(&code(name)));
            assert_eq!(
                doc_keys,
                code_keys,
                "contract `{name}`: documented only {:?}, emitted only {:?}",
                doc_keys.difference(&code_keys).collect::<Vec<_>>(),
                code_keys.difference(&doc_keys).collect::<Vec<_>>()
            );
        }
    }
}
