"""A scoresheet's result in a Hugging Face model card's `model-index`, where a checkpoint's readers look.

Why: a success rate pasted into a README by hand loses its protocol, its interval and its trial count. This module
writes them as the Hub's own evaluation block (`model-index`, in the card's YAML front matter, in the form
`huggingface_hub.repocard_data.eval_results_to_model_index` makes and the Hub's parser reads): the task, the
protocol (its file's name, and its sha256 as the dataset's revision), the robot, the success rate with its 95%
Wilson interval and trial count, the scoresheet's lock and the harness version.

Idempotent: a result is identified by task, protocol, protocol hash, robot (and a comparison's arm) and metric;
writing it again replaces that result, never adds a second, and a second write of the same sheet leaves the card's
bytes as they were. The rest of the card is untouched: the body byte for byte, and the other metadata keys as
written (only the `model-index:` block of the front matter is replaced, and in it only harness's results; where
that cannot be done in place, nothing is written and the refusal says why).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from huggingface_hub import EvalResult
from huggingface_hub.repocard import REGEX_YAML_BLOCK
from huggingface_hub.repocard_data import eval_results_to_model_index, model_index_to_eval_results

from harness.errors import HarnessInputError
from harness.models.comparison import unseal
from harness.models.run_settings import BuiltinPolicy
from harness.models.scoresheet import Scoresheet, policy_fingerprint
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import Label
from harness.stats.estimates import wilson_interval
from harness.storage.atomic import write_text_atomic

TASK_TYPE = "robotics"
DATASET_TYPE = "harness-protocol"   # the "dataset" of a harness result is the pre-registered protocol
METRIC_TYPE = "success_rate"
_TOP_LEVEL_KEY = re.compile(r"^[^\s#-]")


@dataclass(frozen=True)
class CardResult:
    """One success rate for the card: a sheet's, or one arm's of a comparison."""

    result: EvalResult
    text: str   # the line `harness report` prints about it


def _rate(sheet: Scoresheet, scored: list[Attempt], arm: str | None, policy: str, fingerprint: str,
          version: str) -> CardResult:
    locked = sheet.locked
    n = len(scored)
    k = sum(1 for a in scored if a.label is Label.SUCCESS)
    low, high = wilson_interval(k, n)
    protocol = protocol_name(locked.protocol_file, locked.protocol_sha256)
    config = str(locked.robot) if arm is None else f"{locked.robot}, arm {arm}"
    result = EvalResult(
        task_type=TASK_TYPE, task_name=locked.task,
        dataset_type=DATASET_TYPE, dataset_name=protocol, dataset_config=config,
        dataset_revision=locked.protocol_sha256,
        metric_type=METRIC_TYPE, metric_name="Success rate", metric_value=round(k / n, 4),
        metric_args={"successes": k, "trials": n, "wilson95_low": round(low, 4), "wilson95_high": round(high, 4),
                     "policy": policy, "policy_fingerprint": fingerprint,
                     "scoresheet_lock_sha256": sheet.lock["sha256"], "harness_version": version},
    )
    who = f"arm {arm} ({policy})" if arm is not None else policy
    text = (f"{who}: {k}/{n} = {100 * k / n:.1f}% (95% Wilson {100 * low:.1f}-{100 * high:.1f}%) on {protocol} "
            f"(sha256 {locked.protocol_sha256[:12]}...)")
    return CardResult(result, text)


def protocol_name(protocol_file: str, sha256: str) -> str:
    """The protocol's own `name`, read from its file where that file is still the one locked (same sha256); the
    file's name otherwise (the hash beside it on the card says which protocol it was either way)."""
    from harness.models.protocol import file_sha256, load_protocol

    try:
        if file_sha256(protocol_file) == sha256:
            return load_protocol(protocol_file).name
    except (OSError, HarnessInputError):
        pass
    return Path(protocol_file).stem


