//! What `fare analyze` covered and how it names things: shared by its text table
//! (`analyze`) and its HTML page (`analyze_html`).

use fare_model::analyze::Kind;
use fare_model::bandwidth::Mode;

/// What the run covered, printed above the table.
#[derive(serde::Serialize)]
pub struct Summary {
    pub topology: String,
    pub fabric: String,
    pub mode: Mode,
    pub failures: usize,
    pub links: usize,
    pub nodes: usize,
    pub planes: usize,
    pub pairs: usize,
    /// (failure, destination) pairs where the failure changed a state and was
    /// re-propagated, and all pairs (what solving every failed fabric whole does).
    pub recomputed: usize,
    pub destinations_total: usize,
    pub reduced_groups_before: u64,
    pub seconds: f64,
}

/// "3 links, 2 nodes", the kinds present.
pub fn covered(s: &Summary) -> String {
    let parts: Vec<String> = [
        (s.links, "link"),
        (s.nodes, "node"),
        (s.planes, "plane"),
        (s.pairs, "pair"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, w)| format!("{n} {w}{}", if *n == 1 { "" } else { "s" }))
    .collect();
    parts.join(", ")
}

/// A failure's kind as the table and the page name it.
pub fn kind(k: Kind) -> &'static str {
    match k {
        Kind::Link => "link",
        Kind::Node => "node",
        Kind::Plane => "plane",
        Kind::Pair => "pair",
    }
}
