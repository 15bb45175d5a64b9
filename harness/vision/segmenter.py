"""A learned second opinion on where the cube is: a small net that outlines every pixel of the cube in view.

`find_cube`'s colour rule loses much of a shaded or oddly lit cube at 320x240 and refuses cubes in full view
(issue 59: 12 % of them there). This net, trained on the stress generator's frames against the simulator's
segmentation render (`benchmarks/learned_segmenter.py --target silhouette`: seeds, steps and loss in
`data/cube_segmenter.json`), outlines the same thing the colour rule's blob stands for, the cube's sides
included, so the measurement's silhouette model takes its outline unchanged. `find_cube` asks it where the colour
rule refuses and checks the rule's answer against it where both answer (docs/measurement.md).

It runs through OpenCV's DNN module from an ONNX file shipped with the package, so `harness.vision` needs no
torch: 30,000 weights, 10-21 ms a frame on one CPU core (docs/benchmarks.md). The net sees every frame at 240
lines, aspect kept (the smallest camera the harness supports), and its mask is scaled back to the frame's own size.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import cv2
import numpy as np

WEIGHTS = Path(__file__).with_name("data") / "cube_segmenter.onnx"
NET_LINES = 240
NET_STRIDE = 4     # two poolings: the net's input is padded to a multiple of this


class CubeSegmenter:
    """The shipped net (or another ONNX file of the same contract: an RGB frame in, minus 0.5 after /255, NCHW;
    one logit a pixel out), loaded on first use. One call at a time: OpenCV's nets are not reentrant."""

    def __init__(self, weights: Path = WEIGHTS) -> None:
        self.weights = weights
        self._net: cv2.dnn.Net | None = None
        self._lock = threading.Lock()

    def sha256(self) -> str:
        return hashlib.sha256(self.weights.read_bytes()).hexdigest()

    def logits(self, frame: np.ndarray) -> np.ndarray:
        """Per-pixel logits (cube > 0) at the frame's own size, for an RGB uint8 frame."""
        h, w = frame.shape[:2]
        size = (max(NET_STRIDE, round(w * NET_LINES / h)), NET_LINES)
        small = cv2.resize(frame, size, interpolation=cv2.INTER_AREA) if (w, h) != size else frame
        pad_h, pad_w = (-size[1]) % NET_STRIDE, (-size[0]) % NET_STRIDE
        padded = cv2.copyMakeBorder(small, 0, pad_h, 0, pad_w, cv2.BORDER_REPLICATE)
        blob = (padded.astype(np.float32) / 255.0 - 0.5).transpose(2, 0, 1)[None]
        with self._lock:
            if self._net is None:
                self._net = cv2.dnn.readNetFromONNX(str(self.weights))
            self._net.setInput(np.ascontiguousarray(blob))
            out = self._net.forward()[0, 0, :size[1], :size[0]]
        return np.asarray(cv2.resize(out, (w, h), interpolation=cv2.INTER_LINEAR))

    def outlines(self, frame: np.ndarray) -> list[np.ndarray]:
        """The outer contours (OpenCV's, px) of the regions the net calls cube, largest first; none where it calls
        nothing cube."""
        mask = (self.logits(frame) > 0).astype(np.uint8)
        contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        return sorted(contours, key=cv2.contourArea, reverse=True)


SHIPPED = CubeSegmenter()
