use super::*;
use crate::config::PathPrefixes;
use async_trait::async_trait;
use fare_model::forwarding::{Group, GroupMode, GroupTable, MemberRef, TableError};

/// Groups in memory under the data planes' last-member rule (the model's table, as the
/// `none` data plane keeps them): what the receiver switches in these tests (the real
/// data planes have their own tests).
#[derive(Default)]
struct NullDataplane(GroupTable);

impl NullDataplane {
    async fn install(&mut self, group: &Group) -> Result<(), ControlError> {
        self.0.install(group);
        Ok(())
    }
}

#[async_trait]
impl MemberControl for NullDataplane {
    async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError> {
        Ok(self.0.groups())
    }

    async fn set_member_active(
        &mut self,
        m: MemberRef<'_>,
        active: bool,
    ) -> Result<(), ControlError> {
        self.0
            .set_member_active(m.prefix, m.index, Some(m.via), active)
            .map_err(|e| match e {
                TableError::Member(m) => m.into(),
                e => ControlError::Failed(e.to_string()),
            })
    }
}

use std::net::{Ipv4Addr, SocketAddr};

const S1: &str = "10.1.0.2";
const S2: &str = "10.1.1.2";
const LEAF2: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn member(via: &str, interface: &str) -> Member {
    Member {
        via: via.into(),
        interface: interface.into(),
        next_hop: Some(via.parse().unwrap()),
        neighbor_mac: None,
        weight: 1,
        bandwidth_gbps: 100.0,
    }
}

fn group(prefix: &str) -> Group {
    Group {
        prefix: prefix.parse().unwrap(),
        mode: GroupMode::Spray,
        members: vec![member(S1, "lo"), member(S2, "lo")],
    }
}

fn config() -> ArnConfig {
    ArnConfig {
        neighbors: vec![
            ArnNeighbor {
                address: S1.parse().unwrap(),
                interface: "lo".into(),
            },
            ArnNeighbor {
                address: S2.parse().unwrap(),
                interface: "lo".into(),
            },
        ],
        paths: vec![PathPrefixes {
            path_id: LEAF2,
            prefixes: vec!["192.0.2.0/24".parse().unwrap()],
        }],
        hold_ms: 100,
        rate_limit: RateLimit {
            per_second: 10,
            burst: 3,
        },
        ..ArnConfig::default()
    }
}

fn datagram(from: &str, ttl: u8) -> Datagram {
    Datagram {
        len: 8,
        from: SocketAddr::new(from.parse().unwrap(), 40000),
        ttl: Some(ttl),
        ifindex: Some(transport::ifindex("lo")),
        dst: None,
    }
}

async fn setup() -> (Receiver, NullDataplane) {
    let mut dp = NullDataplane::default();
    dp.install(&group("192.0.2.0/24")).await.unwrap();
    dp.install(&group("198.51.100.0/24")).await.unwrap();
    (Receiver::new(&config(), &[]), dp)
}

async fn active(dp: &mut NullDataplane, prefix: &str) -> Vec<bool> {
    let p: IpNet = prefix.parse().unwrap();
    MemberControl::groups(dp)
        .await
        .unwrap()
        .into_iter()
        .find(|g| g.group.prefix == p)
        .unwrap()
        .members
        .iter()
        .map(|m| m.active)
        .collect()
}

