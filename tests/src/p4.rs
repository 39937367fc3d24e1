//! BMv2 harness for the P4 tests and benchmark: `simple_switch_grpc` in its own network
//! namespace with veth ports, gRPC on that namespace's loopback, and a way to run async
//! client code inside the namespace (setns moves only the calling thread).

use crate::{delta, have_root, have_tool, repo_root, run, veth, wait_until, Netns};
use anyhow::{bail, Context, Result};
use fare::dataplane::{MacAddr, Member};
use fare::dp_p4::{GroupForm, P4RuntimeOptions, DEFAULT_ARN_HOLD};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const GRPC_ADDR: &str = "127.0.0.1:9559";
pub const THRIFT_PORT: &str = "9090";

/// Paths of the committed p4c outputs.
pub fn pipeline() -> (PathBuf, PathBuf) {
    let build = repo_root().join("p4/build");
    (build.join("fare.p4info.txtpb"), build.join("fare.json"))
}

/// True when BMv2 and the compiled program are present; prints the SKIPPED line otherwise.
pub fn bmv2_available(test: &str) -> bool {
    if !have_root(test) || !have_tool(test, "simple_switch_grpc") {
        return false;
    }
    let (p4info, json) = pipeline();
    if !p4info.exists() || !json.exists() {
        crate::skip(
            test,
            "p4/build/fare.json or fare.p4info.txtpb missing (run make -C p4)",
        );
        return false;
    }
    true
}

/// Runs `f` on a thread that has joined namespace `ns`, with its own tokio runtime.
pub fn in_netns<T, F, Fut>(ns: &str, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T>>,
{
    match crate::inns::spawn_async(ns, f).join() {
        Ok(r) => r,
        Err(_) => bail!("test thread in namespace {ns} panicked"),
    }
}

/// A running simple_switch_grpc with `ports` (P4 port -> interface in the switch namespace).
pub struct Bmv2 {
    pub sw: Netns,
    child: Child,
    pub log: PathBuf,
    ports: BTreeMap<u32, String>,
}

impl Bmv2 {
    /// Starts the switch in `sw` on the given (already created) interfaces.
    pub fn start(sw: Netns, ports: &BTreeMap<u32, String>) -> Result<Bmv2> {
        let log = std::env::temp_dir().join(format!("{}.bmv2.log", sw.name));
        std::fs::File::create(&log)?; // empty; restarts append
        let child = Self::spawn(&sw, ports, &log)?;
        let mut b = Bmv2 {
            sw,
            child,
            log,
            ports: ports.clone(),
        };
        b.wait_listening()?;
        Ok(b)
    }

    /// Kills the switch with SIGKILL (no goodbye to its controllers) and starts it again
    /// on the same ports: it comes back with no pipeline and no entries.
    pub fn restart(&mut self) -> Result<()> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The port must be free before the new process binds it.
        let name = self.sw.name.clone();
        wait_until(Duration::from_secs(10), || {
            Command::new("ip")
                .args(["netns", "exec", &name, "ss", "-Hltn", "sport", "=", ":9559"])
                .output()
                .map(|o| o.stdout.is_empty())
                .unwrap_or(false)
        });
        self.child = Self::spawn(&self.sw, &self.ports, &self.log)?;
        self.wait_listening()
    }

    fn spawn(sw: &Netns, ports: &BTreeMap<u32, String>, log: &PathBuf) -> Result<Child> {
        let mut cmd = sw.command("simple_switch_grpc");
        cmd.args(["--device-id", "1", "--no-p4", "--thrift-port", THRIFT_PORT]);
        for (port, iface) in ports {
            cmd.args(["-i", &format!("{port}@{iface}")]);
        }
        // FARE_BMV2_LOG=1: the switch's per-packet trace goes into the log file (debugging).
        if std::env::var_os("FARE_BMV2_LOG").is_some() {
            cmd.args(["--log-console", "-L", "debug"]);
        }
        cmd.args(["--", "--grpc-server-addr", GRPC_ADDR, "--cpu-port", "255"]);
        let logfile = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        cmd.stdout(Stdio::from(logfile.try_clone()?))
            .stderr(Stdio::from(logfile))
            .spawn()
            .context("spawning simple_switch_grpc")
    }

    fn wait_listening(&mut self) -> Result<()> {
        let b = self;
        let name = b.sw.name.clone();
        let up = wait_until(Duration::from_secs(20), || {
            Command::new("ip")
                .args(["netns", "exec", &name, "ss", "-Hltn", "sport", "=", ":9559"])
                .output()
                .map(|o| !o.stdout.is_empty())
                .unwrap_or(false)
        });
        if !up {
            let _ = b.child.kill();
            bail!(
                "simple_switch_grpc did not listen on {GRPC_ADDR}: {}",
                std::fs::read_to_string(&b.log).unwrap_or_default()
            );
        }
        if let Ok(Some(status)) = b.child.try_wait() {
            bail!("simple_switch_grpc exited: {status}");
        }
        Ok(())
    }

    /// True while the switch process runs (a crash is a test failure).
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Limits egress port `port` of the switch to `pps` packets per second, so its queue
    /// fills under a burst (the BMv2 way to congest a port). P4Runtime has no call for it:
    /// this is simple_switch's Thrift runtime (`set_queue_rate` in simple_switch_CLI).
    /// Fails when the switch was built without its Thrift server.
    pub fn set_queue_rate(&self, port: u32, pps: u64) -> Result<()> {
        in_netns(&self.sw.name, move || async move {
            thrift::set_egress_queue_rate(port, pps)
        })
    }
}

