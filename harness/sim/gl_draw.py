"""Whether a frame was really drawn: the garbage collector can spoil a draw.

MuJoCo's EGL context, when freed, calls `eglReleaseThread`, which makes *no* context current in the freeing
thread, whichever context was current there. A renderer nobody closed is freed by the garbage collector, at
whatever allocation triggers a collection, in whatever thread is running: when that falls between a render's
`make_current` and its pixel read, the render's GL calls go nowhere and the frame is whatever memory held
(a CI run's calibrated-spot picture was such noise: "no cube-coloured blob"). Mesa's context does not
recover from that (made current again, its framebuffer reports GL_INVALID_FRAMEBUFFER_OPERATION), so a world
that finds its context lost after a draw throws that renderer away and draws with a new one
(`SimWorld._draw`).

A second way: MuJoCo's `Renderer.close` (which `__del__` calls) frees its rendering context's GL objects
(`mjr_freeContext`) with whatever context is current, and object names are per context, so closing one renderer
while another's context is current deletes *that* renderer's textures and buffers: it then draws frames without
them, and nothing says so (a serial run of tests/unit/run: a final frame with no cube in it, "no cube-coloured
blob"; tests/unit/sim/test_gl_contexts.py). `OwnContextRenderer` makes its own context current before freeing.
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


class OwnContextRenderer(mujoco.Renderer):
    """A MuJoCo renderer that frees its GL objects in its own context (module docstring), also when the garbage
    collector closes it. Where its context cannot be made current here (another thread holds it), its objects are
    left to the context's destruction rather than deleted from a context they are not in."""

    def close(self) -> None:
        gl = getattr(self, "_gl_context", None)
        if gl is not None and getattr(self, "_mjr_context", None) is not None:
            try:
                gl.make_current()
            except Exception:   # current in another thread (PyOpenGL's EGLError, EGL_BAD_ACCESS; MuJoCo's RuntimeError)
                self._mjr_context = None
        super().close()
