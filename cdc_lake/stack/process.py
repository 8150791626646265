"""Start, watch and stop the stack's server processes by the pids the stack itself recorded.

A service is started detached (its own session, so a Ctrl-C in the shell that ran ``up`` does not
reach it), with stdout and stderr appended to its log (mode 0600). Its pid goes to
``<state>/run/<name>.pid``. It gets only the environment it needs: ``SERVER_ENV`` from the
caller's (PATH, HOME, locale, JAVA_HOME, ...) plus its own variables, never the caller's secrets
or tokens; and umask 077, so every file it writes (data, logs) is private to its user.
``stop`` signals only a pid from that file, and only while the process there is still the one we
started (its start time is recorded beside the pid), so a recycled pid is never killed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# What a server may take from the caller's environment; anything else it needs, its service says.
SERVER_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "JAVA_HOME",
)


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {k: os.environ[k] for k in SERVER_ENV if k in os.environ} | (extra or {})


def open_private_log(log: Path):
    """The log, for appending, as 0600 (tightened if an older run left it readable)."""
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def keep_private(path: Path, text: str) -> Path:
    """``write_private``, only when the file's content differs: a process may be reading it,
    and a file being rewritten reads empty for a moment."""
    if not path.is_file() or path.read_text() != text:
        write_private(path, text)
    return path


def write_private(path: Path, text: str) -> None:
    """Write a file created 0600 (tightened if it existed), so a secret in it is never readable
    by others, even for a moment."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def private_token(path: Path, nbytes: int = 32) -> str:
    """The token in ``path``: read, or made once at random in a 0600 file (``write_private``)."""
    if path.is_file() and (token := path.read_text().strip()):
        return token
    token = secrets.token_urlsafe(nbytes)
    write_private(path, token + "\n")
    return token


class StackError(RuntimeError):
    """A stack operation failed; the message names the component, its log and the fix."""


def _proc_start_time(pid: int) -> str | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return fields[19]  # starttime, in clock ticks since boot


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie has exited; it only waits for its parent to reap it.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def _status_kb(pid: int, field: str) -> int | None:
    """One ``/proc/<pid>/status`` figure in kB; None once the process is gone (reading /proc of
    a vanished process raises ProcessLookupError rather than ENOENT)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def rss_mb(pid: int) -> float | None:
    """Resident memory of a process and its children, in MiB; None once the process is gone.

    Only the process's own status decides None. A live process can hold next to nothing: one
    caught mid-exec (``Popen`` returns once the exec has closed its pipe, before the new program
    has run a line of its code) holds only the stack page of its arguments, 4 kB: 0.0 MiB."""
    own_kb = _status_kb(pid, "VmRSS")
    if own_kb is None:
        return None
    children: list[str] = []
    # Children (postgres backends, say) come and go: one may exit between listing and reading.
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total_kb = own_kb + sum(_status_kb(int(c), "VmRSS") or 0 for c in children)
    return round(total_kb / 1024, 1)


def peak_rss_mb(pid: int) -> float | None:
    """The most resident memory a process has had (VmHWM), in MiB; None once it is gone."""
    kb = _status_kb(pid, "VmHWM")
    return round(kb / 1024, 1) if kb is not None else None


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def tail(path: Path, lines: int = 25) -> str:
    if not path.is_file():
        return "(no log written)"
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 16_384))
        text = f.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


class PidFile:
    def __init__(self, path: Path):
        self.path = path

    def write(self, pid: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(f"{pid} {_proc_start_time(pid) or ''}\n")

    def read(self) -> int | None:
        """The recorded pid while that very process still runs, else None."""
        try:
            parts = self.path.read_text().split()
        except FileNotFoundError:
            return None
        if not parts:
            return None
        pid = int(parts[0])
        started = parts[1] if len(parts) > 1 else None
        if not pid_alive(pid):
            return None
        if started and _proc_start_time(pid) != started:
            return None
        return pid

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def spawn(
    argv: Sequence[str],
    log: Path,
    pidfile: PidFile,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    user: str | None = None,
) -> int:
    with open_private_log(log) as out:
        out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {argv[0]}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=server_env(env),
            cwd=cwd,
            start_new_session=True,
            umask=0o077,
            user=user,
            group=user,
            extra_groups=[] if user else None,
        )
    pidfile.write(proc.pid)
    return proc.pid


def wait_until(
    check: Callable[[], bool],
    timeout_s: float,
    alive: Callable[[], bool],
    interval_s: float = 0.5,
) -> bool:
    """Poll ``check`` until it passes; give up early when the process has died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return True
        if not alive():
            return False
        time.sleep(interval_s)
    return False


def terminate(pidfile: PidFile, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> bool:
    """Stop the recorded process (and its process group); True if something was stopped."""
    pid = pidfile.read()
    if pid is None:
        pidfile.clear()
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.2)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    # Children left in the session we created go too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    pidfile.clear()
    return True
