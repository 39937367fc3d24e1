//! A mixed Figure 1 (`topologies/draft-fig1-mixed.yaml`): spines S1 and S2 run FRR
//! (bgpd + zebra, UCMP from the RFC 10005 Link Bandwidth community), S3, S4 and the leaves
//! run fare. The lab must converge to the model, and the values are checked here against
//! what was computed by hand from RFC 10005, draft-xu-idr-fare and FRR's UCMP rule
//! (weight = floor(100 x bw / total)):
//!
//! - S1 (FRR) toward 10.100.0.0/24, originated by L1 (link 25G) and L2 (link 10G): the
//!   leaves send 25 and 10 Gbps as binary32 bytes/s (3.125e9, 1.25e9), so S1 installs
//!   floor(100 x 25/35) = 71 and floor(100 x 10/35) = 28 in its kernel.
//! - L8 (fare) toward L1's 10.0.1.0/24: S1 and S2 pass L1's Path Bandwidth (25) on
//!   unchanged (to FRR an unknown transitive community), S3 sends min(25, 25) = 25, S4
//!   min(10, 25) = 10: 25:25:25:10 = 5:5:5:2.
//! - L8 toward L2's 10.0.2.0/24: S1 passes L2's 25 on without seeing its own 10G link to
//!   L2; S2, S3, S4 send 25: 1:1:1:1.
//!
//! - S1's best path to 10.100.0.0/24, whose Path Bandwidth it passes on, is L1's: the
//!   lab configures `bgp bestpath compare-routerid`, and L1's router id 10.0.0.1 is lower
//!   than L2's 10.0.0.2 (FRR's JSON names the reason: "Router ID").
//!
//! Then traffic from L8 to L3 (1:1:1:1; not to L1, whose second host is in the anycast
//! 10.100.0.0/24 that L2 originates too) crosses both kinds of spine: every member of L8's
//! group carries packets, and what was sent arrives. Before the lab turned GRO on at FRR
//! nodes' ports, the frames L8's XDP program redirected toward S1 and S2 were dropped.

use anyhow::{ensure, Context, Result};
use fare_integration::bgp::TempFile;
use fare_integration::lab::{fare, Lab};
use fare_integration::{have_root, have_tool, skip};
use serde_json::Value;
use std::path::Path;

/// Weights of `ns`'s kernel route to `prefix` (the lab's zebra installs plain multipath
/// routes, no nexthop objects), sorted.
fn kernel_weights(ns: &str, prefix: &str) -> Result<Vec<u64>> {
    let routes = fare_integration::lab::kernel_routes(ns, &[prefix])?;
    let (_, hops) = routes.into_iter().next().context("no route")?;
    let mut w: Vec<u64> = hops.into_iter().map(|h| h.1).collect();
    w.sort_unstable();
    Ok(w)
}