/// The one simple_switch Thrift call the tests need, spoken directly (binary protocol,
/// buffered transport, multiplexed service "simple_switch"), so no Python Thrift is needed.
mod thrift {
    use super::THRIFT_PORT;
    use anyhow::{bail, ensure, Context, Result};
    use std::io::{Read, Write};
    use std::time::Duration;

    const CALL: u32 = 1;
    const REPLY: u32 = 2;
    const T_STOP: u8 = 0;
    const T_I32: u8 = 8;
    const T_I64: u8 = 10;

    /// `i32 set_egress_queue_rate(1: i32 port_num, 2: i64 rate_pps)`; 0 = success.
    pub fn set_egress_queue_rate(port: u32, pps: u64) -> Result<()> {
        let addr = format!("127.0.0.1:{THRIFT_PORT}");
        let mut s = std::net::TcpStream::connect(&addr)
            .with_context(|| format!("no Thrift runtime server on {addr}"))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let name = b"simple_switch:set_egress_queue_rate";
        let mut m = Vec::new();
        m.extend_from_slice(&(0x8001_0000 | CALL).to_be_bytes());
        m.extend_from_slice(&(name.len() as u32).to_be_bytes());
        m.extend_from_slice(name);
        m.extend_from_slice(&1u32.to_be_bytes()); // sequence id
        m.push(T_I32);
        m.extend_from_slice(&1i16.to_be_bytes());
        m.extend_from_slice(&i32::try_from(port)?.to_be_bytes());
        m.push(T_I64);
        m.extend_from_slice(&2i16.to_be_bytes());
        m.extend_from_slice(&i64::try_from(pps)?.to_be_bytes());
        m.push(T_STOP);
        s.write_all(&m)?;

        let mut word = [0u8; 4];
        s.read_exact(&mut word)?;
        let kind = u32::from_be_bytes(word) & 0xff;
        s.read_exact(&mut word)?;
        let len = u32::from_be_bytes(word) as usize;
        ensure!(len < 256, "Thrift reply name of {len} bytes");
        let mut skip = vec![0u8; len + 4]; // name, sequence id
        s.read_exact(&mut skip)?;
        if kind != REPLY {
            bail!("Thrift set_egress_queue_rate answered with message type {kind}");
        }
        let mut field = [0u8; 3];
        s.read_exact(&mut field)?;
        ensure!(field[0] == T_I32, "Thrift reply field type {}", field[0]);
        s.read_exact(&mut word)?;
        let rc = i32::from_be_bytes(word);
        ensure!(
            rc == 0,
            "set_egress_queue_rate({port}, {pps}) returned {rc}"
        );
        Ok(())
    }
}

impl Drop for Bmv2 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A switch with one source namespace (`src`, interface `s0` on switch port 0) and one
/// sink namespace (`dst`, interfaces `d1..dN` on switch ports 1..N).
pub struct Fabric {
    pub src: Netns,
    pub dst: Netns,
    pub bmv2: Bmv2,
    pub n: u32,
}

impl Fabric {
    /// The fabric for `test` (tag `tag`, `n` sink ports); `None` (the skip printed)
    /// without root, BMv2 or the compiled program.
    pub fn for_test(test: &str, tag: &str, n: u32) -> Result<Option<Fabric>> {
        if !bmv2_available(test) {
            return Ok(None);
        }
        Fabric::new(tag, n).map(Some)
    }

    pub fn new(tag: &str, n: u32) -> Result<Fabric> {
        let sw = Netns::new(&format!("{tag}s"))?;
        let src = Netns::new(&format!("{tag}a"))?;
        let dst = Netns::new(&format!("{tag}b"))?;
        for ns in [&sw, &src, &dst] {
            ns.sh(
                "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1",
            )?;
        }
        let mut ports = BTreeMap::new();
        veth(&src, "s0", &sw, "p0")?;
        ports.insert(0, "p0".to_string());
        for i in 1..=n {
            veth(&dst, &format!("d{i}"), &sw, &format!("p{i}"))?;
            ports.insert(i, format!("p{i}"));
        }
        src.sh("ip addr add 10.0.0.1/24 dev s0")?;
        for iface in ports.values() {
            sw.sh(&format!(
                "ethtool -K {iface} tx off rx off >/dev/null 2>&1 || true"
            ))?;
        }
        let bmv2 = Bmv2::start(sw, &ports)?;
        Ok(Fabric { src, dst, bmv2, n })
    }

