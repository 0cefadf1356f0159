# source: https://github.com/lhoyer/DAFormer/issues/59
# category: DL603
# expect: clean
# evidence: the EMA teacher's logits are detached before the softmax that makes the pseudo-labels (and its parameters were detach_()-ed), so after several DACS train_steps the ema_model has no gradients and changes only through _update_ema, while the student trains.
from copy import deepcopy
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEGMENTORS, UDA = {}, {}


def build_segmentor(cfg):
    cfg = deepcopy(cfg)
    return SEGMENTORS[cfg.pop('type')](**cfg)


class EncoderDecoder(nn.Module):
    def __init__(self, num_classes=4, channels=8):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, channels, 3, 1, 1), nn.ReLU())
        self.decode_head = nn.Conv2d(channels, num_classes, 1)

    def extract_feat(self, img):
        return self.backbone(img)

    def encode_decode(self, img, img_metas):
        return self.decode_head(self.extract_feat(img))

    def forward_train(self, img, img_metas, gt_semantic_seg, seg_weight=None, return_feat=False):
        feat = self.extract_feat(img)
        seg_logits = self.decode_head(feat)
        loss = F.cross_entropy(seg_logits, gt_semantic_seg.squeeze(1), reduction='none')
        if seg_weight is not None:
            loss = loss * seg_weight
        losses = {'decode.loss_seg': loss.mean()}
        if return_feat:
            losses['features'] = feat
        return losses


SEGMENTORS['EncoderDecoder'] = EncoderDecoder


class UDADecorator(nn.Module):
    def __init__(self, **cfg):
        super(UDADecorator, self).__init__()
        self.model = build_segmentor(deepcopy(cfg['model']))

    def get_model(self):
        return self.model

    def forward(self, return_loss=True, **kwargs):
        return self.forward_train(**kwargs)

    @staticmethod
    def _parse_losses(losses):
        loss = sum(v for k, v in losses.items() if 'loss' in k)
        return loss, {k: v.item() for k, v in losses.items()}


def get_class_masks(labels):
    class_masks = []
    for label in labels:
        classes = torch.unique(labels)
        nclasses = classes.shape[0]
        class_choice = np.random.choice(nclasses, int((nclasses + nclasses % 2) / 2), replace=False)
        classes = classes[torch.Tensor(class_choice).long()]
        class_masks.append((label.unsqueeze(-1) == classes).any(-1).unsqueeze(0).float())
    return class_masks


def strong_transform(param, data=None, target=None):
    mask = param['mix'][0]
    if data is not None:
        data = (mask * data[0] + (1 - mask) * data[1]).unsqueeze(0)
    if target is not None:
        target = (mask[0] * target[0] + (1 - mask[0]) * target[1]).unsqueeze(0)
    return data, target


