# source: https://github.com/google/brax/pull/152
# category: DL401
# expect: flag 59
# evidence: train() does `total_loss += loss` for every PPO minibatch, so total_loss is a grad_fn chain linking every minibatch graph of the epoch and is still attached to the graph when handed to progress_fn.
import collections
import torch
from torch import nn, optim

StepData = collections.namedtuple('StepData', ('observation', 'reward'))


def sd_map(f, *sds):
    items = {}
    keys = sds[0]._asdict().keys()
    for k in keys:
        items[k] = f(*[sd._asdict()[k] for sd in sds])
    return StepData(**items)


class Agent(nn.Module):
    def __init__(self, policy_layers, value_layers, entropy_cost, discounting, reward_scaling, device):
        super().__init__()
        self.policy = nn.Sequential(nn.Linear(policy_layers[0], policy_layers[1]), nn.SiLU(),
                                    nn.Linear(policy_layers[1], policy_layers[2]))
        self.value = nn.Sequential(nn.Linear(value_layers[0], value_layers[1]), nn.SiLU(),
                                   nn.Linear(value_layers[1], 1))
        self.entropy_cost = entropy_cost
        self.discounting = discounting
        self.reward_scaling = reward_scaling
        self.device = device

    def loss(self, td):
        logits = self.policy(td['observation'])
        baseline = torch.squeeze(self.value(td['observation']), dim=-1)
        reward = td['reward'] * self.reward_scaling
        with torch.no_grad():
            advantages = reward - baseline
        policy_loss = -torch.mean(logits.mean(-1) * advantages)
        v_loss = torch.mean((reward - baseline) ** 2) * 0.5 * 0.5
        entropy_loss = self.entropy_cost * -torch.mean(logits.std(-1))
        return policy_loss + v_loss + entropy_loss


def train(num_epochs=2, num_update_epochs=2, num_minibatches=4, obs_size=8,
          learning_rate=3e-4, progress_fn=None):
    agent = Agent([obs_size, 16, 4], [obs_size, 16, 1], 1e-2, .97, .1, 'cpu')
    optimizer = optim.Adam(agent.parameters(), lr=learning_rate)

    total_loss = 0
    for _ in range(num_epochs):
        td = StepData(torch.randn(num_minibatches, 16, obs_size), torch.randn(num_minibatches, 16))
        for _ in range(num_update_epochs):
            for minibatch_i in range(num_minibatches):
                td_minibatch = sd_map(lambda d: d[minibatch_i], td)
                loss = agent.loss(td_minibatch._asdict())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total_loss += loss

    total_loss = total_loss / (num_epochs * num_update_epochs * num_minibatches)
    if progress_fn:
        progress_fn(num_epochs, {'losses/total_loss': total_loss})
    return agent


def chain_length(t):
    n, fn = 0, t.grad_fn
    while fn is not None:
        n += 1
        nxt = [f for f, _ in fn.next_functions if f is not None and type(f).__name__.startswith('Add')]
        fn = nxt[0] if nxt else None
    return n


if __name__ == "__main__":
    torch.manual_seed(0)
    seen = {}
    train(progress_fn=lambda step, metrics: seen.update(metrics))
    tl = seen['losses/total_loss']
    assert isinstance(tl, torch.Tensor) and tl.grad_fn is not None, "logged loss still carries a graph"
    assert chain_length(tl) >= 2 * 2 * 4 - 1, "one accumulation node per minibatch is kept alive"
    print("evidence holds: total_loss links", chain_length(tl), "accumulation nodes; grad_fn =", type(tl.grad_fn).__name__)
