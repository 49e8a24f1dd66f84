"""Several processes, one SPMD program: `jax.distributed` set up from flags, the environment or the cluster.

    python -m nexus_jax.sharding [--coordinator HOST:PORT] [--num-processes N] [--process-id I]
        [--init-timeout S] [--heartbeat-timeout S] [--exit-timeout S] (-m MODULE [ARGS...] | --check)

runs on every process: it joins the others (`jax.distributed.initialize`), then runs MODULE as
`python -m MODULE ARGS` would (`--check` instead: one all-reduce over every device, and a line
per process saying where it is: a first test of a cluster setup). After that `jax.devices()` lists every process's devices, so a
mesh over them (`nexus_jax.sharding.data_mesh()`) is one global mesh. The three settings come
from the flags, else from `JAX_COORDINATOR_ADDRESS`, `JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`, else
from the cluster (SLURM, Open MPI, TPU pods: jax's own detection). JAX reads only the first
variable by itself outside a cluster, which is why this reads all three.

Failures end every process within bounded time, never in a silent hang:
- bad settings (an address that is not HOST:PORT or does not resolve, a process id outside
  0..N-1, a count < 1, settings missing outside a cluster): one error line, exit 2, before
  joining;
- a process that never joins: the others stop after `--init-timeout` seconds, with one line;
- a process that dies: the others stop at their next collective (the transport reports the lost
  peer, and this prints one line naming it) or within `--heartbeat-timeout` seconds (jax's
  runtime ends them: "another task died");
- at the end every process waits at one barrier (at most `--exit-timeout` seconds) so none leaves
  while another still uses the runtime, and exits with the first non-zero exit code of any
  process (each process's own code when it failed itself).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import runpy
import socket
import sys
import threading
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, one_line, positive_int

PROG = "python -m nexus_jax.sharding"
ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID = "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"
# Markers of a cluster jax detects by itself (jax._src.clusters): SLURM, Open MPI, TPU pods.
CLUSTER_MARKERS = ("SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE", "TPU_WORKER_HOSTNAMES", "CLOUD_TPU_TASK_ID")
JOIN_MARGIN = 10  # seconds jax's own join deadline trails ours (`initialize`)
# Error text of a collective whose peer process is gone (gloo on CPU, NCCL and the runtime elsewhere).
PEER_LOST = ("Connection reset by peer", "Connection closed by peer", "Gloo", "NCCL", "coordination service",
             "heartbeat", "Socket closed", "Broken pipe")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Where the coordinator listens, how many processes there are, which one this is (None: the cluster's)."""

    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    init_timeout: int = 300  # seconds every process waits for all to join
    heartbeat_timeout: int = 30  # seconds without a heartbeat after which a process counts as dead
    exit_timeout: int = 3600  # seconds a finished process waits at the end for the others (process 0 evaluates)


def _int_setting(value, name: str) -> int | None:
    if value is None or isinstance(value, int):
        return value
    try:
        return int(value)
    except ValueError:
        raise UserInputError(f"{name}={value!r}: expected an integer") from None


def check_address(address: str) -> str:
    """HOST:PORT with a port in 1..65535 and a host that resolves -> address; UserInputError naming it."""
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserInputError(f"coordinator address {address!r}: expected HOST:PORT with a port in 1..65535")
    try:
        socket.getaddrinfo(host, int(port))
    except OSError as e:
        raise UserInputError(f"coordinator address {address!r}: host {host!r} does not resolve ({e})") from None
    return address


def resolve(coordinator: str | None = None, num_processes: int | None = None, process_id: int | None = None,
            environ=None, **timeouts) -> Settings:
    """Settings from the arguments, else the environment's JAX_* variables, checked; UserInputError otherwise.

    Values left None are the cluster's to fill (jax detects SLURM, Open MPI and TPU pods); outside
    a cluster all three are needed.
    """
    env = os.environ if environ is None else environ
    coordinator = coordinator or env.get(ENV_COORDINATOR) or None
    num = _int_setting(num_processes if num_processes is not None else env.get(ENV_NUM_PROCESSES),
                       "number of processes (--num-processes / JAX_NUM_PROCESSES)")
    pid = _int_setting(process_id if process_id is not None else env.get(ENV_PROCESS_ID),
                       "process id (--process-id / JAX_PROCESS_ID)")
    if coordinator is not None:
        check_address(coordinator)
    if num is not None and num < 1:
        raise UserInputError(f"number of processes {num}: must be >= 1")
    if pid is not None and (pid < 0 or (num is not None and pid >= num)):
        raise UserInputError(f"process id {pid}: must lie in 0..{(num or 1) - 1} (number of processes {num})")
    if None in (coordinator, num, pid) and not any(k in env for k in CLUSTER_MARKERS):
        missing = [what for what, v in (("--coordinator / " + ENV_COORDINATOR, coordinator),
                                        ("--num-processes / " + ENV_NUM_PROCESSES, num),
                                        ("--process-id / " + ENV_PROCESS_ID, pid)) if v is None]
        raise UserInputError(f"no {', no '.join(missing)}: set them (or run under SLURM, Open MPI or on a TPU "
                             f"pod, whose settings jax detects)")
    return Settings(coordinator, num, pid, **timeouts)


