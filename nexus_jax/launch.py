"""`python -m nexus_jax.launch --processes N [--devices-per-process K] -m MODULE [ARGS...]`: a multi-process run here.

Starts N processes of `python -m nexus_jax.sharding -m MODULE ARGS` on 127.0.0.1 with a free
port, process i with `JAX_NUM_CPU_DEVICES=K` (K CPU devices each) and `JAX_LOCAL_DEVICE_IDS`
i*K..i*K+K-1 (its K GPUs, on a multi-GPU node). Process 0's output is streamed here; the others
write to LOG_DIR/process_<i>.log (a temporary folder unless --log-dir). When a process fails the
launcher kills the others, names the process, its exit code and the end of its log, and exits with
that code; Ctrl-C goes to every process (twice: kills them); with every process done, their code
(0 when all succeed). The same multi-process run on a cluster is `srun ... python -m nexus_jax.sharding -m MODULE`
(docs/scaling.md).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nexus_jax import distributed
from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, positive_int

PROG = "python -m nexus_jax.launch"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_env(i: int, n: int, devices: int, port: int, base: dict) -> dict:
    """Environment of process i: the JAX_* settings `nexus_jax.sharding` reads, and its devices."""
    return {**base, distributed.ENV_COORDINATOR: f"127.0.0.1:{port}", distributed.ENV_NUM_PROCESSES: str(n),
            distributed.ENV_PROCESS_ID: str(i), "JAX_NUM_CPU_DEVICES": str(devices),
            "JAX_LOCAL_DEVICE_IDS": ",".join(str(i * devices + d) for d in range(devices)),
            "PYTHONUNBUFFERED": "1"}


def command(module: str | None, args: list[str], flags: list[str]) -> list[str]:
    """Each process's command line: MODULE under `nexus_jax.sharding`, or its `--check` for None."""
    run = ["--check"] if module is None else ["-m", module, *args]
    return [sys.executable, "-m", "nexus_jax.sharding", *flags, *run]


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


def _describe(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def _signal_all(procs: list[subprocess.Popen], sig) -> None:
    """`sig` to the process group of every process still running."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, sig)


def supervise(procs: list[subprocess.Popen], logs: list[Path | None]) -> int:
    """Wait for every process -> the launcher's exit code.

    A process that fails (non-zero exit) before any Ctrl-C: the others are killed at once (they
    would wait for it) and its code is returned. The first Ctrl-C goes to every process as SIGINT
    (a resumable `python -m train` stops them all after the same checkpoint) and the launcher waits
    for them; a second one kills them.
    """
    interrupted = False
    while True:
        try:
            codes = [p.poll() for p in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed and not interrupted:
                i, code = failed[0]
                tail = _tail(logs[i]) if logs[i] is not None else ""
                print(f"{PROG}: process {i} {_describe(code)}; stopping the others"
                      + (f" (end of {logs[i]}):\n{tail}" if tail else ""), file=sys.stderr, flush=True)
                _signal_all(procs, signal.SIGKILL)
                return code if code > 0 else 128 - code
            if None not in codes:
                if any(codes):
                    print(f"{PROG}: exit codes of processes 0..{len(codes) - 1}: {codes}", file=sys.stderr, flush=True)
                return next((c if c > 0 else 128 - c for c in codes if c), 0)
            time.sleep(0.2)
        except KeyboardInterrupt:
            if interrupted:
                print(f"{PROG}: interrupted again; killing every process", file=sys.stderr, flush=True)
                _signal_all(procs, signal.SIGKILL)
                for p in procs:
                    p.wait()
                return 130
            interrupted = True
            print(f"{PROG}: interrupted; Ctrl-C sent to every process (again to kill them)", file=sys.stderr,
                  flush=True)
            _signal_all(procs, signal.SIGINT)


def _default_sigint() -> None:
    """In each child before it starts: Ctrl-C that the launcher forwards must reach Python even where this
    launcher was started with SIGINT ignored (a background job of a script)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def launch(module: str | None, args: list[str], processes: int, devices: int, log_dir: Path, flags: list[str],
           port: int | None = None) -> int:
    """Start the processes, process 0 on this terminal and the others into log_dir -> exit code (`supervise`)."""
    port = port or free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    procs, logs = [], []
    try:
        for i in range(processes):
            env = process_env(i, processes, devices, port, dict(os.environ))
            log = None if i == 0 else log_dir / f"process_{i}.log"
            out = None if log is None else open(log, "w")
            procs.append(subprocess.Popen(command(module, args, flags), env=env, stdout=out,
                                          stderr=None if out is None else subprocess.STDOUT, start_new_session=True,
                                          preexec_fn=_default_sigint))
            logs.append(log)
            if out is not None:
                out.close()
    except BaseException:
        _signal_all(procs, signal.SIGKILL)
        raise
    return supervise(procs, logs)


@entry_point(PROG)
def main(argv: list[str] | None = None) -> int:
    flags, module, args = distributed.split_module(sys.argv[1:] if argv is None else argv)
    ap = ArgumentParser(prog=PROG + " [FLAGS] (-m MODULE [ARGS...] | --check)", description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=positive_int, default=2)
    ap.add_argument("--devices-per-process", type=positive_int, default=1,
                    help="CPU devices of each process (JAX_NUM_CPU_DEVICES); on GPUs, the GPUs each process gets")
    ap.add_argument("--log-dir", default=None, help="where processes 1.. write their output (default: a temp folder)")
    ap.add_argument("--port", type=positive_int, default=None, help="coordinator port (default: a free one)")
    ap.add_argument("--init-timeout", type=positive_int, default=distributed.Settings.init_timeout)
    ap.add_argument("--heartbeat-timeout", type=positive_int, default=distributed.Settings.heartbeat_timeout)
    ap.add_argument("--check", action="store_true", help="run `python -m nexus_jax.sharding --check` instead of MODULE")
    a = ap.parse_args(flags)
    if a.port is not None and a.port > 65535:
        raise UserInputError(f"--port {a.port}: must lie in 1..65535")
    log_dir = Path(a.log_dir) if a.log_dir else Path(tempfile.mkdtemp(prefix="nexus_jax_launch_"))
    print(f"[{PROG}] {a.processes} processes x {a.devices_per_process} device(s); processes 1.. log to {log_dir}/",
          file=sys.stderr, flush=True)
    timeouts = ["--init-timeout", str(a.init_timeout), "--heartbeat-timeout", str(a.heartbeat_timeout)]
    return launch(module, args, a.processes, a.devices_per_process, log_dir, timeouts, a.port)


if __name__ == "__main__":
    sys.exit(main())
