//! ARN over real links between network namespaces: the TTL 255 / neighbor / interface
//! checks of the receiver, malformed and spoofed input counted and ignored, and the queue
//! monitor seeing a tbf-shaped queue build up (Type 1) and drain (Type 2).
//!
//! Topology (addresses only inside the namespaces this test creates):
//!
//! ```text
//!   snd (a0 10.99.0.1/24) ---- (b0 10.99.0.2/24) rcv (b1 10.99.1.2/24) ---- (c0 10.99.1.1/24) spoof
//! ```

use anyhow::{Context, Result};
use fare_integration::{fare_bin, have_root, have_tool, link, veth, wait_until, Netns};
use serde_json::Value;
use std::process::{Child, Stdio};
use std::time::Duration;

struct Lab {
    snd: Netns,
    rcv: Netns,
    spoof: Netns,
}

fn lab() -> Result<Lab> {
    let snd = Netns::new("arnS")?;
    let rcv = Netns::new("arnR")?;
    let spoof = Netns::new("arnX")?;
    link(&snd, "a0", "10.99.0.1/24", &rcv, "b0", "10.99.0.2/24")?;
    link(&spoof, "c0", "10.99.1.1/24", &rcv, "b1", "10.99.1.2/24")?;
    // The spoofer also claims the sender's address, and routes it toward the receiver.
    spoof.exec("ip", &["addr", "add", "10.99.0.1/32", "dev", "c0"])?;
    spoof.exec("ip", &["route", "add", "10.99.0.2/32", "dev", "c0"])?;
    // The receiver must not drop the spoofed packets in rp_filter before the socket sees them.
    rcv.sh("sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.b1.rp_filter=0 net.ipv4.conf.default.rp_filter=0")?;
    Ok(Lab { snd, rcv, spoof })
}

/// The lab for `test`, or `None` (the skip reason printed) without root or one of `tools`.
fn lab_for(test: &str, tools: &[&str]) -> Result<Option<Lab>> {
    if !have_root(test) || !tools.iter().all(|t| have_tool(test, t)) {
        return Ok(None);
    }
    lab().map(Some)
}

/// `fare arn listen` on b0 for the neighbor 10.99.0.1, `extra` options added.
fn spawn_listen(ns: &Netns, count: u64, extra: &[&str]) -> Result<Child> {
    let fare = fare_bin()?;
    let count = count.to_string();
    let mut args = vec!["arn", "listen", "--neighbor", "10.99.0.1@b0"];
    args.extend_from_slice(extra);
    args.extend(["--json", "--count", &count, "--duration-ms", "8000"]);
    ns.command(fare.to_str().context("path")?)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("spawning fare arn listen")
}

/// The ARN types a listener heard (JSON lines with a message), once it has ended.
fn heard_types(listener: Child) -> Result<Vec<i64>> {
    let heard = json_lines(&listener.wait_with_output()?.stdout);
    Ok(heard
        .iter()
        .filter_map(|v| v["message"]["type"].as_i64())
        .collect())
}

/// A listener's output split into its events and its final counters line.
fn events_and_counters(out: &[u8]) -> Result<(Vec<Value>, Value)> {
    let lines = json_lines(out);
    let counters = lines.last().context("no counters line")?["counters"].clone();
    let events = lines
        .into_iter()
        .filter(|v| v.get("counters").is_none())
        .collect();
    Ok((events, counters))
}

/// `fare arn monitor` in `ns` notifying 10.99.0.2 (thresholds 40000/4000 bytes, JSON
/// events), with the interface, interval and duration in `args`.
fn spawn_monitor(ns: &Netns, args: &[&str]) -> Result<Child> {
    let fare = fare_bin()?;
    let mut all = vec![
        "arn",
        "monitor",
        "--high-bytes",
        "40000",
        "--low-bytes",
        "4000",
    ];
    all.extend_from_slice(args);
    all.extend(["--notify", "10.99.0.2", "--refresh-ms", "100000", "--json"]);
    Ok(ns
        .command(fare.to_str().context("path")?)
        .args(all)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?)
}

