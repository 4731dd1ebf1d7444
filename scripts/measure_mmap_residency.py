#!/usr/bin/env python3
"""Why the weight cache reads into buffers it owns instead of mapping the file.

Maps MODEL (warm in the page cache) and compares the pages a reader touches
with how much the process's RSS grows: the kernel maps more than is touched
(fault-around, large page-cache folios), so a mapping's residency is not what
a cache built on madvise would count.

    python3 scripts/measure_mmap_residency.py MODEL.tmai   # a model of >= 400 MB
"""
import mmap
import sys

PAGE = 4096


def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def main(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):  # warm the page cache
            pass
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    s = 0
    r0 = rss()
    for i in range(100):  # one byte in each of 100 blocks 1 MiB apart
        s += m[10_000_000 + i * (1 << 20)]
    grown = rss() - r0
    print(f"sparse: touched 100 pages (400 KiB), RSS grew {grown // 1024} KiB")
    r0 = rss()
    touched = 0
    for i in range(50):  # 50 row slices of 1,000,000 bytes, 3 MB apart, every page read
        start = 200_000_000 + i * 3_000_000 + 1234
        first, last = start // PAGE, (start + 1_000_000 - 1) // PAGE
        for p in range(first, last + 1):
            s += m[max(start, p * PAGE)]
        touched += last - first + 1
    grown = rss() - r0
    print(f"blocks: touched {touched} pages ({touched * 4} KiB), RSS grew {grown // 1024} KiB "
          f"({100.0 * (grown / (touched * PAGE) - 1):+.0f}%)")
    return 0 if s >= 0 else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
