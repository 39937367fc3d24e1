//! Deterministic Path Forwarding policy (draft-wang-idr-dpf): session coloring (strict
//! and loose, §2.1), route coloring at the egress leaf (§2.2.1), color matching at
//! transit nodes (§2.2.2), what the ingress accepts (§2.1.2), and the staged-AS check of
//! §4. Pure functions over colors; the speaker and the neighbor FSM call them.
//!
//! Colors are the 32-bit Color Values of RFC 9012 §4.3 ([`packet::color`]).

use super::packet::color::{self, PeerColor};
use super::packet::Capability;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How sessions agree on their colors (draft §2.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionColoring {
    /// SESSION-COLOR capability in OPEN; a mismatch refuses the session (§2.1.1).
    Strict,
    /// No capability; routes with a mismatching color are refused instead (§2.1.2).
    #[default]
    Loose,
}

/// The agent's `dpf:` block.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DpfConfig {
    #[serde(default)]
    pub session_coloring: SessionColoring,
    /// OPEN Message Error subcode of the Color Mismatch NOTIFICATION (TBD in the draft).
    #[serde(default = "default_subcode")]
    pub mismatch_subcode: u8,
    /// SESSION-COLOR capability code (TBD in the draft).
    #[serde(default = "default_capability")]
    pub capability_code: u8,
    /// Per-prefix coloring of the prefixes this node originates; unlisted = no color.
    #[serde(default)]
    pub routes: Vec<RouteColoringConfig>,
    /// Ingress flow mapping (§2.2.3): flow rules that give packets a color (first match
    /// wins); needs `dataplane: {kind: xdp}`. See `dataplane::dpf`.
    #[serde(default)]
    pub flows: Vec<fare_model::forwarding::FlowRule>,
}

fn default_subcode() -> u8 {
    color::DEFAULT_COLOR_MISMATCH_SUBCODE
}
fn default_capability() -> u8 {
    color::DEFAULT_SESSION_COLOR_CAPABILITY
}

impl Default for DpfConfig {
    fn default() -> Self {
        DpfConfig {
            session_coloring: SessionColoring::default(),
            mismatch_subcode: default_subcode(),
            capability_code: default_capability(),
            routes: vec![],
            flows: vec![],
        }
    }
}

/// A color, or every color (`all`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ColorOrAll {
    Color(u32),
    Word(AllWord),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AllWord {
    All,
}

/// One entry of `dpf.routes`:
/// `{prefix: P, color: N}`, `{prefix: P, color: all}`, `{prefix: P, primary: N, backup: M}`,
/// `{prefix: P, primary: N, backup: all}`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteColoringConfig {
    pub prefix: IpNet,
    #[serde(default)]
    pub color: Option<ColorOrAll>,
    #[serde(default)]
    pub primary: Option<u32>,
    #[serde(default)]
    pub backup: Option<ColorOrAll>,
}

/// Route coloring at the egress leaf (draft §2.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Coloring {
    One(u32),
    PrimaryBackup { primary: u32, backup: u32 },
    PrimaryAll(u32),
    All,
    None,
}

/// Why a DPF configuration or a session's colors are refused (one line each).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DpfError {
    #[error("dpf route {0}: backup color equals the primary")]
    BackupIsPrimary(IpNet),
    #[error("dpf route {0}: primary needs a backup (a color or all); use color: N for one color")]
    PrimaryWithoutBackup(IpNet),
    #[error("dpf route {0}: give color (N or all) or primary + backup")]
    NoColor(IpNet),
    #[error("dpf route {0}: color excludes primary/backup (use one form)")]
    ColorAndPrimary(IpNet),
    #[error("dpf route {0} is given twice")]
    Duplicate(IpNet),
    #[error("session color mismatch: local {local}, peer {peer}")]
    ColorMismatch { local: String, peer: String },
    #[error("DPF primary/backup coloring needs a strictly staged fabric (draft-wang-idr-dpf §4): neighbors of stage {stage} use different AS numbers {ases:?}; give every node of a stage the same AS")]
    StageAses { stage: &'static str, ases: Vec<u32> },
    #[error("DPF primary/backup coloring needs a strictly staged fabric (draft-wang-idr-dpf §4): leaf AS {asn} equals its neighbor's AS {neighbor}")]
    LeafAsOfNeighbor { asn: u32, neighbor: u32 },
}

