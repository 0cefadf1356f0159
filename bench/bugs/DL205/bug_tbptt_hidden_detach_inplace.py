# source: https://github.com/pytorch/pytorch/issues/49236
# category: DL205
# expect: flag 30
# evidence: h.detach_() at each truncation boundary also cuts h's later use in the read-out of that same step, so the loss terms at the boundary steps give the RNN cell no gradient (torch.autograd.grad returns None for every cell parameter)
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Model(nn.Module):
    def __init__(self, n_in=3, n_hidden=8, n_out=2):
        super(Model, self).__init__()
        self.n_hidden = n_hidden
        self.cell = nn.RNNCell(n_in, n_hidden)
        self.readout = nn.Linear(n_hidden, n_out)

    def init_hidden(self, batch_size):
        return torch.zeros(batch_size, self.n_hidden)


def train_truncated(model, optimizer, xs, ys, trunc_len):
    """Truncated BPTT with a fixed truncation length, detaching the state in place."""
    h = model.init_hidden(xs.size(1))
    step_losses = []
    for t in range(xs.size(0)):
        h = model.cell(xs[t], h)
        if (t + 1) % trunc_len == 0:
            h.detach_()
        out = model.readout(h)
        step_loss = F.mse_loss(out, ys[t])
        step_losses.append(step_loss)
        if (t + 1) % trunc_len == 0:
            optimizer.zero_grad()
            sum(step_losses[-trunc_len:]).backward(retain_graph=True)
            optimizer.step()
    return step_losses


if __name__ == "__main__":
    class FrozenSGD(torch.optim.SGD):
        # the check below re-reads the recorded graphs, so the weights must not move
        def step(self, closure=None):
            return None

    model = Model()
    optimizer = FrozenSGD(model.parameters(), lr=0.1)
    xs = torch.randn(8, 4, 3)
    ys = torch.randn(8, 4, 2)
    trunc_len = 4
    step_losses = train_truncated(model, optimizer, xs, ys, trunc_len)
    cell_params = list(model.cell.parameters())
    boundary = [t for t in range(len(step_losses)) if (t + 1) % trunc_len == 0]
    inside = [t for t in range(len(step_losses)) if (t + 1) % trunc_len != 0]
    for t in boundary:
        grads = torch.autograd.grad(step_losses[t], cell_params, allow_unused=True, retain_graph=True)
        assert all(g is None for g in grads), t
    grads_inside = torch.autograd.grad(step_losses[inside[-1]], cell_params, allow_unused=True, retain_graph=True)
    assert all(g is not None for g in grads_inside)
    print("evidence holds: the loss at boundary steps %s gives the RNN cell no gradient (None), "
          "while step %d does" % (boundary, inside[-1]))
