# source: https://github.com/VITA-Group/DeblurGANv2/issues/15
# category: DL301
# expect: flag 105, 107, 109
# evidence: Trainer._validate runs netG and the adversarial loss on every validation batch with grad enabled (the trainer never switches netG to eval mode): the restored images carry grad_fns through the generator and autograd saves activations
import numpy as np
import torch
import torch.nn as nn


class FPNMobileNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))

    def forward(self, x):
        return torch.clamp(x + self.body(x), min=-1, max=1)


def NLayerDiscriminator():
    return nn.Sequential(nn.Conv2d(3, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3))


class DoubleGAN(object):
    """Adversarial trainer with a patch discriminator (LSGAN losses)."""

    def __init__(self, net_d, criterion):
        self.net_d = net_d
        self.criterion = criterion

    def loss_d(self, pred, gt):
        return (self.criterion(self.net_d(gt), 1.0) + self.criterion(self.net_d(pred.detach()), 0.0)) / 2

    def loss_g(self, pred, gt):
        return self.criterion(self.net_d(pred), 1.0)


class DeblurModel(object):
    def get_input(self, data):
        return data['a'], data['b']

    def get_images_and_metrics(self, inp, output, target):
        out, tgt = (output.data[0].numpy() + 1) / 2, (target.data[0].numpy() + 1) / 2
        mse = np.mean((out - tgt) ** 2)
        return 10 * np.log10(1.0 / max(mse, 1e-10)), 1.0 - mse, np.concatenate([out, tgt], axis=2)


class MetricCounter(object):
    def __init__(self):
        self.clear()

    def clear(self):
        self.losses, self.metrics, self.images = [], [], []

    def add_losses(self, l_G, l_content):
        self.losses.append((l_G, l_content))

    def add_metrics(self, psnr, ssim):
        self.metrics.append((psnr, ssim))

    def add_image(self, img, tag):
        self.images.append((tag, img))


class Trainer:
    def __init__(self, config, train, val):
        self.config = config
        self.train_dataset = train
        self.val_dataset = val
        self.netG = FPNMobileNet()
        self.adv_trainer = DoubleGAN(NLayerDiscriminator(), lambda out, target: torch.mean((out - target) ** 2))
        self.model = DeblurModel()
        self.criterionG = nn.L1Loss()
        self.adv_lambda = config['model']['adv_lambda']
        self.metric_counter = MetricCounter()
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=1e-4)
        self.optimizer_D = torch.optim.Adam(self.adv_trainer.net_d.parameters(), lr=1e-4)

    def train(self):
        for epoch in range(0, self.config['num_epochs']):
            self._run_epoch(epoch)
            self._validate(epoch)

    def _run_epoch(self, epoch):
        self.metric_counter.clear()
        for data in self.train_dataset:
            inputs, targets = self.model.get_input(data)
            outputs = self.netG(inputs)
            self.optimizer_D.zero_grad()
            loss_D = self.adv_lambda * self.adv_trainer.loss_d(outputs, targets)
            loss_D.backward()
            self.optimizer_D.step()

            self.optimizer_G.zero_grad()
            loss_content = self.criterionG(outputs, targets)
            loss_adv = self.adv_trainer.loss_g(outputs, targets)
            loss_G = loss_content + self.adv_lambda * loss_adv
            loss_G.backward()
            self.optimizer_G.step()
            self.metric_counter.add_losses(loss_G.item(), loss_content.item())

    def _validate(self, epoch):
        self.metric_counter.clear()
        epoch_size = self.config.get('val_batches_per_epoch') or len(self.val_dataset)
        i = 0
        for data in self.val_dataset:
            inputs, targets = self.model.get_input(data)
            outputs = self.netG(inputs)
            loss_content = self.criterionG(outputs, targets)
            loss_adv = self.adv_trainer.loss_g(outputs, targets)
            loss_G = loss_content + self.adv_lambda * loss_adv
            self.metric_counter.add_losses(loss_G.item(), loss_content.item())
            curr_psnr, curr_ssim, img_for_vis = self.model.get_images_and_metrics(inputs, outputs, targets)
            self.metric_counter.add_metrics(curr_psnr, curr_ssim)
            if not i:
                self.metric_counter.add_image(img_for_vis, tag='val')
            i += 1
            if i > epoch_size:
                break


def make_loader(n):
    return [{'a': torch.rand(1, 3, 16, 16) * 2 - 1, 'b': torch.rand(1, 3, 16, 16) * 2 - 1} for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = Trainer({'num_epochs': 1, 'model': {'adv_lambda': 0.001}}, make_loader(2), make_loader(3))
    trainer.train()
    restored = []
    trainer.netG.register_forward_hook(lambda mod, inp, out: restored.append(out))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        trainer._validate(epoch=1)
    assert len(restored) == 3 and all(o.grad_fn is not None for o in restored)
    assert sum(saved) > 0 and len(trainer.metric_counter.metrics) == 3
    grads = torch.autograd.grad(restored[-1].sum(), trainer.netG.body[0].weight)
    assert grads[0].abs().sum() > 0
    print("evidence holds: %d validation outputs of netG carry grad_fns into its weights; %d bytes saved during _validate"
          % (len(restored), sum(saved)))
