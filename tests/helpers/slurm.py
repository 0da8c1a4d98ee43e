"""A real one-node SLURM cluster on loopback, for the tests that submit to it.

Debian's ``slurm-wlm`` and ``munge`` (``.ci/run`` installs them as root), started by hand with no
systemd, in this order: ``munged`` (as the ``munge`` user, with its own key, socket, pid and log
files), ``slurmctld`` and ``slurmd`` (``-D``, in the foreground), every path in one temporary
folder and the ports free ones, so nothing of the machine's own configuration is read or
changed. :meth:`SlurmCluster.stop` cancels the cluster's jobs first, waits for them to leave,
then stops exactly the processes it started, by their PIDs (SIGTERM, then SIGKILL), and nothing
else. Facts: ../shared/notes/slurm-one-node.md (beside the repository); its timings: docs/performance.md.

    reason = unavailable()            # None, or why the cluster cannot run here (a skip reason)
    with SlurmCluster.start(tmp) as cluster:
        job = cluster.sbatch("--wrap", "true")
        cluster.wait(job)              # -> {"0": "COMPLETED"} (array task or "0" -> state)
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SBIN = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "sinfo", "scontrol")
#: job states a job does not leave by itself
FINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
)


def _which(name: str) -> str | None:
    return shutil.which(name) or next((str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d, name)).exists()), None)


def unavailable() -> str | None:
    """Why a cluster cannot be started here (a skip reason), or None."""
    missing = [b for b in (*SBIN, *CLIENTS) if _which(b) is None]
    if missing:
        return (
            f"needs Debian's slurm-wlm and munge ({', '.join(missing)} not found): "
            "apt-get install slurm-wlm munge, as .ci/run does"
        )
    if os.geteuid() != 0:
        return "starting munged, slurmctld and slurmd needs root"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no 'munge' user (the munge package creates it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 4096


@dataclass
class SlurmCluster:
    """A running one-node cluster: its folder, config and the processes it started."""

    root: Path
    conf: Path
    node: str
    cpus: int
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def start(cls, cpus: int | None = None, timeout: float = 60) -> SlurmCluster:
        """Start the daemons in a new folder of the system's temp directory (pytest's are private
        to root, and munged, running as the munge user, must reach its own files)."""
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        root = Path(tempfile.mkdtemp(prefix="naru-slurm-"))
        root.chmod(0o755)  # munged runs as the munge user and must reach its folder
        node = socket.gethostname().split(".")[0]
        cluster = cls(root, root / "slurm.conf", node, cpus or os.cpu_count() or 1)
        try:
            cluster._start_munge()
            cluster._write_conf()
            for d in ("state", "spool"):
                (root / d).mkdir()
            cluster._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(cluster.conf)])
            cluster._spawn("slurmd", [_which("slurmd"), "-D", "-f", str(cluster.conf), "-N", node])
            cluster._wait_idle(timeout)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, name: str, argv: Sequence[str | None], **kw: Any) -> None:
        log = open(self.root / f"{name}.stdout", "wb")  # noqa: SIM115 - lives as long as the daemon
        self.procs[name] = subprocess.Popen([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT, **kw)

    def _start_munge(self) -> None:
        m = self.root / "munge"
        m.mkdir(mode=0o700)
        key = m / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        uid = pwd.getpwnam("munge").pw_uid
        gid = pwd.getpwnam("munge").pw_gid
        for p in (m, key):
            os.chown(p, uid, gid)
        self.socket = m / "munge.socket"
        self._spawn(
            "munged",
            [
                _which("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={self.socket}",
                f"--pid-file={m / 'munged.pid'}", f"--log-file={m / 'munged.log'}", f"--seed-file={m / 'munged.seed'}",
            ],
            user="munge", group=gid,
        )  # fmt: skip
        t0 = time.monotonic()
        while not self.socket.exists():
            if self.procs["munged"].poll() is not None or time.monotonic() - t0 > 20:
                raise RuntimeError(f"munged did not start: {self._tail('munged')}")
            time.sleep(0.05)
        m.chmod(0o711)  # clients (root) reach the socket; the key stays the munge user's

    def _write_conf(self) -> None:
        r = self.root
        lines = {
            "ClusterName": "naru-test",
            "SlurmctldHost": f"{self.node}(127.0.0.1)",
            "SlurmctldPort": _free_port(),
            "SlurmdPort": _free_port(),
            "AuthType": "auth/munge",
            "CredType": "cred/munge",
            "AuthInfo": f"socket={self.socket}",
            "SlurmUser": "root",
            "SlurmdUser": "root",
            "StateSaveLocation": r / "state",
            "SlurmdSpoolDir": r / "spool",
            "SlurmctldPidFile": r / "slurmctld.pid",
            "SlurmdPidFile": r / "slurmd.pid",
            "SlurmctldLogFile": r / "slurmctld.log",
            "SlurmdLogFile": r / "slurmd.log",
            "ProctrackType": "proctrack/linuxproc",
            "TaskPlugin": "task/none",
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": "CR_Core_Memory",
            "SchedulerType": "sched/backfill",
            "AccountingStorageType": "accounting_storage/none",
            "JobAcctGatherType": "jobacct_gather/none",
            "JobCompType": "jobcomp/none",
            "MpiDefault": "none",
            "ReturnToService": 2,
            "SlurmdParameters": "config_overrides",
            "EnforcePartLimits": "ALL",  # a job the partition cannot run is refused at sbatch
            "KillWait": 10,
            "MinJobAge": 600,
            "DefMemPerCPU": 1024,
        }
        mem = max(1024, int(_memory_mb() * 0.8))
        text = "\n".join(f"{k}={v}" for k, v in lines.items())
        text += (
            f"\nNodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={mem} State=UNKNOWN"
            f"\nPartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP\n"
        )
        self.conf.write_text(text)

    def _tail(self, name: str, n: int = 2000) -> str:
        out = []
        for f in (self.root / f"{name}.stdout", self.root / f"{name}.log", self.root / "munge" / "munged.log"):
            if f.exists() and (name in f.name):
                out.append(f"{f}: {f.read_text(errors='replace')[-n:]}")
        return "\n".join(out)

    def _wait_idle(self, timeout: float) -> None:
        t0 = time.monotonic()
        state = ""
        while time.monotonic() - t0 < timeout:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}): {self._tail(name)}")
            r = self.run("sinfo", "-h", "-N", "-o", "%t", check=False)
            state = r.stdout.strip()
            if state in ("idle", "mix", "alloc"):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the node did not come up (sinfo: {state!r}): {self._tail('slurmd')}")

    def stop(self) -> None:
        """Cancel every job of this cluster, wait for them to leave, stop our daemons by PID."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--full", "--user", "root", check=False)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 60 and self.run("squeue", "-h", "-t", "all", check=False).stdout.strip():
                if all(s in FINAL_STATES for s in self.run("squeue", "-h", "-t", "all", "-o", "%T", check=False)
                       .stdout.split()):  # fmt: skip
                    break
                time.sleep(0.3)
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.stop()
        if exc_type is None:
            shutil.rmtree(self.root, ignore_errors=True)  # kept after a failure: the daemons' logs

    # -- clients -----------------------------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        """What a client (sbatch, squeue, ...) needs to talk to this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def run(
        self, *argv: str, env: Mapping[str, str] | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        full = {**os.environ, **(env or {}), **self.env}
        p = subprocess.run(list(argv), env=full, capture_output=True, text=True, timeout=60)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()}")
        return p

    def sbatch(self, *argv: str, env: Mapping[str, str] | None = None) -> str:
        return self.run("sbatch", "--parsable", *argv, env=env).stdout.strip().split(";")[0]

    def states(self, job: str) -> dict[str, str]:
        """array task (or "0") -> its state, from ``scontrol show job`` (no accounting here)."""
        p = self.run("scontrol", "-o", "show", "job", job, check=False)
        out: dict[str, str] = {}
        for line in p.stdout.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            task = fields.get("ArrayTaskId", "0")
            if "-" in task or "," in task:  # tasks not started yet, listed together
                for part in task.split("%")[0].split(","):
                    lo, _, hi = part.partition("-")
                    for t in range(int(lo), int(hi or lo) + 1):
                        out[str(t)] = fields.get("JobState", "?")
            else:
                out[task] = fields.get("JobState", "?")
        return out

    def wait(self, job: str, timeout: float = 600, until: frozenset[str] = FINAL_STATES) -> dict[str, str]:
        """Wait until every task of ``job`` is in one of ``until``; its states."""
        t0 = time.monotonic()
        states: dict[str, str] = {}
        while time.monotonic() - t0 < timeout:
            states = self.states(job)
            if states and all(s in until for s in states.values()):
                return states
            time.sleep(0.5)
        raise AssertionError(f"job {job} still {states} after {timeout:.0f}s")

    def reason(self, job: str) -> str:
        p = self.run("squeue", "-h", "-j", job, "-o", "%T %r", check=False)
        return p.stdout.strip()
