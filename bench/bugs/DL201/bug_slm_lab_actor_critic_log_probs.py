# source: https://github.com/kengz/SLM-Lab/pull/133
# category: DL201
# expect: flag 83, 86
# evidence: calc_policy_loss rebuilds log_probs and entropies with torch.tensor, brand-new tensors outside the graph; the summed loss still backpropagates through the critic, but the actor net parameters keep grad None and never change
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

torch.manual_seed(0)
np.random.seed(0)


class MLPNet(nn.Module):
    def __init__(self, in_dim, out_dim, hid=16, lr=0.01):
        super(MLPNet, self).__init__()
        self.model = nn.Sequential(nn.Linear(in_dim, hid), nn.SELU(), nn.Linear(hid, out_dim))
        self.optim = torch.optim.Adam(self.parameters(), lr=lr)

    def forward(self, x):
        return self.model(x)

    def training_step(self, loss):
        self.train()
        self.optim.zero_grad()
        loss.backward(retain_graph=True)
        self.optim.step()
        return loss


class Body(object):
    def __init__(self):
        self.log_probs = []
        self.entropies = []
        self.states, self.rewards, self.dones = [], [], []


class Reinforce(object):
    def __init__(self, body, state_dim, action_dim):
        self.body = body
        self.gamma = 0.99
        self.add_entropy = True
        self.entropy_coef = 0.01
        self.to_train = 0
        self.init_nets(state_dim, action_dim)

    def init_nets(self, state_dim, action_dim):
        self.net = MLPNet(state_dim, action_dim)

    def action_policy(self, state):
        pdparam = self.net(state)
        action_pd = Categorical(logits=pdparam)
        action = action_pd.sample()
        return action, action_pd

    def body_act(self, body, state):
        action, action_pd = self.action_policy(torch.from_numpy(state).float())
        body.entropies.append(action_pd.entropy())
        body.log_probs.append(action_pd.log_prob(action.float()))
        return action.cpu().numpy()

    def sample(self):
        batch = {'states': np.array(self.body.states, dtype=np.float32),
                 'rewards': np.array(self.body.rewards, dtype=np.float32),
                 'dones': np.array(self.body.dones, dtype=np.float32)}
        return batch

    def calc_returns(self, batch):
        rets = np.zeros_like(batch['rewards'])
        future_ret = 0.0
        for t in reversed(range(len(rets))):
            future_ret = batch['rewards'][t] + self.gamma * future_ret * (1 - batch['dones'][t])
            rets[t] = future_ret
        return torch.from_numpy(rets)

    def calc_advs(self, batch):
        return self.calc_returns(batch)

    def calc_policy_loss(self, batch):
        '''Calculate the policy loss for a batch of data.'''
        adv = self.calc_advs(batch)
        assert len(self.body.log_probs) == len(adv)
        log_probs = torch.tensor(self.body.log_probs)
        policy_loss = - log_probs * adv
        if self.add_entropy:
            entropies = torch.tensor(self.body.entropies)
            policy_loss += (-self.entropy_coef * entropies)
        policy_loss = torch.sum(policy_loss)
        return policy_loss


class ActorCritic(Reinforce):
    def init_nets(self, state_dim, action_dim):
        self.net = MLPNet(state_dim, action_dim)
        self.critic = MLPNet(state_dim, 1)
        self.policy_loss_coef = 1.0
        self.val_loss_coef = 0.5

    def calc_v(self, batch):
        return self.critic(torch.from_numpy(batch['states'])).squeeze(-1)

    def calc_advs(self, batch):
        '''Advantage with the critic as baseline (critic value kept in the graph, as in the lab at the time).'''
        self.v_preds = self.calc_v(batch)
        return self.calc_returns(batch) - self.v_preds

    def calc_val_loss(self, batch):
        v_targets = self.calc_returns(batch)
        return self.val_loss_coef * ((self.v_preds - v_targets) ** 2).mean()

    def train(self):
        if self.to_train == 1:
            batch = self.sample()
            policy_loss = self.calc_policy_loss(batch)
            val_loss = self.calc_val_loss(batch)
            loss = self.policy_loss_coef * policy_loss + val_loss
            self.net.training_step(loss=loss)
            self.critic.training_step(loss=loss)
            self.to_train = 0
            self.body.log_probs = []
            self.body.entropies = []
            self.body.states, self.body.rewards, self.body.dones = [], [], []
            return loss.item()
        return np.nan


class ToyEnv(object):
    """Reward 1 for action 0, 0 otherwise; 4-dim random observations."""

    def reset(self):
        self.t = 0
        return np.random.randn(4).astype(np.float32)

    def step(self, action):
        self.t += 1
        reward = 1.0 if int(action) == 0 else 0.0
        return np.random.randn(4).astype(np.float32), reward, self.t >= 8


if __name__ == "__main__":
    env = ToyEnv()
    body = Body()
    agent = ActorCritic(body, state_dim=4, action_dim=2)
    actor_before = [p.detach().clone() for p in agent.net.parameters()]
    critic_before = [p.detach().clone() for p in agent.critic.parameters()]
    for episode in range(3):
        state = env.reset()
        done = False
        while not done:
            action = agent.body_act(body, state)
            body.states.append(state)
            next_state, reward, done = env.step(action)
            body.rewards.append(reward)
            body.dones.append(float(done))
            state = next_state
        agent.to_train = 1
        loss = agent.train()
    actor_unchanged = all(torch.equal(b, p.detach()) for b, p in zip(actor_before, agent.net.parameters()))
    critic_changed = any(not torch.equal(b, p.detach()) for b, p in zip(critic_before, agent.critic.parameters()))
    assert actor_unchanged and critic_changed
    assert all(p.grad is None for p in agent.net.model[0].parameters())
    print("evidence holds: after 3 updates the actor net (grad None) is unchanged, only the critic trained; last loss %.3f" % loss)
