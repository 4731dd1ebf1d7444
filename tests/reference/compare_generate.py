#!/usr/bin/env python3
"""Compare tinyai-generate's greedy output with the float64 reference.

Usage (run with Debian's /usr/bin/python3, which has python3-numpy):
    /usr/bin/python3 compare_generate.py --generate build/tinyai-generate \
        --model stories260K.tmai \
        --checkpoint ../shared/models/stories260K/stories260K.bin \
        --tokenizer ../shared/models/stories260K/tok512.bin \
        --prompts tests/reference/prompts.txt [--steps 256] [--timeout 120] \
        [--emulator "qemu-aarch64 -L /usr/aarch64-linux-gnu"]

For each prompt of the file (one per line, taken byte for byte; lines starting
with '#' and empty lines are skipped) and for the empty prompt, runs
    [EMULATOR] tinyai-generate -m MODEL -p PROMPT --steps STEPS
(EMULATOR runs a cross-built tinyai-generate) and compares its stdout (stderr
is ignored: it carries stats) byte for byte with llama2c_ref.py's output.
Prints the first differing offset and both excerpts on a mismatch. The last
line is "N passed, M failed".

Exit status: 0 all passed; 1 some failed; 2 usage error (missing
tinyai-generate, model or prompts file, numpy not importable); 77 skipped
because the llama2.c checkpoint or tokenizer is absent (CTest's
SKIP_RETURN_CODE convention), or 1 then when the environment sets
TINYAI_REQUIRE_SHARED (to anything but 0: the shared data is required).
"""

import argparse
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_SKIP = 77
EXCERPT = 40  # bytes shown on each side of the first difference


def read_prompts(path):
    """Prompts as bytes, in file order."""
    with open(path, "rb") as f:
        data = f.read()
    prompts = []
    for line in data.split(b"\n"):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line or line.startswith(b"#"):
            continue
        prompts.append(line)
    return prompts


def show(b):
    """Readable one-line form of some bytes."""
    return repr(bytes(b))[1:]


def first_difference(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n if len(a) != len(b) else -1


def report_mismatch(expected, actual):
    off = first_difference(expected, actual)
    lo = max(0, off - EXCERPT)
    print("    first difference at byte %d (expected %d bytes, got %d)"
          % (off, len(expected), len(actual)))
    print("    expected: ...%s..." % show(expected[lo:off + EXCERPT]))
    print("    actual:   ...%s..." % show(actual[lo:off + EXCERPT]))


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Compare tinyai-generate with the llama2.c float64 reference.")
    ap.add_argument("--generate", required=True, help="path to tinyai-generate")
    ap.add_argument("--model", required=True, help=".tmai model for tinyai-generate")
    ap.add_argument("--checkpoint", required=True, help="llama2.c .bin for the reference")
    ap.add_argument("--tokenizer", required=True, help="llama2.c tokenizer .bin")
    ap.add_argument("--prompts", required=True, help="prompts file")
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds allowed per tinyai-generate run (default 120)")
    ap.add_argument("--emulator", default="",
                    help="command (words separated by spaces) that runs a cross-built "
                         "tinyai-generate, e.g. 'qemu-arm -L /usr/arm-linux-gnueabihf'")
    args = ap.parse_args(argv)

    for path in (args.checkpoint, args.tokenizer):
        if not os.path.isfile(path):
            if os.environ.get("TINYAI_REQUIRE_SHARED", "") not in ("", "0"):
                print("TINYAI_REQUIRE_SHARED is set and %s is missing (the stories260K model, "
                      "from ../shared)" % path)
                return EXIT_FAIL
            print("SKIP: %s not found (the stories260K model is not available); "
                  "TINYAI_REQUIRE_SHARED=1 fails instead" % path)
            return EXIT_SKIP
    for what, path in (("tinyai-generate", args.generate), ("model", args.model),
                       ("prompts file", args.prompts)):
        if not os.path.isfile(path):
            print("error: %s not found: %s" % (what, path))
            return EXIT_USAGE
    try:
        sys.dont_write_bytecode = True  # keep the source tree clean
        sys.path.insert(0, HERE)
        import llama2c_ref
    except ImportError as e:
        print("error: cannot import the reference (%s); it needs numpy: "
              "run with /usr/bin/python3 after apt-get install python3-numpy" % e)
        return EXIT_USAGE

    prompts = read_prompts(args.prompts)
    prompts.append(b"")  # the empty prompt: BOS only, no dummy-prefix space
    model, tok = llama2c_ref.load(args.checkpoint, args.tokenizer)

    passed = failed = 0
    t_ref = t_gen = 0.0
    for i, prompt in enumerate(prompts, 1):
        label = "[%d/%d] %s" % (i, len(prompts), show(prompt) if prompt else "(empty prompt)")
        t0 = time.monotonic()
        expected, _ = llama2c_ref.generate(model, tok, prompt, args.steps)
        t1 = time.monotonic()
        cmd = [os.fsencode(w) for w in shlex.split(args.emulator)]
        cmd += [os.fsencode(args.generate), b"-m", os.fsencode(args.model),
                b"-p", prompt, b"--steps", str(args.steps).encode()]
        try:
            res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, timeout=args.timeout)
            actual, err, rc = res.stdout, res.stderr, res.returncode
        except subprocess.TimeoutExpired as e:
            actual, err, rc = e.stdout or b"", e.stderr or b"", "timeout"
        except OSError as e:
            actual, err, rc = b"", str(e).encode(), "cannot run"
        t_gen += time.monotonic() - t1
        t_ref += t1 - t0
        if rc == 0 and actual == expected:
            passed += 1
            print("PASS %s" % label)
            continue
        failed += 1
        print("FAIL %s" % label)
        if rc != 0:
            print("    tinyai-generate exit status: %s" % rc)
            tail = err.decode("utf-8", "replace").strip().splitlines()[-5:]
            for line in tail:
                print("    stderr: %s" % line)
        if actual != expected:
            report_mismatch(expected, actual)
    print("time: reference %.2f s, tinyai-generate %.2f s" % (t_ref, t_gen))
    print("%d passed, %d failed" % (passed, failed))
    return EXIT_FAIL if failed else 0


if __name__ == "__main__":
    sys.exit(main())
