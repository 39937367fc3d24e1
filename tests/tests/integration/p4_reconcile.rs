//! fare's P4Runtime client against BMv2: what it writes is read back by an independent
//! decoder (the PyPI `p4runtime` bindings), and a reconnecting client adopts the switch's
//! groups instead of rewriting them. Skipped (with the reason) without root, BMv2 or the venv.

use anyhow::{ensure, Context, Result};
use fare::dataplane::{Dataplane, Group, GroupMode};
use fare::dp_p4::{GroupForm, P4RuntimeDataplane, P4RuntimeOptions};
use fare_integration::p4::{
    bmv2_available, have_p4runtime_python, in_netns, members, p4runtime_venv, pipeline, Fabric,
    GRPC_ADDR,
};
use fare_integration::{repo_root, run};

fn options(fabric: &Fabric, form: GroupForm) -> P4RuntimeOptions {
    P4RuntimeOptions {
        form,
        ..fabric.options(7)
    }
}

fn group_3344() -> Result<Group> {
    Ok(Group {
        prefix: "198.18.0.0/16".parse()?,
        mode: GroupMode::Spray,
        members: members(&[3, 3, 4, 4], |_| 100.0),
    })
}

#[test]
fn p4_reconcile_adopts_switch_state() -> Result<()> {
    let Some(fabric) = Fabric::for_test("p4_reconcile_adopts_switch_state", "p4r", 4)? else {
        return Ok(());
    };
    let sw = fabric.bmv2.sw.name.clone();
    let opts = options(&fabric, GroupForm::Weighted);
    in_netns(&sw, move || async move {
        let g = group_3344()?;
        {
            let mut dp = P4RuntimeDataplane::connect(opts.clone()).await?;
            dp.install(&g).await?;
        }
        // A new session (agent restart): same pipeline cookie, so nothing is pushed and the
        // group is adopted as it is on the switch.
        let mut dp = P4RuntimeDataplane::connect(opts).await?;
        let groups = dp.groups().await?;
        ensure!(groups.len() == 1, "adopted {} groups", groups.len());
        let adopted = &groups[0].group;
        ensure!(
            adopted.prefix == g.prefix && adopted.mode == g.mode,
            "{adopted:?}"
        );
        let weights: Vec<u32> = adopted.members.iter().map(|m| m.weight).collect();
        ensure!(weights == vec![3, 3, 4, 4], "adopted weights {weights:?}");
        let ifaces: Vec<&str> = adopted
            .members
            .iter()
            .map(|m| m.interface.as_str())
            .collect();
        ensure!(
            ifaces == vec!["p1", "p2", "p3", "p4"],
            "adopted interfaces {ifaces:?}"
        );
        // Re-installing the same group writes nothing: the profile group id stays.
        let before = read_profile_groups(&mut dp).await?;
        dp.install(&g).await?;
        let after = read_profile_groups(&mut dp).await?;
        ensure!(
            before == after,
            "reinstall rewrote the group: {before:?} -> {after:?}"
        );
        Ok(())
    })
}

async fn read_profile_groups(dp: &mut P4RuntimeDataplane) -> Result<Vec<u32>> {
    use fare::p4runtime::proto::p4::v1 as p4;
    let selector = dp.program().selector;
    let entities = dp
        .client()
        .read(vec![p4::Entity {
            entity: Some(p4::entity::Entity::ActionProfileGroup(
                p4::ActionProfileGroup {
                    action_profile_id: selector,
                    ..Default::default()
                },
            )),
        }])
        .await?;
    Ok(entities
        .into_iter()
        .filter_map(|e| match e.entity {
            Some(p4::entity::Entity::ActionProfileGroup(g)) => Some(g.group_id),
            _ => None,
        })
        .collect())
}

/// Writes with fare's client (weighted and replicated forms), reads back with Python.
#[test]
fn p4_python_reads_back_our_writes() -> Result<()> {
    let test = "p4_python_reads_back_our_writes";
    if !bmv2_available(test) || !have_p4runtime_python(test) {
        return Ok(());
    }
    for form in [GroupForm::Weighted, GroupForm::Replicated] {
        let fabric = Fabric::new("p4p", 4)?;
        let sw = fabric.bmv2.sw.name.clone();
        let opts = options(&fabric, form);
        in_netns(&sw, move || async move {
            let mut dp = P4RuntimeDataplane::connect(opts).await?;
            dp.install(&group_3344()?).await?;
            Ok(())
        })?;
        let (p4info, _) = pipeline();
        let py = p4runtime_venv().join("bin/python3");
        let script = repo_root().join("tests/p4/readback.py");
        let out = run(
            "ip",
            &[
                "netns",
                "exec",
                &fabric.bmv2.sw.name,
                &py.to_string_lossy(),
                &script.to_string_lossy(),
                GRPC_ADDR,
                "1",
                &p4info.to_string_lossy(),
            ],
        )?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("readback JSON")?;
        let routes = v["routes"].as_array().context("routes")?;
        ensure!(routes.len() == 1, "routes {routes:?}");
        ensure!(routes[0]["prefix"] == "198.18.0.0/16", "{:?}", routes[0]);
        ensure!(routes[0]["spray"] == 1, "{:?}", routes[0]);
        let gid = routes[0]["group_id"].clone();
        let entries = v["group_entries"].as_array().context("group entries")?;
        ensure!(
            entries.len() == 1 && entries[0]["group_id"] == gid,
            "{entries:?}"
        );
        let groups = v["groups"].as_array().context("groups")?;
        ensure!(groups.len() == 1, "{groups:?}");
        ensure!(entries[0]["profile_group"] == groups[0]["group_id"], "{v}");
        let members = v["members"].as_array().context("members")?;
        // Weight per port, summed over replicas.
        let mut per_port = [0i64; 5];
        for gm in groups[0]["members"].as_array().context("group members")? {
            let m = members
                .iter()
                .find(|m| m["member_id"] == gm["member_id"])
                .context("group member without member")?;
            let port = m["port"].as_u64().context("port")? as usize;
            ensure!(
                m["dst_mac"].as_u64() == Some(0x0200_0000_0000 + port as u64),
                "member {m}"
            );
            per_port[port] += gm["weight"].as_i64().context("weight")?;
        }
        ensure!(
            per_port[1..] == [3, 3, 4, 4],
            "{form:?}: weights by port {per_port:?}"
        );
        if form == GroupForm::Replicated {
            ensure!(
                members.len() == 14,
                "replicated form: {} members",
                members.len()
            );
        }
    }
    Ok(())
}
