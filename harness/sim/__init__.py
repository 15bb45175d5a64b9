"""The simulated SO-101: a MuJoCo scene, a LeRobot robot over it, and a judge that knows the truth.

MuJoCo picks its OpenGL backend at import time, so the headless default (EGL)
is set here, before any module of this package imports mujoco.
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
