# source: https://github.com/kevinzakka/recurrent-visual-attention/issues/37
# category: DL201
# expect: clean
# evidence: the location network's fc and fc_lt get gradients from the REINFORCE loss through mu, the baseline net from its MSE loss, and the core RNN from the action loss
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal


class LocationNetwork(nn.Module):
    def __init__(self, input_size, output_size, std):
        super().__init__()
        self.std = std
        hid_size = input_size // 2
        self.fc = nn.Linear(input_size, hid_size)
        self.fc_lt = nn.Linear(hid_size, output_size)

    def forward(self, h_t):
        feat = F.relu(self.fc(h_t.detach()))
        mu = torch.tanh(self.fc_lt(feat))
        l_t = torch.distributions.Normal(mu, self.std).rsample()
        l_t = l_t.detach()
        log_pi = Normal(mu, self.std).log_prob(l_t)
        log_pi = torch.sum(log_pi, dim=1)
        l_t = torch.clamp(l_t, -1, 1)
        return log_pi, l_t


class BaselineNetwork(nn.Module):
    def __init__(self, input_size, output_size):
        super().__init__()
        self.fc = nn.Linear(input_size, output_size)

    def forward(self, h_t):
        return self.fc(h_t.detach())


class RecurrentAttention(nn.Module):
    def __init__(self, glimpse_size=4, hidden_size=16, num_classes=3, std=0.2):
        super().__init__()
        self.glimpse = nn.Linear(glimpse_size + 2, hidden_size)
        self.rnn = nn.RNNCell(hidden_size, hidden_size)
        self.locator = LocationNetwork(hidden_size, 2, std)
        self.classifier = nn.Linear(hidden_size, num_classes)
        self.baseliner = BaselineNetwork(hidden_size, 1)

    def forward(self, x, l_t_prev, h_t_prev, last=False):
        g_t = F.relu(self.glimpse(torch.cat([x, l_t_prev], dim=1)))
        h_t = self.rnn(g_t, h_t_prev)
        log_pi, l_t = self.locator(h_t)
        b_t = self.baseliner(h_t).squeeze()
        if last:
            return h_t, l_t, b_t, F.log_softmax(self.classifier(h_t), dim=1), log_pi
        return h_t, l_t, b_t, log_pi


def train_one_batch(model, optimizer, x, y, num_glimpses=3):
    h_t = torch.zeros(x.shape[0], 16)
    l_t = torch.zeros(x.shape[0], 2).uniform_(-1, 1)
    locs, log_pi, baselines = [], [], []
    for t in range(num_glimpses - 1):
        h_t, l_t, b_t, p = model(x, l_t, h_t)
        baselines.append(b_t)
        log_pi.append(p)
    h_t, l_t, b_t, log_probas, p = model(x, l_t, h_t, last=True)
    baselines.append(b_t)
    log_pi.append(p)
    baselines = torch.stack(baselines).transpose(1, 0)
    log_pi = torch.stack(log_pi).transpose(1, 0)

    predicted = torch.max(log_probas, 1)[1]
    R = (predicted.detach() == y).float()
    R = R.unsqueeze(1).repeat(1, num_glimpses)
    loss_action = F.nll_loss(log_probas, y)
    loss_baseline = F.mse_loss(baselines, R)
    adjusted_reward = R - baselines.detach()
    loss_reinforce = torch.sum(-log_pi * adjusted_reward, dim=1)
    loss_reinforce = torch.mean(loss_reinforce, dim=0)
    loss = loss_action + loss_baseline + loss_reinforce * 0.01
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = RecurrentAttention()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
    train_one_batch(model, optimizer, x, y)
    assert model.locator.fc.weight.grad.abs().sum() > 0
    assert model.locator.fc_lt.weight.grad.abs().sum() > 0
    assert model.baseliner.fc.weight.grad.abs().sum() > 0
    assert model.rnn.weight_hh.grad.abs().sum() > 0
    print("evidence holds: detaching h_t only stops the REINFORCE and baseline losses from reaching the core; every part still trains")
