//! `BPF_PROG_TEST_RUN` on the loaded program: runs it on a frame without any interface
//! (fixtures, per-packet cost), or with `BPF_F_TEST_XDP_LIVE_FRAMES` so that the
//! verdict is carried out (XDP_REDIRECT really transmits: a traffic generator).

use std::io;
use std::os::fd::RawFd;

const BPF_PROG_TEST_RUN: libc::c_long = 10;
/// Carry out the program's verdict on each frame (kernel 5.18+).
pub const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// The PROG_TEST_RUN member of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// `struct xdp_md` as the test run's context.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct XdpMd {
    pub data: u32,
    pub data_end: u32,
    pub data_meta: u32,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
}

/// What one test run returned.
#[derive(Clone, Debug)]
pub struct TestRun {
    /// The XDP action of the last run (`XDP_PASS` = 2, `XDP_REDIRECT` = 4, ...).
    pub action: u32,
    /// The frame as the program left it (not filled in live mode).
    pub frame: Vec<u8>,
    /// Mean nanoseconds per run, as the kernel measured it.
    pub ns_per_run: u32,
}

/// Options of one test run.
#[derive(Clone, Copy, Debug, Default)]
pub struct TestRunOptions {
    pub repeat: u32,
    /// Interface the frame pretends to arrive on (0 = none; live mode needs a real one).
    /// Any context (this or `live`) needs Linux 5.15.
    pub ingress_ifindex: u32,
    pub live: bool,
    /// Live mode: frames per batch (0 = kernel default 64).
    pub batch_size: u32,
}

pub fn run(prog_fd: RawFd, frame: &[u8], opts: TestRunOptions) -> io::Result<TestRun> {
    let mut out = vec![0u8; frame.len() + 256];
    let ctx = XdpMd {
        data_end: frame.len() as u32,
        ingress_ifindex: opts.ingress_ifindex,
        ..Default::default()
    };
    let with_ctx = opts.ingress_ifindex != 0 || opts.live;
    let mut attr = TestRunAttr {
        prog_fd: prog_fd as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat: opts.repeat.max(1),
        ..Default::default()
    };
    if opts.live {
        attr.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
        attr.batch_size = opts.batch_size;
    } else {
        attr.data_size_out = out.len() as u32;
        attr.data_out = out.as_mut_ptr() as u64;
    }
    if with_ctx {
        attr.ctx_size_in = std::mem::size_of::<XdpMd>() as u32;
        attr.ctx_in = &ctx as *const XdpMd as u64;
    }
    // SAFETY: attr points at valid buffers of the stated sizes for the whole call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            &mut attr as *mut TestRunAttr,
            std::mem::size_of::<TestRunAttr>() as libc::c_uint,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if with_ctx && e.raw_os_error() == Some(libc::EINVAL) {
            // An XDP context in BPF_PROG_TEST_RUN arrived in Linux 5.15.
            return Err(io::Error::new(
                e.kind(),
                format!("{e} (an XDP context, e.g. an ingress interface, needs Linux 5.15)"),
            ));
        }
        return Err(e);
    }
    out.truncate(attr.data_size_out as usize);
    Ok(TestRun {
        action: attr.retval,
        frame: if opts.live { Vec::new() } else { out },
        ns_per_run: attr.duration,
    })
}