def initialize(settings: Settings) -> None:
    """Join the other processes (`jax.distributed.initialize` with the settings' timeouts). Call before any
    other JAX use; returns once every process has joined.

    A process still waiting after `init_timeout` seconds prints one line and exits 1 (jax's own
    deadline, a few seconds later, would abort with a C++ trace that blames a dead task).
    """
    watchdog = threading.Timer(settings.init_timeout, _not_joined, (settings,))
    watchdog.daemon = True
    watchdog.start()
    try:
        jax.distributed.initialize(settings.coordinator, settings.num_processes, settings.process_id,
                                   initialization_timeout=settings.init_timeout + JOIN_MARGIN,
                                   heartbeat_timeout_seconds=settings.heartbeat_timeout,
                                   shutdown_timeout_seconds=settings.heartbeat_timeout)
    finally:
        watchdog.cancel()


def _not_joined(settings: Settings) -> None:
    who = "this process" if settings.process_id is None else f"process {settings.process_id} of {settings.num_processes}"
    print(f"{PROG}: {who}: not every process joined within {settings.init_timeout} s (coordinator "
          f"{settings.coordinator or 'from the cluster'}); stopping", file=sys.stderr, flush=True)
    os._exit(1)


def is_main_process() -> bool:
    """Process 0 of a multi-process run, or the only process: the one that writes files and prints."""
    return jax.process_index() == 0


_barriers = itertools.count()  # every process passes the same barriers in the same order: same ids


def barrier(name: str, timeout: int = 3600) -> None:
    """Wait until every process reaches this point (at most `timeout` seconds); nothing in a single process.

    Around file writes that process 0 does for all (a checkpoint folder made, then filled): it needs
    no devices, so it costs no collective.
    """
    if jax.process_count() == 1:
        return
    ocp.multihost.get_jax_distributed_client().wait_at_barrier(f"nexus_jax/{name}/{next(_barriers)}", timeout * 1000)


def any_process(flag: bool) -> bool:
    """Is `flag` true on any process? (A small collective in a multi-process run: every process calls it.)"""
    if jax.process_count() == 1:
        return bool(flag)
    return bool(np.any(multihost_utils.process_allgather(np.asarray(flag))))


def _peer_lost(err: BaseException) -> bool:
    return any(marker.lower() in str(err).lower() for marker in PEER_LOST)


def _finish(code: int, settings: Settings) -> int:
    """Wait for every process at the exit barrier, then the first failure's exit code (own code first)."""
    client = ocp.multihost.get_jax_distributed_client()
    me, n = jax.process_index(), jax.process_count()
    client.key_value_set(f"nexus_jax/exit/{me}", str(code))
    client.wait_at_barrier("nexus_jax/exit", settings.exit_timeout * 1000)
    codes = {i: int(client.blocking_key_value_get(f"nexus_jax/exit/{i}", 10_000)) for i in range(n)}
    jax.distributed.shutdown()
    failed = [(i, c) for i, c in codes.items() if c]
    if code or not failed:
        return code
    print(f"{PROG}: process {me} of {n}: process {failed[0][0]} exited with code {failed[0][1]}", file=sys.stderr,
          flush=True)
    return failed[0][1]