impl DpfError {
    /// The route an error is about, if it is about one.
    pub fn prefix(&self) -> Option<IpNet> {
        match self {
            DpfError::BackupIsPrimary(p)
            | DpfError::PrimaryWithoutBackup(p)
            | DpfError::NoColor(p)
            | DpfError::ColorAndPrimary(p)
            | DpfError::Duplicate(p) => Some(*p),
            _ => None,
        }
    }
}

impl Coloring {
    pub fn has_backup(&self) -> bool {
        matches!(
            self,
            Coloring::PrimaryBackup { .. } | Coloring::PrimaryAll(_)
        )
    }
}

impl RouteColoringConfig {
    pub fn coloring(&self) -> Result<Coloring, DpfError> {
        use ColorOrAll::*;
        let p = self.prefix;
        Ok(match (self.color, self.primary, self.backup) {
            (Some(Color(c)), None, None) => Coloring::One(c),
            (Some(Word(_)), None, None) => Coloring::All,
            (None, Some(primary), Some(Color(backup))) if primary != backup => {
                Coloring::PrimaryBackup { primary, backup }
            }
            (None, Some(_), Some(Color(_))) => return Err(DpfError::BackupIsPrimary(p)),
            (None, Some(primary), Some(Word(_))) => Coloring::PrimaryAll(primary),
            (None, Some(_), None) => return Err(DpfError::PrimaryWithoutBackup(p)),
            (None, None, _) => return Err(DpfError::NoColor(p)),
            (Some(_), _, _) => return Err(DpfError::ColorAndPrimary(p)),
        })
    }
}

/// What the speaker needs: the config in resolved form.
#[derive(Clone, Debug, PartialEq)]
pub struct Dpf {
    pub session_coloring: SessionColoring,
    pub mismatch_subcode: u8,
    pub capability_code: u8,
    pub routes: HashMap<IpNet, Coloring>,
}

impl Default for Dpf {
    /// Loose mode, default codepoints, no route colors.
    fn default() -> Self {
        Dpf {
            session_coloring: SessionColoring::default(),
            mismatch_subcode: default_subcode(),
            capability_code: default_capability(),
            routes: HashMap::new(),
        }
    }
}

impl Dpf {
    pub fn from_config(c: &DpfConfig) -> Result<Dpf, DpfError> {
        let mut routes = HashMap::new();
        for r in &c.routes {
            if routes.insert(r.prefix.trunc(), r.coloring()?).is_some() {
                return Err(DpfError::Duplicate(r.prefix));
            }
        }
        Ok(Dpf {
            session_coloring: c.session_coloring,
            mismatch_subcode: c.mismatch_subcode,
            capability_code: c.capability_code,
            routes,
        })
    }

    pub fn coloring(&self, prefix: &IpNet) -> Coloring {
        self.routes.get(prefix).copied().unwrap_or(Coloring::None)
    }

    /// The session-color part one neighbor FSM needs.
    pub fn session(&self, color: Option<u32>) -> SessionColor {
        SessionColor {
            mode: self.session_coloring,
            color,
            capability_code: self.capability_code,
            mismatch_subcode: self.mismatch_subcode,
        }
    }
}

/// Session coloring of one neighbor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionColor {
    pub mode: SessionColoring,
    pub color: Option<u32>,
    pub capability_code: u8,
    pub mismatch_subcode: u8,
}

impl Default for SessionColor {
    fn default() -> Self {
        Dpf::default().session(None)
    }
}

impl SessionColor {
    /// The capability our OPEN carries: only in strict mode on a colored session.
    pub fn capability(&self) -> Option<Capability> {
        match (self.mode, self.color) {
            (SessionColoring::Strict, Some(c)) => {
                Some(color::session_color_capability(self.capability_code, c))
            }
            _ => None,
        }
    }

