/* fare: Adaptive Routing Notifications in the data plane (v1model externs).
 *
 * Reception (ingress): an ARN addressed to the switch (ArnAddressed: one of its own
 * addresses; an ARN to another node is forwarded like any packet) from a direct neighbor
 * (TTL / hop limit 255), well formed (Type 1-4, Version 0, no unassigned Para-Type bit),
 * whose (arrival port, Path ID) the controller mapped to a removal slot marks that slot
 * removed (Types 1, 3) or restores it (Types 2, 4); Wcmp skips removed members at once.
 * Every accepted ARN is also sent to the controller, which then rewrites the groups.
 *
 * Generation (egress): when a monitored port's queue depth crosses the high threshold
 * upward, an egress-to-egress clone of the packet is rewritten into an ARN Type 1 toward the
 * upstream neighbors (the clone session's ports), repeated every refresh interval while the
 * queue stays congested; Type 2 when it falls below the low threshold. The Metric is what
 * docs/CODEPOINTS.md says (Type 1: the queue level 1..255 of the port's limit; Type 2: 0).
 * A queue that drains while no packet leaves would never be seen: the controller sends a
 * probe (packet-out with PACKET_OUT_PROBE) to every monitored port each refresh interval,
 * which passes the monitor and is dropped. Per-port state lives in registers. Failures
 * (Types 3, 4) come from the controller as packet-out.
 */
#ifndef FARE_ARN_P4
#define FARE_ARN_P4

control ArnReceive(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    counter(4, CounterType.packets) arn_rx_counter;   // 0 applied, 1 unknown, 2 bad TTL, 3 malformed

    /* hold_us: how long a removal lasts unless a Type 2/4 revokes it earlier (the
     * ARN draft's timeout revocation); senders repeat Types 1/3 while the condition lasts. */
    action mark_slot(bit<16> slot, bit<48> hold_us) {
        meta.arn_slot = slot;
        meta.arn_hold_us = hold_us;
    }

    action unknown_path() {
        meta.arn_slot = 0;
        meta.arn_hold_us = 0;
    }

    table arn_rx {
        key = {
            standard_metadata.ingress_port: exact @name("ingress_port");
            hdr.arn_path.path_id: exact @name("path_id");
        }
        actions = { mark_slot; @defaultonly unknown_path; }
        const default_action = unknown_path();
        size = ARN_SLOTS;
    }

    action punt(bit<8> reason) {
        standard_metadata.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = (bit<16>)standard_metadata.ingress_port;
        hdr.packet_in.reason = reason;
        hdr.packet_in.pad = 0;
    }

    apply {
        bool gtsm = (hdr.ipv4.isValid() && hdr.ipv4.ttl == 255)
                 || (hdr.ipv6.isValid() && hdr.ipv6.hop_limit == 255);
        if (!gtsm || standard_metadata.parser_error != error.NoError) {
            arn_rx_counter.count(2);
            mark_to_drop(standard_metadata);
            return;
        }
        /* docs/CODEPOINTS.md: Type 1-4, Version 0, Para-Type bits 2-7 unassigned. */
        if (hdr.arn.arn_type == 0 || hdr.arn.arn_type > ARN_FAILURE_ELIMINATED
                || hdr.arn.version != 0 || (hdr.arn.para_type & 0x3f) != 0) {
            arn_rx_counter.count(3);
            mark_to_drop(standard_metadata);
            return;
        }
        meta.arn_slot = 0;
        if (hdr.arn_path.isValid()) {
            arn_rx.apply();
        }
        if (meta.arn_slot == 0) {
            arn_rx_counter.count(1);
            punt(PUNT_REASON_ARN_BAD);
            return;
        }
        if (hdr.arn.arn_type == ARN_CONGESTION_DETECTED || hdr.arn.arn_type == ARN_FAILURE_DETECTED) {
            arn_removed.write((bit<32>)meta.arn_slot, 1);
            arn_removed_until.write((bit<32>)meta.arn_slot,
                                    standard_metadata.ingress_global_timestamp + meta.arn_hold_us);
            arn_rx_counter.count(0);
            punt(PUNT_REASON_ARN);
        } else {
            /* Types 2 and 4 (the only others left by the check above). */
            arn_removed.write((bit<32>)meta.arn_slot, 0);
            arn_rx_counter.count(0);
            punt(PUNT_REASON_ARN);
        }
    }
}

