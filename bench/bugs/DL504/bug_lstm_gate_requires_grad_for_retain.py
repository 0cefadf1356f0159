# source: https://github.com/pytorch/pytorch/issues/3890
# category: DL504
# expect: flag 26
# evidence: to keep the gradient of the sigmoid gate the cell sets gate.requires_grad = True on a computed tensor, which raises "you can only change requires_grad flags of leaf variables."
import torch
import torch.nn as nn


class GatedCell(nn.Module):
    """A GRU-like cell that records its update gate so the gate's gradient can be inspected."""

    def __init__(self, input_size, hidden_size, keep_gate_grads=False):
        super().__init__()
        self.x2h = nn.Linear(input_size, 2 * hidden_size)
        self.h2h = nn.Linear(hidden_size, 2 * hidden_size)
        self.keep_gate_grads = keep_gate_grads
        self.gates = []

    def forward(self, x, h):
        gx_z, gx_n = self.x2h(x).chunk(2, dim=-1)
        gh_z, gh_n = self.h2h(h).chunk(2, dim=-1)
        s = torch.sigmoid(gx_z + gh_z)
        n = torch.tanh(gx_n + gh_n)
        if self.keep_gate_grads:
            # make sure autograd keeps d loss / d gate
            s.requires_grad = True
            s.retain_grad()
            self.gates.append(s)
        return (1 - s) * h + s * n


def run_sequence(cell, xs, hidden_size):
    h = torch.zeros(xs.shape[1], hidden_size)
    for x in xs:
        h = cell(x, h)
    total = torch.sum(h)
    total.backward()
    return [g.grad for g in cell.gates]


if __name__ == "__main__":
    torch.manual_seed(0)
    xs = torch.randn(3, 2, 4)
    plain = GatedCell(4, 5)
    run_sequence(plain, xs, 5)  # without the gate bookkeeping the cell trains fine
    cell = GatedCell(4, 5, keep_gate_grads=True)
    try:
        run_sequence(cell, xs, 5)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised == "you can only change requires_grad flags of leaf variables.", raised
    print("evidence holds: the sigmoid gate is a computed (non-leaf) tensor; setting its requires_grad raises")
