//! `fare explain TOPOLOGY NODE PREFIX`: why the model gives NODE's group for PREFIX its
//! weights, hop by hop (`sim::explain`: the model's own computation, traced).

use super::InputError;
use fare_model::bandwidth::{Encoding, Mode};
use fare_model::parallel::ParallelLinks;
use fare_model::sim::explain::{self, Explanation, Hop, HopRoute, HopRule, WireValue};
use fare_model::topology;
use ipnet::IpNet;
use std::fmt::Write as _;
use std::path::PathBuf;

/// The long description of `fare explain --help` and of its manual page (set on the
/// subcommand: a doc comment there would replace one set here).
pub const LONG_ABOUT: &str =
    "Explains one group of the model: per member, the paths to the origin; per node \
on them, the routes it received (link, the value as sent, the 16 bits on the wire, decoded and \
rounded), the rule it applied (min/sum, super-spine pass-through, the remote spine's link value, \
averaged sum / N) and what it advertised; then the ratio reduction within the encoding's \
tolerance and the data plane limit's reduction with its oversubscription (delta).\n\n\
Example: fare explain topologies/draft-fig1.yaml L8 10.0.1.0/24 --degrade S4-L1=75";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topology YAML file (its format: configuration.md in the documentation).
    pub topology: PathBuf,
    /// The node whose group is explained.
    pub node: String,
    /// The prefix (as a node of the topology originates it).
    pub prefix: IpNet,
    #[command(flatten)]
    pub model: super::model_args::ModelArgs,
    /// Print the explanation as JSON (`sim::explain::Explanation`).
    #[arg(long)]
    pub json: bool,
}

/// The model's explanation of `node`'s group for `prefix`; bad input is an InputError
/// naming the file.
pub fn model_explanation(
    file: &std::path::Path,
    model: &super::model_args::ModelArgs,
    node: &str,
    prefix: IpNet,
) -> anyhow::Result<Explanation> {
    let mut topo = topology::load(file)?;
    for change in super::model_args::changes(&topo, file, &model.fail, &model.degrade)? {
        change
            .apply(&mut topo)
            .map_err(|e| InputError(format!("{}: {e}", file.display())))?;
    }
    explain::explain(&topo, &model.options(), node, prefix)
        .map_err(|e| InputError(format!("{}: {e}", file.display())).into())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let e = model_explanation(&args.topology, &args.model, &args.node, args.prefix)?;
    let out = if args.json {
        serde_json::to_string_pretty(&e)? + "\n"
    } else {
        text(&e)
    };
    super::write_out(out.as_bytes())?;
    Ok(())
}

