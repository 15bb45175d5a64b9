"""Inverse kinematics for a top-down grasp, on a private copy of the model's state.

Damped least squares over the five arm joints: position of the grasp point plus
full orientation (approach straight down, jaws closing along a cube face).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

ARM_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")


def _summed_column_cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum_i a[:, i] x b[:, i], the orientation error of two rotation matrices, in one pass
    (numpy's `cross` per column dominated planning time)."""
    return np.array([
        (a[1] * b[2] - a[2] * b[1]).sum(),
        (a[2] * b[0] - a[0] * b[2]).sum(),
        (a[0] * b[1] - a[1] * b[0]).sum(),
    ])


class TopDownIK:
    def __init__(self, model: mujoco.MjModel) -> None:
        self.model = model
        self.data = mujoco.MjData(model)
        self.site = model.site("grasp_point").id
        self.gripper_body = model.body("gripper").id
        self.qpos_idx = np.array([model.joint(j).qposadr[0] for j in ARM_JOINTS])
        self.dof_idx = np.array([model.joint(j).dofadr[0] for j in ARM_JOINTS])
        self.low = np.array([model.joint(j).range[0] for j in ARM_JOINTS])
        self.high = np.array([model.joint(j).range[1] for j in ARM_JOINTS])

    def target_rotation(self, yaw: float, seed: np.ndarray) -> np.ndarray:
        """Gripper body rotation with its -z (towards the fingertips) pointing down and its
        x (the closing axis) along the cube face nearest to the seed's current roll."""
        self._set(seed)
        current_x = self.data.xmat[self.gripper_body].reshape(3, 3)[:, 0]
        axes = [np.array([math.cos(yaw + k * math.pi / 2), math.sin(yaw + k * math.pi / 2), 0.0]) for k in range(4)]
        best = max(axes, key=lambda x: float(x @ current_x))   # the first of equals, as the loop it replaces
        z = np.array([0.0, 0.0, 1.0])  # body +z points away from the fingertips: up
        y = np.cross(z, best)
        return np.column_stack([best, y, z])

    def solve_reachable(self, target: np.ndarray, rotation: np.ndarray, seed: np.ndarray,
                        iterations: int = 60) -> tuple[np.ndarray, float]:
        """Like `solve`, but trades orientation for position when the wrist runs out of range.

        High above far cubes the wrist cannot point straight down (wrist_flex limit);
        a slightly tilted approach there is harmless, a missed position is not.
        """
        best = (seed, np.inf)
        for weight in (0.3, 0.1, 0.03):
            q, err = self.solve(target, rotation, seed, iterations, orientation_weight=weight)
            if err < best[1]:
                best = (q, err)
            if err < 1e-3:
                break
        return best

    def solve(self, target: np.ndarray, rotation: np.ndarray, seed: np.ndarray,
              iterations: int = 60, orientation_weight: float = 0.3) -> tuple[np.ndarray, float]:
        """Arm joint angles (radians) and the remaining position error (m)."""
        q = np.clip(seed.astype(float).copy(), self.low, self.high)
        jacp = np.zeros((3, self.model.nv))
        jacr = np.zeros((3, self.model.nv))
        err_pos = np.inf
        for _ in range(iterations):
            self._set(q)
            pos = self.data.site_xpos[self.site]
            cur = self.data.xmat[self.gripper_body].reshape(3, 3)
            err_p = target - pos
            err_r = 0.5 * _summed_column_cross(cur, rotation)
            err_pos = float(np.linalg.norm(err_p))
            if err_pos < 1e-4 and np.linalg.norm(err_r) < 1e-3:
                break
            mujoco.mj_jacSite(self.model, self.data, jacp, jacr, self.site)
            jac = np.vstack([jacp[:, self.dof_idx], orientation_weight * jacr[:, self.dof_idx]])
            err = np.concatenate([err_p, orientation_weight * err_r])
            damping = 1e-4
            dq = jac.T @ np.linalg.solve(jac @ jac.T + damping * np.eye(6), err)
            q = np.clip(q + dq, self.low, self.high)
        return q, err_pos

    def grasp_point(self, q: np.ndarray) -> np.ndarray:
        self._set(q)
        return self.data.site_xpos[self.site].copy()

    def _set(self, q: np.ndarray) -> None:
        self.data.qpos[self.qpos_idx] = q
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)
