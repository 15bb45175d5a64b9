"""How close a render profile's frames are to the full meshes': structural similarity (SSIM) per camera.

Wang et al.'s SSIM (11x11 Gaussian window, sigma 1.5, on luminance), computed with OpenCV so no image
library is added for it. Used by tests/unit/sim/test_render_profile.py and benchmarks/floor_bench.py to validate a
profile at each size a policy uses (issue 42).
"""

from __future__ import annotations

import cv2
import numpy as np

from harness.models.render_profile import RenderProfile

_C1 = (0.01 * 255) ** 2
_C2 = (0.03 * 255) ** 2


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM of two RGB uint8 frames of one size, on their luminance."""
    if a.shape != b.shape:
        raise ValueError(f"frames differ in shape: {a.shape} and {b.shape}")
    x = cv2.cvtColor(a, cv2.COLOR_RGB2GRAY).astype(np.float64)
    y = cv2.cvtColor(b, cv2.COLOR_RGB2GRAY).astype(np.float64)

    def blur(img: np.ndarray) -> np.ndarray:
        return cv2.GaussianBlur(img, (11, 11), 1.5, borderType=cv2.BORDER_REFLECT)

    mx, my = blur(x), blur(y)
    sxx = blur(x * x) - mx * mx
    syy = blur(y * y) - my * my
    sxy = blur(x * y) - mx * my
    num = (2 * mx * my + _C1) * (2 * sxy + _C2)
    den = (mx * mx + my * my + _C1) * (sxx + syy + _C2)
    return float(np.mean(num / den))


def profile_ssim(qpos_samples: list[np.ndarray], cameras: tuple[str, ...], width: int, height: int,
                 profile: RenderProfile = RenderProfile.SIZED) -> dict[str, list[float]]:
    """Per camera, the SSIM of `profile`'s frame against the full meshes' frame in each configuration."""
    from harness.sim.world import FrameRequest, SimWorld

    world = SimWorld()
    try:
        scores: dict[str, list[float]] = {cam: [] for cam in cameras}
        detail = profile.detail_for(width, height)
        for qpos in qpos_samples:
            for cam in cameras:
                full = world.render_request(FrameRequest(cam, width, height, qpos, 0, False))
                ours = world.render_request(FrameRequest(cam, width, height, qpos, 0, False, detail))
                scores[cam].append(ssim(full, ours))
        return scores
    finally:
        world.close()
