# source: placement matrix
# category: DL202
# expect: clean
# evidence: the distillation term is computed on the live student logits, so it adds gradient and the student ends with weights different from cross-entropy-only training.
import copy
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
student = nn.Linear(5, 3)
opt = torch.optim.SGD(student.parameters(), lr=0.5)
batches = [(torch.randn(8, 5), torch.randint(0, 3, (8,)), torch.softmax(2 * torch.randn(8, 3), dim=1)) for _ in range(3)]
start = copy.deepcopy(student)  # untouched copy, used by the check at the end

for xb, yb, soft in batches:
    opt.zero_grad()
    logits = student(xb)
    kd = F.kl_div(F.log_softmax(logits, dim=1), soft, reduction="batchmean")
    loss = F.cross_entropy(logits, yb) + 0.5 * kd
    loss.backward()
    opt.step()

# check: replay the training without the distillation term
ref_opt = torch.optim.SGD(start.parameters(), lr=0.5)
for xb, yb, soft in batches:
    ref_opt.zero_grad()
    F.cross_entropy(start(xb), yb).backward()
    ref_opt.step()
assert not torch.allclose(student.weight, start.weight), "the KD term had no effect"
print("evidence holds: the distillation term trains the student (weights differ from CE-only training)")
