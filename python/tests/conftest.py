"""Fixtures: the repository's test data, and a real relay process.

The relay is the workspace's `nostrwire` binary: `NOSTRWIRE_BIN`, else the
release build under `CARGO_TARGET_DIR` (or `target/`). Tests that need it
fail, rather than skip, when it is missing: CI builds it first.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def relay_binary() -> Path:
    explicit = os.environ.get("NOSTRWIRE_BIN")
    if explicit:
        return Path(explicit)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "release" / "nostrwire"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def corpus_lines(repo: Path) -> list:
    lines = (repo / "testdata" / "real-events.jsonl").read_bytes().splitlines()
    return [line for line in lines if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Relay:
    def __init__(self, tmp: Path, config: str = "") -> None:
        binary = relay_binary()
        if not binary.exists():
            raise RuntimeError(f"relay binary {binary} not found: build it with cargo build --release")
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        data = tmp / "data"
        cfg = tmp / "relay.toml"
        cfg.write_text(
            '[relay]\nmetrics = "off"\n[limits]\nmax_limit = 20000\n' + config
        )
        self.log = open(tmp / "relay.log", "wb")
        self.proc = subprocess.Popen(
            [str(binary), "relay", "-c", str(cfg), "--listen", f"127.0.0.1:{self.port}",
             "--data", str(data)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        "relay did not start: " + (tmp / "relay.log").read_text(errors="replace")
                    )
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory):
    r = Relay(tmp_path_factory.mktemp("relay"))
    yield r
    r.stop()


@pytest.fixture()
def fresh_relay(tmp_path: Path):
    """A relay with an empty database, for tests that count what they store."""
    r = Relay(tmp_path)
    yield r
    r.stop()
