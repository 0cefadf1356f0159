# source: https://github.com/Jacklinkk/Graph_CAVs/issues/9
# category: DL603
# expect: flag 107, 108, 110, 111, 113
# evidence: in learn_onestep the critic target comes from critic_model_target/actor_model_target without detach (while the prediction critic_value is the one detached), so when critic_optimizer steps the target networks hold gradients and critic_model holds none.
import collections
import copy
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class PrioritizedReplayBuffer(object):
    pass


class ReplayBuffer(object):
    def __init__(self, size):
        self.storage = collections.deque(maxlen=size)

    def add(self, state, action, reward, next_state, done):
        self.storage.append((state, action, reward, next_state, done))

    def sample(self, batch_size, n_steps=1):
        idx = np.random.randint(0, len(self.storage), size=batch_size)
        samples = {'weights': np.ones(batch_size, dtype=np.float32), 'indexes': idx}
        return samples, [self.storage[i] for i in idx]


class OUActionNoise(object):
    def __init__(self, mu, sigma=0.1):
        self.mu, self.sigma = mu, sigma

    def __call__(self):
        return self.mu + self.sigma * np.random.normal(size=self.mu.shape)


class Graph_Actor_Model(nn.Module):
    def __init__(self, N, F_dim, A):
        super().__init__()
        self.encoder = nn.Linear(F_dim, 16)
        self.policy = nn.Linear(16, A)

    def forward(self, observation):
        return torch.tanh(self.policy(F.relu(self.encoder(observation))))


class Graph_Critic_Model(nn.Module):
    def __init__(self, N, F_dim, A):
        super().__init__()
        self.encoder = nn.Linear(F_dim + A, 16)
        self.value = nn.Linear(16, 1)

    def forward(self, observation, action):
        return self.value(F.relu(self.encoder(torch.cat([observation, action], dim=-1))))


