# source: https://github.com/lweitkamp/option-critic-pytorch/issues/2
# category: DL201
# expect: clean
# evidence: actor_loss detaches Q on purpose, yet the optimizer's parameters all train: the actor step changes the termination and intra-option policy weights, and the separate critic_loss step changes the Q head.
from types import SimpleNamespace
import torch
import torch.nn as nn
from torch.distributions import Categorical

torch.manual_seed(0)


def to_tensor(obs):
    return torch.as_tensor(obs, dtype=torch.float32)


class OptionCriticFeatures(nn.Module):
    def __init__(self, in_features, num_actions, num_options, temperature=1.0, device='cpu'):
        super(OptionCriticFeatures, self).__init__()
        self.device = device
        self.temperature = temperature
        self.features = nn.Sequential(nn.Linear(in_features, 32), nn.ReLU(), nn.Linear(32, 64), nn.ReLU())
        self.Q = nn.Linear(64, num_options)
        self.terminations = nn.Linear(64, num_options)
        self.options_W = nn.Parameter(torch.zeros(num_options, 64, num_actions))
        self.options_b = nn.Parameter(torch.zeros(num_options, num_actions))

    def get_state(self, obs):
        if obs.ndim < 2:
            obs = obs.unsqueeze(0)
        return self.features(obs.to(self.device))

    def get_Q(self, state):
        return self.Q(state)

    def get_terminations(self, state):
        return self.terminations(state).sigmoid()

    def get_action(self, state, option):
        logits = state @ self.options_W[option] + self.options_b[option]
        action_dist = Categorical((logits / self.temperature).softmax(dim=-1))
        action = action_dist.sample()
        return action.item(), action_dist.log_prob(action), action_dist.entropy()


def critic_loss(model, model_prime, data_batch, optim, args):
    obs, options, rewards, next_obs, dones = data_batch
    batch_idx = torch.arange(len(options)).long()
    options = torch.LongTensor(options)
    rewards = torch.FloatTensor(rewards)
    masks = 1 - torch.FloatTensor(dones)
    states = model.get_state(to_tensor(obs))
    next_states_prime = model_prime.get_state(to_tensor(next_obs))
    next_termination_probs = model.get_terminations(model.get_state(to_tensor(next_obs))).detach()
    next_options_term_prob = next_termination_probs[batch_idx, options]
    Q = model.get_Q(states)
    next_Q_prime = model_prime.get_Q(next_states_prime)
    y = rewards + masks * args.gamma * \
        ((1 - next_options_term_prob) * next_Q_prime[batch_idx, options] +
         next_options_term_prob * next_Q_prime.max(dim=-1)[0])
    y = y.detach()
    td_err = y - Q[batch_idx, options]
    td_cost = 0.5 * td_err.pow(2).sum()
    optim.zero_grad()
    td_cost.backward()
    optim.step()
    return td_cost.item()


def actor_loss(obs, option, logp, entropy, reward, done, next_obs, model, model_prime, optim, args):
    state = model.get_state(to_tensor(obs))
    next_state = model.get_state(to_tensor(next_obs))
    next_state_prime = model_prime.get_state(to_tensor(next_obs))
    option_term_prob = model.get_terminations(state)[:, option]
    next_option_term_prob = model.get_terminations(next_state)[:, option].detach()
    Q = model.get_Q(state).detach().squeeze()
    next_Q_prime = model_prime.get_Q(next_state_prime).detach().squeeze()
    y = reward + (1 - done) * args.gamma * \
        ((1 - next_option_term_prob) * next_Q_prime[option] +
         next_option_term_prob * next_Q_prime.max(dim=-1)[0])
    y = y.detach()
    termination_loss = option_term_prob * (Q[option] - Q.max(dim=-1)[0] + args.termination_reg)
    policy_loss = -logp * (y - Q[option]) - args.entropy_reg * entropy
    actor_loss = termination_loss + policy_loss
    optim.zero_grad()
    actor_loss.backward()
    optim.step()
    return actor_loss.item()


if __name__ == "__main__":
    args = SimpleNamespace(gamma=0.99, termination_reg=0.01, entropy_reg=0.01)
    model = OptionCriticFeatures(in_features=4, num_actions=2, num_options=2)
    model_prime = OptionCriticFeatures(in_features=4, num_actions=2, num_options=2)
    model_prime.load_state_dict(model.state_dict())
    optim = torch.optim.RMSprop(model.parameters(), lr=1e-2)
    snap = lambda: {n: p.detach().clone() for n, p in model.named_parameters()}
    obs, next_obs, option = torch.randn(4), torch.randn(4), 1
    before = snap()
    state = model.get_state(to_tensor(obs))
    action, logp, entropy = model.get_action(state, option)
    actor_loss(obs, option, logp, entropy, 1.0, 0.0, next_obs, model, model_prime, optim, args)
    after_actor = snap()
    assert not torch.equal(after_actor["terminations.weight"], before["terminations.weight"])
    assert not torch.equal(after_actor["options_W"], before["options_W"])
    batch = (torch.randn(5, 4).numpy(), [0, 1, 0, 1, 1], [1.0] * 5, torch.randn(5, 4).numpy(), [0] * 5)
    critic_loss(model, model_prime, batch, optim, args)
    assert not torch.equal(snap()["Q.weight"], after_actor["Q.weight"])
    print("evidence holds: termination/option-policy weights move in the actor step and the Q head moves in the critic step")
