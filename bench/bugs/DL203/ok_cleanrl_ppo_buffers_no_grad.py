# source: https://github.com/vwxyzjn/cleanrl/blob/master/cleanrl/ppo.py
# category: DL203
# expect: clean
# evidence: rollout buffers are filled under no_grad, yet the PPO loss built from them and a fresh forward backpropagates into actor and critic
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions.categorical import Categorical


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim=4, n_actions=2):
        super().__init__()
        self.critic = nn.Sequential(layer_init(nn.Linear(obs_dim, 16)), nn.Tanh(), layer_init(nn.Linear(16, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(obs_dim, 16)), nn.Tanh(),
                                   layer_init(nn.Linear(16, n_actions), std=0.01))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def ppo(agent, num_steps=8, num_envs=2, obs_dim=4, gamma=0.99, gae_lambda=0.95, update_epochs=2, num_minibatches=2,
        clip_coef=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5):
    optimizer = optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    obs = torch.zeros((num_steps, num_envs, obs_dim))
    actions = torch.zeros((num_steps, num_envs))
    logprobs = torch.zeros((num_steps, num_envs))
    rewards = torch.zeros((num_steps, num_envs))
    dones = torch.zeros((num_steps, num_envs))
    values = torch.zeros((num_steps, num_envs))

    next_obs = torch.randn(num_envs, obs_dim)
    next_done = torch.zeros(num_envs)
    for step in range(0, num_steps):
        obs[step] = next_obs
        dones[step] = next_done
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step] = value.flatten()
        actions[step] = action
        logprobs[step] = logprob
        rewards[step] = (action == 0).float()
        next_obs, next_done = torch.randn(num_envs, obs_dim), torch.zeros(num_envs)

    with torch.no_grad():
        next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages = torch.zeros_like(rewards)
        lastgaelam = 0
        for t in reversed(range(num_steps)):
            if t == num_steps - 1:
                nextnonterminal = 1.0 - next_done
                nextvalues = next_value
            else:
                nextnonterminal = 1.0 - dones[t + 1]
                nextvalues = values[t + 1]
            delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
        returns = advantages + values

    b_obs = obs.reshape((-1, obs_dim))
    b_logprobs = logprobs.reshape(-1)
    b_actions = actions.reshape(-1)
    b_advantages = advantages.reshape(-1)
    b_returns = returns.reshape(-1)
    batch_size = num_steps * num_envs
    minibatch_size = batch_size // num_minibatches

    b_inds = np.arange(batch_size)
    for epoch in range(update_epochs):
        np.random.shuffle(b_inds)
        for start in range(0, batch_size, minibatch_size):
            mb_inds = b_inds[start:start + minibatch_size]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])
            logratio = newlogprob - b_logprobs[mb_inds]
            ratio = logratio.exp()
            mb_advantages = b_advantages[mb_inds]
            mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
            pg_loss1 = -mb_advantages * ratio
            pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
            pg_loss = torch.max(pg_loss1, pg_loss2).mean()
            newvalue = newvalue.view(-1)
            v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()
            entropy_loss = entropy.mean()
            loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
            optimizer.step()
    return b_logprobs


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    agent = Agent()
    before = [p.detach().clone() for p in agent.parameters()]
    b_logprobs = ppo(agent)
    assert not b_logprobs.requires_grad
    assert agent.actor[2].weight.grad.abs().sum() > 0 and agent.critic[2].weight.grad.abs().sum() > 0
    assert any(not torch.equal(b, p) for b, p in zip(before, agent.parameters()))
    print("evidence holds: the stored log-probs and values carry no graph; the fresh forward carries the gradients")
