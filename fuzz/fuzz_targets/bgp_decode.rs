#![no_main]

//! BGP message decoder: never panics on any input; whatever decodes re-encodes to bytes
//! that decode to the same message (UPDATEs: the same attributes and prefixes, minus the
//! attributes RFC 7606 had discarded). Covers AIGP (RFC 7311) and DPF's Color community
//! and SESSION-COLOR capability, and the UPA community.

use fare_bgp::packet::{Context, Message, HEADER_LEN, MARKER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, body)) = data.split_first() else {
        return;
    };
    let ctx = Context {
        four_octet_as: knobs & 0x80 != 0,
    };
    // The low bits pick the message type; the rest of the input is the body.
    let mut msg = MARKER.to_vec();
    msg.extend_from_slice(&((HEADER_LEN + body.len()).min(u16::MAX as usize) as u16).to_be_bytes());
    msg.push(knobs & 0x07);
    msg.extend_from_slice(body);
    let _ = fare_bgp::packet::frame_len(&msg);
    let Ok(first) = Message::decode(&msg, ctx) else {
        return;
    };
    // DPF views of what decoded: the SESSION-COLOR capability and route colors.
    match &first {
        Message::Open(o) => {
            let _ = fare_bgp::packet::color::peer_session_color(&o.capabilities, knobs);
        }
        Message::Update(u) => {
            let _ = fare_bgp::packet::color::route_colors(&u.attributes.ext_communities);
            // UPA (draft-krierhorn-idr-upa): any subtype, as configured.
            let _ = fare_bgp::packet::upa::unreachable(&u.attributes.ext_communities, knobs);
        }
        _ => {}
    }
    let bytes = first.encode(ctx);
    if bytes.len() > fare_bgp::packet::MAX_MESSAGE_LEN {
        return;
    }
    let again = Message::decode(&bytes, ctx).expect("a re-encoded message decodes");
    match (&first, &again) {
        (Message::Update(a), Message::Update(b)) => {
            assert_eq!(a.attributes, b.attributes);
            assert_eq!(a.nlri, b.nlri);
            assert_eq!(a.withdrawn, b.withdrawn);
        }
        _ => assert_eq!(first, again),
    }
});
