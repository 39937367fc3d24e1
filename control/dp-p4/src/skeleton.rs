//! The skeleton both P4 profiles run on (fare.p4's `fare/`, SAI-P4's `sai/`): a batch of
//! groups becomes runs of distinct prefixes; in a run each group is first admitted by
//! the profile (its own checks, or a path of its own such as a DPF route), then its next
//! hops' MACs are resolved, then the session is brought up to date (replaying the agent's
//! state when it asks for it) and the profile writes what is left in one go. A profile
//! supplies only what differs: [`Profile`]. Here too what both profiles mean alike: how
//! weights reach the switch ([`GroupForm`]), the router MAC, an action profile's limits.

use crate::session::Session;
use async_trait::async_trait;
use fare_dataplane::{DataplaneError, Group, GroupLimits, MacAddr};

/// What a P4 profile adds to the skeleton.
#[async_trait]
pub(crate) trait Profile: Send {
    /// The backend's name in logs and errors (`p4runtime`, `sai`).
    const BACKEND: &'static str;

    fn session(&mut self) -> &mut Session;

    /// After a new session or a regained mastership: writes the agent's state again,
    /// onto empty tables (`fresh`) or over what the switch kept.
    async fn resync(&mut self, fresh: bool) -> Result<(), DataplaneError>;

    /// Decides `group` on its own when it does not take the common path: `Some(Err)`
    /// refuses it (checks the profile makes), `Some(Ok)` when it was installed another
    /// way. `None`: the skeleton resolves its MACs and hands it to [`Self::write_run`].
    async fn admit(&mut self, group: &Group) -> Option<Result<(), DataplaneError>>;

    /// Writes groups of distinct prefixes (MACs resolved, every member active), one
    /// result per group in order; an installed group that already forwards the same way
    /// is left as it is ([`refresh_if_unchanged`]).
    async fn write_run(&mut self, groups: Vec<Group>) -> Vec<Result<(), DataplaneError>>;
}

/// Brings the session up to date (reconnect with backoff, mastership lost and regained,
/// `crate::session`) and replays the agent's state when it asks for it. Err while the
/// profile cannot write.
pub(crate) async fn ensure_session<P: Profile>(p: &mut P) -> Result<(), DataplaneError> {
    if let Some(fresh) = p.session().refresh().await {
        p.resync(fresh).await?;
        tracing::info!(
            fresh,
            "{}: session restored, state written again",
            P::BACKEND
        );
    }
    p.session().writable()
}

/// The periodic check (`Dataplane::maintain`): a dead switch is noticed even before the
/// stream's end has been read, then the session is brought up to date.
pub(crate) async fn maintain<P: Profile>(p: &mut P) -> Result<(), DataplaneError> {
    p.session().probe().await;
    ensure_session(p).await
}

/// `Dataplane::install_batch`: a prefix twice cuts the batch before its second install,
/// which then sees the first one installed (in order, like separate calls).
pub(crate) async fn install_batch<P: Profile>(
    p: &mut P,
    groups: &[Group],
) -> Vec<Result<(), DataplaneError>> {
    let mut out = Vec::with_capacity(groups.len());
    for run in fare_dataplane::distinct_prefix_runs(groups) {
        out.extend(install_run(p, run).await);
    }
    out
}

/// `Dataplane::install`: a batch of one.
pub(crate) async fn install<P: Profile>(p: &mut P, group: &Group) -> Result<(), DataplaneError> {
    only(
        P::BACKEND,
        install_batch(p, std::slice::from_ref(group)).await,
    )
}

/// What a batch answers for a group it did not decide.
const NO_RESULT: &str = "no result";

/// The result of a batch of one; a batch that answered nothing fails with "no result".
pub(crate) fn only<T, E: From<DataplaneError>>(
    backend: &'static str,
    mut results: Vec<Result<T, E>>,
) -> Result<T, E> {
    results
        .pop()
        .unwrap_or_else(|| Err(DataplaneError::backend(backend, NO_RESULT).into()))
}

