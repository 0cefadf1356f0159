# source: https://github.com/automl/DACBench/issues/95
# category: DL303
# expect: flag 99, 211, 214
# evidence: DQN.eval() resets the SGD benchmark env inside torch.no_grad(); SGDEnv.reset() runs a training batch through get_default_reward/_train_batch_, and loss.mean().backward() raises "element 0 of tensors does not require grad".
from functools import reduce
from itertools import count
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class SGDEnv:
    """DACBench SGD benchmark env (learning-rate control of a small classifier)"""
    def __init__(self, config):
        self.instance = config["instance"]
        self.batch_size = config["training_batch_size"]
        self.cutoff = config["cutoff"]
        self.action_values = config["action_values"]
        self.device = "cpu"
        self.beta1, self.beta2, self.epsilon = config["beta1"], config["beta2"], 1.0e-06
        self.loss_function = nn.NLLLoss(reduction="none")
        self.get_reward = config.get("reward_function", self.get_default_reward)
        self.get_state = config.get("state_method", self.get_default_state)

    def seed(self, seed):
        torch.manual_seed(seed)
        np.random.seed(seed)

    def _architecture_constructor(self, arch_str):
        layers = [eval(layer) for layer in arch_str.split("|")]
        return lambda: nn.Sequential(*layers)

    def reset(self):
        self.c_step = 0
        dataset, instance_seed, construct_model = self.instance
        self.seed(instance_seed)
        self.model = self._architecture_constructor(construct_model)().to(self.device)
        x, y = dataset
        n_train = int(0.8 * len(x))
        self.train_loader = [(x[i:i + self.batch_size], y[i:i + self.batch_size])
                             for i in range(0, n_train, self.batch_size)]
        self.validation_loader = [(x[n_train:], y[n_train:])]
        self.train_loader_it = iter(self.train_loader)
        self.validation_loader_it = iter(self.validation_loader)
        self.parameter_count = 0
        self.layer_sizes = []
        for p in self.model.parameters():
            layer_size = reduce(lambda x, y: x * y, p.shape)
            self.layer_sizes.append(layer_size)
            self.parameter_count += layer_size
        self._set_zero_grad()
        self.model.train()
        self.current_training_loss = None
        self.loss_batch = None
        # Adam parameters
        self.m = 0
        self.v = 0
        self.t = 0
        self.step_count = torch.zeros(1, device=self.device, requires_grad=False)
        self.current_lr = 0.002
        self.get_default_reward(self)
        return self.get_state(self)

    def step(self, action):
        self.c_step += 1
        done = self.c_step >= self.cutoff
        new_lr = 10 ** (-float(self.action_values[action]))
        self.current_lr = new_lr
        self.t += 1
        g = torch.cat([p.grad.reshape(-1) for p in self.model.parameters()])
        self.m = self.beta1 * self.m + (1 - self.beta1) * g
        self.v = self.beta2 * self.v + (1 - self.beta2) * g ** 2
        delta_w = torch.div(new_lr * (self.m / (1 - self.beta1 ** self.t)),
                            torch.sqrt(self.v / (1 - self.beta2 ** self.t)) + self.epsilon)
        index = 0
        for i, p in enumerate(self.model.parameters()):
            layer_size = self.layer_sizes[i]
            p.data = p.data - delta_w[index: index + layer_size].reshape(shape=p.data.shape)
            index += layer_size
        self._set_zero_grad()
        reward = self.get_reward(self)
        return self.get_state(self), reward, done, {}

    def get_default_reward(self, _):
        try:
            reward = self._train_batch_()
        except StopIteration:
            self.train_loader_it = iter(self.train_loader)
            reward = self._train_batch_()
        return reward

    def _train_batch_(self):
        (data, target) = next(self.train_loader_it)
        data, target = data.to(self.device), target.to(self.device)
        output = self.model(data)
        loss = self.loss_function(output, target)
        loss.mean().backward()
        loss_value = loss.mean()
        reward = self._get_validation_loss()
        self.loss_batch = loss
        self.current_training_loss = torch.unsqueeze(loss_value.detach(), dim=0)
        return reward

    def _get_validation_loss(self):
        self.model.eval()
        validation_loss = torch.zeros(1, device=self.device, requires_grad=False)
        with torch.no_grad():
            for data, target in self.validation_loader:
                output = self.model(data)
                validation_loss += self.loss_function(output, target).mean()
        self.model.train()
        return -validation_loss.item()

    def get_default_state(self, _):
        return np.array([self.current_lr, float(self.current_training_loss), self.c_step], dtype=np.float32)

    def _set_zero_grad(self):
        for p in self.model.parameters():
            if p.grad is None:
                continue
            p.grad.zero_()


