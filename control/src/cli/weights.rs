//! `fare weights`: the WCMP group of every (node, prefix) of a topology, computed offline
//! as BGP with the Path Bandwidth community would leave it after convergence.

use super::InputError;

use fare_model::sim::{self, RouteGroup};
use fare_model::topology;
use ipnet::IpNet;
use std::io::Write;
use std::path::PathBuf;

/// The long description of `fare weights --help` and of its manual page (set on the
/// subcommand: a doc comment there would replace one set here).
pub const LONG_ABOUT: &str =
    "Computes, for every node of a topology file, the WCMP group of every prefix it \
reaches: the members (neighbor and link), each member's path bandwidth and its integer weight. \
Failures and degradations are applied first, as BGP would see them once converged.\n\n\
Example: fare weights topologies/whitepaper-asymmetric.yaml --mode averaged --node Leaf2";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topology YAML file (its format: configuration.md in the documentation).
    pub topology: PathBuf,
    /// Print a JSON array: [{"node","prefix","members":[{"via","link","bandwidth_gbps","weight"}]}].
    #[arg(long)]
    pub json: bool,
    /// How the model computes (and what fails or degrades).
    #[command(flatten)]
    pub model: super::model_args::ModelArgs,
    /// Only this node's groups.
    #[arg(long)]
    pub node: Option<String>,
    /// Only this prefix's groups.
    #[arg(long)]
    pub prefix: Option<IpNet>,
    /// Show each group as a resilient table of N buckets (flow mode; the XDP data plane
    /// uses 256): buckets per member, and with --fail/--degrade how many buckets move from
    /// the unchanged fabric's table against the least possible.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub buckets: Option<u32>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut topo = topology::load(&args.topology)?;
    for change in
        super::model_args::changes(&topo, &args.topology, &args.model.fail, &args.model.degrade)?
    {
        change
            .apply(&mut topo)
            .map_err(|e| InputError(format!("{}: {e}", args.topology.display())))?;
    }
    if let Some(node) = &args.node {
        if topo.node_id(node).is_none() {
            return Err(InputError(format!(
                "{}: --node: unknown node `{node}`",
                args.topology.display()
            ))
            .into());
        }
    }
    if let Some(prefix) = args.prefix {
        if !topo.nodes.iter().any(|n| n.prefixes.contains(&prefix)) {
            return Err(InputError(format!(
                "{}: --prefix: no node originates {prefix}",
                args.topology.display()
            ))
            .into());
        }
    }
    // Every core for the whole fabric (explain traces on one).
    let options = sim::Options {
        threads: 0,
        ..args.model.options()
    };
    let groups = selected(&sim::solve(&topo, &options), &args);
    let tables = match args.buckets {
        Some(b) => {
            // The unchanged fabric's groups are the tables the changes start from.
            let before = if args.model.fail.is_empty() && args.model.degrade.is_empty() {
                Vec::new()
            } else {
                selected(
                    &sim::solve(&topology::load(&args.topology)?, &options),
                    &args,
                )
            };
            Some(buckets::tables(&before, &groups, b as usize))
        }
        None => None,
    };
    // Rendered whole, then written: a failed write is an OutputError (see cli::main).
    let mut out = Vec::new();
    if args.json {
        match &tables {
            Some(t) => serde_json::to_writer(&mut out, &buckets::json(&groups, t)?)?,
            None => serde_json::to_writer(&mut out, &groups_json(&groups)?)?,
        }
        writeln!(out)?;
    } else {
        write_table(&mut out, &groups, tables.as_deref())?;
    }
    super::write_out(&out)?;
    Ok(())
}

/// The groups of the nodes and prefixes asked for.
fn selected(solution: &sim::Solution, args: &Args) -> Vec<RouteGroup> {
    solution
        .route_groups()
        .into_iter()
        .filter(|g| args.node.as_ref().is_none_or(|n| &g.node == n))
        .filter(|g| args.prefix.is_none_or(|p| g.prefix == p))
        .collect()
}