def is_checkpoint(ref: str, fingerprint: str, folder: Path) -> bool:
    """Whether a locked policy is the checkpoint in `folder` (the card's folder): the folder it was locked from
    (its reference, resolved from where the run was), or the same files (a copy; before the card was written
    into it). A built-in is never a checkpoint folder, even beside a folder of its name."""
    if BuiltinPolicy.named(ref) is not None:
        return False
    try:
        if Path(ref).resolve() == folder.resolve():
            return True
    except OSError:
        pass
    return folder.is_dir() and policy_fingerprint(str(folder)) == fingerprint


def card_results(sheet: Scoresheet, revealed: bool, version: str, checkpoint: Path) -> list[CardResult]:
    """The results a sheet puts on a card: its success rate, or the rate of the comparison's arm(s) whose policy
    is the checkpoint in `checkpoint` (the card's folder: another arm's rate on this card would be read as this
    checkpoint's), once its arms may be named (`revealed`: ended, not blind, or unblinded). Refused in one line:
    nothing scored, still blind, or no arm is this checkpoint."""
    comparison = sheet.locked.comparison
    if comparison is None:
        scored = sheet.scored_attempts()
        if not scored:
            raise HarnessInputError(sheet.path, None, "no trials scored yet: there is no success rate to put on a "
                                                      "model card")
        policy = sheet.locked.policy
        return [_rate(sheet, scored, None, policy.ref, policy.fingerprint, version)]
    if not revealed:
        raise HarnessInputError(sheet.path, "--model-card", "the comparison is still open and blind: a card names "
                                "the policy behind each arm, which is revealed when it ends (or with --unblind)")
    mapping = unseal(comparison.sealed)
    arm_of = {slot.number: slot.arm for slot in sheet.comparison.schedule()}
    mine = [code for code in comparison.arms
            if is_checkpoint(mapping[code].ref, mapping[code].fingerprint, checkpoint)]
    if not mine:
        arms = ", ".join(f"{code} {mapping[code].ref}" for code in comparison.arms)
        raise HarnessInputError(sheet.path, "--model-card", f"no arm's policy is the checkpoint {checkpoint} "
                                f"(arms: {arms}): name the README.md in the folder of the arm to write")
    results = []
    for code in mine:
        scored = [a for a in sheet.scored_attempts() if arm_of.get(a.trial_index) == code]
        if scored:
            results.append(_rate(sheet, scored, code, mapping[code].ref, mapping[code].fingerprint, version))
    if not results:
        raise HarnessInputError(sheet.path, None, "no trials scored yet: there is no success rate to put on a "
                                                  "model card")
    return results


def _same_result(a: EvalResult, b: EvalResult) -> bool:
    return (a.task_type, a.task_name, a.dataset_type, a.dataset_name, a.dataset_config, a.dataset_revision,
            a.metric_type) == (b.task_type, b.task_name, b.dataset_type, b.dataset_name, b.dataset_config,
                               b.dataset_revision, b.metric_type)


def _harness_entry(entry: object) -> bool:
    """A raw model-index result this module writes (its dataset type is the protocol's)."""
    return isinstance(entry, dict) and isinstance(entry.get("dataset"), dict) \
        and entry["dataset"].get("type") == DATASET_TYPE


