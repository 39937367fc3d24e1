/* fare: parser states and deparser, architecture independent. Each architecture's top
 * file wraps FarePacketParser in its own parser, which first consumes the target's port
 * metadata and says whether the packet comes from the controller (fare.p4: v1model;
 * tna/fare_tna.p4: TNA). */
#ifndef FARE_PARSER_P4
#define FARE_PARSER_P4

parser FarePacketParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                        in bit<1> from_controller) {
    state start {
        transition select(from_controller) {
            1: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        /* L4 only for unfragmented packets without options. */
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, IPPROTO_UDP): parse_udp;
            (5, 0, IPPROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        transition select(hdr.ipv6.next_hdr) {
            IPPROTO_UDP: parse_udp;
            IPPROTO_TCP: parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.udp.dst_port) {
            ARN_UDP_PORT: parse_arn;
            ROCEV2_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        transition accept;
    }

    /* ARN: parameters appear in Para-Type bit order (flow identifier, then Path ID).
     * An architecture whose parser cannot keep Para-Type live through the flow states
     * (Tofino: three match registers) defines ARN_PATH_ID_ONLY: it parses the Path ID of
     * ARNs without a flow identifier only, and leaves the others to the controller. */
    state parse_arn {
        packet.extract(hdr.arn);
#ifdef ARN_PATH_ID_ONLY
        transition select(hdr.arn.para_type) {
            ARN_PARA_PATH_ID: parse_arn_path;
            default: accept;
        }
#else
        transition select(hdr.arn.para_type[7:6]) {
            ARN_PARA_FLOW[7:6]: parse_arn_flow;
            (ARN_PARA_FLOW | ARN_PARA_PATH_ID)[7:6]: parse_arn_flow;
            ARN_PARA_PATH_ID[7:6]: parse_arn_path;
            default: accept;
        }
#endif
    }

    state parse_arn_flow {
        packet.extract(hdr.arn_flow);
        transition select(hdr.arn_flow.opcode, hdr.arn_flow.mask[3:3]) {
            (0, 1): parse_arn_src4;
            (1, 1): parse_arn_src6;
            (_, 0): parse_arn_flow_dst;
            default: reject;   // unknown opcode with an address: cannot know its length
        }
    }

    state parse_arn_src4 { packet.extract(hdr.arn_src4); transition parse_arn_flow_dst; }
    state parse_arn_src6 { packet.extract(hdr.arn_src6); transition parse_arn_flow_dst; }

    state parse_arn_flow_dst {
        transition select(hdr.arn_flow.opcode, hdr.arn_flow.mask[2:2]) {
            (0, 1): parse_arn_dst4;
            (1, 1): parse_arn_dst6;
            (_, 0): parse_arn_flow_sport;
            default: reject;
        }
    }

    state parse_arn_dst4 { packet.extract(hdr.arn_dst4); transition parse_arn_flow_sport; }
    state parse_arn_dst6 { packet.extract(hdr.arn_dst6); transition parse_arn_flow_sport; }

    state parse_arn_flow_sport {
        transition select(hdr.arn_flow.mask[1:1]) {
            1: parse_arn_sport;
            default: parse_arn_flow_dport;
        }
    }

    state parse_arn_sport { packet.extract(hdr.arn_sport); transition parse_arn_flow_dport; }

    state parse_arn_flow_dport {
        transition select(hdr.arn_flow.mask[0:0]) {
            1: parse_arn_dport;
            default: parse_arn_after_flow;
        }
    }

    state parse_arn_dport { packet.extract(hdr.arn_dport); transition parse_arn_after_flow; }

    state parse_arn_after_flow {
        transition select(hdr.arn.para_type[6:6]) {
            1: parse_arn_path;
            default: accept;
        }
    }

    state parse_arn_path {
        packet.extract(hdr.arn_path);
        transition accept;
    }
}

control FareDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.udp);
        packet.emit(hdr.tcp);
        packet.emit(hdr.bth);
        packet.emit(hdr.arn);
#ifndef ARN_PATH_ID_ONLY
        /* Never valid where the parser takes the Path ID only (nothing sets them). */
        packet.emit(hdr.arn_flow);
        packet.emit(hdr.arn_src4);
        packet.emit(hdr.arn_src6);
        packet.emit(hdr.arn_dst4);
        packet.emit(hdr.arn_dst6);
        packet.emit(hdr.arn_sport);
        packet.emit(hdr.arn_dport);
#endif
        packet.emit(hdr.arn_path);
    }
}

#endif