#[test]
fn admission_checks_neighbor_ttl_interface_rate_and_format() {
    let mut r = Receiver::new(&config(), &[]);
    let now = Instant::now();
    let good = ArnMessage::path(ArnType::CongestionDetected, 9, LEAF2.into())
        .encode()
        .unwrap();
    assert!(r.admit(&datagram(S1, 255), &good, now).is_ok());
    assert_eq!(
        r.admit(&datagram("10.9.9.9", 255), &good, now),
        Err(Rejection::NotNeighbor)
    );
    assert_eq!(
        r.admit(&datagram(S1, 254), &good, now),
        Err(Rejection::Ttl(Some(254)))
    );
    let mut wrong_if = datagram(S1, 255);
    wrong_if.ifindex = Some(9999);
    assert!(matches!(
        r.admit(&wrong_if, &good, now),
        Err(Rejection::WrongInterface { .. })
    ));
    assert!(matches!(
        r.admit(&datagram(S1, 255), &good[..5], now),
        Err(Rejection::Malformed(_))
    ));
    // burst 3: two more pass (one token went to the malformed one), then rate limited
    assert!(r.admit(&datagram(S1, 255), &good, now).is_ok());
    assert_eq!(
        r.admit(&datagram(S1, 255), &good, now),
        Err(Rejection::RateLimited)
    );
    // tokens come back with time
    assert!(r
        .admit(&datagram(S1, 255), &good, now + Duration::from_millis(200))
        .is_ok());
    let c = r.counters().snapshot();
    assert_eq!(
        (
            c.received,
            c.accepted,
            c.dropped_not_neighbor,
            c.dropped_ttl
        ),
        (8, 3, 1, 1)
    );
    assert_eq!(
        (
            c.dropped_wrong_interface,
            c.malformed,
            c.dropped_rate,
            c.type1
        ),
        (1, 1, 1, 3)
    );
}

/// `arn.multicast`: an ARN to the configured group is admitted like a unicast one; an
/// ARN to another group (the host may have joined it for something else) is dropped
/// and counted.
#[test]
fn multicast_arns_count_only_for_the_configured_group() {
    let cfg = ArnConfig {
        multicast: Some(crate::config::MulticastConfig {
            group: "239.255.0.61".parse().unwrap(),
            interfaces: vec![],
        }),
        ..config()
    };
    let mut r = Receiver::new(&cfg, &[]);
    let now = Instant::now();
    let good = ArnMessage::path(ArnType::CongestionDetected, 9, LEAF2.into())
        .encode()
        .unwrap();
    let mut ours = datagram(S1, 255);
    ours.dst = Some("239.255.0.61".parse().unwrap());
    assert!(r.admit(&ours, &good, now).is_ok());
    let mut other = datagram(S1, 255);
    other.dst = Some("239.255.0.62".parse().unwrap());
    assert_eq!(
        r.admit(&other, &good, now),
        Err(Rejection::OtherGroup("239.255.0.62".parse().unwrap()))
    );
    // Without a configured group every multicast ARN is someone else's.
    let mut plain = Receiver::new(&config(), &[]);
    assert!(plain.admit(&ours, &good, now).is_err());
    let c = r.counters().snapshot();
    assert_eq!((c.accepted, c.dropped_other_group), (1, 1));
}

#[tokio::test]
async fn congestion_removes_only_members_toward_sender_behind_path_then_restores() {
    let (mut r, mut dp) = setup().await;
    let s1: IpAddr = S1.parse().unwrap();
    let now = Instant::now();
    let up = ArnMessage::path(ArnType::CongestionDetected, 200, LEAF2.into());
    let changes = r.apply(&mut dp, s1, &up, now).await;
    assert_eq!(changes.len(), 1);
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![false, true]);
    // the other prefix is not behind leaf2
    assert_eq!(active(&mut dp, "198.51.100.0/24").await, vec![true, true]);
    let down = ArnMessage::path(ArnType::CongestionEliminated, 0, LEAF2.into());
    let changes = r.apply(&mut dp, s1, &down, now).await;
    assert_eq!(changes.len(), 1);
    assert!(changes[0].active);
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, true]);
}

