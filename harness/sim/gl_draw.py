"""Whether a frame was really drawn: the garbage collector can spoil a draw.

MuJoCo's EGL context, when freed, calls `eglReleaseThread`, which makes *no* context current in the freeing
thread, whichever context was current there. A renderer nobody closed is freed by the garbage collector, at
whatever allocation triggers a collection, in whatever thread is running: when that falls between a render's
`make_current` and its pixel read, the render's GL calls go nowhere and the frame is whatever memory held
(a CI run's calibrated-spot picture was such noise: "no cube-coloured blob"). Mesa's context does not
recover from that (made current again, its framebuffer reports GL_INVALID_FRAMEBUFFER_OPERATION), so a world
that finds its context lost after a draw throws that renderer away and draws with a new one
(`SimWorld._draw`).
"""

from __future__ import annotations

import os

import mujoco

DRAWS = 3   # a collection frees each unreachable renderer once, so a second draw is clean; three is margin


def context_still_current(renderer: mujoco.Renderer) -> bool:
    """Whether the renderer's EGL context is current in this thread (other backends: assumed, never seen lost)."""
    if os.environ.get("MUJOCO_GL") != "egl":
        return True
    from OpenGL import EGL

    context = getattr(getattr(renderer, "_gl_context", None), "_context", None)   # MuJoCo's, no public accessor
    if context is None:
        return True
    try:
        return bool(EGL.eglGetCurrentContext().address == context.address)
    except ValueError:   # PyOpenGL's NULL pointer (no context current) refuses to be read
        return False
