//! Decode errors. Every error that ends a session is a [`Notification`] ready to send
//! (RFC 4271 §6 code/subcode + data); UPDATE attribute errors that do not end the session
//! carry their RFC 7606 outcome instead ([`AttrAction`]).

use super::notification::Notification;

/// NOTIFICATION error codes (IANA "BGP Error (Notification) Codes").
pub mod code {
    pub const HEADER: u8 = 1;
    pub const OPEN: u8 = 2;
    pub const UPDATE: u8 = 3;
    pub const HOLD_TIMER_EXPIRED: u8 = 4;
    pub const FSM: u8 = 5;
    pub const CEASE: u8 = 6;
    pub const ROUTE_REFRESH: u8 = 7;
}

/// Subcodes of [`code::HEADER`] (RFC 4271 §6.1).
pub mod header {
    pub const CONNECTION_NOT_SYNCHRONIZED: u8 = 1;
    pub const BAD_MESSAGE_LENGTH: u8 = 2;
    pub const BAD_MESSAGE_TYPE: u8 = 3;
}

/// Subcodes of [`code::OPEN`] (RFC 4271 §6.2, RFC 5492).
pub mod open {
    pub const UNSUPPORTED_VERSION: u8 = 1;
    pub const BAD_PEER_AS: u8 = 2;
    pub const BAD_BGP_IDENTIFIER: u8 = 3;
    pub const UNSUPPORTED_OPTIONAL_PARAMETER: u8 = 4;
    pub const UNACCEPTABLE_HOLD_TIME: u8 = 6;
    pub const UNSUPPORTED_CAPABILITY: u8 = 7;
}

/// Subcodes of [`code::UPDATE`] (RFC 4271 §6.3).
pub mod update {
    pub const MALFORMED_ATTRIBUTE_LIST: u8 = 1;
    pub const UNRECOGNIZED_WELL_KNOWN: u8 = 2;
    pub const MISSING_WELL_KNOWN: u8 = 3;
    pub const ATTRIBUTE_FLAGS: u8 = 4;
    pub const ATTRIBUTE_LENGTH: u8 = 5;
    pub const INVALID_ORIGIN: u8 = 6;
    pub const INVALID_NEXT_HOP: u8 = 8;
    pub const OPTIONAL_ATTRIBUTE: u8 = 9;
    pub const INVALID_NETWORK_FIELD: u8 = 10;
    pub const MALFORMED_AS_PATH: u8 = 11;
}

/// Subcodes of [`code::CEASE`] (RFC 4486).
pub mod cease {
    pub const ADMINISTRATIVE_SHUTDOWN: u8 = 2;
    pub const PEER_DECONFIGURED: u8 = 3;
    pub const ADMINISTRATIVE_RESET: u8 = 4;
    pub const CONNECTION_REJECTED: u8 = 5;
    pub const OTHER_CONFIGURATION_CHANGE: u8 = 6;
    pub const CONNECTION_COLLISION: u8 = 7;
}

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
