"""A blind comparison of two or more policies: the pre-registered schedule, the sealed arm mapping
and the sequential decision, all pure functions of what the scoresheet locked and recorded.

* The schedule is a pure function of the seed: block b runs one start position once per arm. The
  position is drawn uniformly, with replacement, from the protocol's start positions (`PositionRule.DRAWN`):
  every block is then an independent draw, so under "equal average success over the protocol's positions"
  each pair's discordant odds are exactly 1/2 given everything before it, however strongly one policy
  leads on one side of the workspace and the other on the other side. Drawing without replacement within
  a cycle would balance the positions, but the next position would depend on those already used, and
  with an arm-by-position interaction that tilts the next pair's odds mid-cycle; cycling through the list
  in order (`PositionRule.CYCLE`, sheets locked before) tilts whole runs of blocks the same way. The
  arms' order inside the block is drawn from a generator seeded with (seed, b). Neither depends on how
  many blocks there are or on what happened before (a resumed run continues the exact same schedule).
* Which policy gets which code is a uniformly random permutation drawn at the lock from a secret seed
  (`assign_codes`, `CodeRule.DRAWN`), applied to the policies sorted by fingerprint: the order of the
  flags or of `run.policies` has no part in it. The seed is sealed with the mapping.
* The mapping from arm codes (A, B, ...) to policies is sealed: encoded under a keystream from a
  random salt (so that no `cat`, `grep` or YAML viewer shows a policy's path or name by accident;
  it is not a secret from someone who runs this module: it resists accidents only), with a SHA-256
  commitment over the salt and the mapping in the locked block. The lock hash covers the commitment,
  so the mapping provably existed, unchanged, before trial 1.
* After each complete block every declared comparison gains one pair; `harness.stats.sequential`
  decides.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from pydantic import BaseModel, ConfigDict

from harness.errors import HarnessError
from harness.models.graded import PrimaryOutcome
from harness.stats.sequential import ComparisonState, ComparisonTrace, Decision, SequentialDesign, advance

ARM_CODES = "ABCDEFGHIJ"
SEAL_CONTEXT = b"harness.comparison.seal/1"
# tags that keep the seed's streams apart: each block's arm order uses (seed, block)
_POSITION_STREAM = 0x706F73   # "pos"
_CODE_STREAM = 0x636F6465     # "code"


class PositionRule(StrEnum):
    """How each block's start position is chosen; the lock records it (absent: a sheet locked before the draw)."""

    CYCLE = "cycle"   # block b at positions[b mod P]: sheets locked before positions were drawn
    DRAWN = "drawn"   # each block's position drawn uniformly, with replacement, from the locked seed


class CodeRule(StrEnum):
    """How the arms' codes were given; the lock records it (absent: a sheet locked before the draw)."""

    FLAG_ORDER = "flag-order"   # A = the first --policy: sheets locked before codes were drawn
    DRAWN = "drawn"             # a random permutation from a secret seed sealed with the mapping


def arm_codes(count: int) -> tuple[str, ...]:
    if not 2 <= count <= len(ARM_CODES):
        raise ValueError(f"{count} arms: a comparison takes 2..{len(ARM_CODES)} policies")
    return tuple(ARM_CODES[:count])


