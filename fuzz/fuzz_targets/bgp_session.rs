#![no_main]

//! A peer's byte stream as a session reads it: messages delimited by `frame_len`, each
//! decoded in the context negotiated so far (2- or 4-octet AS numbers from the peer's
//! OPEN). Invariants: nothing panics; every error is a NOTIFICATION the RFCs define for a
//! receiver (RFC 4271 §6.1-6.3, RFC 7313 §5) and survives its own encoding; a message
//! longer than 4096 octets is refused with Bad Message Length carrying the length field
//! (fare announces no Extended Messages, RFC 8654), whatever the peer's OPEN offers (its
//! ADD-PATH or Extended Messages capability changes nothing); whatever decodes re-encodes
//! to a message that decodes to the same value in the same context; the other context
//! never panics either.

use fare_bgp::packet::error::{code, header};
use fare_bgp::packet::{
    frame_len, Context, Message, MessageError, Notification, HEADER_LEN, MAX_MESSAGE_LEN,
};
use libfuzzer_sys::fuzz_target;

/// The subcodes a receiver may send for each code our decoder can raise.
fn rfc_subcodes(code: u8) -> &'static [u8] {
    match code {
        code::HEADER => &[1, 2, 3],
        // 0: unspecific (a malformed capability, RFC 5492 §3 leaves the subcode open).
        code::OPEN => &[0, 1, 2, 3, 4, 6, 7],
        // 7 (AS routing loop) is deprecated and a receiver never sends it.
        code::UPDATE => &[1, 2, 3, 4, 5, 6, 8, 9, 10, 11],
        code::ROUTE_REFRESH => &[1],
        _ => &[],
    }
}

fn check_error(e: &MessageError, frame: &[u8]) {
    let n = &e.notification;
    assert!(
        rfc_subcodes(n.code).contains(&n.subcode),
        "NOTIFICATION {}/{} is not one a receiver sends ({})",
        n.code,
        n.subcode,
        e.reason
    );
    if (n.code, n.subcode) == (code::HEADER, header::BAD_MESSAGE_LENGTH) && !n.data.is_empty() {
        assert_eq!(
            n.data,
            frame[16..18],
            "Bad Message Length data is the length field"
        );
    }
    // What the agent sends back decodes to the same NOTIFICATION.
    let sent = Message::Notification(n.clone()).encode(Context::default());
    assert_eq!(
        Message::decode(&sent, Context::default()),
        Ok(Message::Notification(Notification {
            code: n.code,
            subcode: n.subcode,
            data: n.data.clone(),
        }))
    );
}

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    let mut peer_open = None;
    for _ in 0..64 {
        let declared = rest
            .get(16..18)
            .map(|l| usize::from(u16::from_be_bytes([l[0], l[1]])));
        let len = match frame_len(rest) {
            Ok(Some(len)) if len <= rest.len() => len,
            // An incomplete message: the session waits for more bytes.
            Ok(_) => return,
            Err(e) => {
                check_error(&e, rest);
                return;
            }
        };
        assert!(declared.is_some_and(|d| d <= MAX_MESSAGE_LEN && d >= HEADER_LEN));
        let (frame, tail) = rest.split_at(len);
        rest = tail;
        let ctx = Context::negotiated(peer_open.as_ref());
        let other = Context {
            four_octet_as: !ctx.four_octet_as,
        };
        let _ = Message::decode(frame, other);
        match Message::decode(frame, ctx) {
            Ok(msg) => {
                let bytes = msg.encode(ctx);
                if bytes.len() <= MAX_MESSAGE_LEN {
                    let again = Message::decode(&bytes, ctx).expect("a re-encoded message decodes");
                    match (&msg, &again) {
                        (Message::Update(a), Message::Update(b)) => {
                            assert_eq!(a.attributes, b.attributes);
                            assert_eq!(a.nlri, b.nlri);
                            assert_eq!(a.withdrawn, b.withdrawn);
                        }
                        _ => assert_eq!(msg, again),
                    }
                }
                if let Message::Open(o) = msg {
                    peer_open = Some(o);
                }
            }
            Err(e) => {
                check_error(&e, frame);
                return;
            }
        }
    }
});
