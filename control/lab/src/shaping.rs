//! The links' shapers: tc `tbf` at the (scaled) link rate, the same queue limit for the
//! XDP program's virtual queues, and the smallest limit the ARN thresholds sit below.

/// The smallest queue limit `tbf` gets, whatever the rate (the lab's ARN thresholds sit
/// below it, so a congested link crosses them even when `congest` shrinks the queue).
pub const TBF_MIN_LIMIT_BYTES: u64 = 16 * 1514;

/// A `tc qdisc add|change` line: token bucket at `kbit`, a burst of 10 ms (at least a
/// few frames) and a queue of 50 ms (what ARN's monitor watches fill up).
pub fn tbf(verb: &str, dev: &str, kbit: u64) -> String {
    let bytes_per_s = kbit * 1000 / 8;
    let burst = (bytes_per_s / 100).max(4 * 1514);
    let limit = tbf_limit_bytes(kbit);
    format!("qdisc {verb} dev {dev} root tbf rate {kbit}kbit burst {burst} limit {limit}")
}

/// The queue limit of a link's shaper (also the XDP virtual queue's): 50 ms at the rate.
pub fn tbf_limit_bytes(kbit: u64) -> u64 {
    (kbit * 1000 / 8 / 20).max(TBF_MIN_LIMIT_BYTES)
}
