"""Replays a walkthrough from the docs as written: each is a `console` block after an HTML comment
`<!-- walkthrough: NAME -->`, a transcript of terminals side by side.

- `TERM$ COMMAND` (or `$ COMMAND`, terminal `desk`) starts a command in that terminal (`\\` continues a line);
  `harness emulate-bus` gets a terminal of its own as input, so its console is live as at a desk.
- `TERM> TEXT` (or `> TEXT`) types a line into what runs there; `> (Enter)` is a bare Enter.
- `# ...` is a comment; a line `...` stands for output left out.
- Any other line is output the terminal last acted on prints, in order; `...` inside it matches anything,
  and the paths that differ on every desk (`/dev/pts/N`, `/tmp/...`, `/path/to/...`) are read from the
  output where they first appear and put into every later command and line.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import subprocess
import termios
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PLACEHOLDER = re.compile(r"/dev/pts/\d+|/tmp/\S+|/path/to/\S*")
ENTER = "(Enter)"


@dataclass
class Step:
    kind: str          # "run", "type", "expect"
    terminal: str
    text: str


def walkthroughs(markdown: str) -> dict[str, list[Step]]:
    """Every `<!-- walkthrough: NAME -->` console block of a document, as steps."""
    found = {}
    for match in re.finditer(r"<!-- walkthrough: ([\w-]+) -->\s*```console\n(.*?)```", markdown, re.S):
        found[match.group(1)] = _steps(match.group(2))
    return found


def _steps(block: str) -> list[Step]:
    steps: list[Step] = []
    current = "desk"
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.strip() == "..." or line.startswith("# "):
            continue
        command = re.match(r"^(\w*)\$ (.*)$", line)
        typed = re.match(r"^(\w*)> ?(.*)$", line)
        if command:
            current = command.group(1) or "desk"
            text = command.group(2)
            while text.endswith("\\") and i < len(lines):
                text = text[:-1] + " " + lines[i].strip()
                i += 1
            steps.append(Step("run", current, text))
        elif typed:
            current = typed.group(1) or "desk"
            text = typed.group(2).strip()
            steps.append(Step("type", current, "" if text == ENTER else text))
        else:
            steps.append(Step("expect", current, line))
    return steps


@dataclass
class Terminal:
    proc: subprocess.Popen
    write_fd: int
    output: str = ""
    seen: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)
    console: bool = False


class Desk:
    """The terminals of one walkthrough, run in `cwd` with `env`."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.env = env
        self.terminals: dict[str, Terminal] = {}
        self.bound: dict[str, str] = {}
        self.log: list[str] = []

    # --- the steps -------------------------------------------------------------
    def play(self, steps: list[Step], timeout_s: float = float(os.environ.get("WALKTHROUGH_WAIT_S", 120))) -> None:
        for step in steps:
            text = self._bind(step.text) if step.kind != "expect" else step.text
            self.log.append(f"{step.terminal}{'$' if step.kind == 'run' else '>' if step.kind == 'type' else ':'} "
                            f"{text}")
            if step.kind == "run":
                self._start(step.terminal, text)
            elif step.kind == "type":
                self._type(step.terminal, text)
            else:
                self._expect(step.terminal, step.text, timeout_s)

    def finish(self, timeout_s: float = 120.0) -> dict[str, int]:
        """Wait for every program to end (an emulator is sent `quit`); their exit codes."""
        codes = {}
        for name, term in self.terminals.items():
            if not term.console:
                codes[name] = self._wait(name, timeout_s)
        for name, term in self.terminals.items():
            if term.console:
                if term.proc.poll() is None:
                    os.write(term.write_fd, b"quit\n")
                codes[name] = self._wait(name, 30)
        return codes

    def close(self) -> None:
        for term in self.terminals.values():
            if term.proc.poll() is None:
                os.killpg(term.proc.pid, 9)
                term.proc.wait()
            with contextlib.suppress(OSError):
                os.close(term.write_fd)

    def transcript(self) -> str:
        outputs = "\n".join(f"--- {name} ---\n{t.output[-4000:]}" for name, t in self.terminals.items())
        return "steps:\n" + "\n".join(self.log) + "\n" + outputs

    # --- the machinery -----------------------------------------------------------
    def _start(self, name: str, command: str) -> None:
        if name in self.terminals:   # a terminal takes the next command once the last one is done, and done well
            code = self._wait(name, 180)
            assert code == 0, f"{name}: exit {code}\n{self.transcript()}"
            os.close(self.terminals[name].write_fd)
        console = shlex.split(command)[:2] == ["harness", "emulate-bus"]
        if console:   # a terminal it owns, so its console reads typed lines as at a desk
            master, slave = os.openpty()
            attrs = termios.tcgetattr(slave)
            attrs[3] &= ~termios.ECHO
            termios.tcsetattr(slave, termios.TCSANOW, attrs)

            def own_terminal() -> None:
                os.setsid()
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)

            proc = subprocess.Popen(["bash", "-c", f"exec {command}"], stdin=slave, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, cwd=self.cwd, env=self.env, preexec_fn=own_terminal)
            os.close(slave)
            write_fd = master
        else:
            read_fd, write_fd = os.pipe()
            proc = subprocess.Popen(["bash", "-c", f"exec {command}"], stdin=read_fd, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, cwd=self.cwd, env=self.env, start_new_session=True)
            os.close(read_fd)
        term = Terminal(proc, write_fd, console=console)
        self.terminals[name] = term
        threading.Thread(target=self._pump, args=(term,), daemon=True).start()

    @staticmethod
    def _pump(term: Terminal) -> None:
        assert term.proc.stdout is not None
        fd = term.proc.stdout.fileno()
        while chunk := os.read(fd, 65536):
            with term.cond:
                term.output += chunk.decode(errors="replace")
                term.cond.notify_all()
        with term.cond:
            term.cond.notify_all()

    def _type(self, name: str, text: str) -> None:
        """Type a line; at an emulator's console, wait for its answer as a person does before going on (the
        console prints once the command is carried out)."""
        term = self.terminals[name]
        with term.cond:
            mark = len(term.output)
        os.write(term.write_fd, (text + "\n").encode())
        if not term.console:
            return
        deadline = time.monotonic() + 30
        with term.cond:
            while "\n" not in term.output[mark:]:
                left = deadline - time.monotonic()
                assert left > 0, f"{name} never answered {text!r}\n{self.transcript()}"
                term.cond.wait(min(left, 0.5))

    def _bind(self, text: str) -> str:
        for doc, real in self.bound.items():
            text = text.replace(doc, real)
        return text

    def _pattern(self, line: str) -> tuple[re.Pattern[str], list[str]]:
        parts, names, at = [], [], 0
        for match in PLACEHOLDER.finditer(line):
            parts.append(self._literal(line[at:match.start()]))
            token = match.group(0)
            if token in self.bound:
                parts.append(re.escape(self.bound[token]))
            else:
                parts.append(r"(\S+)")
                names.append(token)
            at = match.end()
        parts.append(self._literal(line[at:]))
        return re.compile("".join(parts)), names

    @staticmethod
    def _literal(text: str) -> str:
        return ".*?".join("".join(r"\s+" if part.isspace() else re.escape(part)
                                  for part in re.split(r"(\s+)", piece) if part)
                          for piece in text.split("..."))

    def _expect(self, name: str, line: str, timeout_s: float) -> None:
        term = self.terminals[name]
        pattern, names = self._pattern(line.strip())
        deadline = time.monotonic() + timeout_s
        grace = False   # once the program has exited, one more wait for the last of its output
        with term.cond:
            while (found := pattern.search(term.output, term.seen)) is None:
                left = deadline - time.monotonic()
                ended = term.proc.poll() is not None
                if left <= 0 or (ended and grace):
                    raise AssertionError(f"{name} never printed {line!r}"
                                         f"{' (it exited)' if ended else ''}\n{self.transcript()}")
                grace = ended
                term.cond.wait(min(left, 0.5))
            term.seen = found.end()
            for token, value in zip(names, found.groups(), strict=True):
                self.bound[token] = value

    def _wait(self, name: str, timeout_s: float) -> int:
        try:
            return self.terminals[name].proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{name} still running after {timeout_s} s\n{self.transcript()}") from None
