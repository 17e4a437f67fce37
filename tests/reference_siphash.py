"""SipHash-2-4 written from its paper in plain integers, independent of the product's numpy and
compiled code, and the paper's test key: the reference the keyed-hash tests check against."""

__all__ = ["PAPER_KEY", "reference_siphash24"]


PAPER_KEY = (
    int.from_bytes(bytes(range(0, 8)), "little"),
    int.from_bytes(bytes(range(8, 16)), "little"),
)


def reference_siphash24(key, message: bytes) -> int:
    """A plain-integer SipHash-2-4, written from the paper, independent of the numpy code."""
    mask = (1 << 64) - 1

    def rotl(x, b):
        return ((x << b) | (x >> (64 - b))) & mask

    def sipround(v0, v1, v2, v3):
        v0 = (v0 + v1) & mask
        v1 = rotl(v1, 13) ^ v0
        v0 = rotl(v0, 32)
        v2 = (v2 + v3) & mask
        v3 = rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & mask
        v3 = rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & mask
        v1 = rotl(v1, 17) ^ v2
        v2 = rotl(v2, 32)
        return v0, v1, v2, v3

    k0, k1 = key
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    full = len(message) // 8 * 8
    for i in range(0, full, 8):
        m = int.from_bytes(message[i : i + 8], "little")
        v3 ^= m
        v0, v1, v2, v3 = sipround(*sipround(v0, v1, v2, v3))
        v0 ^= m
    last = int.from_bytes(message[full:], "little") | ((len(message) & 0xFF) << 56)
    v3 ^= last
    v0, v1, v2, v3 = sipround(*sipround(v0, v1, v2, v3))
    v0 ^= last
    v2 ^= 0xFF
    for _ in range(4):
        v0, v1, v2, v3 = sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3
