//! BMv2 switches for nodes marked `target: bmv2`: a `simple_switch_grpc` runs in the
//! node's namespace with the node's fabric interfaces as its ports (port k+1 = the k-th
//! fabric port), and the node's `fare agent` programs it over P4Runtime on that namespace's
//! loopback (every namespace has its own, so every switch uses the same gRPC and Thrift
//! ports). This is the usual P4 test setup (a switch process attached to emulated links)
//! and works the same under both backends, since Mininet nodes are namespaces too.
//!
//! The node's kernel keeps its addresses, so BGP and ARN still terminate there, but it does
//! not forward (ip_forward=0): transit packets are the switch's alone. The switch reads the
//! links with packet sockets, so transmit checksum offload is switched off on every link
//! of such a lab: a packet whose checksum the sender left to the NIC would reach the switch,
//! and leave it, unfinished. The switch's own veth ends get GRO (veth NAPI): without an XDP
//! program or NAPI there, frames that XDP neighbors redirect into them are dropped.

use super::plan::{NodePlan, Plan};
use super::state::StateDir;
use super::sys;
use super::LabError;
use fare_agent::config::{DataplaneConfig, P4RuntimeConfig, Pipeline};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The switch program.
pub const SWITCH: &str = "simple_switch_grpc";
/// gRPC (P4Runtime) address inside the node's namespace.
pub const GRPC_ADDR: &str = "127.0.0.1:9559";
const GRPC_PORT: u16 = 9559;
const THRIFT_PORT: &str = "9090";
const DEVICE_ID: u64 = 1;
/// P4Runtime packet-in/out port (fare.p4's CPU_PORT).
const CPU_PORT: &str = "255";
/// How long a switch may take to open its gRPC port.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The p4c outputs the switches load.
const P4INFO: &str = "fare.p4info.txtpb";
const DEVICE_CONFIG: &str = "fare.json";

/// The directory with fare.p4's compiled outputs: `given`, else `p4/build` under the
/// current directory, else the repository the `fare` binary was built in.
pub fn build_dir(given: Option<&Path>, fare: &Path) -> PathBuf {
    if let Some(d) = given {
        return d.to_path_buf();
    }
    let here = PathBuf::from("p4/build");
    if here.join(DEVICE_CONFIG).exists() {
        return here;
    }
    // target/<profile>/fare -> the repository root.
    fare.ancestors()
        .nth(3)
        .map(|root| root.join("p4/build"))
        .filter(|d| d.join(DEVICE_CONFIG).exists())
        .unwrap_or(here)
}

/// Checks what BMv2 nodes need before anything is built; returns the absolute build dir.
pub fn preflight(plan: &Plan, build: &Path) -> Result<Option<PathBuf>, LabError> {
    let Some(first) = plan.nodes.iter().find(|n| n.bmv2) else {
        return Ok(None);
    };
    if !sys::have(SWITCH) {
        return Err(LabError::Input(format!(
            "node `{}` has `target: bmv2` but {SWITCH} is not on PATH (install BMv2, or drop \
             the target to run the node as a Linux agent)",
            first.name
        )));
    }
    for f in [P4INFO, DEVICE_CONFIG] {
        if !build.join(f).exists() {
            return Err(LabError::Input(format!(
                "node `{}` has `target: bmv2` but {} is missing (run `make -C p4`, or give \
                 --p4-build DIR)",
                first.name,
                build.join(f).display()
            )));
        }
    }
    Ok(Some(
        std::fs::canonicalize(build).unwrap_or_else(|_| build.to_path_buf()),
    ))
}

/// Interface -> P4 port of a BMv2 node.
pub fn ports(node: &NodePlan) -> BTreeMap<String, u32> {
    node.ports
        .iter()
        .enumerate()
        .map(|(k, p)| (p.interface.clone(), k as u32 + 1))
        .collect()
}

/// The agent's `dataplane:` block for a BMv2 node.
pub fn dataplane_config(node: &NodePlan, build: &Path) -> DataplaneConfig {
    DataplaneConfig::P4runtime(P4RuntimeConfig {
        address: GRPC_ADDR.to_string(),
        device_id: DEVICE_ID,
        election_id: 1,
        pipeline: Some(Pipeline {
            p4info: build.join(P4INFO),
            config: build.join(DEVICE_CONFIG),
        }),
        ports: ports(node),
        max_group_size: None,
        group_form: Default::default(),
        router_mac: None,
        // BMv2's P4Runtime server keeps a member out of service for good once its watch
        // port was seen down while the member was written: the port's later "up" never
        // reactivates it (docs/lab.md). Peers attaching XDP bounce the lab's links at
        // start, so the lab's switches rely on the agent's own link handling instead.
        watch_ports: false,
        profile: Default::default(),
    })
}

/// Log file of a node's switch.
pub fn log_path(dir: &StateDir, node: &str) -> PathBuf {
    dir.path.join("logs").join(format!("{node}.bmv2.log"))
}