fn send(ns: &Netns, extra: &[&str]) -> Result<()> {
    let mut args = vec!["arn", "send", "--to", "10.99.0.2"];
    args.extend_from_slice(extra);
    ns.fare(&args).map(|_| ())
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn arn_receiver_accepts_only_ttl_255_from_configured_neighbor() -> Result<()> {
    let Some(lab) = lab_for(
        "arn_receiver_accepts_only_ttl_255_from_configured_neighbor",
        &[],
    )?
    else {
        return Ok(());
    };
    let listener = spawn_listen(&lab.rcv, 6, &[])?;
    std::thread::sleep(Duration::from_millis(300));
    // 1. the neighbor, TTL 255: accepted
    send(
        &lab.snd,
        &["--type", "1", "--metric", "77", "--path-id", "10.0.0.2"],
    )?;
    // 2. the neighbor, TTL 254 (as if routed over one hop): dropped
    send(
        &lab.snd,
        &["--type", "1", "--path-id", "10.0.0.2", "--ttl", "254"],
    )?;
    // 3. the neighbor, malformed (version 1): counted as malformed
    send(&lab.snd, &["--raw", "01100040 0a000002"])?;
    // 4. a non-neighbor (its own address): dropped
    send(
        &lab.spoof,
        &[
            "--type",
            "3",
            "--path-id",
            "10.0.0.2",
            "--from",
            "10.99.1.1",
        ],
    )?;
    // 5. spoofed source = the neighbor's address, but over another interface: dropped
    send(
        &lab.spoof,
        &[
            "--type",
            "3",
            "--path-id",
            "10.0.0.2",
            "--from",
            "10.99.0.1",
        ],
    )?;
    // 6. the neighbor again, Type 2 with a flow identifier: accepted
    send(
        &lab.snd,
        &[
            "--type",
            "2",
            "--protocol",
            "17",
            "--dst",
            "192.0.2.9",
            "--dst-port",
            "4791",
            "--path-id",
            "10.0.0.2",
        ],
    )?;
    let (events, counters) = events_and_counters(&listener.wait_with_output()?.stdout)?;
    assert_eq!(events.len(), 6, "{events:#?}");
    assert_eq!(events[0]["message"]["type"], 1);
    assert_eq!(events[0]["message"]["metric"], 77);
    assert_eq!(events[0]["message"]["path_id"], 0x0a00_0002);
    assert_eq!(events[0]["ttl"], 255);
    assert!(
        events[1]["dropped"].as_str().unwrap_or("").contains("TTL"),
        "{:?}",
        events[1]
    );
    assert!(
        events[2]["dropped"]
            .as_str()
            .unwrap_or("")
            .contains("version"),
        "{:?}",
        events[2]
    );
    assert!(
        events[3]["dropped"]
            .as_str()
            .unwrap_or("")
            .contains("neighbor"),
        "{:?}",
        events[3]
    );
    assert!(
        events[4]["dropped"]
            .as_str()
            .unwrap_or("")
            .contains("interface"),
        "{:?}",
        events[4]
    );
    assert_eq!(events[5]["message"]["type"], 2);
    assert_eq!(events[5]["message"]["flow"]["dst_port"], 4791);
    assert_eq!(counters["received"], 6);
    assert_eq!(counters["accepted"], 2);
    assert_eq!(counters["dropped_ttl"], 1);
    assert_eq!(counters["malformed"], 1);
    assert_eq!(counters["dropped_not_neighbor"], 1);
    assert_eq!(counters["dropped_wrong_interface"], 1);
    Ok(())
}

/// Multicast transport (`arn.multicast`, here `fare arn listen --group`): an ARN the
/// neighbor sends to the receiver's group out of its link is accepted (TTL 255, from the
/// neighbor, on b0); one sent to another group before it never reaches the receiver.
#[test]
fn arn_receiver_takes_its_multicast_group_and_ignores_another() -> Result<()> {
    let Some(lab) = lab_for(
        "arn_receiver_takes_its_multicast_group_and_ignores_another",
        &[],
    )?
    else {
        return Ok(());
    };
    let fare = fare_bin()?;
    let fare = fare.to_str().context("path")?;
    let listener = spawn_listen(&lab.rcv, 1, &["--group", "239.255.0.61"])?;
    std::thread::sleep(Duration::from_millis(300));
    for (group, metric) in [("239.255.0.62", "7"), ("239.255.0.61", "9")] {
        lab.snd.exec(
            fare,
            &[
                "arn",
                "send",
                "--to",
                group,
                "--device",
                "a0",
                "--type",
                "1",
                "--metric",
                metric,
                "--path-id",
                "10.0.0.2",
            ],
        )?;
    }
    let (events, counters) = events_and_counters(&listener.wait_with_output()?.stdout)?;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["message"]["metric"], 9, "{:?}", events[0]);
    assert_eq!(events[0]["ttl"], 255);
    assert_eq!(counters["received"], 1, "{counters}");
    assert_eq!(counters["accepted"], 1, "{counters}");
    Ok(())
}

