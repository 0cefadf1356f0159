# source: https://github.com/leftthomas/SRGAN/issues/43
# category: DL301
# expect: flag 49, 52, 55
# evidence: the port replaced `Variable(x, volatile=True)` by a no_grad block around the input wrapping only, so netG(lr) in the validation loop still runs with grad enabled: every SR image carries a grad_fn while autograd saves activations for a backward that never comes
from math import log10

import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable


class Generator(nn.Module):
    def __init__(self, scale_factor=2):
        super(Generator, self).__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, 8, kernel_size=3, padding=1), nn.PReLU())
        self.block2 = nn.Sequential(nn.Conv2d(8, 8, kernel_size=3, padding=1), nn.BatchNorm2d(8), nn.PReLU())
        self.upsample = nn.Sequential(nn.Conv2d(8, 3 * scale_factor ** 2, kernel_size=3, padding=1),
                                      nn.PixelShuffle(scale_factor))

    def forward(self, x):
        block1 = self.block1(x)
        block2 = self.block2(block1)
        return (torch.tanh(self.upsample(block1 + block2)) + 1) / 2


def train_and_validate(train_loader, val_loader, num_epochs=1, upscale_factor=2):
    netG = Generator(upscale_factor)
    optimizerG = optim.Adam(netG.parameters())
    mse = nn.MSELoss()
    results = {'g_loss': [], 'psnr': []}
    val_images = []

    for epoch in range(1, num_epochs + 1):
        netG.train()
        running_g_loss = 0.0
        for data, target in train_loader:
            real_img = Variable(target)
            z = Variable(data)
            netG.zero_grad()
            fake_img = netG(z)
            g_loss = mse(fake_img, real_img)
            g_loss.backward()
            optimizerG.step()
            running_g_loss += g_loss.item()

        netG.eval()
        valing_results = {'mse': 0, 'psnr': 0, 'batch_sizes': 0}
        for val_lr, val_hr in val_loader:
            batch_size = val_lr.size(0)
            valing_results['batch_sizes'] += batch_size
            with torch.no_grad():
                lr = Variable(val_lr)
                hr = Variable(val_hr)
            sr = netG(lr)
            batch_mse = ((sr - hr) ** 2).data.mean()
            valing_results['mse'] += batch_mse * batch_size
            valing_results['psnr'] = 10 * log10(1 / (valing_results['mse'] / valing_results['batch_sizes']))
            val_images.extend([hr.data.cpu().squeeze(0), sr.data.cpu().squeeze(0)])

        results['g_loss'].append(running_g_loss / len(train_loader))
        results['psnr'].append(valing_results['psnr'])
    return netG, results, val_images


if __name__ == "__main__":
    torch.manual_seed(0)
    train_loader = [(torch.rand(2, 3, 8, 8), torch.rand(2, 3, 16, 16)) for _ in range(2)]
    val_loader = [(torch.rand(1, 3, 8, 8), torch.rand(1, 3, 16, 16)) for _ in range(3)]
    eval_outputs = []

    def record(module, inputs, output):
        if isinstance(module, Generator) and not module.training:
            eval_outputs.append(output)

    torch.nn.modules.module.register_module_forward_hook(record)
    netG, results, val_images = train_and_validate(train_loader, val_loader)
    assert len(eval_outputs) == 3 and all(sr.grad_fn is not None for sr in eval_outputs)
    grads = torch.autograd.grad(eval_outputs[0].sum(), netG.block1[0].weight)
    assert grads[0].abs().sum() > 0
    print("evidence holds: %d validation SR images (netG in eval mode) carry grad_fns back to netG's weights"
          % len(eval_outputs))
