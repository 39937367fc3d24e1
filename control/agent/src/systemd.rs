//! The service manager's notification protocol (sd_notify, `Type=notify` units):
//! READY=1 once the data plane is programmed and the sessions are configured,
//! RELOADING=1 then READY=1 around a SIGHUP reload, STOPPING=1 on shutdown. Outside
//! systemd ($NOTIFY_SOCKET unset) nothing is sent.

use sd_notify::NotifyState;
use tracing::{info, warn};

fn send(states: &[NotifyState]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(states) {
        warn!("notifying the service manager: {e}");
    }
}

/// Start-up is complete; `status` says what runs.
pub fn ready(status: &str) {
    info!(status, "ready");
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A SIGHUP reload begins (systemd wants the monotonic time with it).
pub fn reloading() {
    let mut states = vec![NotifyState::Reloading];
    if let Ok(now) = NotifyState::monotonic_usec_now() {
        states.push(now);
    }
    send(&states);
}

/// The reload is over (applied or refused): ready again.
pub fn reloaded() {
    send(&[NotifyState::Ready]);
}

/// The agent is shutting down.
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}
