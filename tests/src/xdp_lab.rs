//! The XDP test bench: a router namespace with one ingress veth (from a generator
//! namespace) and four egress veths, each to its own sink namespace.
//!
//! ```text
//! gen:g0 ── r0:router:e1 ── s0:sink1     MACs: g0 02:00:00:00:10:01, r0 02:00:00:00:20:00,
//!                    :e2 ── s0:sink2           eN 02:00:00:00:20:0N, sinkN s0 02:00:00:00:00:0N
//!                    :e3 ── s0:sink3
//!                    :e4 ── s0:sink4
//! ```
//! Sinks have GRO on so that their veth accepts redirected frames (veth needs NAPI on
//! the receiving side). The lab's pin directory is removed on drop.

use crate::packets::RawSender;
use crate::{inns, veth, Netns};
use anyhow::{Context, Result};
use fare::dataplane::{Group, GroupMode, MacAddr, Member};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const GEN_MAC: [u8; 6] = [2, 0, 0, 0, 0x10, 1];
pub const ROUTER_MAC: [u8; 6] = [2, 0, 0, 0, 0x20, 0];

pub fn egress_mac(i: usize) -> [u8; 6] {
    [2, 0, 0, 0, 0x20, i as u8]
}

pub fn sink_mac(i: usize) -> [u8; 6] {
    [2, 0, 0, 0, 0, i as u8]
}

pub struct XdpLab {
    pub gen: Netns,
    pub router: Netns,
    pub sinks: Vec<Netns>,
    /// Pin directory name (unique per lab).
    pub node: String,
}

fn mac_str(m: [u8; 6]) -> String {
    MacAddr(m).to_string()
}

/// A group over e1..eN toward the sinks with the given weights.
pub fn group(prefix: &str, weights: &[u32], mode: GroupMode) -> Result<Group> {
    Ok(Group {
        prefix: prefix.parse()?,
        mode,
        members: weights
            .iter()
            .enumerate()
            .map(|(i, &w)| Member {
                via: mac_str(sink_mac(i + 1)),
                interface: format!("e{}", i + 1),
                next_hop: None,
                neighbor_mac: Some(MacAddr(sink_mac(i + 1))),
                weight: w,
                bandwidth_gbps: 0.0,
            })
            .collect(),
    })
}

impl XdpLab {
    /// The bench for `test`, tagged `tag`; `None` (the skip printed) without root,
    /// ethtool or the XDP program.
    pub fn for_test(test: &str, tag: &str) -> Result<Option<XdpLab>> {
        if !xdp_ready(test) {
            return Ok(None);
        }
        XdpLab::new(tag).map(Some)
    }

    pub fn new(tag: &str) -> Result<XdpLab> {
        let gen = Netns::new(&format!("{tag}g"))?;
        let router = Netns::new(&format!("{tag}r"))?;
        // No IPv6 chatter (router solicitations, MLD) from the router into the sinks,
        // so that sink counters count only forwarded frames.
        router.sh(
            "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1",
        )?;
        let mut sinks = Vec::new();
        for i in 1..=4 {
            sinks.push(Netns::new(&format!("{tag}s{i}"))?);
        }
        veth(&gen, "g0", &router, "r0")?;
        gen.exec("ip", &["link", "set", "g0", "address", &mac_str(GEN_MAC)])?;
        router.exec(
            "ip",
            &["link", "set", "r0", "address", &mac_str(ROUTER_MAC)],
        )?;
        for (i, sink) in sinks.iter().enumerate() {
            let n = i + 1;
            let e = format!("e{n}");
            veth(&router, &e, sink, "s0")?;
            router.exec(
                "ip",
                &["link", "set", &e, "address", &mac_str(egress_mac(n))],
            )?;
            sink.exec(
                "ip",
                &["link", "set", "s0", "address", &mac_str(sink_mac(n))],
            )?;
            sink.exec("ethtool", &["-K", "s0", "gro", "on"])
                .context("enabling GRO on a sink veth (needed to receive redirected frames)")?;
        }
        // Addresses only for the kernel path: TTL-expired packets go to the kernel, which
        // answers the generator with ICMP time exceeded.
        gen.exec("ip", &["addr", "add", "10.0.0.1/24", "dev", "g0"])?;
        router.exec("ip", &["addr", "add", "10.0.0.254/24", "dev", "r0"])?;
        router.exec("ip", &["addr", "add", "10.1.1.254/24", "dev", "e1"])?;
        router.exec(
            "ip",
            &[
                "route",
                "add",
                "198.18.0.0/15",
                "via",
                "10.1.1.1",
                "dev",
                "e1",
                "onlink",
            ],
        )?;
        router.sh("sysctl -qw net.ipv4.ip_forward=1 net.ipv4.icmp_ratelimit=0")?;
        let node = router.name.clone();
        Ok(XdpLab {
            gen,
            router,
            sinks,
            node,
        })
    }

