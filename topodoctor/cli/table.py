"""The command table: every command's name, help, exit codes, options class and the function that
runs it, named by module so that a command loads only when it is asked for (click's lazy group).

The typer app (cli/commands.py), the early read of the command line (cli/__init__.py), each
command's help epilog and README's table of exit codes (cli/exit_codes.py) are made from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_USAGE = ("2", "usage or input error: bad option; missing, corrupt or inconsistent file")
_CANNOT = ("3", "could not check: no driver or GPU, budget spent, or a topodoctor bug")
_SIGNAL = ("128+N", "stopped by signal N (143: SIGTERM); the probe child is killed too")


@dataclass(frozen=True)
class Command:
    """One command: its options class and runner (``module:name``), its help and exit codes."""

    name: str
    options: str  # "topodoctor.service.request_check:CheckRequest": its options, the service's request
    runner: str  # "topodoctor.cli.check:run_check": runner(options) -> exit code
    help: str  # the first paragraph is the summary the command list shows
    exits: tuple[tuple[str, str], ...]
    usage: str = "options"  # "arguments": the usage line names the arguments by their metavar
    note: str = ""  # a paragraph after the exit codes

    def options_class(self) -> type:
        """The options class, imported (light: the early read imports it before anything else)."""
        return _named(self.options)  # type: ignore[no-any-return]

    def runner_function(self) -> Any:
        """The runner, its module imported: the command loads here."""
        return _named(self.runner)


def _named(path: str) -> Any:
    module, _, name = path.partition(":")
    # The lazy command table: a command's module is imported when the command is named, by the
    # import statement's machinery (not importlib's), so that -X importtime counts it too.
    return getattr(__import__(module, fromlist=[name]), name)


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "scan",
            "topodoctor.service.request_scan:ScanRequest",
            "topodoctor.cli.scan:run_scan",
            "Discover GPUs, NVLink/NVSwitch/PCIe links, NICs and NUMA affinity; print the topology.",
            (("0", "printed"), _USAGE, _CANNOT, _SIGNAL),
        ),
        Command(
            "record",
            "topodoctor.cli.args:RecordArgs",
            "topodoctor.cli.host:run_record",
            "Record every NVML call and sysfs read of a live scan, for replay on any machine.",
            (("0", "written"), _USAGE, _CANNOT, _SIGNAL),
        ),
        Command(
            "check",
            "topodoctor.service.request_check:CheckRequest",
            "topodoctor.cli.check:run_check",
            "Pre-job health check: probe, run the rules, exit 0 healthy / 1 unhealthy / 3 could not check.",
            (
                ("0", "healthy (findings below the fail level allowed)"),
                ("1", "unhealthy: a finding at or above the fail level"),
                ("2", "usage or input error; or an --expect file it could not use, and no fault"),
                ("3", "could not check: no driver or GPU, budget spent, a measurement not made"),
                _SIGNAL,
            ),
            note="With --format line, every outcome (exit 3 included) is one line on stdout.",
        ),
        Command(
            "rules",
            "topodoctor.cli.args:RulesArgs",
            "topodoctor.cli.host:run_rules",
            "List every code by what raises it (rules of a host, nccl-log, fleet --history): code, name, severity.",
            (("0", "listed"), _USAGE),
        ),
        Command(
            "explain",
            "topodoctor.cli.args:ExplainArgs",
            "topodoctor.cli.host:run_explain",
            "Print the documentation of one code; CODE is a code (TD101, TD040, TD950) or its name (nvlink-down).",
            (("0", "shown"), _USAGE),
            usage="arguments",
        ),
        Command(
            "config",
            "topodoctor.cli.args:ConfigArgs",
            "topodoctor.cli.settings:run_config",
            "Show every setting a site may keep in its config file: value, and where it came from.\n\n"
            "Settings are read from --config FILE, else the file $TOPODOCTOR_CONFIG names, else\n"
            "/etc/topodoctor/config.toml: a TOML table per command ([check], [fleet], [fleet.history]).\n"
            "Precedence: a flag, then the environment (TOPODOCTOR_FLEET_HISTORY_DRIFT_TOLERANCE for\n"
            "drift-tolerance in [fleet.history]), then the file, then the default. COMMAND shows one\n"
            "command's settings.",
            (("0", "shown"), _USAGE),
            usage="arguments",
        ),
        Command(
            "expect",
            "topodoctor.cli.args:ExpectArgs",
            "topodoctor.cli.host:run_expect",
            "Write an expectations file from a known-good host (live or replayed).",
            (("0", "written"), ("1", "refused: the host has error findings (--force)"), _USAGE, _CANNOT, _SIGNAL),
        ),
        Command(
            "bandwidth",
            "topodoctor.service.request_bandwidth:BandwidthRequest",
            "topodoctor.cli.bandwidth:run_bandwidth",
            "Measure GPU-to-GPU and host copies: bandwidth one way and both ways, latency, data integrity.",
            (
                ("0", "measured; no bandwidth finding at error level"),
                ("1", "a bandwidth finding (TD7xx) at error level"),
                _USAGE,
                _CANNOT,
                _SIGNAL,
            ),
        ),
        Command(
            "collectives",
            "topodoctor.service.request_collectives:CollectivesRequest",
            "topodoctor.cli.collectives:run",
            "Time NCCL collectives as nccl-tests does (busbw, #wrong) and explain them: NCCL's transports and "
            "channels, judged against the topology (TD0xx).",
            (
                ("0", "measured or judged; no finding at error level"),
                ("1", "a finding at error level: a slow, hung or wrong op, a wrong transport"),
                _USAGE,
                _CANNOT,
                _SIGNAL,
            ),
        ),
        Command(
            "fleet",
            "topodoctor.fleet.request:FleetRequest",
            "topodoctor.cli.fleet:run_fleet",
            "Roll up many nodes' results: status per node, shared findings, outliers among nodes of one type.\n\n"
            "RESULT... are result files (check, bandwidth, collectives or fitness JSON) or directories of\n"
            "them; --timeout bounds the reading of them all. With --history DB they are kept, and each node\n"
            "is judged over time too: drift against its own baseline, lemons, flapping, rising counters.",
            (
                ("0", "every node healthy"),
                ("1", "a node to drain, or a finding fleet-wide (it drains no node)"),
                ("2", "usage error; no readable result; a history database bad or locked"),
                ("3", "a node or a file could not be judged, and nothing above"),
                _SIGNAL,
            ),
            usage="arguments",
        ),
        Command(
            "nccl-topo",
            "topodoctor.cli.args:NcclTopoArgs",
            "topodoctor.cli.nccl_topo:run_nccl_topo",
            "Write an NCCL_TOPO_FILE for this host: the PCIe tree, NVLinks and CPU affinity as NCCL reads them.\n\n"
            "With --lint FILE, check an existing file against this host instead (exit 1 on an error).",
            (
                ("0", "written; or --lint found no error"),
                ("1", "--lint: the file has an error for this host"),
                _USAGE,
                _CANNOT,
                _SIGNAL,
            ),
        ),
        Command(
            "nccl-log",
            "topodoctor.cli.args_cluster:NcclLogArgs",
            "topodoctor.cli.nccl_log:run_nccl_log",
            "Explain NCCL's output: NCCL version per rank, ranks and nodes, transports, channels, the\n"
            "algorithm NCCL chose per op and size, and every failure with a code, the evidence line and a fix.\n\n"
            "FILE... is NCCL output: a job's stderr, NCCL_DEBUG_FILE files, nccl-tests output; a directory\n"
            "adds its *.log, *.txt, *.out and *.err files (compressed ones too); - reads standard input.",
            (
                ("0", "read; no failure at error level"),
                ("1", "the logs show a failure (a finding at error level)"),
                ("2", "usage or input error: a file missing, unreadable, too large, or no files"),
                _CANNOT,
                _SIGNAL,
            ),
            usage="arguments",
            note="Exit 2 too when no file holds a line of NCCL, torch.distributed, the linker on\n"
            "libnccl, XLA's NCCL or nccl-tests.",
        ),
        Command(
            "diagnose",
            "topodoctor.service.request_diagnose:DiagnoseRequest",
            "topodoctor.cli.diagnose:run_diagnose",
            "Read the evidence users bring and say what it shows: nccl-tests output, nvidia-smi\n"
            "(plain, -L, -q, topo -m, topo -p2p, nvlink -s/-e), p2pBandwidthLatencyTest,\n"
            "nvbandwidth, NCCL's topology and graph dumps, NCCL logs and Inspector records,\n"
            "lspci -vvv, kernel XID lines, launch command lines.\n\n"
            "PATH... are files (any name: the kind is told from the content), directories\n"
            "(every file in them) or - for standard input; a file may hold several kinds.",
            (
                ("0", "read; nothing wrong at the fail level"),
                ("1", "the evidence shows a problem (a finding at the fail level)"),
                ("2", "input error: no input of a kind it reads; a file missing or too large"),
                _CANNOT,
                _SIGNAL,
            ),
            usage="arguments",
        ),
        Command(
            "job",
            "topodoctor.service.request_job:JobRequest",
            "topodoctor.cli.job:run_job",
            "Name the rank, node, GPU and collective of a hung or slow job, and the likely cause.\n\n"
            "DUMP... are flight-recorder dumps (one file per rank, named by a prefix and the rank: pickle or\n"
            "JSON) or directories of them.",
            (
                ("0", "nothing wrong found"),
                ("1", "a finding at the fail level: a culprit (rank, host, GPU), a stall"),
                ("2", "usage or input error: no readable dump, a corrupt map or RAS file"),
                ("3", "could not analyse: no RAS or NVML answer and nothing else; budget spent"),
                _SIGNAL,
            ),
        ),
    )
}
