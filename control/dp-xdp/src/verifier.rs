//! How much work the kernel's verifier does to load the programs: the instructions it
//! processed (`verified_insns` of each loaded program), for every program of the XDP
//! pipeline (the entry `fare_xdp` and its stages, each verified on its own) with ARN
//! reception off and on (the load-time flag changes what the verifier walks) and for
//! the TC spray program. The kernel refuses a program past 1M; well below that the
//! count still sets how long an agent takes to start (several agents loading at once on
//! a small machine wait for each other's verifier), so the benchmarks report it beside
//! the cost.

use super::{err, load_object, object_bytes, pins::PinDir, prepare_pins, BACKEND};
use aya::programs::{SchedClassifier, Xdp};
use fare_common as fc;
use fare_dataplane::DataplaneError;
use std::path::Path;

/// The count of a kernel that loaded the program but does not report the count (before
/// Linux 5.16, which added `verified_insns` to the program's info).
pub const NOT_REPORTED: u32 = 0;

/// The kernel's limit of instructions processed per program load.
pub const LIMIT: u32 = 1_000_000;

/// The verifier's count of one program of the object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramCount {
    /// The program's name in the object.
    pub name: String,
    /// As loaded without ARN reception ([`NOT_REPORTED`] where the kernel does not say).
    pub count: u32,
    /// As loaded with ARN reception (None: loaded once, the TC spray program).
    pub with_arn: Option<u32>,
}

/// Instructions the verifier processed loading each program of one object: the XDP
/// entry, its stages in stage order, then the TC spray program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifierCounts {
    pub programs: Vec<ProgramCount>,
}

impl VerifierCounts {
    /// The program `name`'s counts.
    pub fn get(&self, name: &str) -> Option<&ProgramCount> {
        self.programs.iter().find(|p| p.name == name)
    }

    /// The largest count of any program, either load.
    pub fn largest(&self) -> u32 {
        self.programs
            .iter()
            .map(|p| p.count.max(p.with_arn.unwrap_or(0)))
            .max()
            .unwrap_or(0)
    }

    /// Every load as (label, count): `name`, and `name (ARN reception)` for the second
    /// load of an XDP program.
    pub fn loads(&self) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        for p in &self.programs {
            out.push((p.name.clone(), p.count));
        }
        for p in &self.programs {
            if let Some(n) = p.with_arn {
                out.push((format!("{} {ARN_SUFFIX}", p.name), n));
            }
        }
        out
    }

    /// The counts of [`loads`](Self::loads) back from their labels (`fare xdp check
    /// --json` of another kernel).
    pub fn from_loads<'a>(loads: impl IntoIterator<Item = (&'a str, u32)>) -> VerifierCounts {
        let mut counts = VerifierCounts::default();
        for (label, n) in loads {
            match label.strip_suffix(ARN_SUFFIX).map(str::trim_end) {
                Some(name) => match counts.programs.iter_mut().find(|p| p.name == name) {
                    Some(p) => p.with_arn = Some(n),
                    None => counts.programs.push(ProgramCount {
                        name: name.to_string(),
                        count: NOT_REPORTED,
                        with_arn: Some(n),
                    }),
                },
                None => counts.programs.push(ProgramCount {
                    name: label.to_string(),
                    count: n,
                    with_arn: None,
                }),
            }
        }
        counts
    }
}

/// How a load with ARN reception is labelled.
const ARN_SUFFIX: &str = "(ARN reception)";

/// What this kernel makes of the built-in programs (`fare xdp check`, `fare bench
/// kernels`): its release, the verifier's counts and how long the loads took.
pub struct KernelCheck {
    pub release: String,
    pub counts: VerifierCounts,
    pub load_ms: u64,
}

/// Mounts bpffs at `pin_root` if needed, then loads the built-in programs (see
/// [`counts`], scratch maps under `<pin_root>/<node>`) and times the loads.
pub fn check_running(pin_root: &Path, node: &str) -> Result<KernelCheck, DataplaneError> {
    super::bpffs::ensure_logged(pin_root).map_err(|source| DataplaneError::Io {
        backend: BACKEND,
        what: format!("mounting bpffs on {}", pin_root.display()),
        source,
    })?;
    let start = std::time::Instant::now();
    let counts = counts(None, pin_root, node)?;
    let load_ms = start.elapsed().as_millis() as u64;
    let release = super::kernel::Release::running().map_or_else(|| "unknown".into(), |(_, t)| t);
    Ok(KernelCheck {
        release,
        counts,
        load_ms,
    })
}