#[tokio::test]
async fn path_id_zero_means_every_group_via_sender() {
    let (mut r, mut dp) = setup().await;
    let s2: IpAddr = S2.parse().unwrap();
    let m = ArnMessage::path(ArnType::FailureDetected, 0, 0);
    r.apply(&mut dp, s2, &m, Instant::now()).await;
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, false]);
    assert_eq!(active(&mut dp, "198.51.100.0/24").await, vec![true, false]);
    // congestion end does not revoke a failure
    let end = ArnMessage::path(ArnType::CongestionEliminated, 0, 0);
    r.apply(&mut dp, s2, &end, Instant::now()).await;
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, false]);
    let end = ArnMessage::path(ArnType::FailureEliminated, 0, 0);
    r.apply(&mut dp, s2, &end, Instant::now()).await;
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, true]);
}

#[tokio::test]
async fn last_member_is_never_removed() {
    let (mut r, mut dp) = setup().await;
    let now = Instant::now();
    let m = ArnMessage::path(ArnType::FailureDetected, 0, LEAF2.into());
    r.apply(&mut dp, S1.parse().unwrap(), &m, now).await;
    let changes = r.apply(&mut dp, S2.parse().unwrap(), &m, now).await;
    assert!(changes.is_empty());
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![false, true]);
    assert_eq!(r.counters().snapshot().refused_last_member, 1);
}

/// The race a live fabric hit: BGP re-installs a group (members reordered) between
/// the receiver reading the groups and switching a member. The member toward the
/// sender goes out, never the one that took its index.
#[tokio::test]
async fn a_group_reinstalled_meanwhile_never_loses_the_wrong_member() {
    struct Stale {
        dp: NullDataplane,
        seen: Vec<GroupStatus>,
    }
    #[async_trait]
    impl MemberControl for Stale {
        async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError> {
            Ok(self.seen.clone())
        }
        async fn set_member_active(
            &mut self,
            member: MemberRef<'_>,
            active: bool,
        ) -> Result<(), ControlError> {
            MemberControl::set_member_active(&mut self.dp, member, active).await
        }
    }
    let (mut r, mut dp) = setup().await;
    let seen = MemberControl::groups(&mut dp).await.unwrap();
    // Re-installed as [S2, S1] after the receiver read [S1, S2].
    let mut g = group("192.0.2.0/24");
    g.members.reverse();
    dp.install(&g).await.unwrap();
    let mut stale = Stale { dp, seen };
    let m = ArnMessage::path(ArnType::FailureDetected, 0, LEAF2.into());
    r.apply(&mut stale, S1.parse().unwrap(), &m, Instant::now())
        .await;
    // [S2, S1]: S1 (now index 1) is out, S2 forwards.
    assert_eq!(
        active(&mut stale.dp, "192.0.2.0/24").await,
        vec![true, false]
    );
    // A member that left the group meanwhile is not switched at all.
    let (mut r, mut dp) = setup().await;
    let seen = MemberControl::groups(&mut dp).await.unwrap();
    let mut g = group("192.0.2.0/24");
    g.members.remove(0);
    g.members.push(member("192.0.2.99", "lo"));
    dp.install(&g).await.unwrap();
    let mut stale = Stale { dp, seen };
    r.apply(&mut stale, S1.parse().unwrap(), &m, Instant::now())
        .await;
    assert_eq!(
        active(&mut stale.dp, "192.0.2.0/24").await,
        vec![true, true]
    );
    assert_eq!(r.counters().snapshot().backend_errors, 1);
}

/// A Path ID this node does not list designates nothing (not every path toward the
/// sender); Path ID 0 / absent still means every path toward it.
#[tokio::test]
async fn an_unlisted_path_id_moves_nothing() {
    let (mut r, mut dp) = setup().await;
    let s1: IpAddr = S1.parse().unwrap();
    let m = ArnMessage::path(ArnType::FailureDetected, 0, 4242);
    let changes = r.apply(&mut dp, s1, &m, Instant::now()).await;
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, true]);
    assert_eq!(active(&mut dp, "198.51.100.0/24").await, vec![true, true]);
}