def default_comparisons(codes: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Every pair, declared up front: the error is controlled over all of them."""
    return tuple(itertools.combinations(codes, 2))


@dataclass(frozen=True)
class Slot:
    """One scheduled trial: which block, which arm, which start position (a protocol trial index)."""

    number: int          # 1-based, the trial index the scoresheet records
    block: int           # 0-based
    arm: str             # the arm's code
    position: int        # the protocol trial index whose start position this slot uses


def block_order(seed: int, block: int, codes: tuple[str, ...]) -> tuple[str, ...]:
    """The arms' order inside one block: a permutation drawn from a generator seeded with (seed, block)."""
    rng = np.random.default_rng([seed, block])
    return tuple(codes[i] for i in rng.permutation(len(codes)))


def block_positions(seed: int, count: int, blocks: int, rule: PositionRule) -> np.ndarray:
    """Which of `count` start positions (an index into the locked list) each of `blocks` blocks uses.

    DRAWN: one uniform double per block from a generator seeded with (seed, stream), so block b's draw
    never depends on how many blocks follow (a prefix of a longer schedule is the shorter one).
    """
    if count < 1:
        raise ValueError("a schedule needs at least one start position")
    if rule is PositionRule.CYCLE:
        return np.arange(blocks) % count
    uniform = np.random.default_rng([seed, _POSITION_STREAM]).random(blocks)
    return np.minimum((uniform * count).astype(np.int64), count - 1)


def build_schedule(seed: int, codes: tuple[str, ...], positions: list[int], blocks: int,
                   rule: PositionRule) -> list[Slot]:
    """Every slot of `blocks` blocks, in run order."""
    if not positions:
        raise ValueError("a schedule needs at least one start position")
    at = block_positions(seed, len(positions), blocks, rule)
    slots: list[Slot] = []
    for block in range(blocks):
        for arm in block_order(seed, block, codes):
            slots.append(Slot(len(slots) + 1, block, arm, positions[int(at[block])]))
    return slots


class ArmIdentity(BaseModel):
    """What the seal hides: the policy behind a code."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ref: str           # a built-in name or a checkpoint folder
    fingerprint: str   # as `scoresheet.policy_fingerprint` makes it


def assign_codes(seed: int, identities: Sequence[ArmIdentity]) -> dict[str, ArmIdentity]:
    """Each code's policy: a uniformly random permutation drawn from `seed` (secret, drawn at the lock),
    applied to the policies sorted by fingerprint, so the order they were named in has no part in it."""
    ordered = sorted(identities, key=lambda arm: arm.fingerprint)
    codes = arm_codes(len(ordered))
    permutation = np.random.default_rng([seed, _CODE_STREAM]).permutation(len(ordered))
    return {code: ordered[int(i)] for code, i in zip(codes, permutation, strict=True)}


class SealedMapping(BaseModel):
    """The arm mapping as the locked block stores it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    salt: str          # hex
    sealed: str        # base64 of the mapping's JSON under the salt's keystream
    commitment: str    # sha256(context + salt + mapping JSON), hex


def _mapping_bytes(mapping: dict[str, ArmIdentity], assignment_seed: int | None) -> bytes:
    arms: dict[str, object] = {code: arm.model_dump() for code, arm in sorted(mapping.items())}
    plain: dict[str, object] = arms if assignment_seed is None else {"arms": arms, "assignment_seed": assignment_seed}
    return json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()


def _keystream(salt: bytes, length: int) -> bytes:
    return hashlib.shake_256(SEAL_CONTEXT + salt).digest(length)


def seal(mapping: dict[str, ArmIdentity], salt: bytes | None = None,
         assignment_seed: int | None = None) -> SealedMapping:
    """`assignment_seed`: the secret seed `assign_codes` drew the mapping from, sealed with it (None: a
    mapping given in flag order, as sheets locked before the draw have)."""
    salt = salt if salt is not None else secrets.token_bytes(32)
    plain = _mapping_bytes(mapping, assignment_seed)
    masked = bytes(a ^ b for a, b in zip(plain, _keystream(salt, len(plain)), strict=True))
    commitment = hashlib.sha256(SEAL_CONTEXT + salt + plain).hexdigest()
    return SealedMapping(salt=salt.hex(), sealed=base64.b64encode(masked).decode(), commitment=commitment)


class SealBroken(HarnessError):
    """The sealed mapping does not match its commitment: edited after the lock."""


@dataclass(frozen=True)
class Unsealed:
    """What the seal holds: each code's policy and the seed the codes were drawn from (None: flag order)."""

    arms: dict[str, ArmIdentity]
    assignment_seed: int | None


def unseal_all(sealed: SealedMapping) -> Unsealed:
    salt = bytes.fromhex(sealed.salt)
    masked = base64.b64decode(sealed.sealed, validate=True)
    plain = bytes(a ^ b for a, b in zip(masked, _keystream(salt, len(masked)), strict=True))
    if hashlib.sha256(SEAL_CONTEXT + salt + plain).hexdigest() != sealed.commitment:
        raise SealBroken("the sealed arm mapping does not match its commitment")
    raw = json.loads(plain)
    seed = raw.get("assignment_seed") if "arms" in raw else None
    arms = raw.get("arms", raw)
    return Unsealed({code: ArmIdentity.model_validate(arm) for code, arm in arms.items()}, seed)


def unseal(sealed: SealedMapping) -> dict[str, ArmIdentity]:
    """Each code's policy (`unseal_all` also gives the seed they were drawn from)."""
    return unseal_all(sealed).arms


def replay(
    design: SequentialDesign,
    comparisons: tuple[tuple[str, str], ...],
    block_outcomes: list[dict[str, bool]],
) -> list[ComparisonTrace]:
    """Each declared comparison's states after each complete block (`block_outcomes[b][code]`:
    whether that arm's scored trial in block b succeeded). A comparison that has stopped gains no
    more pairs: later blocks (run for the comparisons still open) do not change its decision. This is the test on
    success; a graded primary outcome has its own (`harness.stats.betting`), chosen by `SheetComparison.traces`
    from what the sheet locked."""
    traces = []
    for first, second in comparisons:
        states: list[ComparisonState] = []
        state = ComparisonState()
        for outcomes in block_outcomes:
            if state.decision.final:
                break
            state = advance(design, state, outcomes[first], outcomes[second], design.cap)
            states.append(state)
        traces.append(ComparisonTrace(first, second, tuple(states)))
    return traces


def run_finished(traces: list[ComparisonTrace]) -> bool:
    """The run stops when every declared comparison has stopped (a decision or its cap)."""
    return all(trace.final.decision.final for trace in traces)


def block_outcomes[Outcome: (bool, float)](schedule: list[Slot],
                                           success_of: Callable[[int], Outcome | None]) -> list[dict[str, Outcome]]:
    """Each complete block's outcomes by arm, in order, up to the first block not yet complete
    (`success_of(slot number)`: None while the slot has no scored attempt; a success, or a graded score)."""
    blocks: dict[int, dict[str, Outcome]] = {}
    expected: dict[int, int] = {}
    for slot in schedule:
        expected[slot.block] = expected.get(slot.block, 0) + 1
        outcome = success_of(slot.number)
        if outcome is not None:
            blocks.setdefault(slot.block, {})[slot.arm] = outcome
    complete = []
    for block in sorted(expected):
        if len(blocks.get(block, {})) < expected[block]:
            break
        complete.append(blocks[block])
    return complete


def decision_text(traces: list[ComparisonTrace], outcome: PrimaryOutcome = PrimaryOutcome.SUCCESS) -> str:
    """One line per declared comparison, in arm codes only (safe to show while the run is blind)."""
    lines = []
    ahead = "succeeded" if outcome is PrimaryOutcome.SUCCESS else f"scored higher on {outcome.value}"
    for trace in traces:
        state = trace.final
        winner = trace.winner()
        if winner is not None:
            loser = trace.second if winner == trace.first else trace.first
            what = f"{winner} better than {loser}"
        elif state.decision is Decision.FUTILITY:
            what = f"{trace.first} vs {trace.second}: no difference of the declared size"
        elif state.decision is Decision.CAP:
            what = f"{trace.first} vs {trace.second}: cap reached without a decision"
        else:
            what = f"{trace.first} vs {trace.second}: still open"
        blocks = "block" if state.pairs == 1 else "blocks"
        pairs = "pair" if state.first_only == 1 else "pairs"
        lines.append(f"{what} after {state.pairs} {blocks} ({state.first_only} {pairs} only {trace.first} {ahead}, "
                     f"{state.second_only} only {trace.second})")
    return "; ".join(lines)
