"""A policy named on the Hugging Face Hub: `--policy ORG/NAME[@REVISION]`, as LeRobot's docs name one.

The reference resolves through huggingface_hub to a snapshot folder in the user's own Hub cache: the
cache first (so a run, a resume and every Ray worker load the same files without asking the network),
a download only when nothing is cached and the user's own `HF_HUB_OFFLINE` allows it. The resolved
commit is the policy's fingerprint (`hub:ORG/NAME@<commit>`), so a resume after the cached revision
moved (a new `hf download`) is refused like a checkpoint retrained in place; `pinned_ref` hands the
loaders the locked commit, never "whatever main is now".

Local folders and the built-in policies pass through unchanged: a path that exists wins over a Hub id
of the same spelling (`outputs/act` is a folder when there is one).
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.errors import HarnessInputError
from harness.models.checkpoint import HubRef, hub_ref
from harness.models.locked import LockedPolicy
from harness.models.scoresheet import policy_fingerprint as local_fingerprint

HUB_PREFIX = "hub:"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _snapshot(ref: HubRef, cache_dir: Path | None, offline: bool | None) -> Path:
    """The snapshot folder of `ref`: from the cache, else downloaded (when allowed); one clear error else."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    offline = constants.is_offline_mode() if offline is None else offline
    where = str(cache_dir) if cache_dir is not None else None
    try:
        return Path(snapshot_download(ref.repo_id, revision=ref.revision, cache_dir=where, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    name = ref.repo_id + (f"@{ref.revision}" if ref.revision else "")
    if offline:
        raise HarnessInputError(None, "--policy", f"{name} is not in the Hugging Face cache and HF_HUB_OFFLINE is "
                                                  f"set; download it first: {ref.download_command}") from None
    try:
        return Path(snapshot_download(ref.repo_id, revision=ref.revision, cache_dir=where))
    except GatedRepoError:
        raise HarnessInputError(None, "--policy", f"{name} is gated on the Hub: accept its terms and log in "
                                                  "(hf auth login), then run again") from None
    except RepositoryNotFoundError:
        raise HarnessInputError(None, "--policy", f"{name}: no such model repository on the Hub (or it is "
                                                  "private: hf auth login), and no local folder of that name") from None
    except RevisionNotFoundError:
        raise HarnessInputError(None, "--policy", f"{name}: the repository has no revision "
                                                  f"'{ref.revision}'") from None
    except OSError as err:   # no network, a proxy refusing, a full disk: the Hub could not be reached or stored
        detail = " ".join(str(err).split())[:160]
        raise HarnessInputError(None, "--policy", f"{name} is not in the Hugging Face cache and could not be "
                                                  f"downloaded ({type(err).__name__}: {detail}); download it with: "
                                                  f"{ref.download_command}") from None


def checkpoint_folder(ref: str, cache_dir: Path | None = None, offline: bool | None = None) -> str:
    """The folder LeRobot loads for a policy reference: a Hub id's cached snapshot, anything else unchanged."""
    hub = hub_ref(ref)
    return ref if hub is None else str(_snapshot(hub, cache_dir, offline))


def policy_fingerprint(ref: str, cache_dir: Path | None = None, offline: bool | None = None) -> str:
    """`hub:ORG/NAME@<commit>` for a Hub id (resolved, downloaded if allowed); a local folder's or a
    built-in's fingerprint otherwise."""
    hub = hub_ref(ref)
    if hub is None:
        return local_fingerprint(ref)
    commit = _snapshot(hub, cache_dir, offline).name   # huggingface_hub's snapshots/<commit>/ folder
    if not _COMMIT.match(commit):
        raise HarnessInputError(None, "--policy", f"{ref}: the Hub cache holds no commit for it ({commit})")
    return f"{HUB_PREFIX}{hub.repo_id}@{commit}"


def pinned_ref(locked: LockedPolicy) -> str:
    """The reference a locked run loads: a Hub policy at its locked commit (what main is now does not
    matter to a resume or a worker), anything else as it was locked."""
    if locked.fingerprint.startswith(HUB_PREFIX):
        return locked.fingerprint.removeprefix(HUB_PREFIX)
    return locked.ref
