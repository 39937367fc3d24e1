//! Egress virtual queues (see `fare_common::EgressQueue`): redirected frames skip the
//! egress qdisc, so the program keeps the backlog a queue draining at the port's rate
//! would have, tail-drops what would overflow it, and reports upward threshold crossings
//! (QUEUE_EVENTS) for the ARN monitor.

use aya_ebpf::helpers::bpf_ktime_get_ns;
use fare_common::{QueueEvent, QUEUE_ABOVE_HIGH};

use crate::maps::{QUEUES, QUEUE_EVENTS};

/// Accounts a frame of `len` bytes to `ifindex`'s queue; false = the queue is full and
/// the frame must be dropped. Ports without a queue always admit.
#[inline(always)]
pub fn admit(ifindex: u32, len: u64) -> bool {
    let Some(q) = QUEUES.get_ptr_mut(&ifindex) else {
        return true;
    };
    // SAFETY: a hash map value; CPUs race without a lock (documented as an estimate).
    let q = unsafe { &mut *q };
    let rate = q.rate_bytes_per_s;
    if rate == 0 {
        return true;
    }
    // SAFETY: helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let backlog = q.backlog_at(now);
    q.last_ns = now;
    if backlog <= q.low_bytes as u64 {
        q.flags &= !QUEUE_ABOVE_HIGH;
    }
    if q.limit_bytes != 0 && backlog + len > q.limit_bytes as u64 {
        q.backlog = backlog;
        q.drops += 1;
        return false;
    }
    let backlog = backlog + len;
    q.backlog = backlog;
    q.packets += 1;
    q.bytes += len;
    // The wait this frame would see behind the backlog ahead of it.
    // checked_div: no panic path for the verifier (rate is not 0 here).
    q.delay_ns += ((backlog - len) * 1_000_000_000)
        .checked_div(rate)
        .unwrap_or(0);
    if q.high_bytes != 0 && backlog >= q.high_bytes as u64 && q.flags & QUEUE_ABOVE_HIGH == 0 {
        q.flags |= QUEUE_ABOVE_HIGH;
        q.crossed_ns = now;
        q.crossings += 1;
        let event = QueueEvent {
            ifindex,
            _pad: 0,
            backlog,
            t_ns: now,
        };
        // A full ring loses the event only; the monitor's periodic read still sees the
        // backlog.
        let _ = QUEUE_EVENTS.output::<QueueEvent>(&event, 0);
    }
    true
}
