//! `--backend mininet`: Mininet builds the lab's nodes and links.
//!
//! Every node and host becomes a Mininet `Host` (its own network namespace, a shell
//! Mininet keeps), every link a Mininet `Link` (a veth pair) with the interface names and
//! MAC addresses of the plan. Each Mininet host's namespace is then given the lab's
//! namespace name (`ip netns attach`), so everything after that — addresses, tc shaping,
//! agents, traffic, faults, `down` — is the same code as with the default backend.
//! Mininet's Python process stays up as the owner of the hosts (its pid is in the lab
//! state); it exits by itself when its hosts go away.

use super::plan::{Plan, VethPair};
use super::state::StateDir;
use super::LabError;
use serde::Serialize;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's Mininet lives in the system Python's dist-packages.
pub const PYTHON: &str = "/usr/bin/python3";

/// Whether Debian's Mininet can be imported.
pub fn available() -> bool {
    Command::new(PYTHON)
        .args(["-c", "import mininet.net"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[derive(Serialize)]
struct Spec<'a> {
    namespaces: Vec<String>,
    links: &'a [VethPair],
    ready_file: String,
}

/// The script run by [`build`]: reads the spec (JSON) from argv[1].
const SCRIPT: &str = r#"
import json, subprocess, sys, time
from mininet.net import Mininet
from mininet.log import setLogLevel

spec = json.load(open(sys.argv[1]))
setLogLevel('warning')
net = Mininet(controller=None, build=False, autoSetMacs=False, autoStaticArp=False)
hosts = {}
for i, ns in enumerate(spec['namespaces']):
    # Short Mininet names; the lab's names come from `ip netns attach` below.
    hosts[ns] = net.addHost('n%d' % i, ip=None, inNamespace=True)
for l in spec['links']:
    opts = {'intfName1': l['if_a'], 'intfName2': l['if_b']}
    if l['mac_a']: opts['addr1'] = l['mac_a']
    if l['mac_b']: opts['addr2'] = l['mac_b']
    net.addLink(hosts[l['ns_a']], hosts[l['ns_b']], **opts)
net.build()
for ns, h in hosts.items():
    subprocess.run(['ip', 'netns', 'attach', ns, str(h.pid)], check=True)
open(spec['ready_file'], 'w').write('ready\n')
print('mininet: %d hosts, %d links ready' % (len(hosts), len(spec['links'])), flush=True)
# Own the hosts until `fare lab down` kills them (or us).
while all(h.shell.poll() is None for h in hosts.values()):
    time.sleep(1)
"#;

/// Builds the plan's namespaces and links with Mininet; returns the pid of the Mininet
/// process. Bounded: fails after `timeout` without the ready mark.
pub fn build(plan: &Plan, dir: &StateDir, timeout: Duration) -> Result<u32, LabError> {
    if !available() {
        return Err(LabError::Input(format!(
            "--backend mininet: Debian's mininet is not installed ({PYTHON} cannot import \
             mininet; scripts/setup installs it)"
        )));
    }
    let links = plan.veth_pairs();
    let ready = dir.path.join("mininet.ready");
    let _ = std::fs::remove_file(&ready);
    let spec = Spec {
        namespaces: plan.namespaces(),
        links: &links,
        ready_file: ready.display().to_string(),
    };
    let spec_path = dir.path.join("mininet.json");
    // Not `mininet.py`: the script directory comes first on sys.path and would shadow
    // the mininet package.
    let script_path = dir.path.join("fare-mininet.py");
    let json = serde_json::to_string_pretty(&spec).map_err(std::io::Error::other)?;
    std::fs::write(&spec_path, json)?;
    std::fs::write(&script_path, SCRIPT)?;
    let log = std::fs::File::create(dir.path.join("mininet.log"))?;
    let mut child = Command::new(PYTHON)
        .arg(&script_path)
        .arg(&spec_path)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let pid = child.id();
    let deadline = Instant::now() + timeout;
    while !ready.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(LabError::Input(format!(
                "mininet exited ({status}) before the lab was built: {}",
                log_tail(&dir.path.join("mininet.log"))
            )));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(LabError::Input(format!(
                "mininet did not build the lab within {timeout:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The child keeps running (dropping the handle neither kills nor waits for it);
    // `fare lab down` stops it by pid.
    drop(child);
    Ok(pid)
}

fn log_tail(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .rev()
        .take(3)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" | ")
}
