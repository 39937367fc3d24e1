//! How much work the kernel's verifier does to load the program: the instructions it
//! processed (`verified_insns` of the loaded program), for `fare_xdp` with ARN reception
//! off and on (the load-time flag changes what the verifier walks) and for the TC spray
//! program. The kernel refuses a program past 1M; well below that the count still sets
//! how long an agent takes to start (several agents loading at once on a small machine
//! wait for each other's verifier), so the benchmarks report it beside the cost.

use super::{err, logs, object, pins::PinDir, BACKEND};
use crate::DataplaneError;
use aya::programs::{SchedClassifier, Xdp};
use aya::EbpfLoader;
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
    let bytes = match object {
        Some(b) => b,
        None => object::bytes().ok_or_else(|| err(object::MISSING))?,
    };
    let pins = PinDir::new(pin_root, node);
    pins.prepare(pin_root)
        .map_err(|source| DataplaneError::Io {
            backend: BACKEND,
            what: format!("preparing pin directory {}", pins.node.display()),
            source,
        })?;
    let result = (|| -> Result<VerifierCounts, DataplaneError> {
        Ok(VerifierCounts {
            xdp: load(bytes, &pins, 0, fc::PROGRAM_NAME)?,
            xdp_arn: load(bytes, &pins, 1, fc::PROGRAM_NAME)?,
            tc_spray: load(bytes, &pins, 0, fc::TC_SPRAY_NAME)?,
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
fn load(bytes: &[u8], pins: &PinDir, arn: u8, name: &str) -> Result<u32, DataplaneError> {
    let level = logs::kernel_level();
    let mut ebpf = EbpfLoader::new()
        .default_map_pin_directory(pins.maps())
        .override_global("AYA_LOG_LEVEL", &level, false)
        .override_global(fc::ARN_RECEIVER_GLOBAL, &arn, false)
        .load(bytes)
        .map_err(|e| err(format!("loading the XDP object: {e}")))?;
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
