//! Outbound Route Filtering (RFC 5291/5292) with FRR and between fare speakers, as
//! draft-xu-idr-fare-in-mpson §4.2 uses it: fare plays the leaf (`orf_receive` on the
//! session, several RNIC host routes originated), FRR plays the RNIC and sends its inbound prefix list as an ORF
//! (`capability orf prefix-list send`). FRR's pre-policy view of what it received
//! (`soft-reconfiguration inbound`) holds only the permitted host route: fare filtered at
//! the source. Without ORF on fare's side FRR receives every route (the control case).
//! Between two fare speakers the RNIC side sends the ORF itself (`orf_send`).

use fare::bgp::packet::{frame_len, orf, Context, Message};
use fare_integration::bgp::{
    config, have_frr, output, pair_v4, start_capture, stop_capture, wait_for, FareSpeaker, Frr,
    TempFile,
};
use fare_integration::{have_root, have_tool};
use std::time::Duration;

const FRR_CONF: &str = "frr defaults datacenter
hostname rnic
ip prefix-list WANT seq 5 permit 10.200.1.2/32
router bgp 65002
 bgp router-id 10.0.0.2
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 timers bgp 3 9
 neighbor 10.0.0.1 remote-as 65001
 address-family ipv4 unicast
  neighbor 10.0.0.1 activate
  neighbor 10.0.0.1 soft-reconfiguration inbound
  neighbor 10.0.0.1 capability orf prefix-list send
  neighbor 10.0.0.1 prefix-list WANT in
 exit-address-family
";

const OFFERED: [&str; 4] = [
    "10.200.1.1/32",
    "10.200.1.2/32",
    "10.200.1.3/32",
    "192.0.2.0/24",
];

