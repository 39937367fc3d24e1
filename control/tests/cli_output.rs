//! `fare` as a Unix tool: what it does when its standard output is closed or full, how an
//! error reads (each cause once), where a duplicate YAML key is reported, no colour in a
//! log that is not a terminal, secrets kept out of `fare show config`, and its manual
//! pages as `man` renders them. No root needed.

mod common;

use common::Scratch;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fare() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fare"));
    c.current_dir(repo()).env_remove("FARE_LOG");
    c
}

/// A child killed at the end of the test.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `fare weights` on the largest topology: more output than a pipe holds.
const WEIGHTS: [&str; 2] = ["weights", "topologies/clos5-small.yaml"];

/// Standard output a pipe whose reader is gone: exit 0, nothing on stderr (what
/// coreutils do with SIGPIPE ignored), never a panic (101).
#[test]
fn closed_stdout_ends_quietly() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = fare()
        .args(WEIGHTS)
        .stdout(writer)
        .output()
        .expect("run fare");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// Standard output /dev/full: exit 1 and one line saying so, for a big and a small output.
#[test]
fn full_stdout_is_one_line_and_exit_1() {
    for args in [
        &WEIGHTS[..],
        &["topo", "check", "topologies/draft-fig2.yaml"],
    ] {
        let full = std::fs::File::options()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = fare().args(args).stdout(full).output().expect("run fare");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "fare: writing output: No space left on device\n",
            "{args:?}"
        );
    }
}

const AGENT: &str = "name: out1
router_id: 10.0.0.1
asn: 65001
bgp: {listen: false}
dataplane: {kind: none}
";

/// The agent with its metrics address taken: exit 1, the errno text once in the error
/// line; its log (a file, not a terminal) has no ANSI colour codes.
#[test]
fn address_in_use_said_once_and_log_without_colour() {
    let dir = Scratch::new("inuse");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let sock = dir.0.join("a.sock");
    let config = dir.write(
        "a.yaml",
        &format!(
            "{AGENT}management: {{socket: {}, metrics: \"{addr}\"}}\n",
            sock.display()
        ),
    );
    let log = std::fs::File::create(dir.0.join("log")).expect("log");
    let status = fare()
        .args(["--log", "info", "agent", "--config", &config])
        .stdout(Stdio::null())
        .stderr(log)
        .status()
        .expect("run fare");
    assert_eq!(status.code(), Some(1));
    let err = std::fs::read_to_string(dir.0.join("log")).expect("log");
    let last = err.lines().last().unwrap_or("");
    assert_eq!(
        last,
        format!("fare: metrics listener on {addr}: Address already in use (os error 98)"),
        "{err}"
    );
    assert!(
        err.lines().any(|l| l.contains("management API listening")),
        "{err}"
    );
    assert!(!err.contains('\x1b'), "ANSI codes in a log file: {err:?}");
}

/// A key given twice is reported at its second occurrence (line and column), exit 2.
#[test]
fn duplicate_key_at_its_line() {
    let dir = Scratch::new("dup");
    let text = format!("{AGENT}management: {{socket: /tmp/x.sock}}\nasn: 65002\n");
    let path = dir.write("d.yaml", &text);
    let out = fare()
        .args(["agent", "--check", "--config", &path])
        .output()
        .expect("run fare");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("fare: {path}:7:1: duplicate field `asn`\n")
    );
}

/// `fare show config` of an agent with an MD5 password: the password is not in the text
/// nor in the JSON, `<redacted>` is in its place.
#[test]
fn show_config_redacts_the_md5_password() {
    let dir = Scratch::new("redact");
    let sock = dir.0.join("a.sock");
    let secret = "s3cret-Md5-key";
    let config = dir.write(
        "a.yaml",
        &format!(
            "{AGENT}management: {{socket: {}}}\nneighbors:\n  - {{address: 192.0.2.9, \
             remote_as: 65100, passive: true, md5_password: {secret}}}\n",
            sock.display()
        ),
    );
    let _agent = Child(
        fare()
            .args(["agent", "--config", &config])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("agent"),
    );
    let show = |json: bool| -> Output {
        let mut args = vec!["--socket", sock.to_str().expect("utf-8"), "show", "config"];
        if json {
            args.push("--json");
        }
        fare().args(&args).output().expect("run fare")
    };
    let start = Instant::now();
    let text = loop {
        let out = show(false);
        if out.status.success() {
            break String::from_utf8(out.stdout).expect("utf-8");
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no agent: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!text.contains(secret), "{text}");
    assert!(text.contains("md5_password: <redacted>"), "{text}");
    let json = show(true);
    assert!(json.status.success());
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    let yaml = v["yaml"].as_str().expect("yaml");
    assert!(!yaml.contains(secret), "{yaml}");
    assert!(yaml.contains("md5_password: <redacted>"), "{yaml}");
}

/// The section headings of `man -l PAGE` (the lines at column 0).
fn man_headings(page: &Path) -> Vec<String> {
    render(page)
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// `man -l PAGE` as a user reads it, checked free of groff warnings.
fn render(page: &Path) -> String {
    let mut child = Command::new("man")
        .arg("-l")
        .arg(page)
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("GROFF_NO_SGR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("man");
    let mut text = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut text)
        .expect("read");
    let out = child.wait_with_output().expect("man");
    assert!(out.status.success(), "man -l {}", page.display());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "man -l {}",
        page.display()
    );
    text
}

fn have_man() -> bool {
    Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn man_pages_have_their_sections() {
    if !have_man() {
        eprintln!("skipped: no man");
        return;
    }
    let dir = Scratch::new("man");
    let out = fare()
        .args(["generate", "man", dir.0.to_str().expect("utf-8")])
        .output()
        .expect("run fare");
    assert!(out.status.success(), "{out:?}");
    let has = |page: &str, sections: &[&str]| {
        let headings = man_headings(&dir.0.join(page));
        for s in sections {
            assert!(
                headings.iter().any(|h| h == s),
                "{page}: no {s}: {headings:?}"
            );
        }
    };
    has(
        "fare-agent.8",
        &[
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "SIGNALS",
            "EXIT STATUS",
            "FILES",
            "SEE ALSO",
        ],
    );
    has(
        "fare.1",
        &[
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "EXIT STATUS",
            "ENVIRONMENT",
            "FILES",
            "SEE ALSO",
        ],
    );
    has(
        "fare.yaml.5",
        &["NAME", "SYNOPSIS", "DESCRIPTION", "KEYS", "SEE ALSO"],
    );
    assert!(!dir.0.join("fare-agent.1").exists());
    // fare-agent(8)'s DESCRIPTION is the long one of `fare agent --help`, not the NAME line.
    let agent = render(&dir.0.join("fare-agent.8"));
    let description = agent
        .split("\nDESCRIPTION\n")
        .nth(1)
        .and_then(|d| d.split("\nOPTIONS\n").next())
        .unwrap_or("");
    assert!(description.contains("SIGHUP"), "{description}");
    // No page points into the source tree.
    for entry in std::fs::read_dir(&dir.0).expect("dir") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("page");
        assert!(!text.contains("docs/"), "{} names docs/", path.display());
    }
}
