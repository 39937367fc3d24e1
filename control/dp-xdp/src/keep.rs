//! Keeping the verified program across agent restarts.
//!
//! Loading `fare_xdp` means the kernel verifier walks it again: seconds on an idle
//! machine, 10-30 s on a loaded one (measured in a lab under a kill -9 of an agent: one
//! BPF_PROG_LOAD of 9 s), and the agent has no BGP sessions until it is done. The
//! program that is already attached through the pinned links is the same one when the
//! object bytes and the load-time globals are the same, so a restarted agent takes it
//! from its pin instead. The program is pinned under its identity only after every link
//! carries it, and unpinned before anything is replaced, so a pin that matches always
//! names the program in the links. Its program array of stages (`stages-<id>`) is
//! pinned before it and kept until the links carry another program: the stages of a
//! program still in a link keep their entries.

use super::pins::PinDir;
use aya::programs::links::{FdLink, PinnedLink};
use aya::programs::Xdp;
use aya::Ebpf;
use aya_obj::programs::XdpAttachType;
use fare_common as fc;
use std::hash::{Hash, Hasher};

/// What makes one loaded program differ from another: the object and the globals set
/// at load time (the kernel log level, ARN reception).
pub fn identity(object: &[u8], log_level: u8, arn_receiver: bool) -> String {
    let mut h = std::hash::DefaultHasher::new();
    object.hash(&mut h);
    format!(
        "{:016x}-{}-{log_level}-{}",
        h.finish(),
        object.len(),
        u8::from(arn_receiver)
    )
}

/// The pinned program and the pinned links of `interfaces`, when the pinned program is
/// `id` and every interface has its link; None otherwise (then load as usual).
pub fn reuse(
    pins: &PinDir,
    interfaces: &[String],
    id: &str,
) -> Option<(Xdp, Vec<(String, FdLink)>)> {
    // Without its stages the program would hand every packet it does not finish to
    // the kernel: load again.
    if !pins.stages(id).exists() {
        return None;
    }
    let program = Xdp::from_pin(pins.program(id), XdpAttachType::Interface).ok()?;
    let mut links = Vec::new();
    for ifname in interfaces {
        let link = PinnedLink::from_pin(pins.link(ifname)).ok()?;
        links.push((ifname.clone(), FdLink::from(link)));
    }
    Some((program, links))
}

/// Before the program in the links changes: no pin names it any more.
pub fn forget(pins: &PinDir) {
    for path in pins.programs() {
        let _ = std::fs::remove_file(path);
    }
}

/// After the entry program of `ebpf` is attached to every link: pin its stages (its
/// program array), drop the stages of earlier programs, then pin it under its identity.
pub fn remember(pins: &PinDir, ebpf: &mut Ebpf, id: &str) {
    // Every earlier pin, also one of the same identity (an earlier load's array,
    // whose entries are that load's programs).
    for old in pins.all_stages() {
        let _ = std::fs::remove_file(old);
    }
    let pinned = match ebpf.map(fc::STAGES) {
        Some(stages) => stages.pin(pins.stages(id)).map_err(|e| e.to_string()),
        None => Err(format!("map {} missing", fc::STAGES)),
    };
    if let Err(e) = pinned {
        tracing::warn!("xdp: stages not pinned for the next agent ({e})");
        return;
    }
    let program: Option<&mut Xdp> = ebpf
        .program_mut(fc::PROGRAM_NAME)
        .and_then(|p| p.try_into().ok());
    let Some(program) = program else {
        return;
    };
    if let Err(e) = program.pin(pins.program(id)) {
        // Only the next restart's speed depends on it.
        tracing::warn!("xdp: program not pinned for the next agent ({e})");
        forget(pins);
    }
}

#[cfg(test)]
mod tests {
    use super::identity;

    #[test]
    fn identity_follows_object_and_globals() {
        let a = identity(b"object", 3, false);
        assert_eq!(a, identity(b"object", 3, false));
        assert_ne!(a, identity(b"objecT", 3, false));
        assert_ne!(a, identity(b"object", 4, false));
        assert_ne!(a, identity(b"object", 3, true));
    }
}
