# source: https://discuss.pytorch.org/t/partially-reset-a-variable-in-place-vs-new-variable/936
# category: DL101
# expect: flag 44, 45
# evidence: resetting the finished environments' LSTM state with hx.data[idx] = 0 yields actor/LSTM gradients that differ from the out-of-place reset (hx * mask), silently.
import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_ENVS = 3
NUM_STEPS = 5
OBS_DIM = 4
HIDDEN = 8
N_ACTIONS = 3
GAMMA = 0.99


class RecurrentPolicy(nn.Module):
    def __init__(self, obs_dim, hidden, n_actions):
        super().__init__()
        self.encoder = nn.Linear(obs_dim, hidden)
        self.lstm = nn.LSTMCell(hidden, hidden)
        self.actor = nn.Linear(hidden, n_actions)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, obs, state):
        x = F.relu(self.encoder(obs))
        hx, cx = self.lstm(x, state)
        return self.actor(hx), self.critic(hx), (hx, cx)


def run_segment(policy, observations, rewards, dones, use_data_reset=True):
    hx = torch.zeros(NUM_ENVS, HIDDEN)
    cx = torch.zeros(NUM_ENVS, HIDDEN)
    log_probs, values = [], []
    for t in range(NUM_STEPS):
        logits, value, (hx, cx) = policy(observations[t], (hx, cx))
        dist = torch.distributions.Categorical(logits=logits)
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        values.append(value.squeeze(1))
        # environments whose episode just ended start the next one from a zero state
        finished = dones[t].nonzero().squeeze(1)
        if use_data_reset:
            hx.data[finished] = 0
            cx.data[finished] = 0
        else:
            mask = (1.0 - dones[t]).unsqueeze(1)
            hx = hx * mask
            cx = cx * mask
    log_probs = torch.stack(log_probs)
    values = torch.stack(values)

    returns = torch.zeros_like(rewards)
    running = torch.zeros(NUM_ENVS)
    for t in reversed(range(NUM_STEPS)):
        running = rewards[t] + GAMMA * running * (1.0 - dones[t])
        returns[t] = running
    advantage = returns - values
    policy_loss = -(log_probs * advantage.detach()).mean()
    value_loss = advantage.pow(2).mean()
    return policy_loss + 0.5 * value_loss


def grads_after_update(policy, batch, use_data_reset):
    policy.zero_grad()
    torch.manual_seed(123)  # same sampled actions in both runs
    loss = run_segment(policy, *batch, use_data_reset=use_data_reset)
    loss.backward()
    return {n: p.grad.detach().clone() for n, p in policy.named_parameters()}


if __name__ == "__main__":
    torch.manual_seed(0)
    policy = RecurrentPolicy(OBS_DIM, HIDDEN, N_ACTIONS)
    observations = torch.randn(NUM_STEPS, NUM_ENVS, OBS_DIM)
    rewards = torch.randn(NUM_STEPS, NUM_ENVS)
    dones = torch.zeros(NUM_STEPS, NUM_ENVS)
    dones[1, 0] = 1.0
    dones[2, 2] = 1.0
    batch = (observations, rewards, dones)

    g_data = grads_after_update(policy, batch, use_data_reset=True)
    g_mask = grads_after_update(policy, batch, use_data_reset=False)

    with torch.no_grad():
        actor_diff = (g_data["actor.weight"] - g_mask["actor.weight"]).abs().max().item()
        lstm_diff = (g_data["lstm.weight_hh"] - g_mask["lstm.weight_hh"]).abs().max().item()
    print("max |grad difference| actor.weight:", actor_diff, " lstm.weight_hh:", lstm_diff)
    assert actor_diff > 1e-4, actor_diff
    assert lstm_diff > 1e-4, lstm_diff
    print("evidence holds: the .data reset of the LSTM state silently changes the actor and LSTM gradients")
