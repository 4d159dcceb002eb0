"""Reads a PNG (8-bit RGB or RGBA, any row filters) with the standard library and prints, for each named band of
the image, how many of its pixels are dark (< 128 in red): what tests/cli/plot_loss.sh checks for lettering.
Usage: png_text.py FILE NAME:X0:Y0:X1:Y1 ... -> "WIDTH HEIGHT" then "NAME COUNT" per band."""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), f"{path}: not 8-bit RGB or RGBA"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev, at = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp), 0
    for _ in range(height):
        kind, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


width, height, bpp, rows = read_png(sys.argv[1])
print(width, height)
for band in sys.argv[2:]:
    name, x0, y0, x1, y1 = band.split(":")
    print(name, sum(rows[y][x * bpp] < 128 for y in range(int(y0), int(y1)) for x in range(int(x0), int(x1))))