    /// Strict mode match rules of §2.1.1 against the peer's OPEN capabilities;
    /// `Err` describes the mismatch (the session is then refused).
    pub fn check(&self, peer_capabilities: &[Capability]) -> Result<(), DpfError> {
        if self.mode != SessionColoring::Strict {
            return Ok(());
        }
        let peer = color::peer_session_color(peer_capabilities, self.capability_code);
        match (self.color, peer) {
            (None, PeerColor::None) => Ok(()),
            (Some(a), PeerColor::Color(b)) if a == b => Ok(()),
            (local, peer) => Err(DpfError::ColorMismatch {
                local: show(local),
                peer: match peer {
                    PeerColor::None => "none".to_string(),
                    PeerColor::Color(c) => c.to_string(),
                    PeerColor::Malformed => "malformed SESSION-COLOR capability".to_string(),
                },
            }),
        }
    }

    /// Whether a NOTIFICATION is the Color Mismatch one.
    pub fn is_mismatch(&self, code: u8, subcode: u8) -> bool {
        code == super::packet::error::code::OPEN && subcode == self.mismatch_subcode
    }
}

fn show(c: Option<u32>) -> String {
    c.map_or("none".into(), |c| c.to_string())
}

/// §2.1.2 (and strict mode too): a route received over a colored session must carry no
/// color or the session's color.
pub fn accepts(session: Option<u32>, route_colors: &[u32]) -> bool {
    match session {
        None => true,
        Some(s) => route_colors.is_empty() || route_colors.contains(&s),
    }
}

/// How the egress leaf advertises a prefix it originates over one session (§2.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origination {
    /// The Color community to attach, if any.
    pub color: Option<u32>,
    /// Attach AIGP with metric 0 (the primary color).
    pub aigp_zero: bool,
}

/// `None`: not advertised over this session.
pub fn originate(coloring: Coloring, session: Option<u32>) -> Option<Origination> {
    let plain = |color| {
        Some(Origination {
            color,
            aigp_zero: false,
        })
    };
    let primary = |c| {
        Some(Origination {
            color: Some(c),
            aigp_zero: true,
        })
    };
    match (coloring, session) {
        (Coloring::None, _) => plain(None),
        (Coloring::One(c), None) => plain(Some(c)),
        (Coloring::One(c), Some(s)) => (s == c).then_some(Origination {
            color: Some(c),
            aigp_zero: false,
        }),
        (Coloring::PrimaryBackup { .. } | Coloring::PrimaryAll(_) | Coloring::All, None) => {
            plain(None)
        }
        (Coloring::PrimaryBackup { primary: p, .. }, Some(s)) if s == p => primary(p),
        (Coloring::PrimaryBackup { backup: b, .. }, Some(s)) if s == b => plain(Some(b)),
        (Coloring::PrimaryBackup { .. }, Some(_)) => None,
        (Coloring::PrimaryAll(p), Some(s)) if s == p => primary(p),
        (Coloring::PrimaryAll(_) | Coloring::All, Some(s)) => plain(Some(s)),
    }
}

/// How a transit node re-advertises over one session (§2.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transit {
    /// The active path with this index in the multipath set, unchanged.
    AsIs(usize),
    /// The best active path with AIGP stripped and its Color replaced by the session's:
    /// only an inactive route matches the session color.
    Recolor(u32),
    Skip,
}

/// `active`: the colors of each path of the multipath set, best first; `inactive`: the
/// colors of every other path of the prefix.
pub fn transit(session: Option<u32>, active: &[Vec<u32>], inactive: &[Vec<u32>]) -> Transit {
    let Some(s) = session else {
        return Transit::AsIs(0);
    };
    if let Some(i) = active.iter().position(|c| c.is_empty() || c.contains(&s)) {
        return Transit::AsIs(i);
    }
    if inactive.iter().any(|c| c.contains(&s)) {
        return Transit::Recolor(s);
    }
    Transit::Skip
}

/// A neighbor as the §4 check sees it.
pub struct StageNeighbor {
    pub remote_as: u32,
    pub role: Option<fare_model::topology::Role>,
}

