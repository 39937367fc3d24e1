//! The backend against the in-memory P4Runtime target (`fare_p4runtime::fake`), which applies the
//! updates of a Write in reverse order and checks references: dependent writes in
//! separate batches, many groups per Write, switch restart, two controllers,
//! RESOURCE_EXHAUSTED.

use super::adoption::param_value;
use super::*;
use fare_p4runtime::fake::FakeTarget;

fn options(address: &str, election_id: u64) -> P4RuntimeOptions {
    let build = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4/build");
    P4RuntimeOptions {
        address: address.to_string(),
        device_id: 1,
        election_id,
        pipeline: Some((build.join("fare.p4info.txtpb"), build.join("fare.json"))),
        ports: (1..=4).map(|i| (format!("p{i}"), i)).collect(),
        router_mac: DEFAULT_ROUTER_MAC,
        form: GroupForm::Weighted,
        watch_ports: true,
        arn_hold: DEFAULT_ARN_HOLD,
    }
}

fn group(prefix: &str, weights: &[u32]) -> Group {
    Group {
        prefix: prefix.parse().expect("prefix"),
        mode: GroupMode::Spray,
        members: weights
            .iter()
            .enumerate()
            .map(|(i, w)| Member {
                via: format!("10.1.{}.2", i + 1),
                interface: format!("p{}", i + 1),
                next_hop: None,
                neighbor_mac: Some(MacAddr([2, 0, 0, 0, 0, i as u8 + 1])),
                weight: *w,
                bandwidth_gbps: 0.0,
            })
            .collect(),
    }
}

/// (routes, wcmp_group entries, profile groups, members) on the target.
fn counts(fake: &FakeTarget, prog: &FareProgram) -> (usize, usize, usize, usize) {
    let s = fake.lock();
    let in_table = |id: u32| s.tables.keys().filter(|(t, _)| *t == id).count();
    (
        in_table(prog.route_v4.table),
        in_table(prog.wcmp_group),
        s.groups.len(),
        s.members.len(),
    )
}

/// Weights of the profile group behind `prefix`'s route, by member port.
fn weights_on_target(fake: &FakeTarget, prog: &FareProgram) -> Vec<i32> {
    let s = fake.lock();
    let mut out: Vec<i32> = s
        .groups
        .values()
        .flat_map(|g| g.members.iter().map(|m| m.weight))
        .collect();
    out.sort_unstable();
    let _ = prog;
    out
}

/// A fake target and the backend connected to it as primary (election id 7), with the
/// program it resolved.
async fn connected() -> (FakeTarget, P4RuntimeDataplane, FareProgram) {
    let fake = FakeTarget::start().await;
    let dp = P4RuntimeDataplane::connect(options(&fake.address, 7))
        .await
        .expect("connect");
    let prog = dp.program().clone();
    (fake, dp, prog)
}

