//! The SAI-P4 profile on BMv2: the SAI-P4 program of PINS/SONiC (middleblock), compiled
//! with `p4c-bm2-ss -DPLATFORM_BMV2` outside this repository, programmed by fare's
//! `SaiDataplane` (docs/p4.md, "SAI-P4 (PINS) profile").
//!
//! The compiled program is looked for in `$FARE_SAI_P4_DIR` (default `/usr/local/share/sai-p4`):
//! `middleblock.json` and `middleblock.p4info.txtpb`. Skipped (reason printed) without
//! root, `simple_switch_grpc` or those files.
//!
//! Checks: the pipeline push and the switch-wide entries; a 3:1 flow group (router
//! interfaces, neighbors, next hops, a one-shot WCMP group, the route) read back with
//! weights 3 and 1 and forwarding every packet of 200 flows to the group's ports, with the
//! neighbor's MAC, the router MAC and TTL 63; the split at the sinks; each member's path
//! on its own; a make-before-break replacement (1:3) that loses no packet; a restarted
//! agent that adopts the switch's entries (no Write, no packet lost); removal (the
//! packets are dropped again and fare's tables are empty). `p4_sai_agent_static_group`:
//! `fare agent` with `profile: sai` and a static group, end to end.
//!
//! What BMv2 cannot serve: SAI-P4 leaves the WCMP hash to the switch ASIC (the program's
//! selector input is a constant 0), so on BMv2 every flow takes the same member. The test
//! accepts either the weights' split within 8 points (a build whose selector input is a
//! hash of the 5-tuple, docs/p4.md) or every packet on one member (the upstream program),
//! and tests each member's path separately. Measured: upstream 400:0, hashed 300:100.

use anyhow::{bail, ensure, Context, Result};
use fare::dataplane::{Dataplane, Group, GroupMode};
use fare::dp_p4::sai::backend::SaiOptions;
use fare::dp_p4::sai::SaiDataplane;
use fare::p4runtime::entities::whole_table;
use fare::p4runtime::proto::p4::v1 as p4;
use fare_integration::p4::{in_netns, members, Fabric, GRPC_ADDR, ROUTER_MAC};
use fare_integration::{fare_bin, have_root, have_tool, skip, wait_until};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const TEST: &str = "p4_sai_wcmp_on_bmv2";

/// The compiled SAI-P4 program: `$FARE_SAI_P4_DIR` or `/usr/local/share/sai-p4`.
fn sai_pipeline() -> (PathBuf, PathBuf) {
    let dir = std::env::var_os("FARE_SAI_P4_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/share/sai-p4"));
    (
        dir.join("middleblock.p4info.txtpb"),
        dir.join("middleblock.json"),
    )
}

fn group(prefix: &str, weights: &[u32]) -> Group {
    Group {
        prefix: prefix.parse().expect("test prefix"),
        mode: GroupMode::Flow,
        members: members(weights, |w| f64::from(w) * 25.0),
    }
}

/// Weights of every WCMP group entry on the switch, as read back.
async fn wcmp_weights(dp: &mut SaiDataplane) -> Result<Vec<Vec<i32>>> {
    let table = dp.program().wcmp_group;
    let entities = dp.client().read(vec![whole_table(table)]).await?;
    let mut out = Vec::new();
    for e in entities {
        if let Some(p4::entity::Entity::TableEntry(t)) = e.entity {
            match t.action.and_then(|a| a.r#type) {
                Some(p4::table_action::Type::ActionProfileActionSet(set)) => out.push(
                    set.action_profile_actions
                        .iter()
                        .map(|a| a.weight)
                        .collect(),
                ),
                other => bail!("WCMP group entry without an action set: {other:?}"),
            }
        }
    }
    Ok(out)
}

/// Entries fare wrote besides the switch-wide ones (route, group, next hop, neighbor and
/// router-interface tables).
async fn fare_entries(dp: &mut SaiDataplane) -> Result<usize> {
    let p = dp.program().clone();
    let mut n = 0;
    for t in [p.ipv4.table, p.wcmp_group, p.nexthop, p.neighbor, p.rif] {
        n += dp.client().read(vec![whole_table(t)]).await?.len();
    }
    Ok(n)
}

