# source: https://github.com/open-mmlab/mmgeneration/issues/240
# category: DL102
# expect: flag 103
# evidence: after the first conv weight of the generator is swapped through .data for a 4-channel one, optimizer['generators'].step() raises "The size of tensor a (3) must match the size of tensor b (4)" from Adam's exp_avg
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ConvModule(nn.Module):
    """conv -> norm -> act, as in mmcv."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, act=True):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, bias=False)
        self.norm = nn.InstanceNorm2d(out_channels, affine=True)
        self.act = nn.ReLU() if act else nn.Identity()

    def forward(self, x):
        return self.act(self.norm(self.conv(x)))


class ResidualBlockWithDropout(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.block = nn.Sequential(
            nn.ReflectionPad2d(1), ConvModule(channels, channels, 3),
            nn.ReflectionPad2d(1), ConvModule(channels, channels, 3, act=False))

    def forward(self, x):
        return x + self.block(x)


class ResnetGenerator(nn.Module):
    """Construct a Resnet-based generator (tiny)."""

    def __init__(self, in_channels=3, out_channels=3, base_channels=8, num_blocks=2):
        super().__init__()
        model = [nn.ReflectionPad2d(3), ConvModule(in_channels, base_channels, 7)]
        model += [ConvModule(base_channels, base_channels * 2, 3, stride=2, padding=1)]
        for _ in range(num_blocks):
            model += [ResidualBlockWithDropout(base_channels * 2)]
        model += [nn.ConvTranspose2d(base_channels * 2, base_channels, 3, 2, 1, output_padding=1),
                  nn.ReLU(), nn.ReflectionPad2d(3), nn.Conv2d(base_channels, out_channels, 7), nn.Tanh()]
        self.model = nn.Sequential(*model)

    def forward(self, x):
        return self.model(x)


class PatchDiscriminator(nn.Module):
    def __init__(self, in_channels=3, base_channels=8):
        super().__init__()
        self.model = nn.Sequential(
            nn.Conv2d(in_channels, base_channels, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(base_channels, 1, 4, 1, 1))

    def forward(self, x):
        return self.model(x)


class CycleGAN(nn.Module):
    def __init__(self, in_channels=3):
        super().__init__()
        self.generators = nn.ModuleDict(dict(a=ResnetGenerator(in_channels), b=ResnetGenerator(3, in_channels)))
        self.discriminators = nn.ModuleDict(dict(a=PatchDiscriminator(3), b=PatchDiscriminator(in_channels)))

    def train_step(self, data_batch, optimizer):
        real_a, real_b = data_batch['img_a'], data_batch['img_b']
        fake_b = self.generators['a'](real_a)
        rec_a = self.generators['b'](fake_b)
        # generators step
        optimizer['generators'].zero_grad()
        pred = self.discriminators['a'](fake_b)
        loss_gan_g = F.mse_loss(pred, torch.ones_like(pred))
        loss_cycle = F.l1_loss(rec_a, real_a) * 10.0
        (loss_gan_g + loss_cycle).backward()
        optimizer['generators'].step()
        # discriminators step
        optimizer['discriminators'].zero_grad()
        pred_real = self.discriminators['a'](real_b[:, :3])
        pred_fake = self.discriminators['a'](fake_b.detach())
        loss_d = 0.5 * (F.mse_loss(pred_real, torch.ones_like(pred_real))
                        + F.mse_loss(pred_fake, torch.zeros_like(pred_fake)))
        loss_d.backward()
        optimizer['discriminators'].step()
        return dict(loss_gan_g=loss_gan_g.item(), loss_cycle=loss_cycle.item(), loss_d=loss_d.item())


def build_optimizers(model):
    return dict(
        generators=torch.optim.Adam(model.generators.parameters(), lr=2e-4, betas=(0.5, 0.999)),
        discriminators=torch.optim.Adam(model.discriminators.parameters(), lr=2e-4, betas=(0.5, 0.999)))


def set_generator_in_channels(model, in_channels):
    """Reuse the RGB checkpoint for RGB + extra channel input (what the user did)."""
    first = model.generators['a'].model[1].conv
    weight = first.weight.data
    extra = weight.mean(dim=1, keepdim=True).repeat(1, in_channels - weight.size(1), 1, 1)
    first.weight.data = torch.cat([weight, extra], dim=1)
    first.in_channels = in_channels


if __name__ == "__main__":
    model = CycleGAN(in_channels=3)
    optimizer = build_optimizers(model)
    batch = dict(img_a=torch.randn(2, 3, 16, 16), img_b=torch.randn(2, 3, 16, 16))
    for _ in range(2):
        log = model.train_step(batch, optimizer)  # checkpoint-like state: Adam has exp_avg for 3 channels

    set_generator_in_channels(model, 4)
    batch4 = dict(img_a=torch.randn(2, 4, 16, 16), img_b=torch.randn(2, 3, 16, 16))
    try:
        real_a = batch4['img_a']
        fake_b = model.generators['a'](real_a)
        optimizer['generators'].zero_grad()
        pred = model.discriminators['a'](fake_b)
        loss = F.mse_loss(pred, torch.ones_like(pred)) + F.l1_loss(model.generators['b'](fake_b), real_a[:, :3])
        loss.backward()
        optimizer['generators'].step()
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "must match the size of tensor b (4)" in raised, raised
    print("evidence holds: optimizer['generators'].step() raised: " + raised.splitlines()[0])
