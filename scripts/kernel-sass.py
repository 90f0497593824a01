#!/usr/bin/env python3
"""Static SASS of Muser's CUDA kernels without a GPU (docs/cuda.md cites its counts).

Concatenates kernel sources the way `compile.rs` does, compiles them to PTX with NVRTC (from
`scripts/fetch-nvrtc.sh`) under the strict options, assembles with `ptxas` for sm_90a and
disassembles with `nvdisasm` (both from NVIDIA's PyPI wheels, SHA-256 pinned, cached beside
NVRTC), then prints per kernel: registers, spills, instructions in all, and the instruction mix
of the super-block loop (from the first `BAR` to the last `DEPBAR.LE`: the static loop body,
rarely-taken branches such as the chain fold included) and of its step up to the last MMA.

  scripts/kernel-sass.py --sources common.cuh formats_h16.cuh mmt_h16.cu \\
      --define MMT_WG=1 MMT_MINB=1 MMT_STAGES=3 --kernels mmt_q4h_s4 mmt_q6h_s4

Kernel sources are names under crates/muser-cuda/src/kernels/. Prints nothing it did not count.
"""
import argparse
import collections
import ctypes
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "crates", "muser-cuda", "src", "kernels")
CACHE = os.path.join(os.environ.get("MUSER_CACHE", os.path.expanduser("~/.cache/muser")), "sass-tools")
WHEELS = {
    # package, version, wheel file, SHA-256, member wanted
    "ptxas": ("nvidia-cuda-nvcc", "13.0.88",
              "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
              "56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03",
              "nvidia/cu13/bin/ptxas"),
    "nvdisasm": ("nvidia-cuda-nvdisasm", "13.5.37",
                 "nvidia_cuda_nvdisasm-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
                 "d3fdbdd49fa53e2e4aacd3db8259d052bd2b049ececdcb69e92e083c6728e7ca",
                 "nvidia/cu13/bin/nvdisasm"),
}
STRICT = ["--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false", "-std=c++17",
          "-DMUSER_MATH_STRICT", "--gpu-architecture=sm_90a"]


def tool(name):
    pkg, ver, wheel, sha, member = WHEELS[name]
    out = os.path.join(CACHE, member)
    if os.path.exists(out):
        return out
    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, wheel)
    if not os.path.exists(path):
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--only-binary=:all:", "--platform", "manylinux2014_x86_64",
                        "--python-version", "3.12", "-d", CACHE, f"{pkg}=={ver}"], check=True)
    got = hashlib.sha256(open(path, "rb").read()).hexdigest()
    if got != sha:
        sys.exit(f"refusing: {path} has SHA-256 {got}, expected {sha}")
    with zipfile.ZipFile(path) as z:
        z.extract(member, CACHE)
    os.chmod(out, 0o755)
    return out


def ptx(src, opts):
    libdir = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch-nvrtc.sh")],
                            check=True, capture_output=True, text=True).stdout.strip()
    ctypes.CDLL(os.path.join(libdir, "libnvrtc-builtins.so.13.0"), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(os.path.join(libdir, "libnvrtc.so.13"))
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"kernel.cu", 0, None, None) != 0:
        sys.exit("nvrtcCreateProgram failed")
    args = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), args)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        sys.exit(log.value.decode())
    lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetPTX(prog, buf)
    return buf.value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sources", nargs="+", required=True)
    ap.add_argument("--define", nargs="*", default=[])
    ap.add_argument("--kernels", nargs="+", required=True)
    ap.add_argument("--dir", default=KERNELS, help="kernel sources folder (e.g. an old commit's, "
                    "from `git archive`)")
    ap.add_argument("--dump", help="also write each kernel's SASS to DIR/KERNEL.sass")
    a = ap.parse_args()
    src = "\n".join(open(os.path.join(a.dir, s)).read() for s in a.sources).encode()
    opts = STRICT + [f"-D{d}" for d in a.define]
    with tempfile.TemporaryDirectory() as d:
        p, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        open(p, "wb").write(ptx(src, opts))
        info = subprocess.run([tool("ptxas"), "-arch=sm_90a", "-v", p, "-o", cubin],
                              check=True, capture_output=True, text=True).stderr
        sass = subprocess.run([tool("nvdisasm"), "-c", cubin], check=True, capture_output=True,
                              text=True).stdout
    # ptxas's performance notes (e.g. wgmma serialized: every HGMMA then waits for the last).
    for line in info.splitlines():
        if "Performance" in line or "wgmma" in line:
            print("ptxas:", line.strip())
    props, cur = {}, None
    for line in info.splitlines():
        m = re.search(r"Function properties for (\w+)", line)
        if m:
            cur = m.group(1)
        m = re.search(r"(\d+) bytes spill stores", line)
        if m and cur:
            props.setdefault(cur, {})["spill"] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            props.setdefault(cur, {})["regs"] = int(m.group(1))
    for k in a.kernels:
        i = sass.find(f".text.{k}:")
        if i < 0:
            sys.exit(f"no kernel {k} in the module")
        j = sass.find(".section", i)
        ops = []
        for line in sass[i:j if j > 0 else None].splitlines():
            m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z0-9]+)([.A-Z0-9_]*)", line)
            if m:
                ops.append(m.group(2) + (m.group(3) if m.group(2) == "DEPBAR" else ""))
        if a.dump:
            os.makedirs(a.dump, exist_ok=True)
            open(os.path.join(a.dump, f"{k}.sass"), "w").write(sass[i:j if j > 0 else None])
        pr = props.get(k, {})
        print(f"{k}: {pr.get('regs')} registers, {pr.get('spill')} bytes spilled, "
              f"{len(ops)} instructions")
        if "BAR" in ops and "DEPBAR.LE" in ops:
            b, e = ops.index("BAR"), len(ops) - 1 - ops[::-1].index("DEPBAR.LE")
            mix = collections.Counter(ops[b:e])
            print(f"  loop (first BAR .. last DEPBAR.LE): {e - b} instructions: "
                  + " ".join(f"{op}:{n}" for op, n in mix.most_common(14)))
            h = len(ops) - 1 - ops[::-1].index("HMMA") if "HMMA" in ops else b
            mix = collections.Counter(ops[b:h + 1])
            print(f"  step (first BAR .. last HMMA, the chain fold left out): {h + 1 - b} "
                  f"instructions, HMMA {mix['HMMA']}, LDS {mix['LDS']}, HFMA2 {mix['HFMA2']}")


if __name__ == "__main__":
    main()
