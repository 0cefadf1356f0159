# source: https://github.com/ClownW/Reinforcement-learning-with-PyTorch/issues/3
# category: DL402
# expect: flag 89, 94
# evidence: learn() stores the loss tensor itself in cost_his, so plot_cost's conversion of the history to a numpy array raises "Can't call numpy() on Tensor that requires grad"
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, n_feature, n_hidden, n_output):
        super(Net, self).__init__()
        self.el = nn.Linear(n_feature, n_hidden)
        self.q = nn.Linear(n_hidden, n_output)

    def forward(self, x):
        x = self.el(x)
        x = F.relu(x)
        return self.q(x)


class DeepQNetwork():
    def __init__(self, n_actions, n_features, n_hidden=20, learning_rate=0.01, reward_decay=0.9, e_greedy=0.9,
                 replace_target_iter=200, memory_size=500, batch_size=32, e_greedy_increment=None):
        self.n_actions = n_actions
        self.n_features = n_features
        self.n_hidden = n_hidden
        self.lr = learning_rate
        self.gamma = reward_decay
        self.epsilon_max = e_greedy
        self.replace_target_iter = replace_target_iter
        self.memory_size = memory_size
        self.batch_size = batch_size
        self.epsilon_increment = e_greedy_increment
        self.epsilon = 0 if e_greedy_increment is not None else self.epsilon_max
        self.learn_step_counter = 0
        self.memory = np.zeros((self.memory_size, n_features * 2 + 2))
        self.loss_func = nn.MSELoss()
        self.cost_his = []
        self._build_net()

    def _build_net(self):
        self.q_eval = Net(self.n_features, self.n_hidden, self.n_actions)
        self.q_target = Net(self.n_features, self.n_hidden, self.n_actions)
        self.optimizer = torch.optim.RMSprop(self.q_eval.parameters(), lr=self.lr)

    def store_transition(self, s, a, r, s_):
        if not hasattr(self, 'memory_counter'):
            self.memory_counter = 0
        transition = np.hstack((s, [a, r], s_))
        index = self.memory_counter % self.memory_size
        self.memory[index, :] = transition
        self.memory_counter += 1

    def choose_action(self, observation):
        observation = torch.Tensor(observation[np.newaxis, :])
        if np.random.uniform() < self.epsilon:
            actions_value = self.q_eval(observation)
            action = np.argmax(actions_value.data.numpy())
        else:
            action = np.random.randint(0, self.n_actions)
        return action

    def learn(self):
        if self.learn_step_counter % self.replace_target_iter == 0:
            self.q_target.load_state_dict(self.q_eval.state_dict())

        if self.memory_counter > self.memory_size:
            sample_index = np.random.choice(self.memory_size, size=self.batch_size)
        else:
            sample_index = np.random.choice(self.memory_counter, size=self.batch_size)
        batch_memory = self.memory[sample_index, :]

        q_next = self.q_target(torch.Tensor(batch_memory[:, -self.n_features:]))
        q_eval = self.q_eval(torch.Tensor(batch_memory[:, :self.n_features]))
        q_target = torch.Tensor(q_eval.data.numpy().copy())

        batch_index = np.arange(self.batch_size, dtype=np.int32)
        eval_act_index = batch_memory[:, self.n_features].astype(int)
        reward = torch.Tensor(batch_memory[:, self.n_features + 1])
        q_target[batch_index, eval_act_index] = reward + self.gamma * torch.max(q_next, 1)[0]

        loss = self.loss_func(q_eval, q_target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

        self.cost_his.append(loss)
        self.epsilon = self.epsilon + self.epsilon_increment if self.epsilon < self.epsilon_max else self.epsilon_max
        self.learn_step_counter += 1

    def plot_cost(self):
        steps, costs = np.arange(len(self.cost_his)), np.asarray(self.cost_his)
        return steps, costs  # handed to plt.plot(steps, costs) in the original


class Maze:
    """A 1-d corridor standing in for the tkinter maze: reach the right end."""

    n_actions, n_features = 2, 2

    def reset(self):
        self.pos = 0
        return np.array([0.0, 0.0])

    def step(self, action):
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        done = self.pos >= 4
        return np.array([self.pos / 4.0, 0.0]), (1.0 if done else 0.0), done


def run_maze(env, RL, episodes=3):
    step = 0
    for episode in range(episodes):
        observation = env.reset()
        for _ in range(20):
            action = RL.choose_action(observation)
            observation_, reward, done = env.step(action)
            RL.store_transition(observation, action, reward, observation_)
            if step > 5 and step % 2 == 0:
                RL.learn()
            observation = observation_
            step += 1
            if done:
                break


if __name__ == "__main__":
    np.random.seed(1)
    torch.manual_seed(1)
    env = Maze()
    RL = DeepQNetwork(env.n_actions, env.n_features, learning_rate=0.01, reward_decay=0.9, e_greedy=0.9,
                      replace_target_iter=20, memory_size=100, batch_size=8)
    run_maze(env, RL)
    assert len(RL.cost_his) > 0 and RL.cost_his[0].requires_grad

    try:
        RL.plot_cost()
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "Can't call numpy() on Tensor that requires grad" in raised, raised
    print("evidence holds: the cost history holds loss tensors and converting it to numpy for the plot raises")