/// Transmit checksum offload off on every link end and host interface of the lab, GRO on
/// at the switches' ports (see the module comment) and at FRR nodes' ports: a frame an XDP
/// neighbour redirects into a veth is dropped unless the receiving end runs an XDP program
/// or has GRO (veth NAPI) on, and FRR's kernel forwards without one. Also used for XDP
/// labs: a frame XDP redirects keeps the unfinished checksum its sender left to veth
/// offload.
pub fn prepare_links(plan: &Plan) -> Result<(), LabError> {
    for node in &plan.nodes {
        let mut ifaces: Vec<&str> = node.ports.iter().map(|p| p.interface.as_str()).collect();
        ifaces.extend(node.hosts.iter().map(|h| h.node_interface.as_str()));
        let features: &[&str] = if node.bmv2 || node.frr {
            &["tx", "off", "gro", "on"]
        } else {
            &["tx", "off"]
        };
        ethtool(&node.ns, &ifaces, features)?;
        for h in &node.hosts {
            ethtool(&h.ns, &[super::plan::HOST_IF], &["tx", "off"])?;
        }
    }
    Ok(())
}

fn ethtool(ns: &str, ifaces: &[&str], features: &[&str]) -> Result<(), LabError> {
    for i in ifaces {
        let mut args = vec!["-K", i];
        args.extend_from_slice(features);
        sys::netns_exec(ns, "ethtool", &args)?;
    }
    Ok(())
}

/// Starts the switch of `node` in its own session (it outlives `fare lab up`) and waits
/// until its gRPC port listens. Returns its pid.
pub fn start(node: &NodePlan, dir: &StateDir) -> Result<u32, LabError> {
    let log_file = log_path(dir, &node.name);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_file)?;
    let log2 = log.try_clone()?;
    let mut cmd = Command::new("setsid");
    cmd.arg("nsenter")
        .arg(format!("--net=/run/netns/{}", node.ns))
        .arg(SWITCH)
        .args(["--device-id", &DEVICE_ID.to_string()])
        .args(["--no-p4", "--thrift-port", THRIFT_PORT]);
    for (iface, port) in ports(node) {
        cmd.args(["-i", &format!("{port}@{iface}")]);
    }
    cmd.args([
        "--",
        "--grpc-server-addr",
        GRPC_ADDR,
        "--cpu-port",
        CPU_PORT,
    ]);
    let child = cmd.stdin(Stdio::null()).stdout(log).stderr(log2).spawn()?;
    let pid = child.id();
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if !sys::alive(pid as i32) {
            return Err(LabError::AgentFailed(format!(
                "{SWITCH} of {} exited; see {}",
                node.name,
                log_file.display()
            )));
        }
        if listening(&node.ns, GRPC_PORT) {
            return Ok(pid);
        }
        if Instant::now() > deadline {
            return Err(LabError::AgentFailed(format!(
                "{SWITCH} of {} did not open {GRPC_ADDR} within {START_TIMEOUT:?}; see {}",
                node.name,
                log_file.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// True when something listens on TCP `port` in namespace `ns`.
fn listening(ns: &str, port: u16) -> bool {
    sys::netns_exec(ns, "ss", &["-Hltn", &format!("sport = :{port}")])
        .map(|out| !out.trim().is_empty())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_number_the_fabric_ports_from_one() {
        let t = fare_model::topology::parse(
            Path::new("t.yaml"),
            "nodes:\n  - {name: S1, role: spine, target: bmv2}\n  - {name: L1, role: leaf, prefixes: [10.0.1.0/24]}\n  - {name: L2, role: leaf, prefixes: [10.0.2.0/24]}\nlinks:\n  - {a: S1, b: L1, gbps: 100}\n  - {a: S1, b: L2, gbps: 100}\n",
        )
        .unwrap();
        let plan = super::super::plan::plan(&t, "t", &Default::default()).unwrap();
        let s1 = plan.node("S1").unwrap();
        assert!(s1.bmv2);
        assert!(!plan.node("L1").unwrap().bmv2);
        let p = ports(s1);
        assert_eq!(p.get("eth1"), Some(&1));
        assert_eq!(p.get("eth2"), Some(&2));
        // As the agent's file has it.
        let dp = serde_json::to_value(dataplane_config(s1, Path::new("/b"))).unwrap();
        assert_eq!(dp["kind"], "p4runtime");
        assert_eq!(dp["ports"]["eth2"], 2);
        assert_eq!(dp["pipeline"]["config"], "/b/fare.json");
    }

    #[test]
    fn bmv2_nodes_with_prefixes_are_refused() {
        let t = fare_model::topology::parse(
            Path::new("t.yaml"),
            "nodes:\n  - {name: S1, role: spine}\n  - {name: L1, role: leaf, target: bmv2, prefixes: [10.0.1.0/24]}\nlinks:\n  - {a: S1, b: L1, gbps: 100}\n",
        )
        .unwrap();
        let e = super::super::plan::plan(&t, "t", &Default::default()).unwrap_err();
        assert!(e.to_string().contains("`L1`"), "{e}");
    }
}
