# source: https://github.com/kc-ml2/SimpleDreamer/issues/7
# category: DL301
# expect: flag 125, 129, 134, 136, 148
# evidence: Dreamer.evaluate() never calls backward, yet the deterministic/posterior states it rolls forward carry grad_fn and the autograd graph grows with every environment step of the episode.
import numpy as np
import torch
import torch.nn as nn
from types import SimpleNamespace


def attrdict(d):
    return SimpleNamespace(**{k: attrdict(v) if isinstance(v, dict) else v for k, v in d.items()})


class Encoder(nn.Module):
    def __init__(self, observation_shape, config):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(observation_shape[0], config.embedded_state_size), nn.ELU())

    def forward(self, x):
        return self.network(x)


class RecurrentModel(nn.Module):
    def __init__(self, action_size, config):
        super().__init__()
        self.linear = nn.Linear(config.stochastic_size + action_size, config.deterministic_size)
        self.recurrent = nn.GRUCell(config.deterministic_size, config.deterministic_size)

    def forward(self, embedded_state, action, deterministic):
        x = torch.cat((embedded_state, action), 1)
        x = torch.relu(self.linear(x))
        return self.recurrent(x, deterministic)


class RepresentationModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.network = nn.Linear(config.embedded_state_size + config.deterministic_size, config.stochastic_size * 2)

    def forward(self, embedded_observation, deterministic):
        x = self.network(torch.cat((embedded_observation, deterministic), 1))
        mean, std = torch.chunk(x, 2, -1)
        std = torch.nn.functional.softplus(std) + 0.1
        prior_dist = torch.distributions.Normal(mean, std)
        return prior_dist, prior_dist.rsample()


class RSSM(nn.Module):
    def __init__(self, action_size, config):
        super().__init__()
        self.config = config.rssm
        self.recurrent_model = RecurrentModel(action_size, config)
        self.representation_model = RepresentationModel(config)

    def recurrent_model_input_init(self, batch_size):
        return (torch.zeros(batch_size, self.config.stochastic_size),
                torch.zeros(batch_size, self.config.deterministic_size))


class Actor(nn.Module):
    def __init__(self, discrete_action_bool, action_size, config):
        super().__init__()
        self.discrete_action_bool = discrete_action_bool
        self.network = nn.Linear(config.stochastic_size + config.deterministic_size, action_size)

    def forward(self, posterior, deterministic):
        x = self.network(torch.cat((posterior, deterministic), -1))
        if self.discrete_action_bool:
            return torch.nn.functional.one_hot(x.argmax(-1), x.shape[-1]).float() + x.softmax(-1) - x.softmax(-1).detach()
        return torch.tanh(x)


class ReplayBuffer:
    def __init__(self):
        self.storage = []

    def add(self, observation, action, reward, next_observation, done):
        self.storage.append((observation, action, reward, next_observation, done))


class Writer:
    def add_scalar(self, tag, value, step):
        pass


class PointEnv:
    """tiny continuous-control stand-in: episode of fixed length"""
    def __init__(self, episode_length=20):
        self.episode_length = episode_length

    def reset(self):
        self.t = 0
        self.state = np.random.randn(4).astype(np.float32)
        return self.state

    def step(self, action):
        self.t += 1
        self.state = (self.state + 0.1 * np.concatenate([action, action])).astype(np.float32)
        return self.state, float(-np.abs(self.state).sum()), self.t >= self.episode_length, {}


class Dreamer:
    def __init__(self, observation_shape, discrete_action_bool, action_size, writer, device, config):
        self.device = device
        self.action_size = action_size
        self.discrete_action_bool = discrete_action_bool
        self.encoder = Encoder(observation_shape, config.parameters.dreamer.encoder).to(self.device)
        self.rssm = RSSM(action_size, config.parameters.dreamer).to(self.device)
        self.actor = Actor(discrete_action_bool, action_size, config.parameters.dreamer).to(self.device)
        self.buffer = ReplayBuffer()
        self.config = config.parameters.dreamer
        self.writer = writer
        self.num_total_episode = 0

    def train(self, env):
        if len(self.buffer.storage) == 0:
            self.environment_interaction(env, self.config.seed_episodes)
        # ... dynamic_learning / behavior_learning on sampled batches ...

    def evaluate(self, env):
        self.environment_interaction(env, self.config.num_evaluate, train=False)

    def environment_interaction(self, env, num_interaction_episodes, train=True):
        for epi in range(num_interaction_episodes):
            posterior, deterministic = self.rssm.recurrent_model_input_init(1)
            action = torch.zeros(1, self.action_size).to(self.device)
            observation = env.reset()
            embedded_observation = self.encoder(torch.from_numpy(observation).float().to(self.device))
            score = 0
            score_lst = np.array([])
            done = False
            while not done:
                deterministic = self.rssm.recurrent_model(posterior, action, deterministic)
                embedded_observation = embedded_observation.reshape(1, -1)
                _, posterior = self.rssm.representation_model(embedded_observation, deterministic)
                action = self.actor(posterior, deterministic).detach()
                if self.discrete_action_bool:
                    buffer_action = action.cpu().numpy()
                    env_action = buffer_action.argmax()
                else:
                    buffer_action = action.cpu().numpy()[0]
                    env_action = buffer_action
                next_observation, reward, done, info = env.step(env_action)
                if train:
                    self.buffer.add(observation, buffer_action, reward, next_observation, done)
                score += reward
                embedded_observation = self.encoder(torch.from_numpy(next_observation).float().to(self.device))
                observation = next_observation
                if done:
                    if train:
                        self.num_total_episode += 1
                        self.writer.add_scalar("training score", score, self.num_total_episode)
                    else:
                        score_lst = np.append(score_lst, score)
                    break
        if not train:
            evaluate_score = score_lst.mean()
            print("evaluate score : ", evaluate_score)
            self.writer.add_scalar("test score", evaluate_score, self.num_total_episode)


def graph_size(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        stack.extend(f for f, _ in fn.next_functions)
    return len(seen)


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    config = attrdict({"parameters": {"dreamer": {
        "seed_episodes": 1, "num_evaluate": 1, "embedded_state_size": 8, "stochastic_size": 4,
        "deterministic_size": 8, "encoder": {"embedded_state_size": 8},
        "rssm": {"stochastic_size": 4, "deterministic_size": 8}}}})
    agent = Dreamer((4,), False, 2, Writer(), "cpu", config)
    states = []
    agent.rssm.recurrent_model.register_forward_hook(lambda m, i, o: states.append(o))
    agent.train(PointEnv())
    states.clear()
    agent.evaluate(PointEnv())
    assert len(states) == 20
    assert all(s.requires_grad and s.grad_fn is not None for s in states)
    sizes = [graph_size(s) for s in states]
    assert all(b > a for a, b in zip(sizes, sizes[1:])), sizes
    print("evidence holds: evaluation states carry grad_fn; graph grows from %d to %d nodes over one episode" % (sizes[0], sizes[-1]))
