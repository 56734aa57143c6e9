"""Running an HTTP server in a child process for the acceptance tests: a free loopback port,
waiting until it answers, and stopping it."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

import httpx

from tests.helpers import ROOT, SRC, python_path

__all__ = ["ROOT", "SRC", "free_port", "python_path", "stop", "wait_until_up"]


def free_port() -> int:
    """A TCP port nothing listens on at the moment, on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """Poll ``url`` until anything answers; fail if ``process`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else b""
            raise RuntimeError(f"the server exited with {process.returncode}: {output!r}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing answered on {url} within {timeout}s")


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> bytes:
    """Send ``sig``, wait up to 10 s (then kill), and return everything the process printed."""
    process.send_signal(sig)
    try:
        output, _ = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    return output
