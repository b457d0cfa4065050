"""Symbol-level steps of the slim FlashInfer SM90 CUTLASS builds (``cutlass_slim_common.run_build``).

* :func:`write_stubs`: after the compile phase, give every still-undefined ``tensorrt_llm::`` symbol a throwing
  definition (vtables of unused runners, un-offered tiles);
* :func:`write_libcuda_stub`: a libcuda.so to link against on a host without a driver;
* :func:`verify`: the built module's dynamic-symbol picture; returns what stays unresolved (strong undefined
  symbols no library provides, missing TVM-FFI exports). Weak undefined symbols are allowed (bound to 0 at load).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

# Namespaces whose undefined symbols are stubbed (everything else must come from
# libcudart/libcuda/libstdc++/libc/libtvm_ffi).
STUB_PATTERNS = ("12tensorrt_llm",)
METHOD_NAMES = ("run_moe", "run_gemm_profile", "get_tactic_num", "run_moe_min_latency")


def _nm(paths, *flags):
    return subprocess.run(["nm", *flags, *map(str, paths)], capture_output=True, text=True).stdout


def undefined_dynamic(so) -> tuple[list, list]:
    """(strong, weak) undefined dynamic symbols of ``so`` (``nm -D --undefined-only``: ``U`` vs ``w``/``v``)."""
    strong, weak = [], []
    for line in _nm([so], "-D", "--undefined-only").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            (weak if parts[-2] in ("w", "v") else strong).append(parts[-1])
    return strong, weak


def _symbols(objs):
    defined, undefined = set(), set()
    for line in _nm(objs, "-g", "--no-sort").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3:
            defined.add(parts[2])
    return defined, undefined


def write_stubs(objs, stubs: Path, name: str, what: str):
    defined, undefined = _symbols(objs)
    missing = sorted(s for s in undefined - defined if any(p in s for p in STUB_PATTERNS))
    bad = [s for s in missing if s.startswith(("_ZTV", "_ZTI", "_ZTS", "_ZGV"))]
    if bad:
        raise RuntimeError(f"data symbols would need stubs (not supported): {bad[:5]}")
    lines = [
        f"// Generated for {name}: {len(missing)} symbols that only belong to dtype combos /",
        "// tiles not compiled in the slim build.",
        "#include <stdexcept>",
        "#include <string>",
        "__attribute__((noreturn, noinline)) static void slim_missing(const char* s) {",
        '  throw std::runtime_error(std::string("' + name + ': ") + s +',
        f'      " is not compiled in this slim build (only {what})");',
        "}",
    ]
    for i, s in enumerate(missing):
        lines.append(f'extern "C" void slim_stub_{i}() __asm__("{s}");')
        lines.append(f'extern "C" void slim_stub_{i}() {{ slim_missing("{s}"); }}')
    text = "\n".join(lines) + "\n"
    if not (stubs.exists() and stubs.read_text() == text):  # unchanged: ninja need not rebuild it
        stubs.write_text(text)
    return missing, sorted(undefined - defined - set(missing))


def write_libcuda_stub(out: Path, undefined_other):
    """libcuda.so (soname libcuda.so.1) for *linking only*; the GPU host uses its driver."""
    d = out / "linkstubs"
    d.mkdir(parents=True, exist_ok=True)
    syms = sorted(s for s in undefined_other if re.match(r"^cu[A-Z]", s))
    src = d / "libcuda_stub.c"
    src.write_text("".join(f"void {s}(void) {{}}\n" for s in syms) or "void cuStubDummy(void){}\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", str(src), "-o",
                    str(d / "libcuda.so")], check=True)
    return syms


def _find_lib(soname):
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    m = re.search(r"\s" + re.escape(soname) + r" \(libc6,x86-64\) => (\S+)", out)
    return m.group(1) if m else None


def verify(so: Path, exports=("__tvm_ffi_init",)) -> list:
    """Print the dynamic-symbol picture of ``so``; returns unresolved project/other symbols."""
    print(f"\n== verify {so} ({so.stat().st_size / 2**20:.1f} MiB)")
    und, weak = undefined_dynamic(so)
    proj = [u for u in und if any(p in u for p in STUB_PATTERNS)]
    print(f"undefined dynamic symbols: {len(und)}; tensorrt_llm ones: {len(proj)}")
    groups = {}
    for u in und:
        key = ("TVMFFI" if u.startswith("TVMFFI") or "tvm3ffi" in u else
               "cuda" if re.match(r"^(cuda|cu[A-Z]|__cuda)", u) else
               "c++/libc" if u.startswith(("_Z", "__cxa", "__gxx", "_Unwind", "__stack", "__errno"))
               or "@" not in u else "other")
        groups.setdefault(key, []).append(u)
    for k, v in sorted(groups.items()):
        print(f"  {k}: {len(v)}  e.g. {v[:4]}")
    provided = set()
    libs = [_find_lib(n) for n in ("libstdc++.so.6", "libc.so.6", "libm.so.6", "libgcc_s.so.1",
                                   "ld-linux-x86-64.so.2")]
    try:
        import tvm_ffi.libinfo as _li

        libs.append(_li.find_libtvm_ffi())
    except Exception as e:  # pragma: no cover
        print("  (could not locate libtvm_ffi:", e, ")")
    libs.append(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64/libcudart.so"))
    for lib in libs:
        if lib and os.path.exists(lib):
            provided |= {x.split("@")[0] for x in _nm([lib], "-D", "--defined-only").split()}
    residual = [u for u in und if u.split("@")[0] not in provided and not re.match(r"^cu[A-Z]", u)
                and not u.startswith(("__gmon_start__", "_ITM_", "__cxa_finalize"))]
    # weak undefined references (nm type w/v) may stay unresolved: the loader binds them to 0 (e.g. libstdc++'s
    # transactional-memory clones _ZGTtnam / _ZGTtdlPv, which a libstdc++ built without TM support lacks)
    unresolved_weak = [u for u in weak if u.split("@")[0] not in provided]
    if unresolved_weak:
        print(f"weak undefined, not provided (allowed: bound to 0 at load): {unresolved_weak}")
    print("undefined and not provided by libstdc++/libc/libm/libgcc_s/libtvm_ffi/libcudart "
          f"(cu* driver API excluded): {residual}")
    exported = set(_nm([so], "-D", "--defined-only").split())
    exp = sorted(s for s in exported if s.startswith("__tvm_ffi_"))
    print("TVM-FFI exports:", exp)
    lacking = [e for e in exports if f"__tvm_ffi_{e}" not in exported and e not in exported]
    if lacking:
        print("MISSING exports:", lacking)
    rd = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True).stdout
    print("NEEDED:", re.findall(r"NEEDED.*?\[(.*?)\]", rd))
    strings = subprocess.run(["strings", str(so)], capture_output=True, text=True).stdout
    for m in METHOD_NAMES:
        print(f"  method name '{m}' present: {m in strings}")
    return proj + residual + [f"export:{e}" for e in lacking]
