#!/usr/bin/env python3
"""Throughput of drain3 (defaults) on the same inputs as `evidence-bench`, for the ratio the
evidence issue asks for. Needs `pip install drain3` (not a dependency of the product).

Usage: python3 tests/data/drain3_baseline.py [MB]   (default 2: drain3 is slow; MB/s is a rate)
Feeds each shared Loghub sample and each tests/data/*.log, repeated to MB megabytes, line by
line to TemplateMiner.add_log_message and prints MB/s per input.
"""
import glob
import os
import sys
import time

from drain3 import TemplateMiner
from drain3.template_miner_config import TemplateMinerConfig

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data", "loghub")
MB = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0


def rate(text):
    big = []
    size = 0
    while size < MB * 1e6:
        big.append(text)
        size += len(text.encode())
    lines = "".join(big).splitlines()
    cfg = TemplateMinerConfig()
    cfg.profiling_enabled = False
    miner = TemplateMiner(config=cfg)
    t0 = time.perf_counter()
    for line in lines:
        miner.add_log_message(line)
    return size / 1e6 / (time.perf_counter() - t0)


inputs = sorted(glob.glob(os.path.join(SHARED, "*", "*_2k.log"))) + sorted(
    glob.glob(os.path.join(HERE, "*.log")))
for path in inputs:
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    print(f"{os.path.basename(path):<24} {rate(text):8.2f} MB/s (drain3 defaults)")
