//! NOTIFICATION (RFC 4271 §4.5): error code, subcode, data. Always decodes: whatever a
//! closing peer sends is logged, never an error of its own.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    pub code: u8,
    pub subcode: u8,
    pub data: Vec<u8>,
}

impl Notification {
    pub fn new(code: u8, subcode: u8) -> Self {
        Notification {
            code,
            subcode,
            data: vec![],
        }
    }

    /// `body` is at least 2 octets (checked by `frame_len`).
    pub(super) fn decode(body: &[u8]) -> Notification {
        Notification {
            code: body.first().copied().unwrap_or_default(),
            subcode: body.get(1).copied().unwrap_or_default(),
            data: body.get(2..).unwrap_or_default().to_vec(),
        }
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.code);
        out.push(self.subcode);
        out.extend_from_slice(&self.data);
    }
}

impl std::fmt::Display for Notification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use super::error::code;
        let name = match self.code {
            code::HEADER => "message header error",
            code::OPEN => "OPEN message error",
            code::UPDATE => "UPDATE message error",
            code::HOLD_TIMER_EXPIRED => "hold timer expired",
            code::FSM => "finite state machine error",
            code::CEASE => "cease",
            code::ROUTE_REFRESH => "ROUTE-REFRESH message error",
            _ => "unknown error code",
        };
        write!(f, "{name} ({}/{})", self.code, self.subcode)
    }
}
