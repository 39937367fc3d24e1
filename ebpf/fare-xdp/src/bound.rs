//! Values whose range the verifier must know, bounded so that every verifier since the
//! oldest supported kernel (docs/xdp.md, "Kernels") follows: an AND with a constant
//! where the value is used. Verifiers track an AND with an immediate exactly (tnums,
//! since 4.14) but forget a range after other operations: Linux 6.1 knows nothing of a
//! register after a byte swap (BPF_END) or a 64-bit multiply by a register, 6.18 does.
//! The compiler knows a swapped u16 fits in 16 bits, and that `(r * n) >> 32 < n`, so
//! it would drop a plain `&`: the AND is inline assembly, which it cannot see through.

/// `value & MASK`, computed by the program whatever the compiler knows of `value`.
macro_rules! mask {
    ($value:expr, $mask:expr) => {{
        let mut v: u64 = $value;
        // SAFETY: one ALU instruction on a register; no memory, no flags.
        unsafe {
            core::arch::asm!("{v} &= {m}", v = inout(reg) v, m = const $mask, options(pure, nomem, nostack));
        }
        v
    }};
}
pub(crate) use mask;
