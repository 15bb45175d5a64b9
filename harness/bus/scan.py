"""Who answers on an SO-101 bus, and how sure we are: the diagnosis `fix-ids` acts on.

A noisy line (a loose connector, a long cable, a weak supply) loses or corrupts some replies.
One ping per ID would then report a healthy servo as missing, or a single corrupted reply as two
servos colliding, and the repair that follows would rename the wrong servo. So every ID is
pinged until the answers agree, each answer keeps its votes, and the diagnosis says how sure it is.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from harness.bus import packets as p
from harness.bus.signature import ADDR_MIN_LIMIT, SPAN, Signature
from harness.bus.wire import Wire

SO101_IDS = {1: "shoulder_pan", 2: "shoulder_lift", 3: "elbow_flex", 4: "wrist_flex", 5: "wrist_roll", 6: "gripper"}
SCAN_BAUDS = (1_000_000, 500_000, 250_000, 128_000, 115_200, 76_800, 57_600, 38_400)
TARGET_BAUD = 1_000_000

AGREE_PINGS = 3      # unanimous answers that settle an ID at once
MAX_PINGS = 9        # after disagreement, ping up to this many times and take the plurality
CENSUS_TRIES = 3     # broadcast pings before a baud rate is called silent
READ_TRIES = 4       # reads of a servo's registers before giving up on a detail


class Heard(StrEnum):
    """What one ID sounds like on the wire."""

    ANSWERS = "answers"      # clean replies: one servo
    COLLIDES = "collides"    # replies arrive garbled: more than one servo at this ID
    SILENT = "silent"        # no reply


_HEARD_BY_STATE = {"ok": Heard.ANSWERS, "garbled": Heard.COLLIDES, "none": Heard.SILENT}


class Certainty(StrEnum):
    SURE = "sure"            # every ping agreed
    LIKELY = "likely"        # at least two thirds agreed
    UNSURE = "unsure"        # the line is too noisy to tell

    @classmethod
    def of(cls, agree: int, pings: int, runner_up: int) -> Certainty:
        """Unanimous is sure; a clear lead over the next most common answer is likely."""
        if agree == pings:
            return cls.SURE
        return cls.LIKELY if agree >= 2 * runner_up and agree - runner_up >= 2 else cls.UNSURE


@dataclass(frozen=True)
class Details:
    """Registers read from a servo that answers cleanly; None where every read was lost."""

    model: int | None = None
    firmware: tuple[int, int] | None = None
    lock: int | None = None
    position: int | None = None
    signature: Signature | None = None    # the joint's calibration in EEPROM (limits, homing offset)

    @property
    def firmware_text(self) -> str:
        return f"{self.firmware[0]}.{self.firmware[1]}" if self.firmware else "unknown"


@dataclass(frozen=True)
class Seen:
    baud: int
    servo_id: int
    heard: Heard
    agree: int = 1
    pings: int = 1
    runner_up: int = 0      # pings that gave the next most common answer
    details: Details = Details()

    @property
    def certainty(self) -> Certainty:
        return Certainty.of(self.agree, self.pings, self.runner_up)

    @property
    def model(self) -> int | None:
        return self.details.model

    @property
    def lock(self) -> int | None:
        return self.details.lock


@dataclass
class Scan:
    """Every ID probed at the target baud (silent ones included), and what answered elsewhere."""

    seen: list[Seen] = field(default_factory=list)
    seconds: float = 0.0
    questions: int = 0          # pings, broadcasts and register reads sent
    lost_or_garbled: int = 0    # of those, lost or garbled against the ID's verdict: line noise

    def at(self, servo_id: int, baud: int = TARGET_BAUD) -> Seen | None:
        """The verdict for an ID that was heard (answering or colliding) at `baud`."""
        return next((s for s in self.seen if s.servo_id == servo_id and s.baud == baud
                     and s.heard is not Heard.SILENT), None)

    def verdict(self, servo_id: int) -> Seen | None:
        """The verdict at the target baud, silent ones included (None if the ID was not probed)."""
        return next((s for s in self.seen if s.servo_id == servo_id and s.baud == TARGET_BAUD), None)

    def elsewhere(self, servo_id: int) -> list[Seen]:
        return [s for s in self.seen if s.servo_id == servo_id and s.baud != TARGET_BAUD and s.heard is Heard.ANSWERS]

    @property
    def certainty(self) -> Certainty:
        """The weakest verdict at the target baud: a diagnosis is only as sure as its shakiest ID."""
        order = [Certainty.SURE, Certainty.LIKELY, Certainty.UNSURE]
        verdicts = [s.certainty for s in self.seen if s.baud == TARGET_BAUD] or [Certainty.SURE]
        return max(verdicts, key=order.index)


def probe(wire: Wire, servo_id: int) -> tuple[Heard, int, int, int]:
    """Ping until the answers settle: AGREE_PINGS unanimous ones, or a clear lead (see `Certainty`),
    or MAX_PINGS sent. (verdict, pings that agree with it, pings sent, pings of the runner-up answer)."""
    votes: Counter[Heard] = Counter()
    for sent in range(1, MAX_PINGS + 1):
        votes[_HEARD_BY_STATE[wire.ping(servo_id).state]] += 1
        _, count, runner_up = _standing(votes)
        if sent >= AGREE_PINGS and Certainty.of(count, sent, runner_up) is not Certainty.UNSURE:
            break
    leader, count, runner_up = _standing(votes)
    return leader, count, sum(votes.values()), runner_up


def _standing(votes: Counter[Heard]) -> tuple[Heard, int, int]:
    """(verdict, its votes, the runner-up's votes). Bytes never come from an empty line, so any answer,
    clean or garbled, proves a servo is there: silence wins only when nothing else was heard. Between
    a clean answer and a garbled one, a tie goes to the collision: the safer reading, because it stops
    a repair rather than starting one."""
    heard = {h: n for h, n in votes.items() if h is not Heard.SILENT and n}
    if not heard:
        return Heard.SILENT, votes[Heard.SILENT], 0
    rank = {Heard.COLLIDES: 0, Heard.ANSWERS: 1}
    leader = min(heard, key=lambda h: (-heard[h], rank[h]))
    return leader, heard[leader], max((n for h, n in heard.items() if h is not leader), default=0)


def read_register(wire: Wire, servo_id: int, address: int, length: int, tries: int = READ_TRIES) -> bytes | None:
    """A register block from one servo, retried across lost or corrupted replies."""
    for _ in range(tries):
        answer = wire.read(servo_id, address, length)
        if answer.state == "ok" and len(answer.replies) == 1 and answer.replies[0].servo_id == servo_id \
                and len(answer.data) == length:
            return answer.data
        wire.bad_replies += 1
    return None


def read_details(wire: Wire, servo_id: int) -> Details:
    head = read_register(wire, servo_id, p.ADDR_FIRMWARE_MAJOR, p.ADDR_ID - p.ADDR_FIRMWARE_MAJOR)
    tail = read_register(wire, servo_id, p.ADDR_LOCK, 3)       # Lock, Present_Position (2 bytes)
    limits = read_register(wire, servo_id, ADDR_MIN_LIMIT, SPAN)
    return Details(
        model=int.from_bytes(head[p.ADDR_MODEL:p.ADDR_MODEL + 2], "little") if head else None,
        firmware=(head[p.ADDR_FIRMWARE_MAJOR], head[p.ADDR_FIRMWARE_MINOR]) if head else None,
        lock=tail[0] if tail else None,
        position=int.from_bytes(tail[1:3], "little") if tail else None,
        signature=Signature.from_registers(limits) if limits else None,
    )


def baud_is_silent(wire: Wire, tries: int = CENSUS_TRIES) -> bool:
    """A broadcast ping heard nothing at all, `tries` times: no servo listens at this baud rate."""
    return all(wire.census(window_s=0.02 + 60 * 10 / wire.baud).state == "none" for _ in range(tries))


def quick_scan(wire: Wire, ids: tuple[int, ...] = tuple(SO101_IDS), bauds: tuple[int, ...] = SCAN_BAUDS) -> Scan:
    """Probe the expected IDs at the target baud, and at every other baud where anything answers at all."""
    t0 = time.perf_counter()
    scan = Scan()
    bad_reads_before, asked_before = wire.bad_replies, wire.asked
    for baud in bauds:
        wire.set_baud(baud)
        if baud != TARGET_BAUD and baud_is_silent(wire):
            continue
        for servo_id in ids:
            heard, agree, pings, runner_up = probe(wire, servo_id)
            scan.lost_or_garbled += pings - agree
            if heard is Heard.SILENT and baud != TARGET_BAUD:
                continue
            details = read_details(wire, servo_id) if heard is Heard.ANSWERS else Details()
            scan.seen.append(Seen(baud, servo_id, heard, agree, pings, runner_up, details))
    wire.set_baud(TARGET_BAUD)
    scan.lost_or_garbled += wire.bad_replies - bad_reads_before
    scan.questions = wire.asked - asked_before
    scan.seconds = time.perf_counter() - t0
    return scan


def describe_certainty(scan: Scan) -> str:
    """One line a person can weigh the diagnosis by."""
    if scan.lost_or_garbled == 0:
        return (f"How sure: {scan.certainty.value} - every ID gave the same answer on each of its "
                f"{AGREE_PINGS} pings.")
    shaky = [s for s in scan.seen if s.baud == TARGET_BAUD and s.certainty is not Certainty.SURE]
    worst = ", ".join(f"ID {s.servo_id} {s.agree} of {s.pings}" for s in shaky)
    advice = (" Too noisy to trust: check the cable and the power supply, then run fix-ids again."
              if scan.certainty is Certainty.UNSURE else "")
    return (f"How sure: {scan.certainty.value} - the line is noisy ({scan.lost_or_garbled} of {scan.questions} "
            f"questions lost or garbled); the answers that disagreed: {worst or 'none at 1 Mbaud'}.{advice}")