/// The groups as JSON, each with what the table shows besides its members: `size` (the
/// sum of the weights), `delta` (oversubscription against the bandwidths, 1.0 = exact)
/// and `ecmp` (plain ECMP: some route lacked the Path Bandwidth community); an FRR
/// node's group also has `"target": "frr"`.
pub fn groups_json(groups: &[RouteGroup]) -> serde_json::Result<serde_json::Value> {
    let list = groups
        .iter()
        .map(|g| {
            let mut v = serde_json::to_value(g)?;
            let size: u64 = g.members.iter().map(|m| u64::from(m.weight)).sum();
            v["size"] = size.into();
            v["delta"] = g.delta.into();
            v["ecmp"] = g.ecmp.into();
            if g.frr {
                // Run by FRR: weights from the Link Bandwidth community, FRR's way.
                v["target"] = "frr".into();
            }
            Ok(v)
        })
        .collect::<serde_json::Result<Vec<_>>>()?;
    Ok(list.into())
}

fn write_table(
    out: &mut impl Write,
    groups: &[RouteGroup],
    tables: Option<&[buckets::Table]>,
) -> std::io::Result<()> {
    if groups.is_empty() {
        return writeln!(out, "(no groups)");
    }
    // A column as wide as its widest member field, at least its header.
    let width = |field: fn(&sim::Member) -> usize, header: usize| {
        groups
            .iter()
            .flat_map(|g| g.members.iter().map(field))
            .fold(header, usize::max)
    };
    let w_via = width(|m| m.via.len(), 3);
    let w_link = width(|m| m.link.len(), 4);
    for (k, g) in groups.iter().enumerate() {
        let table = tables.and_then(|t| t.get(k));
        let total: u64 = g.members.iter().map(|m| u64::from(m.weight)).sum();
        let kind = match (g.frr, g.ecmp) {
            (true, true) => "FRR ECMP",
            (true, false) => "FRR UCMP (Link Bandwidth)",
            (false, true) => "ECMP",
            (false, false) => "WCMP",
        };
        writeln!(
            out,
            "{} {}  {kind}, {} member{}, group size {total}, delta {:.4}",
            g.node,
            g.prefix,
            g.members.len(),
            if g.members.len() == 1 { "" } else { "s" },
            g.delta
        )?;
        if let Some(t) = table {
            writeln!(out, "    {}", t.summary())?;
        }
        for (i, m) in g.members.iter().enumerate() {
            let share = if total > 0 {
                100.0 * m.weight as f64 / total as f64
            } else {
                0.0
            };
            write!(
                out,
                "    via {:w_via$}  link {:w_link$}  {:>9} Gbps  weight {:>4}  {:>5.1}%",
                m.via,
                m.link,
                trim_float(m.bandwidth_gbps),
                m.weight,
                share
            )?;
            match table {
                Some(t) => writeln!(out, "  buckets {:>5}", t.counts[i])?,
                None => writeln!(out)?,
            }
        }
    }
    Ok(())
}