#[tokio::test]
async fn removal_times_out_unless_refreshed() {
    let (mut r, mut dp) = setup().await;
    let t0 = Instant::now();
    let s1: IpAddr = S1.parse().unwrap();
    let m = ArnMessage::path(ArnType::CongestionDetected, 1, LEAF2.into());
    r.apply(&mut dp, s1, &m, t0).await;
    // refreshed at 80 ms: still out at 150 ms
    r.apply(&mut dp, s1, &m, t0 + Duration::from_millis(80))
        .await;
    assert!(r
        .expire(&mut dp, t0 + Duration::from_millis(150))
        .await
        .is_empty());
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![false, true]);
    let back = r.expire(&mut dp, t0 + Duration::from_millis(181)).await;
    assert_eq!(back.len(), 1);
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, true]);
    assert_eq!(r.counters().snapshot().expired, 1);
}

#[tokio::test]
async fn reinstall_drops_stale_removals_and_keeps_live_ones() {
    let (mut r, mut dp) = setup().await;
    let now = Instant::now();
    let m = ArnMessage::path(ArnType::CongestionDetected, 1, 0);
    r.apply(&mut dp, S1.parse().unwrap(), &m, now).await;
    assert_eq!(r.removed().len(), 2);
    // BGP converged: 192.0.2.0/24 no longer goes via S1; 198.51.100.0/24 is
    // re-installed unchanged (fresh install = all members active).
    let mut g = group("192.0.2.0/24");
    g.members.remove(0);
    dp.install(&g).await.unwrap();
    dp.install(&group("198.51.100.0/24")).await.unwrap();
    r.reconcile(&mut dp).await;
    assert_eq!(r.removed().len(), 1);
    assert_eq!(r.counters().snapshot().stale_dropped, 1);
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true]);
    assert_eq!(active(&mut dp, "198.51.100.0/24").await, vec![false, true]);
}

#[tokio::test]
async fn flow_arn_narrows_to_the_group_of_its_destination() {
    let (mut r, mut dp) = setup().await;
    let m = ArnMessage {
        kind: ArnType::CongestionDetected,
        metric: 5,
        flow: Some(crate::FlowId {
            dst: Some("198.51.100.7".parse().unwrap()),
            ..Default::default()
        }),
        path_id: None,
    };
    r.apply(&mut dp, S1.parse().unwrap(), &m, Instant::now())
        .await;
    assert_eq!(active(&mut dp, "192.0.2.0/24").await, vec![true, true]);
    assert_eq!(active(&mut dp, "198.51.100.0/24").await, vec![false, true]);
}

/// A data plane that steers flows (like XDP) over the NullDataplane's groups.
struct Steering {
    dp: NullDataplane,
    calls: Vec<(FlowId, String, bool)>,
}

#[async_trait]
impl MemberControl for Steering {
    async fn groups(&mut self) -> Result<Vec<GroupStatus>, ControlError> {
        MemberControl::groups(&mut self.dp).await
    }
    async fn set_member_active(
        &mut self,
        member: MemberRef<'_>,
        active: bool,
    ) -> Result<(), ControlError> {
        MemberControl::set_member_active(&mut self.dp, member, active).await
    }
    async fn steer_flow(
        &mut self,
        flow: &FlowId,
        interface: &str,
        avoid: bool,
    ) -> Result<bool, ControlError> {
        self.calls
            .push((flow.clone(), interface.to_string(), avoid));
        Ok(true)
    }
}

