//! The fast path's IPv4 route lookup: the destination's first two bytes index DIR4_TOP,
//! and at most two more bytes index blocks of DIR4_BLOCKS (`fare_common::dir4`). Array
//! reads the verifier inlines, instead of the LPM trie's walk (a helper call and a
//! compare per trie node): measured, the trie walk was the largest part of what the
//! fast path cost beyond the minimal forwarder (bench/RESULTS.md, `xdp`).

use fare_common::{dir4, RouteValue};

use crate::maps::{DIR4_BLOCKS, DIR4_TOP};

/// The route of `dst` when the table has one; `None`: ask ROUTES_V4 (the table has no
/// route there, or was not filled for that range).
#[inline(always)]
pub fn lookup(dst: [u8; 4]) -> Option<RouteValue> {
    let mut entry = *DIR4_TOP.get(u32::from(u16::from_be_bytes([dst[0], dst[1]])))?;
    for byte in [dst[2], dst[3]] {
        if entry & dir4::BLOCK == 0 {
            break;
        }
        let block = entry & (dir4::MAX_BLOCKS - 1);
        entry = *DIR4_BLOCKS.get(block * dir4::BLOCK_ENTRIES + u32::from(byte))?;
    }
    if entry & dir4::ROUTE == 0 {
        return None;
    }
    Some(dir4::route_of(entry))
}