/// Prefixes FRR received from fare before its own inbound policy.
fn received(frr: &Frr) -> Vec<String> {
    let v = frr.json("show bgp ipv4 unicast neighbors 10.0.0.1 received-routes json");
    let mut out: Vec<String> = v["receivedRoutes"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// Runs the session; returns what FRR received and, when tshark is here, the ORF entries
/// tshark decoded on the wire (`action match sequence prefix` per entry).
fn run(test: &str, orf_receive: bool) -> (Vec<String>, Option<Vec<String>>) {
    let (a, b) = pair_v4("orf").unwrap();
    let pcap = TempFile::new("orf.pcap", "").unwrap();
    let capture = have_tool(test, "tshark").then(|| start_capture(&a, "pa0", &pcap).unwrap());
    let frr = Frr::start(&b, FRR_CONF).unwrap();
    let mut cfg = config("10.0.0.1", 65001, &[("10.0.0.2", 65002, 100.0)], &OFFERED);
    cfg.neighbors[0].orf_receive = orf_receive;
    let fare = FareSpeaker::start(&a, cfg).unwrap();
    let up = fare.established_within(Duration::from_secs(30), &["10.0.0.2"]);
    assert!(up, "{test}: {}", frr.vtysh("show bgp summary"));
    // Routes arrive within a few seconds; the filtered set must then stay as it is.
    let _ = wait_for(Duration::from_secs(15), || {
        let r = received(&frr);
        r.iter().any(|p| p == "10.200.1.2/32").then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    let got = received(&frr);
    eprintln!("{test}: FRR received {got:?}");
    let wire = capture.map(|c| {
        stop_capture(c);
        // Wireshark names the ORF block but decodes entries of the pre-standard type 128
        // only: take the flag/type/length from it and decode the message itself with
        // fare's codec from the captured bytes.
        let out = output(
            &a,
            "tshark",
            &[
                "-r",
                pcap.path(),
                "-Y",
                "bgp.route_refresh.orf",
                "-T",
                "fields",
                "-e",
                "bgp.route_refresh.orf.flag",
                "-e",
                "bgp.route_refresh.orf.type",
                "-e",
                "bgp.route_refresh.orf.length",
                "-e",
                "tcp.payload",
            ],
        );
        eprintln!("{test}: ORF on the wire (flag, type, length, payload): {out:?}");
        out.lines().map(str::to_string).collect()
    });
    (got, wire)
}

#[test]
fn bgp_frr_orf_prefix_list_filters_at_the_leaf() {
    let test = "bgp_frr_orf_prefix_list_filters_at_the_leaf";
    if !have_frr(test) {
        return;
    }
    let (got, wire) = run(test, true);
    assert_eq!(got, ["10.200.1.2/32"], "with ORF");
    if let Some(wire) = wire {
        // FRR's ROUTE-REFRESH carried its prefix list: IMMEDIATE, Address Prefix ORF,
        // one entry ADD PERMIT seq 5 10.200.1.2/32.
        let line = wire.first().expect("no ROUTE-REFRESH with ORF on the wire");
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(&f[..3], ["1", "64", "12"], "{line}");
        let bytes: Vec<u8> = (0..f[3].len() / 2)
            .filter_map(|i| u8::from_str_radix(&f[3][2 * i..2 * i + 2], 16).ok())
            .collect();
        // The segment may carry more messages after it.
        let n = frame_len(&bytes).ok().flatten().unwrap_or(bytes.len());
        let first = &bytes[..n.min(bytes.len())];
        let Ok(Message::RouteRefresh(rr)) = Message::decode(first, Context::default()) else {
            panic!("not a ROUTE-REFRESH: {line}");
        };
        let entries = rr.orf.expect("ORF block").entries;
        assert_eq!(entries.len(), 1, "{entries:?}");
        let e = &entries[0];
        let p = e.prefix.expect("prefix entry");
        assert_eq!(
            (e.action, e.deny, p.sequence, p.prefix.to_string()),
            (orf::Action::Add, false, 5, "10.200.1.2/32".to_string())
        );
    }
    let mut all: Vec<String> = OFFERED.iter().map(|s| s.to_string()).collect();
    all.sort();
    let (got, _) = run(test, false);
    assert_eq!(got, all, "without ORF (control)");
}

/// Both ends fare: the RNIC's speaker sends the ORF itself (`orf_send`), the leaf filters.
#[test]
fn bgp_orf_between_fare_speakers() {
    let test = "bgp_orf_between_fare_speakers";
    if !have_root(test) {
        return;
    }
    let (a, b) = pair_v4("orfl").unwrap();
    let mut leaf = config("10.0.0.1", 65001, &[("10.0.0.2", 65002, 100.0)], &OFFERED);
    leaf.neighbors[0].orf_receive = true;
    let mut rnic = config("10.0.0.2", 65002, &[("10.0.0.1", 65001, 100.0)], &[]);
    rnic.neighbors[0].orf_send = vec![
        "10.200.1.2/32".parse().unwrap(),
        "10.200.1.3/32".parse().unwrap(),
    ];
    let _leaf = FareSpeaker::start(&a, leaf).unwrap();
    let rnic = FareSpeaker::start(&b, rnic).unwrap();
    let routes = || {
        let mut r: Vec<String> = rnic.routes().iter().map(|r| r.prefix.to_string()).collect();
        r.sort();
        r
    };
    let want = ["10.200.1.2/32", "10.200.1.3/32"];
    let got = wait_for(Duration::from_secs(20), || (routes() == want).then_some(()));
    assert!(got.is_some(), "{test}: the RNIC holds {:?}", routes());
    // And stays so (no late full table).
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(routes(), want);
    // RFC 5291 §5: the leaf waited for the ORF before its first UPDATE, so the RNIC never
    // received a route its ORF denies (not even briefly, before a withdrawal).
    let nlri = rnic.prefixes_received("10.0.0.1");
    eprintln!(
        "{test}: the RNIC received {nlri:?} NLRI of {} offered",
        OFFERED.len()
    );
    assert_eq!(
        nlri,
        Some(want.len() as u64),
        "{test}: denied routes were sent"
    );
}

/// A minimal RNIC built from fare's codec, for what a fare RNIC cannot do: it announces
/// that it sends Address Prefix ORFs (RFC 5291 §4), then sends its ORF (IMMEDIATE,
/// REMOVE-ALL + PERMIT `wanted`) only `delay` after the session is up, or never. Returns
/// every prefix the leaf announced, with its time since Established.
async fn slow_orf_rnic(
    wanted: Option<&'static str>,
    delay: Duration,
    listen: Duration,
) -> anyhow::Result<Vec<(Duration, String)>> {
    use fare::bgp::packet::{Capability, Open, RouteRefresh};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ctx = Context::default();
    let mut stream = None;
    for _ in 0..100 {
        match tokio::net::TcpStream::connect("10.0.0.1:179").await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let mut stream = stream.ok_or_else(|| anyhow::anyhow!("no connection to the leaf"))?;
    let caps = vec![
        Capability::Multiprotocol { afi: 1, safi: 1 },
        Capability::RouteRefresh,
        Capability::FourOctetAs(65002),
        Capability::Orf(vec![orf::OrfFamily {
            afi: 1,
            safi: 1,
            types: vec![(orf::ADDRESS_PREFIX, orf::SEND)],
        }]),
    ];
    let open = Open::new(65002, 9, "10.0.0.2".parse()?, caps);
    stream.write_all(&Message::Open(open).encode(ctx)).await?;
    let mut buf = Vec::new();
    let mut up: Option<tokio::time::Instant> = None;
    let mut orf_sent = wanted.is_none();
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20) + delay + listen;
    let mut keepalive = tokio::time::interval(Duration::from_secs(1));
    loop {
        let now = tokio::time::Instant::now();
        if now > deadline || up.is_some_and(|t| now > t + listen) {
            break;
        }
        if let (false, Some(t), Some(p)) = (orf_sent, up, wanted) {
            if now >= t + delay {
                let rr = RouteRefresh {
                    afi: 1,
                    subtype: 0,
                    safi: 1,
                    orf: Some(orf::Orf {
                        when: orf::When::Immediate,
                        orf_type: orf::ADDRESS_PREFIX,
                        entries: vec![
                            orf::OrfEntry {
                                action: orf::Action::RemoveAll,
                                deny: false,
                                prefix: None,
                            },
                            orf::OrfEntry {
                                action: orf::Action::Add,
                                deny: false,
                                prefix: Some(orf::PrefixEntry {
                                    sequence: 10,
                                    min_len: 0,
                                    max_len: 0,
                                    prefix: p.parse()?,
                                }),
                            },
                        ],
                        raw: vec![],
                    }),
                };
                stream
                    .write_all(&Message::RouteRefresh(rr).encode(ctx))
                    .await?;
                orf_sent = true;
            }
        }
        let mut chunk = [0u8; 4096];
        tokio::select! {
            n = stream.read(&mut chunk) => {
                let n = n?;
                anyhow::ensure!(n > 0, "the leaf closed the session");
                buf.extend_from_slice(&chunk[..n]);
            }
            _ = keepalive.tick() => {
                if up.is_some() {
                    stream.write_all(&Message::Keepalive.encode(ctx)).await?;
                }
                continue;
            }
            _ = tokio::time::sleep(Duration::from_millis(20)) => continue,
        }
        while let Ok(Some(len)) = frame_len(&buf) {
            if buf.len() < len {
                break;
            }
            let frame: Vec<u8> = buf.drain(..len).collect();
            match Message::decode(&frame, ctx) {
                Ok(Message::Open(_)) => {
                    stream.write_all(&Message::Keepalive.encode(ctx)).await?;
                }
                Ok(Message::Keepalive) => {
                    up.get_or_insert_with(tokio::time::Instant::now);
                }
                Ok(Message::Update(u)) => {
                    let at = up.map(|t| t.elapsed()).unwrap_or_default();
                    seen.extend(u.announced().map(|p| (at, p.to_string())));
                }
                Ok(_) => {}
                Err(e) => anyhow::bail!("undecodable message from the leaf: {e:?}"),
            }
        }
    }
    anyhow::ensure!(up.is_some(), "the session never came up");
    Ok(seen)
}

/// RFC 5291 §5 against a peer that takes its time: the leaf (`orf_receive`) sends nothing
/// until the ORF arrives, then only what it permits; a peer that announced ORF send but
/// sends none gets the full table when the wait (here 1.5 s) ends.
#[test]
fn bgp_orf_leaf_waits_for_the_first_orf() {
    let test = "bgp_orf_leaf_waits_for_the_first_orf";
    if !have_root(test) {
        return;
    }
    let wait = Duration::from_millis(1500);
    for (wanted, delay) in [
        (Some("10.200.1.2/32"), Duration::from_millis(1000)),
        (None, Duration::ZERO),
    ] {
        let (a, b) = pair_v4("orfw").unwrap();
        let mut leaf = config("10.0.0.1", 65001, &[("10.0.0.2", 65002, 100.0)], &OFFERED);
        leaf.neighbors[0].orf_receive = true;
        leaf.neighbors[0].passive = true;
        leaf.orf_wait = wait;
        let _leaf = FareSpeaker::start(&a, leaf).unwrap();
        let seen = fare_integration::bgp::spawn_in_netns(&b, move || {
            slow_orf_rnic(wanted, delay, Duration::from_secs(3))
        })
        .join()
        .expect("peer thread")
        .expect("peer");
        eprintln!("{test}: ORF {wanted:?} after {delay:?}: the leaf announced {seen:?}");
        match wanted {
            Some(p) => {
                let got: Vec<&str> = seen.iter().map(|(_, q)| q.as_str()).collect();
                assert_eq!(got, [p], "{test}: only the permitted route, and only once");
                assert!(
                    seen[0].0 >= delay,
                    "{test}: UPDATE before the ORF: {seen:?}"
                );
            }
            None => {
                let mut got: Vec<String> = seen.iter().map(|(_, q)| q.clone()).collect();
                got.sort();
                let mut all: Vec<String> = OFFERED.iter().map(|s| s.to_string()).collect();
                all.sort();
                assert_eq!(got, all, "{test}: the full table after the wait");
                let first = seen.iter().map(|(t, _)| *t).min().unwrap_or_default();
                assert!(
                    first >= wait - Duration::from_millis(100)
                        && first < wait + Duration::from_secs(1),
                    "{test}: first UPDATE {first:?} after Established, wait {wait:?}"
                );
            }
        }
    }
}