/// L8's group toward `prefix` as fare shows it: sorted weights and packet counts by weight.
fn group(lab: &Lab, prefix: &str) -> Result<Vec<(u64, u64)>> {
    let groups = lab.show("L8", "groups")?;
    let g = groups
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g["prefix"] == prefix)
        .with_context(|| format!("L8 has no group for {prefix}: {groups}"))?;
    let mut m: Vec<(u64, u64)> = g["members"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["weight"].as_u64().unwrap_or(0),
                m["packets"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    m.sort_unstable();
    Ok(m)
}

/// FRR `node`'s best path to `prefix`: its neighbor's router id and FRR's reason.
fn frr_best(lab: &Lab, node: &str, prefix: &str) -> Result<(String, String)> {
    let vty = format!("/run/fare/lab/{}/frr/{node}", lab.name);
    let cmd = format!("show bgp ipv4 unicast {prefix} json");
    let out = fare::lab::frr::vtysh(Path::new(&vty), &cmd)?;
    let v: Value = serde_json::from_str(&out).context("vtysh JSON")?;
    let best = v["paths"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["bestpath"]["overall"] == true)
        .with_context(|| format!("{node} has no best path to {prefix}: {v}"))?;
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Ok((
        s(&best["peer"]["routerId"]),
        s(&best["bestpath"]["selectionReason"]),
    ))
}

/// The Path Bandwidth (Gbps) of `node`'s route to `prefix` from `neighbor`, as its
/// agent received it.
fn received(lab: &Lab, node: &str, prefix: &str, neighbor: &str) -> Result<f64> {
    let socket = format!("/run/fare/lab/{}/{node}.sock", lab.name);
    let out = fare(&["show", "--socket", &socket, "route", prefix, "--json"])?;
    ensure!(out.status.success(), "fare show route on {node}");
    let v: Value = serde_json::from_slice(&out.stdout)?;
    let paths = v["routes"].as_array().into_iter().flatten();
    let path = paths
        .flat_map(|r| r["paths"].as_array().into_iter().flatten())
        .find(|p| p["neighbor"] == neighbor)
        .with_context(|| format!("{node} has no path to {prefix} from {neighbor}: {v}"))?;
    path["path_bandwidth_gbps"]
        .as_f64()
        .with_context(|| format!("no Path Bandwidth: {path}"))
}

/// `fare lab show` (text and JSON) into a pipe whose reader is gone: exit 0, nothing on
/// stderr; into /dev/full: exit 1 and one line. Never a panic (101).
fn lab_show_into_closed_and_full_stdout(lab: &Lab) -> Result<()> {
    let bin = fare_integration::fare_bin()?;
    for json in [false, true] {
        let mut args = vec!["lab", "show", "--name", &lab.name];
        if json {
            args.push("--json");
        }
        let (reader, writer) = std::io::pipe()?;
        drop(reader);
        let out = std::process::Command::new(&bin)
            .args(&args)
            .stdout(writer)
            .output()?;
        ensure!(
            out.status.code() == Some(0) && out.stderr.is_empty(),
            "{args:?} into a closed pipe: {:?} {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let full = std::fs::File::options().write(true).open("/dev/full")?;
        let out = std::process::Command::new(&bin)
            .args(&args)
            .stdout(full)
            .output()?;
        ensure!(
            out.status.code() == Some(1)
                && String::from_utf8_lossy(&out.stderr)
                    == "fare: writing output: No space left on device\n",
            "{args:?} into /dev/full: {:?} {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// `fare lab show --json` and `fare lab report` on the mixed lab: S1's groups come from
/// its kernel, its sessions from bgpd, both marked `"target": "frr"` (8 links: 8
/// sessions, all Established; 10.100.0.0/24 at 71:28 as above); a fare leaf's are not
/// marked. The report draws S1 as an FRR node, L8 as a fare one.
fn lab_show_and_report_label_frr(lab: &Lab) -> Result<()> {
    let show = lab.json("show", &[])?;
    let s1 = show["groups"]["S1"].as_array().context("no groups of S1")?;
    let g = s1
        .iter()
        .find(|g| g["prefix"] == "10.100.0.0/24")
        .context("S1: no 10.100.0.0/24")?;
    ensure!(
        g["target"] == "frr" && g["mode"] == "frr",
        "S1's group: {g}"
    );
    let mut w: Vec<u64> = g["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["weight"].as_u64())
        .collect();
    w.sort_unstable();
    ensure!(w == [28, 71], "lab show: S1's weights {w:?}");
    let n = show["neighbors"]["S1"]
        .as_array()
        .context("no sessions of S1")?;
    ensure!(
        n.len() == 8
            && n.iter()
                .all(|n| n["state"] == "Established" && n["target"] == "frr"),
        "lab show: S1's sessions {n:?}"
    );
    let l8 = show["groups"]["L8"].as_array().context("no groups of L8")?;
    ensure!(
        !l8.is_empty() && l8.iter().all(|g| g["target"].is_null()),
        "L8's groups: {l8:?}"
    );
    let html = TempFile::new("mixed-report.html", "")?;
    let out = fare(&["lab", "report", "--name", &lab.name, "-o", html.path()])?;
    ensure!(
        out.status.success(),
        "lab report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(html.path())?;
    for (node, target) in [("S1", "frr"), ("L8", "fare")] {
        let rect = format!("<rect data-node=\"{node}\" data-target=\"{target}\"");
        ensure!(page.contains(&rect), "the report has no {rect}");
    }
    Ok(())
}

/// Whether any process still runs from the lab's state directory (its FRR daemons).
/// `lab up --json` reports convergence to the model, or the mismatches.
fn converged(up: &std::process::Output) -> Result<()> {
    let up: Value = serde_json::from_slice(&up.stdout)?;
    ensure!(
        up["converged_s"].is_number(),
        "not converged to the model: {}",
        up["mismatches"]
    );
    Ok(())
}

fn lab_processes(lab: &str) -> Vec<u32> {
    let needle = format!("/run/fare/lab/{lab}/");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(Path::new("/proc").join(pid.to_string()).join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .collect()
}

#[test]
fn lab_mixed_frr_and_fare_spines_converge_to_the_model() -> Result<()> {
    let test = "lab_mixed_frr_and_fare_spines_converge_to_the_model";
    if !have_root(test) || !have_tool(test, "tc") || !have_tool(test, "nsenter") {
        return Ok(());
    }
    if !fare::lab::frr::available() {
        skip(test, "FRR (bgpd, zebra) is not installed");
        return Ok(());
    }
    let (lab, up) = Lab::start(
        "topologies/draft-fig1-mixed.yaml",
        "mx",
        &[
            "--routing",
            "bgp",
            "--dataplane",
            "xdp",
            "--no-arn",
            "--converge-timeout",
            "120",
        ],
    )?;
    converged(&up)?;

    let s1 = format!("farelab-{}-S1", lab.name);
    let w = kernel_weights(&s1, "10.100.0.0/24")?;
    ensure!(
        w == [28, 71],
        "S1's kernel weights for 10.100.0.0/24: {w:?}"
    );

    let best = frr_best(&lab, "S1", "10.100.0.0/24")?;
    ensure!(
        best == ("10.0.0.1".to_string(), "Router ID".to_string()),
        "S1's best path to 10.100.0.0/24: {best:?}"
    );

    lab_show_and_report_label_frr(&lab)?;
    lab_show_into_closed_and_full_stdout(&lab)?;

    let to_l1: Vec<u64> = group(&lab, "10.0.1.0/24")?.iter().map(|m| m.0).collect();
    ensure!(to_l1 == [2, 5, 5, 5], "L8 -> 10.0.1.0/24: {to_l1:?}");
    let to_l2: Vec<u64> = group(&lab, "10.0.2.0/24")?.iter().map(|m| m.0).collect();
    ensure!(to_l2 == [1, 1, 1, 1], "L8 -> 10.0.2.0/24: {to_l2:?}");

    let before = group(&lab, "10.0.3.0/24")?;
    let r = lab.traffic("L8", "L3", 20, 3, &[])?;
    let after = group(&lab, "10.0.3.0/24")?;
    let sent = r["totals"]["sent_packets"].as_u64().unwrap_or(0);
    let received = r["totals"]["received_packets"].as_u64().unwrap_or(0);
    let carried: Vec<u64> = after
        .iter()
        .zip(&before)
        .map(|(a, b)| a.1.saturating_sub(b.1))
        .collect();
    eprintln!("{test}: sent {sent}, received {received}, per member {carried:?}");
    ensure!(
        sent > 0 && received * 100 >= sent * 99,
        "sent {sent}, received {received}"
    );
    ensure!(
        carried.iter().all(|&c| c > 0),
        "a spine carried nothing: {carried:?}"
    );

    let name = lab.name.clone();
    lab.down()?;
    let left = lab_processes(&name);
    ensure!(left.is_empty(), "processes left after lab down: {left:?}");
    Ok(())
}

/// Averaged mode, with L1's router id moved to 10.0.0.9 so that the lowest router id no
/// longer carries the largest value. 10.100.0.0/24: L1 sends S1 min(25, link 25) = 25,
/// L2 min(25, link 10) = 10. S1's best path is now L2's (10.0.0.2 < 10.0.0.9, reason
/// "Router ID") and S1 passes on 10 (the largest would be 25); L8 receives that from S1,
/// whose address on link S1-L8 (the file's 8th link, S1 its first end) is 172.16.0.14 in
/// the default link pool 172.16.0.0/12. S2 (both links 25G) passes on L2's 25 from
/// 172.16.0.30 (16th link). `lab up` itself compares every group with the model.
#[test]
fn lab_mixed_frr_passes_on_the_lowest_router_ids_path() -> Result<()> {
    let test = "lab_mixed_frr_passes_on_the_lowest_router_ids_path";
    if !have_root(test) || !have_tool(test, "tc") || !have_tool(test, "nsenter") {
        return Ok(());
    }
    if !fare::lab::frr::available() || !have_tool(test, "vtysh") {
        skip(test, "FRR (bgpd, zebra, vtysh) is not installed");
        return Ok(());
    }
    let yaml = std::fs::read_to_string(
        fare_integration::repo_root().join("topologies/draft-fig1-mixed.yaml"),
    )?;
    let swapped = yaml.replace(
        "router_id: 10.0.0.1, prefixes",
        "router_id: 10.0.0.9, prefixes",
    );
    ensure!(swapped != yaml, "L1's router id not found");
    let topo = TempFile::new("mixed-swapped.yaml", &swapped)?;
    let (lab, up) = Lab::start(
        topo.path(),
        "mxr",
        &[
            "--mode",
            "averaged",
            "--no-arn",
            "--converge-timeout",
            "120",
        ],
    )?;
    converged(&up)?;
    let best = frr_best(&lab, "S1", "10.100.0.0/24")?;
    ensure!(
        best == ("10.0.0.2".to_string(), "Router ID".to_string()),
        "S1's best path to 10.100.0.0/24: {best:?}"
    );
    let p = "10.100.0.0/24";
    let from_s1 = received(&lab, "L8", p, "172.16.0.14")?;
    let from_s2 = received(&lab, "L8", p, "172.16.0.30")?;
    ensure!(
        (from_s1, from_s2) == (10.0, 25.0),
        "L8's Path Bandwidth from S1, S2: {from_s1}, {from_s2}"
    );
    lab.down()
}
