# source: https://github.com/ajlangley/trpo-pytorch/issues/3
# category: DL202
# expect: clean
# evidence: the surrogate built from log_action_probs and its .detach() copy has the exact policy-gradient gradient mean(grad log pi * A), and the update changes the policy.
import torch
from torch import nn
from torch.distributions import Categorical


def flat_grad(functional_output, inputs, retain_graph=False, create_graph=False):
    if create_graph:
        retain_graph = True
    inputs = list(inputs)
    grads = torch.autograd.grad(functional_output, inputs, retain_graph=retain_graph, create_graph=create_graph)
    return torch.cat([g.reshape(-1) for g in grads])


def get_flat_params(parameters):
    return torch.cat([p.reshape(-1) for p in parameters])


def apply_update(parameterized_fun, update):
    n = 0
    with torch.no_grad():
        for param in parameterized_fun.parameters():
            numel = param.numel()
            param.add_(update[n:n + numel].view(param.size()))
            n += numel


def get_Hvp_fun(functional_output, inputs, damping_coef=0.0):
    inputs = list(inputs)
    grad_f = flat_grad(functional_output, inputs, create_graph=True)

    def Hvp_fun(v, retain_graph=True):
        gvp = torch.matmul(grad_f, v)
        Hvp = flat_grad(gvp, inputs, retain_graph=retain_graph)
        return Hvp + damping_coef * v

    return Hvp_fun


def cg_solver(Avp_fun, b, max_iter=10):
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    for _ in range(max_iter):
        Avp = Avp_fun(p, retain_graph=True)
        alpha = torch.matmul(r, r) / torch.matmul(p, Avp)
        x += alpha * p
        r_new = r - alpha * Avp
        beta = torch.matmul(r_new, r_new) / torch.matmul(r, r)
        r = r_new
        p = r + beta * p
    return x


class DiscretePolicy(nn.Module):
    def __init__(self, state_dim, n_actions, hidden=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(state_dim, hidden), nn.Tanh(), nn.Linear(hidden, n_actions))

    def forward(self, states):
        return Categorical(logits=self.net(states))


class TRPO:
    def __init__(self, policy, max_kl_div=0.01, cg_damping=1e-3, cg_max_iters=10):
        self.policy = policy
        self.max_kl_div = max_kl_div
        self.cg_damping = cg_damping
        self.cg_max_iters = cg_max_iters
        self.device = 'cpu'

    def mean_kl_first_fixed(self, dist_1, dist_2):
        dist_1_detached = Categorical(logits=dist_1.logits.detach())
        return torch.mean(torch.distributions.kl_divergence(dist_1_detached, dist_2))

    def surrogate_loss(self, log_action_probs, imp_sample_probs, advantages):
        return torch.mean(torch.exp(log_action_probs - imp_sample_probs) * advantages)

    def update_policy(self, states, actions, advantages):
        self.policy.train()
        states, actions, advantages = states.to(self.device), actions.to(self.device), advantages.to(self.device)

        action_dists = self.policy(states)
        log_action_probs = action_dists.log_prob(actions)

        loss = self.surrogate_loss(log_action_probs, log_action_probs.detach(), advantages)
        loss_grad = flat_grad(loss, self.policy.parameters(), retain_graph=True)

        mean_kl = self.mean_kl_first_fixed(action_dists, action_dists)
        Fvp_fun = get_Hvp_fun(mean_kl, self.policy.parameters(), damping_coef=self.cg_damping)
        search_dir = cg_solver(Fvp_fun, loss_grad, self.cg_max_iters)
        step_len = torch.sqrt(2 * self.max_kl_div / torch.matmul(search_dir, Fvp_fun(search_dir)))
        apply_update(self.policy, step_len * search_dir)
        return loss_grad.detach()


if __name__ == "__main__":
    torch.manual_seed(0)
    policy = DiscretePolicy(state_dim=4, n_actions=3)
    trpo = TRPO(policy)
    states = torch.randn(32, 4)
    with torch.no_grad():
        actions = policy(states).sample()
    advantages = torch.randn(32)

    # reference: the plain policy-gradient estimate at the current parameters
    logp = policy(states).log_prob(actions)
    reference = flat_grad((logp * advantages).mean(), policy.parameters())

    before = get_flat_params(policy.parameters()).detach().clone()
    loss_grad = trpo.update_policy(states, actions, advantages)
    after = get_flat_params(policy.parameters()).detach()

    with torch.no_grad():
        assert loss_grad.abs().sum() > 0
        assert torch.allclose(loss_grad, reference, atol=1e-6)
        assert not torch.equal(before, after)
    print("evidence holds: the detached importance-sampling denominator keeps the exact policy gradient and the policy updates")
