# source: placement matrix
# category: DL602
# expect: flag 22
# evidence: GANTrainer.step feeds self.generator's output to the critic loss without detach; the generator update raises "Trying to backward through the graph a second time".
import torch

torch.manual_seed(0)


class GANTrainer:
    def __init__(self):
        self.generator = torch.nn.Sequential(torch.nn.Linear(2, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
        self.critic = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))
        self.g_updater = torch.optim.Adam(self.generator.parameters(), lr=2e-4)
        self.d_updater = torch.optim.Adam(self.critic.parameters(), lr=2e-4)
        self.adv = torch.nn.BCEWithLogitsLoss()

    def step(self, real):
        n = real.shape[0]
        forged = self.generator(torch.randn(n, 2))
        self.d_updater.zero_grad()
        d_obj = self.adv(self.critic(real), torch.ones(n, 1)) + self.adv(self.critic(forged), torch.zeros(n, 1))
        d_obj.backward()
        self.d_updater.step()
        self.g_updater.zero_grad()
        g_obj = self.adv(self.critic(forged), torch.ones(n, 1))
        g_obj.backward()
        self.g_updater.step()


if __name__ == "__main__":
    tr = GANTrainer()
    caught = None
    try:
        tr.step(torch.randn(6, 3))
    except RuntimeError as e:
        caught = e
    assert caught is not None and "Trying to backward through the graph a second time" in str(caught)
    print("evidence holds: the generator update raised after the critic loss freed its graph")
