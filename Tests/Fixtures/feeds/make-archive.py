#!/usr/bin/env python3
"""Builds the archives the feed tests serve (Python's gzip and zipfile, nothing hand-made).

    make-archive.py gzip SRC DST                 gzip SRC into DST
    make-archive.py zip DST NAME=SRC...          a zip archive (deflate) with those members
    make-archive.py bomb DST NAME BYTES [lie]    a member of BYTES zero bytes; with "lie" the
                                                 headers claim it holds 100 bytes
    make-archive.py truncate SRC DST KEEP        the first KEEP bytes of SRC
"""
import gzip
import struct
import sys
import zipfile


def make_zip(dst, members):
    with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, src in members:
            with open(src, "rb") as f:
                # ZipInfo keeps the name exactly as given (no normalization of .. or /).
                info = zipfile.ZipInfo(name)
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, f.read())


def make_bomb(dst, name, size, lie):
    with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as z:
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=False) as f:
            chunk = b"\0" * (1 << 20)
            left = size
            while left > 0:
                f.write(chunk[:min(left, len(chunk))])
                left -= min(left, len(chunk))
    if lie:
        data = bytearray(open(dst, "rb").read())
        # Local header: uncompressed size at offset 22; central directory entry: at 24.
        struct.pack_into("<I", data, 22, 100)
        central = data.rfind(b"PK\x01\x02")
        struct.pack_into("<I", data, central + 24, 100)
        open(dst, "wb").write(bytes(data))


def main():
    command = sys.argv[1]
    if command == "gzip":
        with open(sys.argv[2], "rb") as f, gzip.open(sys.argv[3], "wb") as g:
            g.write(f.read())
    elif command == "zip":
        make_zip(sys.argv[2], [arg.split("=", 1) for arg in sys.argv[3:]])
    elif command == "bomb":
        make_bomb(sys.argv[2], sys.argv[3], int(sys.argv[4]), len(sys.argv) > 5 and sys.argv[5] == "lie")
    elif command == "truncate":
        with open(sys.argv[2], "rb") as f:
            data = f.read()
        with open(sys.argv[3], "wb") as f:
            f.write(data[:int(sys.argv[4])])
    else:
        sys.exit("unknown command " + command)


if __name__ == "__main__":
    main()
