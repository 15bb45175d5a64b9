"""`harness`'s console entry as the shell runs it: the exit code, the printed output and the exit handlers a
command leaves survive its fast exit (in a process of its own: what is checked is that process's end)."""

from __future__ import annotations

import subprocess
import sys

from harness.errors import EXIT_BAD_INPUT


def test_the_console_entry_keeps_exit_code_output_and_exit_handlers(tmp_path) -> None:
    """`entry` skips only the native teardown: atexit handlers, thread joins and buffered output survive."""
    script = (
        "import atexit, threading, time\n"
        "from harness.cli import entry\n"
        "atexit.register(lambda: print('atexit ran', flush=True))\n"
        # behaviour: a thread that outlives entry() by 0.3 s, whose output must survive the exit
        "threading.Thread(target=lambda: (time.sleep(0.3), print('thread finished'))).start()\n"
        "print('buffered line', end='')\n"
        "entry(['protocol', 'check', 'no-such-protocol.yaml'])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == EXIT_BAD_INPUT
    assert "no-such-protocol.yaml" in done.stderr
    assert "buffered line" in done.stdout
    assert done.stdout.index("thread finished") < done.stdout.index("atexit ran")
