# source: https://github.com/pyro-ppl/pyro/pull/970
# category: DL501
# expect: flag 71, 74
# evidence: the guide builds w_loc/b_loc as torch.randn(..., requires_grad=True).type_as(data) with float64 data, so the registered params are non-leaf casts: backward leaves their .grad None and the optimizer refuses them ("can't optimize a non-leaf Tensor").
import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Normal

torch.manual_seed(0)
np.random.seed(0)

"""
Bayesian Regression
Learning a function of the form:
    y = wx + b
"""

# ---- minimal stand-ins for pyro.param / pyro.optim.Adam / SVI (pyro is not installed) ----
_PARAM_STORE = {}


def param(name, init_tensor):
    if name not in _PARAM_STORE:
        _PARAM_STORE[name] = init_tensor
    return _PARAM_STORE[name]


def clear_param_store():
    _PARAM_STORE.clear()


class Adam:
    """Like pyro.optim.Adam: builds one torch optimizer per parameter on first use."""

    def __init__(self, optim_args):
        self.optim_args = optim_args
        self.optim_objs = {}

    def __call__(self, params):
        for p in params:
            if p not in self.optim_objs:
                self.optim_objs[p] = torch.optim.Adam([p], **self.optim_args)
            self.optim_objs[p].step()


# generate toy dataset
def build_linear_dataset(N, p, noise_std=0.01):
    X = np.random.rand(N, p)
    # use random integer weights from [0, 7]
    w = np.random.randint(4, size=p)
    print('w = {}'.format(w))
    # set b = 1
    y = np.matmul(X, w) + np.repeat(1, N) + np.random.normal(0, noise_std, size=N)
    y = y.reshape(N, 1)
    X, y = torch.tensor(X), torch.tensor(y)
    data = torch.cat((X, y), 1)
    assert data.shape == (N, p + 1)
    return data


N = 100  # size of toy data
p = 2  # number of features

softplus = nn.Softplus()


def guide(data):
    w_loc = torch.randn(1, p, requires_grad=True).type_as(data)
    w_log_sig = torch.tensor((-3.0 * torch.ones(1, p) + 0.05 * torch.randn(1, p)).type_as(data),
                             requires_grad=True)
    b_loc = torch.randn(1, requires_grad=True).type_as(data)
    b_log_sig = torch.tensor((-3.0 * torch.ones(1) + 0.05 * torch.randn(1)).type_as(data.data), requires_grad=True)
    # register learnable params in the param store
    mw_param = param("guide_mean_weight", w_loc)
    sw_param = softplus(param("guide_log_scale_weight", w_log_sig))
    mb_param = param("guide_mean_bias", b_loc)
    sb_param = softplus(param("guide_log_scale_bias", b_log_sig))
    # gaussian guide distributions for w and b
    w = Normal(mw_param, sw_param).rsample()
    b = Normal(mb_param, sb_param).rsample()
    return w, b


def model_log_likelihood(data, w, b):
    x_data = data[:, :-1]
    y_data = data[:, -1]
    prediction_mean = (x_data @ w.t()).squeeze(-1) + b
    return Normal(prediction_mean, 1).log_prob(y_data).sum()


optim = Adam({"lr": 0.05})


def svi_step(data):
    w, b = guide(data)
    loss = -model_log_likelihood(data, w, b)
    loss.backward()
    optim(list(_PARAM_STORE.values()))
    return loss.item()


def main(args):
    clear_param_store()
    data = build_linear_dataset(N, p)
    for j in range(args.num_epochs):
        epoch_loss = svi_step(data)
        if j % 100 == 0:
            print("epoch avg loss {}".format(epoch_loss / float(N)))


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description="parse args")
    parser.add_argument('-n', '--num-epochs', default=5, type=int)
    args = parser.parse_args([])
    try:
        main(args)
        raise AssertionError("training unexpectedly ran")
    except ValueError as e:
        msg = str(e)
    mw = _PARAM_STORE["guide_mean_weight"]
    assert not mw.is_leaf and mw.grad_fn is not None and not mw.retains_grad and mw.dtype == torch.float64
    assert _PARAM_STORE["guide_log_scale_weight"].grad is not None  # the torch.tensor(...) params are leaves
    assert "non-leaf" in msg, msg
    print("evidence holds: guide_mean_weight is a non-leaf cast (its .grad is never populated); optimizer says:", msg)
