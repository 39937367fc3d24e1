//! fare.p4's flow mode as a resilient bucket table, on BMv2 programmed by fare's P4Runtime
//! backend: every flow leaves on the member its bucket names, and a weight change moves
//! exactly the flows whose buckets the model's assignment (`fare_model::resilient`)
//! re-assigns from the table installed before.
//!
//! Oracle per flow: the sinks capture which port each flow (one UDP packet per source
//! port) arrives on; the expected port is computed from the flow's 5-tuple CRC32 (zlib's,
//! not the switch's), bucket `(h * 256) >> 32`, and the model's table. Skipped (printed)
//! without root, BMv2 or the compiled program.

use anyhow::{bail, ensure, Context, Result};
use fare::dataplane::{Dataplane, Group, GroupMode};
use fare::dp_p4::P4RuntimeDataplane;
use fare::resilient;
use fare_integration::p4::{in_netns, members, Fabric};
use std::time::Duration;

const PREFIX: &str = "198.20.0.0/16";
const DST: &str = "198.20.1.1";
const FLOWS: usize = 400;
/// fare.p4's FLOW_BUCKETS.
const BUCKETS: usize = 256;

fn group(weights: &[u32]) -> Group {
    Group {
        prefix: PREFIX.parse().expect("test prefix"),
        mode: GroupMode::Flow,
        members: members(weights, |w| f64::from(w) * 25.0),
    }
}

/// The bucket of a flow hash, as fare.p4 computes it.
fn bucket(hash: u32) -> usize {
    ((u64::from(hash) * BUCKETS as u64) >> 32) as usize
}

/// Each flow's expected sink port (member i is on port i + 1) under `table`.
fn expected(flows: &[(u32, u32)], table: &[usize]) -> Vec<u32> {
    flows
        .iter()
        .map(|(h, _)| table[bucket(*h)] as u32 + 1)
        .collect()
}

/// fare's P4Runtime backend on its own thread in the switch's namespace: it installs
/// the group of each weight list it is sent, in `mode` (flowlets with `gap`).
struct Client {
    to_client: std::sync::mpsc::Sender<Vec<u32>>,
    from_client: std::sync::mpsc::Receiver<Result<()>>,
    thread: std::thread::JoinHandle<Result<()>>,
}

impl Client {
    fn start(fabric: &Fabric, mode: GroupMode, gap: Option<Duration>) -> Client {
        let sw = fabric.bmv2.sw.name.clone();
        let opts = fabric.options(10);
        let (to_client, from_test) = std::sync::mpsc::channel::<Vec<u32>>();
        let (to_test, from_client) = std::sync::mpsc::channel::<Result<()>>();
        let thread = std::thread::spawn(move || {
            in_netns(&sw, move || async move {
                let mut dp = P4RuntimeDataplane::connect(opts).await?;
                if let Some(gap) = gap {
                    dp.set_flowlet_gap(gap);
                }
                while let Ok(weights) = from_test.recv() {
                    let g = Group {
                        mode,
                        ..group(&weights)
                    };
                    let r = dp.install(&g).await.map_err(Into::into);
                    if to_test.send(r).is_err() {
                        break;
                    }
                }
                Ok(())
            })
        });
        Client {
            to_client,
            from_client,
            thread,
        }
    }

    /// Installs the group of `weights` and waits for the backend's answer.
    fn install(&self, weights: &[u32]) -> Result<()> {
        self.to_client
            .send(weights.to_vec())
            .context("client thread gone")?;
        self.from_client
            .recv_timeout(Duration::from_secs(60))
            .context("install: no answer")?
    }

    /// Ends the client; its error, if it had one.
    fn stop(self) -> Result<()> {
        drop(self.to_client);
        match self.thread.join() {
            Ok(r) => r,
            Err(_) => bail!("client thread panicked"),
        }
    }
}