class DACS(UDADecorator):
    def __init__(self, **cfg):
        super(DACS, self).__init__(**cfg)
        self.local_iter = 0
        self.max_iters = cfg['max_iters']
        self.alpha = cfg['alpha']
        self.pseudo_threshold = cfg['pseudo_threshold']
        self.mix = cfg['mix']
        assert self.mix == 'class'
        ema_cfg = deepcopy(cfg['model'])
        self.ema_model = build_segmentor(ema_cfg)

    def get_ema_model(self):
        return self.ema_model

    def _init_ema_weights(self):
        for param in self.get_ema_model().parameters():
            param.detach_()
        mp = list(self.get_model().parameters())
        mcp = list(self.get_ema_model().parameters())
        for i in range(0, len(mp)):
            if not mcp[i].data.shape:  # scalar tensor
                mcp[i].data = mp[i].data.clone()
            else:
                mcp[i].data[:] = mp[i].data[:].clone()

    def _update_ema(self, iter):
        alpha_teacher = min(1 - 1 / (iter + 1), self.alpha)
        for ema_param, param in zip(self.get_ema_model().parameters(), self.get_model().parameters()):
            if not param.data.shape:  # scalar tensor
                ema_param.data = alpha_teacher * ema_param.data + (1 - alpha_teacher) * param.data
            else:
                ema_param.data[:] = alpha_teacher * ema_param[:].data[:] + (1 - alpha_teacher) * param[:].data[:]

    def train_step(self, data_batch, optimizer, **kwargs):
        optimizer.zero_grad()
        log_vars = self(**data_batch)
        optimizer.step()
        log_vars.pop('loss', None)
        return dict(log_vars=log_vars, num_samples=len(data_batch['img_metas']))

    def forward_train(self, img, img_metas, gt_semantic_seg, target_img, target_img_metas):
        log_vars = {}
        batch_size = img.shape[0]
        dev = img.device
        # Init/update ema model
        if self.local_iter == 0:
            self._init_ema_weights()
        if self.local_iter > 0:
            self._update_ema(self.local_iter)
        strong_parameters = {'mix': None}
        # Train on source images
        clean_losses = self.get_model().forward_train(img, img_metas, gt_semantic_seg, return_feat=True)
        clean_losses.pop('features')
        clean_loss, clean_log_vars = self._parse_losses(clean_losses)
        log_vars.update(clean_log_vars)
        clean_loss.backward()
        # Generate pseudo-label
        ema_logits = self.get_ema_model().encode_decode(target_img, target_img_metas)
        ema_softmax = torch.softmax(ema_logits.detach(), dim=1)
        pseudo_prob, pseudo_label = torch.max(ema_softmax, dim=1)
        ps_large_p = pseudo_prob.ge(self.pseudo_threshold).long() == 1
        ps_size = np.size(np.array(pseudo_label.cpu().numpy()))
        pseudo_weight = torch.sum(ps_large_p).item() / ps_size
        pseudo_weight = pseudo_weight * torch.ones(pseudo_prob.shape, device=dev)
        gt_pixel_weight = torch.ones((pseudo_weight.shape), device=dev)
        # Apply mixing
        mixed_img, mixed_lbl = [None] * batch_size, [None] * batch_size
        mix_masks = get_class_masks(gt_semantic_seg)
        for i in range(batch_size):
            strong_parameters['mix'] = mix_masks[i]
            mixed_img[i], mixed_lbl[i] = strong_transform(
                strong_parameters, data=torch.stack((img[i], target_img[i])),
                target=torch.stack((gt_semantic_seg[i][0], pseudo_label[i])))
            _, pseudo_weight[i] = strong_transform(
                strong_parameters, target=torch.stack((gt_pixel_weight[i], pseudo_weight[i])))
        mixed_img = torch.cat(mixed_img)
        mixed_lbl = torch.cat(mixed_lbl).long().unsqueeze(1)
        # Train on mixed images
        mix_losses = self.get_model().forward_train(mixed_img, img_metas, mixed_lbl, pseudo_weight, return_feat=True)
        mix_losses.pop('features')
        mix_loss, mix_log_vars = self._parse_losses(mix_losses)
        log_vars.update({'mix.' + k: v for k, v in mix_log_vars.items()})
        mix_loss.backward()
        self.local_iter += 1
        return log_vars


UDA['DACS'] = DACS


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    cfg = dict(type='DACS', model=dict(type='EncoderDecoder', num_classes=4), max_iters=4, alpha=0.99,
               pseudo_threshold=0.968, mix='class')
    uda_cfg = deepcopy(cfg)
    model = UDA[uda_cfg.pop('type')](**uda_cfg)
    optimizer = torch.optim.SGD(model.get_model().parameters(), lr=0.1)
    student_w0 = model.get_model().decode_head.weight.detach().clone()
    ema_w = model.get_ema_model().decode_head.weight
    ema_hist = []
    for it in range(cfg['max_iters']):
        data_batch = dict(img=torch.randn(2, 3, 8, 8), img_metas=[{}, {}],
                          gt_semantic_seg=torch.randint(0, 4, (2, 1, 8, 8)),
                          target_img=torch.randn(2, 3, 8, 8), target_img_metas=[{}, {}])
        outputs = model.train_step(data_batch, optimizer)
        ema_hist.append(ema_w.detach().clone())
    assert all(p.grad is None and not p.requires_grad for p in model.get_ema_model().parameters())
    assert all(p.grad is not None for p in model.get_model().parameters())
    with torch.no_grad():
        assert not torch.equal(model.get_model().decode_head.weight, student_w0)
        assert not torch.equal(ema_hist[1], ema_hist[-1])  # teacher moves, by EMA only
    print("evidence holds: ema_model never gets a gradient and only moves through _update_ema; the student trains")