class Q(nn.Module):
    def __init__(self, state_dim, action_dim, non_linearity=F.relu, hidden_dim=50):
        super(Q, self).__init__()
        self.fc1 = nn.Linear(state_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, hidden_dim)
        self.fc3 = nn.Linear(hidden_dim, action_dim)
        self._non_linearity = non_linearity

    def forward(self, x):
        x = self._non_linearity(self.fc1(x))
        x = self._non_linearity(self.fc2(x))
        return self.fc3(x)


def tt(ndarray):
    return torch.from_numpy(ndarray).float()


def soft_update(target, source, tau):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)


class ReplayBuffer:
    def __init__(self, max_size):
        self._data = {"states": [], "actions": [], "next_states": [], "rewards": [], "terminal_flags": []}
        self._max_size = max_size

    def add_transition(self, state, action, next_state, reward, done):
        for k, v in zip(self._data, (state, action, next_state, reward, done)):
            self._data[k].append(v)

    def random_next_batch(self, batch_size):
        idx = np.random.choice(len(self._data["states"]), batch_size)
        return tuple(tt(np.array([self._data[k][i] for i in idx], dtype=np.float32)) for k in self._data)


class DQN:
    def __init__(self, state_dim, action_dim, gamma, env, eval_env):
        self._q = Q(state_dim, action_dim)
        self._q_target = Q(state_dim, action_dim)
        self._gamma = gamma
        self._loss_function = nn.MSELoss()
        self._q_optimizer = optim.Adam(self._q.parameters(), lr=0.001)
        self._action_dim = action_dim
        self._replay_buffer = ReplayBuffer(1e6)
        self._env = env
        self._eval_env = eval_env

    def get_action(self, x, epsilon):
        u = np.argmax(self._q(tt(x)).detach().numpy())
        r = np.random.uniform()
        if r < epsilon:
            return np.random.randint(self._action_dim)
        return u

    def train(self, episodes, max_env_time_steps, epsilon, eval_eps=1, eval_every_n_steps=1,
              max_train_time_steps=1_000_000, batch_size=8):
        total_steps = 0
        for e in range(episodes):
            s = self._env.reset()
            for t in range(max_env_time_steps):
                a = self.get_action(s, epsilon)
                ns, r, d, _ = self._env.step(a)
                total_steps += 1
                if total_steps % eval_every_n_steps == 0:
                    self.eval(eval_eps, max_env_time_steps)
                self._replay_buffer.add_transition(s, a, ns, r, d)
                batch_states, batch_actions, batch_next_states, batch_rewards, batch_terminal_flags = \
                    self._replay_buffer.random_next_batch(batch_size)
                target = batch_rewards + (1 - batch_terminal_flags) * self._gamma * \
                    self._q_target(batch_next_states)[torch.arange(batch_size).long(),
                                                      torch.argmax(self._q(batch_next_states), dim=1)]
                current_prediction = self._q(batch_states)[torch.arange(batch_size).long(), batch_actions.long()]
                loss = self._loss_function(current_prediction, target.detach())
                self._q_optimizer.zero_grad()
                loss.backward()
                self._q_optimizer.step()
                soft_update(self._q_target, self._q, 0.01)
                if d:
                    break
                s = ns

    def eval(self, episodes, max_env_time_steps):
        steps, rewards, decisions = [], [], []
        with torch.no_grad():
            for e in range(episodes):
                ed, es, er = 0, 0, 0
                s = self._eval_env.reset()
                for _ in count():
                    a = self.get_action(s, 0)
                    ed += 1
                    ns, r, d, _ = self._eval_env.step(a)
                    er += r
                    es += 1
                    if es >= max_env_time_steps or d:
                        break
                    s = ns
                steps.append(es)
                rewards.append(er)
                decisions.append(ed)
        return steps, rewards, decisions


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    x = torch.randn(80, 10)
    y = (x[:, 0] > 0).long()
    config = {"instance": ((x, y), 0, "nn.Linear(10, 8)|nn.ReLU()|nn.Linear(8, 2)|nn.LogSoftmax(dim=1)"),
              "training_batch_size": 16, "cutoff": 5, "action_values": [1, 2, 3, 4], "beta1": 0.9, "beta2": 0.999}
    env, eval_env = SGDEnv(config), SGDEnv(config)
    agent = DQN(state_dim=3, action_dim=4, gamma=0.99, env=env, eval_env=eval_env)
    try:
        agent.train(episodes=1, max_env_time_steps=5, epsilon=0.2, eval_eps=1, eval_every_n_steps=2)
        raise AssertionError("expected backward to fail inside eval()")
    except RuntimeError as err:
        msg = str(err)
    assert "does not require grad" in msg, msg
    assert env.c_step == 2  # the training env reset and stepped fine; eval_env.reset() failed
    print("evidence holds: eval_env.reset() under no_grad raised:", msg.splitlines()[0])
