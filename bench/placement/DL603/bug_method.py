# source: placement matrix
# category: DL603
# expect: flag 20
# evidence: Agent.learn computes the target from self.target with grad on; backward fills self.target's .grad.
import copy
import torch

torch.manual_seed(0)


class Agent:
    def __init__(self):
        self.online = torch.nn.Sequential(torch.nn.Linear(4, 12), torch.nn.ReLU(), torch.nn.Linear(12, 2))
        self.target = copy.deepcopy(self.online)
        self.updater = torch.optim.RMSprop(self.online.parameters(), lr=1e-3)
        self.discount = 0.95

    def learn(self, states, actions, rewards, next_states, dones):
        q_sa = self.online(states).gather(1, actions.unsqueeze(-1)).squeeze(-1)
        q_next = self.target(next_states).max(1).values
        goal = rewards + self.discount * q_next * (1 - dones)
        td = torch.nn.functional.mse_loss(q_sa, goal)
        self.updater.zero_grad()
        td.backward()
        self.updater.step()


if __name__ == "__main__":
    ag = Agent()
    ag.learn(torch.randn(4, 4), torch.tensor([0, 1, 1, 0]), torch.randn(4), torch.randn(4, 4), torch.zeros(4))
    assert all(p.grad is not None for p in ag.target.parameters())
    print("evidence holds: gradients leaked into self.target")
