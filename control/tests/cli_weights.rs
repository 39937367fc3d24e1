//! `fare weights` and `fare topo` as a user runs them: the JSON contract of docs/configuration.md and
//! exit code 2 with FILE:LINE: problem on bad input. No root needed.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fare(args: &[&str]) -> Output {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    Command::new(env!("CARGO_BIN_EXE_fare"))
        .args(args)
        .current_dir(root)
        .output()
        .expect("run fare")
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = fare(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON array")
}

/// The members of one group of `fare weights --json`.
fn members(group: &serde_json::Value) -> impl Iterator<Item = &serde_json::Value> {
    group["members"].as_array().expect("members").iter()
}

/// The member weights of the first group.
fn first_weights(v: &serde_json::Value) -> Vec<u64> {
    members(&v[0])
        .map(|m| m["weight"].as_u64().expect("weight"))
        .collect()
}

#[test]
fn whitepaper_asymmetric_json_contract() {
    let v = json(&[
        "weights",
        "topologies/whitepaper-asymmetric.yaml",
        "--json",
        "--mode",
        "averaged",
    ]);
    let leaf2 = v
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["node"] == "Leaf2" && g["prefix"] == "192.0.2.0/24")
        .expect("Leaf2 group");
    let members: Vec<(String, String, f64, u64)> = members(leaf2)
        .map(|m| {
            (
                m["via"].as_str().unwrap().to_string(),
                m["link"].as_str().unwrap().to_string(),
                m["bandwidth_gbps"].as_f64().unwrap(),
                m["weight"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        members,
        [
            ("Spine1".into(), "L5".into(), 75.0, 3),
            ("Spine1".into(), "L6".into(), 75.0, 3),
            ("Spine2".into(), "L7".into(), 100.0, 4),
            ("Spine2".into(), "L8".into(), 100.0, 4),
        ]
    );
    // Exactly the contract's keys, with what the text shows: group size 3+3+4+4 = 14,
    // and 3:3:4:4 is the exact 75:75:100:100 ratio, so no member is oversubscribed.
    let mut keys: Vec<&str> = leaf2
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["delta", "ecmp", "members", "node", "prefix", "size"]);
    assert_eq!(leaf2["size"].as_u64(), Some(14));
    assert_eq!(leaf2["delta"].as_f64(), Some(1.0));
    assert_eq!(leaf2["ecmp"].as_bool(), Some(false));
}

#[test]
fn heterogeneous_one_third_two_thirds() {
    let v = json(&[
        "weights",
        "topologies/whitepaper-heterogeneous.yaml",
        "--json",
        "--node",
        "Leaf1",
    ]);
    let w = first_weights(&v);
    assert_eq!(w, [1, 1, 1, 1, 2, 2, 2, 2]);
}

#[test]
fn fail_and_degrade_recompute() {
    let v = json(&[
        "weights",
        "topologies/arn-spine-leaf.yaml",
        "--json",
        "--fail",
        "spine1-leaf2",
        "--node",
        "leaf1",
    ]);
    let vias: Vec<&str> = members(&v[0]).map(|m| m["via"].as_str().unwrap()).collect();
    assert_eq!(vias, ["spine2"]);
    let v = json(&[
        "weights",
        "topologies/arn-spine-leaf.yaml",
        "--json",
        "--degrade",
        "spine1-leaf2=25",
        "--node",
        "leaf1",
        "--max-group-size",
        "4",
    ]);
    let w = first_weights(&v);
    // 25:100 = 1:4 needs 5 entries; with 4 the best is 1:3.
    assert_eq!(w, [1, 3]);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = std::env::temp_dir().join(format!("fare-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "nodes:\n  - {name: A, role: leaf}\nlinks:\n  - {a: A, b: B, gbps: 1}\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    for args in [
        vec!["weights", bad],
        vec!["topo", "check", bad],
        vec![
            "weights",
            "topologies/arn-spine-leaf.yaml",
            "--fail",
            "spineX-leaf1",
        ],
        vec![
            "weights",
            "topologies/arn-spine-leaf.yaml",
            "--degrade",
            "spine1-leaf1=-3",
        ],
        vec!["weights", "/nonexistent/topology.yaml"],
    ] {
        let out = fare(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    let out = fare(&["weights", bad]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml:4: link to unknown node `B`"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn generated_fabric_round_trips() {
    let out = fare(&["topo", "gen", "clos5", "--pods", "2", "--leaves", "2"]);
    assert!(out.status.success());
    let dir = std::env::temp_dir().join(format!("fare-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("g.yaml");
    std::fs::write(&f, &out.stdout).unwrap();
    let out = fare(&["topo", "check", f.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}
