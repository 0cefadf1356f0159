# source: placement matrix
# category: DL206
# expect: clean
# evidence: h = h.detach() rebinds the hidden state to a cut copy, so each step backpropagates through its own graph only and all four steps run.
import torch
from torch import nn

torch.manual_seed(0)
cell = nn.RNNCell(3, 4)
readout = nn.Linear(4, 1)
opt = torch.optim.SGD(list(cell.parameters()) + list(readout.parameters()), lr=0.1)
seq = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(4)]
h = torch.zeros(2, 4)
done = 0
caught = None
try:
    for xb, yb in seq:
        h = cell(xb, h)
        err = ((readout(h) - yb) ** 2).mean()
        opt.zero_grad()
        err.backward()
        opt.step()
        h = h.detach()
        done += 1
except RuntimeError as e:
    caught = str(e)

assert done == 4 and caught is None
assert h.grad_fn is None and cell.weight_hh.grad is not None
print("evidence holds: with h = h.detach() every step backpropagates and updates")
