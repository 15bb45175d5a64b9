"""How the simulator draws a policy's observation frames: locked with a run, recorded with a dataset.

CPU rendering is bound by the arm's triangles, not by pixels, so a 96x72 frame from the full visual
meshes costs almost what a 640x480 one does. The `sized` profile draws small frames from a coarse mesh
set (vertices merged on a 3 mm grid, under a pixel of the top camera at 160x120: 3.9 mm) and larger frames
from the full set. A policy trained on one profile's frames and run on another's sees slightly
different pixels, so the profile is part of what a scoresheet locks and of a dataset's card
(validated against the full meshes in docs/benchmarks.md, issue 42).
"""

from __future__ import annotations

from enum import StrEnum


class MeshDetail(StrEnum):
    """Which visual mesh set a frame is drawn from."""

    FULL = "full"        # the decimated Menagerie meshes (harness.sim.meshes.decimated)
    COARSE = "coarse"    # vertex-clustered on COARSE_CELL_MM (harness.sim.meshes.clustered)


COARSE_CELL_MM = 3.0
COARSE_MAX_EDGE = 160   # frames whose longer edge is at most this many pixels use the coarse set


class RenderProfile(StrEnum):
    FULL = "full-v1"     # every frame from the full meshes: how every frame was drawn before issue 42
    SIZED = "sized-v1"   # frames up to COARSE_MAX_EDGE px from the coarse meshes, larger ones from the full

    def detail_for(self, width: int, height: int) -> MeshDetail:
        if self is RenderProfile.SIZED and max(width, height) <= COARSE_MAX_EDGE:
            return MeshDetail.COARSE
        return MeshDetail.FULL

    def describe(self, width: int, height: int) -> str:
        return f"{self.value} ({self.detail_for(width, height).value} meshes at {width}x{height})"


DEFAULT_PROFILE = RenderProfile.SIZED
LEGACY_PROFILE = RenderProfile.FULL   # a sheet or dataset that records no profile was drawn with this one
