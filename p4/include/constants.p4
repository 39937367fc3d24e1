/* fare: constants. Values the specifications leave open are listed in docs/CODEPOINTS.md;
 * the ones compiled into the program can be overridden with -D at compile time. */
#ifndef FARE_CONSTANTS_P4
#define FARE_CONSTANTS_P4

#ifndef ARN_UDP_PORT
#define ARN_UDP_PORT 9961
#endif

/* The port the target connects to the controller (simple_switch_grpc --cpu-port). */
#ifndef CPU_PORT
#define CPU_PORT 255
#endif

/* Table and register sizes. */
#define ROUTE_V4_SIZE     4096
#define ROUTE_V6_SIZE     4096
#define GROUP_TABLE_SIZE  1024
#define SELECTOR_SIZE     16384
#define MEMBER_COUNTERS   16384
#define ARN_SLOTS         4096
/* Flow mode: buckets per group (the flow hash h picks bucket (h * FLOW_BUCKETS) >> 32),
 * the same as the XDP data plane's table, and the (group, bucket) entries of all groups. */
#define FLOW_BUCKETS      256
#define BUCKET_TABLE_SIZE 262144
/* Flowlet mode: per flow-hash slot the last-seen time, member and group (registers). */
#ifndef FLOWLET_SLOTS
#define FLOWLET_SLOTS     65536
#endif
/* The switch's own addresses an ARN may be sent to (link addresses, the ARN multicast
 * group), per IP version. */
#define LOCAL_ADDRESSES   256
#define PORTS             512
/* DPF: flow rule entries (a rule with k DSCP values takes k entries), (route, color)
 * pairs, and fallback links. */
#ifndef FLOW_RULE_SIZE
#define FLOW_RULE_SIZE    1024
#endif
#define COLOR_GROUP_SIZE  1024

/* How many times a packet is resubmitted to steer around members an ARN removed before it
 * takes the removed member anyway (a removed path is better than a black hole). */
#define MAX_RESELECT      8

/* standard_metadata.instance_type of an egress-to-egress clone on BMv2. */
#define BMV2_INSTANCE_TYPE_EGRESS_CLONE 2

/* Field lists preserved by resubmit / clone. */
#define FL_RESUBMIT  1
#define FL_ARN_CLONE 2

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_IPV6 = 0x86dd;
const bit<8>  IPPROTO_TCP    = 6;
const bit<8>  IPPROTO_UDP    = 17;
const bit<16> ROCEV2_UDP_PORT = 4791;   // IANA; its payload starts with the IB BTH

const bit<8> ARN_CONGESTION_DETECTED   = 1;
const bit<8> ARN_CONGESTION_ELIMINATED = 2;
const bit<8> ARN_FAILURE_DETECTED      = 3;
const bit<8> ARN_FAILURE_ELIMINATED    = 4;
#ifndef ARN_PATH_ID_ONLY
const bit<8> ARN_PARA_FLOW             = 0x80;   // the flow identifier is parsed
#endif
const bit<8> ARN_PARA_PATH_ID          = 0x40;
const bit<6> DSCP_CS6                  = 48;

/* packet_out.flags */
const bit<16> PACKET_OUT_PROBE = 1;

/* packet_in.reason */
const bit<8> PUNT_REASON_ARN      = 1;
const bit<8> PUNT_REASON_ARN_BAD  = 2;   // ARN from an unknown (arrival port, Path ID)

#endif
