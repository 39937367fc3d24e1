//! The kernel backend's `flow` groups as Linux resilient nexthop groups, in namespaces:
//!
//! ```text
//!  src (10.0.0.1) ── r0 [rt: KernelDataplane] ─ r1..r4 ── k1..k4 (198.18.0.1 each)
//! ```
//! A weight change replaces the group in place (same group id, the staying members keep
//! their nexthop ids) and moves only the buckets the kernel must: checked against the
//! bucket dumps of `ip -j nexthop bucket show` before and after, with the least possible
//! share (total-variation distance, computed here) plus one bucket per member for the
//! rounding. A ping runs through every change: no packet meets a missing group.
//! Traffic goes only to addresses of these namespaces.

use anyhow::{ensure, Context, Result};
use fare::dataplane::{Dataplane, Group, GroupMode, Member};
use fare::dp_kernel::{KernelDataplane, KERNEL_BUCKETS};
use fare_integration::{have_root, have_tool, inns, veth, Netns};
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};

const PREFIX: &str = "198.18.0.0/16";

struct Lab {
    src: Netns,
    rt: Netns,
    _peers: Vec<Netns>,
}

fn lab() -> Result<Lab> {
    let src = Netns::new("kres-src")?;
    let rt = Netns::new("kres-rt")?;
    veth(&src, "s0", &rt, "r0")?;
    src.sh("ip addr add 10.0.0.1/24 dev s0 && ip route add default via 10.0.0.2")?;
    rt.sh(
        "ip addr add 10.0.0.2/24 dev r0 && sysctl -qw net.ipv4.ip_forward=1 && \
         sysctl -qw net.ipv4.fib_multipath_hash_policy=1",
    )?;
    let mut peers = Vec::new();
    for i in 1..=4 {
        let k = Netns::new(&format!("kres-k{i}"))?;
        veth(&rt, &format!("r{i}"), &k, &format!("k{i}"))?;
        rt.sh(&format!("ip addr add 10.1.{i}.1/24 dev r{i}"))?;
        k.sh(&format!(
            "ip addr add 10.1.{i}.2/24 dev k{i} && ip addr add 198.18.0.1/32 dev lo && \
             ip route add default via 10.1.{i}.1"
        ))?;
        peers.push(k);
    }
    Ok(Lab {
        src,
        rt,
        _peers: peers,
    })
}

fn group(weights: &[u32], mode: GroupMode) -> Group {
    Group {
        prefix: PREFIX.parse().expect("prefix"),
        mode,
        members: weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| Member {
                via: format!("10.1.{}.2", i + 1),
                interface: format!("r{}", i + 1),
                next_hop: Some(format!("10.1.{}.2", i + 1).parse().expect("address")),
                neighbor_mac: None,
                weight,
                bandwidth_gbps: 0.0,
            })
            .collect(),
    }
}

fn json(ns: &Netns, args: &[&str]) -> Result<serde_json::Value> {
    let out = ns.exec("ip", args)?;
    serde_json::from_slice(&out.stdout).with_context(|| format!("ip {args:?}"))
}

/// The route's group id.
fn route_nhid(ns: &Netns) -> Result<u64> {
    let r = json(ns, &["-j", "route", "show", PREFIX])?;
    r[0]["nhid"].as_u64().context("route without nhid")
}

/// The group's type and (gateway -> nexthop id) of its members.
fn group_info(ns: &Netns, id: u64) -> Result<(String, BTreeMap<String, u64>)> {
    let all = json(ns, &["-j", "nexthop", "show"])?;
    let list = all.as_array().context("nexthop list")?;
    let g = list
        .iter()
        .find(|n| n["id"].as_u64() == Some(id))
        .context("group gone")?;
    let kind = g["type"].as_str().unwrap_or("mpath").to_string();
    let mut members = BTreeMap::new();
    for e in g["group"].as_array().context("not a group")? {
        let nid = e["id"].as_u64().context("entry id")?;
        let nh = list
            .iter()
            .find(|n| n["id"].as_u64() == Some(nid))
            .context("member nexthop")?;
        members.insert(nh["gateway"].as_str().unwrap_or("").to_string(), nid);
    }
    Ok((kind, members))
}

/// Bucket index -> nexthop id, from the kernel's dump.
fn buckets(ns: &Netns, id: u64) -> Result<Vec<u64>> {
    table_of(&json(
        ns,
        &["-j", "nexthop", "bucket", "show", "id", &id.to_string()],
    )?)
}

