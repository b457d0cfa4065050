"""One fused-MoE call of one tactic, run 3 times, for ncu's source-level profile (session 10 investigation)."""
import sys, torch
from fp4moe_diag.backends import get_backend
from fp4moe_diag.problem.inputs import build_inputs
from fp4moe_diag.problem.shapes import load_vllm_cases
backend, model, ep, T, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
case = load_vllm_cases(models=[model], ep_sizes=[ep], token_counts=[T])[0]
dev = torch.device("cuda")
be = get_backend(backend)
prep = be.prepare(build_inputs(case, dev))
t = be.tactic_by_label(case, label, prep)
out = torch.empty((case.num_tokens, case.hidden_size), dtype=torch.bfloat16, device=dev)
for _ in range(3):
    be.run(prep, t, out)
torch.cuda.synchronize()
print("ran", backend, label)