    /// Packets received so far by each sink (its veth's rx counter).
    pub fn sink_rx(&self) -> Result<Vec<u64>> {
        self.sinks
            .iter()
            .map(|s| {
                let out = s.exec("cat", &["/sys/class/net/s0/statistics/rx_packets"])?;
                Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
            })
            .collect()
    }

    /// ICMP time-exceeded messages the generator has received.
    pub fn gen_icmp_time_exceeded(&self) -> Result<u64> {
        let out = self.gen.exec("cat", &["/proc/net/snmp"])?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines().filter(|l| l.starts_with("Icmp:"));
        let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
            anyhow::bail!("no Icmp lines in /proc/net/snmp");
        };
        let at = names
            .split_whitespace()
            .position(|n| n == "InTimeExcds")
            .context("no InTimeExcds")?;
        Ok(values
            .split_whitespace()
            .nth(at)
            .context("short Icmp line")?
            .parse()?)
    }

    /// Sends frames from the generator namespace on g0, pinned to `cpu`, until `count`
    /// frames are sent or `stop` is set (bounded by `limit`); returns how many were sent.
    pub fn spawn_sender(
        &self,
        cpu: usize,
        count: u64,
        stop: Arc<AtomicBool>,
        limit: Duration,
        frame: impl Fn(u64) -> Vec<u8> + Send + 'static,
    ) -> JoinHandle<Result<u64>> {
        let ns = self.gen.name.clone();
        std::thread::spawn(move || {
            inns::enter(&ns)?;
            inns::pin_to_cpu(cpu)?;
            let tx = RawSender::new("g0")?;
            let start = Instant::now();
            let mut sent = 0;
            while sent < count && !stop.load(Ordering::Relaxed) && start.elapsed() < limit {
                tx.send(&frame(sent))?;
                sent += 1;
            }
            Ok(sent)
        })
    }

    pub fn pin_dir(&self) -> PathBuf {
        PathBuf::from(fare::dp_xdp::pins::DEFAULT_ROOT).join(&self.node)
    }
}

/// Frame `i` of a stream from the generator to 198.18.(i/256).(i%256), UDP 4791 (RoCEv2),
/// source port 1024 + i mod 60000: every frame its own flow.
pub fn stream_frame(i: u64) -> Vec<u8> {
    crate::packets::udp4_frame(
        ROUTER_MAC,
        GEN_MAC,
        std::net::Ipv4Addr::new(10, 0, 0, 1),
        std::net::Ipv4Addr::new(198, 18, (i >> 8) as u8, i as u8),
        1024 + (i % 60_000) as u16,
        4791,
        64,
    )
}

impl XdpLab {
    /// Waits (up to 5 s) until the sinks counted `count` more frames than `before`;
    /// returns the per-sink differences.
    pub fn arrived(&self, before: &[u64], count: u64) -> Vec<u64> {
        let mut now = before.to_vec();
        crate::wait_until(Duration::from_secs(5), || {
            now = self.sink_rx().unwrap_or_default();
            crate::delta(&now, before).iter().sum::<u64>() >= count
        });
        crate::delta(&now, before)
    }

