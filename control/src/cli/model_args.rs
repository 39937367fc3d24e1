//! How the model computes, as `fare weights`, `fare explain` and `fare analyze` are told:
//! the flags they share and the failures and degradations (`--fail`, `--degrade`) they
//! apply to a topology first.

use super::InputError;
use fare_model::bandwidth::{DraftOptions, Encoding, Mode};
use fare_model::parallel::ParallelLinks;
use fare_model::sim::{self, Change};
use fare_model::topology::Topology;

/// How the model computes: the flags `fare weights`, `fare explain` and `fare analyze`
/// share (analyze sweeps failures itself: it refuses --fail/--degrade).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ModelArgs {
    /// Propagation rule: `draft` (min/sum, draft-xu-idr-fare; the default) or `averaged`
    /// (white paper: sum / outgoing interfaces).
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Largest group (sum of weights) the data plane accepts; weights are reduced with the
    /// smallest oversubscription possible.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_group_size: Option<u32>,
    /// Take every link between nodes A and B down (repeatable).
    #[arg(long, value_name = "A-B")]
    pub fail: Vec<String>,
    /// Set every link between A and B to GBPS, e.g. a partial-lane failure (repeatable).
    #[arg(long, value_name = "A-B=GBPS")]
    pub degrade: Vec<String>,
    /// Draft, 5-stage: super-spines do not attach the optional non-transitive link
    /// bandwidth (spines of other PoDs then use plain ECMP).
    #[arg(long)]
    pub no_link_community: bool,
    /// Draft, 5-stage: spines of other PoDs lower the transitive value to their total
    /// bandwidth toward the next-next hop when smaller (optional in the draft).
    #[arg(long)]
    pub remote_spine_update: bool,
    /// Wire encoding of the Path Bandwidth value, applied at every hop as the agents do
    /// (`binary16`, the default: IEEE 754 half precision; `float32-upper16`: the upper half
    /// of a binary32, for older speakers).
    #[arg(long, value_enum)]
    pub encoding: Option<Encoding>,
    /// Several links between two switches (one session each): `node-proportional` (the
    /// default) or `node-even` compute path bandwidth per node, min(aggregate of the links,
    /// the advertised value), as draft-xu-idr-fare-05 requires, split in proportion to the
    /// links or evenly; `session` applies min(link, advertised) per session (older text).
    #[arg(long, value_enum)]
    pub parallel_links: Option<ParallelLinks>,
}

impl ModelArgs {
    pub fn options(&self) -> sim::Options {
        sim::Options {
            mode: self.mode.unwrap_or_default(),
            max_group_size: self.max_group_size,
            draft: DraftOptions {
                link_community: !self.no_link_community,
                remote_spine_update: self.remote_spine_update,
            },
            encoding: self.encoding.unwrap_or_default(),
            parallel: self.parallel_links.unwrap_or_default(),
            threads: 1,
            no_stub_sharing: false,
        }
    }
}

/// The --fail and --degrade arguments as changes, with node names checked.
pub fn changes(
    topo: &Topology,
    file: &std::path::Path,
    fail: &[String],
    degrade: &[String],
) -> Result<Vec<Change>, InputError> {
    let file = file.display();
    let mut out = Vec::new();
    for f in fail {
        let (a, b) =
            split_pair(topo, f).map_err(|e| InputError(format!("{file}: --fail {f}: {e}")))?;
        out.push(Change::Fail(a, b));
    }
    for d in degrade {
        let err = |e: String| InputError(format!("{file}: --degrade {d}: {e}"));
        let (pair, gbps) = d
            .rsplit_once('=')
            .ok_or_else(|| err("expected A-B=GBPS".into()))?;
        let gbps: f64 = gbps
            .trim()
            .parse()
            .map_err(|_| err(format!("`{gbps}` is not a number of Gbps")))?;
        fare_model::bandwidth::check_gbps(gbps).map_err(err)?;
        let (a, b) = split_pair(topo, pair).map_err(err)?;
        out.push(Change::Degrade(a, b, gbps));
    }
    Ok(out)
}

/// Splits "A-B" at the dash that separates two known node names (names may hold dashes).
fn split_pair(topo: &Topology, s: &str) -> Result<(String, String), String> {
    let mut unknown = None;
    for (i, _) in s.match_indices('-') {
        let (a, b) = (&s[..i], &s[i + 1..]);
        match (topo.node_id(a), topo.node_id(b)) {
            (Some(_), Some(_)) => return Ok((a.to_string(), b.to_string())),
            (None, _) if unknown.is_none() => unknown = Some(a.to_string()),
            (_, None) if unknown.is_none() => unknown = Some(b.to_string()),
            _ => {}
        }
    }
    match unknown {
        Some(n) => Err(format!("unknown node `{n}`")),
        None => Err("expected two node names joined by `-`".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fare_model::topology::gen;

    #[test]
    fn pairs_split_at_the_right_dash() {
        let mut t = gen::clos3(2, 1, 100.0, 1);
        t.add_node(fare_model::topology::Node::new(
            "a-b",
            fare_model::topology::Role::Host,
        ));
        assert_eq!(split_pair(&t, "S1-L1").unwrap(), ("S1".into(), "L1".into()));
        assert_eq!(
            split_pair(&t, "a-b-S1").unwrap(),
            ("a-b".into(), "S1".into())
        );
        assert_eq!(split_pair(&t, "S9-L1").unwrap_err(), "unknown node `S9`");
        assert!(split_pair(&t, "S1").is_err());
    }
}
