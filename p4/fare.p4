/* fare: WCMP forwarding with per-packet spray / per-flow hashing and Adaptive Routing
 * Notifications, for the v1model architecture (BMv2 simple_switch_grpc).
 *
 * Layout: include/ holds the headers, the parser and one control per concern (routing,
 * dpf, wcmp, arn). This file wires them into the v1model pipeline; tna/fare_tna.p4 is the
 * Tofino (TNA) sibling, sharing the headers, routing and parser, same P4Runtime names.
 *
 * Control plane: P4Runtime; every table, action and register is found by name in the P4Info
 * (p4/build/fare.p4info.txtpb), never by id.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"
#include "include/parser.p4"
#include "include/routing.p4"
#include "include/wcmp.p4"
#include "include/dpf.p4"
#include "include/arn_addressed.p4"
#include "include/arn.p4"

parser FareParser(packet_in packet,
                  out headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    FarePacketParser() packet_parser;

    state start {
        bit<1> from_controller = 0;
        if (standard_metadata.ingress_port == CPU_PORT) {
            from_controller = 1;
        }
        packet_parser.apply(packet, hdr, meta, from_controller);
        transition accept;
    }
}

control FareVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FareIngress(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    Routing() routing;
    FlowHash() flow_hash;
    Dpf() dpf;
    Wcmp() wcmp;
    ArnAddressed() arn_addressed;
    ArnReceive() arn_receive;

    apply {
        meta.probe = 0;
        if (hdr.packet_out.isValid()) {
            /* From the controller (ARN Types 3/4 on link failure, queue probes): out as
             * given. */
            standard_metadata.egress_spec = (bit<9>)hdr.packet_out.egress_port;
            if (hdr.packet_out.flags == PACKET_OUT_PROBE) {
                meta.probe = 1;
            }
            hdr.packet_out.setInvalid();
            return;
        }
        if (hdr.arn.isValid()) {
            bool to_switch;
            arn_addressed.apply(hdr, to_switch);
            if (to_switch) {
                arn_receive.apply(hdr, meta, standard_metadata);
                return;
            }
            /* An ARN to another node: forwarded below like any packet. */
        }
        routing.apply(hdr, meta);
        if (meta.routed == 0) {
            mark_to_drop(standard_metadata);
            return;
        }
        if ((hdr.ipv4.isValid() && hdr.ipv4.ttl <= 1)
                || (hdr.ipv6.isValid() && hdr.ipv6.hop_limit <= 1)) {
            mark_to_drop(standard_metadata);
            return;
        }
        dpf.apply(hdr, meta);
        flow_hash.apply(hdr, meta);
        wcmp.apply(hdr, meta, standard_metadata);
    }
}

control FareEgress(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    ArnMonitor() arn_monitor;
    ArnBuild() arn_build;

    apply {
        if (standard_metadata.instance_type == BMV2_INSTANCE_TYPE_EGRESS_CLONE) {
            arn_build.apply(hdr, meta, standard_metadata);
        } else if (standard_metadata.egress_port != CPU_PORT) {
            arn_monitor.apply(meta, standard_metadata);
            if (meta.probe == 1) {
                mark_to_drop(standard_metadata);   // seen by the monitor; not for the wire
            }
        }
    }
}

control FareComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

V1Switch(FareParser(),
         FareVerifyChecksum(),
         FareIngress(),
         FareEgress(),
         FareComputeChecksum(),
         FareDeparser()) main;
