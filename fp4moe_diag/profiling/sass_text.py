"""The helpers :mod:`.sass` and :mod:`.sass_over` share: nvdisasm text as instructions and loops, and the
``ASTSource`` of a kernel built as the launches specialise it.  Imports no triton at import time."""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

_INS = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_LABEL = re.compile(r"^\.(L_x_\d+):")
_BRANCH = re.compile(r"\bBRA\s+(?:`\()?\.?(L_x_\d+)")


def instructions(sass: str) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """``sass`` (nvdisasm text) as (address, instruction) pairs and each label's address."""
    ins: list[tuple[int, str]] = []
    label_at: dict[str, int] = {}
    pending: Optional[str] = None
    for ln in sass.splitlines():
        m = _LABEL.match(ln.strip())
        if m:
            pending = m.group(1)
            continue
        mi = _INS.match(ln)
        if mi:
            ins.append((int(mi.group(1), 16), mi.group(2)))
            if pending:
                label_at[pending], pending = ins[-1][0], None
    return ins, label_at


def loop_bodies(sass: str) -> list[list[str]]:
    """The instructions of each backward-branch loop of ``sass`` (nvdisasm text), in the order of their branches."""
    ins, label_at = instructions(sass)
    return [[t for a, t in ins if label_at[mb.group(1)] <= a <= addr] for addr, text in ins
            if (mb := _BRANCH.search(text)) and mb.group(1) in label_at and label_at[mb.group(1)] < addr]


def kernel_source(fn: Any, ptrs: dict[str, str], ints: Sequence[str], const: dict[str, Any]) -> Any:
    """Triton's ``ASTSource`` of ``fn`` with typed pointers ``ptrs`` (name -> ``*bf16`` ...), i32 ``ints`` and
    ``const``; pointers, strides and ``N`` 16-aligned, as the launches pass them."""
    from triton.compiler import ASTSource

    sig = ptrs | {i: "i32" for i in ints} | {c: "constexpr" for c in const}
    aligned = list(ptrs) + [i for i in ints if i.startswith("stride") or i == "N"]
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    return ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(c),): v for c, v in const.items()},
                     attrs=attrs)