control ArnMonitor(inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<1>>(PORTS) port_congested;
    /* egress_global_timestamp of the port's last Type 1 (the refresh clock). */
    register<bit<48>>(PORTS) port_last_arn;
    counter(PORTS, CounterType.packets) arn_tx_counter;

    bit<19> high = 0;
    bit<19> low = 0;
    bit<19> limit = 0;
    bit<40> scale = 0;
    bit<48> refresh = 0;
    bit<32> path_id = 0;
    bit<32> session = 0;

    /* Thresholds and limit in packets of queue depth (enq_qdepth); metric_scale =
     * ceil(255 * 2^32 / limit_packets), so that (depth * metric_scale) >> 32 is
     * floor(255 * depth / limit) exactly for limits below 2^16 packets (no division in
     * the pipeline); refresh_us = how often a Type 1 is repeated while congested; path_id
     * = router ID of the neighbor on this port; session = clone session whose replicas
     * reach the upstream neighbors to notify. */
    action monitor(bit<19> high_threshold, bit<19> low_threshold, bit<19> limit_packets,
                   bit<40> metric_scale, bit<48> refresh_us, bit<32> neighbor_router_id,
                   bit<32> clone_session) {
        high = high_threshold;
        low = low_threshold;
        limit = limit_packets;
        scale = metric_scale;
        refresh = refresh_us;
        path_id = neighbor_router_id;
        session = clone_session;
    }

    table arn_monitor {
        key = { standard_metadata.egress_port: exact @name("egress_port"); }
        actions = { monitor; @defaultonly NoAction; }
        const default_action = NoAction();
        size = PORTS;
    }

    apply {
        if (arn_monitor.apply().hit) {
            bit<32> port = (bit<32>)standard_metadata.egress_port;
            bit<19> depth = standard_metadata.enq_qdepth;
            bit<48> now = standard_metadata.egress_global_timestamp;
            bit<1> congested;
            bit<48> last;
            port_congested.read(congested, port);
            port_last_arn.read(last, port);
            meta.arn_type = 0;
            if (congested == 0 && depth >= high) {
                port_congested.write(port, 1);
                meta.arn_type = ARN_CONGESTION_DETECTED;
            } else if (congested == 1 && depth < low) {
                port_congested.write(port, 0);
                meta.arn_type = ARN_CONGESTION_ELIMINATED;
            } else if (congested == 1 && now - last >= refresh) {
                meta.arn_type = ARN_CONGESTION_DETECTED;   // the refresh
            }
            if (meta.arn_type == ARN_CONGESTION_DETECTED) {
                port_last_arn.write(port, now);
                /* docs/CODEPOINTS.md: clamp(floor(255 * depth / limit), 1, 255). */
                if (depth >= limit) {
                    meta.arn_metric = 255;
                } else {
                    bit<64> level = ((bit<64>)depth * (bit<64>)scale) >> 32;
                    if (level == 0) {
                        meta.arn_metric = 1;
                    } else {
                        meta.arn_metric = (bit<8>)level;
                    }
                }
            } else {
                meta.arn_metric = 0;
            }
            if (meta.arn_type != 0) {
                meta.arn_path_id = path_id;
                arn_tx_counter.count(port);
                clone_preserving_field_list(CloneType.E2E, session, FL_ARN_CLONE);
            }
        }
    }
}

/* Rewrites an egress clone into an ARN: Ethernet / IPv4 (TTL 255, CS6) / UDP / ARN with a
 * Path ID parameter; the original payload is cut off. */
control ArnBuild(inout headers_t hdr, in metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

    action encap_v4(mac_addr_t dst_mac, mac_addr_t src_mac, ipv4_addr_t src_addr,
                    ipv4_addr_t dst_addr) {
        hdr.packet_in.setInvalid();
        hdr.ipv6.setInvalid();
        hdr.tcp.setInvalid();
        hdr.bth.setInvalid();   // a RoCEv2 packet's BTH would sit where the ARN goes
        hdr.arn_flow.setInvalid();
        hdr.arn_src4.setInvalid();
        hdr.arn_src6.setInvalid();
        hdr.arn_dst4.setInvalid();
        hdr.arn_dst6.setInvalid();
        hdr.arn_sport.setInvalid();
        hdr.arn_dport.setInvalid();

        hdr.ethernet.setValid();
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.ether_type = ETHERTYPE_IPV4;

        hdr.ipv4.setValid();
        hdr.ipv4.version = 4;
        hdr.ipv4.ihl = 5;
        hdr.ipv4.dscp = DSCP_CS6;
        hdr.ipv4.ecn = 0;
        hdr.ipv4.total_len = 20 + 8 + 8;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 0b010;   // don't fragment
        hdr.ipv4.frag_offset = 0;
        hdr.ipv4.ttl = 255;
        hdr.ipv4.protocol = IPPROTO_UDP;
        hdr.ipv4.hdr_checksum = 0;
        hdr.ipv4.src_addr = src_addr;
        hdr.ipv4.dst_addr = dst_addr;

        hdr.udp.setValid();
        hdr.udp.src_port = ARN_UDP_PORT;
        hdr.udp.dst_port = ARN_UDP_PORT;
        hdr.udp.length = 8 + 8;
        hdr.udp.checksum = 0;   // optional for IPv4

        hdr.arn.setValid();
        hdr.arn.arn_type = meta.arn_type;
        hdr.arn.version = 0;
        hdr.arn.rsvd = 0;
        hdr.arn.metric = meta.arn_metric;
        hdr.arn.para_type = ARN_PARA_PATH_ID;

        hdr.arn_path.setValid();
        hdr.arn_path.path_id = meta.arn_path_id;

        truncate(14 + 20 + 8 + 8);
    }

    /* Addresses of the ARN toward the neighbor on each port. */
    table arn_encap {
        key = { standard_metadata.egress_port: exact @name("egress_port"); }
        actions = { encap_v4; @defaultonly drop; }
        const default_action = drop();
        size = PORTS;
    }

    apply {
        arn_encap.apply();
    }
}

#endif