/// Loads `object` (None: the one built into this binary) against maps pinned in a
/// scratch directory `<pin_root>/<node>` (removed afterwards): every XDP program (the
/// entry and the stages the object has) once without and once with ARN reception, the
/// TC spray program once, and reads the verifier's count of each load. Nothing is
/// attached.
pub fn counts(
    object: Option<&[u8]>,
    pin_root: &Path,
    node: &str,
) -> Result<VerifierCounts, DataplaneError> {
    let bytes = object_bytes(object)?;
    let pins = PinDir::new(pin_root, node);
    prepare_pins(&pins, pin_root)?;
    let result = (|| -> Result<VerifierCounts, DataplaneError> {
        let plain = load_xdp(bytes, &pins, false)?;
        let arn = load_xdp(bytes, &pins, true)?;
        let mut programs: Vec<ProgramCount> = plain
            .into_iter()
            .zip(arn)
            .map(|((name, count), (_, with_arn))| ProgramCount {
                name,
                count,
                with_arn: Some(with_arn),
            })
            .collect();
        let mut ebpf = load_object(bytes, &pins, false)?;
        programs.push(ProgramCount {
            name: fc::TC_SPRAY_NAME.to_string(),
            count: load(&mut ebpf, fc::TC_SPRAY_NAME)?,
            with_arn: None,
        });
        Ok(VerifierCounts { programs })
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

/// Loads the XDP entry and every stage of the object with the ARN flag `arn`; their
/// counts in stage order.
fn load_xdp(bytes: &[u8], pins: &PinDir, arn: bool) -> Result<Vec<(String, u32)>, DataplaneError> {
    let mut ebpf = load_object(bytes, pins, arn)?;
    let names = std::iter::once(fc::PROGRAM_NAME)
        .chain(fc::STAGE_PROGRAMS)
        .filter(|name| ebpf.program(name).is_some())
        .collect::<Vec<_>>();
    names
        .into_iter()
        .map(|name| Ok((name.to_string(), load(&mut ebpf, name)?)))
        .collect()
}

/// Loads program `name` of the object and returns its count.
fn load(ebpf: &mut aya::Ebpf, name: &str) -> Result<u32, DataplaneError> {
    let program = ebpf
        .program_mut(name)
        .ok_or_else(|| err(format!("program {name} missing from the object")))?;
    let info = if name == fc::TC_SPRAY_NAME {
        let p: &mut SchedClassifier = program
            .try_into()
            .map_err(|e| err(format!("program {name}: {e}")))?;
        load_logged(name, || p.load())?;
        p.info()
    } else {
        let p: &mut Xdp = program
            .try_into()
            .map_err(|e| err(format!("program {name}: {e}")))?;
        load_logged(name, || p.load())?;
        p.info()
    };
    // Kernels before 5.16 load the program but do not report the count.
    Ok(info
        .map_err(|e| err(format!("reading the info of {name}: {e}")))?
        .verified_instruction_count()
        .unwrap_or(NOT_REPORTED))
}

/// Loads one program through `load` (the kernel's verifier runs), with a log line before
/// (a cold load is seconds of verifier time on a busy machine) and after. A refusal is
/// one line, the verifier's verdict and count; its whole log goes to the debug level.
pub(super) fn load_logged(
    name: &str,
    load: impl FnOnce() -> Result<(), aya::programs::ProgramError>,
) -> Result<(), DataplaneError> {
    tracing::info!("xdp: loading {name} (the kernel's verifier checks it)");
    let start = std::time::Instant::now();
    match load() {
        Ok(()) => {
            tracing::info!("xdp: {name} loaded in {} ms", start.elapsed().as_millis());
            Ok(())
        }
        Err(aya::programs::ProgramError::LoadError {
            io_error,
            verifier_log,
        }) => {
            let log = verifier_log.to_string();
            tracing::debug!("xdp: the verifier's log for {name}:\n{log}");
            Err(err(format!(
                "the kernel refused {name} ({io_error}): {} (the whole log with FARE_LOG=debug)",
                verdict(&log)
            )))
        }
        Err(e) => Err(err(format!("the kernel refused {name}: {e}"))),
    }
}

/// The verifier's verdict in one line: its last message before the statistics, and the
/// instructions it processed.
pub fn verdict(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let processed = lines.iter().find(|l| l.starts_with("processed "));
    let last = lines.iter().rev().find(|l| {
        !l.starts_with("processed ")
            && !l.starts_with("verification time")
            && !l.starts_with("stack depth")
            && !l.starts_with("-- END PROG LOAD LOG --")
    });
    match (last, processed) {
        (Some(l), Some(p)) => format!("{l}; {p}"),
        (Some(l), None) => l.to_string(),
        (None, Some(p)) => p.to_string(),
        (None, None) => "no verifier log".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{verdict, ProgramCount, VerifierCounts};

    #[test]
    fn loads_read_back_from_their_labels() {
        let counts = VerifierCounts {
            programs: vec![
                ProgramCount {
                    name: "fare_xdp".into(),
                    count: 10,
                    with_arn: Some(12),
                },
                ProgramCount {
                    name: "fare_xdp_full".into(),
                    count: 300,
                    with_arn: Some(400),
                },
                ProgramCount {
                    name: "fare_tc_spray".into(),
                    count: 70,
                    with_arn: None,
                },
            ],
        };
        let loads = counts.loads();
        assert_eq!(loads[4], ("fare_xdp_full (ARN reception)".to_string(), 400));
        let back = VerifierCounts::from_loads(loads.iter().map(|(l, n)| (l.as_str(), *n)));
        assert_eq!(back, counts);
        assert_eq!(counts.largest(), 400);
    }

    #[test]
    fn the_verdict_is_the_last_message_and_the_count() {
        // The end of Linux 6.1's refusal of fare_xdp before its values were bounded.
        let log = "41: (bf) r4 = r5\n42: (0f) r4 += r5\nmath between pkt pointer and \
                   register with unbounded min value is not allowed\nprocessed 43 insns \
                   (limit 1000000) max_states_per_insn 0 total_states 3 peak_states 3 \
                   mark_read 2\n";
        assert_eq!(
            verdict(log),
            "math between pkt pointer and register with unbounded min value is not allowed; \
             processed 43 insns (limit 1000000) max_states_per_insn 0 total_states 3 \
             peak_states 3 mark_read 2"
        );
        assert_eq!(verdict(""), "no verifier log");
    }
}