    /// Sends `count` frames of `stream_frame` from CPU 0 and returns what each sink
    /// received meanwhile.
    pub fn send_stream(&self, count: u64) -> Result<Vec<u64>> {
        let before = self.sink_rx()?;
        let stop = Arc::new(AtomicBool::new(false));
        let sent = self
            .spawn_sender(0, count, stop, Duration::from_secs(60), stream_frame)
            .join()
            .map_err(|_| anyhow::anyhow!("sender panicked"))??;
        anyhow::ensure!(sent == count, "sent {sent} of {count}");
        Ok(self.arrived(&before, count))
    }

    /// Writes `agent.yaml` in `dir`: an agent on this lab's router (XDP on r0, socket
    /// `socket`) with a static spray group 198.18.0.0/16 over e1..eN, `members` giving
    /// each one's weight and, when set, bandwidth.
    pub fn agent_config(
        &self,
        dir: &crate::agent::TempDir,
        socket: &std::path::Path,
        members: &[(u64, Option<f64>)],
    ) -> Result<PathBuf> {
        let members: String = (1..)
            .zip(members)
            .map(|(i, (w, gbps))| {
                let bandwidth = gbps
                    .map(|b| format!(", bandwidth_gbps: {b}"))
                    .unwrap_or_default();
                format!(
                    "      - {{interface: e{i}, neighbor_mac: \"{}\", weight: {w}{bandwidth}}}\n",
                    MacAddr(sink_mac(i)),
                )
            })
            .collect();
        dir.write(
            "agent.yaml",
            &format!(
                "name: {}\nrouter_id: 10.0.0.254\nasn: 65001\nmanagement: {{socket: {}}}\n\
                 dataplane: {{kind: xdp, interfaces: [r0]}}\nstatic:\n  - prefix: 198.18.0.0/16\n    \
                 mode: spray\n    members:\n{members}",
                self.node,
                socket.display()
            ),
        )
    }

    /// Runs `f` in the router namespace with a data plane opened there (options from
    /// `configure`) and a current-thread runtime; the data plane is destroyed afterwards,
    /// also when `f` fails.
    pub fn with_dataplane<T: Send>(
        &self,
        configure: impl FnOnce(&mut fare::dp_xdp::XdpOptions) + Send,
        f: impl FnOnce(&tokio::runtime::Runtime, &mut fare::dp_xdp::XdpDataplane) -> Result<T> + Send,
    ) -> Result<T> {
        let node = self.node.clone();
        crate::inns::run(&self.router.name, move || -> Result<T> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let _enter = rt.enter();
            let mut opts = fare::dp_xdp::XdpOptions::new(node, vec![]);
            configure(&mut opts);
            let mut dp = fare::dp_xdp::XdpDataplane::open(&opts)?;
            let result = f(&rt, &mut dp);
            dp.destroy()?;
            result
        })
    }
}

impl Drop for XdpLab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.pin_dir());
    }
}

/// True when this build embeds the XDP program; otherwise prints SKIPPED (when
/// bpf-linker is absent) — with bpf-linker present a missing object is a failure.
/// True with root, ethtool and the XDP program (the bench's needs); prints SKIPPED otherwise.
pub fn xdp_ready(test: &str) -> bool {
    crate::have_root(test) && crate::have_tool(test, "ethtool") && have_xdp(test)
}

pub fn have_xdp(test: &str) -> bool {
    if fare::dp_xdp::embedded() {
        return true;
    }
    let linker = std::process::Command::new("sh")
        .args([
            "-c",
            "command -v bpf-linker || test -x \"$HOME/.cargo/bin/bpf-linker\"",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        !linker,
        "bpf-linker is installed but this build has no XDP program: rebuild"
    );
    crate::skip(test, "built without the XDP program (run scripts/setup)");
    false
}
