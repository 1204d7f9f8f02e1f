"""A one-node Slurm cluster and a node_exporter, run from a test: Debian's real munged,
slurmctld, slurmd and prometheus-node-exporter, each on loopback, in a directory of its own, in
the foreground as a child of the test (there is no systemd), and stopped by pid.

The docs' example scripts are copied verbatim as ``Prolog=``, ``Epilog=`` and
``HealthCheckProgram=`` into one directory, as docs/prolog.md lays them out, beside the
``topodoctor.conf`` all three read and the ``topodoctor-<script>.conf`` each reads after it: the
settings the docs name are the only thing a test changes. Replayed recordings (``--replay``) stand
in for the GPUs. Where the machine has no syslog socket, the test listens on /dev/log itself, so
what the scripts send to syslog is read back too.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
NODE = "gpu01"  # the Slurm name; the host name stays what it is, as on clusters that name nodes apart
DAEMONS = ("munged", "slurmctld", "slurmd", "scontrol", "sinfo", "srun", "sbatch", "prometheus-node-exporter")
SCRIPTS = {"prolog": "slurm-prolog.sh", "health": "healthcheck-drain.sh", "epilog": "slurm-epilog.sh"}
SYSLOG = Path("/dev/log")
SUITE_MARK = "TOPODOCTOR_CLUSTER_SUITE"  # set by the suite's topodoctor command to the pid of the run that wrote it


class Unavailable(Exception):
    """A daemon or program this machine lacks or cannot start; the suite is skipped with it."""


def missing_programs() -> list[str]:
    return [p for p in (*DAEMONS, "promtool", "flock", "timeout") if shutil.which(p) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, pred: Callable[[], Any], timeout: float = 30.0, every: float = 0.2) -> Any:
    """Poll ``pred`` until it returns something true; AssertionError naming ``what`` at ``timeout``."""
    end = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class Cluster:
    """munged + slurmctld + slurmd (node ``gpu01``, 4 GPUs of gres) + node_exporter under ``base``."""

    def __init__(self, base: Path, health_interval_s: int = 2) -> None:
        self.base = base
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.hostname = socket.gethostname()
        self.conf = base / "slurm.conf"
        self.textfile = base / "textfile"
        self.log = base / "topodoctor.log"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.interval = health_interval_s
        self.exporter_port = 0
        self.etc = base / "etc"  # /etc/slurm of docs/prolog.md
        for d in ("state", "spool", "dev", "etc", "textfile", "jobs"):
            (base / d).mkdir(parents=True, exist_ok=True)
        base.chmod(0o755)
        self.prolog = self._install("prolog")
        self.health = self._install("health")
        self.epilog = self._install("epilog")
        self.topodoctor = self._wrapper()
        self.syslog: list[str] = []  # what the scripts sent to syslog, where we listen on /dev/log
        self._syslog_socket: socket.socket | None = None

    # ------------------------------------------------------------------ set-up

    def _install(self, which: str) -> Path:
        dst = self.etc / f"topodoctor-{which}.sh"  # the names docs/prolog.md installs them under
        shutil.copyfile(EXAMPLES / SCRIPTS[which], dst)  # verbatim: the docs' script is what runs
        dst.chmod(0o755)
        return dst

    def _wrapper(self) -> Path:
        """The topodoctor command of this checkout, as an installed console script would be."""
        path = self.base / "topodoctor"
        # SUITE_MARK in its environment tells this suite's checks from other topodoctor processes of the
        # same interpreter on the machine (another test run, a developer's own command)
        run = f'{SUITE_MARK}={os.getpid()} PYTHONPATH={ROOT} exec {sys.executable} -m topodoctor "$@"'
        path.write_text(f"#!/bin/sh\n{run}\n")
        path.chmod(0o755)
        return path

    def configure_common(self, **settings: str | int) -> None:
        """Write ``topodoctor.conf``, which all three scripts read: the settings every test shares."""
        common: dict[str, str | int] = {
            "TOPODOCTOR": str(self.topodoctor),
            "TOPODOCTOR_METRICS_DIR": str(self.textfile),
            "TOPODOCTOR_LOG": str(self.log),
            "TOPODOCTOR_LOCK": str(self.base / "health.lock"),
            "SLURM_CONF": str(self.conf),  # slurmd gives the health check no SLURM_CONF; ours is not in /etc
            **settings,
        }
        _write_conf(self.etc / "topodoctor.conf", common)

    def configure(self, which: str, **settings: str | int) -> None:
        """Write ``topodoctor-<which>.conf`` (``prolog``, ``health`` or ``epilog``): that script's own
        settings, read after topodoctor.conf."""
        _write_conf(self.etc / f"topodoctor-{which}.conf", settings)

    def set_slurm(self, **settings: int) -> None:
        """Change slurm.conf settings (``MessageTimeout=3``) and have the daemons reread it."""
        text = self.conf.read_text()
        for key, value in settings.items():
            text, n = re.subn(rf"^{key}=.*$", f"{key}={value}", text, flags=re.M)
            assert n == 1, key
        self.conf.write_text(text)
        self.run(["scontrol", "reconfigure"])

    def _slurm_conf(self) -> str:
        ctld, slurmd = free_port(), free_port()
        b = self.base
        return f"""ClusterName=topodoctor-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={b}/munge.socket
