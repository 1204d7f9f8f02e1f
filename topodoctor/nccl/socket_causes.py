"""What NCCL's socket errors mean (the strerror text of a connect that failed, the family socket() refused), as
data for the network findings' builders (``nccl.fixes_network``)."""

from __future__ import annotations

# the errno of a connect that failed (its strerror text) -> what it means for NCCL's connection
FIREWALL_SAID = "a firewall between the nodes, in the post's words"
CONNECT_WHY = {
    FIREWALL_SAID: "NCCL's bootstrap and socket transport listen on ports the kernel picks from its ephemeral range "
    "(net.ipv4.ip_local_port_range), not on MASTER_PORT alone, so a firewall that opens only a few ports between the "
    "nodes blocks them: open the traffic between the nodes' addresses, or set ip_local_port_range on every node to "
    "ports the firewall passes",
    "Connection refused": "no listener on the peer's port: the peer rank had not started yet or had crashed "
    "(its own log), MASTER_ADDR or the port is wrong, or a firewall rejects the port",
    # firewalld's and iptables' REJECT answer icmp-host-prohibited, which the kernel reports as EHOSTUNREACH
    "No route to host": "a firewall rejecting the connection (firewalld or an iptables REJECT rule answers "
    "host-prohibited), no route to that address (the interface NCCL picked is not routed between the nodes: a "
    "docker bridge, a link-local 169.254.x address; set NCCL_SOCKET_IFNAME), or the peer host is down",
    "Network is unreachable": "no route to that address: pick a routable interface with NCCL_SOCKET_IFNAME",
    "Connection timed out": "the packets got no answer: a firewall or security group dropping them between the "
    "nodes, or an address that is not reachable from here (NCCL_SOCKET_IFNAME names the interface to use)",
    "Software caused connection abort": "NCCL 2.19 - 2.23 print this for a connect that failed, hiding the real "
    "error (a bug fixed in 2.24): upgrade NCCL to see it, and check the reachability below",
    "Cannot assign requested address": "the local address cannot be used (an interface that is down, an IPv6 "
    "link-local address without its scope)",
    "Connection reset by peer": "the peer closed the connection at once: its process died or a firewall resets it",
}

# socket() refused the family of the address NCCL picked (EAFNOSUPPORT)
FAMILY_CAUSES = (
    "the nodes' interfaces differ in family: an IPv6 address on one node, IPv4 only (or IPv6 disabled) on its peer; "
    "NCCL_SOCKET_FAMILY=AF_INET keeps NCCL on IPv4, NCCL_SOCKET_IFNAME on an interface both have",
    "IPv6 disabled in this container or kernel (net.ipv6.conf.all.disable_ipv6=1) while the interface NCCL picked "
    "carries an IPv6 address",
)
