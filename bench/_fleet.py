"""A fleet of `wakeful worker` hosts on one PostgreSQL, for bench_fleet.py and its test.

A host is a set of worker processes sharing one host id. Where the machine allows it (root and a
working `ip netns`), each host is a Linux network namespace of its own: its workers reach
PostgreSQL over a veth pair, through a TCP forwarder (`socat`) bound to the pair's root-side
address, because the server listens on loopback only; and they see a machine id of their own
(`/etc/netns/NAME/machine-id`, which `ip netns exec` binds over `/etc/machine-id`) and are given
that host's id (`WAKEFUL_HOST_ID`, so the harness knows their claims' owners without deriving a
host id itself), so their `host_id()` differs from every other host's and an orphaned claim of
theirs is taken over by lease only, as across real machines. Otherwise hosts are plain processes sharing this machine's
host id (a killed host's claims are then taken over at once, by the dead-owner rule). The
harness makes its namespaces, veth pairs, forwarders and files, and removes them on `close`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

WAKEFUL = str(Path(sys.executable).with_name("wakeful"))
NETNS_ETC = Path("/etc/netns")
_TICK = os.sysconf("SC_CLK_TCK")


def netns_usable() -> bool:
    """Whether this process can make network namespaces and veth pairs (root, `ip`, `socat`)."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("socat"):
        return False
    name = f"wkprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode == 0
    if made:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return made


def cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` and its waited-for children, in seconds (0 when gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[-1].split()
    return sum(int(f) for f in fields[11:15]) / _TICK  # utime, stime, cutime, cstime


def machine_busy_seconds() -> float:
    """CPU seconds every core of this machine spent busy since boot (all processes, anyone's)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / _TICK  # less idle and iowait


def tree_cpu_seconds(pid: int) -> float:
    """CPU of `pid` and of every live descendant (a forwarder's forked connections)."""
    total = cpu_seconds(pid)
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            children = task.read_text().split()
        except OSError:
            continue
        total += sum(tree_cpu_seconds(int(c)) for c in children)
    return total


def _ip(*args: str, netns: str | None = None) -> None:
    cmd = ["ip", *args] if netns is None else ["ip", "netns", "exec", netns, "ip", *args]
    subprocess.run(cmd, check=True, capture_output=True)


@dataclass
class Host:
    """One host: its worker processes, and its namespace when it has one."""

    index: int
    db_url: str
    host_id: str
    netns: str | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    forwarder: subprocess.Popen[bytes] | None = None
    cpu_at_exit: float = 0.0

    def owners(self) -> list[str]:
        """`LIKE` patterns of the claim owners that are this host's workers."""
        if self.netns is not None:  # a host id of its own
            return [f"{self.host_id}/%"]
        return [f"{self.host_id}/{w.pid}/%" for w in self.workers]

    def cpu(self) -> float:
        """CPU seconds of this host's workers (and their tool processes) so far."""
        live = sum(cpu_seconds(w.pid) for w in self.workers if w.returncode is None)
        return live + self.cpu_at_exit

    def kill(self) -> None:
        """SIGKILL every process of this host's workers (their tool processes too)."""
        live = [w for w in self.workers if w.returncode is None]
        for worker in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGKILL)
        self.cpu_at_exit += sum(_reap(w) for w in live)


def _reap(proc: subprocess.Popen[bytes], timeout: float = 60) -> float:
    """Wait for a signalled process; return its CPU seconds, read while it is a zombie."""
    deadline = time.monotonic() + timeout
    cpu = 0.0
    while proc.returncode is None:
        try:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            fields = ["Z"]
        if fields[0] == "Z":
            cpu = sum(int(f) for f in fields[11:15]) / _TICK if len(fields) > 15 else cpu
            proc.wait()
        elif time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        else:
            cpu = sum(int(f) for f in fields[11:15]) / _TICK
            time.sleep(0.01)
    return cpu


class Fleet:
    """`hosts` hosts of `workers` worker processes each, driving the store at `db_url`."""

    def __init__(
        self,
        db_url: str,
        workspace: Path,
        home: Path,
        *,
        hosts: int,
        workers: int,
        concurrency: int,
        netns: bool,
        env: dict[str, str] | None = None,
    ) -> None:
        self.workspace, self.home = workspace, home
        self.env = env or {}  # on top of this process's environment (another tree's PYTHONPATH)
        self.concurrency = concurrency
        self.netns = netns
        self.hosts: list[Host] = []
        self._tag = f"wkf{os.getpid() % 100_000}"
        self._net = 16 + os.getpid() % 200  # 10.NET.H.0/30 per host: unlikely to collide
        try:
            for h in range(hosts):
                host = self._make_host(h, db_url)
                self.hosts.append(host)
                for _ in range(workers):
                    host.workers.append(self._start_worker(host))
        except BaseException:
            self.close()
            raise

    def _make_host(self, h: int, db_url: str) -> Host:
        if not self.netns:
            from wakeful.store import host_id

            return Host(h, db_url, host_id())
        ns = f"{self._tag}h{h}"
        outer, inner = f"10.{self._net}.{h}.1", f"10.{self._net}.{h}.2"
        ident = secrets.token_hex(16)
        host = Host(h, db_url, ident[:16], netns=ns)
        _ip("netns", "add", ns)
        (NETNS_ETC / ns).mkdir(parents=True, exist_ok=True)
        (NETNS_ETC / ns / "machine-id").write_text(ident + "\n")
        _ip("link", "add", f"{ns}a", "type", "veth", "peer", "name", f"{ns}b")
        _ip("link", "set", f"{ns}b", "netns", ns)
        _ip("addr", "add", f"{outer}/30", "dev", f"{ns}a")
        _ip("link", "set", f"{ns}a", "up")
        _ip("addr", "add", f"{inner}/30", "dev", f"{ns}b", netns=ns)
        _ip("link", "set", f"{ns}b", "up", netns=ns)
        _ip("link", "set", "lo", "up", netns=ns)
        url = urlsplit(db_url)
        port = url.port or 5432
        target = f"TCP:{url.hostname or '127.0.0.1'}:{port}"
        host.forwarder = subprocess.Popen(
            ["socat", f"TCP-LISTEN:{port},bind={outer},fork,reuseaddr", target],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        netloc = url.netloc.rsplit("@", 1)[0] + "@" if "@" in url.netloc else ""
        host.db_url = urlunsplit(url._replace(netloc=f"{netloc}{outer}:{port}"))
        _wait_listening(outer, port)
        return host

    def _start_worker(self, host: Host) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | self.env
        env.pop("WAKEFUL_CRASH_AT", None)
        env |= {
            "WAKEFUL_DB": host.db_url,
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local"),
        }
        cmd = [WAKEFUL, "worker", "--concurrency", str(self.concurrency), "--format", "json"]
        if host.netns is not None:
            cmd = ["ip", "netns", "exec", host.netns, *cmd]  # `ip` execs the worker: same pid
            env["WAKEFUL_HOST_ID"] = host.host_id  # the harness names the host's claims by it
        log = self.home / f"worker-h{host.index}-{len(host.workers)}.log"
        with log.open("wb") as out:  # the worker has its own descriptor
            return subprocess.Popen(
                cmd,
                cwd=self.workspace,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stats(self) -> dict[str, int]:
        """The workers' own counts (`wakeful worker --format json`, printed as each stops),
        summed over those that stopped cleanly: drains, `busy` (a start that found another
        live driver holding its session), `reserved` and `unused` (reserved, then released
        without a drive), `taken_over`."""
        total: dict[str, int] = {}
        for log in self.home.glob("worker-h*.log"):
            lines = [x for x in log.read_text(errors="replace").splitlines() if x.startswith("{")]
            if not lines:
                continue  # killed: no figures
            for key, value in json.loads(lines[-1]).items():
                if isinstance(value, int):
                    total[key] = total.get(key, 0) + value
        return total

    def cpu(self) -> float:
        """CPU seconds of every worker so far, stopped ones included."""
        return sum(h.cpu() for h in self.hosts)

    def forwarder_cpu(self) -> float:
        """CPU seconds of the veth forwarders (the namespaces' cost, not wakeful's)."""
        return sum(tree_cpu_seconds(h.forwarder.pid) for h in self.hosts if h.forwarder)

    def stop(self) -> None:
        """SIGTERM every live worker and wait for it; remember its CPU."""
        live = [(h, w) for h in self.hosts for w in h.workers if w.returncode is None]
        for _h, w in live:
            w.send_signal(signal.SIGTERM)
        for h, w in live:
            h.cpu_at_exit += _reap(w)

    def close(self) -> None:
        """Kill what still runs; remove the namespaces, veth pairs, forwarders and files."""
        for host in self.hosts:
            host.kill()
            if host.forwarder is not None:
                host.forwarder.terminate()
                host.forwarder.wait()
            if host.netns is not None:
                subprocess.run(["ip", "link", "del", f"{host.netns}a"], capture_output=True)
                subprocess.run(["ip", "netns", "del", host.netns], capture_output=True)
                shutil.rmtree(NETNS_ETC / host.netns, ignore_errors=True)
        if self.netns and NETNS_ETC.exists() and not any(NETNS_ETC.iterdir()):
            NETNS_ETC.rmdir()  # made by us (or left empty by others): leave /etc as found


def _wait_listening(address: str, port: int, timeout: float = 10) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