def run_module(module: str, args: list[str], settings: Settings) -> int:
    """Run MODULE as `python -m MODULE ARGS` on this joined process -> the exit code every process agrees on.

    A failure that leaves the others stuck in a collective (an exception here, a lost peer) ends this
    process at once with one line, without the runtime's shutdown barrier (which would wait out the
    heartbeat timeout and then abort with a C++ trace); the others then fail at their next collective.
    """
    sys.argv = [module] + args  # the backend starts inside MODULE (which may set XLA_FLAGS first)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:  # Ctrl-C the module did not handle: every process got it, all meet at the end
        code = 130
    except BaseException as e:  # noqa: BLE001  (any failure must end this process, not hang the others)
        me, n = jax.process_index(), jax.process_count()
        if _peer_lost(e):
            print(f"{PROG}: process {me} of {n}: lost contact with another process ({one_line(e)[:300]}); "
                  f"stopping", file=sys.stderr, flush=True)
        else:
            traceback.print_exc()
            print(f"{PROG}: process {me} of {n}: failed ({type(e).__name__}); stopping", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(1)
    try:
        return _finish(code, settings)
    except Exception as e:  # noqa: BLE001  (the barrier failed: another process is gone or stuck)
        me, n = jax.process_index(), jax.process_count()
        print(f"{PROG}: process {me} of {n}: the other processes did not finish ({one_line(e)[:300]})",
              file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code or 1)


def split_module(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """argv -> (launcher flags, MODULE, MODULE's args), split at the first `-m`; MODULE None for `--check`."""
    if "-m" not in argv and "--check" in argv:
        return argv, None, []
    if "-m" not in argv or argv.index("-m") + 1 >= len(argv):
        raise UserInputError("expected -m MODULE [ARGS...] (e.g. -m train num_devices=0), or --check")
    i = argv.index("-m")
    return argv[:i], argv[i + 1], argv[i + 2:]


def _devices_summed() -> int:
    """An all-reduce over every device of every process in which each adds 1 (the global device count if all
    took part)."""
    mesh = Mesh(np.asarray(jax.devices()), ("devices",))
    ones = jax.make_array_from_process_local_data(NamedSharding(mesh, P("devices")),
                                                  np.ones(jax.local_device_count(), np.float32))
    return int(jax.jit(jnp.sum, out_shardings=NamedSharding(mesh, P()))(ones))


def check_devices() -> int:
    """Every process's devices in one all-reduce; one line per process -> exit code (0: every device took part)."""
    total = _devices_summed()
    ok = total == jax.device_count()
    print(f"{PROG}: process {jax.process_index()} of {jax.process_count()}: {jax.local_device_count()} local / "
          f"{jax.device_count()} global {jax.default_backend()} devices; an all-reduce over all of them "
          f"{'reached every device' if ok else f'summed {total}'}", flush=True)
    return 0 if ok else 1


_collectives = []  # holds True once `connect_collectives` has run in this process


def connect_collectives() -> None:
    """Open the collectives' connections among all processes, once, with every process at the same point.

    The CPU collectives (gloo) connect the processes at their first collective over a set of
    devices, and give up when one arrives more than 30 s after another (its key-value wait,
    fixed in jaxlib): two processes compiling the same program can be that far apart (a cache
    hit on one, a compile on the other). After a barrier (which waits without that limit) one
    all-reduce over every device makes the connection, and later collectives over it wait for
    each other as long as it takes. `sharding.data_mesh` calls it: every command builds its mesh
    there, at the same point on every process.
    """
    if _collectives or jax.process_count() == 1:
        return
    barrier("collectives")
    _devices_summed()
    _collectives.append(True)


def parser() -> ArgumentParser:
    ap = ArgumentParser(prog=PROG + " [FLAGS] (-m MODULE [ARGS...] | --check)",
                        description="Join the other processes of a multi-process run, then run MODULE.")
    ap.add_argument("--coordinator", default=None, help=f"HOST:PORT of process 0 (default: ${ENV_COORDINATOR})")
    ap.add_argument("--num-processes", type=int, default=None, help=f"(default: ${ENV_NUM_PROCESSES})")
    ap.add_argument("--process-id", type=int, default=None, help=f"0..N-1 (default: ${ENV_PROCESS_ID})")
    ap.add_argument("--init-timeout", type=positive_int, default=Settings.init_timeout,
                    help="seconds to wait for every process to join")
    ap.add_argument("--heartbeat-timeout", type=positive_int, default=Settings.heartbeat_timeout,
                    help="seconds after which a silent process counts as dead")
    ap.add_argument("--exit-timeout", type=positive_int, default=Settings.exit_timeout,
                    help="seconds a finished process waits at the end for the others")
    ap.add_argument("--check", action="store_true",
                    help="instead of a module: join, all-reduce over every device, print where each process is")
    return ap


@entry_point(PROG)
def main(argv: list[str] | None = None) -> int:
    flags, module, args = split_module(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(flags)
    settings = resolve(a.coordinator, a.num_processes, a.process_id, init_timeout=a.init_timeout,
                       heartbeat_timeout=a.heartbeat_timeout, exit_timeout=a.exit_timeout)
    if module is not None:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise UserInputError(f"no module named {module!r} (run from the folder that holds it, or set PYTHONPATH)")
    initialize(settings)  # starts no backend: MODULE may still set XLA_FLAGS
    if module is None:
        return _finish(check_devices(), settings)
    return run_module(module, args, settings)
