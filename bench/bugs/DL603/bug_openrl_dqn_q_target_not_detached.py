# source: https://github.com/OpenRL-Lab/openrl/pull/136
# category: DL603
# expect: flag 30, 59, 60
# evidence: prepare_loss builds the TD target from the target network's output without detach/no_grad, so q_loss.backward() sends gradients into target_q_net (its parameters get non-None .grad) while only q_net is meant to learn.
import torch
import torch.nn as nn
import torch.nn.functional as F


class QNet(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=16):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, act_dim))

    def forward(self, obs, rnn_states, masks):
        return self.mlp(obs), rnn_states


class DQNModule:
    def __init__(self, cfg, obs_dim, act_dim):
        self.models = {"q_net": QNet(obs_dim, act_dim), "target_q_net": QNet(obs_dim, act_dim)}
        self.models["target_q_net"].load_state_dict(self.models["q_net"].state_dict())
        self.optimizers = {"q_net": torch.optim.Adam(self.models["q_net"].parameters(), lr=cfg["lr"])}

    def evaluate_actions(self, obs_batch, next_obs_batch, rnn_states_batch, rewards_batch, actions_batch,
                         masks_batch, available_actions_batch=None, active_masks_batch=None,
                         critic_masks_batch=None):
        q_values, _ = self.models["q_net"](obs_batch, rnn_states_batch, masks_batch)
        q_values = torch.gather(q_values, 1, actions_batch.long())
        max_next_q_values, _ = self.models["target_q_net"](next_obs_batch, rnn_states_batch, masks_batch)
        max_next_q_values = max_next_q_values.max(1)[0].view(-1, 1)
        return q_values, max_next_q_values


class DQNAlgorithm:
    def __init__(self, cfg, algo_module):
        self.algo_module = algo_module
        self.gamma = cfg["gamma"]
        self.target_update_frequency = cfg["target_update_frequency"]
        self.update_count = 0

    def prepare_loss(self, obs_batch, next_obs_batch, rnn_states_batch, actions_batch, masks_batch,
                     available_actions_batch, value_preds_batch, rewards_batch, active_masks_batch, turn_on):
        loss_list = []
        critic_masks_batch = masks_batch

        (q_values, max_next_q_values) = self.algo_module.evaluate_actions(
            obs_batch,
            next_obs_batch,
            rnn_states_batch,
            rewards_batch,
            actions_batch,
            masks_batch,
            available_actions_batch,
            active_masks_batch,
            critic_masks_batch=critic_masks_batch,
        )

        q_targets = rewards_batch + self.gamma * max_next_q_values
        q_loss = torch.mean(F.mse_loss(q_values, q_targets))

        loss_list.append(q_loss)
        return loss_list

    def dqn_update(self, sample, turn_on=True):
        (obs_batch, next_obs_batch, rnn_states_batch, actions_batch, value_preds_batch, rewards_batch,
         masks_batch, active_masks_batch, available_actions_batch) = sample
        loss_list = self.prepare_loss(obs_batch, next_obs_batch, rnn_states_batch, actions_batch, masks_batch,
                                      available_actions_batch, value_preds_batch, rewards_batch,
                                      active_masks_batch, turn_on)
        for loss in loss_list:
            self.algo_module.optimizers["q_net"].zero_grad()
            loss.backward()
            self.algo_module.optimizers["q_net"].step()
        self.update_count += 1
        return loss_list[0]

    def train(self, buffer, turn_on=True):
        train_info = {"q_loss": 0}
        for sample in buffer:
            q_loss = self.dqn_update(sample, turn_on)
            train_info["q_loss"] += q_loss.item()
        return train_info


def make_sample(bs=8, obs_dim=4, act_dim=2):
    return (torch.randn(bs, obs_dim), torch.randn(bs, obs_dim), torch.zeros(bs, 1),
            torch.randint(0, act_dim, (bs, 1)), torch.zeros(bs, 1), torch.randn(bs, 1),
            torch.ones(bs, 1), torch.ones(bs, 1), None)


if __name__ == "__main__":
    torch.manual_seed(0)
    cfg = {"lr": 1e-3, "gamma": 0.99, "target_update_frequency": 10}
    module = DQNModule(cfg, obs_dim=4, act_dim=2)
    algo = DQNAlgorithm(cfg, module)
    info = algo.train([make_sample() for _ in range(3)])

    target_grads = [p.grad for p in module.models["target_q_net"].parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in target_grads)
    print("evidence holds: after %d updates every target_q_net parameter holds a gradient "
          "(|grad| sum %.4f) leaked through the TD target" % (algo.update_count, sum(g.abs().sum().item() for g in target_grads)))
