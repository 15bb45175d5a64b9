"""Feetech protocol 0 framing: `FF FF ID LEN INSTR PARAMS CHK`, little-endian words."""

from __future__ import annotations

from dataclasses import dataclass

BROADCAST_ID = 0xFE
PING, READ, WRITE, REG_WRITE, ACTION, SYNC_READ, SYNC_WRITE = 0x01, 0x02, 0x03, 0x04, 0x05, 0x82, 0x83

# Baud_Rate register values (address 6), per Feetech's memory table.
BAUD_BY_INDEX = {0: 1_000_000, 1: 500_000, 2: 250_000, 3: 128_000, 4: 115_200, 5: 76_800, 6: 57_600, 7: 38_400}
INDEX_BY_BAUD = {baud: index for index, baud in BAUD_BY_INDEX.items()}

# Control table addresses used here (STS/SMS series, as in LeRobot's table).
ADDR_FIRMWARE_MAJOR, ADDR_FIRMWARE_MINOR, ADDR_MODEL, ADDR_ID, ADDR_BAUD = 0, 1, 3, 5, 6
ADDR_RESPONSE_LEVEL, ADDR_MAX_TORQUE = 8, 16
EEPROM_END = 40  # addresses below this live in EEPROM
ADDR_TORQUE_ENABLE, ADDR_GOAL_POSITION, ADDR_TORQUE_LIMIT, ADDR_LOCK = 40, 42, 48, 55
ADDR_PRESENT_POSITION, ADDR_PRESENT_VELOCITY, ADDR_STATUS, ADDR_MOVING = 56, 58, 65, 66
STS3215_MODEL = 777


def checksum(body: bytes) -> int:
    return (~sum(body)) & 0xFF


def instruction_packet(servo_id: int, instruction: int, params: bytes = b"") -> bytes:
    body = bytes([servo_id, len(params) + 2, instruction]) + params
    return b"\xff\xff" + body + bytes([checksum(body)])


def status_packet(servo_id: int, error: int = 0, data: bytes = b"") -> bytes:
    body = bytes([servo_id, len(data) + 2, error]) + data
    return b"\xff\xff" + body + bytes([checksum(body)])


@dataclass(frozen=True)
class Packet:
    servo_id: int
    code: int          # instruction (requests) or error byte (status)
    params: bytes


def take_packet(buffer: bytearray) -> Packet | None:
    """Remove and return the first complete, valid packet; drop garbage before it.

    Invalid checksums are dropped byte by byte, resyncing on the next `FF FF`, as the
    SDK does when it reads a corrupted reply.
    """
    while True:
        start = buffer.find(b"\xff\xff")
        if start < 0:
            del buffer[: max(0, len(buffer) - 1)]
            return None
        del buffer[:start]
        if len(buffer) < 4:
            return None
        length = buffer[3]
        if length < 2:
            del buffer[:2]
            continue
        if len(buffer) < 4 + length:
            return None
        frame = bytes(buffer[: 4 + length])
        if checksum(frame[2:-1]) != frame[-1]:
            del buffer[:2]
            continue
        del buffer[: 4 + length]
        return Packet(frame[2], frame[4], frame[5:-1])
