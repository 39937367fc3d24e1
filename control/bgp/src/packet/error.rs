//! Decode errors. Every error that ends a session is a [`Notification`] ready to send
//! (RFC 4271 §6 code/subcode + data); UPDATE attribute errors that do not end the session
//! carry their RFC 7606 outcome instead ([`AttrAction`]).

use super::notification::Notification;

// The codes and subcodes, where both errors and NOTIFICATIONs read them.
pub use super::codes::{cease, code, header, open, update};

/// A message that cannot be accepted: the session ends with this NOTIFICATION.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (NOTIFICATION {}/{})", notification.code, notification.subcode)]
pub struct MessageError {
    pub notification: Notification,
    pub reason: &'static str,
}

impl MessageError {
    pub fn new(code: u8, subcode: u8, data: impl Into<Vec<u8>>, reason: &'static str) -> Self {
        MessageError {
            notification: Notification {
                code,
                subcode,
                data: data.into(),
            },
            reason,
        }
    }
}

/// RFC 7606 outcome of a malformed path attribute, mildest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AttrAction {
    /// The attribute is dropped; the route is used without it (RFC 7606 §2 "attribute discard").
    Discard,
    /// Every prefix in the UPDATE is handled as withdrawn (RFC 7606 §2 "treat-as-withdraw").
    TreatAsWithdraw,
}

/// One malformed attribute of an UPDATE that was still accepted (see [`AttrAction`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttrError {
    pub type_code: u8,
    pub action: AttrAction,
    /// The UPDATE subcode a session reset would have used, for logs and counters.
    pub subcode: u8,
    pub reason: &'static str,
}

impl std::fmt::Display for AttrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "attribute {}: {} ({:?})",
            self.type_code, self.reason, self.action
        )
    }
}