/// Installs groups of distinct prefixes together.
async fn install_run<P: Profile>(p: &mut P, groups: &[Group]) -> Vec<Result<(), DataplaneError>> {
    let mut results = Outcomes::new(P::BACKEND, groups.len());
    let mut plain = Vec::new();
    let mut slots = Vec::new();
    for (slot, group) in groups.iter().enumerate() {
        if let Some(decided) = p.admit(group).await {
            results.set(slot, decided);
            continue;
        }
        // BGP members name only a next hop: the switch rewrites the destination MAC,
        // so take it from the kernel's neighbor table like the XDP backend does.
        match fare_dataplane::neighbors::fill_macs(group, P::BACKEND).await {
            Ok(resolved) => {
                plain.push(resolved.unwrap_or_else(|| group.clone()));
                slots.push(slot);
            }
            Err(e) => results.set(slot, Err(e)),
        }
    }
    if !plain.is_empty() {
        match ensure_session(p).await {
            Ok(()) => results.set_all(&slots, p.write_run(plain).await),
            Err(e) => results.fail(&slots, &e.to_string()),
        }
    }
    results.finish()
}

/// Whether a profile's tables hold a member's next-hop address: SAI-P4's do (its neighbor
/// and next-hop entries are keyed by it); fare.p4's hold the port and the MAC only, so a
/// group read back from the switch has none and must still count as the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NextHop {
    Written,
    NotWritten,
}

/// True when `a` and `b` program the same entries: display-only fields (bandwidths,
/// names) are ignored, everything the profile's tables hold is compared.
pub(crate) fn same_forwarding(a: &Group, b: &Group, next_hop: NextHop) -> bool {
    a.prefix == b.prefix
        && a.mode == b.mode
        && a.members.len() == b.members.len()
        && a.members.iter().zip(&b.members).all(|(x, y)| {
            x.interface == y.interface
                && x.neighbor_mac == y.neighbor_mac
                && (next_hop == NextHop::NotWritten || x.next_hop == y.next_hop)
                && x.weight == y.weight
        })
}

/// True when the installed group (`installed`, every member active when `all_active`)
/// already forwards like `group`: nothing to write, and the installed copy takes the new
/// display-only fields.
pub(crate) fn refresh_if_unchanged(
    installed: &mut Group,
    all_active: bool,
    group: &Group,
    next_hop: NextHop,
) -> bool {
    if all_active && same_forwarding(installed, group, next_hop) {
        *installed = group.clone();
        true
    } else {
        false
    }
}

/// One result per group of a batch, filled in as each group is decided; a group left
/// undecided fails with "no result" rather than passing silently.
pub(crate) struct Outcomes {
    backend: &'static str,
    slots: Vec<Option<Result<(), DataplaneError>>>,
}

impl Outcomes {
    pub fn new(backend: &'static str, len: usize) -> Outcomes {
        Outcomes {
            backend,
            slots: (0..len).map(|_| None).collect(),
        }
    }

    pub fn set(&mut self, slot: usize, result: Result<(), DataplaneError>) {
        if let Some(s) = self.slots.get_mut(slot) {
            *s = Some(result);
        }
    }

    /// The results of a sub-batch, `slots[i]` taking `results[i]`.
    pub fn set_all(&mut self, slots: &[usize], results: Vec<Result<(), DataplaneError>>) {
        for (slot, r) in slots.iter().zip(results) {
            self.set(*slot, r);
        }
    }

    /// Every slot of `slots` fails with `why`.
    pub fn fail(&mut self, slots: &[usize], why: &str) {
        for slot in slots {
            self.set(*slot, Err(DataplaneError::backend(self.backend, why)));
        }
    }

    /// The results in order; a slot never decided fails with `undecided`.
    pub fn finish_or(self, undecided: &str) -> Vec<Result<(), DataplaneError>> {
        let backend = self.backend;
        self.slots
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(DataplaneError::backend(backend, undecided))))
            .collect()
    }

    pub fn finish(self) -> Vec<Result<(), DataplaneError>> {
        self.finish_or(NO_RESULT)
    }
}

/// How weights reach the switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GroupForm {
    /// One member per next hop with a P4Runtime weight (BMv2).
    #[default]
    Weighted,
    /// Weight w = w members of weight 1 (targets that reject weights).
    Replicated,
}

