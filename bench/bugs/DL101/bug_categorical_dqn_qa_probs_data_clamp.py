# source: https://github.com/floringogianu/categorical-dqn/issues/3
# category: DL101
# expect: flag 68
# evidence: same loss value as a tracked qa_probs.clamp(0.01, 0.99), but the policy's gradients differ: LogBackward divides by the clamped .data and clamped atoms still send gradient
import torch
import torch.nn as nn
import torch.nn.functional as F


class CatchNet(nn.Module):
    """Small categorical Q-network: one softmax over atoms per action."""

    def __init__(self, in_size, out_size, hidden_size=16):
        super(CatchNet, self).__init__()
        self.action_no, self.atoms_no = out_size
        self.lin1 = nn.Linear(in_size, hidden_size)
        self.head = nn.Linear(hidden_size, self.action_no * self.atoms_no)

    def forward(self, x):
        x = F.relu(self.lin1(x))
        out = self.head(x)
        splits = out.chunk(self.action_no, 1)
        return torch.stack(list(map(lambda s: F.softmax(s, dim=1), splits)), 1)


class CategoricalPolicyImprovement(object):
    """Distributional (C51) update: cross-entropy between projected target and Z(s, a)."""

    def __init__(self, policy, target_policy, v_min=-1.0, v_max=1.0, atoms_no=5, gamma=0.99):
        self.policy = policy
        self.target_policy = target_policy
        self.gamma = gamma
        self.v_min, self.v_max = v_min, v_max
        self.atoms_no = atoms_no
        self.support = torch.linspace(v_min, v_max, atoms_no)
        self.delta_z = (v_max - v_min) / (atoms_no - 1)

    def _get_categorical(self, next_states, rewards, mask):
        batch_sz = next_states.size(0)
        with torch.no_grad():
            probs = self.target_policy(next_states)
        qs = probs * self.support.expand_as(probs)
        argmax_a = qs.sum(2).max(1)[1].view(batch_sz, 1, 1)
        qa_probs = probs.gather(1, argmax_a.expand(batch_sz, 1, self.atoms_no)).squeeze(1)

        bellman_op = rewards.unsqueeze(1) + (mask.float() * self.gamma).unsqueeze(1) * self.support
        bellman_op = bellman_op.clamp(self.v_min, self.v_max)
        b = (bellman_op - self.v_min) / self.delta_z
        l, u = b.floor().long(), b.ceil().long()
        l[(u > 0) & (l == u)] -= 1
        u[(l < (self.atoms_no - 1)) & (l == u)] += 1

        m = torch.zeros(batch_sz, self.atoms_no)
        m.scatter_add_(1, l, qa_probs * (u.float() - b))
        m.scatter_add_(1, u, qa_probs * (b - l.float()))
        return m

    def accumulate_gradient(self, batch_sz, states, actions, rewards, next_states, mask):
        # Compute probabilities of Q(s,a*)
        q_probs = self.policy(states)
        action_mask = actions.view(batch_sz, 1, 1).expand(batch_sz, 1, self.atoms_no)
        qa_probs = q_probs.gather(1, action_mask).squeeze(1)

        # Compute distribution of Q(s_,a)
        target_qa_probs = self._get_categorical(next_states, rewards, mask)

        # Compute the cross-entropy of phi(TZ(x_,a)) || Z(x,a)
        qa_probs.data.clamp_(0.01, 0.99)  # Tudor's trick for avoiding nans
        loss = - torch.sum(target_qa_probs * torch.log(qa_probs))

        # Accumulate gradients
        loss.backward()
        return loss


def tracked_reference(policy, improver, batch):
    """The same loss with the clamp recorded by autograd."""
    batch_sz, states, actions, rewards, next_states, mask = batch
    q_probs = policy(states)
    action_mask = actions.view(batch_sz, 1, 1).expand(batch_sz, 1, improver.atoms_no)
    qa_probs = q_probs.gather(1, action_mask).squeeze(1).clamp(0.01, 0.99)
    target_qa_probs = improver._get_categorical(next_states, rewards, mask)
    loss = - torch.sum(target_qa_probs * torch.log(qa_probs))
    return loss, torch.autograd.grad(loss, list(policy.parameters()))


if __name__ == "__main__":
    torch.manual_seed(0)
    policy = CatchNet(8, (3, 5))
    target_policy = CatchNet(8, (3, 5))
    target_policy.load_state_dict(policy.state_dict())
    improver = CategoricalPolicyImprovement(policy, target_policy)

    batch_sz = 6
    states = torch.randn(batch_sz, 8) * 4.0  # a confident net: some atoms below 0.01 / above 0.99
    next_states = torch.randn(batch_sz, 8) * 4.0
    actions = torch.randint(0, 3, (batch_sz,))
    rewards = torch.tensor([0.0, 1.0, -1.0, 0.0, 1.0, 0.0])
    mask = torch.tensor([1, 1, 0, 1, 0, 1])
    batch = (batch_sz, states, actions, rewards, next_states, mask)

    raw = policy(states).gather(1, actions.view(batch_sz, 1, 1).expand(batch_sz, 1, 5)).squeeze(1)
    assert bool(((raw < 0.01) | (raw > 0.99)).any()), "the clamp must bite for the case to mean anything"

    ref_loss, ref_grads = tracked_reference(policy, improver, batch)
    policy.zero_grad()
    loss = improver.accumulate_gradient(*batch)
    bug_grads = [p.grad for p in policy.parameters()]

    assert torch.allclose(loss.detach(), ref_loss.detach()), "both versions compute the same loss"
    diff = max((b - r).abs().max().item() for b, r in zip(bug_grads, ref_grads))
    assert not all(torch.allclose(b, r, rtol=1e-4, atol=1e-6) for b, r in zip(bug_grads, ref_grads))
    print("evidence holds: loss %.4f in both, but the policy gradients differ from the tracked clamp (max diff %.3g)"
          % (loss.item(), diff))
