# source: https://github.com/alexhernandezgarcia/gflownet/pull/251
# category: DL201
# expect: flag 23
# evidence: after the trajectory-balance loss is backpropagated, the forward and backward policy models have grad None; only logZ receives a gradient
import torch
from torch import nn


class GFlowNetEnv:
    def __init__(self, n_actions=4, length=3):
        self.n_actions = n_actions
        self.length = length
        self.logsoftmax = nn.LogSoftmax(dim=1)

    def states2policy(self, states):
        return nn.functional.one_hot(states, self.length + 1).float().flatten(1)

    def get_mask_invalid_actions_forward(self, states):
        return torch.zeros(states.shape[0], self.n_actions, dtype=torch.bool)

    def get_logprobs(self, policy_outputs, actions, mask, states_from=None, is_backward=False):
        ns_range = torch.arange(policy_outputs.shape[0])
        logits = policy_outputs.clone().detach()
        if mask is not None:
            logits[mask] = -torch.inf
        logprobs = self.logsoftmax(logits)[ns_range, actions]
        return logprobs

    def reward(self, states):
        return states.float().sum(dim=1) + 1.0


class GFlowNetAgent:
    def __init__(self, env, hidden=32, lr=1e-2, lr_z=1e-1):
        self.env = env
        in_dim = 2 * (env.length + 1)
        self.forward_policy = nn.Sequential(nn.Linear(in_dim, hidden), nn.LeakyReLU(), nn.Linear(hidden, env.n_actions))
        self.backward_policy = nn.Sequential(nn.Linear(in_dim, hidden), nn.LeakyReLU(), nn.Linear(hidden, env.n_actions))
        self.logZ = nn.Parameter(torch.zeros(1))
        self.opt = torch.optim.Adam(
            [
                {"params": list(self.forward_policy.parameters()) + list(self.backward_policy.parameters()), "lr": lr},
                {"params": [self.logZ], "lr": lr_z},
            ]
        )

    def sample_batch(self, n):
        states = torch.randint(0, self.env.length + 1, (n, 2))
        actions = torch.randint(0, self.env.n_actions, (n,))
        return states, actions

    def trajectorybalance_loss(self, states, actions):
        policy_in = self.env.states2policy(states)
        mask_f = self.env.get_mask_invalid_actions_forward(states)
        logprobs_f = self.env.get_logprobs(self.forward_policy(policy_in), actions, mask_f)
        logprobs_b = self.env.get_logprobs(self.backward_policy(policy_in), actions, None, is_backward=True)
        log_r = torch.log(self.env.reward(states))
        return (self.logZ + logprobs_f - log_r - logprobs_b).pow(2).mean()

    def train_step(self, batch_size=16):
        states, actions = self.sample_batch(batch_size)
        loss = self.trajectorybalance_loss(states, actions)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = GFlowNetAgent(GFlowNetEnv())
    before = [p.detach().clone() for p in agent.forward_policy.parameters()]
    for _ in range(3):
        agent.train_step()
    assert all(p.grad is None for p in agent.forward_policy.parameters())
    assert all(p.grad is None for p in agent.backward_policy.parameters())
    assert agent.logZ.grad is not None
    assert all(torch.equal(a, b) for a, b in zip(before, agent.forward_policy.parameters()))
    print("evidence holds: get_logprobs detaches the policy outputs, so only logZ trains under the TB loss")