/// Source MAC of routed packets unless `dataplane.router_mac` names one.
pub const DEFAULT_ROUTER_MAC: MacAddr = MacAddr([0x02, 0xfa, 0x4e, 0, 0, 1]);

/// What one group may hold in action profile `profile` (P4Runtime spec, ActionProfile):
/// `max_group_size` (0: unset, then `size`, the whole profile) bounds the sum of
/// weights under SumOfWeights semantics (the default), the number of members under
/// SumOfMembers (which may also bound each member's weight). In the replicated form each
/// unit of weight is a member of weight 1, so the bound is on the sum of weights either way.
pub fn selector_limits(
    profile: &fare_p4runtime::proto::p4::config::v1::ActionProfile,
    form: GroupForm,
) -> GroupLimits {
    use fare_p4runtime::proto::p4::config::v1::action_profile::SelectorSizeSemantics;
    let positive = |v: i64| u32::try_from(v).ok().filter(|&v| v > 0);
    let group = positive(i64::from(profile.max_group_size)).or(positive(profile.size));
    match (&profile.selector_size_semantics, form) {
        (Some(SelectorSizeSemantics::SumOfMembers(m)), GroupForm::Weighted) => GroupLimits {
            max_size: None,
            max_members: group,
            max_member_weight: positive(i64::from(m.max_member_weight)),
        },
        _ => GroupLimits {
            max_size: group,
            max_members: None,
            max_member_weight: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fare_dataplane::{GroupMode, MacAddr, Member};

    fn group(next_hop: &str, mac: u8, weight: u32) -> Group {
        Group {
            prefix: "10.0.0.0/24".parse().unwrap(),
            mode: GroupMode::Spray,
            members: vec![Member {
                via: next_hop.into(),
                interface: "eth1".into(),
                neighbor_mac: Some(MacAddr([2, 0, 0, 0, 0, mac])),
                next_hop: Some(next_hop.parse().unwrap()),
                weight,
                bandwidth_gbps: 100.0,
            }],
        }
    }

    /// Each profile compares what its tables hold: the weight and the MAC always; the
    /// next hop where it is written (SAI's neighbor and next-hop entries), not where it is
    /// not (fare.p4: a group read back has none); a bandwidth is display.
    #[test]
    fn same_forwarding_compares_every_written_field() {
        use NextHop::{NotWritten, Written};
        let a = group("10.0.0.1", 1, 3);
        for nh in [Written, NotWritten] {
            assert!(same_forwarding(&a, &a.clone(), nh));
            assert!(!same_forwarding(&a, &group("10.0.0.1", 2, 3), nh));
            assert!(!same_forwarding(&a, &group("10.0.0.1", 1, 4), nh));
        }
        assert!(!same_forwarding(&a, &group("10.0.0.2", 1, 3), Written));
        assert!(same_forwarding(&a, &group("10.0.0.2", 1, 3), NotWritten));
        let mut read_back = a.clone();
        read_back.members[0].next_hop = None;
        assert!(same_forwarding(&read_back, &a, NotWritten));
        let mut shown = a.clone();
        shown.members[0].bandwidth_gbps = 400.0;
        let mut installed = a.clone();
        assert!(refresh_if_unchanged(&mut installed, true, &shown, Written));
        assert_eq!(installed.members[0].bandwidth_gbps, 400.0);
        assert!(!refresh_if_unchanged(&mut installed, false, &a, Written));
    }

    #[test]
    fn a_batch_of_one_that_answers_nothing_fails() {
        let none: Vec<Result<u8, DataplaneError>> = vec![];
        let e = only("test", none).unwrap_err();
        assert_eq!(e.to_string(), "test: no result");
        assert_eq!(
            only::<u8, DataplaneError>("test", vec![Ok(7)]).ok(),
            Some(7)
        );
    }

    #[test]
    fn undecided_slots_fail() {
        let mut o = Outcomes::new("test", 3);
        o.set(0, Ok(()));
        o.fail(&[2], "down");
        let r = o.finish();
        assert!(r[0].is_ok());
        assert!(r[1]
            .as_ref()
            .is_err_and(|e| e.to_string() == "test: no result"));
        assert!(r[2].as_ref().is_err_and(|e| e.to_string() == "test: down"));
    }
}
