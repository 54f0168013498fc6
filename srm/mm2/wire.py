"""Kafka's primitive types read from a record's key or value: the fixed-width integers and
strings of every version, and the varints, compact strings and tagged fields of flexible ones."""

from __future__ import annotations

import struct

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
VERSION = 0  # the MM2 records' only version (``WireReader.version`` accepts no other)


class WireReader:
    """Kafka's primitive types read in order from one record's key or value; ValueError, naming the
    field, when the bytes do not hold them."""

    def __init__(self, data: bytes | None, what: str) -> None:
        if data is None:
            raise ValueError(f"{what} is null")
        self._data = data
        self._pos = 0
        self._what = what

    def _need(self, n: int, field: str) -> int:
        """The position of ``field``'s ``n`` bytes, which the reader moves past."""
        at = self._pos
        if at + n > len(self._data):
            raise ValueError(
                f"{self._what} too short: field {field} needs {n} bytes at byte {at}, "
                f"only {len(self._data) - at} left (total {len(self._data)} bytes)"
            )
        self._pos = at + n
        return at

    def int8(self, field: str) -> int:
        return int(_INT8.unpack_from(self._data, self._need(1, field))[0])

    def int16(self, field: str) -> int:
        return int(_INT16.unpack_from(self._data, self._need(2, field))[0])

    def int32(self, field: str) -> int:
        return int(_INT32.unpack_from(self._data, self._need(4, field))[0])

    def int64(self, field: str) -> int:
        return int(_INT64.unpack_from(self._data, self._need(8, field))[0])

    def string(self, field: str) -> str:
        return self._text(self.int16(field + " length"), field)

    def compact_string(self, field: str) -> str:
        return self._text(self.uvarint(field + " length") - 1, field)

    def _text(self, length: int, field: str) -> str:
        if length < 0:
            raise ValueError(f"{self._what}: field {field} is a null string (length {length})")
        at = self._need(length, field)
        try:
            return self._data[at : self._pos].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{self._what}: field {field} is not valid UTF-8") from exc

    def uvarint(self, field: str) -> int:
        """An unsigned varint (the lengths and tags of Kafka's flexible versions)."""
        number = 0
        for shift in range(0, 35, 7):
            byte = self._data[self._need(1, field)]
            number |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return number
        raise ValueError(f"{self._what}: field {field} is a varint longer than 5 bytes")

    def skip_tagged_fields(self, field: str) -> None:
        """Past the tagged fields of a flexible version's structure (none is read)."""
        for _ in range(self.uvarint(field + " count")):
            self.uvarint(field + " tag")
            self._need(self.uvarint(field + " size"), field)

    def more(self) -> bool:
        """Bytes are left: an optional trailing field is present."""
        return self._pos < len(self._data)

    def version(self) -> None:
        version = self.int16("version")
        if version != VERSION:
            raise ValueError(f"{self._what}: unsupported version {version} (this reader knows {VERSION})")
