//! NOTIFICATION error codes and subcodes (RFC 4271 §4.5 and §6, RFC 4486, RFC 5492): the
//! numbers the decoder's errors and the NOTIFICATION messages both use.

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
