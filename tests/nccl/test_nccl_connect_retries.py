"""NCCL's socket connect retries (src/misc/socket.cc's socketConnectCheck 2.24-2.28, src/os/linux.cc 2.29+;
socket.cc's socketStartConnect / socketPollConnect before 2.24): the retry that reached its count (k == n,
NCCL_SOCKET_RETRY_CNT) is a failed connection (TD072, at error) even where the WARN after it was not pasted;
a retry with attempts left, or a process that went on after it, is no finding. The lines are NCCL's own formats
at the tag named beside each, with the numbers of posted runs (the 2.24 lines as a Ray job's log shows them)."""

from __future__ import annotations

from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "vae-bc5a469e-2296-0:10209:10243 [1]"
# v2.24.3-1 src/misc/socket.cc: "%s: connect returned %s, retrying (%d/%ld) after sleep for %u msec"
V224 = f"{H} NCCL INFO socketPollConnect: connect returned {{err}}, retrying ({{k}}/34) after sleep for {{ms}} msec\n"
# v2.29.2-1 src/os/linux.cc: the address is named ("connect to %s returned %s, retrying (%d/%ld) ...")
V229 = (
    "tpgds-aihub0006:1180822:1180822 [1] NCCL INFO ncclOsSocketPollConnect: connect to 10.99.91.49<58525> returned "
    "Connection refused, retrying (34/34) after sleep for 3400 msec\n"
)
# v2.29.2-1 src/os/linux.cc: the WARN the last retry's failure ends in
V229_WARN = (
    "[2026-02-27 15:27:13] tpgds-aihub0006:1180822:1180822 [1] os/linux.cc:200 NCCL WARN ncclOsSocketPollConnect: "
    "connect to 10.99.91.49<58525> returned Connection refused, exceeded error retry count after 35 attempts\n"
)
# v2.18.1-1 src/misc/socket.cc: "Call to connect returned %s, retrying", once every 1000 refused attempts of 20000
OLD = "n1:4242:4300 [0] NCCL INFO Call to connect returned Connection refused, retrying\n"


def _retries(err: str, last: int) -> str:
    return "".join(V224.format(err=err, k=k, ms=k * 100) for k in range(last - 2, last + 1))


def _codes(text: str) -> list[tuple[str, str, str, dict[str, object]]]:
    return [(f.code, f.severity, f"{f.message} | {f.fix}", f.evidence) for f in explain([parse_file("j.log", text)])]


def test_the_last_retry_of_no_route_to_host_is_a_failed_connection_with_the_firewall_check() -> None:
    code, severity, said, ev = _codes(_retries("No route to host", 34))[0]
    assert (code, severity) == ("TD072", "error")
    assert "No route to host" in said and "(34/34)" in said and "not in the paste" in said
    assert "host-prohibited" in said and "NCCL_SOCKET_IFNAME" in said and "peer host is down" in said
    assert "nc -zv HOST PORT" in said and "firewall-cmd --list-all" in said and "iptables -L" in said
    assert ev["retries"] == "34/34"


def test_each_errno_names_its_own_candidates() -> None:
    refused = _codes(_retries("Connection refused", 34))[0][2].lower()
    assert "no listener on the peer's port" in refused and "not started yet or had crashed" in refused
    timed_out = _codes(_retries("Connection timed out", 34))[0][2]
    # the ranked causes of a timed-out connect (causes_network): a firewall dropping first, then the interface
    assert "dropping" in timed_out and "nc -zv" in timed_out and "NCCL_SOCKET_IFNAME" in timed_out


def test_the_address_of_a_later_release_is_named() -> None:
    code, _, said, _ = _codes(V229)[0]
    assert code == "TD072" and "10.99.91.49<58525>" in said


def test_with_the_warn_pasted_the_warn_is_the_failure() -> None:
    out = _codes(V229 + V229_WARN)
    assert [c for c, *_ in out].count("TD072") == 1
    assert "not in the paste" not in out[0][2]


def test_the_warn_of_2_24_and_of_old_releases_is_a_failed_connection() -> None:
    # v2.24.3-1 socket.cc: "%s: connect returned %s, exceeded error retry count (%d)"; v2.18.1-1: "exceeded retries"
    w224 = (
        f"{H} misc/socket.cc:544 NCCL WARN socketPollConnect: connect returned Connection refused, exceeded error "
        "retry count (35)\n"
    )
    old = f"{H} misc/socket.cc:512 NCCL WARN socketPollConnect: exceeded retries (20000)\n"
    for text in (w224, old):
        code, _, said, _ = _codes(text)[0]
        assert code == "TD072" and "Connection refused" in said


def test_retries_with_attempts_left_are_no_finding() -> None:
    assert _codes(_retries("No route to host", 33)) == []


def test_a_process_that_went_on_after_its_last_retry_is_no_finding() -> None:
    after = f"{H} NCCL INFO Connected all rings\n"
    assert _codes(_retries("No route to host", 34) + after) == []


def test_old_releases_fail_at_the_nineteenth_print_of_one_process() -> None:
    start = "n1:4242:4300 [0] NCCL INFO Channel 00 : 1[1e0] -> 0[1e0] [receive] via NET/Socket/0\n"
    assert _codes(start + OLD * 18) == []
    code, _, said, _ = _codes(start + OLD * 19)[0]
    assert code == "TD072" and "19000/20000" in said


def test_a_paste_of_old_retries_alone_is_the_failure_with_candidates() -> None:
    """The old form has no count: the poster's quote is the connection that failed, its cause not settled."""
    for text in (OLD, OLD.split("] ", 1)[1], "Call to connect returned Connection refused, retrying\n"):
        (f,) = explain([parse_file("j.log", text)])
        assert (f.code, f.severity) == ("TD072", "error")
        assert f.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
        assert "never reached its listen" in f.evidence["candidates"][0]  # type: ignore[index]
    assert _codes(_retries("Connection refused", 20)) == []  # 2.24's count shows the attempts left


def test_a_retry_to_a_link_local_address_then_a_failure_names_the_interface() -> None:
    """2.27+ name the address; a link-local one is each node's own, so the peer was never reached."""
    sock = f"{H} NCCL INFO NET/Socket : Using [0]enp73s0:10.1.216.156<0> [1]pod-id-link0:169.254.170.23<0>\n"
    retry = V229.replace("10.99.91.49<58525>", "169.254.170.23<40313>").replace(
        "(34/34) after sleep for 3400", "(13/34) after sleep for 1300"
    )
    end = "RuntimeError: NCCL error: remote process exited or there was a network error\n"
    (f,) = explain([parse_file("j.log", sock + retry + end)])
    assert f.code == "TD072" and "(retry 13/34), then the run failed" in f.message
    assert "NCCL_SOCKET_IFNAME=enp73s0" in f.fix and f.fix.startswith("The log shows it: NCCL's sockets use pod-id")
    (bare,) = explain([parse_file("j.log", retry + end)])  # without the sockets' list: the interface first of three
    assert bare.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
    assert "NCCL_SOCKET_IFNAME" in bare.evidence["candidates"][0]  # type: ignore[index]
    routed = retry.replace("169.254.170.23", "10.1.216.157")
    assert [g.code for g in explain([parse_file("j.log", sock + routed + end)])] != ["TD072"]
    assert _codes(sock + retry) == []  # no failure after it: a retry with attempts left


def test_a_retry_pasted_without_nccl_prefix_reads_the_same() -> None:
    bare = "socketPollConnect: connect returned No route to host, retrying (34/34) after sleep for 3400 msec\n"
    assert _codes(bare)[0][0] == "TD072"
