#!/usr/bin/env python3
"""scripts/hwcheck's node facts (docs/hwcheck.md, "Node facts" and
"Subnets"), from the "host| fact ...", "host| dev ..." (ibv_devinfo -v) and
"host| ip ..." (ip -o addr) lines hwcheck_fabric.sh gathers:

  system(lines)        per host: ulimit -l, kernel, rdma-core, fork settings
  ports(lines)         per host: each port's firmware, link layer, GIDs and
                       the subnets they are in
  reachability(ports)  every pair of nodes and the subnets they share; pairs
                       sharing none are flagged

A subnet is "ib <prefix>/64" (GID 0's subnet prefix) for an InfiniBand
port, "roce <network>" for each RoCE GID that is not link-local: the IPv4
or IPv6 network of the address, with the prefix length the node's
`ip -o addr` gives for it (else /24 or /64, marked "assumed")."""
import ipaddress
import re
from collections import defaultdict

GID = re.compile(r"GID\[\s*(\d+)\]:\s*([0-9a-fA-F:.]+)")


def by_host(lines, kind):
    """{host: [rest of each "host| KIND rest" line]}."""
    out = defaultdict(list)
    for line in lines:
        host, sep, rest = line.rstrip("\n").partition("| ")
        if sep and rest.startswith(kind + " "):
            out[host].append(rest[len(kind) + 1:])
    return out


def system(lines):
    facts = {}
    for host, rows in by_host(lines, "fact").items():
        facts[host] = dict(r.split(" ", 1) if " " in r else (r, "") for r in rows)
    return facts


def ip_prefixes(rows):
    """{address: prefix length} from `ip -o addr` lines."""
    found = {}
    for r in rows:
        m = re.search(r"\binet6?\s+([0-9a-fA-F:.]+)/(\d+)", r)
        if m:
            found[m.group(1)] = int(m.group(2))
    return found


def roce_subnet(gid, prefixes):
    """The network of a RoCE GID (None for link-local or all-zero ones)."""
    try:
        addr = ipaddress.IPv6Address(gid)
    except ValueError:
        return None
    if addr.is_link_local or addr.is_unspecified:
        return None
    ip = addr.ipv4_mapped or addr
    plen = prefixes.get(str(ip))
    net = ipaddress.ip_network(f"{ip}/{plen or (24 if ip.version == 4 else 64)}", strict=False)
    return f"roce {net}" + ("" if plen else " (assumed)")


def port_subnets(port, prefixes):
    if port["link_layer"] == "InfiniBand":
        gid0 = port["gids"].get(0)
        if not gid0:
            return []
        return [f"ib {ipaddress.ip_network(gid0 + '/64', strict=False)}"]
    nets = (roce_subnet(g, prefixes) for _, g in sorted(port["gids"].items()))
    return sorted({n for n in nets if n})


def parse_devinfo(rows):
    """Ports of one host's ibv_devinfo -v output: hca, port, fw_ver,
    link_layer, gids {index: gid}."""
    found, hca, fw, cur = [], "?", "", None
    for r in rows:
        s = r.strip()
        if s.startswith("hca_id:"):
            hca, cur = s.split()[1], None
        elif s.startswith("fw_ver:"):
            fw = s.split()[1] if len(s.split()) > 1 else ""
        elif re.match(r"port:\s*\d+$", s):
            cur = {"hca": hca, "port": int(s.split()[1]), "fw_ver": fw, "link_layer": "", "gids": {}}
            found.append(cur)
        elif cur and s.startswith("link_layer:"):
            cur["link_layer"] = s.split()[1]
        elif cur and GID.match(s):
            m = GID.match(s)
            cur["gids"][int(m.group(1))] = m.group(2)
    return found


def ports(lines):
    ips = by_host(lines, "ip")
    result = {}
    for host, rows in by_host(lines, "dev").items():
        prefixes = ip_prefixes(ips.get(host, []))
        result[host] = [dict(p, subnets=port_subnets(p, prefixes), gids=len(p["gids"]))
                        for p in parse_devinfo(rows)]
    return result


def reachability(host_ports, virtual=False):
    """{"hosts_visible", "note", "pairs": [{"a", "b", "shared"}]}."""
    hosts = sorted(host_ports)
    subnets = {h: {s for p in host_ports[h] for s in p["subnets"]} for h in hosts}
    pairs = [{"a": a, "b": b, "shared": sorted(subnets[a] & subnets[b])}
             for i, a in enumerate(hosts) for b in hosts[i + 1:]]
    if len(hosts) < 2:
        note = ("one host visible (virtual nodes of this host): subnets listed per host, "
                "no pair to check" if virtual else
                f"{len(hosts)} host(s) answered: no pair to check")
    else:
        cut = [f"{p['a']}-{p['b']}" for p in pairs if not p["shared"]]
        note = (f"{len(cut)} of {len(pairs)} node pairs share no subnet: {' '.join(cut)}" if cut
                else f"every one of {len(pairs)} node pairs shares a subnet")
    return {"hosts_visible": len(hosts), "note": note, "pairs": pairs}
