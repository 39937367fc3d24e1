//! `dpf:`: route colorings and flow rules, checked against the fabric and the data plane.

use super::*;

impl AgentConfig {
    /// DPF: route colorings well formed and on originated prefixes; primary/backup
    /// coloring only in a strictly staged fabric (draft-wang-idr-dpf §4).
    pub(super) fn validate_dpf(&self, path: &Path, text: &str) -> Result<(), FileError> {
        use fare_bgp::dpf::{self, Dpf, StageNeighbor};
        let Some(d) = &self.dpf else {
            return Ok(());
        };
        let at = |needle: &str, problem: String| {
            let line = yamlfile::find_line(text, "dpf:", 1).unwrap_or(1);
            FileError::new(
                path,
                yamlfile::find_line(text, needle, line).or(Some(line)),
                problem,
            )
        };
        let resolved = Dpf::from_config(d).map_err(|e| {
            let p = e.prefix().map_or("dpf".to_string(), |p| p.to_string());
            at(&p, e.to_string())
        })?;
        // Line of the i-th `- ` item after `flows:` (the block is nested under dpf:).
        let flows_at = yamlfile::find_line(text, "flows:", 1);
        let flow_line = |i: usize| {
            let start = flows_at?;
            text.lines()
                .enumerate()
                .skip(start)
                .filter(|(_, l)| l.trim_start().starts_with("- "))
                .nth(i)
                .map(|(n, _)| n + 1)
                .or(Some(start))
        };
        for (i, rule) in d.flows.iter().enumerate() {
            let line = flow_line(i);
            if let Err(e) = rule.check() {
                return Err(FileError::new(path, line, format!("dpf.flows: {e}")));
            }
            if !self.dataplane.offers().dpf {
                return Err(FileError::new(
                    path,
                    line,
                    format!(
                        "dpf.flows needs dataplane kind xdp or p4runtime (the {} data plane does not classify flows)",
                        self.dataplane.kind()
                    ),
                ));
            }
        }
        if d.flows.len() > fare_common::MAX_FLOW_RULES as usize {
            return Err(at(
                "flows:",
                format!(
                    "dpf.flows: {} rules, at most {}",
                    d.flows.len(),
                    fare_common::MAX_FLOW_RULES
                ),
            ));
        }
        for r in &d.routes {
            if !self.prefixes.iter().any(|p| p.trunc() == r.prefix.trunc()) {
                let p = r.prefix.to_string();
                return Err(at(
                    &p,
                    format!("dpf route {p} is not among this node's prefixes"),
                ));
            }
        }
        if resolved.routes.values().any(|c| c.has_backup()) {
            let neighbors: Vec<StageNeighbor> = self
                .neighbors
                .iter()
                .map(|n| StageNeighbor {
                    remote_as: n.remote_as,
                    role: n.role,
                })
                .collect();
            dpf::check_staged(self.fare.role, self.asn, &neighbors).map_err(|e| {
                FileError::new(
                    path,
                    yamlfile::find_line(text, "neighbors:", 1),
                    e.to_string(),
                )
            })?;
        }
        Ok(())
    }
}
