# source: https://github.com/alinlab/CSI/issues/39
# category: DL201
# expect: clean
# evidence: in train() the linear probe is fed outputs_aux['penultimate'].detach(); the encoder still gets gradients from the SimCLR + shift loss and changes, and the probe gets gradients from loss_linear and changes.
"""
training/unsup/simclr_CSI.py train() with models' penultimate/simclr/shift heads, the NT-Xent helpers
of training/contrastive_loss.py and the rotation shift transform; tiny CNN backbone.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class BaseModel(nn.Module):
    def __init__(self, last_dim, num_classes=10, simclr_dim=16):
        super(BaseModel, self).__init__()
        self.linear = nn.Linear(last_dim, num_classes)
        self.simclr_layer = nn.Sequential(nn.Linear(last_dim, last_dim), nn.ReLU(), nn.Linear(last_dim, simclr_dim))
        self.shift_cls_layer = nn.Linear(last_dim, 4)

    def forward(self, inputs, penultimate=False, simclr=False, shift=False):
        _aux = {}
        features = self.penultimate(inputs)
        output = self.linear(features)
        if penultimate:
            _aux['penultimate'] = features
        if simclr:
            _aux['simclr'] = self.simclr_layer(features)
        if shift:
            _aux['shift'] = self.shift_cls_layer(features)
        return output, _aux


class SmallResNet(BaseModel):
    def __init__(self, num_classes=10):
        super(SmallResNet, self).__init__(last_dim=16, num_classes=num_classes)
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)

    def penultimate(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.conv2(out))
        return F.adaptive_avg_pool2d(out, 1).flatten(1)


def normalize(x, dim=1, eps=1e-8):
    return x / (x.norm(dim=dim, keepdim=True) + eps)


def get_similarity_matrix(outputs, chunk=2, multi_gpu=False):
    return torch.mm(outputs, outputs.t())


def NT_xent(sim_matrix, temperature=0.5, chunk=2, eps=1e-8):
    device = sim_matrix.device
    B = sim_matrix.size(0) // chunk  # B = B' / chunk
    eye = torch.eye(B * chunk).to(device)  # (B', B')
    sim_matrix = torch.exp(sim_matrix / temperature) * (1 - eye)  # remove diagonal
    denom = torch.sum(sim_matrix, dim=1, keepdim=True)
    sim_matrix = -torch.log(sim_matrix / (denom + eps) + eps)  # loss matrix
    loss = torch.sum(sim_matrix[:B, B:].diag() + sim_matrix[B:, :B].diag()) / (2 * B)
    return loss


class Rotation(nn.Module):
    def forward(self, input, aug_index=0):
        return torch.rot90(input, aug_index, (2, 3))


def train(P, epoch, model, criterion, optimizer, scheduler, loader, logger=None,
          simclr_aug=None, linear=None, linear_optim=None):
    model.train()
    for n, (images, labels) in enumerate(loader):
        batch_size = images.size(0)
        images1, images2 = images.repeat(2, 1, 1, 1).chunk(2)  # hflip
        images1 = torch.cat([P.shift_trans(images1, k) for k in range(P.K_shift)])
        images2 = torch.cat([P.shift_trans(images2, k) for k in range(P.K_shift)])
        shift_labels = torch.cat([torch.ones_like(labels) * k for k in range(P.K_shift)], 0)  # B -> 4B
        shift_labels = shift_labels.repeat(2)
        images_pair = torch.cat([images1, images2], dim=0)  # 8B
        images_pair = simclr_aug(images_pair)  # transform

        _, outputs_aux = model(images_pair, simclr=True, penultimate=True, shift=True)
        simclr = normalize(outputs_aux['simclr'])  # normalize
        sim_matrix = get_similarity_matrix(simclr, multi_gpu=P.multi_gpu)
        loss_sim = NT_xent(sim_matrix, temperature=0.5) * P.sim_lambda
        loss_shift = criterion(outputs_aux['shift'], shift_labels)

        ### total loss ###
        loss = loss_sim + loss_shift
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step(epoch - 1 + n / len(loader))

        ### Post-processing stuffs ###
        penul_1 = outputs_aux['penultimate'][:batch_size]
        penul_2 = outputs_aux['penultimate'][4 * batch_size: 5 * batch_size]
        outputs_aux['penultimate'] = torch.cat([penul_1, penul_2])  # only use original rotation

        ### Linear evaluation ###
        outputs_linear_eval = linear(outputs_aux['penultimate'].detach())
        loss_linear = criterion(outputs_linear_eval, labels.repeat(2))
        linear_optim.zero_grad()
        loss_linear.backward()
        linear_optim.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    P = argparse.Namespace(K_shift=4, sim_lambda=1.0, multi_gpu=False, shift_trans=Rotation(), weight_decay=1e-6)
    model = SmallResNet(num_classes=10)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=P.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=10)
    linear = model.linear
    linear_optim = torch.optim.Adam(linear.parameters(), lr=1e-3, betas=(.9, .999), weight_decay=P.weight_decay)
    simclr_aug = lambda x: torch.where(torch.rand(x.size(0), 1, 1, 1) < 0.5, x.flip(3), x)
    loader = [(torch.rand(4, 3, 8, 8), torch.randint(0, 10, (4,))) for _ in range(2)]
    conv_before = model.conv1.weight.detach().clone()
    linear_before = linear.weight.detach().clone()

    train(P, 1, model, criterion, optimizer, scheduler, loader, simclr_aug=simclr_aug,
          linear=linear, linear_optim=linear_optim)

    # grads left by the last iteration: the encoder's from loss, the probe's from loss_linear
    assert model.conv1.weight.grad is not None and model.conv1.weight.grad.abs().sum().item() > 0
    assert linear.weight.grad is not None and linear.weight.grad.abs().sum().item() > 0
    with torch.no_grad():
        assert not torch.equal(conv_before, model.conv1.weight)
        assert not torch.equal(linear_before, linear.weight)
    print("evidence holds: encoder trained by the contrastive/shift loss, probe trained on detached features")