#[test]
fn p4_bmv2_resilient_flow_buckets() -> Result<()> {
    let Some(fabric) = Fabric::for_test("p4_bmv2_resilient_flow_buckets", "p4c", 4)? else {
        return Ok(());
    };
    let client = Client::start(&fabric, GroupMode::Flow, None);
    let install = |weights: &[u32]| client.install(weights);

    // A fresh group: the table is the model's fresh table.
    let w0 = [3u32, 3, 4, 4];
    install(&w0)?;
    let mut table = resilient::fresh(&w0, BUCKETS);
    let before = fabric.flow_ports(DST, FLOWS)?;
    let want = expected(&before, &table);
    let got: Vec<u32> = before.iter().map(|f| f.1).collect();
    let wrong = got.iter().zip(&want).filter(|(g, w)| g != w).count();
    ensure!(
        wrong == 0,
        "fresh 3:3:4:4: {wrong} of {FLOWS} flows not on their bucket's member"
    );

    // Weight changes, each from the table installed before (the backend keeps it): one
    // lane lost behind a spine, a member gone (port 4 leaves the group), and back to 4.
    let mut last = w0.to_vec();
    let mut previous = got;
    for w in [vec![3u32, 3, 4, 3], vec![7, 8, 8], vec![1, 1, 1, 1]] {
        install(&w)?;
        // The installed table in the new numbering: members keep their port.
        let prev: Vec<usize> = table
            .iter()
            .map(|&m| if m < w.len() { m } else { usize::MAX })
            .collect();
        let a = resilient::reassign(Some(&prev), &w, BUCKETS);
        let flows = fabric.flow_ports(DST, FLOWS)?;
        let want = expected(&flows, &a.table);
        let got: Vec<u32> = flows.iter().map(|f| f.1).collect();
        let wrong = got.iter().zip(&want).filter(|(g, w)| g != w).count();
        let moved = got.iter().zip(&previous).filter(|(g, p)| g != p).count();
        let must = want.iter().zip(&previous).filter(|(g, p)| g != p).count();
        let tv = resilient::tv_distance(&last, &w);
        eprintln!(
            "{last:?} -> {w:?}: {moved} of {FLOWS} flows moved ({:.1} %), the model's \
             table moves {must}, {} buckets of {BUCKETS}; least possible {:.1} %",
            100.0 * moved as f64 / FLOWS as f64,
            a.moved,
            100.0 * tv
        );
        ensure!(
            wrong == 0,
            "{last:?} -> {w:?}: {wrong} of {FLOWS} flows not on their bucket's member"
        );
        table = a.table;
        last = w;
        previous = got;
    }
    client.stop()
}

