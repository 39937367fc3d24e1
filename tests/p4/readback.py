"""Independent decoder for fare's P4Runtime writes: reads a switch's routes, WCMP group
entries, action-profile groups and members with the PyPI `p4runtime` bindings (not fare's
code) and prints them as JSON. Names are resolved through the P4Info text file.

usage: readback.py ADDR DEVICE_ID P4INFO_TXTPB
"""
import json
import sys

from p4.v1 import p4runtime_pb2
from p4rt_common import by_suffix, load_p4info, stub, value


def main():
    addr, device_id, p4info_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    info = load_p4info(p4info_path)
    route_v4 = by_suffix(info.tables, "routing.route_v4")
    wcmp_group = by_suffix(info.tables, "wcmp.wcmp_group")
    selector = by_suffix(info.action_profiles, "wcmp.wcmp_selector")
    set_group = by_suffix(info.actions, "routing.set_group")
    set_nexthop = by_suffix(info.actions, "wcmp.set_nexthop")
    pname = {a.preamble.id: {p.id: p.name for p in a.params} for a in (set_group, set_nexthop)}

    switch = stub(addr)
    req = p4runtime_pb2.ReadRequest(device_id=device_id)
    for table in (route_v4, wcmp_group):
        req.entities.add().table_entry.table_id = table.preamble.id
    req.entities.add().action_profile_group.action_profile_id = selector.preamble.id
    req.entities.add().action_profile_member.action_profile_id = selector.preamble.id

    out = {"routes": [], "group_entries": [], "groups": [], "members": []}
    for resp in switch.Read(req):
        for e in resp.entities:
            kind = e.WhichOneof("entity")
            if kind == "table_entry" and e.table_entry.table_id == route_v4.preamble.id:
                t = e.table_entry
                lpm = t.match[0].lpm
                addr4 = ".".join(str(x) for x in value(lpm.value).to_bytes(4, "big"))
                params = {pname[set_group.preamble.id][p.param_id]: value(p.value)
                          for p in t.action.action.params}
                out["routes"].append({"prefix": "%s/%d" % (addr4, lpm.prefix_len), **params})
            elif kind == "table_entry":
                t = e.table_entry
                out["group_entries"].append({"group_id": value(t.match[0].exact.value),
                                             "profile_group": t.action.action_profile_group_id})
            elif kind == "action_profile_group":
                g = e.action_profile_group
                out["groups"].append({"group_id": g.group_id,
                                      "members": [{"member_id": m.member_id, "weight": m.weight,
                                                   "watch_port": value(m.watch_port)
                                                   if m.WhichOneof("watch_kind") == "watch_port"
                                                   else None}
                                                  for m in g.members]})
            elif kind == "action_profile_member":
                m = e.action_profile_member
                params = {pname[set_nexthop.preamble.id][p.param_id]: value(p.value)
                          for p in m.action.params}
                out["members"].append({"member_id": m.member_id, **params})
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
