//! FIB-Suppress (draft-xu-idr-fare-in-mpson §4.2.1) between fare speakers in namespaces,
//! on a chain RNIC — L1 — S — L2. The RNIC originates its host route 10.200.1.1/32; L1
//! originates the aggregate 10.200.1.0/24 and tags what its RNIC session brings with the
//! FIB-Suppress community (`fib_suppress` on that neighbor). L1 installs the host route
//! (it delivers to the RNIC); S and L2 learn it, tagged, and advertise it on, but install
//! only the aggregate. Without the tag (the control) S installs the host route too.

use fare_integration::bgp::{config, wait_for, FareSpeaker};
use fare_integration::{have_root, link, Netns};
use std::time::Duration;

const HOST: &str = "10.200.1.1/32";
const AGGREGATE: &str = "10.200.1.0/24";

struct Chain {
    _ns: Vec<Netns>,
    l1: FareSpeaker,
    s: FareSpeaker,
    l2: FareSpeaker,
    _rnic: FareSpeaker,
}

fn chain(tag: bool) -> Chain {
    let r = Netns::new("fsr").unwrap();
    let l1 = Netns::new("fsl1").unwrap();
    let s = Netns::new("fss").unwrap();
    let l2 = Netns::new("fsl2").unwrap();
    link(&r, "r0", "10.0.1.2/30", &l1, "l1r", "10.0.1.1/30").unwrap();
    link(&l1, "l1s", "10.0.2.1/30", &s, "sl1", "10.0.2.2/30").unwrap();
    link(&s, "sl2", "10.0.3.1/30", &l2, "l2s", "10.0.3.2/30").unwrap();
    let rnic = FareSpeaker::start(
        &r,
        config(
            "10.9.1.1",
            4_200_000_011,
            &[("10.0.1.1", 65011, 400.0)],
            &[HOST],
        ),
    )
    .unwrap();
    let mut l1_cfg = config(
        "10.1.0.1",
        65011,
        &[
            ("10.0.1.2", 4_200_000_011, 400.0),
            ("10.0.2.2", 65100, 400.0),
        ],
        &[AGGREGATE],
    );
    l1_cfg.neighbors[0].fib_suppress = tag;
    let l1_sp = FareSpeaker::start(&l1, l1_cfg).unwrap();
    let s_sp = FareSpeaker::start(
        &s,
        config(
            "10.1.1.1",
            65100,
            &[("10.0.2.1", 65011, 400.0), ("10.0.3.2", 65012, 400.0)],
            &[],
        ),
    )
    .unwrap();
    let l2_sp = FareSpeaker::start(
        &l2,
        config("10.1.0.2", 65012, &[("10.0.3.1", 65100, 400.0)], &[]),
    )
    .unwrap();
    Chain {
        _ns: vec![r, l1, s, l2],
        l1: l1_sp,
        s: s_sp,
        l2: l2_sp,
        _rnic: rnic,
    }
}

fn has_route(sp: &FareSpeaker, prefix: &str) -> bool {
    sp.routes().iter().any(|r| r.prefix.to_string() == prefix)
}

#[test]
fn bgp_fib_suppress_keeps_rnic_host_routes_out_of_remote_fibs() {
    let test = "bgp_fib_suppress_keeps_rnic_host_routes_out_of_remote_fibs";
    if !have_root(test) {
        return;
    }
    let c = chain(true);
    // L2 has both routes once the chain has converged.
    let up = wait_for(Duration::from_secs(40), || {
        (has_route(&c.l2, HOST) && c.l2.group(AGGREGATE).is_some()).then_some(())
    });
    assert!(up.is_some(), "{test}: L2 routes {:?}", c.l2.routes());
    assert!(
        c.l1.group(HOST).is_some(),
        "L1 installs its own RNIC's route"
    );
    assert!(c.s.group(AGGREGATE).is_some(), "S installs the aggregate");
    assert!(has_route(&c.s, HOST), "S holds the host route");
    assert!(
        c.s.group(HOST).is_none(),
        "S must not install the tagged host route"
    );
    assert!(
        c.l2.group(HOST).is_none(),
        "L2 must not install the tagged host route"
    );
    // Still nothing after a while (no late install).
    std::thread::sleep(Duration::from_secs(2));
    assert!(c.s.group(HOST).is_none() && c.l2.group(HOST).is_none());
    drop(c);

    // Control: without the tag the host route is installed everywhere.
    let c = chain(false);
    let installed = wait_for(Duration::from_secs(40), || {
        (c.s.group(HOST).is_some() && c.l2.group(HOST).is_some()).then_some(())
    });
    assert!(
        installed.is_some(),
        "{test}: untagged host route not installed at S/L2"
    );
}
