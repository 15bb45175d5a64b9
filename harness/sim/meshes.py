"""Decimated visual meshes: the same arm, about a quarter of the triangles, four times fewer ms per frame.

CPU rendering (Mesa llvmpipe) is vertex-bound: the Menagerie SO-101 draws ~400k
triangles per view. Visual-only meshes are simplified once, cached outside the
repository, and fed to MuJoCo as user vertices; collision meshes stay exact so
physics does not change.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

KEEP_FRACTION = 0.27  # decimation plateaus near here; lower needs primitives, not simplification
CACHE_VERSION = 1
CLUSTER_VERSION = 1


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "harness" / "meshes"


def read_stl(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Binary STL to (unique vertices, faces)."""
    data = path.read_bytes()
    count = int(np.frombuffer(data, dtype="<u4", count=1, offset=80)[0])
    record = np.dtype([("normal", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])
    tris = np.frombuffer(data, dtype=record, count=count, offset=84)["v"].reshape(-1, 3)
    vertices, inverse = np.unique(tris, axis=0, return_inverse=True)
    return vertices.astype(np.float64), inverse.reshape(-1, 3).astype(np.int32)


def decimated(path: Path, keep: float = KEEP_FRACTION) -> tuple[np.ndarray, np.ndarray]:
    """Simplified (vertices, faces) for one STL, computed once and cached by content hash."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    cached = cache_dir() / f"{path.stem}-{digest}-{keep:.2f}-v{CACHE_VERSION}.npz"
    if cached.is_file():
        with np.load(cached) as npz:
            return npz["vertices"], npz["faces"]
    import fast_simplification

    vertices, faces = read_stl(path)
    if len(faces) > 2000:
        vertices, faces = fast_simplification.simplify(vertices, faces, target_reduction=1.0 - keep)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp.npz")
    np.savez(tmp, vertices=vertices, faces=faces)
    tmp.replace(cached)
    return vertices, faces


def clustered(path: Path, cell_m: float) -> tuple[np.ndarray, np.ndarray]:
    """(vertices, faces) of one STL with its vertices merged on a `cell_m` grid: the coarse level of detail.

    Edge-collapse simplification plateaus near a quarter of these meshes' triangles (their many small
    parts and borders); merging every vertex in a grid cell into their mean does not, and keeps the
    silhouette to within a cell. Faces that collapse are dropped; the rest keep their winding."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    cached = cache_dir() / f"{path.stem}-{digest}-cell{cell_m * 1000:.2f}mm-c{CLUSTER_VERSION}.npz"
    if cached.is_file():
        with np.load(cached) as npz:
            return npz["vertices"], npz["faces"]
    vertices, faces = read_stl(path)
    cells = np.floor(vertices / cell_m).astype(np.int64)
    _, index = np.unique(cells, axis=0, return_inverse=True)
    index = index.ravel()
    merged = np.zeros((int(index.max()) + 1, 3))
    np.add.at(merged, index, vertices)
    merged /= np.bincount(index)[:, None]
    new_faces = index[faces]
    keep = ((new_faces[:, 0] != new_faces[:, 1]) & (new_faces[:, 1] != new_faces[:, 2])
            & (new_faces[:, 0] != new_faces[:, 2]))
    new_faces = new_faces[keep]
    _, first = np.unique(np.sort(new_faces, axis=1), axis=0, return_index=True)
    new_faces = new_faces[np.sort(first)].astype(np.int32)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp.npz")
    np.savez(tmp, vertices=merged, faces=new_faces)
    tmp.replace(cached)
    return merged, new_faces
