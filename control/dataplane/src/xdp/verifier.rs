//! How much work the kernel's verifier does to load the program: the instructions it
//! processed (`verified_insns` of the loaded program), for `fare_xdp` with ARN reception
//! off and on (the load-time flag changes what the verifier walks) and for the TC spray
//! program. The kernel refuses a program past 1M; well below that the count still sets
//! how long an agent takes to start (several agents loading at once on a small machine
//! wait for each other's verifier), so the benchmarks report it beside the cost.

use super::{err, load_object, object_bytes, pins::PinDir, prepare_pins, BACKEND};
use crate::DataplaneError;
use aya::programs::{SchedClassifier, Xdp};
use fare_common as fc;
use std::path::Path;

/// Instructions the verifier processed loading each program of one object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifierCounts {
    /// `fare_xdp` as loaded without ARN reception.
    pub xdp: u32,
    /// `fare_xdp` as loaded with ARN reception.
    pub xdp_arn: u32,
    /// `fare_tc_spray`.
    pub tc_spray: u32,
}

/// Loads `object` (None: the one built into this binary) three times against maps
/// pinned in a scratch directory `<pin_root>/<node>` (removed afterwards) and reads the
/// verifier's count of each load. Nothing is attached.
pub fn counts(
    object: Option<&[u8]>,
    pin_root: &Path,
    node: &str,
) -> Result<VerifierCounts, DataplaneError> {
    let bytes = object_bytes(object)?;
    let pins = PinDir::new(pin_root, node);
    prepare_pins(&pins, pin_root)?;
    let result = (|| -> Result<VerifierCounts, DataplaneError> {
        Ok(VerifierCounts {
            xdp: load(bytes, &pins, false, fc::PROGRAM_NAME)?,
            xdp_arn: load(bytes, &pins, true, fc::PROGRAM_NAME)?,
            tc_spray: load(bytes, &pins, false, fc::TC_SPRAY_NAME)?,
        })
    })();
    let removed = pins.remove_all().map_err(|source| DataplaneError::Io {
        backend: BACKEND,
        what: format!("removing {}", pins.node.display()),
        source,
    });
    let counts = result?;
    removed?;
    Ok(counts)
}

/// Loads program `name` of the object with the ARN flag `arn` and returns its count.
fn load(bytes: &[u8], pins: &PinDir, arn: bool, name: &str) -> Result<u32, DataplaneError> {
    let mut ebpf = load_object(bytes, pins, arn)?;
    let program = ebpf
        .program_mut(name)
        .ok_or_else(|| err(format!("program {name} missing from the object")))?;
    let info = if name == fc::TC_SPRAY_NAME {
        let p: &mut SchedClassifier = program
            .try_into()
            .map_err(|e| err(format!("program {name}: {e}")))?;
        p.load()
            .map_err(|e| err(format!("the kernel refused {name}: {e:?}")))?;
        p.info()
    } else {
        let p: &mut Xdp = program
            .try_into()
            .map_err(|e| err(format!("program {name}: {e}")))?;
        p.load()
            .map_err(|e| err(format!("the kernel refused {name}: {e:?}")))?;
        p.info()
    };
    info.map_err(|e| err(format!("reading the info of {name}: {e}")))?
        .verified_instruction_count()
        .ok_or_else(|| err("this kernel does not report the verifier's instruction count"))
}
