# source: https://github.com/laekov/fastmoe/issues/49
# category: DL202
# expect: flag 114
# evidence: bal_loss is rebuilt with torch.tensor(loss_list), so it has no grad_fn: adding it to the LM loss leaves the gate gradients identical to training without it, although the balance loss itself depends on the gate.
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

_ARGS = SimpleNamespace(balance_strategy="gshard", balance_loss_weight=1.0)


def get_args():
    return _ARGS


def is_pipeline_last_stage():
    return True


class GShardGate(nn.Module):
    def __init__(self, d_model, num_expert, top_k=2):
        super().__init__()
        self.gate = nn.Linear(d_model, num_expert)
        self.num_expert, self.top_k = num_expert, top_k
        self.loss = None

    def set_loss(self, loss):
        self.loss = loss

    def get_loss(self, clear=True):
        loss = self.loss
        if clear:
            self.loss = None
        return loss

    def forward(self, inp):
        score = F.softmax(self.gate(inp), dim=-1)
        top_val, top_idx = torch.topk(score, k=self.top_k, dim=-1)
        # GShard balance loss: fraction routed (c_e) times mean gate probability (m_e)
        c_e = F.one_hot(top_idx[:, 0], self.num_expert).float().mean(0)
        m_e = score.mean(0)
        self.set_loss(torch.sum(c_e * m_e) * self.num_expert)
        return top_idx, top_val


class FMoETransformerMLP(nn.Module):
    def __init__(self, num_expert=4, d_model=8, d_hidden=16):
        super().__init__()
        self.gate = GShardGate(d_model, num_expert)
        self.experts = nn.ModuleList([nn.Sequential(nn.Linear(d_model, d_hidden), nn.GELU(), nn.Linear(d_hidden, d_model))
                                      for _ in range(num_expert)])

    def forward(self, x):
        idx, val = self.gate(x)
        out = torch.zeros_like(x)
        for k in range(idx.shape[1]):
            for e, expert in enumerate(self.experts):
                sel = idx[:, k] == e
                if sel.any():
                    out[sel] = out[sel] + val[sel, k:k + 1] * expert(x[sel])
        return out


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = FMoETransformerMLP()

    def forward(self, x):
        return x + self.mlp(x)


class GPTLike(nn.Module):
    def __init__(self, vocab=30, d_model=8, n_layers=2):
        super().__init__()
        self.language_model = SimpleNamespace()
        self.embed = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList([Layer() for _ in range(n_layers)])
        self.language_model.transformer = SimpleNamespace(layers=self.layers)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


def forward_step(data_iterator, model, input_tensor):
    tokens, labels = next(data_iterator)
    logits = model(tokens)
    lm_loss = F.cross_entropy(logits, labels)
    return lm_loss, {'lm loss': lm_loss.clone().detach()}


def patch_forward_step(forward_step_func):
    """Patch model's forward_step_func to support balance loss (fmoe/megatron/balance.py)."""
    if not get_args().balance_strategy:
        return forward_step_func

    def forward_step_with_balance_loss(data_iterator, model, input_tensor):
        args = get_args()
        output = forward_step_func(data_iterator, model, input_tensor)

        if not is_pipeline_last_stage() or not args.balance_strategy or args.balance_strategy == 'naive':
            return output

        while hasattr(model, 'module'):
            model = model.module

        loss_list = [l.mlp.gate.get_loss(clear=False) for l in model.language_model.transformer.layers]
        bal_loss = (torch.tensor(loss_list, device=loss_list[0].device).mean() * args.balance_loss_weight).float()

        loss, state_dict = output
        loss += bal_loss
        state_dict['{}_loss'.format(args.balance_strategy)] = bal_loss
        return loss, state_dict

    return forward_step_with_balance_loss


def gate_grads(model, step_func, batch):
    model.zero_grad()
    loss, _ = step_func(iter([batch]), model, None)
    loss.backward()
    return [l.mlp.gate.gate.weight.grad.detach().clone() for l in model.layers]


if __name__ == "__main__":
    torch.manual_seed(0)
    model = GPTLike()
    batch = (torch.randint(0, 30, (24,)), torch.randint(0, 30, (24,)))

    with_balance = gate_grads(model, patch_forward_step(forward_step), batch)
    without_balance = gate_grads(model, forward_step, batch)

    # the balance loss really depends on the gate weights
    model.zero_grad()
    model(batch[0])
    own = torch.autograd.grad(model.layers[0].mlp.gate.get_loss(), model.layers[0].mlp.gate.gate.weight)[0]

    with torch.no_grad():
        assert own.abs().sum() > 0
        assert all(torch.allclose(a, b) for a, b in zip(with_balance, without_balance))
    print("evidence holds: the balance loss is added as a constant and contributes no gradient to the gates")
