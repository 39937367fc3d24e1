/* fare: header and metadata types, shared by every architecture (v1model, TNA).
 *
 * The ARN layout follows draft-wh-rtgwg-adaptive-routing-arn section 3.2 with the decisions
 * recorded in docs/CODEPOINTS.md: IPv4/IPv6 + UDP to port ARN_UDP_PORT, DSCP CS6, TTL /
 * hop limit 255, bit 0 = most significant bit, Path ID = router ID of the node at the far
 * end of the affected link (seen from the sender).
 */
#ifndef FARE_HEADERS_P4
#define FARE_HEADERS_P4

#include "constants.p4"

typedef bit<48>  mac_addr_t;
typedef bit<32>  ipv4_addr_t;
typedef bit<128> ipv6_addr_t;

/* Sent to the controller (P4Runtime PacketIn metadata). */
@controller_header("packet_in")
header packet_in_h {
    bit<16> ingress_port;   // wider than any target's port type; P4Runtime carries it as bytes
    bit<8>  reason;         // PUNT_REASON_*
    bit<8>  pad;
}

/* Received from the controller (P4Runtime PacketOut metadata). */
@controller_header("packet_out")
header packet_out_h {
    bit<16> egress_port;
    bit<16> flags;          // PACKET_OUT_PROBE: a queue probe, dropped after the ARN monitor
}

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv4_h {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header ipv6_h {
    bit<4>      version;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* Only the ports: the rest of TCP is never touched. */
header tcp_ports_h {
    bit<16> src_port;
    bit<16> dst_port;
}

/* RoCEv2 InfiniBand Base Transport Header (UDP to ROCEV2_UDP_PORT). DPF classifies by
 * its destination QP. */
header bth_h {
    bit<8>  opcode;
    bit<8>  flags;        // SE, M, pad count, TVer
    bit<16> pkey;
    bit<8>  rsvd;
    bit<24> dest_qp;
    bit<32> psn_word;     // AckReq, reserved, PSN
}

/* ARN common header (first word). */
header arn_h {
    bit<8> arn_type;      // 1 congestion detected, 2 eliminated, 3 failure detected, 4 eliminated
    bit<4> version;       // 0
    bit<4> rsvd;
    bit<8> metric;
    bit<8> para_type;     // 0x80 flow identifier, 0x40 Path ID
}

/* Para-Type bit 0: flow identifier, first word. Address and port fields follow only when
 * their Mask bit is set. */
header arn_flow_h {
    bit<4>  opcode;       // 0 IPv4, 1 IPv6
    bit<5>  mask;         // 0x10 protocol, 0x08 src, 0x04 dst, 0x02 sport, 0x01 dport
    bit<15> rsvd;
    bit<8>  protocol;
}

header arn_addr4_h { ipv4_addr_t addr; }
header arn_addr6_h { ipv6_addr_t addr; }
header arn_port_h  { bit<16> port; }

/* Para-Type bit 1: Path ID. */
header arn_path_h {
    bit<32> path_id;
}

struct headers_t {
    packet_in_h  packet_in;
    packet_out_h packet_out;
    ethernet_h   ethernet;
    ipv4_h       ipv4;
    ipv6_h       ipv6;
    udp_h        udp;
    tcp_ports_h  tcp;
    bth_h        bth;
    arn_h        arn;
    arn_flow_h   arn_flow;
    arn_addr4_h  arn_src4;
    arn_addr6_h  arn_src6;
    arn_addr4_h  arn_dst4;
    arn_addr6_h  arn_dst6;
    arn_port_h   arn_sport;
    arn_port_h   arn_dport;
    arn_path_h   arn_path;
}

struct metadata_t {
    /* Routing result. */
    bit<16> group_id;
    bit<1>  spray;
    bit<1>  routed;
    /* Flowlet mode (set_group): the idle gap in microseconds after which a flow may change
     * member; 0 = per-flow (bucket table) or spray. */
    bit<32> flowlet_gap;
    /* Flow and flowlet mode: the flow's bucket, the member its bucket (or flowlet) chose,
     * and whether one was found (else the action selector decides, as in spray mode). */
    bit<16> bucket;
    bit<1>  have_member;
    bit<1>  flowlet_pinned;
    bit<1>  member_gone;
    /* Set on the pass resubmitted because a flowlet's member is gone: pick anew. */
    @field_list(FL_RESUBMIT)
    bit<1>  flowlet_reset;
    /* Selector input: a per-packet counter (spray) or a 5-tuple hash (flow). */
    bit<32> selector_input;
    bit<32> flow_hash;
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    /* DPF (include/dpf.p4): the packet's color (0 = none) and what the flow rules look
     * at, gathered from either IP version (IPv4 addresses in the low 32 bits). */
    bit<32>  color;
    bit<4>   ip_version;
    bit<6>   dscp;
    bit<8>   ip_protocol;
    bit<128> src_addr;
    bit<128> dst_addr;
    bit<1>   l4_valid;
    bit<1>   qp_valid;
    bit<24>  dest_qp;
    /* DPF fallback: the group to use when every member of the chosen one is removed;
     * on the resubmitted pass dpf_fallback = 1 and fallback_group is the group. */
    bit<16>  fallback_group;
    @field_list(FL_RESUBMIT)
    bit<1>   dpf_fallback;
    @field_list(FL_RESUBMIT)
    bit<16>  fallback_target;
    /* Chosen member. */
    bit<16> arn_slot;
    bit<48> arn_hold_us;
    bit<16> member_index;
    /* Resubmissions spent steering around members removed by ARN. Preserved on resubmit. */
    @field_list(FL_RESUBMIT)
    bit<8>  reselect;
    /* A queue probe from the controller (packet_out.flags): it passes the egress ARN
     * monitor of its port and is dropped there. */
    bit<1>  probe;
    /* ARN generation (egress); preserved into the egress clone that becomes the ARN. */
    @field_list(FL_ARN_CLONE)
    bit<8>  arn_type;
    @field_list(FL_ARN_CLONE)
    bit<8>  arn_metric;
    @field_list(FL_ARN_CLONE)
    bit<32> arn_path_id;
}

#endif
