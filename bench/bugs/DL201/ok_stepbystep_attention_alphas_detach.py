# source: https://github.com/dvgodoy/PyTorchStepByStep/issues/23
# category: DL201
# expect: clean
# evidence: forward stores a detached copy of the attention weights for inspection only; the context is computed from the attached alphas, so linear_query and linear_key still receive gradients and change when the optimizer steps.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Attention(nn.Module):
    def __init__(self, hidden_dim, input_dim=None, proj_values=False):
        super().__init__()
        self.d_k = hidden_dim
        self.input_dim = hidden_dim if input_dim is None else input_dim
        self.proj_values = proj_values
        self.linear_query = nn.Linear(self.input_dim, hidden_dim)
        self.linear_key = nn.Linear(self.input_dim, hidden_dim)
        self.linear_value = nn.Linear(self.input_dim, hidden_dim)
        self.alphas = None

    def init_keys(self, keys):
        self.keys = keys
        self.proj_keys = self.linear_key(self.keys)
        self.values = self.linear_value(self.keys) if self.proj_values else self.keys

    def score_function(self, query):
        proj_query = self.linear_query(query)
        dot_products = torch.bmm(proj_query, self.proj_keys.permute(0, 2, 1))
        scores = dot_products / np.sqrt(self.d_k)
        return scores

    def forward(self, query, mask=None):
        scores = self.score_function(query)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        alphas = F.softmax(scores, dim=-1)
        self.alphas = alphas.detach()
        context = torch.bmm(alphas, self.values)
        return context


if __name__ == "__main__":
    attn = Attention(hidden_dim=4, input_dim=2, proj_values=True)
    regressor = nn.Linear(4, 2)
    model = nn.ModuleList([attn, regressor])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.MSELoss()
    full_seq = torch.randn(3, 4, 2)
    source_seq, query = full_seq[:, :2], full_seq[:, 2:3]
    target = torch.randn(3, 1, 2)
    wq0 = attn.linear_query.weight.detach().clone()
    wk0 = attn.linear_key.weight.detach().clone()
    for _ in range(3):
        attn.init_keys(source_seq)
        context = attn(query)
        loss = loss_fn(regressor(context), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert attn.alphas.grad_fn is None and not attn.alphas.requires_grad
    assert attn.linear_query.weight.grad is not None and attn.linear_key.weight.grad is not None
    assert not torch.equal(attn.linear_query.weight.detach(), wq0)
    assert not torch.equal(attn.linear_key.weight.detach(), wk0)
    print("evidence holds: stored alphas carry no graph, but query/key projections get gradients and train")