class DDPG(object):
    def __init__(self, actor_model, actor_optimizer, critic_model, critic_optimizer, explore_noise, replay_buffer,
                 batch_size, update_interval, target_update_interval, soft_update_tau, n_steps, gamma, model_name):
        self.actor_model = actor_model
        self.actor_optimizer = actor_optimizer
        self.critic_model = critic_model
        self.critic_optimizer = critic_optimizer
        self.explore_noise = explore_noise
        self.replay_buffer = replay_buffer
        self.batch_size = batch_size
        self.update_interval = update_interval
        self.target_update_interval = target_update_interval
        self.soft_update_tau = soft_update_tau
        self.n_steps = n_steps
        self.gamma = gamma
        self.model_name = model_name
        # Target network
        self.actor_model_target = copy.deepcopy(actor_model)
        self.critic_model_target = copy.deepcopy(critic_model)
        self.device = "cpu"
        self.time_counter = 0
        self.loss_record = collections.deque(maxlen=100)

    def store_transition(self, state, action, reward, next_state, done):
        self.replay_buffer.add(state, action, reward, next_state, done)

    def sample_memory(self):
        data_sample = self.replay_buffer.sample(self.batch_size, self.n_steps)
        return data_sample

    def choose_action(self, observation):
        action = self.actor_model(observation)
        noise = torch.as_tensor(self.explore_noise(), dtype=torch.float32).to(self.device)
        action = action + noise
        return action

    def loss_process(self, loss, weight):
        weight = torch.as_tensor(weight, dtype=torch.float32).to(self.device)
        loss = torch.mean(loss * weight.detach())
        return loss

    def learn_onestep(self, info_batch, data_batch):
        actor_loss = []
        critic_loss = []
        # ------loss of critic network------ #
        for elem in data_batch:
            state, action, reward, next_state, done = elem
            action = torch.as_tensor(action, dtype=torch.float32).to(self.device)
            # target value
            action_target = self.actor_model_target(next_state)
            critic_value_next = self.critic_model_target(next_state, action_target)
            critic_value = self.critic_model(state, action)
            critic_value = critic_value.detach()
            critic_target = reward + self.gamma * critic_value_next * (1 - done)

            critic_loss_sample = F.smooth_l1_loss(critic_value, critic_target)
            critic_loss.append(critic_loss_sample)
        # critic network update
        critic_loss_e = torch.stack(critic_loss)
        critic_loss_total = self.loss_process(critic_loss_e, info_batch['weights'])
        self.critic_optimizer.zero_grad()
        critic_loss_total.backward(retain_graph=True)
        self.critic_optimizer.step()
        # ------loss of actor network------ #
        for elem in data_batch:
            state, action, reward, next_state, done = elem
            mu = self.actor_model(state)
            actor_loss_sample = -1 * self.critic_model(state, mu)
            actor_loss_s = actor_loss_sample.mean()
            actor_loss.append(actor_loss_s)
        # actor network update
        actor_loss_e = torch.stack(actor_loss)
        actor_loss_total = self.loss_process(actor_loss_e, info_batch['weights'])
        self.actor_optimizer.zero_grad()
        actor_loss_total.backward(retain_graph=True)
        self.actor_optimizer.step()
        if isinstance(self.replay_buffer, PrioritizedReplayBuffer):
            self.replay_buffer.update_priority(info_batch['indexes'], (critic_loss_e + actor_loss_e))
        self.loss_record.append(float((critic_loss_total + actor_loss_total).detach().cpu().numpy()))

    def synchronize_target(self):
        assert 0.0 < self.soft_update_tau <= 1.0
        for target_param, source_param in zip(self.critic_model_target.parameters(), self.critic_model.parameters()):
            target_param.data.copy_((1 - self.soft_update_tau) * target_param.data + self.soft_update_tau * source_param.data)
        for target_param, source_param in zip(self.actor_model_target.parameters(), self.actor_model.parameters()):
            target_param.data.copy_((1 - self.soft_update_tau) * target_param.data + self.soft_update_tau * source_param.data)

    def learn(self):
        if (self.time_counter <= 2 * self.batch_size) or (self.time_counter % self.update_interval != 0):
            self.time_counter += 1
            return
        samples, data_sample = self.sample_memory()
        if self.n_steps == 1:  # single-step learning
            self.learn_onestep(samples, data_sample)
        if self.time_counter % self.target_update_interval == 0:
            self.synchronize_target()
        self.time_counter += 1


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    N, F_dim, A = 4, 6, 1  # vehicles, features per vehicle, action per vehicle
    actor = Graph_Actor_Model(N, F_dim, A)
    critic = Graph_Critic_Model(N, F_dim, A)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
    agent = DDPG(actor, actor_optimizer, critic, critic_optimizer, OUActionNoise(mu=np.zeros((N, A))),
                 ReplayBuffer(1000), batch_size=4, update_interval=1, target_update_interval=1000,
                 soft_update_tau=0.01, n_steps=1, gamma=0.9, model_name="DDPG")
    at_critic_step = []
    critic_step = critic_optimizer.step

    def recording_step(*a, **k):
        at_critic_step.append((all(p.grad is None for p in agent.critic_model.parameters()),
                               all(p.grad is not None for p in agent.critic_model_target.parameters()),
                               all(p.grad is not None for p in agent.actor_model_target.parameters())))
        return critic_step(*a, **k)

    critic_optimizer.step = recording_step
    state = torch.randn(N, F_dim)
    for t in range(12):
        with torch.no_grad():
            action = agent.choose_action(state).numpy()
        next_state = torch.randn(N, F_dim)
        agent.store_transition(state, action, float(np.random.rand()), next_state, 0)
        agent.learn()
        state = next_state
    assert len(at_critic_step) == 3, at_critic_step
    assert all(a == (True, True, True) for a in at_critic_step), at_critic_step
    print("evidence holds: at each critic_optimizer.step the target networks had gradients and critic_model had none")
