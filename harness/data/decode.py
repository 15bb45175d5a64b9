"""Decode one video file completely, once, the way a validator must: single-threaded, every packet in
its own try, libav's error log captured (H.264 conceals damage and decodes on without raising)."""

from __future__ import annotations

from dataclasses import dataclass, field

import av


@dataclass
class DecodedFile:
    path: str
    opened: bool = False
    width: int = 0
    height: int = 0
    codec: str = ""
    average_rate: float = 0.0
    pts_s: list[float] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    error_log: list[str] = field(default_factory=list)


def decode_file(path: str) -> DecodedFile:
    result = DecodedFile(path)
    av.logging.set_level(av.logging.ERROR)
    with av.logging.Capture() as logs:
        try:
            container = av.open(path)
        except (av.error.FFmpegError, OSError) as exc:
            result.exceptions.append(f"cannot open: {exc}")
            return result
        with container:
            result.opened = True
            stream = container.streams.video[0]
            stream.codec_context.thread_count = 1
            result.width, result.height = stream.codec_context.width, stream.codec_context.height
            result.codec = stream.codec_context.name
            result.average_rate = float(stream.average_rate or 0)
            base = stream.time_base
            for packet in container.demux(stream):
                try:
                    for frame in packet.decode():
                        result.pts_s.append(float(frame.pts * base))
                except av.error.FFmpegError as exc:
                    at = f" at {float(packet.pts * base):.3f} s" if packet.pts is not None else ""
                    result.exceptions.append(f"decode error{at}: {exc}")
    result.error_log = [f"{name}: {message.strip()}" for level, name, message in logs
                        if level <= av.logging.ERROR and "h264_mp4toannexb" not in message]
    return result
