#!/usr/bin/env python3
"""mpiexec across two network namespaces of this machine, so that every transfer crosses a
network stack (Open MPI's TCP transport over a veth pair) instead of shared memory.

Namespaces A and B are joined by a veth pair (10.77.N.1 and 10.77.N.2); mpiexec runs in A and
starts the rank of host 10.77.N.2 through a launcher agent (plm_rsh_agent) that enters B with
`ip netns exec` instead of ssh. Needs root and `ip netns`; `available()` says whether they work.

As a program (ctest): `netns.py COMMAND...` runs `mpiexec -n 2 COMMAND...` across the two
namespaces and exits with its status, or 77 (ctest's skip code) where namespaces are unavailable.
"""
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def available():
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("mpiexec") is None:
        return False
    name = f"kilnprobe{os.getpid()}"
    if _ip("netns", "add", name, check=False).returncode != 0:
        return False
    _ip("netns", "del", name, check=False)
    return True


@contextlib.contextmanager
def two_namespaces():
    """Yields the mpiexec command prefix (with -n 2) that runs one rank in each namespace."""
    tag = os.getpid() % 100000
    net = f"10.77.{tag % 250}"
    ns_a, ns_b, veth_a, veth_b = f"kiln{tag}a", f"kiln{tag}b", f"kv{tag}a", f"kv{tag}b"
    tmp = tempfile.mkdtemp(prefix="kiln_netns_")
    try:
        _ip("netns", "add", ns_a)
        _ip("netns", "add", ns_b)
        _ip("link", "add", veth_a, "type", "veth", "peer", "name", veth_b)
        for ns, veth, host in ((ns_a, veth_a, 1), (ns_b, veth_b, 2)):
            _ip("link", "set", veth, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{net}.{host}/24", "dev", veth)
            _ip("-n", ns, "link", "set", veth, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        agent = os.path.join(tmp, "agent.sh")
        with open(agent, "w") as f:  # "agent HOST COMMAND...", as ssh is called
            f.write(f'#!/bin/sh\nhost="$1"; shift\n[ "$host" = "{net}.2" ] && ns={ns_b} || ns={ns_a}\n'
                    'exec ip netns exec "$ns" /bin/sh -c "$*"\n')
        os.chmod(agent, 0o755)
        hosts = os.path.join(tmp, "hosts")
        with open(hosts, "w") as f:
            f.write(f"{net}.1 slots=1\n{net}.2 slots=1\n")
        yield ["ip", "netns", "exec", ns_a, shutil.which("mpiexec"), "-n", "2", "--hostfile", hosts,
               "--mca", "plm_rsh_agent", agent, "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", f"{net}.0/24", "--mca", "oob_tcp_if_include", f"{net}.0/24"]
    finally:
        _ip("-n", ns_a, "link", "del", veth_a, check=False)
        _ip("netns", "del", ns_a, check=False)
        _ip("netns", "del", ns_b, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def mpi_env(**extra):
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(extra)
    return env


def main():
    if not available():
        print("netns.py: needs root, ip netns and mpiexec: skipped", file=sys.stderr)
        return SKIP
    with two_namespaces() as prefix:
        return subprocess.run([*prefix, *sys.argv[1:]], env=mpi_env(), timeout=300).returncode


if __name__ == "__main__":
    sys.exit(main())