/// Flowlet mode: a flow keeps its member while its packets come closer than the gap,
/// through a weight change and even when its bucket moved; a flowlet whose member left
/// the group re-picks at once (no loss); after a pause longer than the gap every flow
/// takes its bucket's member in the table in force.
#[test]
fn p4_bmv2_flowlet_keeps_members_within_the_gap() -> Result<()> {
    let Some(fabric) = Fabric::for_test("p4_bmv2_flowlet_keeps_members_within_the_gap", "p4f", 4)?
    else {
        return Ok(());
    };
    // Longer than one capture round (python and scapy start in namespaces on a loaded
    // machine take seconds), so consecutive rounds are one flowlet.
    let gap = Duration::from_secs(25);
    let client = Client::start(&fabric, GroupMode::Flowlet, Some(gap));
    let install = |weights: &[u32]| client.install(weights);
    let flows = 200;

    install(&[1, 1, 1, 1])?;
    let t0 = resilient::fresh(&[1, 1, 1, 1], BUCKETS);
    let first = fabric.flow_ports(DST, flows)?;
    // Flows that share a flowlet slot (CRC32 of flow hash and group id 1, the first
    // group's) share a flowlet: they are left out of the comparisons.
    let slots: Vec<u32> = first.iter().map(|f| flowlet_slot(f.0, 1)).collect();
    let alone: Vec<bool> = slots
        .iter()
        .map(|s| slots.iter().filter(|x| *x == s).count() == 1)
        .collect();
    let ports = |flows: &[(u32, u32)]| {
        flows
            .iter()
            .zip(&alone)
            .map(|(f, a)| if *a { f.1 } else { u32::MAX })
            .collect::<Vec<u32>>()
    };
    let expected = |flows: &[(u32, u32)], table: &[usize]| {
        expected(flows, table)
            .into_iter()
            .zip(&alone)
            .map(|(p, a)| if *a { p } else { u32::MAX })
            .collect::<Vec<u32>>()
    };
    let p0 = ports(&first);
    ensure!(
        p0 == expected(&first, &t0),
        "new flowlets not on their bucket's member"
    );

    // Within the gap: 1:1:1:1 -> 1:1:1:4 moves buckets, no flow moves.
    let started = std::time::Instant::now();
    install(&[1, 1, 1, 4])?;
    let t1 = resilient::reassign(Some(&t0), &[1, 1, 1, 4], BUCKETS).table;
    let second = fabric.flow_ports(DST, flows)?;
    ensure!(
        started.elapsed() < gap,
        "the round took longer than the gap"
    );
    let bucket_moved = expected(&second, &t1)
        .iter()
        .zip(&p0)
        .filter(|(a, b)| a != b)
        .count();
    ensure!(
        bucket_moved > 0,
        "the change moved no flow's bucket: nothing tested"
    );
    let kept = ports(&second);
    ensure!(
        kept == p0,
        "{} flows left their member within the gap ({bucket_moved} buckets moved)",
        kept.iter().zip(&p0).filter(|(a, b)| a != b).count()
    );

    // Port 4 leaves within the gap: its flowlets re-pick (the new table's member), the
    // others stay; none is lost.
    let started = std::time::Instant::now();
    install(&[1, 1, 1])?;
    let prev: Vec<usize> = t1
        .iter()
        .map(|&m| if m < 3 { m } else { usize::MAX })
        .collect();
    let t2 = resilient::reassign(Some(&prev), &[1, 1, 1], BUCKETS).table;
    let third = fabric.flow_ports(DST, flows)?;
    ensure!(
        started.elapsed() < gap,
        "the round took longer than the gap"
    );
    let want: Vec<u32> = expected(&third, &t2)
        .iter()
        .zip(&p0)
        .map(|(new, old)| if *old == 4 { *new } else { *old })
        .collect();
    ensure!(
        !third.iter().any(|f| f.1 == 0),
        "flows lost when their member left"
    );
    let got = ports(&third);
    ensure!(got == want, "after port 4 left: {:?}", diff(&got, &want));

    // A pause longer than the gap: every flow takes its bucket's member.
    std::thread::sleep(gap + Duration::from_secs(1));
    let fourth = fabric.flow_ports(DST, flows)?;
    let got = ports(&fourth);
    let want = expected(&fourth, &t2);
    ensure!(got == want, "after the gap: {:?}", diff(&got, &want));
    eprintln!(
        "flowlet: {flows} flows kept their member through a change that moved \
         {bucket_moved} of their buckets; after the gap {} moved",
        got.iter().zip(&p0).filter(|(a, b)| a != b).count()
    );
    client.stop()
}

/// (flow, got, wanted) of the flows that differ, for the failure message.
fn diff(got: &[u32], want: &[u32]) -> Vec<(usize, u32, u32)> {
    got.iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| g != w)
        .map(|(i, (g, w))| (i, *g, *w))
        .take(10)
        .collect()
}

/// fare.p4's flowlet slot: CRC32 (zlib's) of the flow hash and the group id, mod the
/// slots (FLOWLET_SLOTS).
fn flowlet_slot(hash: u32, group_id: u16) -> u32 {
    let mut bytes = hash.to_be_bytes().to_vec();
    bytes.extend(group_id.to_be_bytes());
    let mut crc = u32::MAX;
    for b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc % 65_536
}