#[tokio::test]
async fn flow_arn_steers_only_the_flow_when_the_data_plane_can() {
    let (mut r, dp) = setup().await;
    let mut st = Steering { dp, calls: vec![] };
    let flow = crate::FlowId {
        protocol: Some(17),
        dst: Some("198.51.100.7".parse().unwrap()),
        dst_port: Some(4791),
        ..Default::default()
    };
    let m = |kind| ArnMessage {
        kind,
        metric: 5,
        flow: Some(flow.clone()),
        path_id: None,
    };
    let t0 = Instant::now();
    let s1: IpAddr = S1.parse().unwrap();
    r.apply(&mut st, s1, &m(ArnType::CongestionDetected), t0)
        .await;
    // Every member stays in service; the flow is steered off S1's interface.
    assert_eq!(
        active(&mut st.dp, "198.51.100.0/24").await,
        vec![true, true]
    );
    assert_eq!(st.calls.len(), 1);
    assert!(st.calls[0].2 && st.calls[0].0 == flow && !st.calls[0].1.is_empty());
    // A refresh does not steer twice; Type 2 releases it.
    r.apply(&mut st, s1, &m(ArnType::CongestionDetected), t0)
        .await;
    assert_eq!(st.calls.len(), 1);
    r.apply(&mut st, s1, &m(ArnType::CongestionEliminated), t0)
        .await;
    assert_eq!(st.calls.len(), 2);
    assert!(!st.calls[1].2);
    // Without Type 2 the hold time releases it.
    r.apply(&mut st, s1, &m(ArnType::FailureDetected), t0).await;
    r.expire(&mut st, t0 + Duration::from_secs(3600)).await;
    assert_eq!(st.calls.len(), 4);
    assert!(!st.calls[3].2);
    let c = r.counters().snapshot();
    assert_eq!((c.flows_steered, c.flows_released), (2, 2));
}

/// A data plane whose group for 192.0.2.0/24 has one member, via S1.
async fn only_via_s1() -> NullDataplane {
    let mut dp = NullDataplane::default();
    dp.install(&Group {
        prefix: "192.0.2.0/24".parse().unwrap(),
        mode: GroupMode::Spray,
        members: vec![member(S1, "lo")],
    })
    .await
    .unwrap();
    dp
}

#[tokio::test]
async fn arn_without_alternative_is_propagated_to_the_other_neighbors() {
    // The only way to 192.0.2.0/24 is via S1: nothing to do here, pass it on.
    let mut dp = only_via_s1().await;
    let on = ArnConfig {
        propagate: true,
        ..config()
    };
    let mut r = Receiver::new(&on, &[]);
    let s1: IpAddr = S1.parse().unwrap();
    let s2: IpAddr = S2.parse().unwrap();
    let m = |kind| ArnMessage {
        kind,
        metric: 9,
        flow: None,
        path_id: Some(u32::from(LEAF2)),
    };
    let t0 = Instant::now();
    r.apply(&mut dp, s1, &m(ArnType::CongestionDetected), t0)
        .await;
    let out = r.take_outbox();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, m(ArnType::CongestionDetected));
    assert_eq!(out[0].1, vec![s2]); // never back to the sender
                                    // A refresh within the refresh period is not passed on again; later it is.
    r.apply(&mut dp, s1, &m(ArnType::CongestionDetected), t0)
        .await;
    assert!(r.take_outbox().is_empty());
    let later = t0 + Duration::from_secs(1);
    r.apply(&mut dp, s1, &m(ArnType::CongestionDetected), later)
        .await;
    assert_eq!(r.take_outbox().len(), 1);
    // Type 2 follows the propagated Type 1, once.
    r.apply(&mut dp, s1, &m(ArnType::CongestionEliminated), later)
        .await;
    let out = r.take_outbox();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0.kind, ArnType::CongestionEliminated);
    r.apply(&mut dp, s1, &m(ArnType::CongestionEliminated), later)
        .await;
    assert!(r.take_outbox().is_empty());
    assert_eq!(r.counters().snapshot().propagated, 3);
    // An ARN this node can act on (two members) is not propagated.
    let (mut r, mut dp) = setup().await;
    r.apply(&mut dp, s1, &m(ArnType::CongestionDetected), t0)
        .await;
    assert!(r.take_outbox().is_empty());
    // Off by configuration.
    let mut off = Receiver::new(
        &ArnConfig {
            propagate: false,
            ..config()
        },
        &[],
    );
    let mut dp1 = only_via_s1().await;
    off.apply(&mut dp1, s1, &m(ArnType::CongestionDetected), t0)
        .await;
    assert!(off.take_outbox().is_empty());
}
