# source: https://github.com/ikostrikov/pytorch-a3c/blob/master/model.py
# category: DL102
# expect: clean
# evidence: the .data re-binds run in __init__ before the optimizer exists: the heads have the requested column norms and the parameters the optimizer holds are the ones the model uses and trains
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def normalized_columns_initializer(weights, std=1.0):
    out = torch.randn(weights.size())
    out *= std / torch.sqrt(out.pow(2).sum(1, keepdim=True))
    return out


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Linear') != -1:
        weight_shape = list(m.weight.data.size())
        fan_in = weight_shape[1]
        fan_out = weight_shape[0]
        w_bound = np.sqrt(6. / (fan_in + fan_out))
        m.weight.data.uniform_(-w_bound, w_bound)
        m.bias.data.fill_(0)


class ActorCritic(torch.nn.Module):
    def __init__(self, num_inputs, action_space_n):
        super(ActorCritic, self).__init__()
        self.fc = nn.Linear(num_inputs, 32)
        self.lstm = nn.LSTMCell(32, 16)
        self.critic_linear = nn.Linear(16, 1)
        self.actor_linear = nn.Linear(16, action_space_n)

        self.apply(weights_init)
        self.actor_linear.weight.data = normalized_columns_initializer(self.actor_linear.weight.data, 0.01)
        self.actor_linear.bias.data.fill_(0)
        self.critic_linear.weight.data = normalized_columns_initializer(self.critic_linear.weight.data, 1.0)
        self.critic_linear.bias.data.fill_(0)

        self.lstm.bias_ih.data.fill_(0)
        self.lstm.bias_hh.data.fill_(0)
        self.train()

    def forward(self, inputs):
        inputs, (hx, cx) = inputs
        x = F.elu(self.fc(inputs))
        hx, cx = self.lstm(x, (hx, cx))
        return self.critic_linear(hx), self.actor_linear(hx), (hx, cx)


def train_step(model, optimizer, state, action, R):
    hx, cx = torch.zeros(1, 16), torch.zeros(1, 16)
    value, logit, (hx, cx) = model((state, (hx, cx)))
    log_prob = F.log_softmax(logit, dim=1).gather(1, action)
    advantage = R - value
    policy_loss = -(log_prob * advantage.detach()).sum()
    value_loss = 0.5 * advantage.pow(2).sum()
    optimizer.zero_grad()
    (policy_loss + 0.5 * value_loss).backward()
    optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = ActorCritic(4, 3)
    row_norms = model.actor_linear.weight.pow(2).sum(1).sqrt()
    assert torch.allclose(row_norms, torch.full((3,), 0.01), atol=1e-6)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    held = {id(p) for g in optimizer.param_groups for p in g['params']}
    assert id(model.actor_linear.weight) in held and id(model.critic_linear.weight) in held
    before = model.actor_linear.weight.detach().clone()
    train_step(model, optimizer, torch.randn(1, 4), torch.tensor([[1]]), torch.tensor([[1.0]]))
    assert model.actor_linear.weight.grad is not None
    assert not torch.equal(before, model.actor_linear.weight)
    print("evidence holds: init-time .data re-binds gave the requested norms and the optimizer trains those same parameters")
