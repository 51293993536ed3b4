#!/usr/bin/env python3
"""check_safetensors.py - opens safetensors files with the real `safetensors`
package and numpy, and compares tensors with expected bytes.

    python3 tests/check_safetensors.py FILE [--keys K1,K2,...] [KEY=EXPECTED.bin ...]

FILE is opened with safetensors.safe_open(framework="numpy") (the package's own
header checks); --keys: the file's tensor names are exactly these; KEY=PATH: the
tensor KEY, read through numpy (dtype, shape), has exactly the bytes of PATH
(row-major, little-endian). numpy has no bfloat16, so a BF16 tensor is read as
uint16 through the offsets the package reports. Prints "ok ..." lines; exit 0
when all match, 1 on a difference, 77 when python3 lacks safetensors or numpy.
"""
import json
import struct
import sys

try:
    import numpy as np
    from safetensors import safe_open
except ImportError as e:  # the caller prints a skip line
    print("skip: python3 lacks a package: %s" % e)
    sys.exit(77)

NP = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I32": np.int32,
      "I64": np.int64, "U8": np.uint8, "BF16": np.uint16}


def raw_tensor(path, key):
    """The bytes of `key` by the file's own header (for BF16)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        b, e = h[key]["data_offsets"]
        f.seek(8 + n + b)
        return f.read(e - b)


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    path = argv[1]
    want_keys = None
    checks = []
    for a in argv[2:]:
        if a.startswith("--keys"):
            want_keys = [k for k in a.split("=", 1)[1].split(",") if k]
        else:
            k, p = a.split("=", 1)
            checks.append((k, p))
    bad = 0
    with safe_open(path, framework="numpy") as f:
        keys = list(f.keys())
        if want_keys is not None and sorted(keys) != sorted(want_keys):
            print("not ok %s: keys %s, expected %s" % (path, sorted(keys), sorted(want_keys)))
            bad += 1
        for k, p in checks:
            if k not in keys:
                print("not ok %s: no tensor %r" % (path, k))
                bad += 1
                continue
            sl = f.get_slice(k)
            dt, shape = sl.get_dtype(), list(sl.get_shape())
            if dt == "BF16":
                arr = np.frombuffer(raw_tensor(path, k), dtype=np.uint16).reshape(shape)
            else:
                arr = f.get_tensor(k)
            if arr.dtype != np.dtype(NP[dt]) or list(arr.shape) != shape:
                print("not ok %s: %s read as %s %s, header says %s %s" % (path, k, arr.dtype, list(arr.shape), dt, shape))
                bad += 1
                continue
            want = open(p, "rb").read()
            got = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
            if got != want:
                n = min(len(got), len(want))
                first = next((i for i in range(n) if got[i] != want[i]), n)
                print("not ok %s: %s (%s %s) differs from %s: %d vs %d bytes, first difference at byte %d"
                      % (path, k, dt, shape, p, len(got), len(want), first))
                bad += 1
            else:
                print("ok %s: %s %s %s equals %s" % (path, k, dt, shape, p))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