async fn until_primary(dp: &mut P4RuntimeDataplane) {
    for _ in 0..100 {
        if dp.maintain().await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not primary after 5 s: {}", dp.session_state());
}

/// The fake target is strict the way the specification allows: a group and its members in
/// one Write fail there (it applies the batch in reverse), in two Writes they pass.
#[tokio::test]
async fn the_fake_target_refuses_a_batch_that_assumes_order() {
    let (fake, dp, prog) = connected().await;
    drop(dp);
    let mut client = Client::connect(&fake.address, 1, 8).await.expect("client");
    let member = |id| {
        update_of(
            p4::update::Type::Insert,
            p4::entity::Entity::ActionProfileMember(
                prog.member(id, 1, MacAddr([2, 0, 0, 0, 0, 1]), DEFAULT_ROUTER_MAC, 0, 1)
                    .expect("member"),
            ),
        )
    };
    let members = [GroupMember {
        member_id: 1,
        weight: 1,
        watch_port: None,
    }];
    let group = update_of(
        p4::update::Type::Insert,
        p4::entity::Entity::ActionProfileGroup(prog.profile_group(1, &members, 9).expect("group")),
    );
    let e = client
        .write(vec![member(1), group.clone()])
        .await
        .expect_err("one batch");
    assert!(e.to_string().contains("NotFound"), "{e}");
    client.write(vec![member(2)]).await.expect("member alone");
    let members2 = [GroupMember {
        member_id: 2,
        weight: 1,
        watch_port: None,
    }];
    let group2 = update_of(
        p4::update::Type::Insert,
        p4::entity::Entity::ActionProfileGroup(prog.profile_group(2, &members2, 9).expect("group")),
    );
    client.write(vec![group2]).await.expect("then the group");
}

#[tokio::test]
async fn dependent_entities_go_in_separate_writes() {
    let (fake, mut dp, prog) = connected().await;
    // The target applies each batch in reverse: members and the group naming them in one
    // Write would fail ("member not found"); so would routes before groups.
    dp.install(&group("10.9.0.0/16", &[3, 3, 4, 4]))
        .await
        .expect("install");
    assert_eq!(counts(&fake, &prog), (1, 1, 1, 4));
    // Make-before-break replacement: the old profile group is deleted before its members
    // (the target refuses to delete a member still in a group).
    dp.install(&group("10.9.0.0/16", &[1, 1, 1, 1]))
        .await
        .expect("replace");
    assert_eq!(counts(&fake, &prog), (1, 1, 1, 4));
    assert_eq!(weights_on_target(&fake, &prog), vec![1, 1, 1, 1]);
    // Deletes in reverse: route, group entry, profile group, members.
    dp.remove("10.9.0.0/16".parse().expect("prefix"))
        .await
        .expect("remove");
    assert_eq!(counts(&fake, &prog), (0, 0, 0, 0));
}

#[tokio::test]
async fn many_groups_share_a_few_writes() {
    let (fake, mut dp, prog) = connected().await;
    let groups: Vec<Group> = (0..300)
        .map(|i| {
            group(
                &format!("10.{}.{}.0/24", 100 + i / 256, i % 256),
                &[1, 2, 3, 4],
            )
        })
        .collect();
    let before = fake.lock().batches.len();
    let results = dp.install_batch(&groups).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(counts(&fake, &prog), (300, 300, 300, 1200));
    let batches: Vec<usize> = fake.lock().batches[before..].to_vec();
    // 1200 members in 3 Writes of at most 500, 300 profile groups in 1, 1200 counters
    // zeroed in 3, 300 group entries in 1, 300 routes in 1: 9 Writes, where one group at
    // a time takes 5 each (1500).
    assert_eq!(batches, vec![500, 500, 200, 300, 500, 500, 200, 300, 300]);
}

#[tokio::test]
async fn a_restarted_switch_gets_the_pipeline_and_the_groups_again() {
    let (fake, mut dp, prog) = connected().await;
    dp.install(&group("10.9.0.0/16", &[3, 3, 4, 4]))
        .await
        .expect("install");
    dp.map_arn_path("p1", Ipv4Addr::new(10, 0, 0, 2), &[])
        .await
        .expect("arn path");
    fake.kill();
    // While the switch is away: refused (the first write finds it gone), but remembered.
    let e = dp
        .install(&group("10.8.0.0/16", &[1, 1]))
        .await
        .expect_err("switch down");
    assert!(
        e.to_string().contains("Unavailable") || e.to_string().contains("reconnecting"),
        "{e}"
    );
    assert!(
        dp.session_state().starts_with("down"),
        "{}",
        dp.session_state()
    );
    let e = dp.maintain().await.expect_err("still down");
    assert!(e.to_string().contains("reconnecting"), "{e}");
    fake.restart();
    assert!(
        fake.lock().pipeline.is_none(),
        "a restarted switch has no pipeline"
    );
    until_primary(&mut dp).await;
    assert_eq!(fake.lock().pipeline_pushes, 2, "pipeline pushed again");
    assert_eq!(counts(&fake, &prog), (2, 2, 2, 6), "both groups written");
    let arn = fake
        .lock()
        .tables
        .keys()
        .filter(|(t, _)| *t == prog.arn_rx)
        .count();
    assert_eq!(arn, 1, "ARN path written again");
    // And the backend goes on as before.
    dp.remove("10.8.0.0/16".parse().expect("prefix"))
        .await
        .expect("remove");
    assert_eq!(counts(&fake, &prog), (1, 1, 1, 4));
}

#[tokio::test]
async fn fare_stands_back_for_a_higher_election_id_and_resumes() {
    let (fake, mut fare, prog) = connected().await;
    fare.install(&group("10.1.0.0/16", &[1, 1]))
        .await
        .expect("install");
    // A second controller with a higher election id takes over (same pipeline: it adopts).
    let mut other = P4RuntimeDataplane::connect(options(&fake.address, 9))
        .await
        .expect("second controller");
    other
        .install(&group("10.3.0.0/16", &[2, 2, 2]))
        .await
        .expect("the new primary writes");
    let writes = fake.lock().batches.len();
    let e = fare
        .install(&group("10.2.0.0/16", &[1, 2]))
        .await
        .expect_err("backup");
    assert!(e.to_string().contains("standing back"), "{e}");
    assert!(
        fare.session_state().starts_with("backup"),
        "{}",
        fare.session_state()
    );
    assert_eq!(fake.lock().batches.len(), writes, "a backup writes nothing");
    // The other controller leaves: fare is primary again, reads the switch back and makes
    // it what the agent asked for (10.1 and 10.2; not the other controller's 10.3).
    drop(other);
    until_primary(&mut fare).await;
    let routes: Vec<u32> = {
        let s = fake.lock();
        let mut r: Vec<u32> = s
            .tables
            .values()
            .filter(|t| t.table_id == prog.route_v4.table)
            .filter_map(|t| match t.r#match.first()?.field_match_type.as_ref()? {
                p4::field_match::FieldMatchType::Lpm(l) => {
                    u32::try_from(fare_p4runtime::entities::value_of(&l.value)).ok()
                }
                _ => None,
            })
            .collect();
        r.sort_unstable();
        r
    };
    assert_eq!(
        routes,
        vec![
            u32::from(Ipv4Addr::new(10, 1, 0, 0)),
            u32::from(Ipv4Addr::new(10, 2, 0, 0))
        ]
    );
    assert_eq!(counts(&fake, &prog), (2, 2, 2, 4));
}

