# source: placement matrix
# category: DL206
# expect: flag 23
# evidence: h.detach() returns a detached copy that is thrown away, so h still links to the previous step's freed graph and the second backward raises "Trying to backward through the graph a second time".
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
        h.detach()
        done += 1
except RuntimeError as e:
    caught = str(e)

assert done == 1 and caught is not None
assert "Trying to backward through the graph a second time" in caught
print("evidence holds: the discarded detach() cut nothing; the second step's backward raises")
