"""Session 10 probe: rewrite _PS_ASM's shifts as multiplies (mul.lo: left, mul.hi: right) so that ptxas can issue
them on the FMA pipe (IMAD / IMAD.HI) instead of the ALU pipe (SHF); applied to a copy of the package on the GPU
machine only (run B of the A/B in s10call4.sh)."""
import sys
p = sys.argv[1]
s = open(p).read()
rep = [("shl.b32 u, $4, 3;", "mul.lo.u32 u, $4, 8;"), ("shl.b32 u, $4, 6;", "mul.lo.u32 u, $4, 64;"),
       ("shl.b32 u, $4, 4;", "mul.lo.u32 u, $4, 16;"), ("shr.b32 v, $4, 6;", "mul.hi.u32 v, $4, 0x04000000;"),
       ("shr.b32 q, $4, 4;", "mul.hi.u32 q, $4, 0x10000000;")]
for a, b in rep:
    assert s.count(a) == 1, a
    s = s.replace(a, b)
open(p, "w").write(s)
print("mulshift applied to", p)