CredType=cred/munge
StateSaveLocation={b}/state
SlurmdSpoolDir={b}/spool
SlurmctldPidFile={b}/slurmctld.pid
SlurmdPidFile={b}/slurmd.pid
SlurmctldLogFile={b}/slurmctld.log
SlurmdLogFile={b}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
GresTypes=gpu
Prolog={self.prolog}
Epilog={self.epilog}
PrologEpilogTimeout=60
MessageTimeout=30
HealthCheckProgram={self.health}
HealthCheckInterval={self.interval}
HealthCheckNodeState=ANY
NodeName={NODE} NodeHostname={self.hostname} NodeAddr=127.0.0.1 CPUs=2 Gres=gpu:4 State=UNKNOWN
PartitionName=gpu Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""

    def _gres(self) -> None:
        """Four GPU device files for the gres plugin (character devices with NVIDIA's major, as
        /dev/nvidiaN are): Slurm then hands each job SLURM_JOB_GPUS, as on a GPU node."""
        for i in range(4):
            dev = self.base / "dev" / f"nvidia{i}"
            if not dev.exists():
                try:
                    os.mknod(dev, 0o600 | 0o020000, os.makedev(195, i))
                except OSError as exc:
                    raise Unavailable(f"cannot make the GPU device files for gres ({exc})") from None
        (self.base / "gres.conf").write_text(f"Name=gpu File={self.base}/dev/nvidia[0-3]\n")

    def _spawn(self, name: str, argv: list[str]) -> None:
        out = (self.base / f"{name}.out").open("wb")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=self.base)
        self.procs.append((name, p))
        time.sleep(0.3)
        if p.poll() is not None:
            raise Unavailable(f"{name} exited at once with {p.returncode}: {self._tail(name)}")

    def _tail(self, name: str) -> str:
        text = ""
        for f in (self.base / f"{name}.out", self.base / f"{name}.log"):
            if f.exists():
                text += f.read_text(errors="replace")[-600:]
        return " | ".join(text.strip().splitlines()[-4:])

    def start(self) -> None:
        """Start every daemon and wait until the node is up; Unavailable where one cannot run."""
        b = self.base
        key = b / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o600)
        self.conf.write_text(self._slurm_conf())
        self._gres()
        self._listen_to_syslog()
        self.configure_common()
        for which in SCRIPTS:
            self.configure(which, TOPODOCTOR_ARGS="--replay h200-x4")
        munge = [f"--socket={b}/munge.socket", f"--key-file={key}", f"--pid-file={b}/munged.pid"]
        self._spawn("munged", ["munged", "-F", "-f", *munge, f"--log-file={b}/munged.log", f"--seed-file={b}/seed"])
        try:
            wait_for("munged's socket", lambda: (b / "munge.socket").exists(), 10)
        except AssertionError:
            raise Unavailable(f"munged did not start: {self._tail('munged')}") from None
        self._start_slurmctld()
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", NODE])
        try:
            wait_for("the node to come up", lambda: self.state() in {"IDLE", "MIXED", "ALLOCATED"}, 30)
        except AssertionError:
            raise Unavailable(f"slurmd did not register: {self._tail('slurmd')}") from None
        self.exporter_port = free_port()
        self._spawn(
            "node_exporter",
            [
                "prometheus-node-exporter",
                "--collector.disable-defaults",
                "--collector.textfile",
                f"--collector.textfile.directory={self.textfile}",
                f"--web.listen-address=127.0.0.1:{self.exporter_port}",
            ],
        )
        try:
            wait_for("node_exporter", lambda: self._scrape_or_none() is not None, 15)
        except AssertionError:
            raise Unavailable(f"node_exporter did not answer: {self._tail('node_exporter')}") from None

    def _start_slurmctld(self) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        try:
            wait_for("slurmctld", lambda: self.run(["scontrol", "ping"], check=False).returncode == 0, 20)
        except AssertionError:
            raise Unavailable(f"slurmctld did not answer: {self._tail('slurmctld')}") from None

    def stop_slurmctld(self) -> None:
        """Stop slurmctld (by its pid), as a controller that went down: slurmd and the node stay."""
        for name, p in list(self.procs):
            if name == "slurmctld":
                p.terminate()
                p.wait(15)
                self.procs.remove((name, p))

    def ensure_slurmctld(self) -> None:
        """Start slurmctld again where a case stopped it, and wait until the node answers through it."""
        if any(name == "slurmctld" and p.poll() is None for name, p in self.procs):
            return
        self.procs = [(n, p) for n, p in self.procs if n != "slurmctld"]
        self._start_slurmctld()
        answers = lambda: self.state() not in {"", "UNKNOWN"} and "NOT_RESP" not in self.node()  # noqa: E731
        wait_for("the node to answer", answers, 60)

    @property
    def listening_to_syslog(self) -> bool:
        """Whether this test reads what the scripts send to syslog (no syslog of the machine's own)."""
        return self._syslog_socket is not None

    def _listen_to_syslog(self) -> None:
        """Where nothing listens on /dev/log (a container), listen there ourselves for the test."""
        if SYSLOG.exists() or not SYSLOG.parent.is_dir():
            return
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind(str(SYSLOG))
        except OSError:
            return
        self._syslog_socket = s

        def read() -> None:
            while True:
                try:
                    self.syslog.append(s.recv(65536).decode(errors="replace"))
                except OSError:
                    return

        threading.Thread(target=read, daemon=True).start()

    def stop(self) -> None:
        """Stop what we started, by pid, newest first; SIGKILL what does not stop in 10 s."""
        if self._syslog_socket is not None:
            SYSLOG.unlink(missing_ok=True)
            self._syslog_socket.close()
            self._syslog_socket = None
        for _, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for _, p in reversed(self.procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.procs.clear()

    # ------------------------------------------------------------------ Slurm

    def run(self, argv: list[str], check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout, cwd=self.base)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {r.returncode}: {r.stdout}{r.stderr}")
        return r

    def node(self) -> str:
        r = self.run(["scontrol", "-o", "show", "node", NODE], check=False)
        return r.stdout if r.returncode == 0 else ""

    def state(self) -> str:
        m = re.search(r"\bState=(\S+)", self.node())
        return m.group(1) if m else ""

    def settled_state(self) -> str:
        """The node's state once the jobs that ended have (their epilog included)."""
        return str(wait_for("the node's jobs to complete", lambda: "COMPLETING" not in (st := self.state()) and st, 30))

    def reason(self) -> str:
        """The node's reason as ``scontrol show node`` gives it, without Slurm's ``[user@time]``."""
        m = re.search(r"\bReason=(.*?) \[[^]]*\]", self.node())
        return m.group(1) if m else ""

    def sinfo_reasons(self) -> str:
        """``sinfo -R``'s rows: reason, and node."""
        return self.run(["sinfo", "-R", "-h", "-o", "%E|%N"]).stdout.strip()

    def drained(self) -> bool:
        return "DRAIN" in self.state()

    def job(self, *srun: str, timeout: float = 45) -> tuple[bool, str]:
        """Run one srun job that writes a marker; (whether it ran, srun's output)."""
        marker = self.base / "jobs" / f"ran-{time.monotonic_ns()}"
        argv = ["srun", "-N1", "-n1", "--time=1", *srun, "touch", str(marker)]
        try:
            r = self.run(argv, check=False, timeout=timeout)
            out = r.stdout + r.stderr
        except subprocess.TimeoutExpired as exc:
            out = f"srun still waiting after {timeout} s: {exc.stdout!r}{exc.stderr!r}"
        return marker.exists(), out

    def resume(self) -> None:
        """Bring the node back to idle (a health check may act between our look and our update)."""

        def idle() -> bool:
            state = self.state()
            if state == "IDLE":
                return True
            if "DRAIN" in state or state.startswith("DOWN"):
                self.run(["scontrol", "update", f"nodename={NODE}", "state=resume"], check=False)
            return False

        wait_for("the node to be idle", idle, 30, 0.5)

    def log_lines(self, since: int = 0) -> list[str]:
        return self.log.read_text().splitlines()[since:] if self.log.exists() else []

    def health_runs(self, n: int, timeout: float = 40) -> list[str]:
        """Wait until ``n`` more health checks have finished; their log lines."""
        start = len(self.log_lines())

        def done() -> list[str] | None:
            lines = self.log_lines(start)
            return lines if sum(1 for x in lines if "healthcheck[" in x and ": end rc=" in x) >= n else None

        return list(wait_for(f"{n} health check runs", done, timeout))

    # ------------------------------------------------------------------ metrics

    def _scrape_or_none(self) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.exporter_port}/metrics", timeout=5) as r:
                return str(r.read().decode())
        except OSError:
            return None

    def scrape(self) -> str:
        text = self._scrape_or_none()
        assert text is not None, "node_exporter did not answer"
        return text

    def promtool(self, files: Iterable[Path]) -> None:
        for f in files:
            r = subprocess.run(["promtool", "check", "metrics"], input=f.read_text(), capture_output=True, text=True)
            assert r.returncode == 0, f"promtool check metrics {f.name}: {r.stdout}{r.stderr}"


def _write_conf(path: Path, settings: dict[str, str | int]) -> None:
    path.write_text("".join(f"{k}={_shell_quote(str(v))}\n" for k, v in settings.items()))


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"
