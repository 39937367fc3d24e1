//! The pipeline's stages (`fare_common::STAGE_*`): the entry program (`fast`) forwards
//! the common packet and hands every other one on by a tail call through `STAGES` to a
//! program that the kernel verified on its own. A stage starts from the frame again
//! (only the context goes along); a stage that needs to know what the entry found would
//! find it in a per-CPU scratch row (a tail call runs at once on the same CPU).

use aya_ebpf::{macros::map, maps::ProgramArray, programs::XdpContext};

/// The stage programs, filled by the loader (`fare_common::STAGE_PROGRAMS`) before the
/// entry program is attached. Not pinned by name: every load has its own, so that a
/// program attached elsewhere keeps the stages of its own build.
#[map]
pub static STAGES: ProgramArray = ProgramArray::with_max_entries(8, 0);

/// Continues the packet in stage `INDEX`; returns only when the stage is missing (the
/// loader fills them all before attaching the entry: a bug).
///
/// The call is inline assembly with the index as an immediate: through the helper's
/// binding the compiler merged the tail calls of one program into one call whose index
/// is a register set on each path, and the kernel then makes it an indirect jump (a
/// table lookup and a retpoline: measured 16-20 ns more per packet of the stages),
/// where a call site with one constant index becomes a direct jump.
#[inline(always)]
pub fn tail<const INDEX: u32>(ctx: &XdpContext) {
    // SAFETY: bpf_tail_call(ctx, STAGES, INDEX): a tail call does not come back when it
    // succeeds; nothing of ours is left half done (the callers change nothing of the
    // packet or the maps before it). On failure it returns with r0-r5 clobbered.
    unsafe {
        core::arch::asm!(
            "r3 = {index}",
            "call 12",
            index = const INDEX,
            inlateout("r1") ctx.ctx => _,
            inlateout("r2") &raw const STAGES => _,
            lateout("r0") _,
            lateout("r3") _,
            lateout("r4") _,
            lateout("r5") _,
        );
    }
}
