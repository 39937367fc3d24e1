//! The XDP program's stages (`fare_common::STAGE_PROGRAMS`): programs of the same
//! object that the entry program `fare_xdp` continues a packet in by a tail call through
//! its program array `STAGES`, each verified on its own (docs/xdp.md, "A pipeline of
//! stages"). They are loaded, and the array filled, before the entry is attached.

use super::{err, verifier};
use aya::maps::ProgramArray;
use aya::programs::Xdp;
use aya::Ebpf;
use fare_common as fc;
use fare_dataplane::DataplaneError;

/// Loads every stage program of `ebpf` (the verifier runs for each) and puts it at its
/// index of `STAGES`. An object without stages (an earlier build's, one program) has
/// nothing to load.
pub fn load(ebpf: &mut Ebpf) -> Result<(), DataplaneError> {
    if ebpf.map(fc::STAGES).is_none() {
        return Ok(());
    }
    for (index, name) in fc::STAGE_PROGRAMS.iter().enumerate() {
        load_one(ebpf, name)?;
        let fd = {
            let program: &Xdp = program(ebpf, name)?;
            program
                .fd()
                .map_err(|e| err(format!("program {name}: {e}")))?
                .try_clone()
                .map_err(|e| err(format!("program {name}: {e}")))?
        };
        let mut stages: ProgramArray<&mut aya::maps::MapData> = ebpf
            .map_mut(fc::STAGES)
            .ok_or_else(|| err(format!("map {} missing", fc::STAGES)))?
            .try_into()
            .map_err(|e| err(format!("map {}: {e}", fc::STAGES)))?;
        stages
            .set(index as u32, &fd, 0)
            .map_err(|e| err(format!("{}[{index}] = {name}: {e}", fc::STAGES)))?;
    }
    Ok(())
}

/// Loads stage `name` of `ebpf` (the verifier runs).
fn load_one(ebpf: &mut Ebpf, name: &str) -> Result<(), DataplaneError> {
    let program: &mut Xdp = ebpf
        .program_mut(name)
        .ok_or_else(|| err(format!("program {name} missing from the object")))?
        .try_into()
        .map_err(|e| err(format!("program {name}: {e}")))?;
    verifier::load_logged(name, || program.load())
}

fn program<'a>(ebpf: &'a Ebpf, name: &str) -> Result<&'a Xdp, DataplaneError> {
    ebpf.program(name)
        .ok_or_else(|| err(format!("program {name} missing from the object")))?
        .try_into()
        .map_err(|e| err(format!("program {name}: {e}")))
}
