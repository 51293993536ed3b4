#!/usr/bin/env python3
"""check_hf_export.py - reads a `vescale-ckpt export --weights-only` directory the
way Hugging Face tooling does: through model.safetensors.index.json (or
model.safetensors alone), each file with the real `safetensors` package.

    python3 tests/check_hf_export.py DIR [--keys=K1,K2,...] [--files=N]
                                         [--max-shard-size=BYTES] [NAME=EXPECTED.bin ...]

Checks: the index is {"metadata": {"total_size": int}, "weight_map": {...}}
and its text is what transformers writes (json.dumps(index, indent=2,
sort_keys=True) + newline); its files are model-0000k-of-0000N.safetensors for
k = 1..N and nothing else named model*.safetensors is there (one file:
model.safetensors and no index); every file opens with safetensors.safe_open
(framework="numpy") and, without BF16, safetensors.numpy.load_file, has
__metadata__ {"format": "pt"}, and holds exactly the tensors the weight_map
gives it; every tensor is in exactly one file;
total_size is the sum of the tensors' bytes; --keys: the tensor names are
exactly these (so no optimizer state or blob); --files: N files;
--max-shard-size: each file's tensor bytes are at most BYTES unless it holds
one tensor; NAME=PATH: tensor NAME has exactly the bytes of PATH (row-major,
little-endian; BF16 read as uint16 through the file's offsets, numpy has no
bfloat16). Prints "ok ..." / "not ok ..." lines; exit 0 when all hold, 1
otherwise, 77 when python3 lacks safetensors or numpy.
"""
import json
import os
import re
import sys

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file
except ImportError as e:  # the caller prints a skip line
    print("skip: python3 lacks a package: %s" % e)
    sys.exit(77)

from check_safetensors import NP, raw_tensor  # the same reading as the one-file export's check

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I32": 4, "I64": 8, "U8": 1}


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    d = argv[1]
    want_keys, want_files, max_shard, expect = None, None, None, {}
    for a in argv[2:]:
        if a.startswith("--keys="):
            want_keys = sorted(k for k in a.split("=", 1)[1].split(",") if k)
        elif a.startswith("--files="):
            want_files = int(a.split("=", 1)[1])
        elif a.startswith("--max-shard-size="):
            max_shard = int(a.split("=", 1)[1])
        else:
            k, p = a.split("=", 1)
            expect[k] = p
    bad = []
    ipath = os.path.join(d, INDEX)
    if os.path.exists(ipath):
        text = open(ipath, encoding="utf-8").read()
        ix = json.loads(text)
        if sorted(ix) != ["metadata", "weight_map"] or not isinstance(ix["metadata"].get("total_size"), int):
            bad.append("%s: keys %s, metadata %s" % (ipath, sorted(ix), ix.get("metadata")))
        if text != json.dumps(ix, indent=2, sort_keys=True) + "\n":
            bad.append("%s is not laid out as transformers writes it (indent 2, sorted keys, newline)" % ipath)
        wmap, total = ix["weight_map"], ix["metadata"].get("total_size")
        files = sorted(set(wmap.values()))
        n = len(files)
        if n < 2 or files != ["model-%05d-of-%05d.safetensors" % (k, n) for k in range(1, n + 1)]:
            bad.append("%s: files %s, expected model-0000k-of-%05d.safetensors for k = 1..%d" % (ipath, files, n, n))
    else:
        files, wmap, total = [SINGLE], None, None
    present = sorted(f for f in os.listdir(d) if re.match(r"model.*\.safetensors$", f))
    if present != files:
        bad.append("%s holds %s, the index names %s" % (d, present, files))
    if want_files is not None and len(files) != want_files:
        bad.append("%d files, expected %d" % (len(files), want_files))
    where, nbytes = {}, 0
    for fn in files:
        path = os.path.join(d, fn)
        if not os.path.exists(path):
            continue
        with safe_open(path, framework="numpy") as f:
            if f.metadata() != {"format": "pt"}:
                bad.append("%s: __metadata__ %s, transformers expects {'format': 'pt'}" % (path, f.metadata()))
            fbytes, keys, dts = 0, list(f.keys()), set()
            for k in keys:
                where.setdefault(k, []).append(fn)
                if wmap is not None and wmap.get(k) != fn:
                    bad.append("%s holds %s, the weight_map says %s" % (fn, k, wmap.get(k)))
                sl = f.get_slice(k)
                dt, shape = sl.get_dtype(), list(sl.get_shape())
                dts.add(dt)
                b = SIZE[dt] * int(np.prod(shape, dtype=np.int64))
                fbytes += b
                if k not in expect:
                    continue
                arr = np.frombuffer(raw_tensor(path, k), dtype=np.uint16).reshape(shape) if dt == "BF16" else f.get_tensor(k)
                if arr.dtype != np.dtype(NP[dt]) or list(arr.shape) != shape:
                    bad.append("%s: %s read as %s %s, header says %s %s" % (fn, k, arr.dtype, list(arr.shape), dt, shape))
                    continue
                got = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
                want = open(expect[k], "rb").read()
                if got != want:
                    bad.append("%s: %s (%s %s) differs from %s" % (fn, k, dt, shape, expect[k]))
                else:
                    print("ok %s: %s %s %s equals %s" % (fn, k, dt, shape, expect[k]))
            nbytes += fbytes
        if "BF16" not in dts:  # (numpy has no bfloat16: load_file refuses such a file)
            loaded = load_file(path)
            if sorted(loaded) != sorted(keys):
                bad.append("%s: safetensors.numpy.load_file gives %s, safe_open %s" % (fn, sorted(loaded), sorted(keys)))
            if max_shard is not None and fbytes > max_shard and len(keys) != 1:
                bad.append("%s: %d bytes of tensors in %d tensors, over --max-shard-size %d" % (fn, fbytes, len(keys), max_shard))
    for k, fs in sorted(where.items()):
        if len(fs) != 1:
            bad.append("%s is in %s" % (k, fs))
    if wmap is not None and sorted(wmap) != sorted(where):
        bad.append("the weight_map names %s, the files hold %s" % (sorted(wmap), sorted(where)))
    if total is not None and total != nbytes:
        bad.append("total_size %s, the tensors hold %d bytes" % (total, nbytes))
    if want_keys is not None and sorted(where) != want_keys:
        bad.append("tensors %s, expected %s" % (sorted(where), want_keys))
    for k in expect:
        if k not in where:
            bad.append("no tensor %r" % k)
    for b in bad:
        print("not ok %s: %s" % (d, b))
    if not bad:
        print("ok %s: %d tensors in %s, %d bytes" % (d, len(where), ", ".join(files), nbytes))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