fn trim_float(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

/// `--buckets`: each group as a resilient bucket table (`fare_model::resilient`).
mod buckets {
    use fare_model::resilient;
    use fare_model::sim::RouteGroup;

    /// One group's table: buckets per member, and the change from the unchanged fabric.
    pub struct Table {
        pub buckets: usize,
        pub counts: Vec<usize>,
        /// (buckets moved, least possible fraction) when there is an unchanged group.
        pub change: Option<(usize, f64)>,
    }

    impl Table {
        pub fn summary(&self) -> String {
            let b = self.buckets;
            match self.change {
                None => format!("resilient table of {b} buckets"),
                Some((moved, least)) => format!(
                    "resilient table of {b} buckets: {moved} moved ({:.1}%) by the changes, \
                     least possible {:.1}%",
                    100.0 * moved as f64 / b as f64,
                    100.0 * least
                ),
            }
        }
    }

    /// The tables of `groups`, each reassigned from the table of the same (node, prefix)
    /// in `before` when there is one (members matched by neighbor and link).
    pub fn tables(before: &[RouteGroup], groups: &[RouteGroup], buckets: usize) -> Vec<Table> {
        groups
            .iter()
            .map(|g| {
                let weights: Vec<u32> = g.members.iter().map(|m| m.weight).collect();
                let old = before
                    .iter()
                    .find(|o| o.node == g.node && o.prefix == g.prefix);
                let Some(old) = old else {
                    let table = resilient::fresh(&weights, buckets);
                    let counts = resilient::counts(&table, weights.len());
                    return Table {
                        buckets,
                        counts,
                        change: None,
                    };
                };
                // The old group's members renumbered as the new group's; gone: usize::MAX.
                let index: Vec<usize> = old
                    .members
                    .iter()
                    .map(|m| {
                        g.members
                            .iter()
                            .position(|n| n.via == m.via && n.link == m.link)
                            .unwrap_or(usize::MAX)
                    })
                    .collect();
                let mut old_weights = vec![0u32; weights.len()];
                let old_w: Vec<u32> = old.members.iter().map(|m| m.weight).collect();
                for (&i, &w) in index.iter().zip(&old_w) {
                    if let Some(x) = old_weights.get_mut(i) {
                        *x = w;
                    }
                }
                // Weight of members that left, so the least possible counts them too.
                let gone: u32 = index
                    .iter()
                    .zip(&old_w)
                    .filter(|(&i, _)| i == usize::MAX)
                    .map(|(_, &w)| w)
                    .sum();
                old_weights.push(gone);
                let mut new_weights = weights.clone();
                new_weights.push(0);
                let previous: Vec<usize> = resilient::fresh(&old_w, buckets)
                    .into_iter()
                    .map(|m| index[m])
                    .collect();
                let a = resilient::reassign(Some(&previous), &weights, buckets);
                Table {
                    buckets,
                    counts: resilient::counts(&a.table, weights.len()),
                    change: Some((a.moved, resilient::tv_distance(&old_weights, &new_weights))),
                }
            })
            .collect()
    }

    /// The JSON output with `buckets` per member and, after changes, `buckets_moved` and
    /// `least_moved_fraction` per group.
    pub fn json(groups: &[RouteGroup], tables: &[Table]) -> serde_json::Result<serde_json::Value> {
        let mut v = super::groups_json(groups)?;
        if let Some(list) = v.as_array_mut() {
            for (g, t) in list.iter_mut().zip(tables) {
                if let Some(members) = g.get_mut("members").and_then(|m| m.as_array_mut()) {
                    for (m, c) in members.iter_mut().zip(&t.counts) {
                        m["buckets"] = (*c).into();
                    }
                }
                if let Some((moved, least)) = t.change {
                    g["buckets_moved"] = moved.into();
                    g["least_moved_fraction"] = least.into();
                }
            }
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route_group(weights: &[(&str, u32)]) -> RouteGroup {
        RouteGroup {
            node: "L8".into(),
            prefix: "10.0.1.0/24".parse().unwrap(),
            members: weights
                .iter()
                .map(|&(via, weight)| sim::Member {
                    via: via.into(),
                    link: format!("{via}-L8"),
                    bandwidth_gbps: 100.0,
                    weight,
                })
                .collect(),
            delta: 1.0,
            ecmp: false,
            frr: false,
        }
    }

    /// 1:1:1:1 -> 4:4:4:3 over 256 buckets: 64 each, then 68 r4 (x3) and 51 r3, the extra
    /// bucket to S1: 69/68/68/51, S4 gives 13; least = 1/4 - 3/15 = 5 %. A member that
    /// leaves counts as weight 0 in the least possible share.
    #[test]
    fn bucket_tables_from_the_unchanged_groups() {
        let before = [route_group(&[("S1", 1), ("S2", 1), ("S3", 1), ("S4", 1)])];
        let after = [route_group(&[("S1", 4), ("S2", 4), ("S3", 4), ("S4", 3)])];
        let t = &buckets::tables(&before, &after, 256)[0];
        assert_eq!(t.counts, [69, 68, 68, 51]);
        let (moved, least) = t.change.unwrap();
        assert_eq!(moved, 13);
        assert!((least - 0.05).abs() < 1e-12);
        let gone = [route_group(&[("S1", 1), ("S2", 1), ("S3", 1)])];
        let t = &buckets::tables(&before, &gone, 256)[0];
        assert_eq!(t.counts, [86, 85, 85]);
        let (moved, least) = t.change.unwrap();
        assert_eq!(moved, 64);
        assert!((least - 0.25).abs() < 1e-12);
        assert!(buckets::tables(&[], &after, 256)[0].change.is_none());
    }
}
