"""What tests/e2e/test_cli_process.py runs in place of the CLI: it reports what a process sees of itself (argv, folder,
environment, streams) as JSON on stdout, then does what its first argument says: exit with a code, wait for a
signal, crash, or leave an atexit handler and a thread's output for the interpreter's shutdown."""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading


def main() -> None:
    action = sys.argv[1]
    if action == "report":
        print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "pid": os.getpid(), "ppid": os.getppid(),
                          "env": dict(os.environ), "stdin": sys.stdin.read(), "main": __name__,
                          "streams": [[stream.line_buffering, stream.write_through, stream.encoding, stream.errors]
                                      for stream in (sys.stdin, sys.stdout, sys.stderr)],
                          "path0": sys.path[0],
                          "pgid": os.getpgid(0)}))
        sys.exit(int(sys.argv[2]))
    if action == "wait":   # for a signal: say so, then sleep until one ends it
        print("waiting", flush=True)
        while True:
            signal.pause()
    if action == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if action == "shutdown":   # what only the interpreter's shutdown prints, and a written-but-unflushed line
        atexit.register(print, "atexit ran")
        threading.Thread(target=lambda: (threading.Event().wait(0.2), print("thread joined"))).start()
        sys.stdout.write("unflushed\n")
        return
    if action == "raise":
        raise ValueError("the probe's own error")
    sys.exit(f"unknown action {action}")


if __name__ == "__main__":
    main()
