# source: placement matrix
# category: DL102
# expect: flag 20
# evidence: Agent.learn syncs self.q_target by rebinding .data to self.q's storage, so the next self.updater step moves the target too: it ends sharing storage with, and equal to, self.q.
import copy
import torch


class Agent:
    def __init__(self, q, period):
        self.q = q
        self.q_target = copy.deepcopy(q).requires_grad_(False)
        self.updater = torch.optim.RMSprop(self.q.parameters(), lr=0.01)
        self.period = period
        self.steps = 0

    def learn(self, s, a, r, s2):
        if self.steps % self.period == 0:
            for tgt, src in zip(self.q_target.parameters(), self.q.parameters()):
                tgt.data = src.data
        with torch.no_grad():
            y = r + 0.95 * self.q_target(s2).amax(1)
        td = self.q(s).gather(1, a[:, None]).squeeze(1) - y
        self.updater.zero_grad()
        td.pow(2).mean().backward()
        self.updater.step()
        self.steps += 1


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = Agent(torch.nn.Linear(4, 3), period=2)
    for _ in range(4):
        agent.learn(torch.randn(8, 4), torch.randint(0, 3, (8,)), torch.randn(8), torch.randn(8, 4))
    # last sync at step 2, then step 3 updated only agent.q: the target should lag behind
    pairs = list(zip(agent.q_target.parameters(), agent.q.parameters()))
    assert all(t.data_ptr() == o.data_ptr() for t, o in pairs)
    assert all(torch.equal(t, o) for t, o in pairs), "target lags behind the online net"
    print("evidence holds: the .data rebind aliased the target to the online weights (the updater moved the target)")
