# source: https://github.com/philtabor/Youtube-Code-Repository/issues/23
# category: DL603
# expect: flag 105, 113, 128
# evidence: the critic loss back-propagates through q_hat into target_value (its .grad fills up), and the value loss back-propagates through value_target into both critics (3 gradient passes per learn() instead of 2)
import numpy as np
import torch as T
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions.normal import Normal
class ReplayBuffer:
    def __init__(self, max_size, input_shape, n_actions):
        self.mem_size = max_size
        self.mem_cntr = 0
        self.state_memory = np.zeros((self.mem_size, *input_shape))
        self.new_state_memory = np.zeros((self.mem_size, *input_shape))
        self.action_memory = np.zeros((self.mem_size, n_actions))
        self.reward_memory = np.zeros(self.mem_size)
        self.terminal_memory = np.zeros(self.mem_size, dtype=bool)
    def store_transition(self, state, action, reward, state_, done):
        index = self.mem_cntr % self.mem_size
        self.state_memory[index], self.new_state_memory[index] = state, state_
        self.action_memory[index], self.reward_memory[index] = action, reward
        self.terminal_memory[index] = done
        self.mem_cntr += 1
    def sample_buffer(self, batch_size):
        batch = np.random.choice(min(self.mem_cntr, self.mem_size), batch_size)
        return (self.state_memory[batch], self.action_memory[batch], self.reward_memory[batch],
                self.new_state_memory[batch], self.terminal_memory[batch])
class CriticNetwork(nn.Module):
    def __init__(self, beta, input_dims, n_actions, fc_dims=32, name='critic'):
        super().__init__()
        self.fc1 = nn.Linear(input_dims[0] + n_actions, fc_dims)
        self.q = nn.Linear(fc_dims, 1)
        self.optimizer = optim.Adam(self.parameters(), lr=beta)
    def forward(self, state, action):
        return self.q(F.relu(self.fc1(T.cat([state, action], dim=1))))
class ValueNetwork(nn.Module):
    def __init__(self, beta, input_dims, fc_dims=32, name='value'):
        super().__init__()
        self.fc1 = nn.Linear(*input_dims, fc_dims)
        self.v = nn.Linear(fc_dims, 1)
        self.optimizer = optim.Adam(self.parameters(), lr=beta)
    def forward(self, state):
        return self.v(F.relu(self.fc1(state)))
class ActorNetwork(nn.Module):
    def __init__(self, alpha, input_dims, max_action, fc_dims=32, n_actions=2, name='actor'):
        super().__init__()
        self.max_action = max_action
        self.reparam_noise = 1e-6
        self.fc1 = nn.Linear(*input_dims, fc_dims)
        self.mu = nn.Linear(fc_dims, n_actions)
        self.sigma = nn.Linear(fc_dims, n_actions)
        self.optimizer = optim.Adam(self.parameters(), lr=alpha)
    def forward(self, state):
        prob = F.relu(self.fc1(state))
        mu = self.mu(prob)
        sigma = T.clamp(self.sigma(prob), min=self.reparam_noise, max=1)
        return mu, sigma
    def sample_normal(self, state, reparameterize=True):
        mu, sigma = self.forward(state)
        probabilities = Normal(mu, sigma)
        actions = probabilities.rsample() if reparameterize else probabilities.sample()
        action = T.tanh(actions) * T.tensor(self.max_action)
        log_probs = probabilities.log_prob(actions)
        log_probs -= T.log(1 - action.pow(2) + self.reparam_noise)
        log_probs = log_probs.sum(1, keepdim=True)
        return action, log_probs