#[test]
fn arn_decode_reads_a_capture_of_the_wire() -> Result<()> {
    let Some(lab) = lab_for("arn_decode_reads_a_capture_of_the_wire", &["tcpdump"])? else {
        return Ok(());
    };
    let dir = std::env::temp_dir().join(format!("fare-arn-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let pcap = dir.join("arn.pcap");
    let mut capture = lab
        .rcv
        .command("tcpdump")
        .args([
            "-i",
            "b0",
            "-U",
            "-c",
            "1",
            "-w",
            pcap.to_str().context("path")?,
            "udp",
            "port",
            "9961",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    std::thread::sleep(Duration::from_millis(500));
    let got = (0..20).any(|_| {
        let _ = send(
            &lab.snd,
            &["--type", "3", "--metric", "255", "--path-id", "10.0.0.7"],
        );
        wait_until(Duration::from_millis(200), || {
            matches!(capture.try_wait(), Ok(Some(_)))
        })
    });
    if !got {
        let _ = capture.kill();
    }
    let _ = capture.wait();
    assert!(got, "tcpdump captured nothing");
    let out = std::process::Command::new(fare_bin()?)
        .args([
            "arn",
            "decode",
            "--json",
            "--pcap",
            pcap.to_str().context("path")?,
        ])
        .output()?;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        lines[0],
        serde_json::json!({"type": 3, "version": 0, "metric": 255, "para_type": 64, "path_id": 0x0a00_0007u32})
    );
    Ok(())
}

#[test]
fn arn_monitor_sees_tbf_queue_build_up_and_drain() -> Result<()> {
    let Some(lab) = lab_for(
        "arn_monitor_sees_tbf_queue_build_up_and_drain",
        &["python3"],
    )?
    else {
        return Ok(());
    };
    // 8 Mbit/s with room for ~150 kB: a UDP burst fills it within milliseconds.
    lab.snd.exec(
        "tc",
        &[
            "qdisc", "add", "dev", "a0", "root", "tbf", "rate", "8mbit", "burst", "16kb", "limit",
            "150kb",
        ],
    )?;
    let listener = spawn_listen(&lab.rcv, 2, &[])?;
    let monitor = spawn_monitor(
        &lab.snd,
        &[
            "--interface",
            "a0=10.0.0.2",
            "--limit-bytes",
            "150000",
            "--interval-us",
            "200",
            "--duration-ms",
            "6000",
        ],
    )?;
    std::thread::sleep(Duration::from_millis(500));
    // One second of back-to-back 1200-byte datagrams: far above 8 Mbit/s.
    lab.snd.exec(
        "python3",
        &[
            "-c",
            "import socket,time\n\
             s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
             end=time.time()+1.0\n\
             while time.time()<end:\n\
             \x20 try: s.sendto(b'x'*1200,('10.99.0.2',9))\n\
             \x20 except OSError: pass\n",
        ],
    )?;
    let out = monitor.wait_with_output()?;
    let events = json_lines(&out.stdout);
    let types: Vec<i64> = events.iter().filter_map(|e| e["type"].as_i64()).collect();
    assert_eq!(types, vec![1, 2], "{events:#?}");
    assert!(
        events[0]["metric"].as_i64().unwrap_or(0) >= 68,
        "{:?}",
        events[0]
    );
    assert!(events[0]["backlog_bytes"].as_i64().unwrap_or(0) >= 40000);
    assert_eq!(events[0]["path_id"], 0x0a00_0002);
    assert_eq!(heard_types(listener)?, vec![1, 2]);
    Ok(())
}

#[test]
fn arn_monitor_reports_link_failure_and_recovery() -> Result<()> {
    let Some(lab) = lab_for("arn_monitor_reports_link_failure_and_recovery", &[])? else {
        return Ok(());
    };
    // A second link snd <-> rcv, watched too: it fails, and the monitor must notify over a0.
    veth(&lab.snd, "a1", &lab.rcv, "b2")?;
    let listener = spawn_listen(&lab.rcv, 2, &[])?;
    let monitor = spawn_monitor(
        &lab.snd,
        &[
            "--interface",
            "a1=10.0.0.3",
            "--interval-us",
            "500",
            "--duration-ms",
            "3000",
        ],
    )?;
    std::thread::sleep(Duration::from_millis(700));
    lab.rcv.exec("ip", &["link", "set", "b2", "down"])?;
    std::thread::sleep(Duration::from_millis(700));
    lab.rcv.exec("ip", &["link", "set", "b2", "up"])?;
    let out = monitor.wait_with_output()?;
    let events = json_lines(&out.stdout);
    let types: Vec<i64> = events.iter().filter_map(|e| e["type"].as_i64()).collect();
    assert_eq!(types, vec![3, 4], "{events:#?}");
    assert_eq!(events[0]["path_id"], 0x0a00_0003);
    assert_eq!(heard_types(listener)?, vec![3, 4]);
    Ok(())
}
