//! The pipeline's stages (`fare_common::STAGE_*`): the entry program (`fast`) forwards
//! the common packet and hands every other one on by a tail call through `STAGES` to a
//! program that the kernel verified on its own. A stage that continues a packet the
//! entry already routed finds the route's group and flags in `ARGS`, this CPU's scratch
//! row (a tail call runs at once on the same CPU, nothing else runs there in between);
//! it parses the frame again, which costs less than carrying pointers the verifier
//! would have to trust.

use aya_ebpf::{
    macros::map,
    maps::{PerCpuArray, ProgramArray},
    programs::XdpContext,
};

/// The stage programs, filled by the loader (`fare_common::STAGE_PROGRAMS`) before the
/// entry program is attached. Not pinned by name: every load has its own, so that a
/// program attached elsewhere keeps the stages of its own build.
#[map]
pub static STAGES: ProgramArray = ProgramArray::with_max_entries(8, 0);

/// What the entry hands on with a packet it routed.
#[derive(Clone, Copy)]
pub struct Args {
    /// The group to take a member from: the route's, or its color's (see `COLORED`).
    pub group: u32,
    /// The route's `ROUTE_*` flags, and `COLORED`.
    pub flags: u32,
}

/// `Args::flags`: `group` is the group of the packet's DPF color.
pub const COLORED: u32 = 1 << 31;

#[map]
static ARGS: PerCpuArray<Args> = PerCpuArray::with_max_entries(1, 0);

/// Continues the packet in stage `INDEX` with `args`; returns only when the stage is
/// missing (the loader fills them all before attaching the entry: a bug).
#[inline(always)]
pub fn tail_with<const INDEX: u32>(ctx: &XdpContext, args: Args) {
    if let Some(row) = ARGS.get_ptr_mut(0) {
        // SAFETY: this CPU's scratch row; the stage reads it before anything else runs.
        unsafe { *row = args };
    }
    tail::<INDEX>(ctx);
}

/// Continues the packet in stage `INDEX` (see `tail_with`).
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

/// The arguments the entry left for this stage.
#[inline(always)]
pub fn args() -> Option<Args> {
    ARGS.get(0).copied()
}
