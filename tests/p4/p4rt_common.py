"""What the PyPI `p4runtime` scripts of this directory share (none of it is fare's code):
P4Info loading and lookup by name, value encoding, a session as primary controller, and
the route and member updates both writers build.
"""
import queue
import threading

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

DELETE = p4runtime_pb2.Update.DELETE


def by_suffix(items, suffix):
    for item in items:
        if item.preamble.name == suffix or item.preamble.name.endswith("." + suffix):
            return item
    raise SystemExit("P4Info has no " + suffix)


def param_id(action, name):
    return next(p.id for p in action.params if p.name == name)


def enc(v):
    n = max(1, (v.bit_length() + 7) // 8)
    return v.to_bytes(n, "big")


def value(b):
    return int.from_bytes(b, "big")


def load_p4info(path):
    info = p4info_pb2.P4Info()
    with open(path) as f:
        text_format.Merge(f.read(), info)
    return info


def stub(addr):
    return p4runtime_pb2_grpc.P4RuntimeStub(grpc.insecure_channel(addr))


class Primary:
    """A stream channel that won arbitration (SystemExit otherwise), read in the background;
    `write` sends one WriteRequest, `close` ends the stream."""

    def __init__(self, addr, device_id, election):
        self.stub = stub(addr)
        self.device_id = device_id
        self.eid = p4runtime_pb2.Uint128(low=election)
        self.requests = queue.Queue()
        arb = p4runtime_pb2.StreamMessageRequest()
        arb.arbitration.device_id = device_id
        arb.arbitration.election_id.low = election
        self.requests.put(arb)
        stream = self.stub.StreamChannel(iter(self.requests.get, None))
        first = next(stream)
        if first.arbitration.status.code != 0:
            raise SystemExit("not primary: %s" % first.arbitration.status)
        threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()

    def write(self, updates):
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id, election_id=self.eid)
        req.updates.extend(updates)
        self.stub.Write(req)

    def close(self):
        self.requests.put(None)


def route_update(route_v4, set_group, kind, prefix, prefix_len, group_id):
    """A route_v4 entry for PREFIX/PREFIX_LEN (an int) to `set_group(group_id, spray=1)`."""
    u = p4runtime_pb2.Update(type=kind)
    t = u.entity.table_entry
    t.table_id = route_v4.preamble.id
    m = t.match.add()
    m.field_id = route_v4.match_fields[0].id
    m.lpm.value = enc(prefix)
    m.lpm.prefix_len = prefix_len
    if kind != DELETE:
        a = t.action.action
        a.action_id = set_group.preamble.id
        # Every parameter the program declares: the others (flowlet_gap_us) 0, as the
        # agent writes a spray group.
        given = {"group_id": group_id, "spray": 1}
        for p in set_group.params:
            a.params.add(param_id=p.id, value=enc(given.get(p.name, 0)))
    return u


def member_update(selector, set_nexthop, kind, member_id, port, src_mac, member_index):
    """An action-profile member `set_nexthop` out of `port` to 02:00:00:00:00:<port>."""
    u = p4runtime_pb2.Update(type=kind)
    m = u.entity.action_profile_member
    m.action_profile_id = selector.preamble.id
    m.member_id = member_id
    if kind != DELETE:
        a = m.action
        a.action_id = set_nexthop.preamble.id
        for name, v in (("port", port), ("dst_mac", 0x020000000000 + port),
                        ("src_mac", src_mac), ("arn_slot", 0),
                        ("member_index", member_index)):
            a.params.add(param_id=param_id(set_nexthop, name), value=enc(v))
    return u
