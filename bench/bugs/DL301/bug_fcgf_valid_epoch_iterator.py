# source: https://github.com/chrischoy/FCGF/issues/15
# category: DL301
# expect: flag 68, 72, 73
# evidence: ContrastiveLossTrainer._valid_epoch switches to eval mode and, for each validation pair pulled from the loader iterator, runs the feature network twice with grad enabled: both feature sets carry grad_fns and autograd saves activations although validation never backpropagates
import numpy as np
import torch
import torch.nn as nn


class AverageMeter(object):
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += float(val) * n
        self.count += n
        self.avg = self.sum / self.count


class ResUNetBN2C(nn.Module):
    """Per-point feature network (dense stand-in for the sparse ResUNet)."""

    def __init__(self, in_channels=1, out_channels=8):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(in_channels + 3, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, out_channels))

    def forward(self, coords, feats):
        out = self.block(torch.cat([coords, feats], dim=1))
        return nn.functional.normalize(out, dim=1)


def corr_dist(T_est, T_gt, xyz0, xyz1):
    xyz0_est = xyz0 @ T_est[:3, :3].t() + T_est[:3, 3]
    xyz0_gt = xyz0 @ T_gt[:3, :3].t() + T_gt[:3, 3]
    return (xyz0_est - xyz0_gt).norm(dim=1).mean()


def est_rigid(xyz0, xyz1):
    c0, c1 = xyz0.mean(0), xyz1.mean(0)
    U, S, Vt = np.linalg.svd((xyz0 - c0).T @ (xyz1 - c1))
    R = (U @ Vt).T
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, c1 - R @ c0
    return torch.from_numpy(T).float()


class ContrastiveLossTrainer(object):
    def __init__(self, model, val_data_loader, val_max_iter=-1, device=torch.device('cpu')):
        self.model = model
        self.val_data_loader = val_data_loader
        self.val_max_iter = val_max_iter
        self.device = device

    def find_corr(self, xyz0, xyz1, F0, F1):
        dists = torch.cdist(F0, F1)
        nn_inds = dists.argmin(dim=1)
        return xyz0.numpy(), xyz1[nn_inds.cpu()].numpy()

    def _valid_epoch(self):
        # Change the network to evaluation mode
        self.model.eval()
        loss_meter, hit_ratio_meter = AverageMeter(), AverageMeter()
        tot_num_data = len(self.val_data_loader)
        if self.val_max_iter > 0:
            tot_num_data = min(self.val_max_iter, tot_num_data)
        data_loader_iter = self.val_data_loader.__iter__()

        for batch_idx in range(tot_num_data):
            input_dict = next(data_loader_iter)

            # pairs consist of (xyz1 index, xyz0 index)
            F0 = self.model(input_dict['sinput0_C'].to(self.device), input_dict['sinput0_F'].to(self.device))
            F1 = self.model(input_dict['sinput1_C'].to(self.device), input_dict['sinput1_F'].to(self.device))

            xyz0, xyz1, T_gt = input_dict['pcd0'], input_dict['pcd1'], input_dict['T_gt']
            xyz0_corr, xyz1_corr = self.find_corr(xyz0, xyz1, F0, F1)
            T_est = est_rigid(xyz0_corr, xyz1_corr)

            loss = corr_dist(T_est, T_gt, xyz0, xyz1)
            loss_meter.update(loss)
            hit_ratio_meter.update((np.linalg.norm(xyz0_corr - xyz1_corr, axis=1) < 0.1).mean())

        return {"loss": loss_meter.avg, "hit_ratio": hit_ratio_meter.avg}


def make_pair():
    xyz0 = torch.rand(12, 3)
    T_gt = torch.eye(4)
    T_gt[:3, 3] = torch.tensor([0.1, 0.0, 0.0])
    xyz1 = xyz0 + T_gt[:3, 3]
    return {'sinput0_C': xyz0, 'sinput0_F': torch.ones(12, 1), 'sinput1_C': xyz1, 'sinput1_F': torch.ones(12, 1),
            'pcd0': xyz0, 'pcd1': xyz1, 'T_gt': T_gt}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = ResUNetBN2C()
    trainer = ContrastiveLossTrainer(model, [make_pair() for _ in range(3)])
    feats = []
    model.register_forward_hook(lambda mod, inp, out: feats.append(out))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        stats = trainer._valid_epoch()
    assert not model.training and len(feats) == 6 and all(f.grad_fn is not None for f in feats)
    assert sum(saved) > 0
    print("evidence holds: %d validation feature sets carry grad_fns; %d bytes saved for backward (loss %.3f)"
          % (len(feats), sum(saved), stats["loss"]))