/// A number of Gbps as shown: `max` for the originator's infinity, else up to 7 decimals.
pub fn gbps(x: f64) -> String {
    if x.is_infinite() {
        return "max".into();
    }
    let s = format!("{x:.7}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn wire(w: &WireValue) -> String {
    let rounding = if w.rounding_gbps == 0.0 {
        "exact".to_string()
    } else {
        format!("rounded {:+.7}", w.rounding_gbps)
    };
    format!(
        "sent {} -> wire 0x{:04x} = {} ({rounding})",
        gbps(w.sent_gbps),
        w.bits,
        gbps(w.decoded_gbps)
    )
}

fn route_line(r: &HopRoute) -> String {
    let mut s = format!(
        "from {} over {} ({} Gbps): ",
        r.via,
        r.link,
        gbps(r.link_gbps)
    );
    match &r.wire {
        Some(w) => s += &wire(w),
        None => s += "no Path Bandwidth community",
    }
    if let Some(lv) = &r.link_value {
        let _ = write!(s, "; link value {}", wire(lv));
    }
    if let Some(p) = &r.parallel {
        let _ = write!(
            s,
            "; per node over {} links: min(aggregate {}, advertised {}) = {}, this link's share {}",
            p.links,
            gbps(p.aggregate_gbps),
            gbps(p.advertised_gbps),
            gbps(p.node_gbps),
            gbps(p.gbps)
        );
    }
    let _ = write!(s, "; bandwidth {}", gbps(r.bandwidth_gbps));
    s
}

/// One hop: its rule, routes and advertisement.
pub fn hop_text(h: &Hop) -> String {
    let mut s = format!(
        "  {} (distance {}): {}\n",
        h.node,
        h.distance,
        h.rule.describe()
    );
    for r in &h.routes {
        let _ = writeln!(s, "      {}", route_line(r));
    }
    if h.ecmp {
        s += "      plain ECMP: a route lacks the community the rule needs\n";
    }
    if let (Some(sum), Some(n)) = (h.path_sum_gbps, h.outgoing) {
        let _ = writeln!(
            s,
            "      sum {} / N {n} = {}",
            gbps(sum),
            gbps(sum / n as f64)
        );
    } else if let Some(a) = h.advertised_gbps.filter(|_| h.rule != HopRule::Origin) {
        let _ = writeln!(s, "      advertises {}", gbps(a));
    }
    if let Some(lv) = h.link_value_gbps {
        let _ = writeln!(s, "      attaches link value {} (non-transitive)", gbps(lv));
    }
    s
}

/// The whole explanation as text.
pub fn text(e: &Explanation) -> String {
    let mode = match e.mode {
        Mode::Draft => "draft",
        Mode::Averaged => "averaged",
    };
    let encoding = match e.encoding {
        Encoding::Binary16 => "binary16",
        Encoding::Float32Upper16 => "float32-upper16",
    };
    let mut s = format!(
        "{} {}: {mode} mode, {encoding} encoding, parallel links {} ({}), originated by {}\n",
        e.node,
        e.prefix,
        e.parallel_links.name(),
        parallel_rule(e.parallel_links),
        e.origins.join(", ")
    );
    s += "members:\n";
    for m in &e.members {
        let _ = writeln!(
            s,
            "  via {} link {}: {} Gbps",
            m.via,
            m.link,
            gbps(m.bandwidth_gbps)
        );
        for p in &m.paths {
            let _ = writeln!(s, "      path {}", p.join(" <- "));
        }
    }
    s += "hops, nearest the origin first:\n";
    for (i, h) in e.hops.iter().enumerate() {
        // The explained node's own advertisement is not what its group is made of.
        if i + 1 == e.hops.len() {
            let own = Hop {
                advertised_gbps: None,
                link_value_gbps: None,
                path_sum_gbps: None,
                outgoing: None,
                ..h.clone()
            };
            s += &hop_text(&own);
        } else {
            s += &hop_text(h);
        }
    }
    s + &reduction_text(e)
}

/// Which text the parallel-links setting follows, as `fare explain` names it.
pub fn parallel_rule(p: ParallelLinks) -> &'static str {
    match p {
        ParallelLinks::NodeEven => "per node, split evenly: draft-xu-idr-fare-05",
        ParallelLinks::NodeProportional => {
            "per node, split in proportion to the links: draft-xu-idr-fare-05"
        }
        ParallelLinks::Session => "per session: draft-xu-idr-fare-04 and earlier",
    }
}

fn ratio(w: &[u32]) -> String {
    let parts: Vec<String> = w.iter().map(|x| x.to_string()).collect();
    parts.join(":")
}

fn reduction_text(e: &Explanation) -> String {
    let r = &e.reduction;
    let bw: Vec<String> = r.bandwidths_gbps.iter().map(|&b| gbps(b)).collect();
    let size = |w: &[u32]| w.iter().map(|&x| u64::from(x)).sum::<u64>();
    let mut s = format!("weights from bandwidths {}:\n", bw.join(" : "));
    let _ = writeln!(
        s,
        "  ratio within {:.3} % (the encoding's tolerance): {}, {} entries, delta {:.4}",
        r.tolerance * 100.0,
        ratio(&r.ratio),
        size(&r.ratio),
        r.ratio_delta
    );
    match r.limit {
        Some(l) if r.weights != r.ratio => {
            let _ = writeln!(
                s,
                "  data plane limit {l}: reduced to {}, {} entries, delta {:.4}",
                ratio(&r.weights),
                size(&r.weights),
                r.delta
            );
        }
        Some(l) => {
            let _ = writeln!(s, "  data plane limit {l}: fits, no reduction");
        }
        None => s += "  no data plane limit\n",
    }
    s
}
