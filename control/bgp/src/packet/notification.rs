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

    /// Cease / Administrative Shutdown carrying `message` as the shutdown communication
    /// (RFC 8203, lengths per RFC 9003): one length octet, then UTF-8, cut at a character
    /// boundary to at most 255 octets.
    pub fn admin_shutdown(message: &str) -> Notification {
        let mut end = message.len().min(255);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let mut data = vec![end as u8];
        data.extend_from_slice(&message.as_bytes()[..end]);
        Notification {
            code: super::codes::code::CEASE,
            subcode: super::codes::cease::ADMINISTRATIVE_SHUTDOWN,
            data,
        }
    }

    /// The shutdown communication of a Cease / Administrative Shutdown or Reset (RFC
    /// 8203): None when absent, empty or malformed (RFC 8203 §3: then it is ignored).
    pub fn shutdown_message(&self) -> Option<String> {
        use super::codes::{cease, code};
        let admin = [cease::ADMINISTRATIVE_SHUTDOWN, cease::ADMINISTRATIVE_RESET];
        if self.code != code::CEASE || !admin.contains(&self.subcode) {
            return None;
        }
        let (&len, rest) = self.data.split_first()?;
        let text = rest.get(..usize::from(len)).filter(|_| len > 0)?;
        std::str::from_utf8(text).ok().map(str::to_string)
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
        use super::codes::code;
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
        write!(f, "{name} ({}/{})", self.code, self.subcode)?;
        match self.shutdown_message() {
            Some(m) => write!(f, ": \"{}\"", m.escape_default()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8203 §2 layout: code 6, subcode 2, then a length octet and the UTF-8 text;
    /// RFC 9003 allows 255 octets, cut at a character boundary.
    #[test]
    fn shutdown_communication() {
        let n = Notification::admin_shutdown("maint ä");
        let mut body = Vec::new();
        n.encode(&mut body);
        assert_eq!(body, [&[6u8, 2, 8][..], b"maint ", &[0xc3, 0xa4]].concat());
        assert_eq!(
            Notification::decode(&body).shutdown_message().as_deref(),
            Some("maint ä")
        );
        assert_eq!(n.to_string(), "cease (6/2): \"maint \\u{e4}\"");
        let long = "é".repeat(200);
        let n = Notification::admin_shutdown(&long);
        assert_eq!(n.data[0], 254, "127 two-octet characters");
        // Malformed: length past the end, invalid UTF-8 -> ignored.
        let bad = Notification {
            code: 6,
            subcode: 2,
            data: vec![9, b'a'],
        };
        assert_eq!(bad.shutdown_message(), None);
        let bad = Notification {
            code: 6,
            subcode: 4,
            data: vec![1, 0xff],
        };
        assert_eq!(bad.shutdown_message(), None);
        assert_eq!(Notification::new(6, 2).shutdown_message(), None);
    }

    /// RFC 8203 §2: only Cease (6) with Administrative Shutdown (2) or Reset (4) carries
    /// a shutdown communication; a length octet of 0 means none (RFC 8203 §3).
    #[test]
    fn shutdown_communication_only_in_admin_cease() {
        let with = |code, subcode, data: &[u8]| {
            Notification {
                code,
                subcode,
                data: data.to_vec(),
            }
            .shutdown_message()
        };
        assert_eq!(with(6, 2, &[2, b'h', b'i']).as_deref(), Some("hi"));
        assert_eq!(with(6, 4, &[2, b'h', b'i']).as_deref(), Some("hi"));
        // The same bytes under another code or another Cease subcode: no message.
        assert_eq!(with(3, 2, &[2, b'h', b'i']), None);
        assert_eq!(with(2, 4, &[2, b'h', b'i']), None);
        assert_eq!(with(6, 3, &[2, b'h', b'i']), None);
        // Length 0 (with or without trailing octets): no message.
        assert_eq!(with(6, 2, &[0]), None);
        assert_eq!(with(6, 2, &[0, b'x']), None);
    }
}
