# source: https://github.com/INVOKERer/AdaRevD/issues/9
# category: DL201
# expect: flag 57, 58
# evidence: after the user sets requires_grad=True on every net_g parameter so the NAFNet encoder is fine-tuned, the encoder weights are in the optimizer but get grad None and never change, since AdaRevID.forward calls the encoder under torch.no_grad().
import logging
import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger('basicsr')


class NAFNet(nn.Module):
    """tiny stand-in for the pretrained NAFNet encoder: returns 5 feature levels"""
    def __init__(self, width=4):
        super().__init__()
        self.intro = nn.Conv2d(3, width, 3, padding=1)
        self.encoders = nn.ModuleList([nn.Conv2d(width, width, 3, padding=1) for _ in range(4)])

    def forward(self, inp):
        x = self.intro(inp)
        feats = [x]
        for enc in self.encoders:
            x = x + F.gelu(enc(x))
            feats.append(x)
        return feats


class UniDecoder(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.fuse = nn.Conv2d(width * 5, width, 1)
        self.body = nn.Conv2d(width, width, 3, padding=1)

    def forward(self, features):
        x = self.fuse(torch.cat(features, dim=1))
        return x + F.gelu(self.body(x))


class AdaRevID(nn.Module):
    def __init__(self, width=4, num_subdenet=2, pretrain=False, encoder_path=None):
        super().__init__()
        self.pretrain = pretrain
        self.encoder = NAFNet(width=width)
        if encoder_path is not None:
            self.encoder.load_state_dict(torch.load(encoder_path)['params'], strict=False)
        for k, v in self.encoder.named_parameters():
            v.requires_grad = False
        self.encoder.eval()
        self.conv_features = nn.ParameterList([nn.Parameter(torch.ones(1, width, 1, 1)) for _ in range(5)])
        self.subdenets = nn.ModuleList([UniDecoder(width) for _ in range(num_subdenet)])
        self.outputs = nn.ModuleList([nn.Conv2d(width, 3, 3, padding=1) for _ in range(num_subdenet)])

    def forward(self, img):
        if self.pretrain:
            return self._forward_pretrain(img)
        with torch.no_grad():
            e0, e1, e2, e3, e4 = self.encoder(img)
        features = [self.conv_features[i] * e for i, e in enumerate([e0, e1, e2, e3, e4])]
        return self._forward(img, features)

    def _forward_pretrain(self, img):
        return self._forward(img, self.encoder(img))

    def _forward(self, img, features):
        outs = []
        x = img
        for i, subdenet in enumerate(self.subdenets):
            dec = subdenet(features)
            x = x + self.outputs[i](dec)
            outs.append(x)
            features = [f + dec for f in features]
        return outs


class ImageRestorationModel:
    def __init__(self, opt):
        self.opt = opt
        self.net_g = AdaRevID(**opt['network_g'])
        self.cri_pix = nn.L1Loss()
        self.setup_optimizers()

    def setup_optimizers(self):
        train_opt = self.opt['train']
        # user change from the issue: also fine-tune the pretrained encoder
        for param in self.net_g.parameters():
            param.requires_grad = True
        optim_params = []
        for k, v in self.net_g.named_parameters():
            if v.requires_grad:
                optim_params.append(v)
            else:
                logger.warning(f'Params {k} will not be optimized.')
        optim_type = train_opt['optim_g'].pop('type')
        if optim_type == 'Adam':
            self.optimizer_g = torch.optim.Adam([{'params': optim_params}], **train_opt['optim_g'])
        elif optim_type == 'AdamW':
            self.optimizer_g = torch.optim.AdamW([{'params': optim_params}], **train_opt['optim_g'])
        else:
            raise NotImplementedError(f'optimizer {optim_type} is not supperted yet.')

    def feed_data(self, data):
        self.lq = data['lq']
        self.gt = data['gt']

    def optimize_parameters(self, current_iter):
        self.optimizer_g.zero_grad()
        preds = self.net_g(self.lq)
        l_total = 0.
        for pred in preds:
            l_total = l_total + self.cri_pix(pred, self.gt)
        l_total.backward()
        self.optimizer_g.step()
        self.log_dict = {'l_pix': l_total.item()}


if __name__ == "__main__":
    torch.manual_seed(0)
    opt = {'network_g': {'width': 4, 'num_subdenet': 2},
           'train': {'optim_g': {'type': 'AdamW', 'lr': 1e-3, 'weight_decay': 0., 'betas': (0.9, 0.9)}}}
    model = ImageRestorationModel(opt)
    enc_before = {k: v.detach().clone() for k, v in model.net_g.encoder.named_parameters()}
    dec_before = model.net_g.subdenets[0].fuse.weight.detach().clone()
    for current_iter in range(1, 4):
        model.feed_data({'lq': torch.randn(2, 3, 8, 8), 'gt': torch.randn(2, 3, 8, 8)})
        model.optimize_parameters(current_iter)
    enc_w = model.net_g.encoder.intro.weight
    assert enc_w.requires_grad
    assert any(p is enc_w for g in model.optimizer_g.param_groups for p in g['params'])
    assert all(p.grad is None for p in model.net_g.encoder.parameters())
    with torch.no_grad():
        assert all(torch.equal(v, enc_before[k]) for k, v in model.net_g.encoder.named_parameters())
        assert not torch.equal(model.net_g.subdenets[0].fuse.weight, dec_before)
    print("evidence holds: encoder parameters are trainable and optimized, yet get grad None and stay unchanged; decoders train")
