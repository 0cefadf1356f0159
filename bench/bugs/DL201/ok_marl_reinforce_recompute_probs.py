# source: https://github.com/starry-sky6688/MARL-Algorithms/issues/81
# category: DL201
# expect: clean
# evidence: the rollout keeps only sampled actions (plain numbers); Reinforce.learn recomputes the action probabilities with the RNN, so the loss backpropagates into every eval_rnn parameter and the step changes them
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as f
from torch.distributions import Categorical

torch.manual_seed(0)
np.random.seed(0)


class RNN(nn.Module):
    # Because all the agents share the same network, input_shape=obs_shape+n_actions+n_agents
    def __init__(self, input_shape, args):
        super(RNN, self).__init__()
        self.args = args
        self.fc1 = nn.Linear(input_shape, args.rnn_hidden_dim)
        self.rnn = nn.GRUCell(args.rnn_hidden_dim, args.rnn_hidden_dim)
        self.fc2 = nn.Linear(args.rnn_hidden_dim, args.n_actions)

    def forward(self, obs, hidden_state):
        x = f.relu(self.fc1(obs))
        h_in = hidden_state.reshape(-1, self.args.rnn_hidden_dim)
        h = self.rnn(x, h_in)
        q = self.fc2(h)
        return q, h


class Reinforce:
    def __init__(self, args):
        self.n_actions = args.n_actions
        self.n_agents = args.n_agents
        self.obs_shape = args.obs_shape
        self.args = args
        self.eval_rnn = RNN(self.obs_shape, args)
        self.rnn_parameters = list(self.eval_rnn.parameters())
        self.rnn_optimizer = torch.optim.RMSprop(self.rnn_parameters, lr=args.lr_actor)
        self.eval_hidden = None

    def learn(self, batch, max_episode_len, train_step, epsilon):  # train_step is only used for logging
        episode_num = batch['o'].shape[0]
        self.init_hidden(episode_num)
        for key in batch.keys():  # transfer the data in batch into tensor
            if key == 'u':
                batch[key] = torch.tensor(batch[key], dtype=torch.long)
            else:
                batch[key] = torch.tensor(batch[key], dtype=torch.float32)
        u, r, avail_u, terminated = batch['u'], batch['r'], batch['avail_u'], batch['terminated']
        mask = (1 - batch["padded"].float())

        # calculate n_return
        n_return = self._get_returns(r, mask, terminated, max_episode_len)

        # calculate the probability of each action
        action_prob = self._get_action_prob(batch, max_episode_len, epsilon)  # (episode_num, max_episode_len, n_agents, n_actions)
        mask = mask.repeat(1, 1, self.n_agents)

        pi_taken = torch.gather(action_prob, dim=3, index=u).squeeze(3)
        pi_taken = torch.where(mask == 0, torch.ones_like(pi_taken), pi_taken)
        log_pi_taken = torch.log(pi_taken)

        loss = - ((n_return * log_pi_taken) * mask).sum() / mask.sum()
        self.rnn_optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.rnn_parameters, self.args.grad_norm_clip)
        self.rnn_optimizer.step()
        return loss.item()

    def _get_returns(self, r, mask, terminated, max_episode_len):
        r = r.squeeze(-1)
        mask = mask.squeeze(-1)
        terminated = terminated.squeeze(-1)
        terminated = 1 - terminated
        n_return = torch.zeros_like(r)
        n_return[:, max_episode_len - 1] = r[:, max_episode_len - 1] * mask[:, max_episode_len - 1]
        for transition_idx in range(max_episode_len - 2, -1, -1):
            n_return[:, transition_idx] = (r[:, transition_idx] + self.args.gamma * n_return[:, transition_idx + 1] * terminated[:, transition_idx]) * mask[:, transition_idx]
        return n_return.unsqueeze(-1).expand(-1, -1, self.n_agents)

    def _get_action_prob(self, batch, max_episode_len, epsilon):
        episode_num = batch['o'].shape[0]
        avail_actions = batch['avail_u']
        action_prob = []
        for transition_idx in range(max_episode_len):
            inputs = batch['o'][:, transition_idx].reshape(episode_num * self.n_agents, -1)
            outputs, self.eval_hidden = self.eval_rnn(inputs, self.eval_hidden)
            outputs = outputs.view(episode_num, self.n_agents, -1)
            prob = torch.nn.functional.softmax(outputs, dim=-1)
            action_prob.append(prob)
        action_prob = torch.stack(action_prob, dim=1).cpu()
        action_num = avail_actions.sum(dim=-1, keepdim=True).float().repeat(1, 1, 1, avail_actions.shape[-1])
        action_prob = ((1 - epsilon) * action_prob + torch.ones_like(action_prob) * epsilon / action_num)
        action_prob = torch.where(avail_actions == 0, torch.zeros_like(action_prob), action_prob)
        action_prob = action_prob / action_prob.sum(dim=-1, keepdim=True)
        return action_prob

    def init_hidden(self, episode_num):
        self.eval_hidden = torch.zeros((episode_num, self.n_agents, self.args.rnn_hidden_dim))


