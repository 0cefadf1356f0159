# source: https://github.com/OmidPoursaeed/Generative_Adversarial_Perturbations/issues/4
# category: DL101
# expect: flag 34, 35, 39, 47, 68
# evidence: the generator's gradients differ from those of the same forward computed with tracked ops: the .data edits rescale the Tanh output behind autograd's back
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

mean_arr = [0.485, 0.456, 0.406]
stddev_arr = [0.229, 0.224, 0.225]
mag_in = 10.0
batch_size = 2


class ResnetGenerator(nn.Module):
    """Tiny stand-in for the perturbation generator: ends with Tanh like the original."""

    def __init__(self, input_nc=3, output_nc=3, ngf=4):
        super(ResnetGenerator, self).__init__()
        self.model = nn.Sequential(
            nn.Conv2d(input_nc, ngf, kernel_size=3, padding=1),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.Conv2d(ngf, output_nc, kernel_size=3, padding=1),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.model(input)


def normalize_and_scale(delta_im, mode='train'):
    delta_im.data += 1  # now 0..2
    delta_im.data *= 0.5  # now 0..1

    # normalize image color channels
    for c in range(3):
        delta_im.data[:, c, :, :] = (delta_im.data[:, c, :, :] - mean_arr[c]) / stddev_arr[c]

    # threshold each channel of each image in deltaIm according to inf norm
    bs = batch_size
    for i in range(bs):
        for ci in range(3):
            l_inf_channel = delta_im[i, ci, :, :].detach().abs().max()
            mag_in_scaled_c = mag_in / (255.0 * stddev_arr[ci])
            delta_im[i, ci, :, :].data *= np.minimum(1.0, mag_in_scaled_c / l_inf_channel.item())

    return delta_im


def train(netG, pretrained_clf, optimizerG, criterion_pre, training_data_loader):
    netG.train()
    for itr, (image, _) in enumerate(training_data_loader, 1):
        # least likely class in nontargeted case
        pretrained_label_float = pretrained_clf(image)
        _, target_label = torch.min(pretrained_label_float, 1)

        delta_im = netG(image)
        delta_im = normalize_and_scale(delta_im, 'train')

        netG.zero_grad()

        recons = torch.add(image, delta_im)

        # do clamping per channel
        for cii in range(3):
            recons.data[:, cii, :, :] = recons.data[:, cii, :, :].clamp(image.data[:, cii, :, :].min(), image.data[:, cii, :, :].max())

        output_pretrained = pretrained_clf(recons)
        loss = torch.log(criterion_pre(output_pretrained, target_label))
        loss.backward()
        optimizerG.step()
    return recons


def make_classifier():
    clf = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 5))
    for p in clf.parameters():
        p.requires_grad_(False)
    return clf.eval()


def tracked_reference_grads(netG, clf, image):
    """The same forward written with differentiable ops only."""
    out = netG(image)
    delta = (out + 1) * 0.5
    chans = []
    for c in range(3):
        chans.append((delta[:, c] - mean_arr[c]) / stddev_arr[c])
    delta = torch.stack(chans, dim=1)
    scales = torch.ones(batch_size, 3, 1, 1)
    for i in range(batch_size):
        for ci in range(3):
            l_inf = delta[i, ci].abs().max().item()
            scales[i, ci] = min(1.0, mag_in / (255.0 * stddev_arr[ci]) / l_inf)
    recons = image + delta * scales
    lo = image.amin(dim=(0, 2, 3)).view(1, 3, 1, 1)
    hi = image.amax(dim=(0, 2, 3)).view(1, 3, 1, 1)
    recons = torch.maximum(torch.minimum(recons, hi), lo)
    target = torch.min(clf(image), 1)[1]
    loss = torch.log(nn.CrossEntropyLoss()(clf(recons), target))
    grads = torch.autograd.grad(loss, list(netG.parameters()))
    return recons, grads


if __name__ == "__main__":
    torch.manual_seed(0)
    netG = ResnetGenerator()
    clf = make_classifier()
    image = torch.randn(batch_size, 3, 8, 8)
    loader = [(image, None)]

    ref_recons, ref_grads = tracked_reference_grads(netG, clf, image)

    optimizerG = optim.SGD(netG.parameters(), lr=0.0)
    recons = train(netG, clf, optimizerG, nn.CrossEntropyLoss(), loader)
    bug_grads = [p.grad for p in netG.parameters()]

    assert torch.allclose(recons, ref_recons, atol=1e-5), "both versions compute the same perturbed image"
    first_conv_diff = (bug_grads[0] - ref_grads[0]).abs().max().item()
    assert first_conv_diff > 1e-3 * ref_grads[0].abs().max().item(), first_conv_diff
    assert not all(torch.allclose(b, r, rtol=1e-3, atol=1e-6) for b, r in zip(bug_grads, ref_grads))
    print("evidence holds: same perturbed image, but netG's gradients differ from the tracked computation (max diff %.3g)" % first_conv_diff)