def updated_card(text: str, results: list[EvalResult], model_name: str, source: Path) -> str:
    """The card's text with `results` in its `model-index` (each replacing the result it identifies). Only the
    `model-index:` block changes: every other byte of the card as it was, and every result in it that is not
    harness's kept as written (not round-tripped through `EvalResult`, which would rewrite it)."""
    match = REGEX_YAML_BLOCK.search(text)
    header, body = (match.group(2), text[match.end():]) if match else ("", text)
    try:
        data = yaml.safe_load(header) if header.strip() else {}
    except yaml.YAMLError as exc:
        raise HarnessInputError(source, "front matter", f"not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise HarnessInputError(source, "front matter", "is not a YAML mapping")
    raw = data.get("model-index") or [{"name": model_name, "results": []}]
    if not (isinstance(raw, list) and raw and isinstance(raw[0], dict)
            and isinstance(raw[0].get("results", []), list)):
        raise HarnessInputError(source, "model-index", "not the Hub's model-index format (a list of "
                                                       "{name, results})")
    first = raw[0]
    ours = [entry for entry in first.get("results", []) if _harness_entry(entry)]
    existing: list[EvalResult] = []
    if ours:
        try:
            _, existing = model_index_to_eval_results([{"name": first.get("name", model_name), "results": ours}])
        except (KeyError, TypeError, ValueError) as exc:
            raise HarnessInputError(source, "model-index", f"not the Hub's model-index format ({exc!r})") from None
    merged = list(existing)
    for new in results:
        at = next((i for i, old in enumerate(merged) if _same_result(old, new)), None)
        if at is None:
            merged.append(new)
        else:
            merged[at] = new
    written = eval_results_to_model_index(str(first.get("name", model_name)), merged)[0]["results"]
    others = [entry for entry in first.get("results", []) if not _harness_entry(entry)]
    index = [{**first, "results": others + written}, *raw[1:]]
    if data.get("model-index") == index:
        return text   # already there, as it would be written
    block = yaml.safe_dump({"model-index": index}, sort_keys=False, allow_unicode=True, width=110)
    new_header = _replace_key_block(header, "model-index", block)
    if yaml.safe_load(new_header) != {**data, "model-index": index}:
        # rewriting the whole front matter would restyle the card's own metadata: refuse, write nothing
        raise HarnessInputError(source, "model-index", "its block cannot be replaced in place (it is not at the "
                                                       "start of a line, or a comment sits inside it): move it, "
                                                       "or remove it, and report again")
    newline = "\r\n" if match and "\r\n" in match.group(1) else "\n"
    new_header = new_header.rstrip("\n").replace("\n", newline)
    if match:
        return f"{match.group(1)}{new_header}{match.group(3)}{body}"
    return f"---{newline}{new_header}{newline}---{newline}{body}"


def _replace_key_block(header: str, key: str, block: str) -> str:
    """`header` with the top-level `key:` block (its line and the lines under it) replaced by `block`, or with
    `block` appended where the key is absent; every other line as it was."""
    lines = header.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(f"{key}:")), None)
    if start is None:
        kept = header if not header or header.endswith("\n") else header + "\n"
        return kept + block
    end = start + 1
    while end < len(lines) and not _TOP_LEVEL_KEY.match(lines[end]):
        end += 1
    return "".join(lines[:start]) + block + "".join(lines[end:])


def write_model_card(path: Path, sheet: Scoresheet, revealed: bool, version: str) -> list[str]:
    """Add (or update) the sheet's results in the card at `path` (made, with only its metadata, where the
    checkpoint folder has none); returns the lines to print, the last saying whether the card was written,
    updated or already up to date. Written atomically, or not at all."""
    if path.is_dir():
        raise HarnessInputError(path, None, "is a folder: name the card, CHECKPOINT/README.md")
    if not path.parent.is_dir():
        raise HarnessInputError(path, None, "its folder does not exist")
    try:
        text = path.read_bytes().decode("utf-8") if path.exists() else ""
    except UnicodeDecodeError as exc:
        raise HarnessInputError(path, None, f"not a text file (byte {exc.start} is not UTF-8)") from None
    results = card_results(sheet, revealed, version, path.parent)
    model_name = path.parent.name if path.parent.name != "pretrained_model" else path.parent.parent.name
    new = updated_card(text, [r.result for r in results], model_name or "policy", path)
    if new == text:
        done = "up to date (unchanged)"
    else:
        write_text_atomic(path, new)
        done = "updated" if text else "written"
    return [*(r.text for r in results), f"model-index of {path}: {done}"]
