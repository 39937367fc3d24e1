//! Link facts from the kernel: interface speed (the link bandwidth when none is
//! configured).

/// Speed of `interface` in Gbps from sysfs; `None` when unknown (down, or a virtual
/// interface that reports -1).
pub fn interface_speed_gbps(interface: &str) -> Option<f64> {
    if interface.contains('/') || interface.is_empty() {
        return None;
    }
    let text = std::fs::read_to_string(format!("/sys/class/net/{interface}/speed")).ok()?;
    let mbps: i64 = text.trim().parse().ok()?;
    (mbps > 0).then(|| mbps as f64 / 1000.0)
}