class Agent():
    def __init__(self, alpha=0.0003, beta=0.0003, input_dims=[8], max_action=1.0, gamma=0.99,
                 n_actions=2, max_size=1000, tau=0.005, batch_size=16, reward_scale=2):
        self.gamma = gamma
        self.tau = tau
        self.memory = ReplayBuffer(max_size, input_dims, n_actions)
        self.batch_size = batch_size
        self.n_actions = n_actions
        self.actor = ActorNetwork(alpha, input_dims, n_actions=n_actions, name='actor', max_action=max_action)
        self.critic_1 = CriticNetwork(beta, input_dims, n_actions=n_actions, name='critic_1')
        self.critic_2 = CriticNetwork(beta, input_dims, n_actions=n_actions, name='critic_2')
        self.value = ValueNetwork(beta, input_dims, name='value')
        self.target_value = ValueNetwork(beta, input_dims, name='target_value')
        self.scale = reward_scale
        self.update_network_parameters(tau=1)
    def remember(self, state, action, reward, new_state, done):
        self.memory.store_transition(state, action, reward, new_state, done)
    def update_network_parameters(self, tau=None):
        if tau is None:
            tau = self.tau
        target_value_state_dict = dict(self.target_value.named_parameters())
        value_state_dict = dict(self.value.named_parameters())
        for name in value_state_dict:
            value_state_dict[name] = tau * value_state_dict[name].clone() + \
                (1 - tau) * target_value_state_dict[name].clone()
        self.target_value.load_state_dict(value_state_dict)
    def learn(self):
        if self.memory.mem_cntr < self.batch_size:
            return
        state, action, reward, new_state, done = self.memory.sample_buffer(self.batch_size)
        reward = T.tensor(reward, dtype=T.float)
        done = T.tensor(done)
        state_ = T.tensor(new_state, dtype=T.float)
        state = T.tensor(state, dtype=T.float)
        action = T.tensor(action, dtype=T.float)
        value = self.value(state).view(-1)
        value_ = self.target_value(state_).view(-1)
        value_[done] = 0.0
        actions, log_probs = self.actor.sample_normal(state, reparameterize=False)
        log_probs = log_probs.view(-1)
        q1_new_policy = self.critic_1.forward(state, actions)
        q2_new_policy = self.critic_2.forward(state, actions)
        critic_value = T.min(q1_new_policy, q2_new_policy).view(-1)
        self.value.optimizer.zero_grad()
        value_target = critic_value - log_probs
        value_loss = 0.5 * F.mse_loss(value, value_target)
        value_loss.backward(retain_graph=True)
        self.value.optimizer.step()
        actions, log_probs = self.actor.sample_normal(state, reparameterize=True)
        log_probs = log_probs.view(-1)
        q1_new_policy = self.critic_1.forward(state, actions)
        q2_new_policy = self.critic_2.forward(state, actions)
        critic_value = T.min(q1_new_policy, q2_new_policy).view(-1)
        actor_loss = T.mean(log_probs - critic_value)
        self.actor.optimizer.zero_grad()
        actor_loss.backward(retain_graph=True)
        self.actor.optimizer.step()
        self.critic_1.optimizer.zero_grad()
        self.critic_2.optimizer.zero_grad()
        q_hat = self.scale * reward + self.gamma * value_
        q1_old_policy = self.critic_1.forward(state, action).view(-1)
        q2_old_policy = self.critic_2.forward(state, action).view(-1)
        critic_1_loss = 0.5 * F.mse_loss(q1_old_policy, q_hat)
        critic_2_loss = 0.5 * F.mse_loss(q2_old_policy, q_hat)
        critic_loss = critic_1_loss + critic_2_loss
        critic_loss.backward()
        self.critic_1.optimizer.step()
        self.critic_2.optimizer.step()
        self.update_network_parameters()
if __name__ == "__main__":
    np.random.seed(0)
    T.manual_seed(0)
    agent = Agent(input_dims=[3], n_actions=2)
    for _ in range(40):
        agent.remember(np.random.randn(3), np.random.uniform(-1, 1, 2), np.random.rand(), np.random.randn(3), np.random.rand() < 0.1)
    critic_hits = []
    agent.critic_1.fc1.weight.register_hook(lambda g: critic_hits.append(1))
    agent.learn()
    tv = agent.target_value.fc1.weight
    assert tv.grad is not None and tv.grad.abs().sum() > 0  # the target network got a gradient from q_hat
    assert len(critic_hits) == 3  # value_loss (through value_target), actor_loss and critic_loss
    print("evidence holds: both regression targets carry graphs: into target_value and into the critics")
