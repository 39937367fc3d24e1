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

use crate::{veth, Netns};
use anyhow::{Context, Result};
use fare::dataplane::{Group, GroupMode, MacAddr, Member};
use std::path::PathBuf;

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
    pub fn new(tag: &str) -> Result<XdpLab> {
        let gen = Netns::new(&format!("{tag}g"))?;
        let router = Netns::new(&format!("{tag}r"))?;
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

    pub fn pin_dir(&self) -> PathBuf {
        PathBuf::from(fare::dataplane::xdp::pins::DEFAULT_ROOT).join(&self.node)
    }
}

impl Drop for XdpLab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.pin_dir());
    }
}

/// True when this build embeds the XDP program; otherwise prints SKIPPED (when
/// bpf-linker is absent) — with bpf-linker present a missing object is a failure.
pub fn have_xdp(test: &str) -> bool {
    if fare::dataplane::xdp::embedded() {
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
    eprintln!("SKIPPED {test}: built without the XDP program (run scripts/setup)");
    false
}
