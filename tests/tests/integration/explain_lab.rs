//! `fare show explain` on a Figure 1 lab (XDP data plane): the agents' explanation of
//! L8's group toward L1's prefix beside the model's.
//!
//! Expected by hand (draft-xu-idr-fare §4.1, binary16 GB/s): healthy, every spine
//! advertises min(100, the originator's maximum) = 100 Gbps = 12.5 GB/s, bits 0x4A40,
//! and L8 splits 1:1:1:1; live and model agree. After `fare lab degrade S4-L1=75` (the
//! agents see it, the model of the unchanged file does not) S4 takes min(75, max) = 75 and
//! advertises 75 Gbps = 9.375 GB/s, bits 0x48B0: L8 splits 4:4:4:3 live, and the first hop
//! where live and model differ is S4 (its link toward L1), not L8. Given the same
//! degradation (`--degrade S4-L1=75`) the model agrees again.

use anyhow::{ensure, Context, Result};
use fare_integration::lab::{fare, Lab};
use fare_integration::{have_root, have_tool};
use serde_json::Value;

const PREFIX: &str = "10.0.1.0/24";

/// `fare show explain PREFIX --lab NAME --node L8 --json EXTRA...`, parsed.
fn explain(lab: &str, extra: &[&str]) -> Result<Value> {
    let mut args = vec![
        "show", "explain", PREFIX, "--lab", lab, "--node", "L8", "--json",
    ];
    args.extend_from_slice(extra);
    let out = fare(&args)?;
    ensure!(
        out.status.success(),
        "fare show explain: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// (wire bits, weight) of each live path, sorted.
fn live_paths(v: &Value) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = v["live"]["paths"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["wire_bits"].as_u64().unwrap_or(0),
                p["weight"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    out.sort();
    out
}

fn ratio(v: &Value) -> Vec<u64> {
    let mut r: Vec<u64> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect();
    r.sort();
    r
}

#[test]
fn explain_live_beside_model_names_the_first_differing_hop() -> Result<()> {
    let test = "explain_live_beside_model_names_the_first_differing_hop";
    if !have_root(test) || !have_tool(test, "tc") || !have_tool(test, "nsenter") {
        return Ok(());
    }
    let (lab, _) = Lab::start(
        "topologies/draft-fig1.yaml",
        "gx",
        &[
            "--dataplane",
            "xdp",
            "--no-arn",
            "--converge-timeout",
            "120",
        ],
    )?;
    let name = lab.name.clone();

    let healthy = explain(&name, &[])?;
    ensure!(
        healthy["first_difference"].is_null(),
        "healthy lab differs from the model: {}",
        healthy["first_difference"]
    );
    ensure!(
        live_paths(&healthy) == vec![(0x4A40, 1); 4],
        "healthy live paths: {:?}",
        live_paths(&healthy)
    );
    ensure!(ratio(&healthy["model"]["reduction"]["ratio"]) == [1, 1, 1, 1]);
    ensure!(healthy["live"]["rule"] == "min-sum");

    lab.json("degrade", &["S4-L1=75", "--timeout", "60"])?;
    let start = std::time::Instant::now();
    let degraded = loop {
        let v = explain(&name, &[])?;
        if ratio(&v["live"]["ratio"]) == [3, 4, 4, 4] || start.elapsed().as_secs() > 30 {
            break v;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let mut want = vec![(0x4A40, 4); 3];
    want.insert(0, (0x48B0, 3));
    ensure!(
        live_paths(&degraded) == want,
        "degraded live paths: {:?}",
        live_paths(&degraded)
    );
    ensure!(ratio(&degraded["model"]["reduction"]["ratio"]) == [1, 1, 1, 1]);
    let first = &degraded["first_difference"];
    ensure!(first["node"] == "S4", "first difference: {first}");
    let what = first["what"].as_array().context("no `what`")?;
    ensure!(
        what.contains(&serde_json::json!({
            "link": "S4-L1", "field": "link_gbps", "live": 75.0, "model": 100.0
        })),
        "what: {what:?}"
    );

    let same = explain(&name, &["--degrade", "S4-L1=75"])?;
    ensure!(
        same["first_difference"].is_null(),
        "model with the same degradation differs: {}",
        same["first_difference"]
    );
    ensure!(ratio(&same["model"]["reduction"]["ratio"]) == [3, 4, 4, 4]);
    lab.down()
}