/// §4: primary/backup coloring is loop-free only in a strictly staged fabric (every
/// spine of a stage in one AS, every super-spine of a stage in one AS, leaves unique).
/// Checked from one node's view: `Err` is a one-line reason.
pub fn check_staged(
    role: fare_model::topology::Role,
    asn: u32,
    neighbors: &[StageNeighbor],
) -> Result<(), DpfError> {
    use fare_model::topology::Role;
    let stage_of = |r: Option<Role>| match (role, r) {
        (_, Some(Role::SuperSpine)) => Some(Role::SuperSpine),
        (_, Some(Role::Spine)) => Some(Role::Spine),
        // A leaf's neighbors of unknown role are its spines.
        (Role::Leaf | Role::Rnic, None) => Some(Role::Spine),
        _ => None,
    };
    for stage in [Role::Spine, Role::SuperSpine] {
        let mut ases: Vec<u32> = neighbors
            .iter()
            .filter(|n| stage_of(n.role) == Some(stage))
            .map(|n| n.remote_as)
            .collect();
        ases.sort();
        ases.dedup();
        if ases.len() > 1 {
            return Err(DpfError::StageAses {
                stage: stage.as_str(),
                ases,
            });
        }
    }
    if let Some(n) = neighbors
        .iter()
        .find(|n| n.remote_as == asn && matches!(role, Role::Leaf | Role::Rnic))
    {
        return Err(DpfError::LeafAsOfNeighbor {
            asn,
            neighbor: n.remote_as,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fare_model::topology::Role;

    const RED: u32 = 1;
    const BLUE: u32 = 2;
    const GREEN: u32 = 3;

    fn strict(color: Option<u32>) -> SessionColor {
        SessionColor {
            mode: SessionColoring::Strict,
            ..SessionColor::default()
        }
        .with(color)
    }

    impl SessionColor {
        fn with(mut self, c: Option<u32>) -> Self {
            self.color = c;
            self
        }
    }

    #[test]
    fn strict_match_rules() {
        let cap = |c| color::session_color_capability(240, c);
        // (local color, peer capabilities, match?)
        let table: Vec<(Option<u32>, Vec<Capability>, bool)> = vec![
            (None, vec![], true),                // no color on both ends
            (Some(RED), vec![cap(RED)], true),   // same color
            (Some(RED), vec![cap(BLUE)], false), // different colors
            (Some(RED), vec![], false),          // peer colorless
            (None, vec![cap(RED)], false),       // we are colorless
            (
                Some(RED),
                vec![Capability::Unknown {
                    code: 240,
                    value: vec![1],
                }],
                false, // malformed capability
            ),
        ];
        for (local, caps, ok) in table {
            let s = strict(local);
            assert_eq!(s.check(&caps).is_ok(), ok, "{local:?} {caps:?}");
            // Loose mode never refuses a session.
            let loose = SessionColor {
                mode: SessionColoring::Loose,
                ..s
            };
            assert!(loose.check(&caps).is_ok());
        }
        assert_eq!(
            strict(Some(RED))
                .check(&[cap(BLUE)])
                .unwrap_err()
                .to_string(),
            "session color mismatch: local 1, peer 2"
        );
        assert_eq!(strict(Some(RED)).capability(), Some(cap(RED)));
        assert_eq!(strict(None).capability(), None);
        assert_eq!(
            SessionColor {
                mode: SessionColoring::Loose,
                ..strict(Some(RED))
            }
            .capability(),
            None
        );
    }

    #[test]
    fn accepts_routes() {
        assert!(accepts(None, &[RED]));
        assert!(accepts(Some(RED), &[]));
        assert!(accepts(Some(RED), &[RED]));
        assert!(!accepts(Some(RED), &[BLUE]));
    }

    #[test]
    fn egress_coloring() {
        let o = |color, aigp_zero| Some(Origination { color, aigp_zero });
        let pb = Coloring::PrimaryBackup {
            primary: RED,
            backup: BLUE,
        };
        // (coloring, session color, advertisement)
        let table = [
            (Coloring::One(RED), Some(RED), o(Some(RED), false)),
            (Coloring::One(RED), Some(BLUE), None),
            (Coloring::One(RED), None, o(Some(RED), false)),
            (pb, Some(RED), o(Some(RED), true)),
            (pb, Some(BLUE), o(Some(BLUE), false)),
            (pb, Some(GREEN), None),
            (pb, None, o(None, false)),
            (Coloring::PrimaryAll(RED), Some(RED), o(Some(RED), true)),
            (
                Coloring::PrimaryAll(RED),
                Some(GREEN),
                o(Some(GREEN), false),
            ),
            (Coloring::PrimaryAll(RED), None, o(None, false)),
            (Coloring::All, Some(BLUE), o(Some(BLUE), false)),
            (Coloring::All, None, o(None, false)),
            (Coloring::None, Some(BLUE), o(None, false)),
            (Coloring::None, None, o(None, false)),
        ];
        for (c, s, want) in table {
            assert_eq!(originate(c, s), want, "{c:?} {s:?}");
        }
    }

    #[test]
    fn transit_matching() {
        // (session, active colors, inactive colors, outcome)
        type Row = (Option<u32>, Vec<Vec<u32>>, Vec<Vec<u32>>, Transit);
        let table: Vec<Row> = vec![
            (None, vec![vec![RED]], vec![], Transit::AsIs(0)),
            (Some(RED), vec![vec![RED]], vec![], Transit::AsIs(0)),
            (Some(RED), vec![vec![]], vec![], Transit::AsIs(0)),
            (
                Some(BLUE),
                vec![vec![RED], vec![BLUE]],
                vec![],
                Transit::AsIs(1),
            ),
            (
                Some(BLUE),
                vec![vec![RED]],
                vec![vec![BLUE]],
                Transit::Recolor(BLUE),
            ),
            (
                Some(BLUE),
                vec![vec![RED]],
                vec![vec![GREEN]],
                Transit::Skip,
            ),
            (Some(BLUE), vec![vec![RED]], vec![], Transit::Skip),
        ];
        for (s, a, i, want) in table {
            assert_eq!(transit(s, &a, &i), want, "{s:?} {a:?} {i:?}");
        }
    }

    #[test]
    fn route_coloring_forms() {
        let parse = |y: &str| -> Result<Coloring, String> {
            let c: RouteColoringConfig = serde_norway::from_str(y).map_err(|e| e.to_string())?;
            c.coloring().map_err(|e| e.to_string())
        };
        assert_eq!(
            parse("{prefix: 10.0.0.0/8, color: 5}"),
            Ok(Coloring::One(5))
        );
        assert_eq!(parse("{prefix: 10.0.0.0/8, color: all}"), Ok(Coloring::All));
        assert_eq!(
            parse("{prefix: 10.0.0.0/8, primary: 1, backup: 2}"),
            Ok(Coloring::PrimaryBackup {
                primary: 1,
                backup: 2
            })
        );
        assert_eq!(
            parse("{prefix: 10.0.0.0/8, primary: 1, backup: all}"),
            Ok(Coloring::PrimaryAll(1))
        );
        for bad in [
            "{prefix: 10.0.0.0/8, primary: 1}",
            "{prefix: 10.0.0.0/8, primary: 1, backup: 1}",
            "{prefix: 10.0.0.0/8, color: 1, primary: 2, backup: 3}",
            "{prefix: 10.0.0.0/8}",
            "{prefix: 10.0.0.0/8, color: most}",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn staged_check() {
        let n = |remote_as, role| StageNeighbor { remote_as, role };
        assert!(check_staged(Role::Leaf, 65001, &[n(65100, None), n(65100, None)]).is_ok());
        let e = check_staged(Role::Leaf, 65001, &[n(65100, None), n(65101, None)]).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("§4") && e.contains("65101"), "{e}");
        assert!(check_staged(Role::Leaf, 65100, &[n(65100, None)]).is_err());
        // A spine: leaves may differ, super-spines may not.
        assert!(check_staged(
            Role::Spine,
            65100,
            &[
                n(65001, None),
                n(65002, Some(Role::Leaf)),
                n(65200, Some(Role::SuperSpine))
            ]
        )
        .is_ok());
        assert!(check_staged(
            Role::Spine,
            65100,
            &[
                n(65200, Some(Role::SuperSpine)),
                n(65201, Some(Role::SuperSpine))
            ]
        )
        .is_err());
    }
}
