"""What DL401's accumulation keeps alive, measured: `total += loss` in a
small CNN's training loop, against `total += loss.item()`.

Per step: the autograd nodes reachable from the total, and the resident
memory the process gains (median of ROUNDS runs of STEPS steps, each in a
fresh process so one run's allocations do not hide another's), for three
loops: the total added after `loss.backward()` (saved activations freed,
the nodes kept), the same with `retain_graph=True` (activations kept too),
and the fixed loop with `.item()`.

    python bench/dl401_growth.py [--steps 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, resource, sys
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
mode, steps = sys.argv[1], int(sys.argv[2])
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))


def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) * 1024


def nodes(tensor):
    seen, todo = set(), [tensor.grad_fn] if isinstance(tensor, torch.Tensor) and tensor.grad_fn else []
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        todo.extend(n for n, _ in node.next_functions)
    return len(seen)


total = 0.0
for step in range(steps + 20):
    if step == 20:
        start, start_nodes = rss(), nodes(total)
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward(retain_graph=(mode == "retain_graph"))
    optimizer.step()
    total += loss.item() if mode == "item" else loss
print(json.dumps({"bytes_per_step": (rss() - start) / steps, "nodes_per_step": (nodes(total) - start_nodes) / steps}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = {}
    for mode in ("after_backward", "retain_graph", "item"):
        runs = []
        for _ in range(args.rounds):
            done = subprocess.run([sys.executable, "-c", CHILD, mode, str(args.steps)], capture_output=True, text=True, check=True)
            runs.append(json.loads(done.stdout))
        results[mode] = {
            "kib_per_step": round(statistics.median(r["bytes_per_step"] for r in runs) / 1024, 1),
            "nodes_per_step": statistics.median(r["nodes_per_step"] for r in runs),
        }
    for mode, figures in results.items():
        print(f"{mode:15} {figures['kib_per_step']:8.1f} KiB/step  {figures['nodes_per_step']:5.1f} autograd nodes/step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