    /// Name -> port map for the backend (`p0`..`pN` as interface names).
    pub fn port_map(&self) -> BTreeMap<String, u32> {
        (0..=self.n).map(|i| (format!("p{i}"), i)).collect()
    }

    /// Packets received so far by the sink on d1..dN.
    pub fn sink_counts(&self) -> Result<Vec<u64>> {
        (1..=self.n)
            .map(|i| {
                let out = self.dst.exec(
                    "cat",
                    &[&format!("/sys/class/net/d{i}/statistics/rx_packets")],
                )?;
                Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
            })
            .collect()
    }

    /// MAC address of `iface` in `ns`.
    pub fn mac(ns: &Netns, iface: &str) -> Result<String> {
        let out = ns.exec("cat", &[&format!("/sys/class/net/{iface}/address")])?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

/// The router MAC the tests give fare's P4 backend (test frames are sent to it).
pub const ROUTER_MAC: MacAddr = MacAddr([0x02, 0xfa, 0, 0, 0, 0xfe]);

impl Fabric {
    /// fare's P4Runtime options for this switch: the committed pipeline pushed, ports
    /// `p0..pN`, weighted groups with watch ports, the default ARN hold.
    pub fn options(&self, election_id: u64) -> P4RuntimeOptions {
        let (p4info, json) = pipeline();
        P4RuntimeOptions {
            address: GRPC_ADDR.to_string(),
            device_id: 1,
            election_id,
            pipeline: Some((p4info, json)),
            ports: self.port_map(),
            router_mac: ROUTER_MAC,
            form: GroupForm::Weighted,
            watch_ports: true,
            arn_hold: DEFAULT_ARN_HOLD,
        }
    }

    /// Sends `count` UDP packets from the source namespace to `dst` over `flows` distinct
    /// source ports (1 = one flow), paced so BMv2 never drops at ingress.
    pub fn send_udp(&self, dst: &str, count: usize, flows: usize) -> Result<()> {
        let script = format!(
            "from scapy.all import Ether, IP, UDP, Raw, sendp\n\
             pkts = [Ether(dst='02:fa:00:00:00:fe', src='02:00:00:00:00:aa')/IP(src='10.0.0.1', dst='{dst}', ttl=64)/\
             UDP(sport=10000 + (i % {flows}), dport=5000)/Raw(b'x'*32) for i in range({count})]\n\
             sendp(pkts, iface='s0', verbose=False, inter=0.0005)\n"
        );
        python(&self.src, &script).map(|_| ())
    }

    /// Sends one UDP packet per flow (source ports `10000..10000 + flows`) from the source
    /// namespace to `dst`, 2 ms apart, while the sinks capture: per flow,
    /// the sink port (1..N) it arrived on and the CRC32 of its 5-tuple as fare.p4 hashes it
    /// (src, dst, protocol, ports, concatenated; zlib's CRC32). A flow not seen maps to 0.
    pub fn flow_ports(&self, dst: &str, flows: usize) -> Result<Vec<(u32, u32)>> {
        let sender = format!(
            "from scapy.all import Ether, IP, UDP, Raw, sendp\n\
             pkts = [Ether(dst='02:fa:00:00:00:fe', src='02:00:00:00:00:aa')/IP(src='10.0.0.1', dst='{dst}', ttl=64)/\
             UDP(sport=10000 + i, dport=5000)/Raw(b'x'*32) for i in range({flows})]\n\
             sendp(pkts, iface='s0', verbose=False, inter=0.002)\n"
        );
        let ifaces: Vec<String> = (1..=self.n).map(|i| format!("'d{i}'")).collect();
        let script = format!(
            "import subprocess, time, socket, struct, zlib\n\
             from scapy.all import AsyncSniffer, UDP\n\
             sn = [AsyncSniffer(iface=i, filter='udp and dst port 5000', store=True) for i in [{ifaces}]]\n\
             [s.start() for s in sn]\n\
             time.sleep(1.5)\n\
             subprocess.run(['ip', 'netns', 'exec', '{src}', '/usr/bin/python3', '-c', {sender:?}], check=True)\n\
             time.sleep(2.0)\n\
             seen = {{}}\n\
             for port, s in enumerate(sn, 1):\n\
             \x20   for p in s.stop():\n\
             \x20       if UDP in p: seen[p[UDP].sport] = port\n\
             src = socket.inet_aton('10.0.0.1'); dst = socket.inet_aton('{dst}')\n\
             for i in range({flows}):\n\
             \x20   sp = 10000 + i\n\
             \x20   h = zlib.crc32(src + dst + bytes([17]) + struct.pack('!HH', sp, 5000))\n\
             \x20   print(sp, h, seen.get(sp, 0))\n",
            ifaces = ifaces.join(", "),
            src = self.src.name,
        );
        let out = python(&self.dst, &script)?;
        let mut result = Vec::with_capacity(flows);
        for line in out.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() == 3 {
                result.push((f[1].parse()?, f[2].parse()?));
            }
        }
        anyhow::ensure!(
            result.len() == flows,
            "flow capture printed {} of {flows} flows",
            result.len()
        );
        Ok(result)
    }

    /// An ARN of `arn_type` (draft format, Path ID parameter) sent with `ttl` by the
    /// neighbor behind sink interface `iface` (10.1.1.2) to the switch's address there
    /// (10.1.1.1).
    pub fn inject_arn(&self, iface: &str, arn_type: u8, path_id: Ipv4Addr, ttl: u8) -> Result<()> {
        let p = path_id.octets();
        let arn = [arn_type, 0x00, 10, 0x40, p[0], p[1], p[2], p[3]];
        self.send_arn(iface, "10.1.1.1", ttl, &arn)
    }

    /// `arn` (the UDP payload, as given: malformed ones too) from 10.1.1.2 behind sink
    /// interface `iface` to `dst`, UDP 9961, DSCP CS6, `ttl`.
    pub fn send_arn(&self, iface: &str, dst: &str, ttl: u8, arn: &[u8]) -> Result<()> {
        let bytes: Vec<String> = arn.iter().map(|b| b.to_string()).collect();
        let script = format!(
            "from scapy.all import Ether, IP, UDP, Raw, sendp\n\
             arn = bytes([{}])\n\
             sendp(Ether(dst='02:fa:00:00:00:fe')/IP(src='10.1.1.2', dst='{dst}', ttl={ttl}, tos=0xc0)/\
             UDP(sport=9961, dport=9961)/Raw(arn), iface='{iface}', verbose=False)\n",
            bytes.join(", ")
        );
        python(&self.dst, &script).map(|_| ())
    }

    /// Packets per sink interface since `before`, once `total` more have arrived or
    /// `timeout` has passed.
    pub fn sink_delta_after(&self, before: &[u64], total: u64, timeout: Duration) -> Vec<u64> {
        let mut last = before.to_vec();
        wait_until(timeout, || {
            if let Ok(now) = self.sink_counts() {
                last = now;
            }
            delta(&last, before).iter().sum::<u64>() >= total
        });
        delta(&last, before)
    }
}

/// A member on switch port `port` (interface `p<port>`, next hop 10.1.<port>.2, neighbor
/// MAC 02:00:00:00:00:<port>).
pub fn member(port: u32, weight: u32, bandwidth_gbps: f64) -> Member {
    Member {
        via: format!("10.1.{port}.2"),
        interface: format!("p{port}"),
        next_hop: None,
        neighbor_mac: Some(MacAddr([0x02, 0, 0, 0, 0, port as u8])),
        weight,
        bandwidth_gbps,
    }
}

/// Members on ports 1..N with `weights`, each member's bandwidth `bandwidth_gbps(weight)`.
pub fn members(weights: &[u32], bandwidth_gbps: impl Fn(u32) -> f64) -> Vec<Member> {
    (1..)
        .zip(weights)
        .map(|(port, w)| member(port, *w, bandwidth_gbps(*w)))
        .collect()
}

/// Runs a python3 snippet (scapy) inside `ns`. Debian's interpreter, which sees the
/// apt-installed python3-scapy (a python3 earlier on PATH may not).
pub fn python(ns: &Netns, script: &str) -> Result<String> {
    let out = run(
        "ip",
        &["netns", "exec", &ns.name, "/usr/bin/python3", "-c", script],
    )?;
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// The Python virtualenv with the PyPI `p4runtime` package (scripts/setup makes it).
pub fn p4runtime_venv() -> PathBuf {
    std::env::var_os("FARE_P4RT_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/fare/p4rt-venv"))
}

/// True when the venv's python imports the p4runtime bindings; prints SKIPPED otherwise.
pub fn have_p4runtime_python(test: &str) -> bool {
    let py = p4runtime_venv().join("bin/python3");
    let ok = Command::new(&py)
        .args(["-c", "import p4.v1.p4runtime_pb2, p4.v1.p4runtime_pb2_grpc"])
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        crate::skip(
            test,
            &format!(
                "PyPI p4runtime not importable from {} (run scripts/setup)",
                py.display()
            ),
        );
    }
    ok
}
