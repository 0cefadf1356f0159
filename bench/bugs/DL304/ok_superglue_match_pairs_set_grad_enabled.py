# source: https://github.com/magicleap/SuperGluePretrainedNetwork/blob/master/match_pairs.py
# category: DL304
# expect: clean
# evidence: torch.set_grad_enabled(False) as a bare module-level call does switch grad mode off: the matcher's outputs carry no graph and .numpy() works without detach
from pathlib import Path

import numpy as np
import torch
from torch import nn

torch.set_grad_enabled(False)


class SuperPoint(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.score = nn.Conv2d(8, 1, 1)

    def forward(self, image):
        feats = torch.relu(self.conv(image))
        scores = torch.sigmoid(self.score(feats)).flatten(1)
        k = self.config['max_keypoints']
        top = scores.topk(k, dim=1)
        w = image.shape[-1]
        keypoints = torch.stack([top.indices % w, top.indices // w], dim=-1).float()
        descriptors = feats.flatten(2).gather(2, top.indices.unsqueeze(1).expand(-1, feats.shape[1], -1))
        return keypoints, top.values, descriptors


class SuperGlue(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.proj = nn.Linear(8, 8)

    def forward(self, desc0, desc1):
        d0 = self.proj(desc0.transpose(1, 2))
        d1 = self.proj(desc1.transpose(1, 2))
        scores = torch.einsum('bnd,bmd->bnm', d0, d1).softmax(-1)
        conf, matches = scores.max(-1)
        matches = torch.where(conf > self.config['match_threshold'], matches, torch.full_like(matches, -1))
        return matches, conf


class Matching(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.superpoint = SuperPoint(config['superpoint'])
        self.superglue = SuperGlue(config['superglue'])

    def forward(self, data):
        kpts0, scores0, desc0 = self.superpoint(data['image0'])
        kpts1, scores1, desc1 = self.superpoint(data['image1'])
        matches0, conf0 = self.superglue(desc0, desc1)
        return {'keypoints0': kpts0, 'keypoints1': kpts1, 'matches0': matches0, 'matching_scores0': conf0}


def pair_names_to_id(names):
    names = [str(Path(name).with_suffix('')) for name in names]
    names = [name.replace('/', '__') for name in names]
    return names[0] + '___' + names[1]


def run(pairs, images, config):
    matching = Matching(config).eval()
    results = {}
    for i, pair in enumerate(pairs):
        name0, name1 = pair[:2]
        pair_id = pair_names_to_id((name0, name1))
        inp0, inp1 = images[name0], images[name1]
        pred = matching({'image0': inp0, 'image1': inp1})
        pred = {k: v[0].cpu().numpy() for k, v in pred.items()}
        kpts0, kpts1 = pred['keypoints0'], pred['keypoints1']
        matches, conf = pred['matches0'], pred['matching_scores0']
        valid = matches > -1
        results[pair_id] = (kpts0[valid], kpts1[matches[valid]], conf[valid])
    return results, matching


if __name__ == "__main__":
    torch.manual_seed(0)
    config = {'superpoint': {'max_keypoints': 16}, 'superglue': {'match_threshold': 0.0}}
    images = {f'scene/img{i}.png': torch.rand(1, 1, 24, 24) for i in range(3)}
    pairs = [['scene/img0.png', 'scene/img1.png'], ['scene/img1.png', 'scene/img2.png']]
    results, matching = run(pairs, images, config)
    assert not torch.is_grad_enabled()
    assert len(results) == 2 and all(len(r[0]) == len(r[1]) for r in results.values())
    out = matching({'image0': images['scene/img0.png'], 'image1': images['scene/img1.png']})
    assert not out['matching_scores0'].requires_grad and out['matching_scores0'].grad_fn is None
    print("evidence holds: grad mode is off for the whole script; matcher outputs carry no graph")
