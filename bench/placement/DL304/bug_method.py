# source: placement matrix
# category: DL304
# expect: flag 16
# evidence: Agent.act calls torch.no_grad() as a bare statement, so grad mode stays on and the action values carry a grad_fn.
import torch


class Agent:
    def __init__(self, n_obs, n_act):
        self.policy = torch.nn.Sequential(
            torch.nn.Linear(n_obs, 8), torch.nn.ReLU(), torch.nn.Linear(8, n_act)
        )
        self.temperature = 1.0

    def act(self, state):
        torch.no_grad()
        values = self.policy(state) / self.temperature
        return values.argmax(dim=1), values


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = Agent(5, 3)
    action, values = agent.act(torch.randn(2, 5))
    assert torch.is_grad_enabled()
    assert values.requires_grad and values.grad_fn is not None
    print("evidence holds: bare torch.no_grad() -> grad mode still on, action values have grad_fn")