#[test]
fn p4_sai_wcmp_on_bmv2() -> Result<()> {
    if !have_root(TEST) || !have_tool(TEST, "simple_switch_grpc") {
        return Ok(());
    }
    let (p4info, json) = sai_pipeline();
    if !p4info.exists() || !json.exists() {
        skip(
            TEST,
            &format!(
                "{} or {} missing (compile SAI-P4's middleblock.p4 with p4c-bm2-ss \
                 -DPLATFORM_BMV2, docs/p4.md; FARE_SAI_P4_DIR names the directory)",
                json.display(),
                p4info.display()
            ),
        );
        return Ok(());
    }
    let fabric = Fabric::new("p4sai", 2)?;
    let sw = fabric.bmv2.sw.name.clone();
    let opts = SaiOptions {
        address: GRPC_ADDR.to_string(),
        device_id: 1,
        election_id: 10,
        pipeline: Some((p4info, json)),
        ports: fabric.port_map(),
        router_mac: ROUTER_MAC,
        watch_ports: true,
        max_group_size: None,
    };

    let (to_client, from_test) = std::sync::mpsc::channel::<&'static str>();
    let (to_test, from_client) = std::sync::mpsc::channel::<Result<Vec<u64>>>();
    let client = std::thread::spawn(move || {
        in_netns(&sw, move || async move {
            let mut slot = Some(SaiDataplane::connect(opts.clone()).await?);
            loop {
                let Ok(step) = from_test.recv() else {
                    return Ok(());
                };
                let reply = async {
                    if step == "restart-agent" {
                        // The old session ends first (same election id), then a new
                        // agent connects and installs what the old one had.
                        drop(slot.take());
                        let mut dp = SaiDataplane::connect(opts.clone()).await?;
                        dp.install(&group("198.18.0.0/16", &[1, 3])).await?;
                        let mut lone = group("198.19.0.0/16", &[1, 1]);
                        lone.members.remove(0);
                        dp.install(&lone).await?;
                        let writes = dp.writes();
                        slot = Some(dp);
                        return Ok(vec![writes]);
                    }
                    let dp = slot.as_mut().context("no data plane")?;
                    match step {
                        "install" => {
                            dp.install(&group("198.18.0.0/16", &[3, 1])).await?;
                            let w = wcmp_weights(dp).await?;
                            ensure!(w == vec![vec![3, 1]], "weights read back: {w:?}");
                            Ok(vec![])
                        }
                        "second" => {
                            // Member 2's path on its own: a group with only port 2.
                            let mut g = group("198.19.0.0/16", &[1, 1]);
                            g.members.remove(0);
                            dp.install(&g).await?;
                            Ok(vec![])
                        }
                        "replace" => {
                            dp.install(&group("198.18.0.0/16", &[1, 3])).await?;
                            let mut w = wcmp_weights(dp).await?;
                            w.sort();
                            ensure!(w == vec![vec![1], vec![1, 3]], "weights: {w:?}");
                            Ok(vec![])
                        }
                        "remove" => {
                            dp.remove("198.18.0.0/16".parse()?).await?;
                            dp.remove("198.19.0.0/16".parse()?).await?;
                            Ok(vec![fare_entries(dp).await? as u64])
                        }
                        other => bail!("unknown step {other}"),
                    }
                }
                .await;
                if to_test.send(reply).is_err() {
                    return Ok(());
                }
            }
        })
    });
    let step = |name: &'static str| -> Result<Vec<u64>> {
        to_client.send(name).context("client thread gone")?;
        from_client
            .recv_timeout(Duration::from_secs(60))
            .with_context(|| format!("step {name}: no answer"))?
            .with_context(|| format!("step {name}"))
    };
    let result = run(&fabric, &step);
    drop(to_client);
    match (result, client.join()) {
        // The client thread ended early: its error is the cause.
        (Err(e), Ok(Err(c))) => Err(e.context(format!("client: {c:#}"))),
        (r, _) => r,
    }
}

