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
use fare::dataplane::p4rt::P4RuntimeDataplane;
use fare::dataplane::{Dataplane, Group, GroupMode};
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

#[test]
fn p4_bmv2_resilient_flow_buckets() -> Result<()> {
    let Some(fabric) = Fabric::for_test("p4_bmv2_resilient_flow_buckets", "p4c", 4)? else {
        return Ok(());
    };
    let sw = fabric.bmv2.sw.name.clone();
    let opts = fabric.options(10);
    let (to_client, from_test) = std::sync::mpsc::channel::<Vec<u32>>();
    let (to_test, from_client) = std::sync::mpsc::channel::<Result<()>>();
    let client = std::thread::spawn(move || {
        in_netns(&sw, move || async move {
            let mut dp = P4RuntimeDataplane::connect(opts).await?;
            while let Ok(weights) = from_test.recv() {
                let r = dp.install(&group(&weights)).await.map_err(Into::into);
                if to_test.send(r).is_err() {
                    break;
                }
            }
            Ok(())
        })
    });
    let install = |weights: &[u32]| -> Result<()> {
        to_client
            .send(weights.to_vec())
            .context("client thread gone")?;
        from_client
            .recv_timeout(Duration::from_secs(60))
            .context("install: no answer")?
    };

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
    drop(to_client);
    match client.join() {
        Ok(r) => r?,
        Err(_) => bail!("client thread panicked"),
    }
    Ok(())
}
