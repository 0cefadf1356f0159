# source: https://github.com/NVIDIA/NVFlare/issues/2443
# category: DL301
# expect: flag 63, 78, 80, 99
# evidence: after _validate(), every stored validation loss still carries a grad_fn whose graph reaches the label-side model weights, i.e. each validation batch's graph and activations are kept alive although no backward is ever run.
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


class SplitNN(nn.Module):
    """ModerateCNN split into two parts: split_id 0 (data side), split_id 1 (label side)."""

    def __init__(self, split_id):
        super().__init__()
        self.split_id = split_id
        if split_id == 0:
            self.conv_layer = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        else:
            self.fc_layer = nn.Sequential(nn.Linear(4 * 4 * 4, 16), nn.ReLU(), nn.Linear(16, 10))

    def get_split_id(self):
        return self.split_id

    def forward(self, x):
        if self.split_id == 0:
            return self.conv_layer(x)
        return self.fc_layer(x)


class CIFAR10SplitNN:
    def __init__(self, n, returns):
        g = torch.Generator().manual_seed(1)
        self.images = torch.randn(n, 3, 8, 8, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        self.returns = returns

    def get_batch(self, batch_indices):
        return self.images[batch_indices] if self.returns == "image" else self.labels[batch_indices]


class CIFAR10LearnerSplitNN:
    def __init__(self, split_id, lr=1e-2, fp16=False):
        self.model = SplitNN(split_id)
        self.device = torch.device("cpu")
        self.optimizer = optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        self.criterion = torch.nn.CrossEntropyLoss()
        self.split_id = self.model.get_split_id()
        self.fp16 = fp16
        self.valid_dataset = CIFAR10SplitNN(32, "image" if self.split_id == 0 else "label")
        self.val_loss = []
        self.val_labels = []
        self.val_pred_labels = []
        self.current_round = 0
        self.num_rounds = 1

    def _val_step_data_side(self, batch_indices):
        self.model.eval()

        inputs = self.valid_dataset.get_batch(batch_indices)
        inputs = inputs.to(self.device)

        _val_activations = self.model.forward(inputs)  # keep on site-1

        return _val_activations.detach().flatten(start_dim=1, end_dim=-1)  # x to be sent to other client

    def _val_step_label_side(self, batch_indices, activations):
        self.model.eval()

        labels = self.valid_dataset.get_batch(batch_indices)
        labels = labels.to(self.device)

        if self.fp16:
            activations = activations.type(torch.float32)  # return to default pytorch precision

        activations = activations.to(self.device)

        pred = self.model.forward(activations)
        loss = self.criterion(pred, labels)
        self.val_loss.append(loss.unsqueeze(0))  # unsqueeze needed for later concatenation

        _, pred_labels = torch.max(pred, 1)

        self.val_pred_labels.extend(pred_labels.unsqueeze(0))
        self.val_labels.extend(labels.unsqueeze(0))

    def _log_validation(self):
        if len(self.val_loss) > 0:
            loss = torch.mean(torch.cat(self.val_loss))
            _val_pred_labels = torch.cat(self.val_pred_labels)
            _val_labels = torch.cat(self.val_labels)
            acc = (_val_pred_labels == _val_labels).sum() / len(_val_labels)
            return loss, acc


def _validate(data_learner, label_learner, val_size, batch_size):
    """SplitNN controller: run validation batches through both sites."""
    val_indices = np.arange(val_size)
    for b in range(0, val_size, batch_size):
        batch_indices = val_indices[b:b + batch_size]
        activations = data_learner._val_step_data_side(batch_indices)
        label_learner._val_step_label_side(batch_indices, activations)


if __name__ == "__main__":
    torch.manual_seed(0)
    site1 = CIFAR10LearnerSplitNN(split_id=0)
    site2 = CIFAR10LearnerSplitNN(split_id=1)
    _validate(site1, site2, val_size=32, batch_size=8)
    assert len(site2.val_loss) == 4
    fc_weight = site2.model.fc_layer[0].weight
    for l in site2.val_loss:
        assert l.requires_grad and l.grad_fn is not None
        # the retained graph reaches the label-side parameters
        g = torch.autograd.grad(l.sum(), fc_weight, retain_graph=True)[0]
        assert g.abs().sum().item() > 0
    print("evidence holds: 4 validation losses each keep a graph (grad_fn) back to the model weights after _validate()")