fn run(fabric: &Fabric, step: &dyn Fn(&'static str) -> Result<Vec<u64>>) -> Result<()> {
    step("install")?;
    // One routed frame captured at the sinks while 400 packets of 200 flows cross.
    let before = fabric.sink_counts()?;
    let sniff = sniff_one(fabric);
    fabric.send_udp("198.18.1.1", 400, 200)?;
    let split = fabric.sink_delta_after(&before, 400, Duration::from_secs(30));
    let total: u64 = split.iter().sum();
    eprintln!("p4_sai: 3:1 group, 400 packets over 200 flows: {split:?} at d1, d2");
    ensure!(total == 400, "{total} of 400 packets forwarded: {split:?}");
    let hashed = (split[0] as f64 - 300.0).abs() <= 0.08 * 400.0;
    let one_member = split.contains(&400);
    ensure!(
        hashed || one_member,
        "split {split:?}: neither the weights' (300:100 within 8 points) nor one member \
         (SAI-P4's constant selector input on BMv2)"
    );
    if one_member {
        eprintln!(
            "p4_sai: every flow on one member: SAI-P4 leaves the WCMP hash to the ASIC \
             (selector input 0 on BMv2); each member's path is tested on its own below"
        );
    }
    // The rewrite: the neighbor's MAC (02:00:00:00:00:0N behind dN), the router MAC as
    // source, TTL 64 - 1.
    let frame = sniff
        .join()
        .map_err(|_| anyhow::anyhow!("sniffer panicked"))??;
    let want: Vec<String> = (1..=2)
        .map(|n| format!("d{n} 02:00:00:00:00:0{n} {} 63", mac_text()))
        .collect();
    ensure!(
        want.contains(&frame),
        "routed frame (iface dst src ttl): {frame}"
    );

    // Member 2 (port 2) on its own.
    step("second")?;
    let before = fabric.sink_counts()?;
    fabric.send_udp("198.19.1.1", 100, 50)?;
    let got = fabric.sink_delta_after(&before, 100, Duration::from_secs(30));
    ensure!(got == vec![0, 100], "port 2's group: {got:?}");

    // Make-before-break replacement while traffic flows: nothing lost.
    under_traffic(fabric, || step("replace").map(|_| ()), "replacement")?;
    // A restarted agent (the old session closed, a new one opened) adopts the switch's
    // entries: re-installing the same group writes nothing, and traffic never stops.
    under_traffic(
        fabric,
        || {
            let writes = step("restart-agent")?;
            ensure!(
                writes == vec![0],
                "Writes by the restarted agent: {writes:?}"
            );
            Ok(())
        },
        "agent restart",
    )?;

    // Removal: fare's entries are gone and the route's packets are dropped.
    let left = step("remove")?;
    ensure!(left == vec![0], "fare entries left after removal: {left:?}");
    let before = fabric.sink_counts()?;
    fabric.send_udp("198.18.1.1", 50, 10)?;
    std::thread::sleep(Duration::from_secs(2));
    let after = fabric.sink_counts()?;
    ensure!(
        after == before,
        "packets after removal: {before:?} -> {after:?}"
    );
    Ok(())
}

/// python3 (scapy) in namespace `ns`, from a thread that does not own it.
fn py_in(ns: &str, script: &str) -> Result<String> {
    let out = fare_integration::run(
        "ip",
        &["netns", "exec", ns, "/usr/bin/python3", "-c", script],
    )?;
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// Runs `action` while 600 packets of 100 flows go to 198.18.2.2; every one must arrive.
fn under_traffic(fabric: &Fabric, action: impl FnOnce() -> Result<()>, what: &str) -> Result<()> {
    let before = fabric.sink_counts()?;
    let src = fabric.src.name.clone();
    let sender = std::thread::spawn(move || {
        py_in(
            &src,
            "from scapy.all import Ether, IP, UDP, Raw, sendp\n\
             pkts = [Ether(dst='02:fa:00:00:00:fe', src='02:00:00:00:00:aa')/\
             IP(src='10.0.0.1', dst='198.18.2.2', ttl=64)/UDP(sport=20000 + i % 100, \
             dport=5000)/Raw(b'x'*32) for i in range(600)]\n\
             sendp(pkts, iface='s0', verbose=False, inter=0.002)\n",
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    let acted = action();
    let sent = sender
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))?;
    acted?;
    sent?;
    let got = fabric.sink_delta_after(&before, 600, Duration::from_secs(30));
    eprintln!("p4_sai: {what} under traffic: {got:?}");
    ensure!(
        got.iter().sum::<u64>() == 600,
        "{what} under traffic: {got:?} of 600"
    );
    Ok(())
}

fn mac_text() -> String {
    ROUTER_MAC
        .0
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Starts capturing one routed test frame on d1 or d2 of the sink namespace; joins to
/// "iface dst src ttl".
fn sniff_one(fabric: &Fabric) -> std::thread::JoinHandle<Result<String>> {
    let ns = fabric.dst.name.clone();
    let handle = std::thread::spawn(move || {
        let out = py_in(
            &ns,
            "from scapy.all import sniff, IP, Ether\n\
             p = sniff(iface=['d1', 'd2'], count=1, timeout=30, \
             lfilter=lambda p: IP in p and p[IP].dst == '198.18.1.1')\n\
             print(f'{p[0].sniffed_on} {p[0][Ether].dst} {p[0][Ether].src} {p[0][IP].ttl}' \
             if p else 'none')\n",
        )?;
        Ok(out.trim().to_string())
    });
    // scapy needs a moment to start sniffing.
    std::thread::sleep(Duration::from_secs(3));
    handle
}

/// `fare agent` with `dataplane: {kind: p4runtime, profile: sai}` and a static 3:1 flow
/// group on the switch's P4Runtime server: the agent pushes SAI-P4, writes the group, and
/// the switch forwards every packet to the group's ports; the same configuration in
/// spray mode is refused at load with one line and exit status 2.
#[test]
fn p4_sai_agent_static_group() -> Result<()> {
    const TEST: &str = "p4_sai_agent_static_group";
    if !have_root(TEST) || !have_tool(TEST, "simple_switch_grpc") {
        return Ok(());
    }
    let (p4info, json) = sai_pipeline();
    if !p4info.exists() || !json.exists() {
        skip(
            TEST,
            &format!("{} missing (see p4_sai_wcmp_on_bmv2)", json.display()),
        );
        return Ok(());
    }
    let fabric = Fabric::new("p4saa", 2)?;
    let dir = std::env::temp_dir().join(&fabric.bmv2.sw.name);
    std::fs::create_dir_all(&dir)?;
    let result = agent_run(&fabric, &dir, &p4info, &json);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn agent_config(socket: &Path, p4info: &Path, json: &Path, mode: &str) -> String {
    format!(
        "name: saisw\nrouter_id: 10.0.0.254\nasn: 65001\n\
         management: {{socket: {}}}\n\
         dataplane:\n  kind: p4runtime\n  profile: sai\n  address: {GRPC_ADDR}\n  \
         election_id: 1\n  pipeline: {{p4info: {}, config: {}}}\n  \
         ports: {{p0: 0, p1: 1, p2: 2}}\n  router_mac: \"{}\"\n\
         static:\n  - prefix: 198.18.0.0/16\n    mode: {mode}\n    members:\n      \
         - {{interface: p1, neighbor_mac: \"02:00:00:00:00:01\", weight: 3}}\n      \
         - {{interface: p2, neighbor_mac: \"02:00:00:00:00:02\", weight: 1}}\n",
        socket.display(),
        p4info.display(),
        json.display(),
        mac_text(),
    )
}

fn agent_run(fabric: &Fabric, dir: &Path, p4info: &Path, json: &Path) -> Result<()> {
    let fare = fare_bin()?;
    let socket = dir.join("agent.sock");
    // Spray mode: refused at load, one line naming the file and line, exit status 2.
    let spray = dir.join("spray.yaml");
    std::fs::write(&spray, agent_config(&socket, p4info, json, "spray"))?;
    let out = Command::new(&fare)
        .args(["agent", "--config"])
        .arg(&spray)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(2) && stderr.contains("mode spray is not available"),
        "spray config: {:?} {stderr}",
        out.status
    );
    ensure!(
        stderr.contains(&format!("{}:", spray.display())),
        "error names the file: {stderr}"
    );

    let config = dir.join("agent.yaml");
    std::fs::write(&config, agent_config(&socket, p4info, json, "flow"))?;
    let log = std::fs::File::create(dir.join("agent.log"))?;
    let mut agent = fabric
        .bmv2
        .sw
        .command(fare.to_str().context("binary path")?)
        .args(["agent", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    let result = (|| -> Result<()> {
        let shown = wait_until(Duration::from_secs(30), || {
            Command::new(&fare)
                .args(["show", "--socket"])
                .arg(&socket)
                .args(["groups", "--json"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
                .is_some_and(|v| v.as_array().is_some_and(|a| a.len() == 1))
        });
        ensure!(
            shown,
            "the agent never reported its group: {}",
            std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default()
        );
        let before = fabric.sink_counts()?;
        fabric.send_udp("198.18.1.1", 200, 100)?;
        let got = fabric.sink_delta_after(&before, 200, Duration::from_secs(30));
        eprintln!("p4_sai agent: 200 packets over 100 flows: {got:?} at d1, d2");
        ensure!(got.iter().sum::<u64>() == 200, "forwarded {got:?} of 200");
        Ok(())
    })();
    let _ = agent.kill();
    let _ = agent.wait();
    result
}

/// The P4Info a PINS switch exposes (SAI-P4 without `-DPLATFORM_BMV2`: translated string
/// ids and ports), named by `FARE_SAI_PINS_P4INFO`: one P4Info in text format (e.g. the
/// `middleblock.p4info.pb.txt` of a sonic-pins checkout) or a directory of them
/// (`*.p4info.pb.txt`, one per instantiation). Every object fare writes resolves, with
/// string encodings for the ids and ports, and the entries of a group build. An
/// instantiation without SAI-P4's routing tables (`wbb`: ACLs only) must be refused with
/// the missing table named. No switch needed.
#[test]
fn p4_sai_resolves_the_pins_p4info() -> Result<()> {
    const TEST: &str = "p4_sai_resolves_the_pins_p4info";
    let Some(path) = std::env::var_os("FARE_SAI_PINS_P4INFO").map(PathBuf::from) else {
        skip(
            TEST,
            "FARE_SAI_PINS_P4INFO not set (a PINS SAI-P4 P4Info in text format, or a directory of them)",
        );
        return Ok(());
    };
    let files = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&path)
            .with_context(|| path.display().to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(".p4info.pb.txt"))
            .collect();
        v.sort();
        v
    } else {
        vec![path.clone()]
    };
    ensure!(
        !files.is_empty(),
        "no *.p4info.pb.txt in {}",
        path.display()
    );
    for file in &files {
        let text = std::fs::read_to_string(file).with_context(|| file.display().to_string())?;
        let routes = text.contains("\"ingress.routing_lookup.ipv4_table\"");
        let got = resolve_pins_p4info(&text);
        match (routes, got) {
            (true, r) => r.with_context(|| file.display().to_string())?,
            (false, Ok(())) => anyhow::bail!(
                "{}: no routing tables, yet fare resolved it",
                file.display()
            ),
            (false, Err(e)) => {
                ensure!(
                    format!("{e:#}").contains("has no table named"),
                    "{}: refused for another reason: {e:#}",
                    file.display()
                );
                eprintln!("p4_sai: {} refused as expected: {e:#}", file.display());
            }
        }
    }
    Ok(())
}

/// Resolves every object fare writes in a PINS P4Info and builds a group's entries.
fn resolve_pins_p4info(text: &str) -> Result<()> {
    use fare::dp_p4::sai::{neighbor_id, Encoding, SaiProgram, WcmpAction};
    use fare::p4runtime::p4info::P4Info;
    let info = P4Info::from_text(text)?;
    let p = SaiProgram::resolve(&info)?;
    for (what, f) in [
        ("vrf_id", p.vrf_table_vrf),
        ("wcmp_group_id", p.wcmp_group_id),
        ("nexthop_id", p.nexthop_id),
        ("router_interface_id", p.rif_id),
        ("port", p.rif_port),
    ] {
        ensure!(f.encoding == Encoding::Str, "{what}: {:?}", f.encoding);
    }
    ensure!(p.neighbor_id.encoding == Encoding::Bits(128), "neighbor_id");
    eprintln!(
        "p4_sai: PINS selector: size {}, max_group_size {}",
        p.selector.size, p.selector.max_group_size
    );
    let mac = fare::dataplane::MacAddr([2, 0, 0, 0, 0, 1]);
    let nid = neighbor_id(None, mac);
    p.rif_entry("fare-rif-1", 1, ROUTER_MAC)?;
    p.neighbor_entry("fare-rif-1", nid, mac)?;
    p.nexthop_entry("fare-nh-1", "fare-rif-1", nid)?;
    p.wcmp_group_entry(
        "fare-g-1",
        &[WcmpAction {
            nexthop_id: "fare-nh-1".into(),
            weight: 3,
            watch_port: Some(1),
        }],
    )?;
    p.route_entry("fare", "10.0.0.0/8".parse()?, "fare-g-1")?;
    Ok(())
}