class Agents:
    def __init__(self, args):
        self.n_actions = args.n_actions
        self.n_agents = args.n_agents
        self.policy = Reinforce(args)
        self.args = args

    def choose_action(self, obs, agent_num, avail_actions, epsilon, evaluate=False):
        inputs = torch.tensor(obs, dtype=torch.float32).unsqueeze(0)
        avail_actions = torch.tensor(avail_actions, dtype=torch.float32).unsqueeze(0)
        hidden_state = self.policy.eval_hidden[:, agent_num, :]
        q_value, self.policy.eval_hidden[:, agent_num, :] = self.policy.eval_rnn(inputs, hidden_state)
        action = self._choose_action_from_softmax(q_value.cpu(), avail_actions, epsilon, evaluate)
        return action

    def _choose_action_from_softmax(self, inputs, avail_actions, epsilon, evaluate=False):
        action_num = avail_actions.sum(dim=1, keepdim=True).float().repeat(1, avail_actions.shape[-1])
        prob = torch.nn.functional.softmax(inputs, dim=-1)
        prob = ((1 - epsilon) * prob + torch.ones_like(prob) * epsilon / action_num)
        prob = torch.where(avail_actions == 0, torch.zeros_like(prob), prob)
        if epsilon == 0 and evaluate:
            action = torch.argmax(prob)
        else:
            action = Categorical(prob).sample().long()
        return action

    def train(self, batch, train_step, epsilon=None):
        max_episode_len = batch['o'].shape[1]
        return self.policy.learn(batch, max_episode_len, train_step, epsilon)


class RolloutWorker:
    def __init__(self, agents, args):
        self.agents = agents
        self.args = args

    @torch.no_grad()
    def generate_episode(self, epsilon):
        o, u, r, avail_u, terminate, padded = [], [], [], [], [], []
        self.agents.policy.init_hidden(1)
        for step in range(self.args.episode_limit):
            obs = np.random.randn(self.args.n_agents, self.args.obs_shape).astype(np.float32)
            actions, avail_actions = [], []
            for agent_id in range(self.args.n_agents):
                avail_action = [1] * self.args.n_actions
                action = self.agents.choose_action(obs[agent_id], agent_id, avail_action, epsilon)
                actions.append(int(action))
                avail_actions.append(avail_action)
            reward = float(sum(a == 0 for a in actions))
            o.append(obs)
            u.append(np.reshape(actions, [self.args.n_agents, 1]))
            avail_u.append(avail_actions)
            r.append([reward])
            terminate.append([float(step == self.args.episode_limit - 1)])
            padded.append([0.])
        return dict(o=np.array(o), u=np.array(u), r=np.array(r), avail_u=np.array(avail_u),
                    padded=np.array(padded), terminated=np.array(terminate))


class Args:
    n_actions = 3
    n_agents = 2
    obs_shape = 5
    rnn_hidden_dim = 16
    lr_actor = 1e-2
    gamma = 0.99
    grad_norm_clip = 10
    episode_limit = 6


if __name__ == "__main__":
    args = Args()
    agents = Agents(args)
    worker = RolloutWorker(agents, args)
    episodes = [worker.generate_episode(epsilon=0.1) for _ in range(2)]
    batch = {k: np.stack([ep[k] for ep in episodes]) for k in episodes[0]}
    before = [p.detach().clone() for p in agents.policy.rnn_parameters]
    loss = agents.train(batch, train_step=0, epsilon=0.1)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in agents.policy.rnn_parameters)
    assert all(not torch.equal(b, p.detach()) for b, p in zip(before, agents.policy.rnn_parameters))
    print("evidence holds: learn() recomputes the action probabilities, every eval_rnn parameter gets a "
          "gradient and changes (loss %.4f)" % loss)