/// Bucket index -> nexthop id of a bucket dump.
fn table_of(dump: &serde_json::Value) -> Result<Vec<u64>> {
    let mut table = vec![0; usize::from(KERNEL_BUCKETS)];
    for b in dump.as_array().context("bucket dump")? {
        let i = b["bucket"]["index"].as_u64().context("index")? as usize;
        *table.get_mut(i).context("bucket index")? =
            b["bucket"]["nhid"].as_u64().context("nhid")?;
    }
    Ok(table)
}

/// The least share any scheme must move from `a` to `b` (total-variation distance).
fn least_share(a: &[u32], b: &[u32]) -> f64 {
    let (sa, sb) = (a.iter().sum::<u32>() as f64, b.iter().sum::<u32>() as f64);
    (0..a.len().max(b.len()))
        .map(|i| {
            let x = a.get(i).map_or(0.0, |&w| w as f64 / sa);
            let y = b.get(i).map_or(0.0, |&w| w as f64 / sb);
            (x - y).abs()
        })
        .sum::<f64>()
        / 2.0
}

/// A ping of `count` packets 10 ms apart from src, started now.
fn ping(src: &Netns, count: u32) -> Result<Child> {
    Ok(Command::new("ip")
        .args([
            "netns", "exec", &src.name, "ping", "-q", "-n", "-i", "0.01", "-W", "1",
        ])
        .args(["-c", &count.to_string(), "198.18.0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?)
}

fn ping_lost(child: Child) -> Result<String> {
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    Ok(text
        .lines()
        .find(|l| l.contains("packet loss"))
        .unwrap_or("no summary")
        .to_string())
}

/// Installs `g` through the backend in the router's namespace.
fn with_dp<T: Send + 'static>(
    rt: &Netns,
    f: impl FnOnce(KernelDataplane) -> futures::future::BoxFuture<'static, Result<T>> + Send + 'static,
) -> Result<T> {
    inns::spawn_async(&rt.name, move || async move {
        let dp = KernelDataplane::open(&[]).await?;
        f(dp).await
    })
    .join()
    .map_err(|_| anyhow::anyhow!("netns thread panicked"))?
}

#[test]
fn kernel_resilient_groups_move_only_what_the_weights_require() -> Result<()> {
    let test = "kernel_resilient_groups_move_only_what_the_weights_require";
    if !have_root(test) || !have_tool(test, "ping") {
        return Ok(());
    }
    let lab = lab()?;
    let b = f64::from(KERNEL_BUCKETS);
    with_dp(&lab.rt, |mut dp| {
        Box::pin(async move {
            dp.install(&group(&[3, 3, 4, 4], GroupMode::Flow)).await?;
            Ok(())
        })
    })?;
    let id = route_nhid(&lab.rt)?;
    let (kind, members) = group_info(&lab.rt, id)?;
    ensure!(kind == "resilient", "group type {kind}");
    let table = buckets(&lab.rt, id)?;
    // Each member's buckets are within one of its share of 512 (3:3:4:4 -> 109.7, 146.3).
    for (gw, w) in [("10.1.1.2", 3.0), ("10.1.4.2", 4.0)] {
        let n = table.iter().filter(|&&x| x == members[gw]).count() as f64;
        ensure!((n - w / 14.0 * b).abs() <= 1.0, "{gw}: {n} buckets");
    }

    // Each change: (weights before, after), applied by a fresh backend that adopts the
    // group (as a restarted agent would), with a ping through it.
    let cases: [(&[u32], &[u32]); 4] = [
        (&[3, 3, 4, 4], &[3, 3, 4, 3]),
        (&[3, 3, 4, 3], &[1, 1, 1, 1]),
        (&[1, 1, 1, 1], &[4, 4, 4, 1]),
        (&[4, 4, 4, 1], &[3, 4, 4, 4]),
    ];
    for (from, to) in cases {
        let before = buckets(&lab.rt, id)?;
        let pinger = ping(&lab.src, 100)?;
        std::thread::sleep(std::time::Duration::from_millis(200));
        let want = group(to, GroupMode::Flow);
        let (status, _) = with_dp(&lab.rt, move |mut dp| {
            Box::pin(async move {
                // Adopted first (the same weights: nothing moves), then the change.
                dp.install(&want).await?;
                let g = dp.groups().await?;
                Ok((g.into_iter().next().and_then(|s| s.buckets), ()))
            })
        })?;
        let lost = ping_lost(pinger)?;
        ensure!(
            lost.contains(" 0% packet loss"),
            "{from:?} -> {to:?}: {lost}"
        );
        ensure!(
            route_nhid(&lab.rt)? == id,
            "the group was not replaced in place"
        );
        let (kind, now) = group_info(&lab.rt, id)?;
        ensure!(
            kind == "resilient" && now == members,
            "members renumbered: {now:?}"
        );
        let after = buckets(&lab.rt, id)?;
        let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        let least = least_share(from, to) * b;
        println!("kernel_resilient: {from:?} -> {to:?}: {moved} buckets moved, least {least:.1}");
        ensure!(
            moved as f64 <= least.ceil() + 4.0,
            "{from:?} -> {to:?}: {moved} moved, least {least:.1}"
        );
        // The agent's record is the kernel's dump.
        let status = status.context("no bucket status")?;
        ensure!(status.assigned_by == "kernel" && status.size == u32::from(KERNEL_BUCKETS));
        ensure!(status.moved == Some(moved as u32), "{status:?} vs {moved}");
        let per: Vec<u32> = ["10.1.1.2", "10.1.2.2", "10.1.3.2", "10.1.4.2"]
            .iter()
            .map(|gw| after.iter().filter(|&&x| x == members[*gw]).count() as u32)
            .collect();
        ensure!(status.per_member == per, "{status:?} vs {per:?}");
    }

    // A member taken out: exactly its buckets move, to the others; back in, it takes
    // buckets only from members above their share.
    let before = buckets(&lab.rt, id)?;
    let out_id = members["10.1.2.2"];
    let theirs = before.iter().filter(|&&x| x == out_id).count();
    let pinger = ping(&lab.src, 100)?;
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (status, after) = with_dp(&lab.rt, move |mut dp| {
        Box::pin(async move {
            dp.install(&group(&[3, 4, 4, 4], GroupMode::Flow)).await?;
            dp.set_member_active(PREFIX.parse()?, 1, false).await?;
            let g = dp.groups().await?;
            // This thread is in the router's namespace: so is the `ip` it runs.
            let out = Command::new("ip")
                .args(["-j", "nexthop", "bucket", "show", "id", &id.to_string()])
                .output()?;
            let after = table_of(&serde_json::from_slice(&out.stdout)?)?;
            // Then a member leaves the group (the same backend: it knows the member out).
            dp.install(&group(&[3, 4, 4], GroupMode::Flow)).await?;
            Ok((g.into_iter().next().and_then(|s| s.buckets), after))
        })
    })?;
    let lost = ping_lost(pinger)?;
    ensure!(lost.contains(" 0% packet loss"), "member out: {lost}");
    let moved: Vec<usize> = (0..before.len())
        .filter(|&i| before[i] != after[i])
        .collect();
    ensure!(moved.len() == theirs && moved.iter().all(|&i| before[i] == out_id));
    ensure!(status.and_then(|s| s.moved) == Some(theirs as u32));
    ensure!(route_nhid(&lab.rt)? == id);

    // The member that left: its nexthop object is gone, the group stayed in place.
    ensure!(route_nhid(&lab.rt)? == id);
    let (_, now) = group_info(&lab.rt, id)?;
    ensure!(now.len() == 3 && !now.contains_key("10.1.4.2"), "{now:?}");
    let all = json(&lab.rt, &["-j", "nexthop", "show"])?;
    ensure!(
        all.as_array().map(Vec::len) == Some(4),
        "stale nexthop objects: {all}"
    );

    // Spray: a hash-threshold group under a new id (make-before-break), no buckets.
    let status = with_dp(&lab.rt, |mut dp| {
        Box::pin(async move {
            dp.install(&group(&[3, 4, 4], GroupMode::Spray)).await?;
            let g = dp.groups().await?;
            Ok(g.into_iter().next().map(|s| s.buckets))
        })
    })?;
    let new_id = route_nhid(&lab.rt)?;
    ensure!(new_id != id && group_info(&lab.rt, new_id)?.0 == "mpath");
    ensure!(status == Some(None), "{status:?}");
    Ok(())
}