#[tokio::test]
async fn resource_exhausted_reduces_the_group_to_the_target_limit() {
    let fake = FakeTarget::start().await;
    // The target takes at most 8 (sum of weights) per group; its P4Info does not say so.
    fake.lock().max_group_size = Some(8);
    let mut dp = P4RuntimeDataplane::connect(options(&fake.address, 7))
        .await
        .expect("connect");
    let prog = dp.program().clone();
    assert_eq!(
        dp.limits().max_size,
        Some(16384),
        "P4Info: the whole profile"
    );
    let on_target = |prefix: &str| -> Vec<i32> {
        let s = fake.lock();
        let p: IpNet = prefix.parse().expect("prefix");
        let Some(route) = s.tables.values().find(|t| {
            t.table_id == prog.route_v4.table
                && matches!(t.r#match.first().and_then(|m| m.field_match_type.as_ref()),
                    Some(p4::field_match::FieldMatchType::Lpm(l))
                        if u32::try_from(fare_p4runtime::entities::value_of(&l.value)).ok()
                            == Some(match p.addr() { IpAddr::V4(a) => u32::from(a), _ => 0 }))
        }) else {
            return vec![];
        };
        let Some(p4::table_action::Type::Action(a)) =
            route.action.as_ref().and_then(|a| a.r#type.clone())
        else {
            return vec![];
        };
        let gid = param_value(&a, prog.set_group.group_id.id);
        let Some(pg) = s.tables.values().find_map(|t| {
            let is_gid = t.table_id == prog.wcmp_group
                && matches!(t.r#match.first().and_then(|m| m.field_match_type.as_ref()),
                    Some(p4::field_match::FieldMatchType::Exact(e)) if fare_p4runtime::entities::value_of(&e.value) == gid);
            match t.action.as_ref().and_then(|a| a.r#type.as_ref()) {
                Some(p4::table_action::Type::ActionProfileGroupId(pg)) if is_gid => Some(*pg),
                _ => None,
            }
        }) else {
            return vec![];
        };
        s.groups[&pg].members.iter().map(|m| m.weight).collect()
    };
    dp.install(&group("10.9.0.0/16", &[3, 3, 4, 4]))
        .await
        .expect("installed reduced");
    // 3:3:4:4 in at most 8: all four equal (2:2:2:2 or 1:1:1:1: the worst member gets
    // 1/4 for its 3/14, 1.17x; 1:1:3:3 would give 3/8 for 4/14, 1.31x).
    let w = on_target("10.9.0.0/16");
    assert!(
        w.len() == 4 && w.iter().all(|&x| x == w[0]) && w.iter().sum::<i32>() <= 8,
        "{w:?}"
    );
    // Every size refused was above 8, so the learned limit is at least 8 and below 14.
    let learned = dp.limits().max_size.expect("a limit");
    assert!((8..14).contains(&learned), "learned {learned}");
    assert_eq!(
        counts(&fake, &prog),
        (1, 1, 1, 4),
        "the refused tries left nothing"
    );
    // A group of exactly the target's limit goes through unchanged.
    dp.install(&group("10.8.0.0/16", &[1, 2, 5]))
        .await
        .expect("size 8");
    assert_eq!(on_target("10.8.0.0/16"), vec![1, 2, 5]);
    // 3:3:3 (9) ends as three equal members within 8, and then the limit is exactly 8.
    dp.install(&group("10.7.0.0/16", &[3, 3, 3]))
        .await
        .expect("size 9");
    let w = on_target("10.7.0.0/16");
    assert!(
        w.len() == 3 && w.iter().all(|&x| x == w[0]) && w.iter().sum::<i32>() <= 8,
        "{w:?}"
    );
    assert_eq!(dp.limits().max_size, Some(8));
    assert_eq!(counts(&fake, &prog), (3, 3, 3, 10));
}

#[tokio::test]
async fn a_prefix_twice_in_one_batch_ends_as_its_last_group() {
    let (fake, mut dp, prog) = connected().await;
    let results = dp
        .install_batch(&[
            group("10.9.0.0/16", &[3, 3, 4, 4]),
            group("10.8.0.0/16", &[1, 1]),
            group("10.9.0.0/16", &[1, 2, 3, 4]),
        ])
        .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(counts(&fake, &prog), (2, 2, 2, 6));
    let installed = dp.groups().await.expect("groups");
    let w: Vec<Vec<u32>> = installed
        .iter()
        .map(|g| g.group.members.iter().map(|m| m.weight).collect())
        .collect();
    assert_eq!(w, vec![vec![1, 1], vec![1, 2, 3, 4]], "10.8 then 10.9");
}

/// Issue 18's ratio rule on P4: taking a member out rewrites the group without it and the
/// others keep their weights exactly (3:3:4:4 minus a 4 is 3:3:4, not 3:3:8 or 1:1:1), in
/// both group forms; putting it back restores 3:3:4:4.
#[tokio::test]
async fn removing_a_member_keeps_the_others_ratio_in_both_forms() {
    for form in [GroupForm::Weighted, GroupForm::Replicated] {
        let fake = FakeTarget::start().await;
        let mut dp = P4RuntimeDataplane::connect(P4RuntimeOptions {
            form,
            ..options(&fake.address, 7)
        })
        .await
        .expect("connect");
        let prefix: IpNet = "10.9.0.0/16".parse().expect("prefix");
        dp.install(&group("10.9.0.0/16", &[3, 3, 4, 4]))
            .await
            .expect("install");
        // Per port of the group's members: the weight (weighted form) or the number of
        // replicas (replicated form).
        let shares = |fake: &FakeTarget| -> Vec<i32> {
            let s = fake.lock();
            let mut per_member: BTreeMap<u32, i32> = BTreeMap::new();
            for g in s.groups.values() {
                for m in &g.members {
                    *per_member.entry(m.member_id).or_default() += m.weight.max(1);
                }
            }
            // Replicas of one next hop are distinct members with the same action
            // parameters: fold them by parameters.
            let mut by_action: BTreeMap<Vec<Vec<u8>>, i32> = BTreeMap::new();
            for (id, w) in per_member {
                let params = s
                    .members
                    .get(&id)
                    .and_then(|m| m.action.as_ref())
                    .map(|a| a.params.iter().map(|p| p.value.clone()).collect())
                    .unwrap_or_default();
                *by_action.entry(params).or_default() += w;
            }
            let mut v: Vec<i32> = by_action.into_values().collect();
            v.sort_unstable();
            v
        };
        assert_eq!(shares(&fake), vec![3, 3, 4, 4], "{form:?} installed");
        dp.set_member_active(prefix, 3, false).await.expect("out");
        assert_eq!(shares(&fake), vec![3, 3, 4], "{form:?} without member 3");
        dp.set_member_active(prefix, 3, true).await.expect("back");
        assert_eq!(shares(&fake), vec![3, 3, 4, 4], "{form:?} restored");
    }
}

/// `dataplane.watch_ports`: on, every member but the anchor's (the heaviest member's port,
/// here p4 of 3:3:4:4, the last of the two 4s) watches its own egress port; off, none does.
#[tokio::test]
async fn watch_ports_follow_the_configuration() {
    for (watch_ports, want) in [
        (true, vec![Some(1), Some(2), Some(3), None]),
        (false, vec![None; 4]),
    ] {
        let fake = FakeTarget::start().await;
        let mut dp = P4RuntimeDataplane::connect(P4RuntimeOptions {
            watch_ports,
            ..options(&fake.address, 7)
        })
        .await
        .expect("connect");
        dp.install(&group("10.9.0.0/16", &[3, 3, 4, 4]))
            .await
            .expect("install");
        let s = fake.lock();
        let group = s.groups.values().next().expect("one group");
        // Member ids are handed out in member order, so sorting by id gives p1..p4.
        let mut members: Vec<_> = group.members.iter().collect();
        members.sort_by_key(|m| m.member_id);
        let watched: Vec<Option<u32>> = members
            .iter()
            .map(|m| match &m.watch_kind {
                Some(p4::action_profile_group::member::WatchKind::WatchPort(b)) => {
                    Some(b.iter().fold(0u32, |a, x| (a << 8) | u32::from(*x)))
                }
                _ => None,
            })
            .collect();
        assert_eq!(watched, want, "watch_ports: {watch_ports}");
    }
}

/// An ARN monitor whose `notify` names two addresses behind one port (a neighbour's link
/// address and its router ID) still gets its clone session: one replica a port, as the
/// in-memory target (like BMv2) refuses a session that lists a port twice.
#[tokio::test]
async fn arn_monitor_takes_one_target_a_port() {
    let fake = FakeTarget::start().await;
    let mut dp = P4RuntimeDataplane::connect(options(&fake.address, 7))
        .await
        .expect("connect");
    let mac = MacAddr([2, 0, 0, 0, 0, 2]);
    let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().expect("address");
    let targets = [
        ("p2".to_string(), mac, ip("10.1.2.1"), ip("10.1.2.2")),
        ("p2".to_string(), mac, ip("10.1.2.1"), ip("10.0.0.2")),
        ("p3".to_string(), mac, ip("10.1.3.1"), ip("10.1.3.2")),
    ];
    let thresholds = crate::QueueThresholds {
        high: 9,
        low: 2,
        limit: 18,
        refresh: std::time::Duration::from_millis(100),
    };
    dp.monitor_port("p1", thresholds, ip("10.0.0.1"), &targets)
        .await
        .expect("monitor with two targets on p2");
    // Session id = monitored port + 1.
    assert!(
        fake.lock().clone_sessions.contains(&2),
        "clone session written"
    );
}

/// (group, bucket) -> member index in the fake target's wcmp_bucket, and the member
/// indices in its wcmp_member.
fn buckets_on_target(fake: &FakeTarget, prog: &FareProgram) -> (Vec<u16>, Vec<u16>) {
    let bt = prog.buckets.as_ref().expect("bucket tables");
    let s = fake.lock();
    let exact = |t: &p4::TableEntry, id: u32| {
        t.r#match
            .iter()
            .find(|m| m.field_id == id)
            .map(|m| match &m.field_match_type {
                Some(p4::field_match::FieldMatchType::Exact(e)) => {
                    fare_p4runtime::entities::value_of(&e.value)
                }
                _ => u128::MAX,
            })
    };
    let mut table: Vec<(u128, u16)> = Vec::new();
    let mut members = Vec::new();
    for ((id, _), t) in &s.tables {
        if *id == bt.bucket_table {
            let Some(p4::table_action::Type::Action(a)) =
                t.action.as_ref().and_then(|a| a.r#type.clone())
            else {
                panic!("bucket entry without an action");
            };
            let b = exact(t, bt.bucket.id).expect("bucket key");
            table.push((b, param_value(&a, bt.bucket_member.id) as u16));
        } else if *id == bt.member_table {
            members.push(exact(t, bt.member_index.id).expect("member key") as u16);
        }
    }
    table.sort_unstable();
    members.sort_unstable();
    (table.into_iter().map(|(_, m)| m).collect(), members)
}

#[tokio::test]
async fn flow_mode_writes_the_resilient_table_and_only_changed_buckets() {
    use fare_model::resilient;
    let (fake, mut dp, prog) = connected().await;
    let flow = |w: &[u32]| Group {
        mode: GroupMode::Flow,
        ..group("10.7.0.0/16", w)
    };
    dp.install(&flow(&[3, 3, 4, 4])).await.expect("install");
    let (table, members) = buckets_on_target(&fake, &prog);
    // Member index of each member (port order), from the table itself.
    let fresh = resilient::fresh(&[3, 3, 4, 4], 256);
    assert_eq!(table.len(), 256);
    let index: Vec<u16> = (0..4)
        .map(|m| table[fresh.iter().position(|&x| x == m).expect("member in table")])
        .collect();
    let expect: Vec<u16> = fresh.iter().map(|&m| index[m]).collect();
    assert_eq!(table, expect, "the fresh table");
    assert_eq!(members.len(), 4);

    // 3:3:4:4 -> 3:3:4:3: the model's reassignment, and only its moved buckets written.
    let writes = fake.lock().batches.iter().sum::<usize>();
    dp.install(&flow(&[3, 3, 4, 3])).await.expect("change");
    let a = resilient::reassign(Some(&fresh), &[3, 3, 4, 3], 256);
    let (table, _) = buckets_on_target(&fake, &prog);
    let expect: Vec<u16> = a.table.iter().map(|&m| index[m]).collect();
    assert_eq!(table, expect, "the reassigned table");
    let written = fake.lock().batches.iter().sum::<usize>() - writes;
    // Moved buckets + the selector's 4 members, profile group and group entry, then the
    // old profile group and its 4 members deleted.
    assert!(a.moved > 0 && a.moved <= 20, "moved {}", a.moved);
    assert!(
        written == a.moved + 4 + 1 + 1 + 1 + 4,
        "{written} updates for {} moved buckets",
        a.moved
    );

    // Member 4 leaves: its buckets go to the others, its member entry is deleted after.
    dp.install(&flow(&[3, 3, 4])).await.expect("shrink");
    let prev: Vec<usize> = a
        .table
        .iter()
        .map(|&m| if m < 3 { m } else { usize::MAX })
        .collect();
    let b = resilient::reassign(Some(&prev), &[3, 3, 4], 256);
    let (table, members) = buckets_on_target(&fake, &prog);
    assert_eq!(table, b.table.iter().map(|&m| index[m]).collect::<Vec<_>>());
    assert_eq!(members.len(), 3);
    assert!(!members.contains(&index[3]));

    // Spray mode: the buckets and member entries go (after the route changed).
    dp.install(&group("10.7.0.0/16", &[3, 3, 4]))
        .await
        .expect("spray");
    assert_eq!(buckets_on_target(&fake, &prog), (vec![], vec![]));
    dp.install(&flow(&[1, 1])).await.expect("flow again");
    dp.remove("10.7.0.0/16".parse().expect("prefix"))
        .await
        .expect("remove");
    assert_eq!(buckets_on_target(&fake, &prog), (vec![], vec![]));
}

#[tokio::test]
async fn an_adopted_flow_group_keeps_its_buckets() {
    use fare_model::resilient;
    let (fake, mut dp, prog) = connected().await;
    let flow = |w: &[u32]| Group {
        mode: GroupMode::Flow,
        ..group("10.8.0.0/16", w)
    };
    dp.install(&flow(&[1, 1, 1, 1])).await.expect("install");
    drop(dp);
    // A new agent adopts the group: its change moves only the model's buckets.
    let mut dp = P4RuntimeDataplane::connect(options(&fake.address, 8))
        .await
        .expect("reconnect");
    until_primary(&mut dp).await;
    let (before, _) = buckets_on_target(&fake, &prog);
    dp.install(&flow(&[1, 1, 1, 2])).await.expect("change");
    let (after, _) = buckets_on_target(&fake, &prog);
    let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    let a = resilient::reassign(Some(&resilient::fresh(&[1; 4], 256)), &[1, 1, 1, 2], 256);
    assert_eq!(moved, a.moved, "after adoption");
}

/// fare_tna.p4 (Tofino): its committed P4Info has the bucket and member tables, so flow
/// and flowlet mode write them as on BMv2, and a flowlet group's route carries the gap.
#[tokio::test]
async fn flow_mode_on_the_tna_program_writes_the_bucket_table() {
    use fare_model::resilient;
    let fake = FakeTarget::start().await;
    let build = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4/build");
    // The fake target keeps the device config without reading it (no tofino.bin here).
    let config = std::env::temp_dir().join(format!("fare-tna-config-{}", std::process::id()));
    std::fs::write(&config, b"tofino.bin stand-in").expect("config");
    let mut opts = options(&fake.address, 7);
    opts.pipeline = Some((build.join("tna/fare_tna.p4info.txtpb"), config.clone()));
    let mut dp = P4RuntimeDataplane::connect(opts).await.expect("connect");
    let _ = std::fs::remove_file(&config);
    let prog = dp.program().clone();
    let tna = fare_p4runtime::p4info::P4Info::from_text(
        &std::fs::read_to_string(build.join("tna/fare_tna.p4info.txtpb")).expect("p4info"),
    )
    .expect("parse");
    let wcmp_bucket = tna.table("wcmp.wcmp_bucket").expect("wcmp_bucket");
    assert_eq!(
        prog.buckets.as_ref().map(|b| b.bucket_table),
        Some(fare_p4runtime::p4info::id_of(wcmp_bucket))
    );

    dp.set_flowlet_gap(Duration::from_micros(300));
    let flowlet = Group {
        mode: GroupMode::Flowlet,
        ..group("10.9.0.0/16", &[3, 3, 4, 4])
    };
    dp.install(&flowlet).await.expect("install");
    let (table, members) = buckets_on_target(&fake, &prog);
    let fresh = resilient::fresh(&[3, 3, 4, 4], 256);
    assert_eq!(table.len(), 256);
    let index: Vec<u16> = (0..4)
        .map(|m| table[fresh.iter().position(|&x| x == m).expect("member in table")])
        .collect();
    assert_eq!(table, fresh.iter().map(|&m| index[m]).collect::<Vec<_>>());
    assert_eq!(members.len(), 4);

    let gap = prog.set_group.flowlet_gap.expect("flowlet_gap_us");
    let gaps: Vec<u128> = {
        let s = fake.lock();
        s.tables
            .iter()
            .filter(|((id, _), _)| *id == prog.route_v4.table)
            .filter_map(
                |(_, t)| match t.action.as_ref().and_then(|a| a.r#type.clone()) {
                    Some(p4::table_action::Type::Action(a)) => Some(param_value(&a, gap.id)),
                    _ => None,
                },
            )
            .collect()
    };
    assert_eq!(gaps, vec![300]);
}

/// The profile offers what it says it offers before it is opened (the configuration's
/// checks use `OFFERS`).
#[tokio::test]
async fn offers_what_the_configuration_expects() {
    let (_fake, mut dp, _) = connected().await;
    assert_eq!(
        fare_dataplane::Offers::of(&mut dp),
        P4RuntimeDataplane::OFFERS
    );
}
